//! The warp-specialised GEMM on sm_90a (`Schedule::warp_specialize`): the
//! same tile program as `pipeline.rs` lowers, with its loads moved to TMA
//! and to a warpgroup of their own.
//!
//! - The CTA is the schedule's `warps` consumer warps (warpgroups `0 ..
//!   warps / 4`, holding the accumulator in the wgmma layout exactly as on
//!   the `cp.async` pipeline) plus one **producer warpgroup** after them.
//!   With two consumer warpgroups or more, the producer gives registers back
//!   (`setmaxnreg.dec` to 40) and the consumers take them (`.inc`), as the
//!   hand-written `kernels/gemm_sm90.py` does.
//! - Shared memory: `stages` stages laid out as on the `cp.async` pipeline
//!   (128-byte rows, 128-byte swizzle, which is TMA's `SWIZZLE_128B`), then a
//!   `full` and an `empty` mbarrier per stage.
//! - One producer thread walks the K loop: it waits for `empty[s]` (the
//!   parity of the ring's previous lap; a fresh barrier's previous phase
//!   counts as complete), announces the stage's bytes on `full[s]`
//!   (`arrive.expect_tx`) and issues one TMA load per 64-element box of each
//!   operand. TMA zero-fills what lies outside the tensor, so tails need no
//!   masks. The body's scalar ops run in the producer to give the origins.
//! - Each consumer warpgroup waits for `full[s]` (the lap's parity), issues
//!   its wgmmas (`dot_wgmma.rs`), and hands the stage back with one arrival
//!   per warp on `empty[s]` once its wgmmas have read it: with 3 stages or
//!   more and `Schedule::wgmma_in_flight` 1 (the default is 0) one wgmma group
//!   stays in flight (`wgmma.wait_group 1`) and stage `j - 1` is released
//!   at iteration `j`; otherwise `wait_group 0` and stage `j` at once.
//! - The ring counter runs on across the program instances of a persistent
//!   CTA (`Schedule::persistent`): CTA `c` takes instances `c, c + grid, ..`
//!   of the program's grid (passed as two `u32` parameters after the tensor
//!   maps), in a grouped order: [`GROUP_M`] rows of instances at a time, so
//!   the instances running at once share their `a` and `b` panels in L2. The
//!   producer loads the next instance's stages while the consumers store
//!   the previous one's result.
//! - Clusters (`Schedule::cluster` 2 or 4, persistent only): the CTAs of a
//!   cluster take adjacent program instances along M (`b` shared) or, with
//!   `cluster_n`, along N (`a` shared). The cluster walks units of
//!   `cluster` instances (`%clusterid` from `%nclusterid`, grouped order
//!   over the unit grid); CTA rank `r` takes instance `cluster * u + r`
//!   along the cluster's dim. Each producer loads its own tile of the other
//!   operand and its `1 / cluster` share of the shared one (whole 64-element
//!   boxes, or a slice of the rows of a single box) with
//!   `tma.load.multicast` into the same stage of every CTA, so `full[s]`
//!   still expects the whole stage's bytes. Since every producer writes
//!   into every CTA's stage, `empty[s]` counts the consumer warps of the
//!   whole cluster: each warp arrives on `empty[s]` of every CTA (`mapa` and
//!   a relaxed `mbarrier.arrive.shared::cluster`: the warp only read the
//!   stage, and a cluster-scope release costs a GPU-wide fence per arrival,
//!   docs/kernels.md). A cluster barrier after the mbarrier initialisation
//!   (no remote arrival before a barrier exists) and one before the exit
//!   (no CTA leaves while its peer may still write into it) bracket the
//!   kernel. When the grid has a partial unit, the CTAs past the grid
//!   compute a tile of TMA zeros (they must still load their share) and
//!   skip every op after the GEMM loop (the epilogue).
//! - With `Schedule::tma_store`, the epilogue's store goes through shared
//!   memory (box buffers after the ring, the barriers after them) and TMA
//!   stores issued by one thread per consumer set (`store_tma.rs`); the
//!   output's tensor map is the third parameter.
//! - Tensor maps: one `tensormap` parameter per operand, after the
//!   program's parameters ([`TensorMapParam`] tells the launch how to build
//!   it from the view's pointer, extents and strides).
//!
//! Everything outside the GEMM loop runs in the consumers only; the
//! producer evaluates the scalar ops before the loop (origins may use them).
//! The path applies to a program whose body holds exactly one loop, that
//! GEMM loop, and needs no scratch (no CTA barrier after the roles split);
//! both operand views declare a unit-stride dim and 16-byte alignment.
//! [`ws_plan`] says whether it does; otherwise the `cp.async` pipeline runs.

use super::pipeline::{gemm_loop, is_wgmma, stage_k, stagings, GemmLoop, Staging, ROW};
use super::store_tma::{store_plan, StorePlan, StoreRing};
use super::Lowerer;
use crate::error::TileResult;
use crate::infer::Layouts;
use crate::ir::{Op, TileProgram, Value};
use crate::schedule::Schedule;
use zyntax_hir::{AddrSpace, Arch, ClusterBarrierOp, Dim, IfFrame, MbarrierOp, Type, ValueId};

/// Rows of program instances walked together by a persistent CTA.
pub const GROUP_M: u32 = 8;
/// Registers of a producer thread after `setmaxnreg.dec`.
const PRODUCER_REGS: u32 = 40;

/// A tensor-map parameter the launch builds from a view: a 2-d map over the
/// view's `inner_dim` (unit stride) and `outer_dim`, `box_dims` elements
/// (innermost first), 128-byte swizzle, zero fill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapParam {
    /// The view's name.
    pub view: String,
    /// The index of the view among the program's parameters.
    pub param: usize,
    pub inner_dim: usize,
    pub outer_dim: usize,
    pub box_dims: [u32; 2],
}

