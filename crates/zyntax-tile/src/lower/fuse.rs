//! Register-at-a-time lowering of an epilogue (the ops after the GEMM loop
//! of the warp-specialised pipeline, `pipeline_ws.rs`).
//!
//! Lowered op by op, an epilogue keeps whole tiles live at once: GELU's
//! `x * x` beside `x` is two 128-register tiles, a residual tile another
//! 128, on top of the accumulator; a consumer of the warp-specialised CTA
//! has at most 168 registers at compile time, and ptxas spilled hundreds of
//! bytes. Here `full`, `iota`, `load` (of a view the program never writes),
//! `map`, `cast` and `broadcast` are only recorded; a `store` computes each
//! register group it writes just before writing it, from the accumulator's
//! register up (a bias element, loaded once, is shared by the rows). So
//! the live registers are the accumulator plus a few (a 128x256 tile over
//! 8 warps still spills a few dozen bytes around a bias row: ptxas). Any other op first
//! computes its operands whole.
//!
//! Such a store computes each group once, before a branch per group between
//! its two forms (`memory.rs`: a box wholly inside the view, or masked).

use super::{Coord, Lowerer};
use crate::error::{TileError, TileResult};
use crate::ir::{Const, MapOp, Op, ScalarId, TileId, ViewId};
use std::collections::HashMap;
use zyntax_hir::ValueId;

/// Registers of loads [`Lowerer::prefetch_loads`] issues together at most.
const PREFETCH_MAX: usize = 16;

/// The recorded ops and the registers computed so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fused {
    defs: HashMap<TileId, Op>,
    memo: Memo,
}

/// Registers by (tile, index), and coordinate tables by tile.
#[derive(Clone, Debug, Default)]
pub(crate) struct Memo {
    regs: HashMap<(TileId, u32), ValueId>,
    tables: HashMap<TileId, Vec<Vec<Coord>>>,
}

