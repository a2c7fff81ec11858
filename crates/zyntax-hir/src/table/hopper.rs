//! Asynchronous data movement and clusters: `cp.async`, mbarriers, TMA and
//! bulk copies, clusters and distributed shared memory, programmatic
//! dependent launch and grid sync.

use super::*;

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
            .py(Py::Via("tma_reduce"))
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
        .py(Py::Via("bulk_reduce"))
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
        .py(Py::Via($py))
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

/// A TMA row: variadic operands (see `TMA_LOAD`), no results.
const fn tma_row(family: &'static str, sub: &'static str, mnemonic: &'static str) -> OpDef {
    row(family, sub, mnemonic, NONE, 0, "–")
        .variadic(true, false)
        .gpu()
        .needs(TMA)
}

/// `cp.async` and the Hopper barriers (issue 13).
pub(super) const ASYNC_COPY: &[OpDef] = &[
    // --- GPU: async copy
    row(
        "cp_async",
        "",
        "cp.async.<cache>.<bytes>",
        &["dst", "src"],
        0,
        "–",
    )
    .imms(imms!(CpAsync {
        bytes: u32 = "byte count",
        cache: CacheHint = "cache hint"
    }))
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
        .rust_shorthand("cp_async_commit()")
        .py(Py::Nullary("cp_async_commit"))
        .doc("Closes the current group of async copies."),
    row("cp_async_wait", "", "cp.async.wait", NONE, 0, "–")
        .imms(imms!(CpAsyncWait(pending: u32 = "the number of groups that may stay pending")))
        .syntax("<pending>")
        .gpu()
        .fx(fx::SYNC)
        .needs(CP_ASYNC)
        .rust("cp_async_wait(pending)")
        .py(Py::Method(&py::CP_ASYNC_WAIT))
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
        .rust_shorthand("fence_proxy_async()")
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
    .rust_shorthand("fence_mbarrier_init()")
    .py(Py::Nullary("fence_mbarrier_init"))
    .doc("Makes prior `mbarrier.init`s visible to the cluster and the async proxy."),
];

/// TMA and bulk copies (issue 13 item 2).
pub(super) const TMA_BULK: &[OpDef] = &[
    // --- GPU: TMA and bulk copies (issue 13 item 2); a tensor map is a `tensormap` kernel parameter
    tma_row("tma_load", "", "tma.load")
        .op(|| Op::TmaLoad { multicast: false })
        .sig(TMA_LOAD)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_load(dst, tmap, bar, coords, None)")
        .py(Py::Method(&py::TMA_LOAD))
        .doc("dst, tmap, bar, coords (innermost first): copies the box at coords into shared dst; completes its bytes on bar."),
    tma_row("tma_load", "multicast", "tma.load.multicast")
        .op(|| Op::TmaLoad { multicast: true })
        .sig(concat!(tma_load!(), ", u16 'the multicast CTA mask'"))
        .needs(TMA_MULTICAST)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_load(dst, tmap, bar, coords, Some(mask))")
        .py(Py::Via("tma_load"))
        .doc("dst, tmap, bar, coords, mask: `tma.load` into every CTA of the cluster named in the u16 mask."),
    tma_row("tma_store", "", "tma.store")
        .op(|| Op::TmaStore)
        .sig(TMA_STORE)
        .fx(fx::READ | fx::WRITE | fx::SYNC)
        .rust("tma_store(tmap, src, coords)")
        .py(Py::Method(&py::TMA_STORE))
        .doc("tmap, src, coords: copies the box in shared src to the tensor (in-bounds elements only); a bulk group op."),
    tma_reduce!("add", Add, "tmap, src, coords: adds the box in shared src into the tensor; a bulk group op.")
        .py(Py::Method(&py::TMA_REDUCE)),
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
    .rust_shorthand("bulk_copy_g2s(dst, src, bytes, bar)")
    .py(Py::Method(&py::BULK_COPY_G2S))
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
    .rust_shorthand("bulk_copy_s2g(dst, src, bytes)")
    .py(Py::Method(&py::BULK_COPY_S2G))
    .doc("Copies bytes (a multiple of 16) from shared src to global dst; a bulk group op."),
    row("bulk_commit_group", "", "bulk.commit_group", NONE, 0, "–")
        .op(|| Op::BulkCommitGroup)
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust_shorthand("bulk_commit_group()")
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
        .py(Py::Method(&py::BULK_WAIT_GROUP))
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
        .py(Py::Via("bulk_wait_group"))
        .doc("Waits until at most pending bulk groups still read their shared source."),
    row("prefetch_tensormap", "", "prefetch.tensormap", &["tmap"], 0, "–")
        .op(|| Op::PrefetchTensormap)
        .sig("tensormap")
        .gpu()
        .fx(fx::SYNC)
        .needs(TMA)
        .rust_shorthand("prefetch_tensormap(tmap)")
        .py(Py::Method(&py::PREFETCH_TENSORMAP))
        .doc("Prefetches the tensor map into the cache (no effect on values)."),
];

