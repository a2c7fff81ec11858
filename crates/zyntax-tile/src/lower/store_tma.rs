//! The epilogue's store through shared memory and TMA
//! (`Schedule::tma_store`, warp-specialised pipeline only).
//!
//! Stored from registers (`memory.rs`), a consumer's output tile is 64
//! global stores a thread (128x128 bf16 over 4 warps) issued between the
//! GEMM loops, and on short-K layers (K = 1024: 16 K steps a tile) that
//! epilogue is a large share of a tile's time. Here each consumer set writes
//! the tile into shared memory, column box by column box (`128 / elem bytes`
//! columns by the tile's rows: TMA's `SWIZZLE_128B` box, the layout the
//! operand stages use), and TMA copies the boxes out while the set goes back
//! to its next tile. TMA clips a box at the tensor's edges, so tails need no
//! masks and the writes no tests.
//!
//! A box is stored in parts that one warpgroup alone writes and issues:
//! the wgmma accumulator gives each warpgroup whole 64-row blocks of the
//! tile (rows `64 wg + 64 W r` with `W` warpgroups), so a part is a
//! `[64, box columns]` box, each warpgroup meets only its own 128 threads
//! at a named barrier, and its first thread issues its parts' stores. (A
//! layout whose warpgroups share 64-row blocks falls back to one part per
//! box, the whole set meeting.) Session 13's Nsight Compute profile of the
//! QKV layer (8192x3072x1024 + bias, 256x128 tiles) found the set-wide
//! barriers of whole-box stores as its largest stall.
//!
//! A set owns `slots` box buffers after the operand ring (as many as fit
//! beside it, at most a tile's boxes). Box `i` of a tile goes to slot `i %
//! slots`, its parts at their rows in it, and a group's parts, in order,
//! cycle through its `S = slots x parts a box` part buffers. Before a group
//! writes a part buffer again, its leader waits until the bulk store that
//! read it is done (`cp.async.bulk.wait_group.read`); the group meets at
//! its barrier once a part: after writing it (each thread first fences its
//! writes for the async proxy), the leader having waited for the buffer of
//! the group's next part (all but the `S - 2` latest stores, so the store
//! of the part before has the whole write of this one to finish), then the
//! leader issues the part's store and commits it as a bulk group. A tile's
//! first part waits for every earlier store (whose reads had a whole GEMM
//! loop to finish) and meets before the writes; with one part buffer
//! (`S = 1`) every part does. The consumers wait for every group before the
//! kernel ends.

use super::pipeline::ROW;
use super::pipeline_ws::TensorMapParam;
use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::infer::Layouts;
use crate::ir::{Op, ScalarId, TileId, TileProgram, ViewId};
use crate::layout::Layout;
use crate::schedule::Schedule;
use zyntax_hir::{AddrSpace, Type, ValueId};

