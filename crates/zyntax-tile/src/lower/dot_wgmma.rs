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
//!
//! fp8 (`u8` bytes read as e4m3/e5m2) and tf32 (f32) operands are K-major
//! both (wgmma reads 8- and 32-bit inputs only so): a stage row is still
//! 128 bytes, now 128 fp8 or 32 tf32 K elements, and each instruction
//! (`k32` for fp8, `k8` for tf32) still covers 32 bytes of it, so the
//! descriptors and their K-step offsets are the 16-bit ones.

use super::convert::{k_major, stage_width};
use super::dot_mma;
use super::pipeline::{gemm_loop, is_wgmma, BK, ROW};
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{DotInputs, Op, TileId, TileProgram};
use crate::layout::Layout;
use std::collections::HashSet;
use zyntax_hir::{AddrSpace, MmaElem, ScalarType, Swizzle, Type, ValueId, Wgmma};

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
        inputs: DotInputs,
        elem: &Type,
    ) -> TileResult<()> {
        let warps = self.schedule.warps;
        let mma_elem = match inputs {
            DotInputs::Tf32 => MmaElem::Tf32,
            DotInputs::E4m3 => MmaElem::E4m3,
            DotInputs::E5m2 => MmaElem::E5m2,
            DotInputs::Native if *elem == Type::BF16 => MmaElem::Bf16,
            DotInputs::Native => MmaElem::F16,
        };
        // K elements of one 128-byte stage row.
        let bk = super::pipeline::stage_k(elem);
        let form = Wgmma {
            n: bn,
            a: mma_elem,
            b: mma_elem,
            trans_a: !a_kmajor,
            trans_b: !b_kmajor,
            neg_a: false,
            neg_b: false,
        };
        let k_steps = bk / form.k();
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

// ------------------------------------------------------------------------
// A `dot` of its own on wgmma (outside the GEMM pipeline): the row
// statistics `dot`s of an online softmax (`infer/rows.rs`), S = Q K^T and
// O += P V of attention, in any loop.
//
// `b` is staged from its registers (its owners store 16-byte runs) into a
// region of dynamic shared memory of its own, with the 128-byte swizzle of
// the pipeline above: K-major (rows are N, boxes of 64 K) when its layout
// runs along K (attention's `k^T`), else N-major (rows are K, boxes of 64 N)
// when N is a multiple of 64 (attention's `V`). `a` comes from registers
// (wgmma's RS form: a warp's `A` fragment is `mma.sync`'s, rows `16 w ..+
// 16` of its warpgroup's 64): `P`, in this `dot`'s own accumulator layout
// (`dot_mma::a_in_registers`); a loop-invariant `a` is staged once before
// the loop (below); otherwise `a` is staged K-major beside `b` (SS form). Then `fence.proxy.async` (the
// generic-proxy stores become visible to wgmma's async proxy), a CTA
// barrier, one `wgmma.m64n<N>k16` per K step and repetition along M,
// commit, `wait_group 0`.
//
// A loop-invariant `a` (`dot_mma::hoisted`, attention's `Q`) is staged once,
// before the loop, K-major into a region of its own, and read by descriptor
// (SS form) in every iteration: not as register fragments (RS form). ptxas
// (12.9) miscompiles the RS form there: it takes the fragment registers,
// defined before the loop and read only by the loop's `wgmma`s, for dead
// after their last read in the body and reuses them within it (at head dim
// 64 for P's fragments of the next `dot`), so from the second iteration on
// the `wgmma` read P instead of Q (docs/tile.md).
//
// In a loop, each region has two buffers, used by even and odd iterations
// (`Lowerer::wgmma_parity`): a buffer is written again two iterations
// later, after a barrier of the iteration between, which every warp passes
// only once its wgmmas on that buffer are done, so no barrier follows the
// wgmmas. The first wgmma `dot` of a loop body (the *leader*) also stages the
// operands of the later ones that are ready by then (defined before it in
// the body, or outside the loop: attention's prefetched V), behind its one
// barrier: an attention key block then passes one barrier. A loop whose
// body has wgmma `dot`s is followed by a barrier (the loop may run again,
// from buffer 0).

/// The wgmma `dot`s of a program (see above): where each stages.
#[derive(Clone, Debug)]
pub(super) struct DotRegion {
    pub out: TileId,
    pub a: TileId,
    pub b: TileId,
    /// Byte offset of the region in dynamic shared memory (1024-aligned).
    pub offset: u64,
    /// Whether `a` is staged (SS form) at `offset`, `b` after it.
    pub stage_a: bool,
    /// Bytes of the staged `a` (0 unless `stage_a`), 1024-aligned.
    pub a_bytes: u64,
    /// Bytes of one buffer (the staged `a` and `b`).
    pub buffer: u64,
    /// Whether the region has two buffers (the `dot` is in a loop).
    pub double: bool,
    /// The leader that stages this `dot`'s operands, if another `dot`.
    pub staged_by: Option<TileId>,
    /// Where a loop-invariant `a` is staged once before the loop (K-major,
    /// one buffer), if it is.
    pub once_a: Option<u64>,
}

pub(super) fn align1024(bytes: u64) -> u64 {
    bytes.div_ceil(1024) * 1024
}

/// Staged bytes of a `[rows, cols]` operand in boxes of 64 `cols`.
pub(super) fn boxed_bytes(rows: u32, cols: u32) -> u64 {
    u64::from(cols.div_ceil(64)) * u64::from(rows) * u64::from(ROW)
}

/// The regions of the wgmma `dot`s of `program` (not the GEMM pipeline's),
/// after `first` bytes (the pipelines' ring), and the bytes they end at.
pub(super) fn dot_regions(
    program: &TileProgram,
    layouts: &Layouts,
    first: u64,
) -> (Vec<DotRegion>, u64) {
    let mut out = Vec::new();
    let mut end = align1024(first);
    walk(
        program,
        layouts,
        &program.body,
        &[],
        false,
        &mut out,
        &mut end,
    );
    (out, end)
}

/// The wgmma `dot`s of `ops` (not of loops inside): `(index, out, a, b)`.
fn dots_of(layouts: &Layouts, ops: &[Op]) -> Vec<(usize, TileId, TileId, TileId)> {
    ops.iter()
        .enumerate()
        .filter_map(|(i, op)| match op {
            Op::Dot { out, a, b, .. } if is_wgmma(layouts.get(*out)) => Some((i, *out, *a, *b)),
            _ => None,
        })
        .collect()
}

/// Whether a loop `body` has wgmma `dot`s of its own (it then keeps an
/// iteration parity for their buffers).
pub(super) fn stages_in(layouts: &Layouts, body: &[Op]) -> bool {
    !dots_of(layouts, body).is_empty()
}

fn walk(
    program: &TileProgram,
    layouts: &Layouts,
    ops: &[Op],
    hoisted: &[(TileId, TileId)],
    in_loop: bool,
    out: &mut Vec<DotRegion>,
    end: &mut u64,
) {
    let here = dots_of(layouts, ops);
    // Tiles defined from the leader on: operands that are not wait for their
    // own `dot`.
    let mut late = HashSet::new();
    if let Some(&(first, ..)) = here.first() {
        dot_mma::defined(&ops[first..], &mut late);
    }
    for (n, &(_, d, a, b)) in here.iter().enumerate() {
        let (ta, tb) = (program.tile(a), program.tile(b));
        let once = hoisted.iter().any(|&(h, _)| h == d);
        let stage_a = !dot_mma::a_in_registers(layouts, a, d) && !once;
        let once_a = once.then(|| {
            let at = *end;
            *end += align1024(boxed_bytes(ta.shape[0], ta.shape[1]));
            at
        });
        let a_bytes = if stage_a {
            align1024(boxed_bytes(ta.shape[0], ta.shape[1]))
        } else {
            0
        };
        let (k, n_cols) = (tb.shape[0], tb.shape[1]);
        let b_bytes = match b_kmajor(layouts.get(b), k, n_cols) {
            true => boxed_bytes(n_cols, k),
            false => boxed_bytes(k, n_cols),
        };
        let ready = !(late.contains(&b) || stage_a && late.contains(&a));
        let staged_by = if n > 0 && in_loop && ready {
            Some(here[0].1)
        } else {
            None
        };
        let buffer = a_bytes + align1024(b_bytes);
        out.push(DotRegion {
            out: d,
            a,
            b,
            offset: *end,
            stage_a,
            a_bytes,
            buffer,
            double: in_loop,
            staged_by,
            once_a,
        });
        *end += buffer * if in_loop { 2 } else { 1 };
    }
    // Sibling loops share their regions: a loop with wgmma `dot`s ends
    // with a barrier that every warp passes once its wgmmas are done, so
    // the next loop (the split attention program's three) may stage over
    // them.
    let start = *end;
    for op in ops {
        if let Op::For {
            args, body, yields, ..
        } = op
        {
            // A GEMM loop on the pipeline stages in the ring.
            match gemm_loop(program, args, body, yields) {
                Some(g) if is_wgmma(layouts.get(g.dot)) => {}
                _ => {
                    let h = dot_mma::hoisted(program, layouts, body);
                    let mut e = start;
                    walk(program, layouts, body, &h, true, out, &mut e);
                    *end = (*end).max(e);
                }
            }
        }
    }
}

/// Whether `b` (`[k, n]`) is staged K-major: its layout runs along K, or N
/// is not a multiple of the 64-column boxes of N-major staging.
fn b_kmajor(layout: Option<&Layout>, k: u32, n: u32) -> bool {
    let along_k = layout.is_some_and(|l| k_major(l, &[k, n]));
    along_k || !n.is_multiple_of(64)
}

/// Dynamic shared-memory bytes of the wgmma pipelines and wgmma `dot`s of
/// `program`.
pub(super) fn dynamic_bytes(program: &TileProgram, layouts: &Layouts, stages: u32) -> u64 {
    let ring = super::pipeline::dynamic_bytes(program, layouts, &program.body, stages);
    let (regions, end) = dot_regions(program, layouts, ring);
    if regions.is_empty() {
        ring
    } else {
        end
    }
}

impl Lowerer<'_> {
    /// `((iv - lo) / step) % 2`: which buffer this iteration stages into.
    pub(super) fn iteration_parity(
        &mut self,
        lo: ValueId,
        step: ValueId,
        iv: ValueId,
    ) -> TileResult<ValueId> {
        let span = self.b.sub(iv, lo)?;
        let j = self.b.div(span, step)?;
        let two = self.u32(2)?;
        Ok(self.b.rem(j, two)?)
    }

    /// The regions of the program's wgmma `dot`s (after any GEMM ring).
    fn regions(&self) -> Vec<DotRegion> {
        let ring = super::pipeline::dynamic_bytes(
            self.program,
            self.layouts,
            &self.program.body,
            self.schedule.stages,
        );
        dot_regions(self.program, self.layouts, ring).0
    }

    /// The byte offset of `r`'s buffer for this iteration.
    fn buffer_base(&mut self, r: &DotRegion) -> TileResult<ValueId> {
        let base = self.u32(r.offset as u32)?;
        match (r.double, self.wgmma_parity) {
            (true, Some(parity)) => {
                let bytes = self.u32(r.buffer as u32)?;
                let off = self.b.mul(parity, bytes)?;
                Ok(self.b.add(base, off)?)
            }
            (true, None) => Err(TileError::Internal(
                "a double-buffered wgmma dot outside its loop".into(),
            )),
            _ => Ok(base),
        }
    }

    /// Stages the operands of the wgmma `dot` of region `r` (see above).
    fn stage_region(&mut self, r: &DotRegion, smem: ValueId) -> TileResult<()> {
        let base = self.buffer_base(r)?;
        if r.stage_a {
            self.stage_swizzled(r.a, smem, base, 0)?;
        }
        let a_bytes = self.u32(r.a_bytes as u32)?;
        let b_base = self.b.add(base, a_bytes)?;
        let tb = self.program.tile(r.b).clone();
        let kmajor = b_kmajor(self.layouts.get(r.b), tb.shape[0], tb.shape[1]);
        // K-major: rows are N (dim 1), N-major: rows are K (dim 0).
        self.stage_swizzled(r.b, smem, b_base, usize::from(kmajor))
    }

    /// `out = a @ b + acc` as one wgmma `dot` (see above).
    pub(super) fn dot_wgmma(
        &mut self,
        out: TileId,
        a: TileId,
        b: TileId,
        acc: TileId,
    ) -> TileResult<()> {
        let accs = self.wgmma_issue(out, a, b, acc)?;
        self.b.wgmma_wait_group(0)?;
        self.wgmma_unpack(out, &accs)
    }

    /// The registers of the wgmma `dot` `out` from its accumulator vectors
    /// (once its group is done).
    pub(super) fn wgmma_unpack(&mut self, out: TileId, accs: &[ValueId]) -> TileResult<()> {
        let [m, n] = self.program.tile(out).shape[..] else {
            return Err(TileError::Internal(
                "a wgmma dot of rank other than 2".into(),
            ));
        };
        self.unpack_accs(out, accs, m, n, out)
    }

    /// Issues and commits the wgmmas of `out = a @ b + acc` (staging first,
    /// off a TMA ring), without waiting: the accumulator vectors.
    pub(super) fn wgmma_issue(
        &mut self,
        out: TileId,
        a: TileId,
        b: TileId,
        acc: TileId,
    ) -> TileResult<Vec<ValueId>> {
        let (ta, tb) = (self.program.tile(a).clone(), self.program.tile(b).clone());
        let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let smem = self.b.dyn_shared_aligned(Type::U8, 1024)?;
        // On a TMA ring (`pipeline_ring.rs`) `b` is in the iteration's stage.
        let (a_at, b_base, b_kmajor) = match self.ring_place(out)? {
            Some(place) => place,
            None => self.region_place(out, b, smem, k, n)?,
        };

        let warps = self.schedule.warps;
        let reps = m / (16 * warps);
        let mma_elem = if ta.elem == Type::BF16 {
            MmaElem::Bf16
        } else {
            MmaElem::F16
        };
        let form = Wgmma {
            n,
            a: mma_elem,
            b: mma_elem,
            trans_a: false,
            trans_b: !b_kmajor,
            neg_a: false,
            neg_b: false,
        };
        let mut accs = self.pack_accs(out, acc, m, n)?;
        let zero4 = *self
            .vector_zeros
            .get(&Type::Vector(ScalarType::U32, 4))
            .ok_or_else(|| TileError::Internal("no vec<u32, 4> for wgmma".into()))?;
        let (sixteen, atom) = (self.u32(16)?, self.u32(ATOM)?);
        // N-major `b`: from one box of 64 columns to the next.
        let b_box = self.u32(k * ROW)?;
        let a_wg = match a_at {
            Some(at) => {
                // This warpgroup's first row (64 rows of 128 bytes a box row).
                let (c4, wg_bytes) = (self.u32(4)?, self.u32(64 * ROW)?);
                let wg = self.b.div(self.warp, c4)?;
                let off = self.b.mul(wg, wg_bytes)?;
                let off = self.b.add(off, at)?;
                Some(self.b.ptr_add(smem, off)?)
            }
            None => None,
        };
        let b_ptr = self.b.ptr_add(smem, b_base)?;
        let yes = self.b.bconst(true)?;
        // Every A operand is built before the fence: register fragments are
        // inputs wgmma may read at any point after it is issued.
        let mut a_ops = vec![Vec::new(); reps as usize];
        for (rep, ops) in a_ops.iter_mut().enumerate() {
            for ks in 0..k / 16 {
                let op = if let Some(a_wg) = a_wg {
                    // Box ks / 4 of 64 K, the repetition's rows, 32 bytes a K step.
                    let rows = 16 * warps * rep as u32;
                    let at = (u64::from(ks / 4) * boxed_bytes(m, 64)) as u32
                        + rows * ROW
                        + (ks % 4) * 32;
                    let at = self.u32(at)?;
                    let p = self.b.ptr_add(a_wg, at)?;
                    self.b.wgmma_desc(Swizzle::B128, p, sixteen, atom)?
                } else {
                    self.a_fragment_from_regs(a, rep as u32, ks * 16, zero4)?
                };
                ops.push(op);
            }
        }
        self.b.wgmma_fence()?;
        for ks in 0..k / 16 {
            let at = if b_kmajor {
                (u64::from(ks / 4) * boxed_bytes(n, 64)) as u32 + (ks % 4) * 32
            } else {
                ks * 16 * ROW
            };
            let at = self.u32(at)?;
            let p = self.b.ptr_add(b_ptr, at)?;
            let b_desc = if b_kmajor {
                self.b.wgmma_desc(Swizzle::B128, p, sixteen, atom)?
            } else {
                self.b.wgmma_desc(Swizzle::B128, p, b_box, atom)?
            };
            for (rep, acc) in accs.iter_mut().enumerate() {
                *acc = self
                    .b
                    .wgmma(form, *acc, a_ops[rep][ks as usize], b_desc, yes)?;
            }
        }
        self.b.wgmma_commit_group()?;
        Ok(accs)
    }

    /// Stages the operands of the wgmma `dot` `out` into its region (see
    /// above), or leaves them to the `dot` that stages them; returns (the
    /// staged `a`'s byte offset, or `None` for `a` in registers, `b`'s byte
    /// offset, whether `b` is K-major).
    fn region_place(
        &mut self,
        out: TileId,
        b: TileId,
        smem: ValueId,
        k: u32,
        n: u32,
    ) -> TileResult<(Option<ValueId>, ValueId, bool)> {
        let regions = self.regions();
        let region = regions
            .iter()
            .find(|r| r.out == out)
            .cloned()
            .ok_or_else(|| TileError::Internal("a wgmma dot without a region".into()))?;
        let b_kmajor = b_kmajor(self.layouts.get(b), k, n);
        if region.staged_by.is_none() {
            self.stage_region(&region, smem)?;
            // The later dots of the body whose operands are ready.
            for r in regions.iter().filter(|r| r.staged_by == Some(out)) {
                self.stage_region(r, smem)?;
            }
            self.b.fence_proxy_async()?;
            self.b.barrier()?;
        }
        let a_base = self.buffer_base(&region)?;
        let a_bytes = self.u32(region.a_bytes as u32)?;
        let b_base = self.b.add(a_base, a_bytes)?;
        let a_at = match region.once_a {
            Some(at) => Some(self.u32(at as u32)?),
            None if region.stage_a => Some(a_base),
            None => None,
        };
        Ok((a_at, b_base, b_kmajor))
    }

    /// Stages the loop-invariant `a` of the wgmma `dot` `out` once, before
    /// its loop, into the region's `once_a` (see above), then
    /// `fence.proxy.async` and a barrier.
    pub(super) fn stage_once_a(&mut self, out: TileId, a: TileId) -> TileResult<()> {
        if !self.ring_stage_a(a) {
            return Ok(()); // on a TMA ring: staged for an earlier loop
        }
        let at = match self.ring_once(out) {
            Some(at) => Some(u64::from(at)), // on a TMA ring (`pipeline_ring.rs`)
            None => self
                .regions()
                .iter()
                .find(|r| r.out == out)
                .and_then(|r| r.once_a),
        };
        let at =
            at.ok_or_else(|| TileError::Internal("a hoisted wgmma dot without a region".into()))?;
        let smem = self.b.dyn_shared_aligned(Type::U8, 1024)?;
        let base = self.u32(at as u32)?;
        // K-major: rows are M (dim 0), boxes of 64 K.
        self.stage_swizzled(a, smem, base, 0)?;
        self.b.fence_proxy_async()?;
        // On the ring only the consumer warps meet.
        self.consumers_sync()
    }

    /// Stores the owned elements of 2-D `tile` at byte `base` of `smem` in
    /// rows of 128 bytes along dim `1 - row_dim`, boxes of 64 elements, with
    /// the 128-byte swizzle: element `(row, col)` lies at byte
    /// `(col / 64) * rows * 128 + row * 128 + ((col % 64 / 8) ^ (row % 8)) * 16`
    /// plus `(col % 8) * 2`. A run of registers along `col` (at most 8, so
    /// within one 16-byte chunk) is one vector store.
    fn stage_swizzled(
        &mut self,
        tile: TileId,
        smem: ValueId,
        base: ValueId,
        row_dim: usize,
    ) -> TileResult<()> {
        let layout = self.layout(tile)?;
        let ty = self.program.tile(tile).clone();
        let col_dim = 1 - row_dim;
        let regs = self.regs(tile)?;
        let table = self.coords(&layout, &ty.shape)?;
        let width = stage_width(&layout, &ty.shape, &ty.elem, col_dim);
        let elem_bytes = ty.elem.size_bytes().unwrap_or(2) as u32;
        let e = ty
            .elem
            .as_scalar()
            .ok_or_else(|| TileError::Internal("a wgmma operand of non-scalars".into()))?;
        let (c8, c64, c16) = (self.u32(8)?, self.u32(64)?, self.u32(16)?);
        let (row_bytes, box_bytes) = (self.u32(ROW)?, self.u32(ty.shape[row_dim] * ROW)?);
        let (base_v, eb) = (base, self.u32(elem_bytes)?);
        for (r, &value) in regs.iter().enumerate() {
            let mut dims = layout.reg_dims(&ty.shape, r as u32);
            if dims[col_dim] % width != 0 {
                continue; // stored with the run it belongs to
            }
            let coords = Self::reg_coords(&layout, &ty.shape, &table, r as u32);
            let (row, col) = (coords[row_dim].value, coords[col_dim].value);
            let bx = self.b.div(col, c64)?;
            let off = self.b.mul(bx, box_bytes)?;
            let r_off = self.b.mul(row, row_bytes)?;
            let off = self.b.add(off, r_off)?;
            let chunk = self.b.rem(col, c64)?;
            let chunk = self.b.div(chunk, c8)?;
            let r8 = self.b.rem(row, c8)?;
            let sw = self.b.xor(chunk, r8)?;
            let sw = self.b.mul(sw, c16)?;
            let off = self.b.add(off, sw)?;
            let within = self.b.rem(col, c8)?;
            let within = self.b.mul(within, eb)?;
            let off = self.b.add(off, within)?;
            let off = self.b.add(off, base_v)?;
            let owned = self.owned(&coords)?;
            let frame = match owned {
                Some(o) => Some(self.b.begin_if(o, &[])?),
                None => None,
            };
            let p = self.b.ptr_add(smem, off)?;
            if width == 1 {
                let q = self
                    .b
                    .ptr_cast(p, Type::ptr(AddrSpace::Shared, ty.elem.clone()))?;
                self.b.store(q, value)?;
            } else {
                self.store_run(p, e, width, &regs, &layout, &ty.shape, &mut dims, col_dim)?;
            }
            if let Some(f) = frame {
                self.b.end_if(f, &[])?;
            }
        }
        Ok(())
    }
}
