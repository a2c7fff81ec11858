//! The tensor-core layouts of `mma.sync.m16n8k16` (sm_80+), and [`Layout`],
//! the one type every tile's layout is.
//!
//! PTX fixes which lane holds which element of an instruction's fragments
//! (`g = lane / 4`, `t = lane % 4`):
//!
//! - the accumulator `C`/`D` (16x8 f32): rows `g` and `g + 8`, columns
//!   `2t` and `2t + 1`;
//! - `A` (16x16): rows `g` and `g + 8`, columns `2t, 2t + 1, 2t + 8, 2t + 9`;
//! - `B` (16x8, `[k, n]`): rows `2t, 2t + 1, 2t + 8, 2t + 9`, column `g`.
//!
//! A tile larger than one instruction is covered by warps side by side
//! (`warps_per_cta`), then repeated per warp (more registers). Each dim is a
//! [`DimMap`] like a blocked layout's, with runs of two elements 8 apart
//! (accumulator and A rows) or adjacent (columns, B rows), so ownership and
//! the lowering's coordinate tables work for all layouts alike.

use super::{Blocked, DimMap, WARP};

/// The accumulator layout of `mma.sync` (Triton's `NvidiaMma` v2): `warps_per_cta
/// [wm, wn]` warps tile a `[M, N]` tile with `instr_shape [16, 8]` instructions,
/// warp `w` at `(w % wm, w / wm)`. Warps beyond what the tile needs replicate
/// along M (their rows wrap around and they own nothing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mma {
    /// 2: `mma.sync` (sm_80). wgmma (3) is not built yet.
    pub version: u32,
    pub warps_per_cta: [u32; 2],
    /// M and N of one instruction (16, 8).
    pub instr_shape: [u32; 2],
}

/// Which operand of a `dot` a [`DotOperand`] fragment is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// `a: [M, K]`.
    A,
    /// `b: [K, N]`.
    B,
}

/// The register fragments of one `dot` operand for the accumulator layout
/// `parent` (K steps of 16). `A` is held by the warps along M and replicated
/// across the warps along N (and `B` the other way); the copy held by
/// warp column (row) 0 is the owner.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DotOperand {
    pub parent: Mma,
    pub operand: Operand,
}

/// M rows of an instruction, as the accumulator and `A` hold them: lanes
/// `g = lane / 4` give the row, a run of 2 rows 8 apart, warps 16 rows apart.
fn rows_of_16(wm: u32) -> DimMap {
    DimMap {
        lane_stride: 4,
        lanes: 8,
        lane_step: 1,
        warp_stride: 1,
        warp_step: 16,
        warps: wm,
        run: 2,
        run_step: 8,
        coverage: 16 * wm,
    }
}

/// Columns of `n` elements per warp, lanes `t = lane % 4` holding 2 adjacent
/// ones: the accumulator's N (8 per instruction) and A's or B's K (a K step of
/// 16 is two runs 8 apart, so the coverage is 8 without warps).
fn pairs(warp_stride: u32, warps: u32) -> DimMap {
    DimMap {
        lane_stride: 1,
        lanes: 4,
        lane_step: 2,
        warp_stride,
        warp_step: 8,
        warps,
        run: 2,
        run_step: 1,
        coverage: 8 * warps,
    }
}

impl Mma {
    /// The `mma.sync` layout of an `[m, n]` accumulator over `warps` warps:
    /// warps split M and N so that each warp's share stays square-ish (fewer
    /// operand fragments to load), and any left over replicate along M.
    pub fn for_tile(m: u32, n: u32, warps: u32) -> Mma {
        let (mut wm, mut wn) = (1, 1);
        while wm * wn < warps {
            let (per_m, per_n) = (m / (16 * wm), n / (8 * wn));
            if per_n > 1 && (per_n >= 2 * per_m || per_m <= 1) {
                wn *= 2;
            } else {
                wm *= 2;
            }
        }
        Mma {
            version: 2,
            warps_per_cta: [wm, wn],
            instr_shape: [16, 8],
        }
    }
    pub fn dim_map(&self, d: usize) -> DimMap {
        let [wm, wn] = self.warps_per_cta;
        if d == 0 {
            rows_of_16(wm)
        } else {
            pairs(wm, wn)
        }
    }
}

