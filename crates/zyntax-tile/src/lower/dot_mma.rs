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

use super::convert::{align16, k_major, staged_bytes, MMA_PAD};
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Op, TileId};
use crate::layout::{Layout, Mma};
use zyntax_hir::{MmaElem, ScalarType, Type, ValueId, WarpShape};

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
        let pa = self.scratch_ptr(&ta.elem, 0)?;
        let b_offset = align16(u64::from(m) * u64::from(a_pitch) * staged_bytes(&ta.elem));
        let pb = self.scratch_ptr(&tb.elem, b_offset)?;
        self.stage_as(a, pa, false, MMA_PAD)?;
        self.stage_as(b, pb, b_kmajor, MMA_PAD)?;
        self.b.barrier()?;

        let layout = Layout::Mma(mma.clone());
        let shape = [m, n];
        let per_dim = layout.regs_per_dim(&shape);
        let (pieces_m, pieces_n) = (per_dim[0] / 2, per_dim[1] / 2);
        let [wm, wn] = mma.warps_per_cta;
        // This warp's first row and column: the layout's warp terms.
        let (rows, cols) = (layout.dim_map(0), layout.dim_map(1));
        let warp_m = self.warp_term(rows.warp_stride, wm, rows.warp_step)?;
        let warp_n = self.warp_term(cols.warp_stride, wn, cols.warp_step)?;
        // The row this lane addresses for ldmatrix, within a 16x16 block of A,
        // and its column (0 or 8).
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
        let k_row = self.b.rem(self.lane, c16)?;
        let kmajor_row = self.b.rem(self.lane, c8)?;
        let kmajor_k = {
            let h = self.b.div(self.lane, c8)?;
            let h = self.b.rem(h, c2)?;
            self.b.mul(h, c8)?
        };
        let (m_v, n_v) = (self.u32(m)?, self.u32(n)?);
        let (a_pitch_v, b_pitch_v) = (self.u32(a_pitch)?, self.u32(b_pitch)?);
        // Row offsets (row · K) of this lane's A rows, one per piece along M,
        // and the column of each piece along N; both wrap when warps replicate.
        let mut a_rows = Vec::new();
        for pm in 0..pieces_m {
            let first = self.u32(pm * rows.coverage)?;
            let row = self.b.add(warp_m, first)?;
            let row = self.b.add(row, lane_row)?;
            let row = self.b.rem(row, m_v)?;
            let row = self.b.mul(row, a_pitch_v)?;
            a_rows.push(self.b.add(row, lane_col)?);
        }
        let mut b_cols = Vec::new();
        for pn in 0..pieces_n {
            let first = self.u32(pn * cols.coverage)?;
            let col = self.b.add(warp_n, first)?;
            b_cols.push(self.b.rem(col, n_v)?);
        }

        let mut regs = self.regs(acc)?;
        for kk in (0..k).step_by(16) {
            let kk_v = self.u32(kk)?;
            let mut a_frags = Vec::new();
            for &row in &a_rows {
                let at = self.b.add(row, kk_v)?;
                let p = self.b.ptr_add(pa, at)?;
                a_frags.push(self.b.ldmatrix(4, false, p)?);
            }
            let mut b_frags = Vec::new();
            if b_kmajor {
                // B staged [N, K]: ldmatrix.x2 (no .trans) of the 8x8 blocks
                // k 0-7 / 8-15 at rows n..n+8; lane L addresses row L % 8 and
                // k 8 * (L / 8 % 2), and gets (n = g, k = 2t, 2t + 1): B's
                // fragment.
                let k_at = self.b.add(kmajor_k, kk_v)?;
                for &col in &b_cols {
                    let row = self.b.add(col, kmajor_row)?;
                    let row = self.b.mul(row, b_pitch_v)?;
                    let at = self.b.add(row, k_at)?;
                    let p = self.b.ptr_add(pb, at)?;
                    b_frags.push(self.b.ldmatrix(2, false, p)?);
                }
            } else {
                let k_at = self.b.add(k_row, kk_v)?;
                let k_at = self.b.mul(k_at, b_pitch_v)?;
                for &col in &b_cols {
                    let at = self.b.add(k_at, col)?;
                    let p = self.b.ptr_add(pb, at)?;
                    b_frags.push(self.b.ldmatrix(2, true, p)?);
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

    /// `(warp / stride % warps) * step`, the warp's part of a coordinate.
    fn warp_term(&mut self, stride: u32, warps: u32, step: u32) -> TileResult<ValueId> {
        let (stride, warps_v, step) = (self.u32(stride)?, self.u32(warps)?, self.u32(step)?);
        let w = self.b.div(self.warp, stride)?;
        let w = self.b.rem(w, warps_v)?;
        Ok(self.b.mul(w, step)?)
    }
}