/// The warp-specialised lowering of a program: where its GEMM loop is.
#[derive(Clone, Debug)]
pub(crate) struct WsPlan {
    /// Index of the GEMM loop in the program's body.
    pub at: usize,
    pub g: GemmLoop,
    pub maps: Vec<TensorMapParam>,
    /// The operand the CTAs of a cluster share (`Schedule::cluster` > 1).
    pub share: Option<Share>,
    /// The epilogue's store through shared memory and TMA
    /// (`Schedule::tma_store`, `store_tma.rs`); its map is `maps[2]`.
    pub store: Option<StorePlan>,
}

/// How the CTAs of a cluster split the operand tile they share.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Share {
    /// 0: `a` (clusters along N), 1: `b` (along M).
    pub operand: usize,
    /// CTAs per cluster.
    pub ctas: u32,
    /// The operand's stage is one TMA box: each CTA loads `rows / ctas` of
    /// its rows (the tensor map's box is that slice); otherwise each loads
    /// `boxes / ctas` whole boxes.
    pub rows_split: bool,
}

/// Whether a schedule splits the CTA into producer and consumers: sm_90a,
/// `warp_specialize`, and no shared-memory scratch (no CTA barrier may follow
/// the split); also the ring's condition (`pipeline_ring.rs`).
pub(super) fn roles_apply(schedule: &Schedule, scratch_bytes: u64) -> bool {
    schedule.warp_specialize && schedule.arch == Arch::Sm90a && scratch_bytes == 0
}

/// Whether `program` lowers warp-specialised under `schedule` (see the
/// module doc), and how.
pub(crate) fn ws_plan(
    program: &TileProgram,
    layouts: &Layouts,
    schedule: &Schedule,
    scratch_bytes: u64,
) -> Option<WsPlan> {
    if !roles_apply(schedule, scratch_bytes) {
        return None;
    }
    let mut found = None;
    for (i, op) in program.body.iter().enumerate() {
        if let Op::For {
            args, body, yields, ..
        } = op
        {
            let g = gemm_loop(program, args, body, yields)?;
            if found.is_some() || !is_wgmma(layouts.get(g.dot)) {
                return None;
            }
            found = Some((i, g));
        }
    }
    let (at, g) = found?;
    let (a, b) = stagings(program, &g);
    let mut maps = Vec::new();
    for st in [&a, &b] {
        let view = program.view(st.view);
        if view.unit_stride_dim != Some(st.col_dim)
            || view.align_bytes.unwrap_or(0) < 16
            || !matches!(st.elem.size_bytes(), Some(1 | 2 | 4))
        {
            return None;
        }
        let param = program
            .params
            .iter()
            .position(|p| matches!(p, crate::ir::Param::View(v) if *v == st.view))?;
        maps.push(TensorMapParam {
            view: view.name.clone(),
            param,
            inner_dim: st.col_dim,
            outer_dim: st.row_dim,
            box_dims: [stage_k(&st.elem), st.rows],
        });
    }
    let share = match schedule.cluster {
        1 => None,
        // Clusters are built on the persistent walk only (units of
        // instances); the caller reports the schedule.
        _ if !schedule.persistent => return None,
        ctas => {
            let operand = if schedule.cluster_n { 0 } else { 1 };
            let st = [&a, &b][operand];
            let boxes = st.cols / stage_k(&st.elem);
            // A slice of rows lands on a whole 8-row swizzle atom (1024
            // bytes), so the stage's layout is the one-box load's.
            let rows_split = if boxes.is_multiple_of(ctas) {
                false
            } else if boxes == 1 && st.rows.is_multiple_of(8 * ctas) {
                true
            } else {
                return None;
            };
            if rows_split {
                maps[operand].box_dims[1] = st.rows / ctas;
            }
            Some(Share {
                operand,
                ctas,
                rows_split,
            })
        }
    };
    let tiles = [
        program.tile(g.a.out).shape[0],
        program.tile(g.b.out).shape[1],
    ];
    let ring = super::pipeline::pipeline_bytes(tiles[0], tiles[1], schedule.stages)
        + 16 * u64::from(schedule.stages);
    let store = store_plan(program, layouts, schedule, at, tiles, ring).map(|(plan, map)| {
        maps.push(map);
        plan
    });
    Some(WsPlan {
        at,
        g,
        maps,
        share,
        store,
    })
}

/// Dynamic shared memory of the warp-specialised pipeline: the stages, the
/// box buffers of a TMA store (`store_tma.rs`), then `2 * stages` mbarriers.
pub(crate) fn ws_bytes(program: &TileProgram, plan: &WsPlan, stages: u32) -> u64 {
    let (bm, bn) = (
        program.tile(plan.g.a.out).shape[0],
        program.tile(plan.g.b.out).shape[1],
    );
    super::pipeline::pipeline_bytes(bm, bn, stages) + store_bytes(plan) + 16 * u64::from(stages)
}

/// Bytes of every consumer set's box buffers for a TMA store.
fn store_bytes(plan: &WsPlan) -> u64 {
    plan.store.as_ref().map_or(0, |s| {
        u64::from(s.slots) * u64::from(s.slot_bytes()) * u64::from(s.sets)
    })
}

/// The HIR values the roles share (also the attention key loop's ring,
/// `pipeline_ring.rs`).
#[derive(Copy, Clone)]
pub(super) struct Ring {
    pub smem: ValueId,
    pub bars: ValueId,
    pub stages: u32,
    pub stage_bytes: u32,
    pub a_bytes: u32,
    pub cluster: Option<Cluster>,
    /// A TMA store's first box buffer and the output's tensor map.
    pub store: Option<(ValueId, ValueId)>,
}

