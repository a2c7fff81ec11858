//! `dot` on tensor cores: `mma.sync.m16n8k16` with f16/bf16 operands and an
//! f32 accumulator in the [`Mma`] layout (sm_80+).
//!
//! `a` and `b` are staged row-major in shared memory by their owners (as on
//! the FFMA path), then each warp, for each K step of 16, loads its operand
//! fragments with `ldmatrix` and issues one `mma.sync` per 16x8 piece of its
//! share of the accumulator:
//!
//! - `A` (`[M, K]`, K contiguous): `ldmatrix.x4` of the four 8x8 matrices
//!   (rows 0-7 / 8-15, k 0-7 / 8-15) of a 16x16 block; lane `L` gives the
//!   address of row `L % 8 + 8 * (L / 8 % 2)`, column `8 * (L / 16)`. The
//!   four registers are `A`'s fragment in PTX's order.
//! - `B` (`[K, N]`, N contiguous): `ldmatrix.x2.trans` of the two 8x8
//!   matrices k 0-7 / 8-15 of an 8-column block; lane `L` gives row `L % 16`.
//!   Transposing gives each lane the pair `(k = 2t, 2t + 1)` at `n = g`,
//!   `B`'s fragment.
//!
//! Each row start is 16-byte aligned because K and N are multiples of 16 and
//! 8 two-byte elements and the scratch buffer is 16-byte aligned. The
//! accumulator's four registers of a piece are packed into a `vec<f32, 4>`
//! for the instruction and unpacked after (LLVM keeps them in registers).
//!
//! Two cases skip staging `a` (FlashAttention-2's register reuse):
//!
//! - `a` in registers ([`a_in_registers`]): an `a` whose layout is an `Mma`
//!   accumulator layout with the warps of the `dot`'s own (all along M) holds
//!   in each thread exactly the elements of its `A` fragments: row `g`,
//!   `g + 8` and columns `2t, 2t + 1` of each 8-column piece. The fragment of
//!   K step `kk` packs the pairs of pieces `kk / 8` and `kk / 8 + 1` into four
//!   `u32` (attention's `P`, the softmax of the previous `dot`'s result, cast
//!   to 16 bits).
//! - `a` loop-invariant ([`hoisted`]): a `dot` in a loop whose `a` is defined
//!   before the loop (attention's `Q`) has its `A` fragments loaded once,
//!   before the loop (staged, `ldmatrix`), and kept in registers, where they
//!   take at most 32 registers per thread.

use super::convert::{align16, k_major, staged_bytes, MMA_PAD};
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Op, TileId, TileProgram, Value};
use crate::layout::{Layout, Mma};
use std::collections::HashSet;
use zyntax_hir::{MmaElem, ScalarType, Type, ValueId, WarpShape};

/// Most registers per thread the hoisted `A` fragments of one `dot` may take.
const HOISTED_A_REGS: u32 = 32;

/// Whether `out = a @ b` on `mma.sync` takes its `A` fragments from `a`'s
/// registers: `a` is in the `mma.sync` accumulator layout with the `dot`'s
/// own warps, all along M (see the module comment).
pub(super) fn a_in_registers(layouts: &Layouts, a: TileId, out: TileId) -> bool {
    match (layouts.get(a), layouts.get(out)) {
        (Some(Layout::Mma(la)), Some(Layout::Mma(lo))) => {
            // (version 3, wgmma's, holds a warp's rows as version 2 does)
            la.version >= 2 && la == lo && lo.warps_per_cta[1] == 1
        }
        _ => false,
    }
}

