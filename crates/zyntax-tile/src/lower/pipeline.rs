//! The GEMM loop on sm_90: a `for_range` whose body loads an `a` and a `b`
//! tile and accumulates `dot(a, b, acc)` is lowered, as a whole, to a
//! software pipeline of `stages` shared-memory stages feeding `wgmma`.
//!
//! The program is the plain tile GEMM; nothing in it names the pipeline.
//! [`gemm_loop`] recognises the loop (layout inference asks it, and gives
//! the `dot` the wgmma accumulator layout when [`wgmma_unfit`] finds
//! nothing against it); [`Lowerer::gemm_pipeline`] then replaces the loop:
//!
//! - Every thread is a producer: the `a` and `b` boxes of iteration `j` are
//!   copied into stage `j % stages` with `cp.async` (16 bytes a copy,
//!   consecutive threads on consecutive chunks of a row), one commit group
//!   per iteration. A chunk that is not entirely inside the view, or whose
//!   global address is not 16-byte aligned, or whose view was not declared
//!   unit-stride along the staged rows with a 16-byte aligned base
//!   (`view_param_aligned`), is copied element by element instead, with
//!   zeros outside the view: tails are masked and padded with zeros, which
//!   is what the K tail of a `dot` needs.
//! - Shared memory holds each operand in rows of 128 bytes (64 f16/bf16),
//!   with the 128-byte swizzle of TMA and wgmma: 16-byte chunk `c` of row
//!   `r` lies at chunk `c ^ (r % 8)`. `a` is stored K-major (rows are M);
//!   `b` is stored N-major in boxes of 64 columns (rows are K; `wgmma`
//!   reads it transposed) or, when its view is declared unit-stride along
//!   K (a transposed `B`), K-major like `a`.
//! - The prologue issues iterations `0 .. ahead`. Iteration `j` waits for
//!   its group (`cp.async.wait_group ahead - 1`), fences the generic proxy
//!   against the async proxy (wgmma reads through it), synchronises the CTA,
//!   issues its `wgmma`s (`dot_wgmma.rs`), commits them, issues the copies of
//!   iteration `j + ahead` into the stage that iteration `j + ahead -
//!   stages` used, and waits for its `wgmma`s. With two stages, `ahead` is 1
//!   and the wait is for all of them (`wgmma.wait_group 0`): every warp is
//!   done with stage `j - 1` when it passes the barrier of iteration `j`.
//!   With three or more, one group stays in flight (`wgmma.wait_group 1`,
//!   the tensor cores work through the barrier and the copies), so only
//!   stage `j - 2` is free at iteration `j` and `ahead` is `stages - 2`. The accumulator stays in `vec<f32, N / 2>` values through
//!   the loop (nothing reads wgmma registers while one is in flight) and is
//!   unpacked into the tile's registers after it. With one stage, iteration
//!   `j` copies its own tiles first and synchronises again at its end.

use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Const, DotInputs, Op, ScalarId, TileId, TileProgram, Value, ViewId};
use crate::layout::{wgmma_reg_dims, Layout};
use zyntax_hir::{AddrSpace, Arch, CacheHint, Dim, Type, ValueId};

/// K elements per stage: one 128-byte swizzle row of 16-bit elements.
pub(crate) const BK: u32 = 64;

/// K elements per stage of `elem` operands: one 128-byte swizzle row (64
/// f16/bf16, 128 fp8 bytes, 32 tf32).
pub(crate) fn stage_k(elem: &Type) -> u32 {
    ROW / elem.size_bytes().unwrap_or(2) as u32
}