impl DotOperand {
    pub fn dim_map(&self, d: usize) -> DimMap {
        let [wm, wn] = self.parent.warps_per_cta;
        match (self.operand, d) {
            (Operand::A, 0) => rows_of_16(wm),
            (Operand::A, _) | (Operand::B, 0) => pairs(1, 1),
            (Operand::B, _) => DimMap {
                lane_stride: 4,
                lanes: 8,
                lane_step: 1,
                warp_stride: wm,
                warp_step: 8,
                warps: wn,
                run: 1,
                run_step: 1,
                coverage: 8 * wn,
            },
        }
    }
    /// Whether `warp` holds the owning copy: A is replicated across the warps
    /// along N, B across the warps along M.
    fn owning_warp(&self, warp: u32) -> bool {
        let [wm, wn] = self.parent.warps_per_cta;
        let (warp_m, warp_n) = (warp % wm, warp / wm % wn);
        match self.operand {
            Operand::A => warp_n == 0,
            Operand::B => warp_m == 0,
        }
    }
}

/// The layout of a tile: which thread holds which element in which register.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    Blocked(Blocked),
    Mma(Mma),
    DotOperand(DotOperand),
}

impl From<Blocked> for Layout {
    fn from(b: Blocked) -> Layout {
        Layout::Blocked(b)
    }
}

