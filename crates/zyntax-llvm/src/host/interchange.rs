//! Loop interchange of a block's thread loop with the loops of its threads.
//!
//! GPU code walks memory with per-thread loops whose addresses step over the
//! threads: a grid-stride loop (`for i in range(grid(1), n, gridsize(1))`),
//! a row walk at stride `blockDim` (`for j in range(tid, n, BLOCK)`), the
//! k-loop of a shared-memory tile product (`acc += As[ty, k] * Bs[k, tx]`).
//! Run thread after thread, such a loop touches one element per cache line
//! per thread and keeps its accumulator a serial chain. Interchanged — for
//! each iteration, every thread of the block — consecutive threads touch
//! consecutive addresses, and the thread loop is the innermost loop, the
//! form LLVM's loop vectorizer takes (each thread a lane, its accumulator a
//! lane of a vector: no reassociation, results unchanged) — which it does
//! not do here yet (below).
//!
//! The interchange is region fission ([`super::fission`]) with one more kind
//! of split point: the header of a chosen loop is a *virtual barrier*. A
//! thread arriving at the header saves its live values (the loop's carried
//! values among them: per-thread arrays, contiguous over the threads) and
//! stops; the block runner then runs the region from the header — one
//! iteration, up to the header again or out of the loop to the next barrier —
//! as a loop over the threads waiting there. Threads whose trip count is
//! shorter leave the loop earlier and wait at their next barrier (the
//! runner's per-thread state is the mask); threads at a virtual barrier run
//! before anything else, so a real barrier is still released only when every
//! running thread waits at it. Legality: between two barriers the threads of
//! a block may run in any interleaving (the GPU promises no order), so a
//! race-free kernel gives the same results; loops with atomics (their
//! results depend on the order), calls or anything that suspends are left
//! alone, as are loops holding another loop (the vectorizer takes innermost
//! loops only).
//!
//! Which loops: grid-stride loops (a carried value stepped by an amount
//! computed from `grid_dim`, [`grid_stride`]) with a memory access whose
//! address steps by one element from thread `x` to `x + 1` ([`x_stride`]) —
//! where thread after thread order fetches every cache line once per thread.
//! A row walk at stride `blockDim`, a tile's constant-stride loop, a loop
//! whose accesses do not depend on the thread (n-body's walk over all
//! bodies) or step by a thread's chunk (a scan's chunks) stays per thread:
//! its data stays in cache while the block's threads run, and the
//! interchange's per-iteration saves and restores cost more than they save
//! (measured, docs/cpu.md). They would pay once the interchanged thread loop
//! became SIMD code, which LLVM does not do here yet (the loop's index comes
//! back from its per-thread array: a gather, and run-time alias checks it
//! cannot form). `ZYNTAX_CPU_INTERCHANGE=0` turns the interchange off (for
//! comparisons), `ZYNTAX_CPU_INTERCHANGE=all` takes every loop it may take
//! (for the random-kernel tests).

use std::collections::{BTreeMap, BTreeSet};
use zyntax_hir::{AtomicOp, BinOp, BlockId, Dim, Function, InstData, InstId, Op, ValueId};
use zyntax_opt::analysis::Loop;

/// Virtual barriers are numbered `VIRTUAL | header block`, above every
/// instruction id: the block runner runs the largest waiting state first.
pub const VIRTUAL: u32 = 0x4000_0000;

/// The instruction id standing for the virtual barrier at `header`.
pub fn point(header: BlockId) -> InstId {
    InstId(VIRTUAL | header.0)
}

/// Whether `i` is a virtual barrier (see [`point`]).
pub fn is_virtual(i: InstId) -> bool {
    i.0 & VIRTUAL != 0
}

/// `ZYNTAX_CPU_INTERCHANGE`: `0` off; `all` every loop that may be
/// interchanged, whether it pays or not (for tests: more loops against the
/// interpreter); anything else the default.
fn mode() -> Option<bool> {
    match std::env::var("ZYNTAX_CPU_INTERCHANGE").as_deref() {
        Ok("0") => None,
        Ok("all") => Some(true),
        _ => Some(false),
    }
}

