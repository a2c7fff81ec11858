//! Layout inference: gives every tile a [`Blocked`] layout and inserts
//! `ConvertLayout` where an op needs its operand in another one. The program
//! names no layout; the rules (Triton's, simplified to blocked layouts):
//!
//! - `load`, `full`, `iota`: the coalesced layout of the shape; for loads the
//!   fastest dim is the view's unit-stride dim when the front-end declared one,
//!   else the last.
//! - element-wise ops, `cast`: their first operand's layout; other operands are
//!   converted to it.
//! - `broadcast`: the coalesced layout of the result shape; the operand must
//!   hold the same layout on its own shape (a reduce result of a tile with the
//!   coalesced layout does, so `x - max(x)` needs no conversion).
//! - `reduce`: the operand's layout, on the reduced shape.
//! - `dot` (FFMA): the coalesced layout of the accumulator; `a` and `b` are
//!   staged through shared memory, so any layout will do.
//! - `for`: a carried tile keeps its initial value's layout; yields are
//!   converted to it.
//! - `store`, `atomic_add`: any layout (owners write).

use crate::ir::{Op, TileId, TileProgram, Value};
use crate::layout::Blocked;

/// The layout of every tile, indexed by [`TileId`].
#[derive(Clone, Debug, Default)]
pub struct Layouts {
    pub of: Vec<Option<Blocked>>,
}

impl Layouts {
    pub fn get(&self, t: TileId) -> Option<&Blocked> {
        self.of.get(t.0 as usize).and_then(Option::as_ref)
    }
    fn set(&mut self, t: TileId, l: Blocked) {
        let i = t.0 as usize;
        if self.of.len() <= i {
            self.of.resize(i + 1, None);
        }
        self.of[i] = Some(l);
    }
}

struct Inference<'p> {
    program: &'p mut TileProgram,
    warps: u32,
    layouts: Layouts,
}

/// Infers layouts for `warps` warps, rewriting `program` in place.
pub fn infer(program: &mut TileProgram, warps: u32) -> Layouts {
    let body = std::mem::take(&mut program.body);
    let mut inf = Inference {
        program,
        warps,
        layouts: Layouts::default(),
    };
    let body = inf.region(body);
    inf.program.body = body;
    inf.layouts
}

impl Inference<'_> {
    fn coalesced(&self, t: TileId, contiguous: Option<usize>) -> Blocked {
        let ty = self.program.tile(t);
        let rank = ty.shape.len();
        let bytes = ty.elem.size_bytes().unwrap_or(4) as u32;
        Blocked::coalesced(&ty.shape, self.warps, bytes, contiguous.unwrap_or(rank - 1))
    }

    fn layout(&self, t: TileId) -> Blocked {
        // Every operand was defined (and given a layout) before its use.
        self.layouts
            .get(t)
            .cloned()
            .unwrap_or_else(|| self.coalesced(t, None))
    }

    /// `t` in layout `want`: `t` itself, or a new tile converted to it.
    fn convert(&mut self, t: TileId, want: &Blocked, out: &mut Vec<Op>) -> TileId {
        if self.layouts.get(t) == Some(want) {
            return t;
        }
        let ty = self.program.tile(t).clone();
        let converted = self.program.new_tile(ty);
        self.layouts.set(converted, want.clone());
        out.push(Op::ConvertLayout {
            out: converted,
            tile: t,
        });
        converted
    }

    fn region(&mut self, ops: Vec<Op>) -> Vec<Op> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            self.op(op, &mut out);
        }
        out
    }

    fn op(&mut self, mut op: Op, out: &mut Vec<Op>) {
        match &mut op {
            Op::Load { out: t, view, .. } => {
                let contiguous = self.program.view(*view).unit_stride_dim;
                let l = self.coalesced(*t, contiguous);
                self.layouts.set(*t, l);
            }
            Op::Full { out: t, .. } | Op::Iota { out: t, .. } => {
                let l = self.coalesced(*t, None);
                self.layouts.set(*t, l);
            }
            Op::Map { out: t, args, .. } => {
                let l = self.layout(args[0]);
                for a in args.iter_mut().skip(1) {
                    *a = self.convert(*a, &l, out);
                }
                self.layouts.set(*t, l);
            }
            Op::Cast { out: t, tile } => {
                let l = self.layout(*tile);
                self.layouts.set(*t, l);
            }
            Op::Broadcast { out: t, tile } => {
                let l = self.coalesced(*t, None);
                *tile = self.convert(*tile, &l, out);
                self.layouts.set(*t, l);
            }
            Op::Reduce { out: t, tile, .. } => {
                let l = self.layout(*tile);
                self.layouts.set(*t, l);
            }
            Op::Dot { out: t, acc, .. } => {
                let l = self.coalesced(*acc, None);
                *acc = self.convert(*acc, &l, out);
                self.layouts.set(*t, l);
            }
            Op::For {
                inits,
                args,
                body,
                yields,
                results,
                ..
            } => {
                for (init, (arg, result)) in inits.iter().zip(args.iter().zip(results.iter())) {
                    if let (Value::Tile(i), Value::Tile(a), Value::Tile(r)) = (init, arg, result) {
                        let l = self.layout(*i);
                        self.layouts.set(*a, l.clone());
                        self.layouts.set(*r, l);
                    }
                }
                let mut new_body = self.region(std::mem::take(body));
                for (y, a) in yields.iter_mut().zip(args.iter()) {
                    if let (Value::Tile(yt), Value::Tile(at)) = (y, a) {
                        let l = self.layout(*at);
                        *yt = self.convert(*yt, &l, &mut new_body);
                    }
                }
                *body = new_body;
            }
            Op::ConvertLayout { .. }
            | Op::Store { .. }
            | Op::AtomicAdd { .. }
            | Op::ScalarConst { .. }
            | Op::ProgramId { .. }
            | Op::ScalarBinary { .. }
            | Op::ScalarCmp { .. }
            | Op::ViewDim { .. } => {}
        }
        out.push(op);
    }
}
