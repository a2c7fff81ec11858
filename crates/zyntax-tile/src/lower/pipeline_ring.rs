//! A loop of row-statistics wgmma `dot`s fed by a TMA ring (sm_90a,
//! `Schedule::warp_specialize`): attention's key loop, `S = Q K^T` and
//! `O += P V` per key block, with K and V loaded by TMA into an mbarrier
//! ring by a producer warp instead of through registers and a CTA barrier.
//!
//! - The program: one loop at the top level whose body has wgmma `dot`s
//!   (`dot_wgmma.rs`, the online softmax's), each with a `b` loaded in the
//!   body from a view with a unit-stride dim among its last two, 16-byte
//!   alignment and 2-byte elements, 64-element multiples along that dim, and
//!   read by nothing else; each `a` either loop-invariant (Q, staged once
//!   before the loop) or the previous `dot`'s accumulator (P, from
//!   registers); no shared-memory scratch (no CTA barrier after the roles
//!   split). [`ring_plan`] says whether a program is one.
//! - Roles: the schedule's `warps` consumer warps run the program (every op
//!   but those loads) and one producer warp after them, whose first lane
//!   replays the program's scalar ops and, per iteration, waits for the
//!   stage to be free (`empty`), announces its bytes on `full` and issues the
//!   TMA loads of every ring operand (`pipeline_ws.rs`'s `acquire`). TMA
//!   zero-fills outside the view (key tails, hd 96 on tiles of 128).
//! - Shared memory: the loop-invariant `a`s (K-major, 128-byte swizzle),
//!   then `stages` stages holding each `b` in the layout the wgmma
//!   descriptors read (K-major: rows are N; N-major: rows are K; boxes of 64
//!   elements, TMA's `SWIZZLE_128B`), then a `full` and an `empty` mbarrier
//!   per stage.
//! - Consumers: iteration `j` waits for `full[j % stages]`, the `dot`s read
//!   their `b` from the stage by descriptor (no staging, no barrier) and
//!   each warp hands the stage back (`empty`, one arrival per warp) after the
//!   last `dot`'s wgmmas are done. Staging Q once meets the consumers at a
//!   named barrier (the producer never reaches it).
//! - Tensor maps: one per ring operand, after the program's parameters: over
//!   the view's unit-stride dim (inner), its other trailing dim (outer), then
//!   its leading dims from the last to the first, boxes of 64 x rows x 1 ...
//!   ([`TensorMapParam`]; the leading dims are indexed by the load's origin).
//!
//! Every wgmma still waits for its group at once (`dot_wgmma.rs`); what the
//! ring removes is the register round trip of K and V and the CTA barrier
//! that kept the two consumer warpgroups in lockstep.

use super::dot_mma;
use super::dot_wgmma::{align1024, boxed_bytes, stages_in};
use super::pipeline::{is_wgmma, Staging};
use super::pipeline_ws::{is_scalar_op, roles_apply, setmaxnreg_counts, Ring, TensorMapParam};
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Const, Op, Param, ScalarId, TileId, TileProgram, Value};
use crate::schedule::Schedule;
use std::collections::HashMap;
use zyntax_hir::{AddrSpace, Type, ValueId};

/// Elements of one TMA box along the unit-stride dim (128 bytes of 2-byte
/// elements: one swizzled row).
const BOX: u32 = 64;

/// The named barriers of the warpgroups' turns (`Lowerer::turns_begin`):
/// this one and the next (1 is the consumers' meeting after staging Q).
const TURN_BARRIER: u32 = 2;

/// A `dot`'s `b` loaded by TMA into the ring.
#[derive(Clone, Debug)]
pub(crate) struct RingOperand {
    /// The `dot`'s result.
    pub dot: TileId,
    /// The tiles the consumers skip: the load's result and, if layout
    /// inference put one between, the conversion that gives the `b`.
    pub skip: Vec<TileId>,
    /// The TMA boxes (`pipeline_ws.rs`'s `tma_stage`): rows of a box along
    /// the view's other trailing dim (`row_dim`), elements along its
    /// unit-stride dim (`col_dim`, a multiple of [`BOX`]).
    st: Staging,
    /// K-major (the view's unit-stride dim is the tile's dim 0, K): rows are
    /// N; else rows are K.
    pub kmajor: bool,
    /// Byte offset within a stage.
    pub offset: u32,
}