/// Ops a loop may hold and still be interchanged: pure arithmetic, plain
/// memory accesses, thread and block indices, control flow.
fn allowed(op: &Op) -> bool {
    matches!(
        op,
        Op::Const(_)
            | Op::Binary(_)
            | Op::Unary(_)
            | Op::Fma
            | Op::Cmp(_)
            | Op::Select
            | Op::Cast
            | Op::Bitcast
            | Op::Extract(_)
            | Op::Insert(_)
            | Op::Load
            | Op::Store
            | Op::PtrAdd
            | Op::PtrCast
            | Op::ThreadIdx(_)
            | Op::BlockIdx(_)
            | Op::BlockDim(_)
            | Op::GridDim(_)
            | Op::Approx(_)
            | Op::LoadCached(_)
            | Op::StoreCached(_)
            | Op::Bits(_)
            | Op::Jump
            | Op::Branch
            | Op::Return
            | Op::Unreachable
    )
}

/// An atomic whose effect does not depend on the order of the threads: an
/// integer `add`, `sub`, `and`, `or`, `xor`, `min` or `max` whose old value
/// nobody reads (`red`, or an unused result) — any interleaving of the
/// threads leaves the same memory, so interchanging the loop that holds it
/// keeps results bit for bit (histogram's counting loop). `used`: the values
/// some instruction reads.
fn order_free_atomic(f: &Function, d: &InstData, used: &BTreeSet<ValueId>) -> bool {
    let op = match d.op {
        Op::Atomic { op, .. } | Op::Red { op, .. } => op,
        _ => return false,
    };
    let commutes = matches!(
        op,
        AtomicOp::Add
            | AtomicOp::Sub
            | AtomicOp::And
            | AtomicOp::Or
            | AtomicOp::Xor
            | AtomicOp::Min
            | AtomicOp::Max
    );
    let int = d
        .args
        .get(1)
        .is_some_and(|v| f.value_type(*v).as_scalar().is_some_and(|s| s.is_int()));
    commutes && int && d.results.iter().all(|r| !used.contains(r))
}

/// Per value: how it changes from thread `x` to thread `x + 1` of a row
/// (same `y`, `z`, block): `Some(c)` by the constant `c` (0: the same in
/// every thread of the row), `None` otherwise. Affine arithmetic through
/// `add`, `sub`, `mul`/`shl` by a constant, integer casts, `ptr_add` (in
/// elements) and block parameters (loop inductions keep their start's
/// stride when their step is the same in every thread). Wrapping is ignored:
/// this only decides where interchange pays, never what a kernel computes.
pub fn x_stride(f: &Function) -> Vec<Option<i64>> {
    // Lattice per value: None = not seen yet, Some(Some(c)), Some(None) = varying.
    let n = f.values.len();
    let mut s: Vec<Option<Option<i64>>> = vec![None; n];
    for p in f.params() {
        if p.index() < n {
            s[p.index()] = Some(Some(0));
        }
    }
    let konst = |v: ValueId| zyntax_opt::analysis::const_int(f, v);
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 64 {
        changed = false;
        rounds += 1;
        for (_, i) in f.insts_in_order() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let a = |k: usize| {
                d.args
                    .get(k)
                    .and_then(|v| s.get(v.index()).copied().flatten())
            };
            let all_known = d
                .args
                .iter()
                .all(|v| s.get(v.index()).is_some_and(|x| x.is_some()));
            let all_zero = d
                .args
                .iter()
                .all(|v| s.get(v.index()) == Some(&Some(Some(0))));
            let new: Option<Option<i64>> = match &d.op {
                Op::Const(_) | Op::BlockIdx(_) | Op::BlockDim(_) | Op::GridDim(_) => Some(Some(0)),
                Op::SharedAlloc { .. } | Op::DynShared { .. } => Some(Some(0)),
                Op::ThreadIdx(Dim::X) => Some(Some(1)),
                Op::ThreadIdx(_) => Some(Some(0)),
                Op::Cast | Op::PtrCast if d.args.len() == 1 => {
                    let is_int = |v: ValueId| {
                        let t = f.value_type(v);
                        t.is_ptr() || t.as_scalar().is_some_and(|x| x.is_int())
                    };
                    match (a(0), d.results.first()) {
                        (Some(Some(c)), Some(r)) if is_int(d.args[0]) && is_int(*r) => {
                            Some(Some(c))
                        }
                        (Some(Some(0)), _) => Some(Some(0)),
                        (Some(_), _) => Some(None),
                        (None, _) => None,
                    }
                }
                Op::Binary(BinOp::Add) | Op::PtrAdd => match (a(0), a(1)) {
                    (Some(x), Some(y)) => Some(x.zip(y).and_then(|(x, y)| x.checked_add(y))),
                    _ => None,
                },
                Op::Binary(BinOp::Sub) => match (a(0), a(1)) {
                    (Some(x), Some(y)) => Some(x.zip(y).and_then(|(x, y)| x.checked_sub(y))),
                    _ => None,
                },
                Op::Binary(BinOp::Mul) | Op::Binary(BinOp::Shl) => {
                    let shl = matches!(d.op, Op::Binary(BinOp::Shl));
                    let k1 = d.args.get(1).and_then(|v| konst(*v));
                    let k0 = d.args.first().and_then(|v| konst(*v));
                    match (a(0), a(1)) {
                        (Some(Some(0)), Some(Some(0))) => Some(Some(0)),
                        (Some(x), Some(_)) if k1.is_some() => Some(x.and_then(|x| {
                            let k = k1?;
                            if shl {
                                u32::try_from(k).ok().and_then(|k| x.checked_shl(k))
                            } else {
                                x.checked_mul(k)
                            }
                        })),
                        (Some(_), Some(y)) if k0.is_some() && !shl => {
                            Some(y.and_then(|y| y.checked_mul(k0?)))
                        }
                        (Some(_), Some(_)) => Some(None),
                        _ => None,
                    }
                }
                // Loads, atomics, collectives, calls: anything else is the
                // same in every thread only when all its operands are.
                Op::Load | Op::LoadCached(_) | Op::Atomic { .. } | Op::AtomicCas { .. } => {
                    (all_known || d.args.is_empty()).then_some(None)
                }
                Op::Call(_) | Op::Shfl { .. } | Op::Vote(_) | Op::Match(_) | Op::LaneId => {
                    Some(None)
                }
                _ if all_zero => Some(Some(0)),
                _ if all_known => Some(None),
                _ => None,
            };
            if let Some(v) = new {
                for r in &d.results {
                    if r.index() < n && s[r.index()] != Some(v) {
                        let m = meet(s[r.index()], v);
                        if m != s[r.index()] {
                            s[r.index()] = m;
                            changed = true;
                        }
                    }
                }
            }
            for t in &d.targets {
                let Some(bd) = f.blocks.get(t.block.index()) else {
                    continue;
                };
                for (p, a) in bd.params.iter().zip(&t.args) {
                    let Some(inc) = s.get(a.index()).copied().flatten() else {
                        continue;
                    };
                    if p.index() < n {
                        let m = meet(s[p.index()], inc);
                        if m != s[p.index()] {
                            s[p.index()] = m;
                            changed = true;
                        }
                    }
                }
            }
        }
    }
    s.into_iter().map(|x| x.flatten()).collect()
}