/// The cluster of a CTA (`Schedule::cluster` > 1).
#[derive(Copy, Clone)]
pub(super) struct Cluster {
    share: Share,
    /// `%cluster_ctarank`.
    rank: ValueId,
    /// The `u16` multicast mask of every CTA of the cluster.
    mask: ValueId,
}

impl Lowerer<'_> {
    /// Lowers the whole program body warp-specialised. `tmaps` are the
    /// tensor-map parameters (`a`, `b`, and the output of a TMA store),
    /// `grid` the program's grid of a persistent schedule.
    pub(super) fn ws_kernel(
        &mut self,
        plan: &WsPlan,
        tmaps: &[ValueId],
        grid: Option<[ValueId; 2]>,
    ) -> TileResult<()> {
        let store_map = tmaps.get(2).copied();
        let tmaps = [tmaps[0], tmaps[1]];
        let warps = self.schedule.warps;
        let stages = self.schedule.stages;
        let (bm, bn) = (
            self.program.tile(plan.g.a.out).shape[0],
            self.program.tile(plan.g.b.out).shape[1],
        );
        let smem = self.b.dyn_shared_aligned(Type::U8, 1024)?;
        let ring_bytes = stages * (bm + bn) * ROW;
        // A TMA store's box buffers follow the ring, the barriers them.
        let store_bytes = store_bytes(plan) as u32;
        let store_slots = match plan.store {
            Some(_) => {
                let at = self.u32(ring_bytes)?;
                Some(self.b.ptr_add(smem, at)?)
            }
            None => None,
        };
        let ring_bytes = self.u32(ring_bytes + store_bytes)?;
        let bars = self.b.ptr_add(smem, ring_bytes)?;
        let bars = self
            .b
            .ptr_cast(bars, Type::ptr(AddrSpace::Shared, Type::U64))?;
        let cluster = match plan.share {
            Some(share) => Some(Cluster {
                share,
                rank: self.b.cluster_ctarank()?,
                mask: self.b.iconst(Type::U16, (1i64 << share.ctas) - 1)?,
            }),
            None => None,
        };
        let ring = Ring {
            smem,
            bars,
            stages,
            stage_bytes: (bm + bn) * ROW,
            a_bytes: bm * ROW,
            cluster,
            store: store_slots.zip(store_map),
        };
        let ctas = plan.share.map_or(1, |s| s.ctas);
        // Every consumer warp, of one set or (ping-pong) of two.
        let all = warps * self.schedule.consumer_sets();
        let set_warps = self.u32(warps)?;
        // One arrival per warp of the set that consumed it (in every CTA of
        // the cluster) hands a stage back.
        self.init_ring(&ring, warps * ctas)?;

        let (mut roles, leader) = self.producer_side(all)?;
        let f = self.b.begin_if(leader, &[])?;
        self.instances(grid, &ring, |lw, counter| {
            lw.producer(plan, &ring, tmaps, counter)
        })?;
        self.b.end_if(f, &[])?;
        self.consumer_side(&mut roles, all)?;
        match grid {
            Some(grid) if self.schedule.pingpong => {
                // Each set lowers the program with its own warp index
                // (0 .. warps), as the layouts expect.
                let warp = self.warp;
                let second = self.b.ge(warp, set_warps)?;
                let mut sets = self.b.begin_if(second, &[])?;
                self.warp = self.b.sub(warp, set_warps)?;
                self.pingpong_set(plan, &ring, grid, 1)?;
                self.b.begin_else(&mut sets, &[])?;
                self.warp = warp;
                self.pingpong_set(plan, &ring, grid, 0)?;
                self.b.end_if(sets, &[])?;
            }
            _ => self.instances(grid, &ring, |lw, counter| {
                lw.consumer(plan, &ring, counter, None)
            })?,
        }
        if plan.store.is_some() {
            // Every bulk store done before the CTA ends (a no-op for the
            // threads that issued none).
            self.b.bulk_wait_group(0, false)?;
        }
        self.b.end_if(roles, &[])?;
        if ring.cluster.is_some() {
            self.cta_or_cluster_sync(&ring)?;
        }
        Ok(())
    }

    /// The CTA's roles after `consumers` consumer warps: opens the
    /// producer's side, whose warps give registers back with two consumer
    /// warpgroups or more (`setmaxnreg`), and returns its `if` frame and
    /// whether this thread is the producer's issuing one (its first);
    /// [`Self::consumer_side`] continues with the consumers.
    pub(super) fn producer_side(&mut self, consumers: u32) -> TileResult<(IfFrame, ValueId)> {
        let tid = self.b.thread_idx(Dim::X)?;
        let n = self.u32(consumers)?;
        let producer = self.b.ge(self.warp, n)?;
        let roles = self.b.begin_if(producer, &[])?;
        if let Some((p, _)) = setmaxnreg_counts(consumers) {
            self.b.setmaxnreg(p, false)?;
        }
        let first = self.u32(32 * consumers)?;
        Ok((roles, self.b.eq(tid, first)?))
    }

    /// The consumers' side of `roles` (see [`Self::producer_side`]): they
    /// take the registers the producer gave back.
    pub(super) fn consumer_side(&mut self, roles: &mut IfFrame, consumers: u32) -> TileResult<()> {
        self.b.begin_else(roles, &[])?;
        if let Some((_, c)) = setmaxnreg_counts(consumers) {
            self.b.setmaxnreg(c, true)?;
        }
        Ok(())
    }

    /// Thread 0 initialises a `full` (one arrival) and an `empty`
    /// (`releases` arrivals) mbarrier per stage of `ring`, then every thread
    /// of the CTA (or cluster) meets.
    pub(super) fn init_ring(&mut self, ring: &Ring, releases: u32) -> TileResult<()> {
        let tid = self.b.thread_idx(Dim::X)?;
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let releases = self.u32(releases)?;
        let first = self.b.eq(tid, zero)?;
        let f = self.b.begin_if(first, &[])?;
        for s in 0..ring.stages {
            let full = self.bar(ring, s, false)?;
            self.b.mbarrier(MbarrierOp::Init, &[full, one])?;
            let empty = self.bar(ring, s, true)?;
            self.b.mbarrier(MbarrierOp::Init, &[empty, releases])?;
        }
        self.b.fence_mbarrier_init()?;
        self.b.end_if(f, &[])?;
        self.cta_or_cluster_sync(ring)
    }

    /// Every thread of the CTA, or with a cluster of the cluster, meets.
    fn cta_or_cluster_sync(&mut self, ring: &Ring) -> TileResult<()> {
        if ring.cluster.is_some() {
            self.b.cluster_barrier(ClusterBarrierOp::Arrive)?;
            self.b.cluster_barrier(ClusterBarrierOp::Wait)?;
        } else {
            self.b.barrier()?;
        }
        Ok(())
    }

    /// The persistent walk over a `gx` x `gy` program grid: (first,
    /// end, stride) of the work units, one instance each, or with a cluster
    /// `ctas` adjacent instances per unit walked by cluster index; and the
    /// unit grid.
    fn walk(
        &mut self,
        ring: &Ring,
        [gx, gy]: [ValueId; 2],
    ) -> TileResult<(ValueId, ValueId, ValueId, [ValueId; 2])> {
        let Some(c) = ring.cluster else {
            let total = self.b.mul(gx, gy)?;
            let first = self.b.block_idx(Dim::X)?;
            let stride = self.b.grid_dim(Dim::X)?;
            return Ok((first, total, stride, [gx, gy]));
        };
        let n = self.u32(c.share.ctas)?;
        let units = if c.share.operand == 0 {
            [gx, self.ceil_div(gy, n)?]
        } else {
            [self.ceil_div(gx, n)?, gy]
        };
        let total = self.b.mul(units[0], units[1])?;
        let first = self.b.cluster_idx(Dim::X)?;
        let stride = self.b.cluster_grid_dim(Dim::X)?;
        Ok((first, total, stride, units))
    }

    fn ceil_div(&mut self, x: ValueId, n: ValueId) -> TileResult<ValueId> {
        let one = self.u32(1)?;
        let up = self.b.sub(n, one)?;
        let up = self.b.add(x, up)?;
        Ok(self.b.div(up, n)?)
    }

    /// Sets the program ids of unit `t` (see [`Self::walk`]): the grouped
    /// order over the unit grid, then this CTA's instance of the unit; with
    /// a cluster, whether that instance lies in the grid
    /// (`instance_valid`).
    fn unit_ids(
        &mut self,
        ring: &Ring,
        t: ValueId,
        [gx, gy]: [ValueId; 2],
        [ux, uy]: [ValueId; 2],
    ) -> TileResult<()> {
        self.grouped_ids(t, ux, uy)?;
        self.instance_valid = None;
        let (Some(c), Some([pm, pn])) = (ring.cluster, self.program_ids) else {
            return Ok(());
        };
        let n = self.u32(c.share.ctas)?;
        let along_n = c.share.operand == 0;
        let p = if along_n { pn } else { pm };
        let p = self.b.mul(p, n)?;
        let p = self.b.add(p, c.rank)?;
        let extent = if along_n { gy } else { gx };
        self.instance_valid = Some(self.b.lt(p, extent)?);
        self.program_ids = Some(if along_n { [pm, p] } else { [p, pn] });
        Ok(())
    }

    /// Consumer set `set` (0 or 1) of a ping-pong schedule: of the CTA's
    /// program instances (as [`Self::instances`] walks them) it runs every
    /// other one, the first for set 0, and skips the rest, counting their K
    /// steps so that its ring counter stays the CTA's. A set starts an
    /// instance's GEMM loop only once the other set has finished the
    /// previous instance's (named barrier `1 + set`, which the other set
    /// arrives at): the sets take the tensor cores in turn, and a consumer
    /// never waits on a `full` barrier more than one lap ahead of it, which
    /// the parity wait cannot tell from the lap before.
    fn pingpong_set(
        &mut self,
        plan: &WsPlan,
        ring: &Ring,
        [gx, gy]: [ValueId; 2],
        set: u32,
    ) -> TileResult<()> {
        let zero = self.u32(0)?;
        let (first, total, stride, units) = self.walk(ring, [gx, gy])?;
        let frame = self.b.begin_for(first, total, stride, &[zero])?;
        let (t, counter) = (frame.iv, frame.carried[0]);
        self.unit_ids(ring, t, [gx, gy], units)?;
        let from_first = self.b.sub(t, first)?;
        let i = self.b.div(from_first, stride)?;
        let two = self.u32(2)?;
        let turn = self.b.rem(i, two)?;
        let set_v = self.u32(set)?;
        let mine = self.b.eq(turn, set_v)?;
        let mut f = self.b.begin_if(mine, &[Type::U32])?;
        // Both sets' threads meet at a hand-over barrier.
        let count = 2 * self.schedule.warps * 32;
        let later = self.b.gt(i, zero)?;
        let w = self.b.begin_if(later, &[])?;
        self.b.named_barrier(false, 1 + set, count)?;
        self.b.end_if(w, &[])?;
        let next = self.b.add(t, stride)?;
        let more = self.b.lt(next, total)?;
        let handoff = Handoff {
            id: 2 - set,
            count,
            more,
            set,
        };
        let after = self.consumer(plan, ring, counter, Some(handoff))?;
        self.b.begin_else(&mut f, &[after])?;
        let trips = self.instance_trips(plan)?;
        let skipped = self.b.add(counter, trips)?;
        let counter = self.b.end_if(f, &[skipped])?[0];
        self.b.end_for(frame, &[counter])?;
        self.program_ids = None;
        self.instance_valid = None;
        Ok(())
    }

    /// The K steps of the current program instance's GEMM loop (its scalar
    /// prefix evaluated for the bounds).
    fn instance_trips(&mut self, plan: &WsPlan) -> TileResult<ValueId> {
        self.scalar_prefix(plan)?;
        let Op::For { lo, hi, step, .. } = &self.program.body[plan.at] else {
            return Err(super::pipeline::not_a_gemm_loop());
        };
        let (lo, hi, step) = (self.scalar(*lo)?, self.scalar(*hi)?, self.scalar(*step)?);
        self.trip_count(lo, hi, step)
    }

    /// Runs `role` for each program instance of this CTA, threading the ring
    /// counter through: once with the CTA's own block index, or (persistent)
    /// for instances `blockIdx.x, + gridDim.x, ..` of `grid` in grouped order.
    fn instances(
        &mut self,
        grid: Option<[ValueId; 2]>,
        ring: &Ring,
        mut role: impl FnMut(&mut Self, ValueId) -> TileResult<ValueId>,
    ) -> TileResult<()> {
        let zero = self.u32(0)?;
        let Some(grid) = grid else {
            self.program_ids = None;
            role(self, zero)?;
            return Ok(());
        };
        let (first, total, stride, units) = self.walk(ring, grid)?;
        let frame = self.b.begin_for(first, total, stride, &[zero])?;
        self.unit_ids(ring, frame.iv, grid, units)?;
        let counter = role(self, frame.carried[0])?;
        self.b.end_for(frame, &[counter])?;
        self.program_ids = None;
        self.instance_valid = None;
        Ok(())
    }

    /// Sets the program ids of instance `t` of a `gx` x `gy` grid walked in
    /// Triton's grouped order: [`GROUP_M`] rows of instances, column by column.
    fn grouped_ids(&mut self, t: ValueId, gx: ValueId, gy: ValueId) -> TileResult<()> {
        let group = self.u32(GROUP_M)?;
        let per_group = self.b.mul(group, gy)?;
        let g = self.b.div(t, per_group)?;
        let first_row = self.b.mul(g, group)?;
        let left = self.b.sub(gx, first_row)?;
        let rows = self.b.min(left, group)?;
        let within = self.b.rem(t, per_group)?;
        let r = self.b.rem(within, rows)?;
        let pm = self.b.add(first_row, r)?;
        let pn = self.b.div(within, rows)?;
        self.program_ids = Some([pm, pn]);
        Ok(())
    }

    /// `full[s]` or `empty[s]` (`s` a constant).
    fn bar(&mut self, ring: &Ring, s: u32, empty: bool) -> TileResult<ValueId> {
        let at = self.u32(s + if empty { ring.stages } else { 0 })?;
        Ok(self.b.ptr_add(ring.bars, at)?)
    }

    /// `full[stage]` or `empty[stage]` (`stage` a value).
    pub(super) fn bar_at(
        &mut self,
        ring: &Ring,
        stage: ValueId,
        empty: bool,
    ) -> TileResult<ValueId> {
        let at = if empty {
            let n = self.u32(ring.stages)?;
            self.b.add(stage, n)?
        } else {
            stage
        };
        Ok(self.b.ptr_add(ring.bars, at)?)
    }

    /// (stage, parity of its lap) of ring use `it`.
    pub(super) fn slot(&mut self, ring: &Ring, it: ValueId) -> TileResult<(ValueId, ValueId)> {
        let n = self.u32(ring.stages)?;
        let stage = self.b.rem(it, n)?;
        let lap = self.b.div(it, n)?;
        let two = self.u32(2)?;
        Ok((stage, self.b.rem(lap, two)?))
    }

    /// Spins until the phase of `parity` of `bar` has completed.
    pub(super) fn wait_parity(&mut self, bar: ValueId, parity: ValueId) -> TileResult<()> {
        let hint = self.u32(0)?;
        Ok(self.b.mbarrier_wait_parity(bar, parity, hint)?)
    }

    /// The ops of the body before the GEMM loop that give scalars (the
    /// origins of the loads may use them).
    fn scalar_prefix(&mut self, plan: &WsPlan) -> TileResult<()> {
        for op in &self.program.body[..plan.at] {
            if is_scalar_op(op) {
                self.op(op)?;
            }
        }
        Ok(())
    }

    /// The producer of one program instance: the K loop's TMA loads from
    /// ring use `counter` on; returns the counter after them.
    fn producer(
        &mut self,
        plan: &WsPlan,
        ring: &Ring,
        tmaps: [ValueId; 2],
        counter: ValueId,
    ) -> TileResult<ValueId> {
        self.scalar_prefix(plan)?;
        let program = self.program;
        let Some(((lo, step, iv), trips, body)) = self.loop_trips(&program.body[plan.at])? else {
            return Err(super::pipeline::not_a_gemm_loop());
        };
        let (a_st, b_st) = stagings(self.program, &plan.g);
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let frame = self.b.begin_for(zero, trips, one, &[])?;
        let (stage, full) = self.producer_step(ring, counter, frame.iv, (lo, step, iv), body)?;
        let sb = self.u32(ring.stage_bytes)?;
        let base = self.b.mul(stage, sb)?;
        let ab = self.u32(ring.a_bytes)?;
        let b_base = self.b.add(base, ab)?;
        self.tma_stage(&a_st, ring, base, tmaps[0], full, 0)?;
        self.tma_stage(&b_st, ring, b_base, tmaps[1], full, 1)?;
        self.b.end_for(frame, &[])?;
        Ok(self.b.add(counter, trips)?)
    }

    /// A `for` op's (lo, step, iteration variable), trip count and body;
    /// `None` for another op.
    #[allow(clippy::type_complexity)]
    pub(super) fn loop_trips<'o>(
        &mut self,
        op: &'o Op,
    ) -> TileResult<Option<((ValueId, ValueId, crate::ir::ScalarId), ValueId, &'o [Op])>> {
        let Op::For {
            lo,
            hi,
            step,
            iv,
            body,
            ..
        } = op
        else {
            return Ok(None);
        };
        let (lo, hi, step) = (self.scalar(*lo)?, self.scalar(*hi)?, self.scalar(*step)?);
        let trips = self.trip_count(lo, hi, step)?;
        Ok(Some(((lo, step, *iv), trips, body)))
    }

    /// Iteration `j` of a producer's loop (from `lo` by `step`, iteration
    /// variable `iv`, ring uses from `counter` on): takes the stage
    /// ([`Self::acquire`]) and replays the body's scalar ops (the origins)
    /// with `iv = lo + j * step`; returns (stage, `full[stage]`).
    pub(super) fn producer_step(
        &mut self,
        ring: &Ring,
        counter: ValueId,
        j: ValueId,
        (lo, step, iv): (ValueId, ValueId, crate::ir::ScalarId),
        body: &[Op],
    ) -> TileResult<(ValueId, ValueId)> {
        let it = self.b.add(counter, j)?;
        let (stage, full) = self.acquire(ring, it)?;
        let at = self.b.mul(j, step)?;
        let iv_j = self.b.add(lo, at)?;
        self.set_scalar(iv, iv_j);
        for op in body {
            if is_scalar_op(op) {
                self.op(op)?;
            }
        }
        Ok((stage, full))
    }

    /// The producer's turn at ring use `it`: waits until its stage is free
    /// (`empty`, the previous lap's parity) and announces the stage's bytes on
    /// `full`; returns (stage, `full[stage]`) for the TMA loads.
    pub(super) fn acquire(&mut self, ring: &Ring, it: ValueId) -> TileResult<(ValueId, ValueId)> {
        let one = self.u32(1)?;
        let (stage, parity) = self.slot(ring, it)?;
        let empty = self.bar_at(ring, stage, true)?;
        let lap_before = self.b.xor(parity, one)?;
        self.wait_parity(empty, lap_before)?;
        let full = self.bar_at(ring, stage, false)?;
        let bytes = self.u32(ring.stage_bytes)?;
        self.b
            .mbarrier(MbarrierOp::ArriveExpectTx, &[full, bytes])?;
        Ok((stage, full))
    }

    /// The TMA loads of one operand box into the stage at byte `base`: one
    /// per 64 elements along the staged rows, box `i` at `i * rows * 128`.
    /// The operand a cluster shares (`operand` 0: `a`, 1: `b`) is loaded in
    /// this CTA's share only, multicast into every CTA of the cluster.
    pub(super) fn tma_stage(
        &mut self,
        st: &Staging,
        ring: &Ring,
        base: ValueId,
        tmap: ValueId,
        full: ValueId,
        operand: usize,
    ) -> TileResult<()> {
        let (o_r, o_c) = (
            self.scalar(st.origin[st.row_dim])?,
            self.scalar(st.origin[st.col_dim])?,
        );
        if let Some(c) = ring.cluster.filter(|c| c.share.operand == operand) {
            return self.tma_share(st, ring, base, tmap, full, c, [o_r, o_c]);
        }
        // A view of rank > 2 (attention's K and V, `pipeline_ring.rs`): its
        // other dims follow, from the last (the map's, `TensorMapParam`).
        let mut leading = Vec::new();
        for d in (0..st.origin.len()).rev() {
            if d != st.row_dim && d != st.col_dim {
                leading.push(self.scalar(st.origin[d])?);
            }
        }
        let bk = stage_k(&st.elem);
        for i in 0..st.cols / bk {
            let off = self.u32(i * st.rows * ROW)?;
            let off = self.b.add(base, off)?;
            let dst = self.b.ptr_add(ring.smem, off)?;
            let c = if i == 0 {
                o_c
            } else {
                let d = self.u32(i * bk)?;
                self.b.add(o_c, d)?
            };
            let mut coords = vec![c, o_r];
            coords.extend(&leading);
            self.b.tma_load(dst, tmap, full, &coords, None)?;
        }
        Ok(())
    }

    /// This CTA's share of a shared operand's stage (see [`Share`]),
    /// multicast: `rows / ctas` rows from row `rank * rows / ctas` of the
    /// one box, or boxes `rank * per ..` of `per = boxes / ctas`.
    #[allow(clippy::too_many_arguments)]
    fn tma_share(
        &mut self,
        st: &Staging,
        ring: &Ring,
        base: ValueId,
        tmap: ValueId,
        full: ValueId,
        c: Cluster,
        [o_r, o_c]: [ValueId; 2],
    ) -> TileResult<()> {
        let mask = Some(c.mask);
        if c.share.rows_split {
            let slice = self.u32(st.rows / c.share.ctas)?;
            let first = self.b.mul(c.rank, slice)?;
            let row = self.b.add(o_r, first)?;
            let row_bytes = self.u32(ROW)?;
            let off = self.b.mul(first, row_bytes)?;
            let off = self.b.add(base, off)?;
            let dst = self.b.ptr_add(ring.smem, off)?;
            self.b.tma_load(dst, tmap, full, &[o_c, row], mask)?;
            return Ok(());
        }
        let per = st.cols / stage_k(&st.elem) / c.share.ctas;
        let per_v = self.u32(per)?;
        let first = self.b.mul(c.rank, per_v)?;
        for i in 0..per {
            let box_i = if i == 0 {
                first
            } else {
                let i = self.u32(i)?;
                self.b.add(first, i)?
            };
            let box_bytes = self.u32(st.rows * ROW)?;
            let off = self.b.mul(box_i, box_bytes)?;
            let off = self.b.add(base, off)?;
            let dst = self.b.ptr_add(ring.smem, off)?;
            let bk = self.u32(stage_k(&st.elem))?;
            let col = self.b.mul(box_i, bk)?;
            let col = self.b.add(o_c, col)?;
            self.b.tma_load(dst, tmap, full, &[col, o_r], mask)?;
        }
        Ok(())
    }

    /// One warp's hand-back of stage `stage`: an arrival on its `empty`
    /// barrier, in every CTA of the cluster (remote arrivals through `mapa`,
    /// relaxed: the warp only read the stage).
    pub(super) fn release(&mut self, ring: &Ring, stage: ValueId) -> TileResult<()> {
        let empty = self.bar_at(ring, stage, true)?;
        let Some(c) = ring.cluster else {
            self.b.mbarrier(MbarrierOp::Arrive, &[empty])?;
            return Ok(());
        };
        for r in 0..c.share.ctas {
            let r = self.u32(r)?;
            let remote = self.b.mapa(empty, r)?;
            self.b.mbarrier_arrive_cluster_relaxed(remote)?;
        }
        Ok(())
    }

    /// The consumers of one program instance: the program's ops, the GEMM
    /// loop as waits on `full` and wgmmas; returns the ring counter after it.
    /// With a `handoff` (ping-pong), the other set is let start its GEMM
    /// loop once this one's is done, before the epilogue.
    fn consumer(
        &mut self,
        plan: &WsPlan,
        ring: &Ring,
        counter: ValueId,
        handoff: Option<Handoff>,
    ) -> TileResult<ValueId> {
        let mut after = counter;
        // A cluster's CTA past the grid skips the ops after the GEMM loop.
        let mut skip = None;
        let early = self.early_epilogue(plan);
        for (i, op) in self.program.body.iter().enumerate() {
            if i == plan.at + 1 {
                if let Some(valid) = self.instance_valid {
                    skip = Some(self.b.begin_if(valid, &[])?);
                }
            }
            if early.is_some_and(|to| (plan.at + 1..to).contains(&i)) {
                continue; // recorded before the GEMM loop
            }
            if let (Some(sp), Some((slots, map))) = (&plan.store, ring.store) {
                if let (true, Op::Store { origin, tile, .. }) = (i == sp.at, op) {
                    let set = handoff.as_ref().map_or(0, |h| h.set);
                    let set_bytes = self.u32(set * sp.slots * sp.slot_bytes())?;
                    let slots = self.b.ptr_add(slots, set_bytes)?;
                    let ring = StoreRing { slots, map, set };
                    self.tma_store_tile(sp, ring, origin, *tile)?;
                    continue;
                }
            }
            if i != plan.at {
                self.op(op)?;
                continue;
            }
            let Op::For {
                lo,
                hi,
                step,
                inits,
                results,
                ..
            } = op
            else {
                return Err(super::pipeline::not_a_gemm_loop());
            };
            let (Value::Tile(init), Value::Tile(result)) = (inits[0], results[0]) else {
                return Err(super::pipeline::not_a_gemm_loop());
            };
            let (lo, hi, step) = (self.scalar(*lo)?, self.scalar(*hi)?, self.scalar(*step)?);
            if let (Some(to), Some(sp)) = (early, &plan.store) {
                // The epilogue, recorded now (`fuse.rs`), and the loads of
                // the store's first column box (a bias row) issued before
                // the GEMM loop: their latency runs under the wgmmas instead
                // of after the last one (session 13's QKV layer: the bias
                // cost 7 % of its time).
                self.set_fused(true);
                for op in &self.program.body[plan.at + 1..to] {
                    self.op(op)?;
                }
                if let Op::Store { tile, .. } = &self.program.body[sp.at] {
                    let regs: Vec<u32> = sp.parts[0].iter().flatten().flatten().copied().collect();
                    self.prefetch_loads(*tile, &regs)?;
                }
            }
            after = self.consumer_loop(plan, ring, counter, (lo, hi, step), init, result)?;
            if let Some(h) = &handoff {
                let f = self.b.begin_if(h.more, &[])?;
                self.b.named_barrier(true, h.id, h.count)?;
                self.b.end_if(f, &[])?;
            }
            // The epilogue, register by register where stored (`fuse.rs`).
            if early.is_none() {
                self.set_fused(true);
            }
        }
        self.set_fused(false);
        if let Some(f) = skip {
            self.b.end_if(f, &[])?;
        }
        Ok(after)
    }

    fn consumer_loop(
        &mut self,
        plan: &WsPlan,
        ring: &Ring,
        counter: ValueId,
        (lo, hi, step): (ValueId, ValueId, ValueId),
        init: crate::ir::TileId,
        result: crate::ir::TileId,
    ) -> TileResult<ValueId> {
        let g = &plan.g;
        let (ta, tb) = (
            self.program.tile(g.a.out).clone(),
            self.program.tile(g.b.out).clone(),
        );
        let (bm, bn) = (ta.shape[0], tb.shape[1]);
        let (a_st, b_st) = stagings(self.program, g);
        let (a_kmajor, b_kmajor) = (a_st.row_dim == 0, b_st.row_dim == 1);
        let trips = self.trip_count(lo, hi, step)?;
        let accs = self.pack_accs(g.dot, init, bm, bn)?;
        // With 3 stages or more one wgmma group may stay in flight
        // (`wgmma_in_flight`): stage j - 1 is handed back at iteration j
        // (see the module doc).
        let overlap = ring.stages >= 3 && self.schedule.wgmma_in_flight > 0;
        let (zero, one) = (self.u32(0)?, self.u32(1)?);
        let lane0 = self.b.eq(self.lane, zero)?;
        // With a group in flight, the loop and its final wait go inside
        // `if trips > 0`: ptxas serialises every wgmma (C7514, "non wgmma
        // instructions reading accumulator registers") when that wait sits in
        // a block the loop's exit shares with the path that skips the loop.
        let after = self.b.add(counter, trips)?;
        let guard = if overlap {
            let types = accs
                .iter()
                .map(|&a| Ok(self.b.value_type(a)?.clone()))
                .collect::<TileResult<Vec<_>>>()?;
            let any = self.b.gt(trips, zero)?;
            Some((self.b.begin_if(any, &types)?, accs.clone()))
        } else {
            None
        };
        let frame = self.b.begin_for(zero, trips, one, &accs)?;
        let j = frame.iv;
        let mut accs = frame.carried.clone();
        let it = self.b.add(counter, j)?;
        let (stage, parity) = self.slot(ring, it)?;
        let full = self.bar_at(ring, stage, false)?;
        self.wait_parity(full, parity)?;
        let sb = self.u32(ring.stage_bytes)?;
        let a_base = self.b.mul(stage, sb)?;
        let ab = self.u32(ring.a_bytes)?;
        let b_base = self.b.add(a_base, ab)?;
        let a_ptr = self.b.ptr_add(ring.smem, a_base)?;
        let b_ptr = self.b.ptr_add(ring.smem, b_base)?;
        self.wgmma_stage(
            &mut accs, a_ptr, b_ptr, bn, a_kmajor, b_kmajor, g.inputs, &ta.elem,
        )?;
        if overlap {
            self.b.wgmma_wait_group(1)?;
            let later = self.b.gt(j, zero)?;
            let go = self.b.and(lane0, later)?;
            let f = self.b.begin_if(go, &[])?;
            let prev = self.b.sub(it, one)?;
            let (prev_stage, _) = self.slot(ring, prev)?;
            self.release(ring, prev_stage)?;
            self.b.end_if(f, &[])?;
        } else {
            self.b.wgmma_wait_group(0)?;
            let f = self.b.begin_if(lane0, &[])?;
            self.release(ring, stage)?;
            self.b.end_if(f, &[])?;
        }
        let mut accs = self.b.end_for(frame, &accs)?;
        if let Some((mut f, init)) = guard {
            // The last stage, handed back once its wgmmas are done.
            self.b.wgmma_wait_group(0)?;
            let l = self.b.begin_if(lane0, &[])?;
            let last = self.b.sub(after, one)?;
            let (last_stage, _) = self.slot(ring, last)?;
            self.release(ring, last_stage)?;
            self.b.end_if(l, &[])?;
            self.b.begin_else(&mut f, &accs)?;
            accs = self.b.end_if(f, &init)?;
        }
        self.unpack_accs(g.dot, &accs, bm, bn, result)?;
        Ok(after)
    }
}