/// Why a GEMM loop's operands of types `a` and `b`, read as `inputs`,
/// cannot feed wgmma, if not: f16/bf16 pairs, f32 read as tf32, or fp8
/// bytes (`u8`); 8-bit and 32-bit operands K-major both (`a_kmajor`,
/// `b_kmajor`), as wgmma reads them only so.
pub(crate) fn wgmma_inputs_unfit(
    a: &Type,
    b: &Type,
    inputs: DotInputs,
    a_kmajor: bool,
    b_kmajor: bool,
) -> Option<String> {
    let pair_ok = a == b
        && match inputs {
            DotInputs::Native => *a == Type::F16 || *a == Type::BF16,
            DotInputs::Tf32 => *a == Type::F32,
            DotInputs::E4m3 | DotInputs::E5m2 => *a == Type::U8,
        };
    if !pair_ok {
        return Some(format!(
            "the wgmma pipeline takes f16 or bf16 operands, f32 read as tf32 or fp8 bytes (u8), not {a} and {b} read as {inputs:?}"
        ));
    }
    if inputs != DotInputs::Native && !(a_kmajor && b_kmajor) {
        let which = if a_kmajor { "b" } else { "a" };
        return Some(format!(
            "wgmma reads {inputs:?} operands K-major only: `{which}` must be unit-stride along K (a: [M, K] row-major, b: a transposed view of an [N, K] matrix)"
        ));
    }
    None
}
/// Bytes of one staged row (the span of the 128-byte swizzle).
pub(super) const ROW: u32 = 128;

/// A load of the loop body that feeds the `dot`.
#[derive(Clone, Debug)]
pub(crate) struct LoopLoad {
    pub out: TileId,
    pub view: ViewId,
    pub origin: Vec<ScalarId>,
}

/// A GEMM loop: the body is scalar arithmetic, the loads of `a` and `b`, and
/// `dot(a, b, carried)` yielded as the one carried value.
#[derive(Clone, Debug)]
pub(crate) struct GemmLoop {
    pub a: LoopLoad,
    pub b: LoopLoad,
    pub dot: TileId,
    /// How the `dot` reads `a` and `b`.
    pub inputs: DotInputs,
}

fn is_zero(c: &Const) -> bool {
    match *c {
        Const::Int(i) => i == 0,
        Const::Float(f) => f == 0.0,
    }
}

/// The GEMM loop of a `for` with carried `args`, `body` and `yields`, if it
/// is one (see the module doc).
pub(crate) fn gemm_loop(
    program: &TileProgram,
    args: &[Value],
    body: &[Op],
    yields: &[Value],
) -> Option<GemmLoop> {
    let ([Value::Tile(arg)], [Value::Tile(yielded)]) = (args, yields) else {
        return None;
    };
    let mut loads = Vec::new();
    let mut dot = None;
    for op in body {
        match op {
            Op::ScalarConst { .. }
            | Op::ScalarBinary { .. }
            | Op::ScalarCmp { .. }
            | Op::ViewDim { .. }
            | Op::ProgramId { .. } => {}
            Op::Load {
                out,
                view,
                origin,
                other,
            } if is_zero(other) => loads.push(LoopLoad {
                out: *out,
                view: *view,
                origin: origin.clone(),
            }),
            Op::Dot {
                out,
                a,
                b,
                acc,
                inputs,
            } if dot.is_none() && out == yielded && acc == arg => {
                dot = Some((*out, *a, *b, *inputs));
            }
            _ => return None,
        }
    }
    let (out, a, b, inputs) = dot?;
    if loads.len() != 2 || a == b {
        return None;
    }
    let find = |t: TileId| loads.iter().find(|l| l.out == t).cloned();
    let (a, b) = (find(a)?, find(b)?);
    for l in [&a, &b] {
        if program.view(l.view).rank != 2 || program.tile(l.out).shape.len() != 2 {
            return None;
        }
    }
    Some(GemmLoop {
        a,
        b,
        dot: out,
        inputs,
    })
}

/// Shared-memory bytes of the pipeline of an `[bm, BK] x [BK, bn]` loop.
pub(crate) fn pipeline_bytes(bm: u32, bn: u32, stages: u32) -> u64 {
    u64::from(stages) * u64::from(bm + bn) * u64::from(ROW)
}