fn meet(a: Option<Option<i64>>, b: Option<i64>) -> Option<Option<i64>> {
    match a {
        None => Some(b),
        Some(x) if x == b => Some(x),
        Some(_) => Some(None),
    }
}

/// Whether loop `l` steps a carried value by an amount that depends on the
/// grid's size (`grid_dim`): a grid-stride loop, whose thread after thread
/// walk touches every cache line of the array once per thread sharing it.
/// A walk at stride `blockDim` or a constant spans a row or a tile, which
/// stays in cache while the block's threads run one after another; there
/// the interchange's per-iteration saves and restores cost more than they
/// save (measured: layernorm, softmax, the tiled transpose and the matmul
/// nest were slower interchanged, reduce_sum faster; docs/cpu.md).
fn grid_stride(f: &Function, l: &Loop) -> bool {
    let Some(hp) = f.blocks.get(l.header.index()).map(|b| b.params.clone()) else {
        return false;
    };
    let Some(last) = f.block(l.latch).insts.last() else {
        return false;
    };
    let Some(d) = f.insts.get(last.index()) else {
        return false;
    };
    d.targets
        .iter()
        .filter(|t| t.block == l.header)
        .flat_map(|t| hp.iter().zip(&t.args))
        .any(|(p, a)| {
            let Some(add) = def_of(f, *a) else {
                return false;
            };
            matches!(add.op, Op::Binary(BinOp::Add))
                && add.args.len() == 2
                && add.args.contains(p)
                && add.args.iter().any(|s| s != p && uses_grid_dim(f, *s, 8))
        })
}

fn def_of(f: &Function, v: ValueId) -> Option<&zyntax_hir::InstData> {
    match f.values.get(v.index())?.def {
        zyntax_hir::ValueDef::Result(i, _) => f.insts.get(i.index()),
        _ => None,
    }
}

/// Whether `v` is computed from `grid_dim` (through at most `depth` ops).
fn uses_grid_dim(f: &Function, v: ValueId, depth: usize) -> bool {
    let Some(d) = def_of(f, v) else {
        return false;
    };
    matches!(d.op, Op::GridDim(_))
        || depth > 0 && d.args.iter().any(|a| uses_grid_dim(f, *a, depth - 1))
}

