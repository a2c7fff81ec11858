//! How a kernel's threads run on the CPU, chosen per kernel (issue 27).
//!
//! Three switches shape a CPU kernel's block runner: threads as SIMD lanes
//! (`vector`: each region's thread loop calls the vectorizable variant,
//! [`super::regions::fast_runner`]), rows of an interchanged loop as SIMD
//! lanes (`affine`: [`super::fission::Plan::affine`]) and the iterations a
//! thread runs of an interchanged loop per stop (`iters`:
//! [`super::fission::iterations`]). Until session 13 each was one setting
//! for every kernel of a module, and no setting was best for all: on the
//! device's Xeon (AVX-512, session 13 B2, ms at 1 / 16 cores) SIMD-lane
//! threads made saxpy 36.5 against 57.6 and the stencil 59.0 against 131.9,
//! but reduce_sum 50.6 against 37.0, layernorm 57.1 against 39.4 and
//! softmax 108.1 against 85.1; reduce_sum's rows (K = 1) 31.9 / 2.26
//! against K = 8's 50.6 / 3.03, while histogram's K = 8 beat its rows
//! (3.11 against 4.08 ms at 16 cores).
//!
//! What the measurements say (session 14 B1 on the same Xeon, ms at 1 / 16
//! cores), as a rule over the kernel's HIR ([`choose`]):
//!
//! - **rows** (`affine`) where an interchanged loop holds no atomic: its
//!   body is an accumulation LLVM vectorizes over the row (each thread a
//!   lane, its own order kept), [`ROW_ITERS`] = 8 iterations per pass
//!   (unrolled in the row loop: reduce_sum 30.5 / 2.49 against 39.4 / 2.50
//!   with one); with an atomic (a histogram's scatter) the row loop stays
//!   scalar and K = 8 iterations per stop keep a thread's values in
//!   registers instead;
//! - **row walks as rows** ([`ROW_WALKS`], `interchange::headers_with`):
//!   loops stepping by a constant of at least 32 (layernorm's and softmax's
//!   walks over a row) are interchanged too where they become rows
//!   (layernorm 38.3 / 3.27 against 54.6 / 3.72, softmax 66.1 / 6.72
//!   against 69.8 / 8.04);
//! - **SIMD-lane threads** for kernels without barriers or interchanged
//!   loops (saxpy, the stencil; with per-thread loops too: the scan 56.4 /
//!   6.28 against 70.2 / 6.88 thread by thread), and for split kernels only
//!   where no region holds a loop: LLVM vectorizes innermost loops only, and
//!   the split kernel's fast variant saves every value at each exit (the
//!   nest's matmul 1101 / 121 against 1010 / 90.4). A loop is no loop of a
//!   region when it holds a barrier (its body is split), when it is an
//!   interchanged grid-stride loop (a thread stops at its header every K-th
//!   iteration, K at most [`UNROLLED_TRIP`]: LLVM unrolls them), or when its
//!   trip count is a constant of at most [`UNROLLED_TRIP`] (LLVM unrolls it
//!   fully: the transpose's `for k in range(0, 32, 8)`). Row walks count as
//!   loops: a block per row, where the tree reduction's steps dominate and
//!   ran slower as vector passes over mostly masked lanes (softmax 143.6 /
//!   9.14 against 66.1 / 6.72);
//! - all of it only where the target has AVX-512 (on an AVX2 EPYC every
//!   form of SIMD lanes was slower: masked stores, docs/cpu.md).
//!
//! `HostOptions` and `ZYNTAX_CPU_VECTOR` / `ZYNTAX_CPU_AFFINE` /
//! `ZYNTAX_CPU_ITERS` still force one setting for every kernel (tests, and
//! before/after runs of the bench).

use super::interchange::holds;
use std::collections::BTreeSet;
use zyntax_hir::{BlockId, Function, Op};
use zyntax_opt::analysis::{const_int, loops, Loop};

/// Loops with a constant trip count, or a constant bound on it, up to this
/// are unrolled fully by LLVM before its vectorizer runs (its full unroller
/// takes small constant trip counts, and bounds up to 8), so they leave
/// their region loop-free.
pub const UNROLLED_TRIP: i64 = 8;

/// Row walks (`interchange::headers_with`) are interchanged as rows of SIMD
/// lanes by default with AVX-512 (see [`choose`]; session 14 B1).
pub const ROW_WALKS: bool = true;

/// Iterations per pass of a row of SIMD lanes by default (LLVM unrolls them
/// in the row loop; session 14 B1: reduce_sum 30.5 against 39.4 ms with 1).
pub const ROW_ITERS: u32 = 8;

/// The module-wide settings: `Some` where options or the environment force
/// one, and whether the target has AVX-512.
#[derive(Clone, Copy, Debug, Default)]
pub struct Forced {
    pub vector: Option<bool>,
    pub affine: Option<bool>,
    pub iters: Option<u32>,
    /// Row walks interchanged too (`ZYNTAX_CPU_WALKS=0|1`).
    pub walks: Option<bool>,
    pub avx512: bool,
}

