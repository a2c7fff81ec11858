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

use crate::ir::{Op, TileId, TileProgram};
use crate::schedule::DotPath;
use std::collections::{HashMap, HashSet};
use zyntax_hir::{Arch, Type};

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

/// The `a` operands of the row-statistics `dot`s `rows` of `body` when all
/// of them go on `wgmma` (`lower/dot_wgmma.rs`, [`wgmma_unfit`]): on sm_90a
/// under `dot_path` `auto` or `wgmma`. All or none, so that `P` (the
/// softmax of one row `dot`, the `a` of the next) is in the next one's
/// accumulator layout and feeds it from registers; empty otherwise (the
/// `mma.sync` split above).
pub(super) fn wgmma_operands(
    program: &TileProgram,
    body: &[Op],
    rows: &HashSet<TileId>,
    warps: u32,
    arch: Arch,
    dot_path: DotPath,
) -> HashSet<TileId> {
    let mut dots = Vec::new();
    row_dot_operands(body, rows, &mut dots);
    let allowed = (dot_path == DotPath::Auto && arch >= Arch::Sm90a) || dot_path == DotPath::Wgmma;
    if !allowed
        || dots.is_empty()
        || dots
            .iter()
            .any(|&(a, b)| wgmma_unfit(program, a, b, warps).is_some())
    {
        return HashSet::new();
    }
    dots.into_iter().map(|(a, _)| a).collect()
}

/// `(a, b)` of the `dot`s of `ops` (loops included) whose result is in `rows`.
fn row_dot_operands(ops: &[Op], rows: &HashSet<TileId>, out: &mut Vec<(TileId, TileId)>) {
    for op in ops {
        match op {
            Op::Dot { out: d, a, b, .. } if rows.contains(d) => out.push((*a, *b)),
            Op::For { body, .. } => row_dot_operands(body, rows, out),
            _ => {}
        }
    }
}

/// Why `a @ b` cannot run as one `wgmma` dot (`lower/dot_wgmma.rs`) over
/// `warps` warps all along M, if it cannot: f16/bf16 operands of one type,
/// warpgroups (warps a multiple of 4) of 16 rows per warp, K steps of 16,
/// N a multiple of 8 up to 256, and shared-memory boxes of 64 elements
/// along K (`a` staged K-major, `b` K-major) or N (`b` N-major).
pub(crate) fn wgmma_unfit(
    program: &TileProgram,
    a: TileId,
    b: TileId,
    warps: u32,
) -> Option<String> {
    let (ta, tb) = (program.tile(a), program.tile(b));
    let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
    let why = if (ta.elem != Type::F16 && ta.elem != Type::BF16) || ta.elem != tb.elem {
        format!(
            "wgmma takes f16 or bf16 operands, not {} and {}",
            ta.elem, tb.elem
        )
    } else if !warps.is_multiple_of(4) {
        format!("wgmma is issued by warpgroups: warps must be a multiple of 4, not {warps}")
    } else if !m.is_multiple_of(16 * warps) {
        format!(
            "the wgmma accumulator puts 16 rows per warp: M ({m}) must be a multiple of {}",
            16 * warps
        )
    } else if !k.is_multiple_of(64) {
        format!("a wgmma dot stages K in boxes of 64; K is {k}")
    } else if !n.is_multiple_of(8) || n > 256 {
        format!("wgmma needs N a multiple of 8 up to 256, not {n}")
    } else {
        return None;
    };
    Some(why)
}