/// The ring lowering of a program (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct RingPlan {
    /// The loops (indices in the program's body) in program order, each
    /// with its [`Rotation`] if it runs rotated; the ring runs on across
    /// them (attention's split program: masked, whole and masked blocks).
    pub loops: Vec<(usize, Option<Rotation>)>,
    pub operands: Vec<RingOperand>,
    pub maps: Vec<TensorMapParam>,
    /// Where each loop-invariant `a` is staged, by its `dot`'s result.
    pub once: HashMap<TileId, u32>,
    /// Byte offset of stage 0, bytes of a stage, stages.
    pub ring: u32,
    pub stage_bytes: u32,
    pub stages: u32,
}

/// A body `[before] d1 [between] d2` (two ring `dot`s, nothing after `d2`)
/// whose `d2` accumulates into carried value `acc` (`d2`'s result is
/// `acc`'s yield) and whose `before` and `d1` read no carried tile runs
/// rotated: iteration `j` issues `d1` of key block `j + 1`, then `d2` of
/// block `j`, waits for `d1` only (`wgmma.wait_group 1`) and runs
/// `between` of block `j + 1` (the softmax) while `d2`'s wgmmas run; it waits
/// for them before the first op of `between` that reads `acc` or makes
/// `d2`'s `a` (P's registers, which the wgmmas in flight still read).
/// FlashAttention-3's intra-warpgroup overlap.
#[derive(Clone, Debug)]
pub(crate) struct Rotation {
    /// Indices of `d1` and `d2` in the body.
    pub d1: usize,
    pub d2: usize,
    /// Index of the carried `acc` among the loop's values.
    pub acc: usize,
}

/// Threads of the producer beside `warps` consumer warps: one warp, or with
/// two consumer warpgroups or more a warpgroup whose registers go to the
/// consumers (`setmaxnreg`, as `pipeline_ws.rs` does). ptxas allots
/// registers as if a CTA had a whole number of warpgroups: at 8 consumer
/// warps and a producer warp (288 threads) it capped the consumers at 168
/// registers, and the rotated 128x128 hd-128 loop spilled 520 bytes.
pub(crate) fn producer_threads(warps: u32) -> u32 {
    match setmaxnreg_counts(warps) {
        Some(_) => 128,
        None => 32,
    }
}

impl RingPlan {
    /// Dynamic shared memory: the staged `a`s, the stages, the mbarriers.
    pub fn bytes(&self) -> u64 {
        u64::from(self.ring + self.stages * self.stage_bytes) + 16 * u64::from(self.stages)
    }
}

/// Whether `program` lowers on the ring under `schedule` (see the module
/// doc), and how.
pub(crate) fn ring_plan(
    program: &TileProgram,
    layouts: &Layouts,
    schedule: &Schedule,
    scratch_bytes: u64,
) -> Option<RingPlan> {
    // Wgmma dots outside the loops would stage behind a CTA barrier.
    let outside = program.body.iter().any(|op| match op {
        Op::Dot { out, .. } => is_wgmma(layouts.get(*out)),
        _ => false,
    });
    if outside || !roles_apply(schedule, scratch_bytes) {
        return None;
    }
    let mut loops = Vec::new();
    let mut once = HashMap::new();
    let mut staged_a: HashMap<TileId, u32> = HashMap::new();
    let (mut end, mut operands, mut stage_bytes) = (0u64, Vec::new(), None);
    for (at, op) in program.body.iter().enumerate() {
        let Op::For { body, .. } = op else {
            continue;
        };
        if !stages_in(layouts, body) || body.iter().any(|op| matches!(op, Op::For { .. })) {
            return None;
        }
        // A loop-invariant `a` is staged once for every loop that reads it.
        for (dot, a) in dot_mma::hoisted(program, layouts, body) {
            let at = *staged_a.entry(a).or_insert_with(|| {
                let ta = program.tile(a);
                let at = end as u32;
                end += align1024(boxed_bytes(ta.shape[0], ta.shape[1]));
                at
            });
            once.insert(dot, at);
        }
        let mut stage = 0u32;
        for op in body {
            let Op::Dot { out, a, b, .. } = op else {
                continue;
            };
            if !is_wgmma(layouts.get(*out)) {
                continue;
            }
            let a_ok = once.contains_key(out) || dot_mma::a_in_registers(layouts, *a, *out);
            let mut operand = ring_operand(program, body, *out, *b)?;
            if !a_ok {
                return None;
            }
            operand.offset = stage;
            stage += align1024(u64::from(operand.st.rows * operand.st.cols * 2)) as u32;
            operands.push(operand);
        }
        // Every loop fills the same stages with the same operands.
        if *stage_bytes.get_or_insert(stage) != stage {
            return None;
        }
        // One wgmma group in flight (`Schedule::wgmma_in_flight`): rotated.
        let rotate = match schedule.wgmma_in_flight {
            0 => None,
            _ => rotation(op, layouts),
        };
        loops.push((at, rotate));
    }
    // One map per view: the loops' operands of a view share it.
    let mut maps: Vec<TensorMapParam> = Vec::new();
    for o in &operands {
        let view = program.view(o.st.view);
        if maps.iter().any(|m| m.view == view.name) {
            continue;
        }
        let param = program
            .params
            .iter()
            .position(|p| matches!(p, Param::View(v) if *v == o.st.view))?;
        maps.push(TensorMapParam {
            view: view.name.clone(),
            param,
            inner_dim: o.st.col_dim,
            outer_dim: o.st.row_dim,
            box_dims: [BOX, o.st.rows],
        });
    }
    if loops.is_empty() {
        return None;
    }
    let per_loop = operands.len() / loops.len();
    if maps.len() != per_loop
        || (0..operands.len()).any(|i| {
            let (o, o0) = (&operands[i], &operands[i % per_loop]);
            o.st.view != o0.st.view || o.st.rows != o0.st.rows || o.st.cols != o0.st.cols
        })
    {
        return None;
    }
    Some(RingPlan {
        loops,
        operands,
        maps,
        once,
        ring: end as u32,
        stage_bytes: stage_bytes?,
        stages: schedule.stages.max(2),
    })
}

