//! Tiles that layout inference makes again instead of converting them.
//!
//! A tile computed from `full`s and `iota`s only (element-wise ops, casts and
//! broadcasts of them: the masks and offsets of attention, `cols < n`) costs
//! a few register ops per element in any layout, while a `ConvertLayout` is a
//! round trip through shared memory with two barriers. Converting one
//! re-emits its definition in the wanted layout instead. A `broadcast` of any
//! tile is made again from its converted source, which has fewer elements (a
//! `[64, 1]` row maximum instead of the `[64, 128]` tile it expands to).
//! So a tile made from `full`s, `iota`s and broadcasts of anything (a mask
//! `cols == broadcast(targets)`) is made again, and never leads an
//! element-wise op into its layout when another operand is not so made.
//!
//! A `load` from a view the program never writes, converted to an `Mma`
//! layout (a GEMM epilogue's bias row or residual tile meeting the
//! accumulator) or a vector load (a size-1 dim: what a broadcast expands),
//! is loaded again in the wanted layout: each thread reads the
//! elements of its fragment from global memory (L2 or L1 serve the copies
//! that threads share), where a conversion stages the tile through shared
//! memory, which the warp-specialised pipeline has no scratch for.

use super::Inference;
use crate::ir::{Op, TileId, Value, ViewId};
use crate::layout::Layout;
use std::collections::HashSet;

impl Inference<'_> {
    /// Remembers the definition of a tile that may be made again.
    pub(super) fn record(&mut self, op: &Op) {
        if let Op::Full { out, .. }
        | Op::Iota { out, .. }
        | Op::Map { out, .. }
        | Op::Cast { out, .. }
        | Op::Broadcast { out, .. }
        | Op::Load { out, .. } = op
        {
            self.defs.insert(*out, op.clone());
        }
    }

    /// Whether `t` is made from `full`s, `iota`s and broadcasts only (a
    /// broadcast of any tile is made again from its smaller source: a mask
    /// comparing columns with a broadcast `[R, 1]` of targets then follows
    /// the rows it selects from instead of leading them into another layout).
    pub(super) fn remat(&self, t: TileId) -> bool {
        match self.defs.get(&t) {
            Some(Op::Full { .. } | Op::Iota { .. } | Op::Broadcast { .. }) => true,
            Some(Op::Map { args, .. }) => args.iter().all(|a| self.remat(*a)),
            Some(Op::Cast { tile, .. }) => self.remat(*tile),
            _ => false,
        }
    }

    /// Whether `t` is made from `full`s, `iota`s, broadcasts and loads of
    /// views the program never writes: what an `Mma` layout loads again
    /// (see the module docs).
    fn reloadable(&self, t: TileId) -> bool {
        match self.defs.get(&t) {
            Some(Op::Load { view, .. }) => !self.written.contains(view),
            Some(Op::Map { args, .. }) => args.iter().all(|a| self.reloadable(*a)),
            Some(Op::Cast { tile, .. }) => self.reloadable(*tile),
            _ => self.remat(t),
        }
    }

    /// `t` made again in `want` (see the module docs), or `None` when it must
    /// be converted.
    pub(super) fn remake(&mut self, t: TileId, want: &Layout, out: &mut Vec<Op>) -> Option<TileId> {
        let def = self.defs.get(&t)?.clone();
        // A load is read again in an `Mma` layout, or when it is a vector
        // (a size-1 dim: a broadcast's source), few elements a thread.
        let vector = self.program.tile(t).shape.contains(&1);
        let reload = (vector || matches!(want, Layout::Mma(_))) && self.reloadable(t);
        if !self.remat(t) && !reload {
            return None;
        }
        let ty = self.program.tile(t).clone();
        let new = self.program.new_tile(ty);
        let op = match def {
            Op::Full { value, .. } => Op::Full { out: new, value },
            Op::Iota { axis, .. } => Op::Iota { out: new, axis },
            Op::Map { op, args, .. } => {
                let args = args.iter().map(|a| self.convert(*a, want, out)).collect();
                Op::Map { out: new, op, args }
            }
            Op::Cast { tile, .. } => Op::Cast {
                out: new,
                tile: self.convert(tile, want, out),
            },
            Op::Broadcast { tile, .. } => Op::Broadcast {
                out: new,
                tile: self.convert(tile, want, out),
            },
            Op::Load {
                view,
                origin,
                other,
                ..
            } => Op::Load {
                out: new,
                view,
                origin,
                other,
            },
            _ => return None,
        };
        self.layouts.set(new, want.clone());
        self.record(&op);
        out.push(op);
        Some(new)
    }

    /// Which operand of an element-wise op gives the result its layout: the
    /// first in an `Mma` layout (a `dot` result, the costliest to convert),
    /// else the first that is not made from `full`s and `iota`s, else the
    /// first.
    pub(super) fn map_leader(&self, args: &[TileId]) -> usize {
        args.iter()
            .position(|a| matches!(self.layouts.get(*a), Some(Layout::Mma(_))))
            .or_else(|| args.iter().position(|a| !self.remat(*a)))
            .unwrap_or(0)
    }
}

impl Inference<'_> {
    /// A loop-carried tile whose initial value is made from `full`s and
    /// `iota`s (the running maximum and sum of attention's online softmax)
    /// takes the layout its yield gets in a trial inference of the body, so
    /// the body converts nothing per iteration; the initial value is made
    /// again in that layout once, before the loop.
    pub(super) fn carry_yield_layouts(
        &mut self,
        inits: &mut [Value],
        args: &[Value],
        body: &[Op],
        yields: &[Value],
        results: &[Value],
        out: &mut Vec<Op>,
    ) {
        let cheap = |inf: &Self, v: Value| matches!(v, Value::Tile(i) if inf.remat(i));
        if !inits.iter().any(|v| cheap(self, *v)) {
            return;
        }
        // The trial's layouts for the body's tiles are overwritten by the
        // real pass; the tiles its conversions made stay unused.
        let _ = self.region(body.to_vec());
        for k in 0..inits.len() {
            let (Value::Tile(i), Value::Tile(a), Value::Tile(y), Value::Tile(r)) =
                (inits[k], args[k], yields[k], results[k])
            else {
                continue;
            };
            if !self.remat(i) {
                continue;
            }
            let Some(l) = self.layouts.get(y).cloned() else {
                continue;
            };
            if self.layouts.get(a) == Some(&l) {
                continue;
            }
            inits[k] = Value::Tile(self.convert(i, &l, out));
            self.layouts.set(a, l.clone());
            self.layouts.set(r, l);
        }
    }
}

/// The views `ops` (and loops in them) store or add into.
pub(super) fn written(ops: &[Op]) -> HashSet<ViewId> {
    let mut out = HashSet::new();
    for op in ops {
        match op {
            Op::Store { view, .. } | Op::AtomicAdd { view, .. } => {
                out.insert(*view);
            }
            Op::For { body, .. } => out.extend(written(body)),
            _ => {}
        }
    }
    out
}
