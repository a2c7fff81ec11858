//! Clusters, distributed shared memory, programmatic dependent launch and
//! grid sync (h13-cluster): the PTX each op becomes, `ptxas -Werror` on every
//! arch that has it, and the arch gate by name below it.

mod common;

use common::*;
use zyntax_hir::*;

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

/// Every cluster op once, in a kernel declared `cluster(2, 1, 1)`.
fn cluster_kernel() -> Module {
    let mut b = FunctionBuilder::kernel("cluster_ops", &[gptr(Type::U32)]);
    let out = b.param(0);
    let buf = b.shared_alloc(Type::U32, 32).unwrap();
    let bar = b.shared_alloc(Type::U64, 1).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let rank = b.cluster_ctarank().unwrap();
    let n = b.cluster_nctarank().unwrap();
    let cid = b.cluster_idx(Dim::X).unwrap();
    let cdim = b.cluster_dim(Dim::Y).unwrap();
    let cbid = b.cluster_block_idx(Dim::Z).unwrap();
    let cgrid = b.cluster_grid_dim(Dim::X).unwrap();
    let explicit = b.is_explicit_cluster().unwrap();
    let e = b.cast(explicit, Type::U32).unwrap();
    let mut acc = b.add(rank, n).unwrap();
    for v in [cid, cdim, cbid, cgrid, e] {
        acc = b.add(acc, v).unwrap();
    }
    let p = b.ptr_add(buf, tid).unwrap();
    b.store(p, acc).unwrap();
    let one = b.iconst(Type::U32, 1).unwrap();
    b.mbarrier(MbarrierOp::Init, &[bar, one]).unwrap();
    b.fence_mbarrier_init().unwrap();
    b.cluster_barrier(ClusterBarrierOp::Arrive).unwrap();
    b.cluster_barrier(ClusterBarrierOp::Wait).unwrap();
    // Read the neighbour's slot through DSMEM, add atomically into it.
    let other = b.xor(rank, one).unwrap();
    let remote = b.mapa(p, other).unwrap();
    let v = b.load(remote).unwrap();
    b.atomic(AtomicOp::Add, Scope::Device, remote, one).unwrap();
    b.red(AtomicOp::Max, Scope::Device, remote, v).unwrap();
    let rbar = b.mapa(bar, other).unwrap();
    b.mbarrier_arrive_cluster(rbar).unwrap();
    b.mbarrier_arrive_cluster_relaxed(rbar).unwrap();
    b.cluster_barrier(ClusterBarrierOp::ArriveRelaxed).unwrap();
    b.cluster_barrier(ClusterBarrierOp::Wait).unwrap();
    let q = b.ptr_add(out, tid).unwrap();
    b.store(q, v).unwrap();
    b.ret(&[]).unwrap();
    let mut f = b.finish().unwrap();
    if let FunctionKind::Kernel(k) = &mut f.kind {
        k.cluster = Some([2, 1, 1]);
    }
    module("cluster", vec![f])
}

#[test]
fn cluster_ops_and_metadata() {
    let m = cluster_kernel();
    for (_, ptx) in check_archs(&m, Arch::Sm90) {
        assert_in_order(
            &ptx,
            &[
                ".explicitcluster",
                ".reqnctapercluster 2, 1, 1",
                "%cluster_ctarank",
                "%cluster_nctarank",
                "%clusterid.x",
                "%cluster_nctaid.y",
                "%cluster_ctaid.z",
                "%nclusterid.x",
                "%is_explicit_cluster",
                "barrier.cluster.arrive;",
                "barrier.cluster.wait;",
                "mapa.u64",
                "mbarrier.arrive.release.cluster.shared::cluster.b64",
                // the relaxed arrival: default (CTA-scope) semantics, no MEMBAR.GPU
                "mbarrier.arrive.shared::cluster.b64",
                "barrier.cluster.arrive.relaxed;",
            ],
        );
    }
    let e = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm89))
        .unwrap_err()
        .to_string();
    assert!(e.contains("thread block clusters needs sm_90"), "{e}");
}

fn griddep_kernel() -> Module {
    let mut b = FunctionBuilder::kernel("pdl", &[gptr(Type::U32)]);
    let out = b.param(0);
    b.griddep(GriddepOp::Wait).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(out, tid).unwrap();
    b.store(p, tid).unwrap();
    b.griddep(GriddepOp::LaunchDependents).unwrap();
    b.ret(&[]).unwrap();
    module("pdl", vec![b.finish().unwrap()])
}

#[test]
fn griddepcontrol() {
    let m = griddep_kernel();
    for (_, ptx) in check_archs(&m, Arch::Sm90) {
        assert_in_order(
            &ptx,
            &[
                "griddepcontrol.wait;",
                "st.global.u32",
                "griddepcontrol.launch_dependents;",
            ],
        );
    }
    let e = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm80))
        .unwrap_err()
        .to_string();
    assert!(e.contains("griddepcontrol needs sm_90"), "{e}");
}

/// Two grid syncs: the counter global is declared once, the inline PTX's
/// labels are scoped, and it assembles on every arch.
#[test]
fn grid_sync_on_every_arch() {
    let mut b = FunctionBuilder::kernel("gsync", &[gptr(Type::U32)]);
    let out = b.param(0);
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(out, tid).unwrap();
    b.store(p, tid).unwrap();
    b.grid_sync().unwrap();
    let v = b.load(p).unwrap();
    b.grid_sync().unwrap();
    b.store(p, v).unwrap();
    b.ret(&[]).unwrap();
    let m = module("gsync", vec![b.finish().unwrap()]);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                ".global .align 4 .u32 __zyntax_grid_sync",
                "bar.sync",
                "atom.release.gpu.global.add.u32",
                "ld.acquire.gpu.global.u32",
                "bar.sync",
                "atom.release.gpu.global.add.u32",
            ],
        );
        assert_eq!(ptx.matches(".u32 __zyntax_grid_sync").count(), 1, "{ptx}");
    }
}
