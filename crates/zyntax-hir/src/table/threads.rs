//! Thread-level GPU rows: indices, barriers and fences, atomics, warp
//! collectives and reductions, named barriers.

use super::*;

macro_rules! atomic {
    ($sub:literal, $v:ident, $py:literal, $doc:literal) => {
        row(
            "atomic",
            $sub,
            concat!("atomic.", $sub, ".<scope>"),
            &["ptr", "value"],
            1,
            "old value",
        )
        .imms(imms!(Atomic { scope: Scope = "scope"; op: AtomicOp::$v }))
        .what("atomic operation")
        .gpu()
        .fx(fx::READ | fx::WRITE)
        .rust(concat!(
            "atomic(AtomicOp::",
            stringify!($v),
            ", scope, ptr, value)"
        ))
        .py(Py::Atomic($py))
        .doc($doc)
    };
}

macro_rules! index {
    ($family:literal, $v:ident, $py:literal, $doc:literal) => {
        row($family, "", concat!($family, ".<dim>"), NONE, 1, "u32")
            .imms(imms!($v(dim: Dim = "dimension")))
            .sig("-> u32")
            .gpu()
            .rust(concat!($family, "(dim)"))
            .py(Py::Index($py))
            .doc($doc)
    };
}

macro_rules! redux {
    ($sub:literal, $v:ident, $doc:literal) => {
        row(
            "redux",
            $sub,
            concat!("redux.", $sub),
            &["mask", "value"],
            1,
            "type of value",
        )
        .op(|| Op::Redux(ReduxOp::$v))
        .sig("u32, T -> T where T: u32|i32")
        .gpu()
        .fx(fx::WARP)
        .needs(REDUX)
        .rust(concat!("redux(ReduxOp::", stringify!($v), ", mask, value)"))
        .py(Py::Hand("redux"))
        .doc($doc)
    };
}