impl Layout {
    pub fn rank(&self) -> usize {
        match self {
            Layout::Blocked(b) => b.rank(),
            Layout::Mma(_) | Layout::DotOperand(_) => 2,
        }
    }
    pub fn as_blocked(&self) -> Option<&Blocked> {
        match self {
            Layout::Blocked(b) => Some(b),
            _ => None,
        }
    }
    pub fn dim_map(&self, d: usize) -> DimMap {
        match self {
            Layout::Blocked(b) => b.dim_map(d),
            Layout::Mma(m) => m.dim_map(d),
            Layout::DotOperand(o) => o.dim_map(d),
        }
    }
    /// Dims from fastest- to slowest-varying register index: fragment pairs
    /// (adjacent columns of C and A, adjacent rows of B) are consecutive
    /// registers, as `mma.sync` packs them.
    pub fn order(&self) -> Vec<usize> {
        match self {
            Layout::Blocked(b) => b.order.clone(),
            Layout::Mma(_)
            | Layout::DotOperand(DotOperand {
                operand: Operand::A,
                ..
            }) => vec![1, 0],
            Layout::DotOperand(_) => vec![0, 1],
        }
    }
    pub fn regs_per_dim(&self, shape: &[u32]) -> Vec<u32> {
        (0..self.rank())
            .map(|d| self.dim_map(d).regs(shape[d]))
            .collect()
    }
    pub fn num_regs(&self, shape: &[u32]) -> u32 {
        self.regs_per_dim(shape).iter().product()
    }
    /// The per-dim register indices of register `reg` (numbered along `order`).
    pub fn reg_dims(&self, shape: &[u32], reg: u32) -> Vec<u32> {
        let per_dim = self.regs_per_dim(shape);
        let mut dims = vec![0; self.rank()];
        let mut rest = reg;
        for d in self.order() {
            dims[d] = rest % per_dim[d];
            rest /= per_dim[d];
        }
        dims
    }
    /// The register with per-dim indices `dims` (inverse of [`Self::reg_dims`]).
    pub fn reg_index(&self, shape: &[u32], dims: &[u32]) -> u32 {
        let per_dim = self.regs_per_dim(shape);
        let mut reg = 0;
        for d in self.order().into_iter().rev() {
            reg = reg * per_dim[d] + dims[d];
        }
        reg
    }
    /// The coordinates held by `thread` in register `reg` of a tile of
    /// `shape`, and whether this copy is the owner (coordinates wrap modulo
    /// the shape). For a blocked layout this equals [`Blocked::coords`].
    pub fn coords(&self, shape: &[u32], thread: u32, reg: u32) -> (Vec<u32>, bool) {
        let (lane, warp) = (thread % WARP, thread / WARP);
        let dims = self.reg_dims(shape, reg);
        let mut owned = match self {
            Layout::DotOperand(o) => o.owning_warp(warp),
            _ => true,
        };
        let coords = (0..self.rank())
            .map(|d| {
                let map = self.dim_map(d);
                let raw = map.base(lane, warp) + map.offset(shape[d], dims[d]);
                owned &= raw < shape[d];
                raw % shape[d]
            })
            .collect();
        (coords, owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use zyntax_hir::WarpShape;
    use zyntax_interp::warp_mma::{self, Operand as PtxOperand};

    /// Every coordinate has exactly one owner among `warps` warps.
    fn check_ownership(layout: &Layout, shape: &[u32], warps: u32) {
        let mut owners = vec![0u32; (shape[0] * shape[1]) as usize];
        for t in 0..warps * WARP {
            for r in 0..layout.num_regs(shape) {
                let (c, owned) = layout.coords(shape, t, r);
                assert!(c[0] < shape[0] && c[1] < shape[1]);
                if owned {
                    owners[(c[0] * shape[1] + c[1]) as usize] += 1;
                }
            }
        }
        assert!(
            owners.iter().all(|&n| n == 1),
            "{layout:?} {shape:?}: owners {owners:?}"
        );
    }

    #[test]
    fn mma_layouts_own_every_element_once() {
        for warps in [1, 2, 4, 8] {
            for (m, n, k) in [
                (16, 8, 16),
                (16, 16, 16),
                (64, 64, 32),
                (128, 128, 64),
                (32, 256, 16),
            ] {
                let mma = Mma::for_tile(m, n, warps);
                assert_eq!(mma.warps_per_cta[0] * mma.warps_per_cta[1], warps);
                check_ownership(&Layout::Mma(mma.clone()), &[m, n], warps);
                for (operand, shape) in [(Operand::A, [m, k]), (Operand::B, [k, n])] {
                    let o = DotOperand {
                        parent: mma.clone(),
                        operand,
                    };
                    check_ownership(&Layout::DotOperand(o), &shape, warps);
                }
            }
        }
    }

    #[test]
    fn mma_warp_split_is_square_ish() {
        assert_eq!(Mma::for_tile(64, 64, 4).warps_per_cta, [2, 2]);
        assert_eq!(Mma::for_tile(128, 128, 8).warps_per_cta, [2, 4]);
        assert_eq!(Mma::for_tile(16, 16, 8).warps_per_cta, [4, 2]);
    }

    /// One warp on one instruction: each lane holds exactly the elements PTX
    /// (as the interpreter implements it) gives it in each fragment.
    #[test]
    fn one_instruction_matches_ptx_fragments() {
        let mma = Mma::for_tile(16, 8, 1);
        let cases = [
            (Layout::Mma(mma.clone()), [16, 8], PtxOperand::C),
            (
                Layout::DotOperand(DotOperand {
                    parent: mma.clone(),
                    operand: Operand::A,
                }),
                [16, 16],
                PtxOperand::A,
            ),
            (
                Layout::DotOperand(DotOperand {
                    parent: mma,
                    operand: Operand::B,
                }),
                [16, 8],
                PtxOperand::B,
            ),
        ];
        for (layout, shape, ptx) in cases {
            let n = warp_mma::count(WarpShape::M16n8k16, ptx);
            assert_eq!(layout.num_regs(&shape), n);
            for lane in 0..WARP {
                let ours: BTreeSet<_> = (0..n)
                    .map(|r| {
                        let (c, owned) = layout.coords(&shape, lane, r);
                        assert!(owned);
                        (c[0], c[1])
                    })
                    .collect();
                let theirs: BTreeSet<_> = (0..n)
                    .map(|i| warp_mma::position(WarpShape::M16n8k16, ptx, lane, i))
                    .collect();
                assert_eq!(ours, theirs, "{layout:?} lane {lane}");
            }
        }
    }

    #[test]
    fn blocked_through_layout_matches_blocked() {
        let b = Blocked::coalesced(&[32, 64], 4, 2, 1);
        let l = Layout::Blocked(b.clone());
        for shape in [[32, 64], [8, 4], [64, 1]] {
            for t in (0..128).step_by(7) {
                for r in 0..b.num_regs(&shape) {
                    assert_eq!(l.coords(&shape, t, r), b.coords(&shape, t, r));
                }
            }
        }
    }
}