/// Why the GEMM loop `g` cannot run on the wgmma pipeline with `warps` warps
/// and `stages` stages on `arch`, if it cannot.
pub(crate) fn wgmma_unfit(
    program: &TileProgram,
    g: &GemmLoop,
    warps: u32,
    stages: u32,
    arch: Arch,
) -> Option<String> {
    let (ta, tb) = (program.tile(g.a.out), program.tile(g.b.out));
    let (bm, k, bn) = (ta.shape[0], ta.shape[1], tb.shape[1]);
    let (a_st, b_st) = stagings(program, g);
    let (a_kmajor, b_kmajor) = (a_st.row_dim == 0, b_st.row_dim == 1);
    let bk = stage_k(&ta.elem);
    let unfit = wgmma_inputs_unfit(&ta.elem, &tb.elem, g.inputs, a_kmajor, b_kmajor);
    let why = if arch < Arch::Sm90a {
        format!("wgmma needs sm_90a (arch-specific PTX), the schedule is for {arch}")
    } else if let Some(why) = unfit {
        why
    } else if k != bk {
        format!(
            "the wgmma pipeline stages K steps of {bk} {} (128-byte rows); the loop's is {k}",
            ta.elem
        )
    } else if !warps.is_multiple_of(4) {
        format!("wgmma is issued by warpgroups: warps must be a multiple of 4, not {warps}")
    } else if !bm.is_multiple_of(16 * warps) {
        format!(
            "the wgmma accumulator puts 16 rows per warp: M of the tile ({bm}) must be a multiple of {}",
            16 * warps
        )
    } else if b_kmajor && (!bn.is_multiple_of(8) || bn > 256) {
        // A K-major `b` stage is `bn` rows of 128 bytes: any multiple of the
        // 8-row swizzle atom (the swapped small-M products' 8 to 64 tokens).
        format!("wgmma tiles with a K-major b need N a multiple of 8 up to 256, not {bn}")
    } else if !b_kmajor && (!bn.is_multiple_of(64) || bn > 256) {
        format!("wgmma tiles need N a multiple of 64 up to 256, not {bn}")
    } else if pipeline_bytes(bm, bn, stages) > zyntax_hir::arch::max_shared_bytes(arch) {
        format!(
            "{stages} stages of {bm}x{bk} and {bk}x{bn} tiles need {} bytes of shared memory; {arch} allows {}",
            pipeline_bytes(bm, bn, stages),
            zyntax_hir::arch::max_shared_bytes(arch)
        )
    } else {
        return None;
    };
    Some(why)
}

/// Whether `layout` is the wgmma accumulator.
pub(crate) fn is_wgmma(layout: Option<&Layout>) -> bool {
    matches!(layout, Some(Layout::Mma(m)) if m.is_wgmma())
}

/// Dynamic shared-memory bytes the pipelines of `ops` need (they run one
/// after another and share the buffer).
pub(super) fn dynamic_bytes(
    program: &TileProgram,
    layouts: &Layouts,
    ops: &[Op],
    stages: u32,
) -> u64 {
    let mut bytes = 0;
    for op in ops {
        if let Op::For {
            args, body, yields, ..
        } = op
        {
            match gemm_loop(program, args, body, yields) {
                Some(g) if is_wgmma(layouts.get(g.dot)) => {
                    let (ta, tb) = (program.tile(g.a.out), program.tile(g.b.out));
                    bytes = bytes.max(pipeline_bytes(ta.shape[0], tb.shape[1], stages));
                }
                _ => bytes = bytes.max(dynamic_bytes(program, layouts, body, stages)),
            }
        }
    }
    bytes
}

/// How one operand is staged: `rows` rows of 128 bytes per box, boxes of 64
/// elements along `col_dim` (the contiguous one in shared memory).
#[derive(Clone, Debug)]
pub(super) struct Staging {
    pub view: ViewId,
    pub origin: Vec<ScalarId>,
    pub row_dim: usize,
    pub col_dim: usize,
    pub rows: u32,
    pub cols: u32,
    pub elem: Type,
}

