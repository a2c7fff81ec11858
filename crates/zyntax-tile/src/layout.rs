//! Distributed layouts: which thread holds which element of a tile. The
//! tensor-core layouts and [`Layout`], the type every tile's layout has, are
//! in `layout/mma.rs`; all of them share the per-dim map [`DimMap`].
//!
//! A [`Blocked`] layout (Triton's blocked encoding) is a linear map from
//! (warp, lane, register) to tile coordinates: along each dim a thread holds
//! `size_per_thread` consecutive elements, `threads_per_warp` lanes and
//! `warps_per_cta` warps tile the dim side by side, and the whole pattern
//! (the layout's *coverage*) repeats until the tile is covered. A tile smaller
//! than the coverage along a dim wraps around: several threads (or registers)
//! then hold copies of the same element. Dims of size 1 are the extreme case,
//! every thread holds the one element along them, which is what makes reduce
//! results and broadcasts free. Of the copies, the one whose *raw* coordinate
//! (before wrapping) lies inside the tile is the *owner*; stores, atomics and
//! reductions use only owners, so every element is written or counted once.
//!
//! All sizes are powers of two. [`Blocked::coords`] is the one definition of
//! the map; the HIR lowering evaluates the same formula ([`ThreadDim`] and
//! [`Blocked::reg_offset`]) on the runtime thread index.

use zyntax_hir::Swizzle;

mod mma;
mod wgmma;
pub use mma::{DotOperand, Layout, Mma, Operand};
pub use wgmma::wgmma_reg_dims;

/// Threads per warp.
pub const WARP: u32 = 32;

/// A blocked distributed layout over a tile of some rank.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Blocked {
    pub size_per_thread: Vec<u32>,
    pub threads_per_warp: Vec<u32>,
    pub warps_per_cta: Vec<u32>,
    /// Dims from fastest- to slowest-varying: lanes, warps and registers are
    /// numbered along `order[0]` first.
    pub order: Vec<usize>,
}

/// How one dim of a blocked layout reads the thread index: the thread's
/// position along the dim is `(warp / warp_stride % warps) * lanes + lane /
/// lane_stride % lanes`, and its first element is `position * per_thread`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadDim {
    pub lane_stride: u32,
    pub lanes: u32,
    pub warp_stride: u32,
    pub warps: u32,
    pub per_thread: u32,
}

impl ThreadDim {
    pub fn position(&self, lane: u32, warp: u32) -> u32 {
        (warp / self.warp_stride % self.warps) * self.lanes + lane / self.lane_stride % self.lanes
    }
}

/// How one dim of any distributed layout ([`Blocked`], [`Mma`],
/// [`DotOperand`]) maps a thread and a register index to a coordinate:
///
/// - the thread's base is `(warp / warp_stride % warps) * warp_step +
///   (lane / lane_stride % lanes) * lane_step`;
/// - its `j`-th register along the dim adds `(j / run) * coverage + (j % run)
///   * run_step`: runs of `run` elements `run_step` apart, repeated every
///   `coverage` elements.
///
/// A blocked dim is the case `run_step = 1`, `lane_step = size_per_thread`;
/// the MMA fragments need the other values (e.g. rows `g` and `g + 8` of an
/// `mma.sync` accumulator are one run with `run_step = 8`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct DimMap {
    pub lane_stride: u32,
    pub lanes: u32,
    pub lane_step: u32,
    pub warp_stride: u32,
    pub warps: u32,
    pub warp_step: u32,
    pub run: u32,
    pub run_step: u32,
    pub coverage: u32,
}

impl DimMap {
    /// The thread's first coordinate along the dim (before wrapping).
    pub fn base(&self, lane: u32, warp: u32) -> u32 {
        (warp / self.warp_stride % self.warps) * self.warp_step
            + (lane / self.lane_stride % self.lanes) * self.lane_step
    }
    /// Registers per thread along the dim for a tile `extent` long.
    pub fn regs(&self, extent: u32) -> u32 {
        if extent >= self.coverage {
            self.run * (extent / self.coverage)
        } else {
            self.run.min(extent)
        }
    }
    /// The raw offset of the `j`-th register from the thread's base.
    pub fn offset(&self, extent: u32, j: u32) -> u32 {
        let run = self.run.min(extent);
        (j / run) * self.coverage + (j % run) * self.run_step
    }
}

/// A shared-memory staging layout: row-major along `order` (slowest last),
/// no swizzle yet (the field is there for the MMA lowerings to come).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedLayout {
    pub swizzle: Swizzle,
    pub order: Vec<usize>,
}

impl SharedLayout {
    /// The row-major layout of a tile (last dim fastest).
    pub fn row_major(rank: usize) -> SharedLayout {
        SharedLayout {
            swizzle: Swizzle::None,
            order: (0..rank).rev().collect(),
        }
    }
    /// Element offset of `coords` in a staged tile of `shape`, as
    /// (coefficient, dim) pairs: `offset = Σ coefficient · coords[dim]`.
    pub fn strides(&self, shape: &[u32]) -> Vec<u32> {
        let mut strides = vec![0; shape.len()];
        let mut step = 1;
        for &d in &self.order {
            strides[d] = step;
            step *= shape[d];
        }
        strides
    }
}