/// The headers of the loops of kernel `f` to interchange with its thread
/// loop (see the module docs), in layout order; empty when off.
pub fn headers(f: &Function) -> Vec<BlockId> {
    headers_with(f, false)
}

/// Steps of at least this many elements make a loop a row walk (threads of
/// a block side by side, e.g. `for j in range(tid, n, 256)`).
pub const WALK_MIN_STEP: i64 = 32;

/// [`headers`], with `walks` row walks too: loops whose induction steps by a
/// constant of at least [`WALK_MIN_STEP`] (layernorm's and softmax's walks
/// over a row). Thread after thread, a row stays in cache and the
/// interchange did not pay (docs/cpu.md, session 11); as rows of SIMD lanes
/// that run several iterations per pass (`host/mode.rs`) it may.
pub fn headers_with(f: &Function, walks: bool) -> Vec<BlockId> {
    let Some(all) = mode() else {
        return Vec::new();
    };
    if !f.is_kernel() {
        return Vec::new();
    }
    let loops = zyntax_opt::analysis::loops(f);
    let stride = x_stride(f);
    let used: BTreeSet<ValueId> = f
        .insts_in_order()
        .filter_map(|(_, i)| f.insts.get(i.index()))
        .flat_map(|d| {
            d.args
                .iter()
                .chain(d.targets.iter().flat_map(|t| t.args.iter()))
        })
        .copied()
        .collect();
    let contiguous = |v: ValueId| stride.get(v.index()).copied().flatten() == Some(1);
    let mut out: BTreeSet<BlockId> = BTreeSet::new();
    for l in &loops {
        // Innermost only, one latch (several back edges: a loop `continue`).
        let inner = loops
            .iter()
            .all(|o| o.header == l.header || !l.blocks.contains(&o.header));
        let one_latch = loops.iter().filter(|o| o.header == l.header).count() == 1;
        if !inner || !one_latch {
            continue;
        }
        let mut ok = true;
        let mut pays = false;
        for b in &l.blocks {
            for i in &f.block(*b).insts {
                let Some(d) = f.insts.get(i.index()) else {
                    ok = false;
                    continue;
                };
                ok &= allowed(&d.op) || order_free_atomic(f, d, &used);
                let addr = match d.op {
                    Op::Load | Op::Store | Op::LoadCached(_) | Op::StoreCached(_) => {
                        d.args.first().copied()
                    }
                    _ => None,
                };
                pays |= addr.is_some_and(contiguous);
            }
        }
        let walk = walks && l.iv.is_some_and(|(_, step)| step >= WALK_MIN_STEP);
        if ok && (all || pays && (grid_stride(f, l) || walk)) {
            out.insert(l.header);
        }
    }
    let pos: BTreeMap<BlockId, usize> = f.layout.iter().enumerate().map(|(k, b)| (*b, k)).collect();
    let mut v: Vec<BlockId> = out.into_iter().collect();
    v.sort_by_key(|b| pos.get(b).copied().unwrap_or(usize::MAX));
    v
}

/// The blocks the interchanged loops of `f` (at `headers`) exit to. With
/// SIMD-lane rows each is a virtual barrier too (`fission::plan`): the code
/// after the loop (reduce_sum's `buf[tid] = acc`) then runs in a region of
/// its own, once per thread, instead of as a store under a mask in every
/// iteration of the row's loop — a `vmaskmov` store on AVX2, microcoded on
/// AMD's cores.
pub fn exits(f: &Function, headers: &[BlockId]) -> Vec<BlockId> {
    let mut out = BTreeSet::new();
    for l in zyntax_opt::analysis::loops(f) {
        if headers.contains(&l.header) {
            out.extend(exit_blocks(f, &l));
        }
    }
    out.into_iter().collect()
}

/// The blocks outside loop `l` that its blocks branch to.
pub fn exit_blocks(f: &Function, l: &Loop) -> Vec<BlockId> {
    l.blocks
        .iter()
        .filter_map(|b| {
            f.block(*b)
                .insts
                .last()
                .and_then(|i| f.insts.get(i.index()))
        })
        .flat_map(|d| d.targets.iter().map(|t| t.block))
        .filter(|t| !l.blocks.contains(t))
        .collect()
}

/// Whether a block of loop `l` holds an instruction whose op `p` accepts.
pub fn holds(f: &Function, l: &Loop, p: impl Fn(&Op) -> bool) -> bool {
    l.blocks.iter().any(|b| {
        f.block(*b)
            .insts
            .iter()
            .filter_map(|i| f.insts.get(i.index()))
            .any(|d| p(&d.op))
    })
}