/// Indices, synchronization, atomics and warp collectives.
pub(super) const THREADS: &[OpDef] = &[
    // --- GPU: indices
    index!(
        "thread_idx",
        ThreadIdx,
        "thread_idx",
        "Thread index in the block."
    ),
    index!(
        "block_idx",
        BlockIdx,
        "block_idx",
        "Block index in the grid."
    ),
    index!("block_dim", BlockDim, "block_dim", "Threads per block."),
    index!("grid_dim", GridDim, "grid_dim", "Blocks per grid."),
    row("lane_id", "", "lane_id", NONE, 1, "u32")
        .op(|| Op::LaneId)
        .sig("-> u32")
        .gpu()
        .rust("lane_id()")
        .py(Py::Nullary("lane_id"))
        .doc("Lane of the thread in its warp."),
    // --- GPU: synchronization
    row("barrier", "", "barrier", NONE, 0, "–")
        .op(|| Op::Barrier)
        .gpu()
        .fx(fx::SYNC)
        .rust_shorthand("barrier()")
        .py(Py::Nullary("barrier"))
        .doc("Block-wide barrier (`bar.sync 0`)."),
    row("fence", "", "fence.<scope>", NONE, 0, "–")
        .imms(imms!(Fence(scope: Scope = "scope")))
        .gpu()
        .fx(fx::SYNC)
        .rust("fence(scope)")
        .py(Py::Hand("fence"))
        .doc("Memory fence at a scope."),
    row("warp_sync", "", "warp_sync", &["mask"], 0, "–")
        .op(|| Op::WarpSync)
        .sig("u32")
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .rust_shorthand("warp_sync(mask)")
        .py(Py::Hand("warp_sync"))
        .doc("Synchronizes the lanes in mask."),
    // --- GPU: atomics
    atomic!(
        "add",
        Add,
        "atomic_add",
        "Atomic add; returns the old value."
    ),
    atomic!(
        "sub",
        Sub,
        "atomic_sub",
        "Atomic subtract; returns the old value."
    ),
    atomic!(
        "min",
        Min,
        "atomic_min",
        "Atomic minimum; returns the old value."
    ),
    atomic!(
        "max",
        Max,
        "atomic_max",
        "Atomic maximum; returns the old value."
    ),
    atomic!(
        "and",
        And,
        "atomic_and",
        "Atomic and; returns the old value."
    ),
    atomic!("or", Or, "atomic_or", "Atomic or; returns the old value."),
    atomic!(
        "xor",
        Xor,
        "atomic_xor",
        "Atomic xor; returns the old value."
    ),
    atomic!(
        "exch",
        Exch,
        "atomic_exch",
        "Atomic exchange; returns the old value."
    ),
    atomic!(
        "inc",
        Inc,
        "atomic_inc",
        "Wrapping u32 increment: old >= v ? 0 : old+1."
    ),
    atomic!(
        "dec",
        Dec,
        "atomic_dec",
        "Wrapping u32 decrement: (old == 0 || old > v) ? v : old-1."
    ),
    row(
        "atomic_cas",
        "",
        "atomic.cas.<scope>",
        &["ptr", "expected", "desired"],
        1,
        "old value",
    )
    .imms(imms!(AtomicCas {
        scope: Scope = "scope"
    }))
    .sig("ptr<mem, T>, T, T -> T")
    .what("atomic operation")
    .gpu()
    .fx(fx::READ | fx::WRITE)
    .rust("atomic_cas(scope, ptr, expected, desired)")
    .py(Py::Hand("atomic_cas"))
    .doc("Compare-and-swap; returns the old value."),
    // --- GPU: warp collectives
    row(
        "shfl",
        "idx",
        "shfl.idx",
        &["mask", "value", "lane"],
        1,
        "type of value",
    )
    .imms(imms!(Shfl { width: u32 = "a shuffle width"; mode: ShflMode::Idx }))
    .sig("u32, T:i32|u32|f32|i64|u64|f64 'shuffled value', u32 -> T")
    .syntax("{args} width <width>")
    .what("shuffle mode")
    .gpu()
    .fx(fx::WARP)
    .rust("shfl(ShflMode::Idx, width, mask, value, lane)")
    .py(Py::Shfl("shfl_idx", "lane"))
    .doc("Value of lane `lane`."),
    row(
        "shfl",
        "up",
        "shfl.up",
        &["mask", "value", "delta"],
        1,
        "type of value",
    )
    .imms(imms!(Shfl { width: u32 = "a shuffle width"; mode: ShflMode::Up }))
    .sig("u32, T:i32|u32|f32|i64|u64|f64 'shuffled value', u32 -> T")
    .syntax("{args} width <width>")
    .what("shuffle mode")
    .gpu()
    .fx(fx::WARP)
    .rust("shfl(ShflMode::Up, width, mask, value, delta)")
    .py(Py::Shfl("shfl_up", "delta"))
    .doc("Value of lane `lane_id - delta`."),
    row(
        "shfl",
        "down",
        "shfl.down",
        &["mask", "value", "delta"],
        1,
        "type of value",
    )
    .imms(imms!(Shfl { width: u32 = "a shuffle width"; mode: ShflMode::Down }))
    .sig("u32, T:i32|u32|f32|i64|u64|f64 'shuffled value', u32 -> T")
    .syntax("{args} width <width>")
    .what("shuffle mode")
    .gpu()
    .fx(fx::WARP)
    .rust("shfl(ShflMode::Down, width, mask, value, delta)")
    .py(Py::Shfl("shfl_down", "delta"))
    .doc("Value of lane `lane_id + delta`."),
    row(
        "shfl",
        "xor",
        "shfl.xor",
        &["mask", "value", "lane_mask"],
        1,
        "type of value",
    )
    .imms(imms!(Shfl { width: u32 = "a shuffle width"; mode: ShflMode::Xor }))
    .sig("u32, T:i32|u32|f32|i64|u64|f64 'shuffled value', u32 -> T")
    .syntax("{args} width <width>")
    .what("shuffle mode")
    .gpu()
    .fx(fx::WARP)
    .rust("shfl(ShflMode::Xor, width, mask, value, lane_mask)")
    .py(Py::Shfl("shfl_xor", "lane_mask"))
    .doc("Value of lane `lane_id ^ lane_mask`."),
    row("vote", "ballot", "vote.ballot", &["mask", "pred"], 1, "u32")
        .op(|| Op::Vote(VoteMode::Ballot))
        .sig("u32, bool -> u32")
        .what("vote mode")
        .gpu()
        .fx(fx::WARP)
        .rust("vote(VoteMode::Ballot, mask, pred)")
        .py(Py::Vote("vote_ballot"))
        .doc("Mask of the lanes whose pred is true."),
    row("vote", "any", "vote.any", &["mask", "pred"], 1, "bool")
        .op(|| Op::Vote(VoteMode::Any))
        .sig("u32, bool -> bool")
        .what("vote mode")
        .gpu()
        .fx(fx::WARP)
        .rust("vote(VoteMode::Any, mask, pred)")
        .py(Py::Vote("vote_any"))
        .doc("Whether pred is true on any lane."),
    row("vote", "all", "vote.all", &["mask", "pred"], 1, "bool")
        .op(|| Op::Vote(VoteMode::All))
        .sig("u32, bool -> bool")
        .what("vote mode")
        .gpu()
        .fx(fx::WARP)
        .rust("vote(VoteMode::All, mask, pred)")
        .py(Py::Vote("vote_all"))
        .doc("Whether pred is true on all lanes."),
    row("match", "any", "match.any", &["mask", "value"], 1, "u32")
        .op(|| Op::Match(MatchMode::Any))
        .sig("u32, i32|u32|i64|u64 'matched value' -> u32")
        .what("match mode")
        .gpu()
        .fx(fx::WARP)
        .needs(MATCH)
        .rust("match_(MatchMode::Any, mask, value)")
        .py(Py::Hand("match_any"))
        .doc("Mask of the lanes whose value equals this lane's."),
    row(
        "match",
        "all",
        "match.all",
        &["mask", "value"],
        2,
        "u32, bool",
    )
    .op(|| Op::Match(MatchMode::All))
    .sig("u32, i32|u32|i64|u64 'matched value' -> u32, bool")
    .what("match mode")
    .gpu()
    .fx(fx::WARP)
    .needs(MATCH)
    .rust("match_(MatchMode::All, mask, value)")
    .py(Py::Hand("match_all"))
    .doc("Mask and whether all lanes in mask hold the same value."),
];

