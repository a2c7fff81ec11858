//! TMA and bulk copies (issue 13 item 2): `.zir` round trip, the exact PTX
//! each instruction becomes, the `tensormap` parameter as a 64-byte aligned
//! 128-byte grid-constant, `ptxas -Werror` on sm_90, and the verifier's
//! typed errors (placement of `tensormap`, operand types, arch).

mod common;

use common::*;
use zyntax_hir::*;

fn data(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn parse(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn zir_round_trips_and_assembles() {
    let m = parse(&data("tma.zir"));
    verify_module(&m).unwrap();
    let printed = print_module(&m);
    assert_eq!(parse(&printed), m, "{printed}");
    let ptx = compile_checked(&m, Arch::Sm90);
    assert_in_order(
        &ptx,
        &[
            ".param .align 64 .b8 tma_all_param_0[128]",
            ".param .align 64 .b8 tma_all_param_1[128]",
            "cvta.param.u64",
            "prefetch.tensormap [",
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [",
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [",
            "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [",
            "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [",
            "cp.reduce.async.bulk.tensor.2d.global.shared::cta.min.tile.bulk_group [",
            "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group [",
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [",
            "cp.async.bulk.global.shared::cta.bulk_group [",
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [",
            "cp.async.bulk.commit_group;",
            "cp.async.bulk.wait_group.read 0;",
            "cp.async.bulk.wait_group 1;",
        ],
    );
    // The parameter is never copied out of parameter space.
    assert_not(&ptx, "ld.param.b8");
}

fn verify_err(text: &str) -> String {
    let m = parse(text);
    verify_module(&m).unwrap_err().to_string()
}

#[test]
fn tensormap_is_only_a_kernel_parameter() {
    let e = verify_err(
        "module \"m\" version(2) targets(sm_90)\n\
         device @d {\nblock0(v0: tensormap):\n    return\n}\n",
    );
    assert!(
        e.contains("a tensormap may only be a kernel parameter"),
        "{e}"
    );
    let e = verify_err(
        "module \"m\" version(2) targets(sm_90)\n\
         kernel @k {\nblock0(v0: ptr<global, tensormap>):\n    return\n}\n",
    );
    assert!(e.contains("cannot live in memory"), "{e}");
}

#[test]
fn operands_are_checked_by_name() {
    let k = |body: &str| {
        format!(
            "module \"m\" version(2) targets(sm_90)\n\
             kernel @k {{\nblock0(v0: tensormap, v1: ptr<global, f32>, v2: i32):\n\
             \x20   v3: ptr<shared, f32> = shared_alloc f32, 256\n\
             \x20   v4: ptr<shared, u64> = shared_alloc u64, 1\n\
             \x20   v5: f32 = const 1.0\n\
             {body}\n    return\n}}\n"
        )
    };
    for (body, want) in [
        (
            "    tma.load v3, v1, v4, v2",
            "the tensor map must be a tensormap",
        ),
        (
            "    tma.load v1, v0, v4, v2",
            "the destination must be a pointer to shared",
        ),
        (
            "    tma.load v3, v0, v3, v2",
            "the barrier must be a ptr<shared, u64>",
        ),
        (
            "    tma.load v3, v0, v4, v5",
            "coordinate 0 must be i32 or u32",
        ),
        (
            "    tma.load v3, v0, v4, v2, v2, v2, v2, v2, v2",
            "1 to 5 coordinates",
        ),
        (
            "    tma.store v0, v1, v2",
            "the source must be a pointer to shared",
        ),
        (
            "    bulk.copy.s2g v3, v3, v2",
            "the destination must be a pointer to global",
        ),
    ] {
        let e = verify_err(&k(body));
        assert!(e.contains(want), "{body}: {e}");
    }
    // TMA needs sm_90, by name.
    let m = parse(&data("tma.zir").replace("targets(sm_90)", "targets(sm_80)"));
    let e = verify_module(&m).unwrap_err().to_string();
    assert!(e.contains("tma needs sm_90"), "{e}");
}

#[test]
fn multicast_needs_sm_90a() {
    let text = data("tma.zir").replace(
        "    tma.store v0, v5, v3, v4\n",
        "    tma.load.multicast v5, v0, v6, v3, v4, v11\n    tma.store v0, v5, v3, v4\n",
    );
    let e = verify_module(&parse(&text)).unwrap_err().to_string();
    assert!(e.contains("tma multicast needs sm_90a"), "{e}");
    let m = parse(&text.replace("targets(sm_90)", "targets(sm_90a)"));
    verify_module(&m).unwrap();
    let ptx = compile_checked(&m, Arch::Sm90a);
    assert_in_order(
        &ptx,
        &["cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%rd"],
    );
}

/// Every element type the verifier accepts for `bulk.reduce.<op>` assembles
/// (`ptxas -Werror`, sm_90); the others are typed errors naming the op.
#[test]
fn bulk_reduce_types_assemble() {
    let mut m = Module::new("bulk_reduce");
    m.targets = vec![Arch::Sm90];
    let mut rejected = 0;
    for op in BulkRedOp::ALL {
        for s in ScalarType::ALL {
            let ok = zyntax_hir::verify::bulk_reduce_type_ok(*op, s);
            let mut b = FunctionBuilder::kernel(
                format!("k_{op}_{s}"),
                &[Type::ptr(AddrSpace::Global, Type::Scalar(s))],
            );
            let dst = b.param(0);
            let src = b.shared_alloc(Type::Scalar(s), 64).unwrap();
            let bytes = b.iconst(Type::U32, 64).unwrap();
            b.bulk_reduce(*op, dst, src, bytes).unwrap();
            b.ret(&[]).unwrap();
            let f = b.finish().unwrap();
            let mut one = Module::new("one");
            one.targets = vec![Arch::Sm90];
            one.functions.push(f.clone());
            match verify_module(&one) {
                Ok(()) => {
                    assert!(ok, "{op} {s} verified");
                    m.functions.push(f);
                }
                Err(e) => {
                    assert!(!ok, "{op} {s}: {e}");
                    assert!(e.to_string().contains("PTX has no bulk"), "{e}");
                    rejected += 1;
                }
            }
        }
    }
    assert!(rejected > 0);
    let ptx = compile_checked(&m, Arch::Sm90);
    assert_in_order(
        &ptx,
        &[
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [",
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [",
            "cp.reduce.async.bulk.global.shared::cta.bulk_group.min.s64 [",
        ],
    );
}
