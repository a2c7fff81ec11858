//! `dot` on `wgmma.mma_async` (sm_90a): the `wgmma`s of one pipeline stage
//! (see `pipeline.rs` for the loop around them and the staging).
//!
//! A stage holds `a` as `[BM]` rows of 128 bytes (64 K elements), or
//! M-major in boxes of 64 rows (M) of `[64]` K rows, and `b` either N-major,
//! in boxes of 64 columns of `[64]` K rows, or K-major like `a`, all with the
//! 128-byte swizzle. Warpgroup `wg` (warps `4wg ..
//! 4wg + 3`) issues, for each repetition `r` of the accumulator layout along
//! M (rows `64wg + 16W r` .. `+ 64`, see `layout/wgmma.rs`) and each K step
//! of 16, one `wgmma.m64n<BN>k16` from two shared-memory descriptors:
//!
//! - `a`: start at the repetition's first row plus `32 k16` bytes (the K
//!   step within the swizzled row), leading byte offset 16 (unused by
//!   K-major swizzled layouts), stride byte offset 1024 (from one 8-row
//!   swizzle atom to the next);
//!   M-major (`trans_a`): start at the repetition's box plus row `16 k16`,
//!   leading byte offset one box (unused: an m64 is one box), stride byte
//!   offset 1024;
//! - `b`, K-major: the same with the stage's `b`; N-major (`trans_b`): start
//!   at row `16 k16` (`2048 k16` bytes), leading byte offset = one box
//!   (`64 * 128` bytes, from 64 columns to the next 64), stride byte offset
//!   1024 (8 K rows).
//!
//! These are the descriptors of the hand-written `kernels/gemm_sm90.py`.

use super::pipeline::{BK, ROW};
use super::Lowerer;
use crate::error::TileResult;
use zyntax_hir::{MmaElem, Swizzle, Type, ValueId, Wgmma};

/// Bytes of an 8-row swizzle atom (the stride byte offset).
const ATOM: u32 = 8 * ROW;

impl Lowerer<'_> {
    /// Issues and commits the `wgmma`s of the stage at `a` / `b` (shared
    /// `u8` pointers), updating one accumulator vector per repetition.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wgmma_stage(
        &mut self,
        accs: &mut [ValueId],
        a: ValueId,
        b: ValueId,
        bn: u32,
        a_kmajor: bool,
        b_kmajor: bool,
        elem: &Type,
    ) -> TileResult<()> {
        let warps = self.schedule.warps;
        let mma_elem = if *elem == Type::BF16 {
            MmaElem::Bf16
        } else {
            MmaElem::F16
        };
        let form = Wgmma {
            n: bn,
            a: mma_elem,
            b: mma_elem,
            trans_a: !a_kmajor,
            trans_b: !b_kmajor,
            neg_a: false,
            neg_b: false,
        };
        let k_steps = BK / form.k();
        let (c4, c64, row) = (self.u32(4)?, self.u32(64)?, self.u32(ROW)?);
        // This warpgroup's first row: 64 rows of 128 bytes K-major, one box
        // of 64 columns (M) of `BK` rows M-major.
        let wg = self.b.div(self.warp, c4)?;
        let wg_off = if a_kmajor {
            let wg_row = self.b.mul(wg, c64)?;
            self.b.mul(wg_row, row)?
        } else {
            let box_bytes = self.u32(BK * ROW)?;
            self.b.mul(wg, box_bytes)?
        };
        let a_wg = self.b.ptr_add(a, wg_off)?;
        let (sixteen, atom) = (self.u32(16)?, self.u32(ATOM)?);
        let box_bytes = self.u32(BK * ROW)?;
        let yes = self.b.bconst(true)?;
        self.b.wgmma_fence()?;
        for kk in 0..k_steps {
            let b_desc = if b_kmajor {
                let at = self.u32(kk * 32)?;
                let p = self.b.ptr_add(b, at)?;
                self.b.wgmma_desc(Swizzle::B128, p, sixteen, atom)?
            } else {
                let at = self.u32(kk * 16 * ROW)?;
                let p = self.b.ptr_add(b, at)?;
                self.b.wgmma_desc(Swizzle::B128, p, box_bytes, atom)?
            };
            for (rep, acc) in accs.iter_mut().enumerate() {
                // Repetition `rep` starts 16 * warps rows further: as many
                // rows K-major, as many 64-row boxes M-major.
                let rows = 16 * warps * rep as u32;
                let a_desc = if a_kmajor {
                    let at = self.u32(rows * ROW + kk * 32)?;
                    let p = self.b.ptr_add(a_wg, at)?;
                    self.b.wgmma_desc(Swizzle::B128, p, sixteen, atom)?
                } else {
                    let at = self.u32(rows / 64 * BK * ROW + kk * 16 * ROW)?;
                    let p = self.b.ptr_add(a_wg, at)?;
                    self.b.wgmma_desc(Swizzle::B128, p, box_bytes, atom)?
                };
                *acc = self.b.wgmma(form, *acc, a_desc, b_desc, yes)?;
            }
        }
        self.b.wgmma_commit_group()?;
        Ok(())
    }
}