/// A ping-pong consumer set's signal to the other set after its GEMM loop:
/// `bar.arrive id, count` when the CTA has a next instance (`more`).
struct Handoff {
    id: u32,
    count: u32,
    more: ValueId,
    /// The set (0 or 1) that arrives.
    set: u32,
}

/// Ops the producer replays: scalar arithmetic, view extents, program ids.
impl Lowerer<'_> {
    /// With a TMA-stored epilogue whose ops between the GEMM loop (its one
    /// result) and the store are all scalar or recorded by `fuse.rs`, and no
    /// cluster (whose CTAs past the grid skip them), the store's index: those
    /// ops may be recorded before the loop, so that the store's first loads
    /// issue before it (`consumer`).
    fn early_epilogue(&self, plan: &WsPlan) -> Option<usize> {
        let sp = plan.store.as_ref()?;
        let body = &self.program.body;
        let one_result = matches!(&body[plan.at], Op::For { results, .. } if results.len() == 1);
        let between = &body[plan.at + 1..sp.at];
        let recorded = between
            .iter()
            .all(|op| is_scalar_op(op) || super::fuse::records(body, op));
        let skips = plan.share.is_some() || self.instance_valid.is_some();
        (one_result && recorded && !skips).then_some(sp.at)
    }
}

pub(super) fn is_scalar_op(op: &Op) -> bool {
    matches!(
        op,
        Op::ScalarConst { .. }
            | Op::ScalarBinary { .. }
            | Op::ScalarCmp { .. }
            | Op::ViewDim { .. }
            | Op::ProgramId { .. }
    )
}

/// (producer, consumer) registers per thread after `setmaxnreg` for `warps`
/// consumer warps, or `None` below two consumer warpgroups (the register
/// file then holds both at the compiled count): the consumers take what the
/// producer gives up, within the 64 Ki registers of the SM, multiples of 8.
pub(crate) fn setmaxnreg_counts(warps: u32) -> Option<(u32, u32)> {
    let groups = warps / 4;
    if groups < 2 {
        return None;
    }
    let consumer = ((65536 / 128 - PRODUCER_REGS) / groups / 8 * 8).min(256);
    Some((PRODUCER_REGS, consumer))
}