impl Blocked {
    /// Dim `d` as a [`DimMap`] (the form every distributed layout shares).
    pub fn dim_map(&self, d: usize) -> DimMap {
        let td = self.thread_dim(d);
        DimMap {
            lane_stride: td.lane_stride,
            lanes: td.lanes,
            lane_step: td.per_thread,
            warp_stride: td.warp_stride,
            warps: td.warps,
            warp_step: td.lanes * td.per_thread,
            run: td.per_thread,
            run_step: 1,
            coverage: self.coverage(d),
        }
    }

    pub fn rank(&self) -> usize {
        self.order.len()
    }

    /// Elements along `d` that one repetition of the layout covers.
    pub fn coverage(&self, d: usize) -> u32 {
        self.size_per_thread[d] * self.threads_per_warp[d] * self.warps_per_cta[d]
    }

    pub fn warps(&self) -> u32 {
        self.warps_per_cta.iter().product()
    }

    /// How dim `d` reads the thread index.
    pub fn thread_dim(&self, d: usize) -> ThreadDim {
        let (mut lane_stride, mut warp_stride) = (1, 1);
        for &o in &self.order {
            if o == d {
                break;
            }
            lane_stride *= self.threads_per_warp[o];
            warp_stride *= self.warps_per_cta[o];
        }
        ThreadDim {
            lane_stride,
            lanes: self.threads_per_warp[d],
            warp_stride,
            warps: self.warps_per_cta[d],
            per_thread: self.size_per_thread[d],
        }
    }

    /// Registers per thread along each dim for a tile of `shape`.
    pub fn regs_per_dim(&self, shape: &[u32]) -> Vec<u32> {
        (0..self.rank())
            .map(|d| {
                let cov = self.coverage(d);
                if shape[d] >= cov {
                    self.size_per_thread[d] * (shape[d] / cov)
                } else {
                    self.size_per_thread[d].min(shape[d])
                }
            })
            .collect()
    }

    /// Registers per thread for a tile of `shape`.
    pub fn num_regs(&self, shape: &[u32]) -> u32 {
        self.regs_per_dim(shape).iter().product()
    }

    /// The per-dim register indices of register `reg` (numbered along `order`).
    pub fn reg_dims(&self, shape: &[u32], reg: u32) -> Vec<u32> {
        let per_dim = self.regs_per_dim(shape);
        let mut dims = vec![0; self.rank()];
        let mut rest = reg;
        for &d in &self.order {
            dims[d] = rest % per_dim[d];
            rest /= per_dim[d];
        }
        dims
    }

    /// The register with per-dim indices `dims` (inverse of [`Self::reg_dims`]).
    pub fn reg_index(&self, shape: &[u32], dims: &[u32]) -> u32 {
        let per_dim = self.regs_per_dim(shape);
        let mut reg = 0;
        for &d in self.order.iter().rev() {
            reg = reg * per_dim[d] + dims[d];
        }
        reg
    }

    /// The raw offset along `d` of the `index`-th register of a thread, to be
    /// added to the thread's first element along `d`.
    pub fn reg_offset(&self, shape: &[u32], d: usize, index: u32) -> u32 {
        let run = self.size_per_thread[d].min(shape[d]);
        (index / run) * self.coverage(d) + index % run
    }

    /// The coordinates held by `thread` in register `reg` of a tile of `shape`,
    /// and whether this copy is the owner. Coordinates wrap modulo the shape.
    pub fn coords(&self, shape: &[u32], thread: u32, reg: u32) -> (Vec<u32>, bool) {
        let (lane, warp) = (thread % WARP, thread / WARP);
        let dims = self.reg_dims(shape, reg);
        let mut owned = true;
        let coords = (0..self.rank())
            .map(|d| {
                let td = self.thread_dim(d);
                let raw =
                    td.position(lane, warp) * td.per_thread + self.reg_offset(shape, d, dims[d]);
                owned &= raw < shape[d];
                raw % shape[d]
            })
            .collect();
        (coords, owned)
    }