/// How the `a` and `b` tiles of `g` are staged (see the module doc): `a`
/// K-major (rows are M) unless its view is declared unit-stride along M; `b`
/// N-major in boxes of 64 columns unless declared unit-stride along K.
pub(super) fn stagings(program: &TileProgram, g: &GemmLoop) -> (Staging, Staging) {
    let (ta, tb) = (program.tile(g.a.out), program.tile(g.b.out));
    let (bm, bn) = (ta.shape[0], tb.shape[1]);
    let b_kmajor = program.view(g.b.view).unit_stride_dim == Some(0);
    let a_kmajor = program.view(g.a.view).unit_stride_dim != Some(0);
    let stage = |l: &LoopLoad, row_dim: usize, rows: u32, cols: u32, elem: &Type| Staging {
        view: l.view,
        origin: l.origin.clone(),
        row_dim,
        col_dim: 1 - row_dim,
        rows,
        cols,
        elem: elem.clone(),
    };
    let (ka, kb) = (stage_k(&ta.elem), stage_k(&tb.elem));
    let a = if a_kmajor {
        stage(&g.a, 0, bm, ka, &ta.elem)
    } else {
        stage(&g.a, 1, ka, bm, &ta.elem)
    };
    let b = if b_kmajor {
        stage(&g.b, 1, bn, kb, &tb.elem)
    } else {
        stage(&g.b, 0, kb, bn, &tb.elem)
    };
    (a, b)
}