/// Clusters and distributed shared memory (issue 13 item 4).
pub(super) const CLUSTERS: &[OpDef] = &[
    // --- h13-cluster: clusters and distributed shared memory (issue 13 item 4)
    cluster_index!(
        "cluster_idx",
        ClusterIdx,
        "Cluster index in the grid (`%clusterid`)."
    ),
    cluster_index!(
        "cluster_dim",
        ClusterDim,
        "Blocks per cluster (`%cluster_nctaid`)."
    ),
    cluster_index!(
        "cluster_block_idx",
        ClusterBlockIdx,
        "Block index in its cluster (`%cluster_ctaid`)."
    ),
    cluster_index!(
        "cluster_grid_dim",
        ClusterGridDim,
        "Clusters per grid (`%nclusterid`)."
    ),
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
    row(
        "is_explicit_cluster",
        "",
        "is_explicit_cluster",
        NONE,
        1,
        "bool",
    )
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
    )
    .py(Py::Method(&py::CLUSTER_ARRIVE)),
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
    )
    .py(Py::Method(&py::CLUSTER_WAIT)),
    row(
        "mapa",
        "",
        "mapa",
        &["ptr", "rank"],
        1,
        "ptr<shared_cluster, T>",
    )
    .op(|| Op::Mapa)
    .gpu()
    .needs(CLUSTER)
    .rust("mapa(ptr, rank)")
    .py(Py::Method(&py::MAPA))
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
    .rust_shorthand("mbarrier_arrive_cluster(bar)")
    .py(Py::Method(&py::MBARRIER_ARRIVE_CLUSTER))
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
    .rust_shorthand("mbarrier_arrive_cluster_relaxed(bar)")
    .py(Py::Via("mbarrier_arrive_cluster"))
    .doc(
        "One arrival on a barrier of any block of the cluster that orders nothing for that \
         block (release at CTA scope, no GPU-wide fence): hands back a buffer this thread \
         only read.",
    ),
];

/// Programmatic dependent launch (issue 13 item 5) and grid sync (issue 12 item 6).
pub(super) const PDL: &[OpDef] = &[
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
    row(
        "griddepcontrol",
        "wait",
        "griddepcontrol.wait",
        NONE,
        0,
        "–",
    )
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
        .rust_shorthand("grid_sync()")
        .py(Py::Nullary("grid_sync"))
        .doc(
            "Grid-wide barrier with device-scope ordering; the kernel needs a cooperative launch.",
        ),
    bulk_reduce!(
        "add",
        Add,
        "Adds bytes of shared src into global dst, element-wise; a bulk group op."
    )
    .py(Py::Method(&py::BULK_REDUCE)),
    bulk_reduce!(
        "min",
        Min,
        "Element-wise minimum of shared src into global dst; a bulk group op."
    ),
    bulk_reduce!(
        "max",
        Max,
        "Element-wise maximum of shared src into global dst; a bulk group op."
    ),
];

/// The Python forms of the TMA, bulk-copy and cluster rows: their
/// parameters and the Rust builder call, from which `crate::gen` writes the
/// PyO3 methods and their stubs.
mod py {
    use super::{PyArg, PyArg::*, PyMethod};
    use crate::op::BulkRedOp;

    /// A TMA reduction's op.
    const RED_OP: PyArg = Enum("op", "BulkRedOp", BulkRedOp::NAMES, "TMA reduction");