/// The `dot`s of a loop `body` (not of loops inside it) whose `a` is defined
/// before the loop and whose `A` fragments are loaded once before it (on
/// wgmma: `a` is staged once, `dot_wgmma.rs`): `(result, a)`.
pub(super) fn hoisted(
    program: &TileProgram,
    layouts: &Layouts,
    body: &[Op],
) -> Vec<(TileId, TileId)> {
    let mut inside = HashSet::new();
    defined(body, &mut inside);
    body.iter()
        .filter_map(|op| match op {
            Op::Dot { out, a, .. } => Some((*out, *a)),
            _ => None,
        })
        .filter(|&(out, a)| {
            let Some(Layout::Mma(mma)) = layouts.get(out) else {
                return false;
            };
            let (m, k) = (program.tile(a).shape[0], program.tile(a).shape[1]);
            let n = program.tile(out).shape[1];
            let pieces_m = Layout::Mma(mma.clone()).regs_per_dim(&[m, n])[0] / 2;
            mma.version >= 2
                && !inside.contains(&a)
                && !a_in_registers(layouts, a, out)
                && pieces_m * (k / 16) * 4 <= HOISTED_A_REGS
        })
        .collect()
}

/// The tiles `ops` define (loops included).
pub(super) fn defined(ops: &[Op], out: &mut HashSet<TileId>) {
    for op in ops {
        match op {
            Op::Full { out: t, .. }
            | Op::Iota { out: t, .. }
            | Op::Load { out: t, .. }
            | Op::Map { out: t, .. }
            | Op::Broadcast { out: t, .. }
            | Op::Cast { out: t, .. }
            | Op::Reduce { out: t, .. }
            | Op::Dot { out: t, .. }
            | Op::ConvertLayout { out: t, .. } => {
                out.insert(*t);
            }
            Op::For {
                args,
                results,
                body,
                ..
            } => {
                for v in args.iter().chain(results) {
                    if let Value::Tile(t) = v {
                        out.insert(*t);
                    }
                }
                defined(body, out);
            }
            _ => {}
        }
    }
}

/// Whether any `dot` of `ops` (or of loops inside them) runs on `mma.sync`.
pub(super) fn uses_mma(ops: &[Op], layouts: &Layouts) -> bool {
    ops.iter().any(|op| match op {
        Op::Dot { out, .. } => matches!(layouts.get(*out), Some(Layout::Mma(_))),
        Op::For { body, .. } => uses_mma(body, layouts),
        _ => false,
    })
}

