//! The epilogue's store through shared memory and TMA
//! (`Schedule::tma_store`, warp-specialised pipeline only).
//!
//! Stored from registers (`memory.rs`), a consumer's output tile is 64
//! global stores a thread (128x128 bf16 over 4 warps) issued between the
//! GEMM loops, and on short-K layers (K = 1024: 16 K steps a tile) that
//! epilogue is a large share of a tile's time. Here each consumer set writes
//! the tile into shared memory, column box by column box (`128 / elem bytes`
//! columns by the tile's rows: TMA's `SWIZZLE_128B` box, the layout the
//! operand stages use), and one thread of the set issues a
//! `cp.async.bulk.tensor` store per box; the set goes back to its next
//! tile while the copies run. TMA clips the box at the tensor's edges, so
//! tails need no masks and the writes no tests.
//!
//! A set owns `slots` box buffers after the operand ring (as many as fit
//! beside it, at most a tile's boxes). Box `i` of a tile goes to slot `i %
//! slots`; before the set writes a slot again, its leader waits until the
//! bulk store that read it is done (`cp.async.bulk.wait_group.read`: at box
//! 0 for every earlier store, whose reads had a whole GEMM loop to finish;
//! at box `i >= slots` for all but the `slots - 1` latest) and the set meets
//! at a named barrier. After writing a box each thread fences its writes for
//! the async proxy (`fence.proxy.async.shared::cta`), the set meets again,
//! and the leader issues the store and commits it as a bulk group. The
//! consumers wait for every group before the kernel ends.

use super::pipeline::ROW;
use super::pipeline_ws::TensorMapParam;
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Op, ScalarId, TileId, TileProgram, ViewId};
use crate::layout::Layout;
use crate::schedule::Schedule;
use zyntax_hir::{AddrSpace, Type, ValueId};

/// Named barriers of the consumer sets' stores: `STORE_BARRIER + set` (0 is
/// the CTA barrier, 1 and 2 the ping-pong hand-over).
const STORE_BARRIER: u32 = 3;

/// How the warp-specialised kernel stores its output tile through TMA.
#[derive(Clone, Debug)]
pub(crate) struct StorePlan {
    /// Index of the store in the program's body.
    pub at: usize,
    pub view: ViewId,
    /// The tile's rows (the box's outer extent).
    pub rows: u32,
    /// Columns per box (128 bytes of elements).
    pub box_cols: u32,
    /// Box buffers per consumer set.
    pub slots: u32,
    /// Consumer sets (2 with ping-pong), each with its buffers.
    pub sets: u32,
    /// Register groups (the first register of each, and its registers) per
    /// column box, in box order.
    pub boxes: Vec<Vec<Vec<u32>>>,
    pub elem_bytes: u32,
}

impl StorePlan {
    /// Bytes of one box buffer (1024-aligned: rows are 128 bytes, a
    /// multiple of 8 of them).
    pub fn slot_bytes(&self) -> u32 {
        self.rows * ROW
    }
}