/// Named barriers of the consumer sets' store groups: `STORE_BARRIER + set
/// x groups + group` (0 is the CTA barrier, 1 and 2 the ping-pong
/// hand-over; at most 2 sets of 4 warpgroups: ids up to 10 of 15).
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
    /// Rows of a part (the output tensor map's box): 64, or the tile's rows
    /// when warpgroups share 64-row blocks.
    pub part_rows: u32,
    /// Warps of a store group (a warpgroup, or the whole set).
    pub group_warps: u32,
    /// Per group of the set, the row blocks (of `part_rows`) its threads
    /// hold, in the order of its parts within a box.
    pub blocks: Vec<Vec<u32>>,
    /// Register groups (runs of 2 along the columns) per column box and per
    /// part of a group: `parts[box][k]` holds the registers whose row lies
    /// in the `k`-th of the thread's group's blocks.
    pub parts: Vec<Vec<Vec<Vec<u32>>>>,
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
    let RowParts {
        part_rows,
        group_warps,
        blocks,
        k_of,
    } = row_parts(layout, bm, schedule.warps)?;
    let parts = boxes
        .iter()
        .map(|groups| {
            let mut by_k = vec![Vec::new(); blocks[0].len()];
            for g in groups {
                let row_reg = layout.reg_dims(&t.shape, g[0])[0];
                by_k[k_of[row_reg as usize] as usize].push(g.clone());
            }
            by_k
        })
        .collect::<Vec<_>>();
    let slot = u64::from(bm * ROW);
    let limit = zyntax_hir::arch::max_shared_bytes(schedule.arch);
    let per_set = limit.checked_sub(ring_bytes)? / slot / u64::from(schedule.consumer_sets());
    let slots = per_set.min(parts.len() as u64) as u32;
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
        box_dims: [box_cols, part_rows],
    };
    let plan = StorePlan {
        at: i,
        view: *view,
        rows: bm,
        box_cols,
        slots,
        sets: schedule.consumer_sets(),
        part_rows,
        group_warps,
        blocks,
        parts,
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

/// How a tile's rows split into parts that store groups write alone.
struct RowParts {
    part_rows: u32,
    group_warps: u32,
    /// Per group, its row blocks in part order.
    blocks: Vec<Vec<u32>>,
    /// Per row register, the index of its part among its group's.
    k_of: Vec<u32>,
}

/// How the tile's `bm` rows split into parts that store groups of a set of
/// `warps` write alone. Tries
/// 64-row blocks per warpgroup (each warpgroup's blocks its own, every
/// row register in the same part for all the group's threads), else one
/// part of all rows for the whole set.
fn row_parts(layout: &Layout, bm: u32, warps: u32) -> Option<RowParts> {
    let rows = layout.dim_map(0);
    let regs = rows.regs(bm);
    let row = |warp: u32, lane: u32, j: u32| rows.base(lane, warp) + rows.offset(bm, j);
    let split = |p: u32, gw: u32| -> Option<(Vec<Vec<u32>>, Vec<u32>)> {
        let mut blocks = Vec::new();
        for g in 0..warps / gw {
            let mut b: Vec<u32> = (g * gw..(g + 1) * gw)
                .flat_map(|w| (0..32).flat_map(move |l| (0..regs).map(move |j| (w, l, j))))
                .map(|(w, l, j)| row(w, l, j) / p)
                .collect();
            b.sort_unstable();
            b.dedup();
            blocks.push(b);
        }
        let all: Vec<u32> = blocks.iter().flatten().copied().collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() != all.len() || blocks.iter().any(|b| b.len() != blocks[0].len()) {
            return None; // groups share a block, or hold different numbers
        }
        let mut k_of = Vec::with_capacity(regs as usize);
        for j in 0..regs {
            let mut k = None;
            for w in 0..warps {
                for l in 0..32 {
                    let b = row(w, l, j) / p;
                    let at = blocks[(w / gw) as usize].iter().position(|&x| x == b)? as u32;
                    if *k.get_or_insert(at) != at {
                        return None;
                    }
                }
            }
            k_of.push(k?);
        }
        Some((blocks, k_of))
    };
    let parts = |part_rows, group_warps| {
        split(part_rows, group_warps).map(|(blocks, k_of)| RowParts {
            part_rows,
            group_warps,
            blocks,
            k_of,
        })
    };
    if bm.is_multiple_of(64) && warps.is_multiple_of(4) {
        if let Some(p) = parts(64, 4) {
            return Some(p);
        }
    }
    parts(bm, warps)
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
    /// set's box buffers and TMA, part by part (see the module doc).
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
        let groups = plan.blocks.len() as u32;
        let gw = self.u32(plan.group_warps)?;
        // The group's barriers: one per group of each set.
        let first_id = STORE_BARRIER + ring.set * groups;
        let zero = self.u32(0)?;
        let group = self.b.div(self.warp, gw)?;
        let in_group = self.b.rem(self.warp, gw)?;
        let first_warp = self.b.eq(in_group, zero)?;
        let first_lane = self.b.eq(self.lane, zero)?;
        let leader = self.b.and(first_warp, first_lane)?;
        let (seven, row, esize) = (self.u32(7)?, self.u32(ROW)?, self.u32(plan.elem_bytes)?);
        let (four, fifteen) = (self.u32(4)?, self.u32(15)?);
        let per_box = plan.blocks[0].len() as u32;
        let buffers = plan.slots * per_box;
        let total = plan.parts.len() as u32 * per_box;
        for (i, by_k) in plan.parts.iter().enumerate() {
            let i = i as u32;
            let slot_off = self.u32((i % plan.slots) * plan.slot_bytes())?;
            let slot = self.b.ptr_add(ring.slots, slot_off)?;
            let box_col = self.u32(i * plan.box_cols)?;
            for (k, part) in by_k.iter().enumerate() {
                let q = i * per_box + k as u32;
                if q == 0 || buffers == 1 {
                    // Every earlier store has read its buffer.
                    let f = self.b.begin_if(leader, &[])?;
                    self.b.bulk_wait_group(0, true)?;
                    self.b.end_if(f, &[])?;
                    self.group_barrier(plan, group, first_id)?;
                }
                // The box's loads (a bias row) issue together, before its
                // arithmetic (the first box's may have issued before the
                // GEMM loop: `pipeline_ws.rs`), and the next box's with the
                // box's last part, when its other parts' registers are free:
                // their latency runs under that part's writes.
                let box_regs = |b: &Vec<Vec<Vec<u32>>>| -> Vec<u32> {
                    b.iter().flatten().flatten().copied().collect()
                };
                if k == 0 {
                    self.prefetch_loads(tile, &box_regs(by_k))?;
                }
                if k + 1 == by_k.len() && k > 0 {
                    if let Some(next) = plan.parts.get(i as usize + 1) {
                        self.prefetch_loads(tile, &box_regs(next))?;
                    }
                }
                for g in part {
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
                // leader issues it; the buffer of the group's next part free.
                self.b.fence_proxy_async()?;
                if buffers > 1 && q + 1 < total && q + 1 >= buffers {
                    let f = self.b.begin_if(leader, &[])?;
                    self.b.bulk_wait_group(buffers - 2, true)?;
                    self.b.end_if(f, &[])?;
                }
                self.group_barrier(plan, group, first_id)?;
                let f = self.b.begin_if(leader, &[])?;
                let block = self.group_block(plan, group, k)?;
                let rows = self.u32(plan.part_rows)?;
                let first_row = self.b.mul(block, rows)?;
                let at = self.b.mul(first_row, row)?;
                let part_slot = self.b.ptr_add(slot, at)?;
                let col = self.b.add(o_c, box_col)?;
                let r0 = self.b.add(o_r, first_row)?;
                self.b.tma_store(ring.map, part_slot, &[col, r0])?;
                self.b.bulk_commit_group()?;
                self.b.end_if(f, &[])?;
            }
        }
        Ok(())
    }

    /// The named barrier of this thread's store group (`group`, a value),
    /// `first_id + group` for its `group_warps` warps (a barrier id is an
    /// immediate: one branch per group).
    fn group_barrier(&mut self, plan: &StorePlan, group: ValueId, first_id: u32) -> TileResult<()> {
        let count = plan.group_warps * 32;
        let groups = plan.blocks.len() as u32;
        if groups == 1 {
            self.b.named_barrier(false, first_id, count)?;
            return Ok(());
        }
        for g in 0..groups {
            let gv = self.u32(g)?;
            let mine = self.b.eq(group, gv)?;
            let f = self.b.begin_if(mine, &[])?;
            self.b.named_barrier(false, first_id + g, count)?;
            self.b.end_if(f, &[])?;
        }
        Ok(())
    }

    /// The `k`-th row block of this thread's store group (`group`, a value).
    fn group_block(&mut self, plan: &StorePlan, group: ValueId, k: usize) -> TileResult<ValueId> {
        let mut block = self.u32(plan.blocks[0][k])?;
        for (g, blocks) in plan.blocks.iter().enumerate().skip(1) {
            let gv = self.u32(g as u32)?;
            let mine = self.b.eq(group, gv)?;
            let b = self.u32(blocks[k])?;
            block = self.b.select(mine, b, block)?;
        }
        Ok(block)
    }

    /// The zero vector of type `ty` made in the entry block.
    fn vector_zero_of(&self, ty: &Type) -> TileResult<ValueId> {
        self.vector_zeros
            .get(ty)
            .copied()
            .ok_or_else(|| TileError::Internal(format!("no {ty} made in the entry block")))
    }
}