/// The [`Rotation`] of `the_loop`, if its body is one.
fn rotation(the_loop: &Op, layouts: &Layouts) -> Option<Rotation> {
    let Op::For {
        args, body, yields, ..
    } = the_loop
    else {
        return None;
    };
    let dots: Vec<usize> = (0..body.len())
        .filter(|&i| matches!(&body[i], Op::Dot { out, .. } if is_wgmma(layouts.get(*out))))
        .collect();
    let [d1, d2] = dots[..] else { return None };
    let (
        Op::Dot {
            out: o1, acc: c1, ..
        },
        Op::Dot {
            out, a, acc: c2, ..
        },
    ) = (&body[d1], &body[d2])
    else {
        return None;
    };
    if d2 + 1 != body.len() {
        return None;
    }
    let acc = yields.iter().position(|y| *y == Value::Tile(*out))?;
    if !matches!(args[acc], Value::Tile(_)) {
        return None;
    }
    // `d2`'s operands come from `between`; `d1` and what precedes it read
    // no carried tile (they run a key block ahead).
    let mut between = std::collections::HashSet::new();
    dot_mma::defined(&body[d1 + 1..d2], &mut between);
    let carried: Vec<TileId> = args
        .iter()
        .filter_map(|v| match v {
            Value::Tile(t) => Some(*t),
            _ => None,
        })
        .collect();
    let early = uses(&body[..=d1], &carried) > 0;
    if !between.contains(a) || !between.contains(c2) || early || *c1 == *o1 {
        return None;
    }
    Some(Rotation { d1, d2, acc })
}

/// The ring operand that `b` of `dot` would be: a zero-filled load in `body`
/// (possibly through a layout conversion) that nothing else reads.
fn ring_operand(program: &TileProgram, body: &[Op], dot: TileId, b: TileId) -> Option<RingOperand> {
    let mut skip = vec![b];
    let mut src = b;
    for op in body {
        if let Op::ConvertLayout { out, tile } = op {
            if *out == b {
                src = *tile;
                skip.push(src);
            }
        }
    }
    let (view, origin) = body.iter().find_map(|op| match op {
        Op::Load {
            out,
            view,
            origin,
            other,
        } if *out == src && is_zero(other) => Some((*view, origin.clone())),
        _ => None,
    })?;
    let v = program.view(view);
    let (tile, rank) = (program.tile(src), v.rank);
    if rank < 2 || tile.shape.len() != 2 || v.align_bytes.unwrap_or(0) < 16 {
        return None;
    }
    if v.elem.size_bytes() != Some(2) {
        return None;
    }
    let unit = v.unit_stride_dim?;
    // The tile's dims are the view's last two.
    let kmajor = match unit.checked_sub(rank - 2)? {
        0 => true,
        1 => false,
        _ => return None,
    };
    let (k, n) = (tile.shape[0], tile.shape[1]);
    let (rows, cols) = if kmajor { (n, k) } else { (k, n) };
    if !cols.is_multiple_of(BOX) || rows > 256 {
        return None;
    }
    // Nothing but the `dot` (and the conversion) reads the loaded tile.
    if uses(&program.body, &skip) != 1 {
        return None;
    }
    let outer = if kmajor { rank - 1 } else { rank - 2 };
    let st = Staging {
        view,
        origin,
        row_dim: outer,
        col_dim: unit,
        rows,
        cols,
        elem: v.elem.clone(),
    };
    Some(RingOperand {
        dot,
        skip,
        st,
        kmajor,
        offset: 0,
    })
}

