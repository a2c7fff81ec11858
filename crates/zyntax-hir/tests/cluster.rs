//! Clusters, DSMEM, PDL and grid sync in the HIR (h13-cluster): `.zir` round
//! trip of every op and the `cluster(..)` attribute, and the verifier's type
//! rules and arch gates, each naming the instruction or attribute.

use zyntax_hir::*;

const TEXT: &str = r#"module "c" version(2) targets(sm_90)

kernel @k cluster(2, 1, 1) {
block0(v0: ptr<global, u32>):
    v1: ptr<shared, u32> = shared_alloc u32, 32
    v2: ptr<shared, u64> = shared_alloc u64, 1
    v3: u32 = cluster_ctarank
    v4: u32 = cluster_nctarank
    v5: u32 = cluster_idx.x
    v6: u32 = cluster_dim.y
    v7: u32 = cluster_block_idx.z
    v8: u32 = cluster_grid_dim.x
    v9: bool = is_explicit_cluster
    cluster_barrier.arrive
    cluster_barrier.wait
    cluster_barrier.arrive_relaxed
    cluster_barrier.wait
    v10: ptr<shared_cluster, u32> = mapa v1, v3
    v11: u32 = load v10
    v12: u32 = atomic.add.device v10, v4
    red.max.device v10, v11
    store v10, v5
    v13: ptr<shared_cluster, u64> = mapa v2, v3
    mbarrier.arrive_cluster v13
    mbarrier.arrive_cluster_relaxed v13
    griddepcontrol.wait
    griddepcontrol.launch_dependents
    grid_sync
    store v0, v12
    return
}
"#;

#[test]
fn every_cluster_op_round_trips_and_verifies() {
    let m = parse_module(TEXT).unwrap();
    verify_module(&m).unwrap();
    let printed = print_module(&m);
    assert_eq!(parse_module(&printed).unwrap(), m);
    let k = m.function("k").unwrap();
    assert_eq!(k.kind.kernel_info().unwrap().cluster, Some([2, 1, 1]));
    assert!(uses_grid_sync(Some(&m), k));
}

fn verify_err(text: &str) -> String {
    let m = parse_module(text).unwrap();
    verify_module(&m).unwrap_err().to_string()
}

#[test]
fn cluster_ops_need_sm_90() {
    let e = verify_err(&TEXT.replace("targets(sm_90)", "targets(sm_80)"));
    assert!(e.contains("thread block clusters needs sm_90"), "{e}");
    assert!(e.contains("cluster(2, 1, 1) needs sm_90"), "{e}");
    assert!(e.contains("griddepcontrol needs sm_90"), "{e}");
}

#[test]
fn type_rules_name_the_instruction() {
    let bad = |body: &str| {
        verify_err(&format!(
            "module \"b\" version(2) targets(sm_90)\n\nkernel @k {{\nblock0(v0: ptr<global, u64>, v1: u32):\n{body}    return\n}}\n"
        ))
    };
    let e = bad("    v2: ptr<shared_cluster, u64> = mapa v0, v1\n");
    assert!(e.contains("`mapa` maps a pointer to shared memory"), "{e}");
    let e = bad("    mbarrier.arrive_cluster v0\n");
    assert!(e.contains("mbarrier.arrive_cluster"), "{e}");
    assert!(e.contains("ptr<shared_cluster, u64>"), "{e}");
    let e = bad("    mbarrier.arrive_cluster_relaxed v0\n");
    assert!(e.contains("mbarrier.arrive_cluster_relaxed"), "{e}");
    let e = bad("    v2: ptr<shared_cluster, u64> = ptr_cast v0\n");
    assert!(
        e.contains("address spaces change only to or from generic"),
        "{e}"
    );
    let e = verify_err("module \"b\" version(2) targets(sm_90)\n\nkernel @k cluster(4, 4, 2) {\nblock0:\n    return\n}\n");
    assert!(e.contains("at most 16 blocks per cluster"), "{e}");
}