/// The store plan of a warp-specialised program under `schedule` whose
/// operand ring and barriers take `ring_bytes`, and the output's tensor-map
/// parameter; `None` when the schedule does not ask for it or the program's
/// epilogue does not fit it: exactly one `store` after the GEMM loop (at
/// `at`) and none elsewhere, of a `[bm, bn]` tile into a rank-2 view with
/// unit stride along its last dim, 16-byte alignment and 2- or 4-byte
/// elements, in a layout whose every register group (a run of 2 along the
/// columns) lies in one column box whatever the thread, and room for a box
/// buffer per consumer set.
pub(crate) fn store_plan(
    program: &TileProgram,
    layouts: &Layouts,
    schedule: &Schedule,
    at: usize,
    [bm, bn]: [u32; 2],
    ring_bytes: u64,
) -> Option<(StorePlan, TensorMapParam)> {
    if !schedule.tma_store {
        return None;
    }
    let mut stores = program
        .body
        .iter()
        .enumerate()
        .filter(|(_, op)| writes_any(op));
    let (i, op) = stores.next()?;
    if stores.next().is_some() || i <= at {
        return None;
    }
    let Op::Store {
        view, origin, tile, ..
    } = op
    else {
        return None;
    };
    let v = program.view(*view);
    let t = program.tile(*tile);
    let bytes = v.elem.size_bytes()? as u32;
    if v.rank != 2
        || origin.len() != 2
        || t.shape != [bm, bn]
        || v.unit_stride_dim != Some(1)
        || v.align_bytes.unwrap_or(0) < 16
        || !matches!(bytes, 2 | 4)
        || bm > 256
    {
        return None;
    }
    let box_cols = ROW / bytes;
    if !bn.is_multiple_of(box_cols) {
        return None;
    }
    let layout = layouts.get(*tile)?;
    let boxes = box_groups(layout, &t.shape, box_cols)?;
    let slot = u64::from(bm * ROW);
    let limit = zyntax_hir::arch::max_shared_bytes(schedule.arch);
    let per_set = limit.checked_sub(ring_bytes)? / slot / u64::from(schedule.consumer_sets());
    let slots = per_set.min(boxes.len() as u64) as u32;
    if slots == 0 {
        return None;
    }
    let param = program
        .params
        .iter()
        .position(|p| matches!(p, crate::ir::Param::View(x) if x == view))?;
    let map = TensorMapParam {
        view: v.name.clone(),
        param,
        inner_dim: 1,
        outer_dim: 0,
        box_dims: [box_cols, bm],
    };
    let plan = StorePlan {
        at: i,
        view: *view,
        rows: bm,
        box_cols,
        slots,
        sets: schedule.consumer_sets(),
        boxes,
        elem_bytes: bytes,
    };
    Some((plan, map))
}

/// Whether `op` (or a loop in it) stores or adds into a view.
fn writes_any(op: &Op) -> bool {
    match op {
        Op::Store { .. } | Op::AtomicAdd { .. } => true,
        Op::For { body, .. } => body.iter().any(writes_any),
        _ => false,
    }
}

/// The register groups of a tile of `shape` in `layout` (runs of 2 along
/// the columns), by the column box of `box_cols` they fall in for every
/// thread; `None` if a layout wraps (a thread's element repeated or
/// unowned) or a group's box depends on the thread.
fn box_groups(layout: &Layout, shape: &[u32], box_cols: u32) -> Option<Vec<Vec<Vec<u32>>>> {
    let maps = [layout.dim_map(0), layout.dim_map(1)];
    if maps.iter().zip(shape).any(|(m, &e)| e < m.coverage) {
        return None;
    }
    let cols = maps[1];
    if cols.run < 2 || cols.run_step != 1 {
        return None;
    }
    // The largest base a thread adds along the columns.
    let reach = (cols.warps - 1) * cols.warp_step + (cols.lanes - 1) * cols.lane_step;
    let mut boxes = vec![Vec::new(); (shape[1] / box_cols) as usize];
    for r in 0..layout.num_regs(shape) {
        let dims = layout.reg_dims(shape, r);
        if !dims[1].is_multiple_of(2) {
            continue;
        }
        let first = cols.offset(shape[1], dims[1]);
        let (lo, hi) = (first / box_cols, (first + reach + 1) / box_cols);
        if lo != hi {
            return None;
        }
        let mut next = dims.clone();
        next[1] += 1;
        boxes[lo as usize].push(vec![r, layout.reg_index(shape, &next)]);
    }
    Some(boxes)
}

/// What a consumer set needs to store through TMA.
#[derive(Copy, Clone, Debug)]
pub(crate) struct StoreRing {
    /// The set's first box buffer.
    pub slots: ValueId,
    /// The output's tensor map.
    pub map: ValueId,
    /// The consumer set (its named barrier).
    pub set: u32,
}