impl Lowerer<'_> {
    pub(super) fn dot_mma(
        &mut self,
        out: TileId,
        a: TileId,
        b: TileId,
        acc: TileId,
        mma: &Mma,
    ) -> TileResult<()> {
        let (ta, tb) = (self.program.tile(a).clone(), self.program.tile(b).clone());
        let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let elem = if ta.elem == Type::BF16 {
            MmaElem::Bf16
        } else {
            MmaElem::F16
        };
        let template = *self
            .vector_zeros
            .get(&Type::Vector(ScalarType::F32, 4))
            .ok_or_else(|| TileError::Internal("no vec<f32, 4> for mma.sync".into()))?;
        // Rows are padded (MMA_PAD) so ldmatrix reads are conflict-free.
        let b_layout = self.layout(b)?;
        let b_kmajor = k_major(&b_layout, &tb.shape);
        let a_pitch = k + MMA_PAD;
        let b_pitch = if b_kmajor { k } else { n } + MMA_PAD;
        // `a` from registers, or its fragments loaded before the loop, or
        // staged here (see the module comment).
        let hoisted = self.hoisted_a.get(&out).cloned();
        let from_regs = a_in_registers(self.layouts, a, out);
        let stage_a = hoisted.is_none() && !from_regs;
        let b_offset = if stage_a {
            align16(u64::from(m) * u64::from(a_pitch) * staged_bytes(&ta.elem))
        } else {
            0
        };
        let pa = self.scratch_ptr(&ta.elem, 0)?;
        let pb = self.scratch_ptr(&tb.elem, b_offset)?;
        if stage_a {
            self.stage_as(a, pa, false, MMA_PAD)?;
        }
        self.stage_as(b, pb, b_kmajor, MMA_PAD)?;
        self.b.barrier()?;

        let layout = Layout::Mma(mma.clone());
        let shape = [m, n];
        let per_dim = layout.regs_per_dim(&shape);
        let (pieces_m, pieces_n) = (per_dim[0] / 2, per_dim[1] / 2);
        let [_, wn] = mma.warps_per_cta;
        let cols = layout.dim_map(1);
        let warp_n = self.warp_term(cols.warp_stride, wn, cols.warp_step)?;
        let (c8, c16, c2) = (self.u32(8)?, self.u32(16)?, self.u32(2)?);
        let k_row = self.b.rem(self.lane, c16)?;
        let kmajor_row = self.b.rem(self.lane, c8)?;
        let kmajor_k = {
            let h = self.b.div(self.lane, c8)?;
            let h = self.b.rem(h, c2)?;
            self.b.mul(h, c8)?
        };
        let n_v = self.u32(n)?;
        let b_pitch_v = self.u32(b_pitch)?;
        // Row offsets (row · K) of this lane's A rows, one per piece along M.
        let a_rows = if stage_a {
            self.a_rows(mma, m, n, a_pitch)?
        } else {
            Vec::new()
        };
        let u32x4 = if from_regs {
            Some(
                *self
                    .vector_zeros
                    .get(&Type::Vector(ScalarType::U32, 4))
                    .ok_or_else(|| TileError::Internal("no vec<u32, 4> for mma.sync".into()))?,
            )
        } else {
            None
        };
        let mut b_cols = Vec::new();
        for pn in 0..pieces_n {
            let first = self.u32(pn * cols.coverage)?;
            let col = self.b.add(warp_n, first)?;
            b_cols.push(self.b.rem(col, n_v)?);
        }
        // Pieces pn, pn + 1 (pn even) load as one ldmatrix.x4: lanes 16-31
        // address the matrices of piece pn + 1, one coverage further along N.
        let b_pairs = {
            let q = self.b.div(self.lane, c16)?;
            let cov = self.u32(cols.coverage)?;
            let hi_off = self.b.mul(q, cov)?;
            let mut pairs = Vec::new();
            for pn in (0..pieces_n.saturating_sub(1)).step_by(2) {
                let first = self.u32(pn * cols.coverage)?;
                let col = self.b.add(warp_n, first)?;
                let col = self.b.add(col, hi_off)?;
                pairs.push(self.b.rem(col, n_v)?);
            }
            pairs
        };
        let u32x2 = *self
            .vector_zeros
            .get(&Type::Vector(ScalarType::U32, 2))
            .ok_or_else(|| TileError::Internal("no vec<u32, 2> for mma.sync".into()))?;

        let mut regs = self.regs(acc)?;
        for kk in (0..k).step_by(16) {
            let kk_v = self.u32(kk)?;
            let mut a_frags = Vec::new();
            if let Some(h) = &hoisted {
                a_frags.extend(h.iter().map(|per_k| per_k[(kk / 16) as usize]));
            } else if let Some(zero) = u32x4 {
                for pm in 0..pieces_m {
                    a_frags.push(self.a_fragment_from_regs(a, pm, kk, zero)?);
                }
            }
            for &row in &a_rows {
                let at = self.b.add(row, kk_v)?;
                let p = self.b.ptr_add(pa, at)?;
                a_frags.push(self.b.ldmatrix(4, false, p)?);
            }
            // B staged [N, K] (K-major): ldmatrix without .trans of the 8x8
            // blocks k 0-7 / 8-15 at rows n..n+8; lane L addresses row
            // L % 8 and k 8 * (L / 8 % 2), and gets (n = g, k = 2t, 2t + 1):
            // B's fragment. Staged [K, N]: .trans, lane L addresses row
            // k = L % 16. Two pieces per x4 (b_pairs), an odd last one x2.
            let k_at = if b_kmajor {
                self.b.add(kmajor_k, kk_v)?
            } else {
                let k_at = self.b.add(k_row, kk_v)?;
                self.b.mul(k_at, b_pitch_v)?
            };
            let mut b_frags = Vec::new();
            for pn in 0..pieces_n {
                let pair = pn % 2 == 0 && pn + 1 < pieces_n;
                if pn % 2 == 1 {
                    continue; // loaded with pn - 1
                }
                let col = if pair {
                    b_pairs[(pn / 2) as usize]
                } else {
                    b_cols[pn as usize]
                };
                let at = if b_kmajor {
                    let row = self.b.add(col, kmajor_row)?;
                    let row = self.b.mul(row, b_pitch_v)?;
                    self.b.add(row, k_at)?
                } else {
                    self.b.add(k_at, col)?
                };
                let p = self.b.ptr_add(pb, at)?;
                if pair {
                    let x4 = self.b.ldmatrix(4, !b_kmajor, p)?;
                    for half in 0..2 {
                        let mut frag = u32x2;
                        for i in 0..2 {
                            let r = self.b.extract(x4, 2 * half + i)?;
                            frag = self.b.insert(frag, r, i)?;
                        }
                        b_frags.push(frag);
                    }
                } else {
                    b_frags.push(self.b.ldmatrix(2, !b_kmajor, p)?);
                }
            }
            for pm in 0..pieces_m {
                for pn in 0..pieces_n {
                    // Element i of the fragment: row 8 * (i / 2), column i % 2.
                    let at: Vec<usize> = (0..4)
                        .map(|i| {
                            let dims = [pm * 2 + i / 2, pn * 2 + i % 2];
                            layout.reg_index(&shape, &dims) as usize
                        })
                        .collect();
                    let mut c = template;
                    for (i, &r) in at.iter().enumerate() {
                        c = self.b.insert(c, regs[r], i as u32)?;
                    }
                    let d = self.b.mma_sync(
                        WarpShape::M16n8k16,
                        elem,
                        a_frags[pm as usize],
                        b_frags[pn as usize],
                        c,
                    )?;
                    for (i, &r) in at.iter().enumerate() {
                        regs[r] = self.b.extract(d, i as u32)?;
                    }
                }
            }
        }
        self.b.barrier()?;
        self.set_tile(out, regs);
        Ok(())
    }

    /// The offsets (row · pitch + column) at which this lane addresses its
    /// `ldmatrix.x4` of `A` for each 16-row piece of the warp's share of the
    /// `[m, n]` accumulator in `mma`: row `L % 8 + 8 * (L / 8 % 2)` and
    /// column `8 * (L / 16)` of the 16x16 block; rows wrap when warps
    /// replicate.
    fn a_rows(&mut self, mma: &Mma, m: u32, n: u32, pitch: u32) -> TileResult<Vec<ValueId>> {
        let layout = Layout::Mma(mma.clone());
        let pieces_m = layout.regs_per_dim(&[m, n])[0] / 2;
        let rows = layout.dim_map(0);
        let warp_m = self.warp_term(rows.warp_stride, mma.warps_per_cta[0], rows.warp_step)?;
        let (c8, c16, c2) = (self.u32(8)?, self.u32(16)?, self.u32(2)?);
        let lane_row = {
            let r = self.b.rem(self.lane, c8)?;
            let half = self.b.div(self.lane, c8)?;
            let half = self.b.rem(half, c2)?;
            let half = self.b.mul(half, c8)?;
            self.b.add(r, half)?
        };
        let lane_col = {
            let q = self.b.div(self.lane, c16)?;
            self.b.mul(q, c8)?
        };
        let (m_v, pitch_v) = (self.u32(m)?, self.u32(pitch)?);
        let mut out = Vec::new();
        for pm in 0..pieces_m {
            let first = self.u32(pm * rows.coverage)?;
            let row = self.b.add(warp_m, first)?;
            let row = self.b.add(row, lane_row)?;
            let row = self.b.rem(row, m_v)?;
            let row = self.b.mul(row, pitch_v)?;
            out.push(self.b.add(row, lane_col)?);
        }
        Ok(out)
    }

    /// Loads the `A` fragments of the `dot` `out = a @ _` (one of
    /// [`hoisted`]) before its loop: `a` staged, one `ldmatrix.x4` per piece
    /// along M and K step, kept for [`Self::dot_mma`] in `hoisted_a`.
    pub(super) fn hoist_a(&mut self, out: TileId, a: TileId) -> TileResult<()> {
        let Layout::Mma(mma) = self.layout(out)? else {
            return Err(TileError::Internal("a hoisted dot not on mma.sync".into()));
        };
        let ta = self.program.tile(a).clone();
        let (m, k, n) = (ta.shape[0], ta.shape[1], self.program.tile(out).shape[1]);
        let pa = self.scratch_ptr(&ta.elem, 0)?;
        self.stage_as(a, pa, false, MMA_PAD)?;
        self.b.barrier()?;
        let mut frags = Vec::new();
        for row in self.a_rows(&mma, m, n, k + MMA_PAD)? {
            let mut per_k = Vec::new();
            for kk in (0..k).step_by(16) {
                let kk_v = self.u32(kk)?;
                let at = self.b.add(row, kk_v)?;
                let p = self.b.ptr_add(pa, at)?;
                per_k.push(self.b.ldmatrix(4, false, p)?);
            }
            frags.push(per_k);
        }
        self.b.barrier()?;
        self.hoisted_a.insert(out, frags);
        Ok(())
    }

    /// The `A` fragment of piece `pm` along M and K step `kk` from the
    /// registers of `a` (see [`a_in_registers`]): rows `g`, `g + 8` (register
    /// `2 pm`, `2 pm + 1` along M), column pairs `2t, 2t + 1` of the pieces
    /// `kk / 8` and `kk / 8 + 1` (registers `kk / 4 ..+ 4` along K), each
    /// pair one `u32` with the lower column in the low half, in PTX's order
    /// `(g, kk), (g + 8, kk), (g, kk + 8), (g + 8, kk + 8)`.
    pub(super) fn a_fragment_from_regs(
        &mut self,
        a: TileId,
        pm: u32,
        kk: u32,
        zero: ValueId,
    ) -> TileResult<ValueId> {
        let layout = self.layout(a)?;
        let shape = self.program.tile(a).shape.clone();
        let regs = self.regs(a)?;
        let reg =
            |row: u32, col: u32| regs[layout.reg_index(&shape, &[2 * pm + row, col]) as usize];
        // Each pair is a two-lane vector of the 16-bit registers seen as a
        // `u32` (`mov.b32 %r, {%h0, %h1}`; LLVM may fuse it with the casts
        // that made them into one `cvt.rn.bf16x2.f32`), not two widenings, a
        // shift and an or.
        let elem = self.program.tile(a).elem.clone();
        let pair_zero = match elem.as_scalar() {
            Some(e) => self.vector_zeros.get(&Type::Vector(e, 2)).copied(),
            None => None,
        };
        let c16 = self.u32(16)?;
        let mut frag = zero;
        for (i, (row, col)) in [(0, 0), (1, 0), (0, 2), (1, 2)].into_iter().enumerate() {
            let col = kk / 4 + col;
            let (lo, hi) = (reg(row, col), reg(row, col + 1));
            let pair = match pair_zero {
                Some(z) => {
                    let two = self.b.insert(z, lo, 0)?;
                    let two = self.b.insert(two, hi, 1)?;
                    self.b.bitcast(two, Type::U32)?
                }
                None => {
                    let mut halves = Vec::new();
                    for x in [lo, hi] {
                        let bits = self.b.bitcast(x, Type::U16)?;
                        halves.push(self.b.cast(bits, Type::U32)?);
                    }
                    let hi = self.b.shl(halves[1], c16)?;
                    self.b.or(halves[0], hi)?
                }
            };
            frag = self.b.insert(frag, pair, i as u32)?;
        }
        Ok(frag)
    }

    /// `(warp / stride % warps) * step`, the warp's part of a coordinate.
    fn warp_term(&mut self, stride: u32, warps: u32, step: u32) -> TileResult<ValueId> {
        let (stride, warps_v, step) = (self.u32(stride)?, self.u32(warps)?, self.u32(step)?);
        let w = self.b.div(self.warp, stride)?;
        let w = self.b.rem(w, warps_v)?;
        Ok(self.b.mul(w, step)?)
    }
}