/// Warp reductions (`redux.sync`, issue 12).
pub(super) const WARP_REDUX: &[OpDef] = &[
    // --- issue 12 (warp-sync): warp reductions
    redux!("add", Add, "Sum over the lanes in mask (wrapping)."),
    redux!("min", Min, "Minimum over the lanes in mask."),
    redux!("max", Max, "Maximum over the lanes in mask."),
    redux!("and", And, "Bitwise and over the lanes in mask."),
    redux!("or", Or, "Bitwise or over the lanes in mask."),
    redux!("xor", Xor, "Bitwise xor over the lanes in mask."),
];

/// Named barriers (`bar.sync` / `bar.arrive`, issue 12).
pub(super) const NAMED_BARRIER: &[OpDef] = &[
    // --- issue 12 (rest): named barriers, packed conversions
    row("named_barrier", "sync", "bar.sync", NONE, 0, "–")
        .imms(imms!(NamedBarrier {
            id: u32 = "a named-barrier id",
            count: u32 = "a thread count";
            arrive: false
        }))
        .syntax("<id>, <count>")
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .rust("named_barrier(false, id, count)")
        .py(Py::Hand("named_barrier_sync"))
        .doc("Waits at named barrier id (1..15) until count threads (whole warps) have arrived."),
    row("named_barrier", "arrive", "bar.arrive", NONE, 0, "–")
        .imms(imms!(NamedBarrier {
            id: u32 = "a named-barrier id",
            count: u32 = "a thread count";
            arrive: true
        }))
        .syntax("<id>, <count>")
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .rust("named_barrier(true, id, count)")
        .py(Py::Hand("named_barrier_arrive"))
        .doc(
            "Arrives at named barrier id (1..15) of count threads without waiting (producer side).",
        ),
];