impl Lowerer<'_> {
    /// Starts recording (`Some`) or stops (`None`) element-wise ops.
    pub(super) fn set_fused(&mut self, on: bool) {
        self.fused = on.then(Fused::default);
    }

    /// With fusion on, records `op` if it can wait (returns true), or
    /// computes the recorded operands it reads (returns false).
    pub(super) fn fuse(&mut self, op: &Op) -> TileResult<bool> {
        let Some(fused) = &mut self.fused else {
            return Ok(false);
        };
        let out = match op {
            Op::Full { out, .. }
            | Op::Iota { out, .. }
            | Op::Map { out, .. }
            | Op::Cast { out, .. }
            | Op::Broadcast { out, .. }
            | Op::Load { out, .. }
                if records(&self.program.body, op) =>
            {
                Some(*out)
            }
            _ => None,
        };
        if let Some(out) = out {
            fused.defs.insert(out, op.clone());
            // Not computed (yet): registers a previous lowering of this op
            // left (the other consumer set of a ping-pong kernel) are in
            // blocks this one's use is not dominated by.
            self.tiles[out.0 as usize] = None;
            return Ok(true);
        }
        let reads: Vec<TileId> = match op {
            // A store reads its registers group by group (`memory.rs`),
            // unless they are only a cast of computed ones (the plain GEMM's
            // epilogue): no pressure to spare, and the store keeps its one
            // branch between the whole box and the masked one.
            Op::Store { tile, .. } | Op::AtomicAdd { tile, .. } if self.only_casts(*tile) => {
                vec![*tile]
            }
            Op::Store { .. } | Op::AtomicAdd { .. } => Vec::new(),
            Op::Reduce { tile, .. } | Op::ConvertLayout { tile, .. } => vec![*tile],
            Op::Dot { a, b, acc, .. } => vec![*a, *b, *acc],
            Op::For { inits, .. } => inits
                .iter()
                .filter_map(|v| match v {
                    crate::ir::Value::Tile(t) => Some(*t),
                    crate::ir::Value::Scalar(_) => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for t in reads {
            if self.tiles[t.0 as usize].is_none() {
                let n = self.layout(t)?.num_regs(&self.program.tile(t).shape);
                let regs = (0..n)
                    .map(|r| self.fused_reg(t, r))
                    .collect::<TileResult<Vec<_>>>()?;
                self.set_tile(t, regs);
            }
        }
        Ok(false)
    }

    /// Whether `t` is computed, or a recorded cast of such a tile.
    fn only_casts(&self, t: TileId) -> bool {
        if self.tiles[t.0 as usize].is_some() {
            return true;
        }
        match self.fused.as_ref().and_then(|f| f.defs.get(&t)) {
            Some(Op::Cast { tile, .. }) => self.only_casts(*tile),
            _ => false,
        }
    }

    /// Registers `regs` of `t`: computed ones, or recorded ops evaluated now.
    pub(super) fn tile_regs(&mut self, t: TileId, regs: &[u32]) -> TileResult<Vec<ValueId>> {
        if let Some(all) = &self.tiles[t.0 as usize] {
            return Ok(regs.iter().map(|&r| all[r as usize]).collect());
        }
        regs.iter().map(|&r| self.fused_reg(t, r)).collect()
    }

    /// Register `r` of recorded tile `t`, evaluated (and remembered).
    fn fused_reg(&mut self, t: TileId, r: u32) -> TileResult<ValueId> {
        if let Some(all) = &self.tiles[t.0 as usize] {
            return Ok(all[r as usize]);
        }
        let fused = self
            .fused
            .as_ref()
            .ok_or_else(|| TileError::Internal(format!("tile {t:?} used before it is defined")))?;
        if let Some(&v) = fused.memo.regs.get(&(t, r)) {
            return Ok(v);
        }
        let def =
            fused.defs.get(&t).cloned().ok_or_else(|| {
                TileError::Internal(format!("tile {t:?} used before it is defined"))
            })?;
        let v = match def {
            Op::Full { value, .. } => self.scalar(value)?,
            Op::Iota { axis, .. } => {
                let layout = self.layout(t)?;
                let shape = self.program.tile(t).shape.clone();
                let table = self.fused_table(t)?;
                Self::reg_coords(&layout, &shape, &table, r)[axis].value
            }
            Op::Map { op, args, .. } => {
                let x = args
                    .iter()
                    .map(|&a| self.fused_reg(a, r))
                    .collect::<TileResult<Vec<_>>>()?;
                match op {
                    MapOp::Unary(u) => self.b.unary(u, x[0])?,
                    MapOp::Binary(b) => self.b.binary(b, x[0], x[1])?,
                    MapOp::Cmp(c) => self.b.cmp(c, x[0], x[1])?,
                    MapOp::Fma => self.b.fma(x[0], x[1], x[2])?,
                    MapOp::Where => self.b.select(x[0], x[1], x[2])?,
                    MapOp::Approx(a) => self.b.approx(a, x[0])?,
                }
            }
            Op::Cast { tile, .. } => {
                let x = self.fused_reg(tile, r)?;
                let elem = self.program.tile(t).elem.clone();
                self.b.cast(x, elem)?
            }
            Op::Broadcast { tile, .. } => {
                let from = self.broadcast_source(t, tile, r)?;
                self.fused_reg(tile, from)?
            }
            Op::Load {
                view,
                origin,
                other,
                ..
            } => return self.fused_load(t, r, view, &origin, other),
            _ => return Err(TileError::Internal(format!("{def:?} is not fused"))),
        };
        self.remember(t, r, v);
        Ok(v)
    }

    /// The register of `src` that register `r` of its broadcast `t` copies:
    /// as `elementwise.rs`, the source register along size-1 dims.
    fn broadcast_source(&self, t: TileId, src: TileId, r: u32) -> TileResult<u32> {
        let layout = self.layout(t)?;
        let src_shape = &self.program.tile(src).shape;
        let mut dims = layout.reg_dims(&self.program.tile(t).shape, r);
        for (d, &s) in src_shape.iter().enumerate() {
            if s == 1 {
                dims[d] = 0;
            }
        }
        Ok(layout.reg_index(src_shape, &dims))
    }

    /// Loads now the registers of recorded loads that registers `regs` of
    /// `t` read (through maps, casts and broadcasts), if they are at most
    /// [`PREFETCH_MAX`]: evaluated group by group, each load sits just
    /// before its group's arithmetic and its latency is paid once per
    /// group; issued together it is paid about once. A TMA store's column
    /// box (`store_tma.rs`) reads 8 bias pairs a thread this way; a larger
    /// set (a residual tile's box) stays lazy, it would hold too many
    /// registers beside the accumulator.
    pub(super) fn prefetch_loads(&mut self, t: TileId, regs: &[u32]) -> TileResult<()> {
        let mut leaves = Vec::new();
        for &r in regs {
            self.load_leaves(t, r, &mut leaves)?;
        }
        if leaves.len() <= PREFETCH_MAX {
            for (l, r) in leaves {
                self.fused_reg(l, r)?;
            }
        }
        Ok(())
    }

    /// The (tile, register) pairs of recorded, not yet loaded loads that
    /// register `r` of `t` reads, each once.
    fn load_leaves(&self, t: TileId, r: u32, out: &mut Vec<(TileId, u32)>) -> TileResult<()> {
        let Some(fused) = &self.fused else {
            return Ok(());
        };
        if self.tiles[t.0 as usize].is_some() || fused.memo.regs.contains_key(&(t, r)) {
            return Ok(());
        }
        match fused.defs.get(&t) {
            Some(Op::Load { .. }) if !out.contains(&(t, r)) => out.push((t, r)),
            Some(Op::Map { args, .. }) => {
                for a in args.clone() {
                    self.load_leaves(a, r, out)?;
                }
            }
            Some(Op::Cast { tile, .. }) => self.load_leaves(*tile, r, out)?,
            Some(Op::Broadcast { tile, .. }) => {
                let src = *tile;
                let from = self.broadcast_source(t, src, r)?;
                self.load_leaves(src, from, out)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn remember(&mut self, t: TileId, r: u32, v: ValueId) {
        if let Some(f) = &mut self.fused {
            f.memo.regs.insert((t, r), v);
        }
    }

    /// The coordinate table of recorded tile `t` (`Lowerer::coords`).
    fn fused_table(&mut self, t: TileId) -> TileResult<Vec<Vec<Coord>>> {
        if let Some(table) = self.fused.as_ref().and_then(|f| f.memo.tables.get(&t)) {
            return Ok(table.clone());
        }
        let layout = self.layout(t)?;
        let shape = self.program.tile(t).shape.clone();
        let table = self.coords(&layout, &shape)?;
        if let Some(f) = &mut self.fused {
            f.memo.tables.insert(t, table.clone());
        }
        Ok(table)
    }

    /// The load of the register group (a vector's run) holding register `r`.
    fn fused_load(
        &mut self,
        t: TileId,
        r: u32,
        view: ViewId,
        origin: &[ScalarId],
        other: Const,
    ) -> TileResult<ValueId> {
        let table = self.fused_table(t)?;
        let origin = origin
            .iter()
            .map(|s| self.scalar(*s))
            .collect::<TileResult<Vec<_>>>()?;
        let group = self.load_group(t, view, &origin, other, &table, r)?;
        let mut want = None;
        for (g, v) in group {
            self.remember(t, g, v);
            if g == r {
                want = Some(v);
            }
        }
        want.ok_or_else(|| TileError::Internal("a fused load missed its register".into()))
    }
}

/// Whether `ops` (or loops in them) store or add into `view`.
/// Whether [`Lowerer::fuse`] records `op` (it can wait until stored) in a
/// program whose body is `body`.
pub(super) fn records(body: &[Op], op: &Op) -> bool {
    match op {
        Op::Full { .. } | Op::Iota { .. } | Op::Map { .. } | Op::Cast { .. } => true,
        Op::Broadcast { .. } => true,
        Op::Load { view, .. } => !writes(body, *view),
        _ => false,
    }
}

fn writes(ops: &[Op], view: ViewId) -> bool {
    ops.iter().any(|op| match op {
        Op::Store { view: v, .. } | Op::AtomicAdd { view: v, .. } => *v == view,
        Op::For { body, .. } => writes(body, view),
        _ => false,
    })
}