impl Lowerer<'_> {
    /// Lowers the GEMM loop `g` (a `for` from `lo` to `hi` by `step` with
    /// induction variable `iv`, one carried accumulator) to the pipeline.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm_pipeline(
        &mut self,
        g: &GemmLoop,
        lo: ScalarId,
        hi: ScalarId,
        step: ScalarId,
        iv: ScalarId,
        init: TileId,
        body: &[Op],
        result: TileId,
    ) -> TileResult<()> {
        let stages = self.schedule.stages;
        let (ta, tb) = (
            self.program.tile(g.a.out).clone(),
            self.program.tile(g.b.out).clone(),
        );
        let (bm, bn) = (ta.shape[0], tb.shape[1]);
        let (a_stage, b_stage) = stagings(self.program, g);
        let (a_kmajor, b_kmajor) = (a_stage.row_dim == 0, b_stage.row_dim == 1);
        let a_bytes = bm * ROW;
        let stage_bytes = (bm + bn) * ROW;
        let smem = self.b.dyn_shared_aligned(Type::U8, 1024)?;
        let tid = self.b.thread_idx(Dim::X)?;

        let (lo_v, hi_v, step_v) = (self.scalar(lo)?, self.scalar(hi)?, self.scalar(step)?);
        let trips = self.trip_count(lo_v, hi_v, step_v)?;
        let accs = self.pack_accs(g.dot, init, bm, bn)?;

        let issue = |lw: &mut Self, j: ValueId, stage: ValueId| -> TileResult<()> {
            // The body's scalars for iteration j: iv = lo + j * step.
            let at = lw.b.mul(j, step_v)?;
            let iv_j = lw.b.add(lo_v, at)?;
            lw.set_scalar(iv, iv_j);
            for op in body {
                if !matches!(op, Op::Load { .. } | Op::Dot { .. }) {
                    lw.op(op)?;
                }
            }
            let sb = lw.u32(stage_bytes)?;
            let base = lw.b.mul(stage, sb)?;
            let b_base = {
                let ab = lw.u32(a_bytes)?;
                lw.b.add(base, ab)?
            };
            lw.stage_async(&a_stage, smem, base, tid)?;
            lw.stage_async(&b_stage, smem, b_base, tid)
        };

        // With 3 stages or more, one wgmma group stays in flight across
        // iterations (`overlap`): iteration j waits only for group j - 1, so
        // the stage of iteration j - 2 is the one every warp is done with,
        // and copies run `stages - 2` iterations ahead; else `stages - 1`.
        let overlap = stages >= 3;
        let ahead = if overlap { stages - 2 } else { stages - 1 };
        // Prologue: iterations 0 .. ahead, one group each.
        for s in 0..ahead {
            let s_v = self.u32(s)?;
            let live = self.b.lt(s_v, trips)?;
            let frame = self.b.begin_if(live, &[])?;
            issue(self, s_v, s_v)?;
            self.b.end_if(frame, &[])?;
            self.b.cp_async_commit()?;
        }

        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let frame = self.b.begin_for(zero, trips, one, &accs)?;
        let j = frame.iv;
        let mut accs = frame.carried.clone();
        let stages_v = self.u32(stages)?;
        let stage = self.b.rem(j, stages_v)?;
        if stages == 1 {
            issue(self, j, stage)?;
            self.b.cp_async_commit()?;
            self.b.cp_async_wait(0)?;
        } else {
            // Groups committed so far: `ahead` + j; group j must be complete.
            self.b.cp_async_wait(ahead - 1)?;
        }
        self.b.fence_proxy_async()?;
        self.b.barrier()?;
        let sb = self.u32(stage_bytes)?;
        let a_base = self.b.mul(stage, sb)?;
        let ab = self.u32(a_bytes)?;
        let b_base = self.b.add(a_base, ab)?;
        let a_ptr = self.b.ptr_add(smem, a_base)?;
        let b_ptr = self.b.ptr_add(smem, b_base)?;
        self.wgmma_stage(
            &mut accs, a_ptr, b_ptr, bn, a_kmajor, b_kmajor, g.inputs, &ta.elem,
        )?;
        if stages > 1 {
            let ahead = self.u32(ahead)?;
            let next = self.b.add(j, ahead)?;
            let live = self.b.lt(next, trips)?;
            let f = self.b.begin_if(live, &[])?;
            let next_stage = self.b.rem(next, stages_v)?;
            issue(self, next, next_stage)?;
            self.b.end_if(f, &[])?;
            self.b.cp_async_commit()?;
        }
        self.b.wgmma_wait_group(u32::from(overlap))?;
        if stages == 1 {
            self.b.barrier()?;
        }
        let accs = self.b.end_for(frame, &accs)?;
        self.b.wgmma_wait_group(0)?;
        // Nothing is in flight but empty groups; later uses of shared memory
        // (none today) would need the CTA past the last read.
        self.b.cp_async_wait(0)?;
        self.b.barrier()?;

        self.unpack_accs(g.dot, &accs, bm, bn, result)
    }

    /// The trip count of `for iv in (lo..hi).step_by(step)`:
    /// ceil((hi - lo) / step), 0 when hi <= lo.
    pub(super) fn trip_count(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
    ) -> TileResult<ValueId> {
        let one = self.u32(1)?;
        let span = self.b.sub(hi, lo)?;
        let span = self.b.add(span, step)?;
        let span = self.b.sub(span, one)?;
        let n = self.b.div(span, step)?;
        let zero = self.u32(0)?;
        let any = self.b.gt(hi, lo)?;
        Ok(self.b.select(any, n, zero)?)
    }

    /// The registers of `init` (in the wgmma layout of `dot`, `[bm, bn]`) as
    /// one `vec<f32, bn / 2>` per repetition along M, as `wgmma` takes them.
    pub(super) fn pack_accs(
        &mut self,
        dot: TileId,
        init: TileId,
        bm: u32,
        bn: u32,
    ) -> TileResult<Vec<ValueId>> {
        let layout = self.layout(dot)?;
        let shape = [bm, bn];
        let reps = bm / (16 * self.schedule.warps);
        let vec_ty = Type::Vector(zyntax_hir::ScalarType::F32, bn / 2);
        let init_regs = self.regs(init)?;
        let mut accs = Vec::new();
        for rep in 0..reps {
            let mut v = self.b.wgmma_zero(vec_ty.clone())?;
            for i in 0..bn / 2 {
                let r = layout.reg_index(&shape, &wgmma_reg_dims(rep, i));
                v = self.b.insert(v, init_regs[r as usize], i)?;
            }
            accs.push(v);
        }
        Ok(accs)
    }

    /// Unpacks the accumulator vectors into the registers of `result`.
    pub(super) fn unpack_accs(
        &mut self,
        dot: TileId,
        accs: &[ValueId],
        bm: u32,
        bn: u32,
        result: TileId,
    ) -> TileResult<()> {
        let layout = self.layout(dot)?;
        let shape = [bm, bn];
        let zero = self.u32(0)?;
        let mut regs = vec![zero; layout.num_regs(&shape) as usize];
        for (rep, &v) in accs.iter().enumerate() {
            for i in 0..bn / 2 {
                let r = layout.reg_index(&shape, &wgmma_reg_dims(rep as u32, i));
                regs[r as usize] = self.b.extract(v, i)?;
            }
        }
        self.set_tile(result, regs);
        Ok(())
    }

    /// Copies one operand box of the current iteration (origins from the
    /// body's scalars) into shared memory at byte `base` of `smem`, swizzled.
    ///
    /// Thread `t` copies chunks `t, t + threads, ...`: first each with one
    /// `cp.async` where it can (unrolled), then, only if one of them could
    /// not, all of them again in a loop with a run-time start that copies the
    /// others element by element. Unrolled element-by-element copies cost
    /// about 90 registers live through the K loop (LLVM hoists their
    /// loop-invariant parts); a loop keeps them out of it.
    fn stage_async(
        &mut self,
        st: &Staging,
        smem: ValueId,
        base: ValueId,
        tid: ValueId,
    ) -> TileResult<()> {
        let view = self.program.view(st.view).clone();
        let fast = view.unit_stride_dim == Some(st.col_dim) && view.align_bytes.unwrap_or(0) >= 16;
        let threads = self.schedule.threads();
        let elem_bytes = st.elem.size_bytes().unwrap_or(2) as u32;
        let total = st.rows * st.cols / (16 / elem_bytes);
        let mut bad: Option<ValueId> = None;
        // The common case: the whole box is inside the view and every chunk
        // 16-byte aligned (row stride and origin multiples of a chunk). One
        // uniform test, then every chunk is one `cp.async` with no test of
        // its own: the warps' instruction streams, not the tensor cores,
        // bound the loop (ncu on an H200: 0.38 instructions issued per
        // cycle and scheduler, dependent-issue stalls), and the per-chunk
        // tests were most of it.
        let whole = if fast {
            let ok = self.whole_box(st)?;
            let mut f = self.b.begin_if(ok, &[])?;
            for i in 0..total.div_ceil(threads) {
                let first = self.u32(i * threads)?;
                let q = self.b.add(tid, first)?;
                let g = if total.is_multiple_of(threads) {
                    None
                } else {
                    let total_v = self.u32(total)?;
                    let inside = self.b.lt(q, total_v)?;
                    Some(self.b.begin_if(inside, &[])?)
                };
                let c = self.chunk(st, smem, base, q)?;
                let src = self.b.ptr_add(c.src_base, c.at)?;
                self.b.cp_async(16, CacheHint::Cg, c.dst, src)?;
                if let Some(g) = g {
                    self.b.end_if(g, &[])?;
                }
            }
            self.b.begin_else(&mut f, &[])?;
            Some(f)
        } else {
            None
        };
        if fast {
            for i in 0..total.div_ceil(threads) {
                let first = self.u32(i * threads)?;
                let q = self.b.add(tid, first)?;
                let inside = if !total.is_multiple_of(threads) {
                    let total_v = self.u32(total)?;
                    Some(self.b.lt(q, total_v)?)
                } else {
                    None
                };
                let c = self.chunk(st, smem, base, q)?;
                let ok = match inside {
                    Some(inside) => self.b.and(c.ok, inside)?,
                    None => c.ok,
                };
                let f = self.b.begin_if(ok, &[])?;
                let src = self.b.ptr_add(c.src_base, c.at)?;
                self.b.cp_async(16, CacheHint::Cg, c.dst, src)?;
                self.b.end_if(f, &[])?;
                let failed = self.b.not(c.ok)?;
                let failed = match inside {
                    Some(inside) => self.b.and(failed, inside)?,
                    None => failed,
                };
                bad = Some(match bad {
                    Some(b) => self.b.or(b, failed)?,
                    None => failed,
                });
            }
        }
        let slow = self.b.bconst(true)?;
        let f = self.b.begin_if(bad.unwrap_or(slow), &[])?;
        let (total_v, step) = (self.u32(total)?, self.u32(threads)?);
        let chunks = self.b.begin_for(tid, total_v, step, &[])?;
        let c = self.chunk(st, smem, base, chunks.iv)?;
        let todo = if fast { self.b.not(c.ok)? } else { slow };
        let g = self.b.begin_if(todo, &[])?;
        self.copy_elements(st, &c)?;
        self.b.end_if(g, &[])?;
        self.b.end_for(chunks, &[])?;
        self.b.end_if(f, &[])?;
        if let Some(f) = whole {
            self.b.end_if(f, &[])?;
        }
        Ok(())
    }

    /// Whether the whole box of `st` is inside its view and every chunk's
    /// first element offset a multiple of a chunk (the view promises unit
    /// stride along the rows and a 16-byte aligned base).
    fn whole_box(&mut self, st: &Staging) -> TileResult<ValueId> {
        let vals = self.views[st.view.0 as usize].clone();
        let elem_bytes = st.elem.size_bytes().unwrap_or(2) as u32;
        let pc = self.u32(16 / elem_bytes)?;
        let (o_r, o_c) = (
            self.scalar(st.origin[st.row_dim])?,
            self.scalar(st.origin[st.col_dim])?,
        );
        let (rows, cols) = (self.u32(st.rows)?, self.u32(st.cols)?);
        let end_r = self.b.add(o_r, rows)?;
        let rows_ok = self.b.le(end_r, vals.shape[st.row_dim])?;
        let end_c = self.b.add(o_c, cols)?;
        let cols_ok = self.b.le(end_c, vals.shape[st.col_dim])?;
        let zero = self.u32(0)?;
        let stride_rem = self.b.rem(vals.strides[st.row_dim], pc)?;
        let stride_ok = self.b.eq(stride_rem, zero)?;
        let origin_rem = self.b.rem(o_c, pc)?;
        let origin_ok = self.b.eq(origin_rem, zero)?;
        let ok = self.b.and(rows_ok, cols_ok)?;
        let ok = self.b.and(ok, stride_ok)?;
        Ok(self.b.and(ok, origin_ok)?)
    }

    /// Chunk `q` of the box: its shared destination (swizzled), its global
    /// coordinates, and whether one 16-byte `cp.async` can copy it (inside
    /// the view and aligned).
    fn chunk(
        &mut self,
        st: &Staging,
        smem: ValueId,
        base: ValueId,
        q: ValueId,
    ) -> TileResult<Chunk> {
        let vals = self.views[st.view.0 as usize].clone();
        let elem_bytes = st.elem.size_bytes().unwrap_or(2) as u32;
        let per_chunk = 16 / elem_bytes;
        let (o_r, o_c) = (
            self.scalar(st.origin[st.row_dim])?,
            self.scalar(st.origin[st.col_dim])?,
        );
        let (ext_r, ext_c) = (vals.shape[st.row_dim], vals.shape[st.col_dim]);
        let str_r = vals.strides[st.row_dim];
        let cpr = self.u32(st.cols / per_chunk)?;
        let cc = self.b.rem(q, cpr)?;
        let r = self.b.div(q, cpr)?;
        // Byte offset: box (cc / 8), row r, chunk (cc % 8) ^ (r % 8).
        let eight = self.u32(8)?;
        let box_i = self.b.div(cc, eight)?;
        let box_bytes = self.u32(st.rows * ROW)?;
        let off = self.b.mul(box_i, box_bytes)?;
        let row_bytes = self.u32(ROW)?;
        let r_off = self.b.mul(r, row_bytes)?;
        let off = self.b.add(off, r_off)?;
        let c8 = self.b.rem(cc, eight)?;
        let r8 = self.b.rem(r, eight)?;
        let sw = self.b.xor(c8, r8)?;
        let sixteen = self.u32(16)?;
        let sw = self.b.mul(sw, sixteen)?;
        let off = self.b.add(off, sw)?;
        let off = self.b.add(base, off)?;
        let dst = self.b.ptr_add(smem, off)?;
        let gr = self.b.add(o_r, r)?;
        let pc = self.u32(per_chunk)?;
        let c0 = self.b.mul(cc, pc)?;
        let gc = self.b.add(o_c, c0)?;
        let row_ok = self.b.lt(gr, ext_r)?;
        // The fast test assumes unit stride along the row (the view's promise).
        let end = self.b.add(gc, pc)?;
        let cols_ok = self.b.le(end, ext_c)?;
        let row_at = self.b.mul(gr, str_r)?;
        let at = self.b.add(row_at, gc)?;
        let m = self.b.rem(at, pc)?;
        let zero = self.u32(0)?;
        let aligned = self.b.eq(m, zero)?;
        let ok = self.b.and(row_ok, cols_ok)?;
        let ok = self.b.and(ok, aligned)?;
        Ok(Chunk {
            dst,
            src_base: vals.base,
            at,
            gr,
            gc,
            row_ok,
            ok,
        })
    }

    /// Copies chunk `c` element by element: the `room` elements left in its
    /// row (0 for a row outside the view), then zeros to the chunk's end.
    fn copy_elements(&mut self, st: &Staging, c: &Chunk) -> TileResult<()> {
        let vals = self.views[st.view.0 as usize].clone();
        let elem_bytes = st.elem.size_bytes().unwrap_or(2) as u32;
        let pc = self.u32(16 / elem_bytes)?;
        let (ext_c, str_r, str_c) = (
            vals.shape[st.col_dim],
            vals.strides[st.row_dim],
            vals.strides[st.col_dim],
        );
        let dst_e = self
            .b
            .ptr_cast(c.dst, Type::ptr(AddrSpace::Shared, st.elem.clone()))?;
        let row_at = self.b.mul(c.gr, str_r)?;
        let col_at = self.b.mul(c.gc, str_c)?;
        let at0 = self.b.add(row_at, col_at)?;
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let room = {
            let left = self.b.sub(ext_c, c.gc)?;
            let cols = self.b.lt(c.gc, ext_c)?;
            let ok = self.b.and(c.row_ok, cols)?;
            let left = self.b.select(ok, left, zero)?;
            self.b.min(left, pc)?
        };
        let copy = self.b.begin_for(zero, room, one, &[])?;
        let step = self.b.mul(copy.iv, str_c)?;
        let at = self.b.add(at0, step)?;
        let src = self.b.ptr_add(vals.base, at)?;
        let v = self.b.load(src)?;
        let p = self.b.ptr_add(dst_e, copy.iv)?;
        self.b.store(p, v)?;
        self.b.end_for(copy, &[])?;
        let zero_e = if st.elem.is_float() {
            self.b.fconst(st.elem.clone(), 0.0)?
        } else {
            self.b.iconst(st.elem.clone(), 0)?
        };
        let fill = self.b.begin_for(room, pc, one, &[])?;
        let p = self.b.ptr_add(dst_e, fill.iv)?;
        self.b.store(p, zero_e)?;
        self.b.end_for(fill, &[])?;
        Ok(())
    }
}

/// One 16-byte chunk of a staged box (see [`Lowerer::chunk`]).
struct Chunk {
    dst: ValueId,
    src_base: ValueId,
    /// Element offset of the first element if the row has unit stride.
    at: ValueId,
    gr: ValueId,
    gc: ValueId,
    row_ok: ValueId,
    ok: ValueId,
}

/// An internal error for a loop the lowering was told is a GEMM loop.
pub(super) fn not_a_gemm_loop() -> TileError {
    TileError::Internal("a dot in the wgmma layout outside a GEMM loop".into())
}
