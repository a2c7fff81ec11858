//! `reduce` along one axis, in three steps (Triton's reduce lowering):
//!
//! 1. in-thread: each thread combines its registers along the axis;
//! 2. across lanes: butterfly `shfl.xor` over the lanes that tile the axis,
//!    after which every such lane holds its warp's partial;
//! 3. across warps (when several warps tile the axis): lane 0 of each
//!    writes its partial to shared memory, a barrier, and every thread
//!    combines the warps' partials for its registers.
//!
//! Copies that the layout replicates along the axis (a tile narrower than the
//! layout's coverage) are replaced by the identity first, so each element is
//! counted once. The result keeps the operand's layout with the axis of size
//! 1, so every thread along the axis holds the result. Blocked and `Mma`
//! layouts alike: on an `Mma` accumulator a row reduction is the thread's
//! registers, then two `shfl.xor` over the quad (as FlashAttention-2 does),
//! then shared memory only when several warps split the columns.
//!
//! 4. across the CTAs of a cluster, with a schedule of `cluster` > 1 outside
//!    the warp-specialised pipeline ("cluster rows": the cluster's CTAs each
//!    hold a slice of the reduced axis, as a row too wide for one SM's
//!    registers split over four): one thread per result writes the CTA's
//!    value to shared memory, a cluster barrier, and every thread combines
//!    the cluster's values read through `mapa` / `ld.shared::cluster` in
//!    rank order (every CTA gets the same bits), then a second cluster
//!    barrier so that no CTA overwrites its slot, or exits, while another
//!    still reads it.

use super::convert::staged_bytes;
use super::Lowerer;
use crate::error::TileResult;
use crate::ir::{Op, ReduceOp, TileId, TileProgram};
use crate::layout::{DimMap, Layout};
use zyntax_hir::{BinOp, ClusterBarrierOp, ScalarType, ShflMode, Type, ValueId};