    pub(super) const CP_ASYNC_WAIT: PyMethod = PyMethod {
        name: "cp_async_wait",
        args: &[Count("pending", 0)],
        call: "fb.cp_async_wait(pending)",
        result: false,
        doc: "Waits until at most `pending` committed groups are still in flight.",
    };
    pub(super) const TMA_LOAD: PyMethod = PyMethod {
        name: "tma_load",
        args: &[
            Value("dst", "the destination"),
            Value("tmap", "the tensor map"),
            Coords("coords"),
            Value("bar", "the barrier"),
            KwOpnd("multicast", "U16"),
        ],
        call: "fb.tma_load(dst, tmap, bar, coords, multicast)",
        result: false,
        doc: "Copies the tensor map's box at `coords` into shared `dst`; the copy\n\
              completes its bytes on mbarrier `bar` (sm_90). With `multicast` (a u16\n\
              CTA mask), into the same offset of every CTA of the cluster it names (sm_90a).",
    };
    pub(super) const TMA_STORE: PyMethod = PyMethod {
        name: "tma_store",
        args: &[
            Value("tmap", "the tensor map"),
            Coords("coords"),
            Value("src", "the source"),
        ],
        call: "fb.tma_store(tmap, src, coords)",
        result: false,
        doc: "Copies the box in shared `src` to the tensor at `coords` (in-bounds\n\
              elements only). A bulk-group op: `bulk_commit_group`, then `bulk_wait_group`.",
    };
    pub(super) const TMA_REDUCE: PyMethod = PyMethod {
        name: "tma_reduce",
        args: &[
            RED_OP,
            Value("tmap", "the tensor map"),
            Coords("coords"),
            Value("src", "the source"),
        ],
        call: "fb.tma_reduce(op, tmap, src, coords)",
        result: false,
        doc: "Combines the box in shared `src` into the tensor at `coords` with `op`\n\
              (`\"add\"`, `\"min\"` or `\"max\"`, on the tensor map's element type). A bulk-group op.",
    };
    pub(super) const BULK_COPY_G2S: PyMethod = PyMethod {
        name: "bulk_copy_g2s",
        args: &[
            Value("dst", "the destination"),
            Value("src", "the source"),
            Opnd("nbytes", "U32"),
            Value("bar", "the barrier"),
        ],
        call: "fb.bulk_copy_g2s(dst, src, nbytes, bar)",
        result: false,
        doc: "Copies `nbytes` (a multiple of 16) from global `src` to shared `dst`;\n\
              the copy completes its bytes on mbarrier `bar` (sm_90).",
    };
    pub(super) const BULK_COPY_S2G: PyMethod = PyMethod {
        name: "bulk_copy_s2g",
        args: &[
            Value("dst", "the destination"),
            Value("src", "the source"),
            Opnd("nbytes", "U32"),
        ],
        call: "fb.bulk_copy_s2g(dst, src, nbytes)",
        result: false,
        doc:
            "Copies `nbytes` (a multiple of 16) from shared `src` to global `dst`. A bulk-group op.",
    };
    pub(super) const BULK_WAIT_GROUP: PyMethod = PyMethod {
        name: "bulk_wait_group",
        args: &[Count("n", 0), Flag("read", true)],
        call: "fb.bulk_wait_group(n, read)",
        result: false,
        doc: "Waits until at most `n` of this thread's committed bulk groups are\n\
              incomplete (`read=True`: until they no longer read their shared source).",
    };
    pub(super) const BULK_REDUCE: PyMethod = PyMethod {
        name: "bulk_reduce",
        args: &[
            Enum("op", "BulkRedOp", BulkRedOp::NAMES, "bulk reduction"),
            Value("dst", "the destination"),
            Value("src", "the source"),
            Opnd("nbytes", "U32"),
        ],
        call: "fb.bulk_reduce(op, dst, src, nbytes)",
        result: false,
        doc: "Combines `nbytes` (a multiple of 16) of shared `src` element-wise into\n\
              global `dst` with `op` (`\"add\"`, `\"min\"`, `\"max\"`, in the pointers'\n\
              element type). A bulk-group op.",
    };
    pub(super) const PREFETCH_TENSORMAP: PyMethod = PyMethod {
        name: "prefetch_tensormap",
        args: &[Value("tmap", "the tensor map")],
        call: "fb.prefetch_tensormap(tmap)",
        result: false,
        doc: "Prefetches the tensor map (speed only).",
    };
    pub(super) const CLUSTER_ARRIVE: PyMethod = PyMethod {
        name: "cluster_arrive",
        args: &[Flag("relaxed", false)],
        call: "fb.cluster_barrier(if relaxed { zh::ClusterBarrierOp::ArriveRelaxed } else { zh::ClusterBarrierOp::Arrive })",
        result: false,
        doc: "`barrier.cluster.arrive` (`relaxed=True`: without release ordering).",
    };
    pub(super) const CLUSTER_WAIT: PyMethod = PyMethod {
        name: "cluster_wait",
        args: &[],
        call: "fb.cluster_barrier(zh::ClusterBarrierOp::Wait)",
        result: false,
        doc: "`barrier.cluster.wait`: until every non-exited thread of the cluster has arrived.",
    };
    pub(super) const MAPA: PyMethod = PyMethod {
        name: "mapa",
        args: &[Value("ptr", "the pointer"), Opnd("rank", "U32")],
        call: "fb.mapa(ptr, rank)",
        result: true,
        doc: "`ptr` (a `ptr<shared, T>`) in the cluster's block of rank `rank`: a\n\
              `ptr<shared_cluster, T>` to load, store and atomically update (DSMEM).",
    };
    pub(super) const MBARRIER_ARRIVE_CLUSTER: PyMethod = PyMethod {
        name: "mbarrier_arrive_cluster",
        args: &[Value("bar", "the barrier"), Flag("relaxed", false)],
        call: "if relaxed { fb.mbarrier_arrive_cluster_relaxed(bar) } else { fb.mbarrier_arrive_cluster(bar) }",
        result: false,
        doc: "One arrival on a barrier `mapa` mapped to a block of the cluster: release at\n\
              cluster scope, or (`relaxed=True`) ordering nothing for that block, for handing\n\
              back a buffer this thread only read (no GPU-wide fence).",
    };
}