/// Whether a load's `other` is zero (what TMA fills outside the view).
fn is_zero(c: &Const) -> bool {
    match *c {
        Const::Int(i) => i == 0,
        Const::Float(f) => f == 0.0,
    }
}

/// How many ops of `ops` (loops included) read any of `tiles`, not counting
/// the conversions between them.
fn uses(ops: &[Op], tiles: &[TileId]) -> usize {
    let reads = |t: &TileId| tiles.contains(t);
    ops.iter()
        .map(|op| match op {
            Op::ConvertLayout { out, tile } if tiles.contains(out) && reads(tile) => 0,
            Op::Store { tile, .. } | Op::AtomicAdd { tile, .. } => usize::from(reads(tile)),
            Op::Map { args, .. } => usize::from(args.iter().any(reads)),
            Op::Broadcast { tile, .. }
            | Op::Cast { tile, .. }
            | Op::Reduce { tile, .. }
            | Op::ConvertLayout { tile, .. } => usize::from(reads(tile)),
            Op::Dot { a, b, acc, .. } => usize::from(reads(a) || reads(b) || reads(acc)),
            Op::For {
                inits,
                yields,
                body,
                ..
            } => {
                let carried = inits
                    .iter()
                    .chain(yields)
                    .any(|v| matches!(v, Value::Tile(t) if reads(t)));
                usize::from(carried) + uses(body, tiles)
            }
            _ => 0,
        })
        .sum()
}

/// The consumers' view of the ring while they lower the program.
#[derive(Clone)]
pub(crate) struct RingState {
    plan: RingPlan,
    ring: Ring,
    /// The stage of the current iteration (inside the loop).
    stage: Option<ValueId>,
    /// Ring uses of the loops before the current one, and how many.
    base: ValueId,
    loops_done: usize,
    /// The loop-invariant `a`s staged so far (once for all loops).
    staged: Vec<TileId>,
}