impl Lowerer<'_> {
    /// The store of `plan` (op `Store { view, origin, tile }`) through the
    /// set's box buffers and TMA (see the module doc).
    pub(super) fn tma_store_tile(
        &mut self,
        plan: &StorePlan,
        ring: StoreRing,
        origin: &[ScalarId],
        tile: TileId,
    ) -> TileResult<()> {
        let layout = self.layout(tile)?;
        let shape = self.program.tile(tile).shape.clone();
        let table = self.coords(&layout, &shape)?;
        let (o_r, o_c) = (self.scalar(origin[0])?, self.scalar(origin[1])?);
        let elem = self.program.view(plan.view).elem.clone();
        let scalar = elem
            .as_scalar()
            .ok_or_else(|| TileError::Internal(format!("a TMA store of {elem}")))?;
        let pair = Type::Vector(scalar, 2);
        let pair_ptr = Type::ptr(AddrSpace::Shared, pair.clone());
        let count = self.schedule.warps * 32;
        let id = STORE_BARRIER + ring.set;
        let zero = self.u32(0)?;
        let first_warp = self.b.eq(self.warp, zero)?;
        let first_lane = self.b.eq(self.lane, zero)?;
        let leader = self.b.and(first_warp, first_lane)?;
        let (seven, row, esize) = (self.u32(7)?, self.u32(ROW)?, self.u32(plan.elem_bytes)?);
        let (four, fifteen) = (self.u32(4)?, self.u32(15)?);
        for (i, groups) in plan.boxes.iter().enumerate() {
            let i = i as u32;
            let slot_off = self.u32((i % plan.slots) * plan.slot_bytes())?;
            let slot = self.b.ptr_add(ring.slots, slot_off)?;
            if i == 0 || i >= plan.slots {
                // The slot's last bulk store has read it.
                let f = self.b.begin_if(leader, &[])?;
                let pending = if i == 0 { 0 } else { plan.slots - 1 };
                self.b.bulk_wait_group(pending, true)?;
                self.b.end_if(f, &[])?;
                self.b.named_barrier(false, id, count)?;
            }
            let box_col = self.u32(i * plan.box_cols)?;
            // The box's loads (a bias row) issue together, before its arithmetic.
            let regs: Vec<u32> = groups.iter().flatten().copied().collect();
            self.prefetch_loads(tile, &regs)?;
            for g in groups {
                let coords = Self::reg_coords(&layout, &shape, &table, g[0]);
                let parts = self.tile_regs(tile, g)?;
                // Byte (r, c) of the box: row r at r * 128, its 16-byte chunks
                // in the order `chunk ^ (r % 8)` (TMA's 128-byte swizzle).
                let (r, c) = (coords[0].value, coords[1].value);
                let c = self.b.sub(c, box_col)?;
                let byte = self.b.mul(c, esize)?;
                let chunk = self.b.shr(byte, four)?;
                let within = self.b.and(byte, fifteen)?;
                let phase = self.b.and(r, seven)?;
                let chunk = self.b.xor(chunk, phase)?;
                let chunk = self.b.shl(chunk, four)?;
                let at = self.b.mul(r, row)?;
                let at = self.b.add(at, chunk)?;
                let at = self.b.add(at, within)?;
                let p = self.b.ptr_add(slot, at)?;
                let p = self.b.ptr_cast(p, pair_ptr.clone())?;
                let mut vector = self.vector_zero_of(&pair)?;
                for (k, &part) in parts.iter().enumerate() {
                    vector = self.b.insert(vector, part, k as u32)?;
                }
                self.b.store(p, vector)?;
            }
            // The writes, visible to the copy (async proxy), before the
            // leader issues it.
            self.b.fence_proxy_async()?;
            self.b.named_barrier(false, id, count)?;
            let f = self.b.begin_if(leader, &[])?;
            let col = self.b.add(o_c, box_col)?;
            self.b.tma_store(ring.map, slot, &[col, o_r])?;
            self.b.bulk_commit_group()?;
            self.b.end_if(f, &[])?;
        }
        Ok(())
    }

    /// The zero vector of type `ty` made in the entry block.
    fn vector_zero_of(&self, ty: &Type) -> TileResult<ValueId> {
        self.vector_zeros
            .get(ty)
            .copied()
            .ok_or_else(|| TileError::Internal(format!("no {ty} made in the entry block")))
    }
}