impl Lowerer<'_> {
    fn identity(&mut self, op: ReduceOp, elem: &Type) -> TileResult<ValueId> {
        let v = if elem.is_float() {
            let f = match op {
                ReduceOp::Sum => 0.0,
                ReduceOp::Max => f64::NEG_INFINITY,
                ReduceOp::Min => f64::INFINITY,
            };
            self.b.fconst(elem.clone(), f)?
        } else {
            let (lo, hi) = match elem.as_scalar() {
                Some(ScalarType::I32) => (i64::from(i32::MIN), i64::from(i32::MAX)),
                Some(ScalarType::I64) => (i64::MIN, i64::MAX),
                Some(ScalarType::U32) => (0, i64::from(u32::MAX)),
                _ => (0, -1), // u64: all ones
            };
            let i = match op {
                ReduceOp::Sum => 0,
                ReduceOp::Max => lo,
                ReduceOp::Min => hi,
            };
            self.b.iconst(elem.clone(), i)?
        };
        Ok(v)
    }

    fn combine(&mut self, op: ReduceOp, a: ValueId, b: ValueId) -> TileResult<ValueId> {
        let bin = match op {
            ReduceOp::Sum => BinOp::Add,
            ReduceOp::Max => BinOp::Max,
            ReduceOp::Min => BinOp::Min,
        };
        Ok(self.b.binary(bin, a, b)?)
    }

    /// This thread's warp position along a reduced axis (which of the
    /// `td.warps` warps tiling it) and whether it is the first of the lanes
    /// tiling it: the writers of steps 3 and 4.
    fn axis_position(&mut self, td: &DimMap) -> TileResult<(ValueId, ValueId)> {
        let (ws, wn, ls, ln) = (
            self.u32(td.warp_stride)?,
            self.u32(td.warps)?,
            self.u32(td.lane_stride)?,
            self.u32(td.lanes)?,
        );
        let w = self.b.div(self.warp, ws)?;
        let warp_pos = self.b.rem(w, wn)?;
        let l = self.b.div(self.lane, ls)?;
        let lane_pos = self.b.rem(l, ln)?;
        let zero = self.u32(0)?;
        let first_lane = self.b.eq(lane_pos, zero)?;
        Ok((warp_pos, first_lane))
    }

    pub(super) fn reduce(
        &mut self,
        out: TileId,
        tile: TileId,
        axis: usize,
        op: ReduceOp,
    ) -> TileResult<()> {
        // Any distributed layout: each dim's DimMap says which lanes and warps
        // tile it (an Mma accumulator's rows reduce over the 4 lanes of a quad).
        let layout = self.layout(tile)?;
        let in_shape = self.program.tile(tile).shape.clone();
        let out_shape = self.program.tile(out).shape.clone();
        let elem = self.program.tile(out).elem.clone();
        let regs = self.regs(tile)?;
        let table = self.coords(&layout, &in_shape)?;
        let identity = self.identity(op, &elem)?;

        // 1. In-thread.
        let along = layout.regs_per_dim(&in_shape)[axis];
        let mut partials = Vec::new();
        for ro in 0..layout.num_regs(&out_shape) {
            let mut dims = layout.reg_dims(&out_shape, ro);
            let mut acc = None;
            for i in 0..along {
                dims[axis] = i;
                let mut v = regs[layout.reg_index(&in_shape, &dims) as usize];
                if let Some(owned) = table[axis][i as usize].owned {
                    v = self.b.select(owned, v, identity)?;
                }
                acc = Some(match acc {
                    Some(a) => self.combine(op, a, v)?,
                    None => v,
                });
            }
            partials.push(acc.unwrap_or(identity));
        }

        // 2. Across the lanes along the axis.
        let td = layout.dim_map(axis);
        let full_mask = self.b.iconst(Type::U32, i64::from(u32::MAX))?;
        let mut step = 1;
        while step < td.lanes {
            let lane_mask = self.u32(step * td.lane_stride)?;
            for p in partials.iter_mut() {
                let other = self.b.shfl(ShflMode::Xor, full_mask, *p, lane_mask, 32)?;
                *p = self.combine(op, *p, other)?;
            }
            step *= 2;
        }

        // 3. Across the warps along the axis.
        if td.warps > 1 {
            let ptr = self.scratch_ptr(&elem, 0)?;
            let numel: u32 = out_shape.iter().product();
            let out_table = self.coords(&layout, &out_shape)?;
            let (warp_pos, first_lane) = self.axis_position(&td)?;
            let numel_v = self.u32(numel)?;
            let warp_base = self.b.mul(warp_pos, numel_v)?;
            let mut offsets = Vec::new();
            for (ro, &p) in partials.iter().enumerate() {
                let mut coords = Self::reg_coords(&layout, &out_shape, &out_table, ro as u32);
                // Every warp along the axis writes its own partial.
                coords[axis].owned = None;
                let values: Vec<ValueId> = coords.iter().map(|c| c.value).collect();
                let offset = self.staged_offset(&out_shape, &values)?;
                offsets.push(offset);
                let owned = self.owned(&coords)?;
                let writer = self.and(Some(first_lane), owned)?.unwrap_or(first_lane);
                let frame = self.b.begin_if(writer, &[])?;
                let at = self.b.add(warp_base, offset)?;
                let q = self.b.ptr_add(ptr, at)?;
                self.b.store(q, p)?;
                self.b.end_if(frame, &[])?;
            }
            self.b.barrier()?;
            for (p, &offset) in partials.iter_mut().zip(&offsets) {
                let mut acc = None;
                for w in 0..td.warps {
                    let base = self.u32(w * numel)?;
                    let at = self.b.add(base, offset)?;
                    let v = self.read_staged(ptr, &elem, at)?;
                    acc = Some(match acc {
                        Some(a) => self.combine(op, a, v)?,
                        None => v,
                    });
                }
                *p = acc.unwrap_or(identity);
            }
            self.b.barrier()?;
        }

        // 4. Across the CTAs of a cluster.
        let cluster = self.schedule.cluster;
        if cluster > 1 && !self.schedule.warp_specialize {
            self.reduce_cluster(op, &layout, axis, &out_shape, &elem, &mut partials)?;
        }
        self.set_tile(out, partials);
        Ok(())
    }

    /// Step 4 of [`Self::reduce`]: `partials` (this CTA's results, every
    /// thread along `axis` holding its registers') combined over the
    /// cluster's CTAs. The slots are the start of the scratch (at least
    /// [`cluster_slot_bytes`] with a cluster), free after step 3's closing
    /// barrier, or after one here when one warp holds the axis.
    fn reduce_cluster(
        &mut self,
        op: ReduceOp,
        layout: &Layout,
        axis: usize,
        out_shape: &[u32],
        elem: &Type,
        partials: &mut [ValueId],
    ) -> TileResult<()> {
        let td = layout.dim_map(axis);
        if td.warps == 1 {
            // No step 3: earlier staging may still be read.
            self.b.barrier()?;
        }
        let ptr = self.scratch_ptr(elem, 0)?;
        let out_table = self.coords(layout, out_shape)?;
        let (warp_pos, first_lane) = self.axis_position(&td)?;
        let zero = self.u32(0)?;
        let first_warp = self.b.eq(warp_pos, zero)?;
        let first = self.b.and(first_lane, first_warp)?;
        let mut slots = Vec::new();
        for (ro, &p) in partials.iter().enumerate() {
            let mut coords = Self::reg_coords(layout, out_shape, &out_table, ro as u32);
            coords[axis].owned = None;
            let values: Vec<ValueId> = coords.iter().map(|c| c.value).collect();
            let offset = self.staged_offset(out_shape, &values)?;
            let slot = self.b.ptr_add(ptr, offset)?;
            slots.push(slot);
            let owned = self.owned(&coords)?;
            let writer = self.and(Some(first), owned)?.unwrap_or(first);
            let frame = self.b.begin_if(writer, &[])?;
            self.b.store(slot, p)?;
            self.b.end_if(frame, &[])?;
        }
        // arrive has release and wait acquire semantics at cluster scope:
        // the slots written above are visible to every CTA after the wait.
        self.b.cluster_barrier(ClusterBarrierOp::Arrive)?;
        self.b.cluster_barrier(ClusterBarrierOp::Wait)?;
        for (p, &slot) in partials.iter_mut().zip(&slots) {
            let mut acc = None;
            for r in 0..self.schedule.cluster {
                let rank = self.u32(r)?;
                let remote = self.b.mapa(slot, rank)?;
                let mut v = self.b.load(remote)?;
                if *elem == Type::BOOL {
                    let zero = self.u32(0)?;
                    v = self.b.ne(v, zero)?;
                }
                acc = Some(match acc {
                    Some(a) => self.combine(op, a, v)?,
                    None => v,
                });
            }
            *p = acc.unwrap_or(*p);
        }
        self.b.cluster_barrier(ClusterBarrierOp::Arrive)?;
        self.b.cluster_barrier(ClusterBarrierOp::Wait)?;
        Ok(())
    }
}

/// Shared memory the slots of step 4 need: the largest reduction result.
pub(super) fn cluster_slot_bytes(program: &TileProgram, ops: &[Op]) -> u64 {
    ops.iter()
        .map(|op| match op {
            Op::Reduce { out, .. } => {
                let t = program.tile(*out);
                t.numel() * staged_bytes(&t.elem)
            }
            Op::For { body, .. } => cluster_slot_bytes(program, body),
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}