impl Lowerer<'_> {
    /// Lowers the whole program body on the ring (see the module doc);
    /// `tmaps` are the ring operands' tensor maps.
    pub(super) fn ring_kernel(&mut self, plan: &RingPlan, tmaps: &[ValueId]) -> TileResult<()> {
        let warps = self.schedule.warps;
        let smem = self.b.dyn_shared_aligned(Type::U8, 1024)?;
        let bars_at = self.u32(plan.ring + plan.stages * plan.stage_bytes)?;
        let bars = self.b.ptr_add(smem, bars_at)?;
        let bars = self
            .b
            .ptr_cast(bars, Type::ptr(AddrSpace::Shared, Type::U64))?;
        let ring = Ring {
            smem,
            bars,
            stages: plan.stages,
            stage_bytes: plan.stage_bytes,
            a_bytes: 0,
            cluster: None,
            store: None,
        };
        // One arrival per consumer warp hands a stage back.
        self.init_ring(&ring, warps)?;
        // With two consumer warpgroups the producer is a warpgroup that gives
        // its registers to them (see `producer_threads`).
        let (mut roles, leader) = self.producer_side(warps)?;
        let f = self.b.begin_if(leader, &[])?;
        self.ring_producer(plan, &ring, tmaps)?;
        self.b.end_if(f, &[])?;
        self.consumer_side(&mut roles, warps)?;
        let base = self.u32(0)?;
        self.ring = Some(RingState {
            plan: plan.clone(),
            ring,
            stage: None,
            base,
            loops_done: 0,
            staged: Vec::new(),
        });
        for op in &self.program.body {
            self.op(op)?;
        }
        self.ring = None;
        self.b.end_if(roles, &[])?;
        Ok(())
    }

    /// The producer: the program's scalar ops and, for each loop, per
    /// iteration its scalar ops (the origins) and the TMA loads of the
    /// loop's ring operands into the iteration's stage, the ring counting on
    /// across the loops.
    fn ring_producer(&mut self, plan: &RingPlan, ring: &Ring, tmaps: &[ValueId]) -> TileResult<()> {
        let per_loop = plan.operands.len() / plan.loops.len();
        let mut counter = self.u32(0)?;
        let mut loop_no = 0;
        let program = self.program;
        for op in &program.body {
            let Some((bounds, trips, body)) = self.loop_trips(op)? else {
                if is_scalar_op(op) {
                    self.op(op)?;
                }
                continue;
            };
            let mine = &plan.operands[loop_no * per_loop..(loop_no + 1) * per_loop];
            let uses = (counter, trips);
            self.ring_produce_loop(plan, ring, tmaps, mine, uses, bounds, body)?;
            counter = self.b.add(counter, trips)?;
            loop_no += 1;
        }
        Ok(())
    }

    /// The producer's loop of `trips` iterations from ring use `counter` on
    /// (see [`Self::ring_producer`]): `operands` are the loop's.
    #[allow(clippy::too_many_arguments)]
    fn ring_produce_loop(
        &mut self,
        plan: &RingPlan,
        ring: &Ring,
        tmaps: &[ValueId],
        operands: &[RingOperand],
        (counter, trips): (ValueId, ValueId),
        (lo, step, iv): (ValueId, ValueId, ScalarId),
        body: &[Op],
    ) -> TileResult<()> {
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let frame = self.b.begin_for(zero, trips, one, &[])?;
        let (stage, full) = self.producer_step(ring, counter, frame.iv, (lo, step, iv), body)?;
        let sb = self.u32(plan.stage_bytes)?;
        let base = self.b.mul(stage, sb)?;
        for (o, &tmap) in operands.iter().zip(tmaps) {
            let at = self.u32(plan.ring + o.offset)?;
            let at = self.b.add(base, at)?;
            self.tma_stage(&o.st, ring, at, tmap, full, 0)?;
        }
        self.b.end_for(frame, &[])?;
        Ok(())
    }

    /// Whether the consumers skip `op` (a ring operand's load or conversion).
    pub(super) fn ring_skips(&self, op: &Op) -> bool {
        let Some(r) = &self.ring else { return false };
        let out = match op {
            Op::Load { out, .. } | Op::ConvertLayout { out, .. } => *out,
            _ => return false,
        };
        r.plan.operands.iter().any(|o| o.skip.contains(&out))
    }

    /// Where the wgmma `dot` `out` reads its operands on the ring: (the
    /// staged `a`'s byte offset, or `None` for `a` in registers, `b`'s byte
    /// offset, whether `b` is K-major); `None` off the ring.
    pub(super) fn ring_place(
        &mut self,
        out: TileId,
    ) -> TileResult<Option<(Option<ValueId>, ValueId, bool)>> {
        let Some(r) = self.ring.clone() else {
            return Ok(None);
        };
        let (Some(o), Some(stage)) = (r.plan.operands.iter().find(|o| o.dot == out), r.stage)
        else {
            return Err(TileError::Internal(
                "a wgmma dot off the ring's loop".into(),
            ));
        };
        let a_at = match r.plan.once.get(&out) {
            Some(&at) => Some(self.u32(at)?),
            None => None,
        };
        let sb = self.u32(r.plan.stage_bytes)?;
        let b_at = self.b.mul(stage, sb)?;
        let off = self.u32(r.plan.ring + o.offset)?;
        let b_at = self.b.add(b_at, off)?;
        Ok(Some((a_at, b_at, o.kmajor)))
    }

    /// On the ring, where the loop-invariant `a` of `dot` is staged once.
    pub(super) fn ring_once(&self, dot: TileId) -> Option<u32> {
        self.ring
            .as_ref()
            .and_then(|r| r.plan.once.get(&dot).copied())
    }

    /// The consumers meet (after staging Q): a named barrier of the
    /// consumer warps on the ring, else a CTA barrier.
    pub(super) fn consumers_sync(&mut self) -> TileResult<()> {
        match &self.ring {
            Some(_) => {
                let threads = 32 * self.schedule.warps;
                Ok(self.b.named_barrier(false, 1, threads)?)
            }
            None => Ok(self.b.barrier()?),
        }
    }

    /// On the ring, the rotation of the loop about to be lowered, if it runs
    /// rotated.
    pub(super) fn ring_rotation(&self) -> Option<Rotation> {
        let r = self.ring.as_ref()?;
        r.plan
            .loops
            .get(r.loops_done)
            .and_then(|(_, rot)| rot.clone())
    }

    /// On the ring, after a loop from `lo` to `hi` by `step`: the next
    /// loop's ring uses start after its trips.
    pub(super) fn ring_loop_done(
        &mut self,
        lo: ValueId,
        hi: ValueId,
        step: ValueId,
    ) -> TileResult<()> {
        let Some(base) = self.ring.as_ref().map(|r| r.base) else {
            return Ok(());
        };
        let trips = self.trip_count(lo, hi, step)?;
        let base = self.b.add(base, trips)?;
        if let Some(r) = self.ring.as_mut() {
            (r.base, r.loops_done, r.stage) = (base, r.loops_done + 1, None);
        }
        Ok(())
    }

    /// The ring use of iteration `j` of the current loop.
    fn ring_use(&mut self, j: ValueId) -> TileResult<ValueId> {
        match self.ring.as_ref().map(|r| r.base) {
            Some(base) => Ok(self.b.add(base, j)?),
            None => Err(TileError::Internal("a ring use off the ring".into())),
        }
    }

    /// On the ring, whether the loop-invariant `a` still needs its staging
    /// (once for all the loops that read it), noting it staged.
    pub(super) fn ring_stage_a(&mut self, a: TileId) -> bool {
        match self.ring.as_mut() {
            Some(r) if r.staged.contains(&a) => false,
            Some(r) => {
                r.staged.push(a);
                true
            }
            None => true,
        }
    }

    /// On the ring, the start of an iteration of its loop (iteration
    /// variable `iv` of a loop from `lo` by `step`): waits for the stage
    /// and returns the index of the body's last wgmma `dot`, after which
    /// [`Self::ring_release`] hands the stage back; `None` off the ring.
    pub(super) fn ring_iteration(
        &mut self,
        lo: ValueId,
        step: ValueId,
        iv: ValueId,
        body: &[Op],
    ) -> TileResult<Option<usize>> {
        let Some(ring) = self.ring.as_ref().map(|r| r.ring) else {
            return Ok(None);
        };
        let last = body
            .iter()
            .rposition(|op| matches!(op, Op::Dot { out, .. } if is_wgmma(self.layouts.get(*out))))
            .ok_or_else(|| TileError::Internal("a ring loop without dots".into()))?;
        let span = self.b.sub(iv, lo)?;
        let j = self.b.div(span, step)?;
        let it = self.ring_use(j)?;
        let (stage, parity) = self.slot(&ring, it)?;
        let full = self.bar_at(&ring, stage, false)?;
        self.wait_parity(full, parity)?;
        self.set_ring_stage(stage);
        Ok(Some(last))
    }

    /// Hands the iteration's stage back (its wgmmas are done: `wait_group 0`).
    pub(super) fn ring_release(&mut self) -> TileResult<()> {
        let (Some(ring), Some(stage)) = (
            self.ring.as_ref().map(|r| r.ring),
            self.ring.as_ref().and_then(|r| r.stage),
        ) else {
            return Err(TileError::Internal(
                "a ring release outside its loop".into(),
            ));
        };
        self.release_stage(&ring, stage)
    }

    /// Sets the ring stage the next wgmma `dot` reads.
    fn set_ring_stage(&mut self, stage: ValueId) {
        if let Some(r) = self.ring.as_mut() {
            r.stage = Some(stage);
        }
    }

    /// Issues ring `dot` `body[at]` reading stage `stage`, without waiting.
    fn issue_at(&mut self, body: &[Op], at: usize, stage: ValueId) -> TileResult<Vec<ValueId>> {
        let Op::Dot { out, a, b, acc, .. } = &body[at] else {
            return Err(TileError::Internal(
                "a rotated ring loop without its dot".into(),
            ));
        };
        self.set_ring_stage(stage);
        self.wgmma_issue(*out, *a, *b, *acc)
    }

    /// With `Schedule::pingpong` and two consumer warpgroups, the rotated
    /// loop's warpgroups take turns issuing their wgmmas (FlashAttention-3's
    /// warpgroup ping-pong: one's softmax runs under the other's wgmmas):
    /// warpgroup `w` waits at named barrier `2 + w` before it issues and
    /// arrives at the other's after (256 threads: one set arrives, the
    /// other waits). Warpgroup 1 arrives once before the loop, so 0 goes
    /// first, and skips its last arrival, so that every barrier phase it
    /// starts is completed. Returns this thread's warpgroup, or `None`
    /// without turns.
    fn turns_begin(&mut self, iterations: ValueId) -> TileResult<Option<ValueId>> {
        if !(self.schedule.pingpong && self.schedule.warps == 8) {
            return Ok(None);
        }
        let (zero, four) = (self.u32(0)?, self.u32(4)?);
        let wg = self.b.div(self.warp, four)?;
        let second = self.b.ne(wg, zero)?;
        let any = self.b.gt(iterations, zero)?;
        let go = self.b.and(second, any)?;
        let f = self.b.begin_if(go, &[])?;
        self.b.named_barrier(true, TURN_BARRIER, 256)?;
        self.b.end_if(f, &[])?;
        Ok(Some(wg))
    }

    /// Waits for this warpgroup's turn (see [`Self::turns_begin`]).
    fn turn_wait(&mut self, wg: Option<ValueId>) -> TileResult<()> {
        let Some(wg) = wg else { return Ok(()) };
        let zero = self.u32(0)?;
        let first = self.b.eq(wg, zero)?;
        let mut f = self.b.begin_if(first, &[])?;
        self.b.named_barrier(false, TURN_BARRIER, 256)?;
        self.b.begin_else(&mut f, &[])?;
        self.b.named_barrier(false, TURN_BARRIER + 1, 256)?;
        self.b.end_if(f, &[])?;
        Ok(())
    }

    /// Passes the turn to the other warpgroup after iteration `j` of `n`
    /// (warpgroup 1 not after its last).
    fn turn_pass(&mut self, wg: Option<ValueId>, j: ValueId, n: ValueId) -> TileResult<()> {
        let Some(wg) = wg else { return Ok(()) };
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let first = self.b.eq(wg, zero)?;
        let mut f = self.b.begin_if(first, &[])?;
        self.b.named_barrier(true, TURN_BARRIER + 1, 256)?;
        self.b.begin_else(&mut f, &[])?;
        let next = self.b.add(j, one)?;
        let more = self.b.lt(next, n)?;
        let g = self.b.begin_if(more, &[])?;
        self.b.named_barrier(true, TURN_BARRIER, 256)?;
        self.b.end_if(g, &[])?;
        self.b.end_if(f, &[])?;
        Ok(())
    }

    /// Lane 0 of each warp hands stage `stage` back.
    fn release_stage(&mut self, ring: &Ring, stage: ValueId) -> TileResult<()> {
        let zero = self.u32(0)?;
        let lane0 = self.b.eq(self.lane, zero)?;
        let f = self.b.begin_if(lane0, &[])?;
        self.release(ring, stage)?;
        self.b.end_if(f, &[])?;
        Ok(())
    }

    /// The ring's loop rotated (see [`Rotation`]), inside `if trips > 0`:
    /// block 0's `before`, `d1` and `between` first; iteration `j` of `0 ..
    /// trips - 1` then overlaps `d2` of block `j` with `between` of block
    /// `j + 1`; the last block's `d2` after the loop.
    pub(super) fn ring_loop_rotated(
        &mut self,
        rot: &Rotation,
        (lo, hi, step): (ValueId, ValueId, ValueId),
        iv: ScalarId,
        (inits, args, yields, results): (&[Value], &[Value], &[Value], &[Value]),
        body: &[Op],
    ) -> TileResult<()> {
        let ring = self
            .ring
            .as_ref()
            .map(|r| r.ring)
            .ok_or_else(|| TileError::Internal("a ring loop off the ring".into()))?;
        let Op::Dot {
            out: d2_out,
            a: d2_a,
            acc: d2_acc,
            ..
        } = body[rot.d2]
        else {
            return Err(TileError::Internal(
                "a rotated ring loop without its dot".into(),
            ));
        };
        let Value::Tile(acc_arg) = args[rot.acc] else {
            return Err(TileError::Internal("a rotated ring loop's acc".into()));
        };
        let trips = self.trip_count(lo, hi, step)?;
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let init = self.flatten(inits)?;
        let types = init
            .iter()
            .map(|&v| Ok(self.b.value_type(v)?.clone()))
            .collect::<TileResult<Vec<_>>>()?;
        let any = self.b.gt(trips, zero)?;
        let mut guard = self.b.begin_if(any, &types)?;
        // Block 0 up to its `d2`.
        self.unflatten(args, &init)?;
        self.set_scalar(iv, lo);
        let first = self.ring_use(zero)?;
        let (stage, parity) = self.slot(&ring, first)?;
        let full = self.bar_at(&ring, stage, false)?;
        self.wait_parity(full, parity)?;
        self.set_ring_stage(stage);
        for op in &body[..rot.d2] {
            self.op(op)?;
        }
        // Carried: `d2`'s operands and the other loop values of the block.
        let mut keep = vec![Value::Tile(d2_a), Value::Tile(d2_acc)];
        keep.extend(
            (0..yields.len())
                .filter(|&i| i != rot.acc)
                .map(|i| yields[i]),
        );
        let c0 = self.flatten(&keep)?;
        let last = self.b.sub(trips, one)?;
        let turns = self.turns_begin(last)?;
        let frame = self.b.begin_for(zero, last, one, &c0)?;
        let j = frame.iv;
        let carried = frame.carried.clone();
        self.unflatten(&keep, &carried)?;
        // Block j + 1 sees the other values as block j yielded them.
        for i in (0..args.len()).filter(|&i| i != rot.acc) {
            match (args[i], yields[i]) {
                (Value::Tile(a), Value::Tile(y)) => {
                    let regs = self.regs(y)?;
                    self.set_tile(a, regs);
                }
                (Value::Scalar(a), Value::Scalar(y)) => {
                    let v = self.scalar(y)?;
                    self.set_scalar(a, v);
                }
                _ => return Err(TileError::Internal("a loop value changed kind".into())),
            }
        }
        let next = self.b.add(j, one)?;
        let at = self.b.mul(next, step)?;
        let iv_next = self.b.add(lo, at)?;
        self.set_scalar(iv, iv_next);
        let (it_next, it) = (self.ring_use(next)?, self.ring_use(j)?);
        let (stage_next, parity) = self.slot(&ring, it_next)?;
        let (stage, _) = self.slot(&ring, it)?;
        let full = self.bar_at(&ring, stage_next, false)?;
        self.wait_parity(full, parity)?;
        for op in &body[..rot.d1] {
            self.op(op)?;
        }
        self.turn_wait(turns)?;
        let s_accs = self.issue_at(body, rot.d1, stage_next)?;
        let mut pending = Some(self.issue_at(body, rot.d2, stage)?);
        self.turn_pass(turns, j, last)?;
        // `d1` was committed first: waiting for all but one group waits for it.
        self.b.wgmma_wait_group(1)?;
        let Op::Dot { out: d1_out, .. } = body[rot.d1] else {
            return Err(TileError::Internal(
                "a rotated ring loop without its dot".into(),
            ));
        };
        self.wgmma_unpack(d1_out, &s_accs)?;
        for op in &body[rot.d1 + 1..rot.d2] {
            if pending.is_some() && (reads(op, acc_arg) || defines(op, d2_a)) {
                self.b.wgmma_wait_group(0)?;
                let accs = pending.take().unwrap_or_default();
                let [m, n] = self.program.tile(d2_out).shape[..] else {
                    return Err(TileError::Internal(
                        "a wgmma dot of rank other than 2".into(),
                    ));
                };
                self.unpack_accs(d2_out, &accs, m, n, acc_arg)?;
                self.release_stage(&ring, stage)?;
            }
            self.op(op)?;
        }
        if pending.is_some() {
            return Err(TileError::Internal(
                "a rotated loop that never reads its acc".into(),
            ));
        }
        let next_vals = self.flatten(&keep)?;
        let out = self.b.end_for(frame, &next_vals)?;
        self.unflatten(&keep, &out)?;
        // The last block's `d2`.
        let it = self.ring_use(last)?;
        let (stage, _) = self.slot(&ring, it)?;
        let accs = self.issue_at(body, rot.d2, stage)?;
        self.b.wgmma_wait_group(0)?;
        self.wgmma_unpack(d2_out, &accs)?;
        self.release_stage(&ring, stage)?;
        let res = self.flatten(yields)?;
        self.b.begin_else(&mut guard, &res)?;
        let vals = self.b.end_if(guard, &init)?;
        self.ring_loop_done(lo, hi, step)?;
        self.unflatten(results, &vals)
    }
}

/// Whether `op` reads tile `t`.
fn reads(op: &Op, t: TileId) -> bool {
    uses(std::slice::from_ref(op), &[t]) > 0
}

/// Whether `op` defines tile `t`.
fn defines(op: &Op, t: TileId) -> bool {
    let mut out = std::collections::HashSet::new();
    dot_mma::defined(std::slice::from_ref(op), &mut out);
    out.contains(&t)
}
