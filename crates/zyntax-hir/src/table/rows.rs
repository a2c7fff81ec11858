//! The rows of the instruction table (`OPS`): one per HIR instruction, in the
//! order of the docs, with the shorthand macros that build the families. The
//! scalar rows, and the sub-op enums they declare, are in `scalar.rs`.

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
macro_rules! mbarrier {
    ($sub:literal, $v:ident, $args:expr, $n:literal, $res:literal, $sig:literal, $f:expr, $doc:literal) => {
        row(
            "mbarrier",
            $sub,
            concat!("mbarrier.", $sub),
            $args,
            $n,
            $res,
        )
        .op(|| Op::Mbarrier(MbarrierOp::$v))
        .sig($sig)
        .gpu()
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .needs($f)
        .rust(concat!("mbarrier(MbarrierOp::", stringify!($v), ", args)"))
        .py(Py::Hand(concat!("mbarrier_", $sub)))
        .doc($doc)
    };
}
macro_rules! tma_reduce {
    ($sub:literal, $v:ident, $doc:literal) => {
        tma_row("tma_reduce", $sub, concat!("tma.reduce.", $sub))
            .op(|| Op::TmaReduce(BulkRedOp::$v))
            .sig(TMA_STORE)
            .fx(fx::READ | fx::WRITE | fx::SYNC)
            .rust(concat!(
                "tma_reduce(BulkRedOp::",
                stringify!($v),
                ", tmap, src, coords)"
            ))
            .py(Py::Hand("tma_reduce"))
            .doc($doc)
    };
}
macro_rules! cluster_index {
    ($family:literal, $v:ident, $doc:literal) => {
        row($family, "", concat!($family, ".<dim>"), NONE, 1, "u32")
            .imms(imms!($v(dim: Dim = "dimension")))
            .sig("-> u32")
            .gpu()
            .needs(CLUSTER)
            .rust(concat!($family, "(dim)"))
            .py(Py::Index($family))
            .doc($doc)
    };
}
macro_rules! cluster_barrier {
    ($sub:literal, $v:ident, $py:literal, $doc:literal) => {
        row(
            "cluster_barrier",
            $sub,
            concat!("cluster_barrier.", $sub),
            NONE,
            0,
            "–",
        )
        .op(|| Op::ClusterBarrier(ClusterBarrierOp::$v))
        .gpu()
        .fx(fx::SYNC)
        .needs(CLUSTER)
        .rust(concat!(
            "cluster_barrier(ClusterBarrierOp::",
            stringify!($v),
            ")"
        ))
        .py(Py::Hand($py))
        .doc($doc)
    };
}
macro_rules! bulk_reduce {
    ($sub:literal, $v:ident, $doc:literal) => {
        row(
            "bulk_reduce",
            $sub,
            concat!("bulk.reduce.", $sub),
            &["dst", "src", "bytes"],
            0,
            "–",
        )
        .op(|| Op::BulkReduce(BulkRedOp::$v))
        .sig("ptr<global, T>, ptr<shared, T>, u32")
        .gpu()
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .needs(TMA)
        .rust(concat!(
            "bulk_reduce(BulkRedOp::",
            stringify!($v),
            ", dst, src, bytes)"
        ))
        .py(Py::Hand("bulk_reduce"))
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

macro_rules! bits {
    ($sub:literal, $v:ident, $py:literal, $ops:expr, $res:literal, $sig:literal, $doc:literal) => {
        row("bits", $sub, $sub, $ops, 1, $res)
            .op(|| Op::Bits(BitOp::$v))
            .sig($sig)
            .gpu()
            .rust(concat!("bits(BitOp::", stringify!($v), ", args)"))
            .py(Py::Bits($py))
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
macro_rules! red {
    ($sub:literal, $v:ident, $py:literal, $doc:literal) => {
        row(
            "red",
            $sub,
            concat!("red.", $sub, ".<scope>"),
            &["ptr", "value"],
            0,
            "–",
        )
        .imms(imms!(Red { scope: Scope = "scope"; op: AtomicOp::$v }))
        .sig("ptr<mem, T>, T")
        .what("reduction operation")
        .gpu()
        .fx(fx::READ | fx::WRITE)
        .rust(concat!(
            "red(AtomicOp::",
            stringify!($v),
            ", scope, ptr, value)"
        ))
        .py(Py::Red($py))
        .doc($doc)
    };
}

/// TMA operands: 1 to 5 coordinates, one per tensor dimension, innermost
/// first (32-bit: signed in PTX, a box may start before the tensor).
macro_rules! tma_load {
    () => {
        "ptr<shared, _> 'the destination', tensormap 'the tensor map', \
         ptr<shared, u64> 'the barrier', i32|u32 'coordinate' *1..5"
    };
}
const TMA_LOAD: &str = tma_load!();
const TMA_STORE: &str =
    "tensormap 'the tensor map', ptr<shared, _> 'the source', i32|u32 'coordinate' *1..5";

/// The rows after the scalar ones, in the order of the docs.
const REST: &[OpDef] = &[
    // --- memory
    row("load", "", "load", &["ptr"], 1, "pointee")
        .op(|| Op::Load)
        .class(Mem)
        .fx(fx::READ)
        .rust("load(ptr)")
        .py(Py::Hand("load"))
        .doc("Read memory."),
    row("store", "", "store", &["ptr", "value"], 0, "–")
        .op(|| Op::Store)
        .class(Mem)
        .fx(fx::WRITE)
        .rust("store(ptr, value)")
        .py(Py::Hand("store"))
        .doc("Write memory."),
    row(
        "ptr_add",
        "",
        "ptr_add",
        &["ptr", "index"],
        1,
        "type of ptr",
    )
    .op(|| Op::PtrAdd)
    .class(Mem)
    .rust("ptr_add(ptr, index)")
    .py(Py::Hand("ptr_add"))
    .doc("Advance a pointer by index elements."),
    row(
        "ptr_cast",
        "",
        "ptr_cast",
        &["ptr"],
        1,
        "the given pointer type",
    )
    .op(|| Op::PtrCast)
    .class(Mem)
    .rust("ptr_cast(ptr, ty)")
    .py(Py::Hand("ptr_cast"))
    .doc("Address-space cast to or from generic, or a change of pointee."),
    row("alloca", "", "alloca", NONE, 1, "ptr<local, elem>")
        .imms(imms!(Alloca { elem: Type = "an element type", count: u64 = "an element count" }))
        .syntax("<elem>, <count>")
        .class(Mem)
        .rust("alloca(elem, count)")
        .py(Py::Hand("alloca"))
        .doc("Per-thread stack memory."),
    row(
        "shared_alloc",
        "",
        "shared_alloc",
        NONE,
        1,
        "ptr<shared, elem>",
    )
    .imms(imms!(SharedAlloc {
        elem: Type = "an element type",
        count: u64 = "an element count",
        align: u32 = "an alignment in bytes"
    }))
    .syntax("<elem>, <count> [align <align>]")
    .gpu()
    .rust("shared_alloc(elem, count)")
    .py(Py::Hand("shared_alloc"))
    .doc("Static shared memory of the block."),
    row("dyn_shared", "", "dyn_shared", NONE, 1, "ptr<shared, elem>")
        .imms(imms!(DynShared { elem: Type = "an element type", align: u32 = "an alignment in bytes" }))
        .syntax("<elem> [align <align>]")
        .gpu()
        .rust("dyn_shared(elem)")
        .py(Py::Hand("dyn_shared"))
        .doc("The block's dynamic shared memory (size set at launch)."),
    // --- GPU: indices
    index!("thread_idx", ThreadIdx, "thread_idx", "Thread index in the block."),
    index!("block_idx", BlockIdx, "block_idx", "Block index in the grid."),
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
        .rust("barrier()")
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
        .rust("warp_sync(mask)")
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
    .imms(imms!(AtomicCas { scope: Scope = "scope" }))
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
    // --- GPU: tensor cores
    row(
        "mma_load",
        "",
        "mma.load.<layout>",
        &["ptr", "ldm"],
        1,
        "the given fragment",
    )
    .imms(imms!(MmaLoad { frag: FragType = "a fragment type", layout: Layout = "layout" }))
    .gpu()
    .fx(fx::READ | fx::WARP)
    .rust("mma_load(frag, layout, ptr, ldm)")
    .py(Py::Hand("mma_load"))
    .doc("Load a fragment (warp-wide)."),
    row(
        "mma_fill",
        "",
        "mma.fill",
        &["scalar"],
        1,
        "the given accumulator fragment",
    )
    .op(|| Op::MmaFill)
    .gpu()
    .rust("mma_fill(frag, scalar)")
    .py(Py::Hand("mma_fill"))
    .doc("An accumulator fragment with every element equal."),
    row("mma", "", "mma", &["a", "b", "c"], 1, "type of c")
        .op(|| Op::Mma)
        .gpu()
        .fx(fx::WARP)
        .rust("mma(a, b, c)")
        .py(Py::Hand("mma"))
        .doc("a * b + c on fragments (warp-wide)."),
    row(
        "mma_store",
        "",
        "mma.store.<layout>",
        &["ptr", "frag", "ldm"],
        0,
        "–",
    )
    .imms(imms!(MmaStore { layout: Layout = "layout" }))
    .gpu()
    .fx(fx::WRITE | fx::WARP)
    .rust("mma_store(layout, ptr, frag, ldm)")
    .py(Py::Hand("mma_store"))
    .doc("Store an accumulator fragment (warp-wide)."),
    // --- GPU: async copy
    row(
        "cp_async",
        "",
        "cp.async.<cache>.<bytes>",
        &["dst", "src"],
        0,
        "–",
    )
    .imms(imms!(CpAsync { bytes: u32 = "byte count", cache: CacheHint = "cache hint" }))
    .sig("ptr<shared, _>, ptr<global, _>")
    .gpu()
    .fx(fx::READ | fx::WRITE)
    .needs(CP_ASYNC)
    .rust("cp_async(bytes, cache, dst, src)")
    .py(Py::Hand("cp_async"))
    .doc("Asynchronous global-to-shared copy of 4, 8 or 16 bytes."),
    row("cp_async_commit", "", "cp.async.commit", NONE, 0, "–")
        .op(|| Op::CpAsyncCommit)
        .gpu()
        .fx(fx::SYNC)
        .needs(CP_ASYNC)
        .rust("cp_async_commit()")
        .py(Py::Nullary("cp_async_commit"))
        .doc("Closes the current group of async copies."),
    row("cp_async_wait", "", "cp.async.wait", NONE, 0, "–")
        .imms(imms!(CpAsyncWait(pending: u32 = "the number of groups that may stay pending")))
        .syntax("<pending>")
        .gpu()
        .fx(fx::SYNC)
        .needs(CP_ASYNC)
        .rust("cp_async_wait(pending)")
        .py(Py::Hand("cp_async_wait"))
        .doc("Waits until at most pending committed groups are in flight."),
    // --- GPU: Hopper barriers (issue 13); a barrier is a `ptr<shared, u64>`
    mbarrier!(
        "init",
        Init,
        &["bar", "count"],
        0,
        "–",
        "ptr<shared, u64>, u32",
        MBARRIER,
        "Initializes the barrier for count (1..2^20-1) arrivals per phase, phase 0."
    ),
    mbarrier!(
        "arrive",
        Arrive,
        &["bar"],
        1,
        "u64 state",
        "ptr<shared, u64> -> u64",
        MBARRIER,
        "Arrives once; returns a state token for `test_wait`."
    ),
    mbarrier!(
        "arrive_expect_tx",
        ArriveExpectTx,
        &["bar", "tx"],
        1,
        "u64 state",
        "ptr<shared, u64>, u32 -> u64",
        MBARRIER_TX,
        "Adds tx bytes to the phase's expected transactions, then arrives once."
    ),
    mbarrier!(
        "complete_tx",
        CompleteTx,
        &["bar", "tx"],
        0,
        "–",
        "ptr<shared, u64>, u32",
        MBARRIER_TX,
        "Marks tx bytes of the phase's transactions complete (as an async copy does)."
    ),
    mbarrier!(
        "test_wait",
        TestWait,
        &["bar", "state"],
        1,
        "bool",
        "ptr<shared, u64>, u64 -> bool",
        MBARRIER,
        "Whether the phase the state token came from has completed (never blocks)."
    ),
    mbarrier!(
        "try_wait_parity",
        TryWaitParity,
        &["bar", "parity", "hint"],
        1,
        "bool",
        "ptr<shared, u64>, u32, u32 -> bool",
        MBARRIER_TX,
        "Whether the phase of the given parity has completed; may suspend up to hint ns first."
    ),
    mbarrier!(
        "inval",
        Inval,
        &["bar"],
        0,
        "–",
        "ptr<shared, u64>",
        MBARRIER,
        "Invalidates the barrier so its memory can be reused."
    ),
    row("fence_proxy_async", "", "fence.proxy_async", NONE, 0, "–")
        .op(|| Op::FenceProxyAsync)
        .gpu()
        .fx(fx::SYNC)
        .needs(MBARRIER_TX)
        .rust("fence_proxy_async()")
        .py(Py::Nullary("fence_proxy_async"))
        .doc("Orders this thread's shared-memory accesses against the async proxy (TMA, wgmma)."),
    row(
        "fence_mbarrier_init",
        "",
        "fence.mbarrier_init",
        NONE,
        0,
        "–",
    )
    .op(|| Op::FenceMbarrierInit)
    .gpu()
    .fx(fx::SYNC)
    .needs(MBARRIER_TX)
    .rust("fence_mbarrier_init()")
    .py(Py::Nullary("fence_mbarrier_init"))
    .doc("Makes prior `mbarrier.init`s visible to the cluster and the async proxy."),
    // --- GPU: warp MMA, ldmatrix/stmatrix (issue 12 items 1-2)
    row(
        "mma_sync",
        "",
        "mma.sync.<shape>.<elem>",
        &["a", "b", "c"],
        1,
        "type of c",
    )
    .imms(imms!(MmaSync { shape: WarpShape = "mma.sync shape", elem: MmaElem = "mma.sync input type" }))
    .gpu()
    .fx(fx::WARP)
    .needs(MMA_SYNC)
    .rust("mma_sync(shape, elem, a, b, c)")
    .py(Py::Hand("mma_sync"))
    .doc("D = A * B + C over the warp; per-lane register fragments in PTX's layouts."),
    row(
        "ldmatrix",
        "",
        "ldmatrix.x<num>[.trans]",
        &["ptr"],
        1,
        "u32 or vec<u32, n>",
    )
    .imms(imms!(Ldmatrix { num: u32 = "matrix count", trans: bool = "trans" }))
    .sig("ptr<shared, _> -> _")
    .gpu()
    .fx(fx::READ | fx::WARP)
    .needs(LDMATRIX)
    .rust("ldmatrix(num, trans, ptr)")
    .py(Py::Hand("ldmatrix"))
    .doc("Load n 8x8 b16 matrices from shared memory; lane i*8+r gives row r of matrix i."),
    row(
        "stmatrix",
        "",
        "stmatrix.x<num>[.trans]",
        &["ptr", "value"],
        0,
        "–",
    )
    .imms(imms!(Stmatrix { num: u32 = "matrix count", trans: bool = "trans" }))
    .sig("ptr<shared, _>, _")
    .gpu()
    .fx(fx::WRITE | fx::WARP)
    .needs(STMATRIX)
    .rust("stmatrix(num, trans, ptr, value)")
    .py(Py::Hand("stmatrix"))
    .doc("Store n 8x8 b16 matrices to shared memory (the inverse of ldmatrix)."),
    // --- GPU: fast approximate math (issue 12 item 3)
    row("approx", "ex2", "ex2.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Ex2))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Ex2, a)")
        .py(Py::Hand("ex2_approx"))
        .doc("2^a, fast approximation (`ex2.approx.f32`)."),
    row("approx", "rcp", "rcp.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Rcp))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Rcp, a)")
        .py(Py::Hand("rcp_approx"))
        .doc("1/a, fast approximation (`rcp.approx.f32`)."),
    row("approx", "tanh", "tanh.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Tanh))
        .sig("f32 -> f32")
        .gpu()
        .needs(TANH_APPROX)
        .rust("approx(ApproxOp::Tanh, a)")
        .py(Py::Hand("tanh_approx"))
        .doc("tanh(a), fast approximation (`tanh.approx.f32`, sm_80+)."),
    row("approx", "ex2_ftz", "ex2_ftz.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Ex2Ftz))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Ex2Ftz, a)")
        .py(Py::Hand("ex2_ftz_approx"))
        .doc("2^a, fast approximation with subnormals flushed to zero (`ex2.approx.ftz.f32`: one MUFU, no range fix-up)."),
    row("load_cached", "", "load.<cop>", &["ptr"], 1, "pointee")
        .imms(imms!(LoadCached(cop: CacheOp = "cache operator")))
        .class(Mem)
        .fx(fx::READ)
        .rust("load_cached(cop, ptr)")
        .py(Py::Hand("load_cached"))
        .doc("Global load with a cache operator (ca, cg, cs, lu, cv) or L2 hint (evict_first, evict_last)."),
    row("store_cached", "", "store.<cop>", &["ptr", "value"], 0, "–")
        .imms(imms!(StoreCached(cop: CacheOp = "cache operator")))
        .class(Mem)
        .fx(fx::WRITE)
        .rust("store_cached(cop, ptr, value)")
        .py(Py::Hand("store_cached"))
        .doc("Global store with a cache operator (wb, cg, cs, wt) or L2 hint (evict_first, evict_last)."),
    // --- calls and control flow
    row("call", "", "call", NONE, 0, "callee's returns")
        .imms(imms!(Call(callee: String = "the callee (like `@f`)")))
        .syntax("<callee> {args}")
        .variadic(true, true)
        .class(CallC)
        .fx(fx::CALL)
        .rust("call(callee, args, returns)")
        .py(Py::Hand("call"))
        .doc("Call a device or host function of the module."),
    // Branch targets are spelled by hand.
    row("jump", "", "jump", NONE, 0, "–")
        .syntax("<target(args)>")
        .variadic(true, false)
        .class(Term)
        .rust("jump(block, args)")
        .py(Py::Hand("jump"))
        .doc("Unconditional branch."),
    row("branch", "", "br", &["cond"], 0, "–")
        .syntax("{args}, <then(args)>, <else(args)>")
        .variadic(true, false)
        .class(Term)
        .rust("branch(cond, then, else)")
        .py(Py::Hand("br"))
        .doc("Conditional branch."),
    row("return", "", "return", NONE, 0, "–")
        .op(|| Op::Return)
        .variadic(true, false)
        .class(Term)
        .rust("ret(values)")
        .py(Py::Hand("ret"))
        .doc("Return the function's values."),
    row("unreachable", "", "unreachable", NONE, 0, "–")
        .op(|| Op::Unreachable)
        .class(Term)
        .rust("unreachable()")
        .py(Py::Hand("unreachable"))
        .doc("Traps if reached."),
    // --- issue 12 (warp-sync): bit ops
    bits!(
        "bfe",
        Bfe,
        "bfe",
        &["a", "pos", "len"],
        "type of a",
        "T, u32, u32 -> T where T: i32|u32|i64|u64",
        "Bit-field extract: len bits of a from bit pos, sign-extended for signed types."
    ),
    bits!(
        "bfi",
        Bfi,
        "bfi",
        &["a", "b", "pos", "len"],
        "type of b",
        "T, T 'the base operand', u32, u32 -> T where T: i32|u32|i64|u64",
        "Bit-field insert: b with its len bits from pos replaced by the low bits of a."
    ),
    bits!(
        "prmt",
        Prmt,
        "prmt",
        &["a", "b", "sel"],
        "u32",
        "u32, u32, u32 -> u32",
        "Byte permute: each selector nibble picks one of the 8 bytes of b:a (bit 3: replicate its sign)."
    ),
    bits!(
        "shf.l.wrap",
        ShfLWrap,
        "shf_l_wrap",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift left: high word of hi:lo << (n mod 32)."
    ),
    bits!(
        "shf.l.clamp",
        ShfLClamp,
        "shf_l_clamp",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift left: high word of hi:lo << min(n, 32)."
    ),
    bits!(
        "shf.r.wrap",
        ShfRWrap,
        "shf_r_wrap",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift right: low word of hi:lo >> (n mod 32)."
    ),
    bits!(
        "shf.r.clamp",
        ShfRClamp,
        "shf_r_clamp",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift right: low word of hi:lo >> min(n, 32)."
    ),
    // --- issue 12 (warp-sync): scoped memory model
    red!("add", Add, "red_add", "Atomic add, no result (`red`)."),
    red!("sub", Sub, "red_sub", "Atomic subtract, no result."),
    red!("min", Min, "red_min", "Atomic minimum, no result."),
    red!("max", Max, "red_max", "Atomic maximum, no result."),
    red!("and", And, "red_and", "Atomic and, no result."),
    red!("or", Or, "red_or", "Atomic or, no result."),
    red!("xor", Xor, "red_xor", "Atomic xor, no result."),
    red!("exch", Exch, "red_exch", "Atomic exchange, no result."),
    red!("inc", Inc, "red_inc", "Wrapping u32 increment, no result."),
    red!("dec", Dec, "red_dec", "Wrapping u32 decrement, no result."),
    row(
        "load_acquire",
        "",
        "load.acquire.<scope>",
        &["ptr"],
        1,
        "pointee",
    )
    .imms(imms!(LoadAcquire(scope: Scope = "scope")))
    .sig("ptr<mem, T> -> T")
    .gpu()
    .fx(fx::READ | fx::SYNC)
    .rust("load_acquire(scope, ptr)")
    .py(Py::Hand("load_acquire"))
    .doc("Load with acquire semantics at a scope (`ld.acquire`)."),
    row(
        "store_release",
        "",
        "store.release.<scope>",
        &["ptr", "value"],
        0,
        "–",
    )
    .imms(imms!(StoreRelease(scope: Scope = "scope")))
    .sig("ptr<mem, T>, T 'the stored value'")
    .gpu()
    .fx(fx::WRITE | fx::SYNC)
    .rust("store_release(scope, ptr, value)")
    .py(Py::Hand("store_release"))
    .doc("Store with release semantics at a scope (`st.release`)."),
    row("fence_acq_rel", "", "fence.acq_rel.<scope>", NONE, 0, "–")
        .imms(imms!(FenceAcqRel(scope: Scope = "scope")))
        .gpu()
        .fx(fx::SYNC)
        .rust("fence_acq_rel(scope)")
        .py(Py::Hand("fence_acq_rel"))
        .doc("Acquire-release fence at a scope (the plain `fence` is sequentially consistent)."),
    row("compiler_fence", "", "compiler_fence", NONE, 0, "–")
        .op(|| Op::CompilerFence)
        .fx(fx::SYNC)
        .rust("compiler_fence()")
        .py(Py::Nullary("compiler_fence"))
        .doc("Thread-scope fence: the compiler keeps memory accesses on their side; no instruction."),
    // --- issue 12 (warp-sync): warp reductions
    redux!("add", Add, "Sum over the lanes in mask (wrapping)."),
    redux!("min", Min, "Minimum over the lanes in mask."),
    redux!("max", Max, "Maximum over the lanes in mask."),
    redux!("and", And, "Bitwise and over the lanes in mask."),
    redux!("or", Or, "Bitwise or over the lanes in mask."),
    redux!("xor", Xor, "Bitwise xor over the lanes in mask."),
    // --- issue 13 items 1 and 5: warpgroup MMA (sm_90a), warp specialisation
    row(
        "wgmma_desc",
        "",
        "wgmma.desc.<swizzle>",
        &["ptr", "lbo", "sbo"],
        1,
        "u64",
    )
    .imms(imms!(WgmmaDesc(swizzle: Swizzle = "swizzle")))
    .sig("ptr<shared, _>, u32, u32 -> u64")
    .gpu()
    .needs(WGMMA)
    .rust("wgmma_desc(swizzle, ptr, lbo, sbo)")
    .py(Py::Hand("wgmma_desc"))
    .doc("Shared-memory matrix descriptor: start address, leading/stride byte offsets, swizzle."),
    row(
        "wgmma",
        "",
        "wgmma.m64n<n>.<a>.<b>[.trans_a][.trans_b][.neg_a][.neg_b]",
        &["acc", "a", "b", "scale_d"],
        1,
        "type of acc",
    )
    .imms(imms!(Wgmma(Wgmma {
        n: u32 = "wgmma shape",
        a: MmaElem = "wgmma input type",
        b: MmaElem = "wgmma input type",
        trans_a: bool = "trans_a",
        trans_b: bool = "trans_b",
        neg_a: bool = "neg_a",
        neg_b: bool = "neg_b",
    })))
    .gpu()
    .fx(fx::READ | fx::WARP)
    .needs(WGMMA)
    .rust("wgmma(form, acc, a, b, scale_d)")
    .py(Py::Hand("wgmma"))
    .doc("D = (scale_d ? acc : 0) + A * B over the warpgroup (64 x N x K); B and A by descriptor or A in registers."),
    row("wgmma_zero", "", "wgmma.zero", NONE, 1, "accumulator (given)")
        .op(|| Op::WgmmaZero)
        .gpu()
        .rust("wgmma_zero(ty)")
        .py(Py::Hand("wgmma_zero"))
        .doc("An accumulator of zeros for `wgmma`."),
    row("wgmma_fence", "", "wgmma.fence", NONE, 0, "–")
        .op(|| Op::WgmmaFence)
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust("wgmma_fence()")
        .py(Py::Nullary("wgmma_fence"))
        .doc("Orders register and shared-memory accesses before the following `wgmma`s."),
    row("wgmma_commit", "", "wgmma.commit_group", NONE, 0, "–")
        .op(|| Op::WgmmaCommit)
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust("wgmma_commit_group()")
        .py(Py::Nullary("wgmma_commit_group"))
        .doc("Closes the current group of `wgmma`s."),
    row("wgmma_wait", "", "wgmma.wait_group.<n>", NONE, 0, "–")
        .imms(imms!(WgmmaWait(n: u32 = "count")))
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust("wgmma_wait_group(n)")
        .py(Py::Hand("wgmma_wait_group"))
        .doc("Waits until at most n committed `wgmma` groups are pending."),
    row("setmaxnreg", "", "setmaxnreg.<inc|dec>.<count>", NONE, 0, "–")
        .imms(imms!(Setmaxnreg { count: u32 = "count", inc: bool = "setmaxnreg direction" }))
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(SETMAXNREG)
        .rust("setmaxnreg(count, inc)")
        .py(Py::Hand("setmaxnreg"))
        .doc("Raises or lowers the warpgroup's per-thread register count (24..256, by 8)."),
    row("elect_sync", "", "elect.sync", NONE, 1, "bool")
        .op(|| Op::ElectSync)
        .sig("-> bool")
        .gpu()
        .fx(fx::WARP)
        .needs(ELECT_SYNC)
        .rust("elect_sync()")
        .py(Py::Hand("elect_sync"))
        .doc("True in one lane of the warp (the lowest active one)."),
    // --- GPU: TMA and bulk copies (issue 13 item 2); a tensor map is a `tensormap` kernel parameter
    tma_row("tma_load", "", "tma.load")
        .op(|| Op::TmaLoad { multicast: false })
        .sig(TMA_LOAD)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_load(dst, tmap, bar, coords, None)")
        .py(Py::Hand("tma_load"))
        .doc("dst, tmap, bar, coords (innermost first): copies the box at coords into shared dst; completes its bytes on bar."),
    tma_row("tma_load", "multicast", "tma.load.multicast")
        .op(|| Op::TmaLoad { multicast: true })
        .sig(concat!(tma_load!(), ", u16 'the multicast CTA mask'"))
        .needs(TMA_MULTICAST)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_load(dst, tmap, bar, coords, Some(mask))")
        .py(Py::Hand("tma_load"))
        .doc("dst, tmap, bar, coords, mask: `tma.load` into every CTA of the cluster named in the u16 mask."),
    tma_row("tma_store", "", "tma.store")
        .op(|| Op::TmaStore)
        .sig(TMA_STORE)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_store(tmap, src, coords)")
        .py(Py::Hand("tma_store"))
        .doc("tmap, src, coords: copies the box in shared src to the tensor (in-bounds elements only); a bulk group op."),
    tma_reduce!("add", Add, "tmap, src, coords: adds the box in shared src into the tensor; a bulk group op."),
    tma_reduce!("min", Min, "tmap, src, coords: the minimum of the box in shared src and the tensor; a bulk group op."),
    tma_reduce!("max", Max, "tmap, src, coords: the maximum of the box in shared src and the tensor; a bulk group op."),
    row(
        "bulk_copy_g2s",
        "",
        "bulk.copy.g2s",
        &["dst", "src", "bytes", "bar"],
        0,
        "–",
    )
    .op(|| Op::BulkCopyG2S)
    .sig("ptr<shared, _>, ptr<global, _>, u32, ptr<shared, u64>")
    .gpu()
    .fx(fx::READ | fx::WRITE | fx::SYNC)
    .needs(TMA)
    .rust("bulk_copy_g2s(dst, src, bytes, bar)")
    .py(Py::Hand("bulk_copy_g2s"))
    .doc("Copies bytes (a multiple of 16) from global src to shared dst; completes them on bar."),
    row(
        "bulk_copy_s2g",
        "",
        "bulk.copy.s2g",
        &["dst", "src", "bytes"],
        0,
        "–",
    )
    .op(|| Op::BulkCopyS2G)
    .sig("ptr<global, _>, ptr<shared, _>, u32")
    .gpu()
    .fx(fx::READ | fx::WRITE | fx::SYNC)
    .needs(TMA)
    .rust("bulk_copy_s2g(dst, src, bytes)")
    .py(Py::Hand("bulk_copy_s2g"))
    .doc("Copies bytes (a multiple of 16) from shared src to global dst; a bulk group op."),
    row("bulk_commit_group", "", "bulk.commit_group", NONE, 0, "–")
        .op(|| Op::BulkCommitGroup)
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust("bulk_commit_group()")
        .py(Py::Nullary("bulk_commit_group"))
        .doc("Closes this thread's current group of bulk stores and reductions."),
    row("bulk_wait_group", "", "bulk.wait_group", NONE, 0, "–")
        .imms(imms!(BulkWaitGroup {
            pending: u32 = "the number of bulk groups that may stay pending";
            read: false
        }))
        .syntax("<pending>")
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust("bulk_wait_group(pending, false)")
        .py(Py::Hand("bulk_wait_group"))
        .doc("Waits until at most pending of this thread's bulk groups are incomplete."),
    row("bulk_wait_group", "read", "bulk.wait_group.read", NONE, 0, "–")
        .imms(imms!(BulkWaitGroup {
            pending: u32 = "the number of bulk groups that may stay pending";
            read: true
        }))
        .syntax("<pending>")
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust("bulk_wait_group(pending, true)")
        .py(Py::Hand("bulk_wait_group"))
        .doc("Waits until at most pending bulk groups still read their shared source."),
    row("prefetch_tensormap", "", "prefetch.tensormap", &["tmap"], 0, "–")
        .op(|| Op::PrefetchTensormap)
        .sig("tensormap")
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust("prefetch_tensormap(tmap)")
        .py(Py::Hand("prefetch_tensormap"))
        .doc("Prefetches the tensor map into the cache (no effect on values)."),
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
        .doc("Arrives at named barrier id (1..15) of count threads without waiting (producer side)."),
    row("cvt_pack", "", "cvt_pack.<fmt>", &["lo", "hi"], 1, "packed pair")
        .imms(imms!(CvtPack(fmt: PackFmt = "pair format")))
        .sig("f32, f32 -> _")
        .gpu()
        .rust("cvt_pack(fmt, lo, hi)")
        .py(Py::Hand("cvt_pack"))
        .doc("Two f32 rounded to nearest even into a pair: vec<f16|bf16, 2>, or u16 of fp8 (satfinite)."),
    row("cvt_unpack", "", "cvt_unpack.<fmt>", &["a"], 1, "vec<f16, 2>")
        .imms(imms!(CvtUnpack(fmt: PackFmt = "pair format")))
        .sig("u16 'the packed pair' -> vec<f16, 2>")
        .gpu()
        .rust("cvt_unpack(fmt, a)")
        .py(Py::Hand("cvt_unpack"))
        .doc("A packed fp8 pair (u16) widened exactly to vec<f16, 2>."),
    // --- h13-cluster: clusters and distributed shared memory (issue 13 item 4)
    cluster_index!("cluster_idx", ClusterIdx, "Cluster index in the grid (`%clusterid`)."),
    cluster_index!("cluster_dim", ClusterDim, "Blocks per cluster (`%cluster_nctaid`)."),
    cluster_index!(
        "cluster_block_idx",
        ClusterBlockIdx,
        "Block index in its cluster (`%cluster_ctaid`)."
    ),
    cluster_index!("cluster_grid_dim", ClusterGridDim, "Clusters per grid (`%nclusterid`)."),
    row("cluster_ctarank", "", "cluster_ctarank", NONE, 1, "u32")
        .op(|| Op::ClusterCtaRank)
        .sig("-> u32")
        .gpu()
        .needs(CLUSTER)
        .rust("cluster_ctarank()")
        .py(Py::Nullary("cluster_ctarank"))
        .doc("Linear rank of the block in its cluster (`%cluster_ctarank`)."),
    row("cluster_nctarank", "", "cluster_nctarank", NONE, 1, "u32")
        .op(|| Op::ClusterNctaRank)
        .sig("-> u32")
        .gpu()
        .needs(CLUSTER)
        .rust("cluster_nctarank()")
        .py(Py::Nullary("cluster_nctarank"))
        .doc("Blocks in the cluster (`%cluster_nctarank`)."),
    row("is_explicit_cluster", "", "is_explicit_cluster", NONE, 1, "bool")
        .op(|| Op::IsExplicitCluster)
        .sig("-> bool")
        .gpu()
        .needs(CLUSTER)
        .rust("is_explicit_cluster()")
        .py(Py::Nullary("is_explicit_cluster"))
        .doc("Whether the launch declared a cluster shape (`%is_explicit_cluster`)."),
    cluster_barrier!(
        "arrive",
        Arrive,
        "cluster_arrive",
        "Arrives at the cluster barrier (release); pair with `cluster_barrier.wait`."
    ),
    cluster_barrier!(
        "arrive_relaxed",
        ArriveRelaxed,
        "cluster_arrive",
        "Arrives at the cluster barrier without release ordering."
    ),
    cluster_barrier!(
        "wait",
        Wait,
        "cluster_wait",
        "Waits until every non-exited thread of the cluster has arrived (acquire)."
    ),
    row("mapa", "", "mapa", &["ptr", "rank"], 1, "ptr<shared_cluster, T>")
        .op(|| Op::Mapa)
        .gpu()
        .needs(CLUSTER)
        .rust("mapa(ptr, rank)")
        .py(Py::Hand("mapa"))
        .doc("The same shared-memory address in the cluster's block of rank `rank` (DSMEM)."),
    row(
        "mbarrier_arrive_cluster",
        "",
        "mbarrier.arrive_cluster",
        &["bar"],
        0,
        "–",
    )
    .op(|| Op::MbarrierArriveCluster)
    .sig("ptr<shared_cluster, u64>")
    .gpu()
    .fx(fx::READ | fx::WRITE | fx::SYNC)
    .needs(CLUSTER)
    .rust("mbarrier_arrive_cluster(bar)")
    .py(Py::Hand("mbarrier_arrive_cluster"))
    .doc("One arrival (release, cluster scope) on a barrier of any block of the cluster."),
    // The arrival a TMA ring's consumer hands a stage back with.
    row(
        "mbarrier_arrive_cluster_relaxed",
        "",
        "mbarrier.arrive_cluster_relaxed",
        &["bar"],
        0,
        "–",
    )
    .op(|| Op::MbarrierArriveClusterRelaxed)
    .sig("ptr<shared_cluster, u64>")
    .gpu()
    .fx(fx::READ | fx::WRITE | fx::SYNC)
    .needs(CLUSTER)
    .rust("mbarrier_arrive_cluster_relaxed(bar)")
    .py(Py::Hand("mbarrier_arrive_cluster"))
    .doc(
        "One arrival on a barrier of any block of the cluster that orders nothing for that \
         block (release at CTA scope, no GPU-wide fence): hands back a buffer this thread \
         only read.",
    ),
    // --- h13-cluster: programmatic dependent launch (issue 13 item 5), grid sync (issue 12 item 6)
    row(
        "griddepcontrol",
        "launch_dependents",
        "griddepcontrol.launch_dependents",
        NONE,
        0,
        "–",
    )
    .op(|| Op::Griddep(GriddepOp::LaunchDependents))
    .gpu()
    .fx(fx::SYNC)
    .needs(GRIDDEP)
    .rust("griddep(GriddepOp::LaunchDependents)")
    .py(Py::Nullary("griddep_launch_dependents"))
    .doc("Lets a dependent grid (launched with `pdl=True`) start before this one ends."),
    row("griddepcontrol", "wait", "griddepcontrol.wait", NONE, 0, "–")
        .op(|| Op::Griddep(GriddepOp::Wait))
        .gpu()
        .fx(fx::SYNC)
        .needs(GRIDDEP)
        .rust("griddep(GriddepOp::Wait)")
        .py(Py::Nullary("griddep_wait"))
        .doc("Waits until the grids this one depends on have completed and their memory is visible."),
    row("grid_sync", "", "grid_sync", NONE, 0, "–")
        .op(|| Op::GridSync)
        .gpu()
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("grid_sync()")
        .py(Py::Nullary("grid_sync"))
        .doc("Grid-wide barrier with device-scope ordering; the kernel needs a cooperative launch."),
    bulk_reduce!("add", Add, "Adds bytes of shared src into global dst, element-wise; a bulk group op."),
    bulk_reduce!("min", Min, "Element-wise minimum of shared src into global dst; a bulk group op."),
    bulk_reduce!("max", Max, "Element-wise maximum of shared src into global dst; a bulk group op."),
    // --- module globals (issue 12 item 7)
    row("global_addr", "", "global_addr", NONE, 1, "ptr<space, elem> of the global")
        .imms(imms!(GlobalAddr(name: String = "the global (like `@table`)")))
        .syntax("<name>")
        .gpu()
        .rust("global_addr(name, ty)")
        .py(Py::Hand("global_addr"))
        .doc("Pointer to a module-level `global` variable (`__constant__` or `__device__`)."),
];

/// A TMA row: variadic operands (see `TMA_LOAD`), no results.
const fn tma_row(family: &'static str, sub: &'static str, mnemonic: &'static str) -> OpDef {
    row(family, sub, mnemonic, NONE, 0, "–")
        .variadic(true, false)
        .gpu()
        .needs(TMA)
}

/// Every instruction, in the order of the docs: the parts, concatenated.
pub static OPS: &[OpDef] = &ALL;

const PARTS: &[&[OpDef]] = &[
    scalar::CONST,
    scalar::BINARY,
    scalar::UNARY,
    scalar::SCALAR,
    REST,
];
static ALL: [OpDef; total(PARTS)] = concat(PARTS);

/// The number of rows in `parts`.
const fn total(parts: &[&[OpDef]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// The rows of `parts`, in order, as one array: built at compile time, so
/// `OPS` stays a plain static slice however many files hold its rows.
const fn concat<const N: usize>(parts: &[&[OpDef]]) -> [OpDef; N] {
    let mut out = [row("", "", "", NONE, 0, ""); N];
    let (mut k, mut i) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
}
