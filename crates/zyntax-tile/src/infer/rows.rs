//! Row-statistics `dot`s: FlashAttention's warp split.
//!
//! `Mma::for_tile` splits a `dot`'s warps so each warp's share is
//! square-ish, which is right for a GEMM. A `dot` whose result is reduced
//! along its rows (the running maximum and sum of an online softmax) pays for
//! that split: with warps side by side along N each row reduction goes
//! through shared memory and a barrier. For those `dot`s, and for a `dot`
//! whose `a` is computed from such a result (the `P` of `O += P V`), the
//! warps all lie along M (`[warps, 1]`, 16 rows or more per warp): rows are
//! then reduced within a warp (registers and `shfl`), and `P`'s accumulator
//! registers are exactly the `A` fragments of the next `mma.sync`
//! (`lower/dot_mma.rs` builds them from registers instead of staging `P`).

use crate::ir::{Op, TileId};
use std::collections::{HashMap, HashSet};

/// The results of the `dot`s of `body` (loops included) whose warps should
/// all lie along M: those reduced along axis 1 through element-wise ops
/// and casts, and those whose `a` is made from one of them.
pub(super) fn row_dots(body: &[Op]) -> HashSet<TileId> {
    let mut scan = Scan::default();
    scan.ops(body);
    let mut rows = HashSet::new();
    for &t in &scan.reduced_rows {
        rows.extend(scan.dot_roots(t));
    }
    // `P @ V` after `S`: a dot whose `a` comes from a row dot.
    for &(out, a) in &scan.dots {
        if scan.dot_roots(a).iter().any(|d| rows.contains(d)) {
            rows.insert(out);
        }
    }
    rows
}

#[derive(Default)]
struct Scan {
    /// Element-wise definitions (maps and casts): result -> operands.
    defs: HashMap<TileId, Vec<TileId>>,
    /// `dot` results.
    dot_outs: HashSet<TileId>,
    /// `(result, a)` of every `dot`.
    dots: Vec<(TileId, TileId)>,
    /// Operands of reductions along axis 1.
    reduced_rows: Vec<TileId>,
}

impl Scan {
    fn ops(&mut self, ops: &[Op]) {
        for op in ops {
            match op {
                Op::Map { out, args, .. } => {
                    self.defs.insert(*out, args.clone());
                }
                Op::Cast { out, tile } => {
                    self.defs.insert(*out, vec![*tile]);
                }
                Op::Dot { out, a, .. } => {
                    self.dot_outs.insert(*out);
                    self.dots.push((*out, *a));
                }
                Op::Reduce { tile, axis: 1, .. } => self.reduced_rows.push(*tile),
                Op::For { body, .. } => self.ops(body),
                _ => {}
            }
        }
    }

    /// The `dot` results `t` is computed from through maps and casts.
    fn dot_roots(&self, t: TileId) -> Vec<TileId> {
        let (mut out, mut seen, mut todo) = (Vec::new(), HashSet::new(), vec![t]);
        while let Some(x) = todo.pop() {
            if !seen.insert(x) {
                continue;
            }
            if self.dot_outs.contains(&x) {
                out.push(x);
            } else if let Some(args) = self.defs.get(&x) {
                todo.extend(args.iter().copied());
            }
        }
        out
    }
}