impl Forced {
    /// From `HostOptions` where set, else from `ZYNTAX_CPU_VECTOR`,
    /// `ZYNTAX_CPU_AFFINE`, `ZYNTAX_CPU_WALKS` (`0|1`) and `ZYNTAX_CPU_ITERS`
    /// (read by `fission::iterations`).
    pub fn new(opts: &super::HostOptions, features: &str) -> Self {
        let env01 = |k: &str| match std::env::var(k).as_deref() {
            Ok("1") => Some(true),
            Ok("0") => Some(false),
            _ => None,
        };
        Forced {
            vector: opts.vector_threads.or_else(|| env01("ZYNTAX_CPU_VECTOR")),
            affine: opts.affine_rows.or_else(|| env01("ZYNTAX_CPU_AFFINE")),
            iters: opts.iterations.filter(|k| k.is_power_of_two() && *k <= 64),
            walks: opts.row_walks.or_else(|| env01("ZYNTAX_CPU_WALKS")),
            avx512: features.split(',').any(|f| f == "+avx512f"),
        }
    }
}

/// One kernel's block-runner settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mode {
    /// Threads as SIMD lanes.
    pub vector: bool,
    /// Rows of interchanged loops as SIMD lanes.
    pub affine: bool,
    /// Iterations per stop at an interchanged loop's header.
    pub iters: u32,
    /// Headers of the interchanged loops (`interchange::headers_with`).
    pub headers: Vec<BlockId>,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let threads = if self.vector {
            "threads as SIMD lanes"
        } else {
            "threads one after another"
        };
        match (self.headers.len(), self.affine) {
            (0, _) => write!(f, "{threads}"),
            (_, true) => write!(
                f,
                "{threads}; interchanged loops as rows of SIMD lanes, {} iteration(s) per pass",
                self.iters
            ),
            (_, false) => write!(
                f,
                "{threads}; interchanged loops {} iterations per stop",
                self.iters
            ),
        }
    }
}

/// The settings for kernel `f` (see the module docs).
pub fn choose(f: &Function, o: &Forced) -> Mode {
    let walks = o.walks.unwrap_or(o.avx512 && ROW_WALKS);
    let mut headers = super::interchange::headers_with(f, walks);
    let all = loops(f);
    let loop_at = |h: &BlockId| all.iter().find(|l| l.header == *h);
    let affine = o.affine.unwrap_or_else(|| {
        o.avx512
            && headers
                .iter()
                .filter_map(loop_at)
                .any(|l| !holds(f, l, |op| matches!(op, Op::Atomic { .. } | Op::Red { .. })))
    });
    // Row walks pay only as rows (thread after thread, measured slower).
    if !affine && o.walks.is_none() {
        headers = super::interchange::headers(f);
    }
    let iters = o
        .iters
        .unwrap_or_else(|| super::fission::iterations(if affine { ROW_ITERS } else { 8 }));
    // Grid-stride loops (not row walks: a block per row, where the tree
    // steps dominate and ran slower as vector passes over mostly masked
    // lanes) leave their regions loop-free with K <= UNROLLED_TRIP.
    let grid: BTreeSet<BlockId> = super::interchange::headers(f).into_iter().collect();
    let split = !headers.is_empty() || f.insts_in_order().any(|(_, i)| is_barrier(f, i));
    let vector = o.vector.unwrap_or_else(|| {
        o.avx512
            && (!split
                || all.iter().all(|l| {
                    holds(f, l, |op| matches!(op, Op::Barrier))
                        || grid.contains(&l.header) && i64::from(iters) <= UNROLLED_TRIP
                        || trip_count(f, l).is_some_and(|t| t <= UNROLLED_TRIP)
                }))
    });
    Mode {
        vector,
        affine,
        iters,
        headers,
    }
}

fn is_barrier(f: &Function, i: zyntax_hir::InstId) -> bool {
    f.insts
        .get(i.index())
        .is_some_and(|d| matches!(d.op, Op::Barrier))
}

/// The trip count of loop `l` when it is a constant: its induction (a
/// header parameter stepped by a constant on the back edge) enters the loop
/// as a constant and is compared in the header with a constant bound.
fn trip_count(f: &Function, l: &Loop) -> Option<i64> {
    let (k, step) = l.iv?;
    if step <= 0 {
        return None;
    }
    let p = *f.blocks.get(l.header.index())?.params.get(k as usize)?;
    // The value the induction enters with: every jump into the header from
    // outside the loop passes the same constant.
    let mut start = None;
    for b in &f.layout {
        if l.blocks.contains(b) {
            continue;
        }
        let Some(d) = f
            .block(*b)
            .insts
            .last()
            .and_then(|i| f.insts.get(i.index()))
        else {
            continue;
        };
        for t in d.targets.iter().filter(|t| t.block == l.header) {
            let c = const_int(f, *t.args.get(k as usize)?)?;
            if start.is_some_and(|s| s != c) {
                return None;
            }
            start = Some(c);
        }
    }
    let start = start?;
    // The bound: a compare of the induction with a constant in the header.
    let bound = f
        .block(l.header)
        .insts
        .iter()
        .filter_map(|i| f.insts.get(i.index()))
        .filter(|d| matches!(d.op, Op::Cmp(_)) && d.args.first() == Some(&p))
        .find_map(|d| const_int(f, *d.args.get(1)?))?;
    Some(((bound - start).max(0) + step - 1) / step)
}