    /// The coalesced layout for a tile of `shape` of `elem_bytes`-byte
    /// elements over `warps` warps, with `contiguous` the fastest dim: each
    /// thread holds up to 16 bytes along it (one vector access), lanes then
    /// warps fill dims from the fastest, and what is left over replicates
    /// along the slowest dim.
    pub fn coalesced(shape: &[u32], warps: u32, elem_bytes: u32, contiguous: usize) -> Blocked {
        let rank = shape.len();
        let mut order = vec![contiguous];
        order.extend((0..rank).rev().filter(|&d| d != contiguous));
        let numel: u32 = shape.iter().product();
        let threads = warps * WARP;
        let vector = (16 / elem_bytes.max(1)).max(1);
        let per_thread = vector.min((numel / threads).max(1)).min(shape[contiguous]);
        let mut size_per_thread = vec![1; rank];
        size_per_thread[contiguous] = per_thread;
        let fill = |available: u32, room: &dyn Fn(usize) -> u32| {
            let mut counts = vec![1; rank];
            let mut left = available;
            for &d in &order {
                let n = left.min(room(d).max(1));
                counts[d] = n;
                left /= n;
            }
            counts[order[rank - 1]] *= left;
            counts
        };
        let threads_per_warp = fill(WARP, &|d| shape[d] / size_per_thread[d]);
        let warps_per_cta = fill(warps, &|d| {
            shape[d] / (size_per_thread[d] * threads_per_warp[d])
        });
        Blocked {
            size_per_thread,
            threads_per_warp,
            warps_per_cta,
            order,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every coordinate has exactly one owner, owners' coordinates are in
    /// range, and each thread has `num_regs` registers.
    fn check_ownership(layout: &Blocked, shape: &[u32]) {
        let threads = layout.warps() * WARP;
        let numel: u32 = shape.iter().product();
        let mut owners = vec![0u32; numel as usize];
        let mut copies = vec![0u32; numel as usize];
        for t in 0..threads {
            for r in 0..layout.num_regs(shape) {
                let (c, owned) = layout.coords(shape, t, r);
                let mut lin = 0;
                for d in 0..shape.len() {
                    assert!(c[d] < shape[d]);
                    lin = lin * shape[d] + c[d];
                }
                copies[lin as usize] += 1;
                if owned {
                    owners[lin as usize] += 1;
                }
            }
        }
        assert!(
            owners.iter().all(|&n| n == 1),
            "{layout:?} {shape:?}: owners {owners:?}"
        );
        assert!(copies.iter().all(|&n| n >= 1));
        // Without wrap-around, there are no copies at all.
        if (0..shape.len()).all(|d| shape[d] >= layout.coverage(d)) {
            assert!(copies.iter().all(|&n| n == 1));
        }
    }

    #[test]
    fn coalesced_layouts_own_every_element_once() {
        for warps in [1, 2, 4, 8] {
            for shape in [
                vec![64, 64],
                vec![16, 16],
                vec![1, 32],
                vec![32, 1],
                vec![1, 1],
                vec![2, 8],
                vec![128, 16],
                vec![16, 128],
                vec![256],
                vec![4],
                vec![4, 8, 16],
            ] {
                for elem in [2, 4] {
                    for contiguous in 0..shape.len() {
                        let l = Blocked::coalesced(&shape, warps, elem, contiguous);
                        assert_eq!(l.threads_per_warp.iter().product::<u32>(), WARP);
                        assert_eq!(l.warps(), warps);
                        check_ownership(&l, &shape);
                    }
                }
            }
        }
    }

    #[test]
    fn a_layout_applied_to_a_smaller_shape_replicates() {
        // The layout of a [64, 64] tile reused for its [64, 1] row reduction
        // and [1, 64] column reduction: all lanes along the reduced dim hold copies.
        let l = Blocked::coalesced(&[64, 64], 4, 4, 1);
        for shape in [[64, 1], [1, 64], [1, 1], [8, 4]] {
            check_ownership(&l, &shape);
        }
    }

    #[test]
    fn coalesced_64x64_f32_is_the_expected_map() {
        let l = Blocked::coalesced(&[64, 64], 4, 4, 1);
        assert_eq!(l.size_per_thread, [1, 4]);
        assert_eq!(l.threads_per_warp, [2, 16]);
        assert_eq!(l.warps_per_cta, [4, 1]);
        assert_eq!(l.order, [1, 0]);
        assert_eq!(l.num_regs(&[64, 64]), 32);
        // Lane 17 = row 1 of the warp, column group 1; warp 2 starts at row 4.
        let (c, owned) = l.coords(&[64, 64], 2 * 32 + 17, 0);
        assert_eq!((c, owned), (vec![5, 4], true));
        // Register 5: the second row repetition (+8 rows), column +1.
        let (c, _) = l.coords(&[64, 64], 2 * 32 + 17, 5);
        assert_eq!(c, vec![13, 5]);
        // A transposed view: dim 0 contiguous.
        let t = Blocked::coalesced(&[64, 64], 4, 4, 0);
        assert_eq!(t.size_per_thread, [4, 1]);
        assert_eq!(t.order, [0, 1]);
    }

    #[test]
    fn reg_index_inverts_reg_dims() {
        let l = Blocked::coalesced(&[32, 64, 8], 2, 4, 2);
        let shape = [32, 64, 8];
        for r in 0..l.num_regs(&shape) {
            assert_eq!(l.reg_index(&shape, &l.reg_dims(&shape, r)), r);
        }
    }

    #[test]
    fn shared_row_major_strides() {
        assert_eq!(
            SharedLayout::row_major(3).strides(&[4, 8, 16]),
            [128, 16, 1]
        );
    }
}
