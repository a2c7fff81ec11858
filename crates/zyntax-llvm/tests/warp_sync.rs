//! Issue 12 (warp-sync) instructions: `.zir` round trip, the exact PTX each
//! becomes, `ptxas -Werror` on every arch that has it, and the verifier's
//! typed errors for wrong types and too-old archs.

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
fn zir_round_trips() {
    let m = parse(&data("warp_sync.zir"));
    verify_module(&m).unwrap();
    let printed = print_module(&m);
    assert_eq!(parse(&printed), m, "{printed}");
    for mn in [
        "bfe",
        "bfi",
        "prmt",
        "shf.l.wrap",
        "shf.r.clamp",
        "red.add.device",
        "red.min.device",
        "red.sub.system",
        "store.release.device",
        "load.acquire.block",
        "fence.acq_rel.system",
        "compiler_fence",
        "atomic.add.device",
    ] {
        assert!(printed.contains(mn), "{mn} missing from\n{printed}");
    }
}

#[test]
fn ptx_on_every_arch() {
    let m = parse(&data("warp_sync.zir"));
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                ".entry bits32(",
                "bfe.u32",
                "bfe.s32",
                "bfi.b32",
                "prmt.b32",
                "shf.l.wrap.b32",
                "shf.l.clamp.b32",
                "shf.r.wrap.b32",
                "shf.r.clamp.b32",
            ],
        );
        assert_in_order(&ptx, &[".entry bits64(", "bfe.u64", "bfe.s64", "bfi.b64"]);
        assert_in_order(&ptx, &[".entry litmus_mp(", "ld.acquire.gpu.global.b32"]);
        assert_in_order(
            &ptx,
            &[
                ".entry memory_model(",
                "red.gpu.global.add.u32",
                "red.gpu.global.max.u32",
                "red.gpu.global.inc.u32",
                "red.sys.global.add.u32",
                "red.cta.global.add.f32",
                "atom.gpu.global.cas.b32",
                "red.gpu.global.add.noftz.f16x2",
                "atom.gpu.global.add.noftz.f16x2",
                "st.release.gpu.global.b32",
                "fence.acq_rel.sys",
                "ld.acquire.cta.global.b32",
                "st.release.cta.global.b32",
            ],
        );
    }
}

const BF16X2: &str = r#"module "h" targets(TARGET)
kernel @k {
block0(v0: ptr<global, vec<bf16, 2>>, v2: vec<bf16, 2>):
    v1: ptr<shared, vec<bf16, 2>> = shared_alloc vec<bf16, 2>, 4
    v3: vec<bf16, 2> = atomic.add.system v0, v2
    red.add.block v1, v3
    return
}
"#;

#[test]
fn packed_bf16_add_needs_sm_90() {
    let old = parse(&BF16X2.replace("TARGET", "sm_80"));
    let e = verify_module(&old).unwrap_err().to_string();
    assert!(
        e.contains("atomic add on vec<bf16, 2> needs sm_90 and PTX 7.8"),
        "{e}"
    );
    assert!(
        e.contains("atomic.add.system"),
        "names the instruction: {e}"
    );
    let m = parse(&BF16X2.replace("TARGET", "sm_90"));
    for (_, ptx) in check_archs(&m, Arch::Sm90) {
        assert_in_order(
            &ptx,
            &[
                "atom.sys.global.add.noftz.bf16x2",
                "red.cta.shared.add.noftz.bf16x2",
            ],
        );
    }
}

/// Shared-memory forms and the 64-bit ordered accesses.
#[test]
fn shared_and_64_bit_forms() {
    let m = parse(
        r#"module "s" targets(sm_70)
kernel @k {
block0(v0: ptr<global, u64>, v1: ptr<generic, f64>, v2: f64):
    v3: ptr<shared, f32> = shared_alloc f32, 4
    v4: f32 = const 1.5
    red.add.block v3, v4
    red.max.block v3, v4
    v5: u64 = load.acquire.system v0
    store.release.gpu v0, v5
    v6: f64 = load.acquire.device v1
    v7: f64 = add v6, v2
    store.release.device v1, v7
    red.exch.device v0, v5
    return
}
"#
        .replace("gpu", "device")
        .as_str(),
    );
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                "atom.shared.add.f32",
                "atom.shared.cas.b32",
                "ld.acquire.sys.global.b64",
                "st.release.gpu.global.b64",
                "ld.acquire.gpu.b64",
                "st.release.gpu.b64",
                "atom.gpu.global.exch.b64",
            ],
        );
    }
}

fn verify_err(body: &str, params: &str) -> String {
    let text = format!(
        "module \"e\" targets(sm_80)\nkernel @k {{\nblock0({params}):\n{body}\n    return\n}}\n"
    );
    verify_module(&parse(&text)).unwrap_err().to_string()
}

#[test]
fn typed_errors() {
    let e = verify_err("    v2: f32 = bfe v0, v1, v1", "v0: f32, v1: u32");
    assert!(
        e.contains("`bfe` works on i32, u32, i64 or u64, got f32"),
        "{e}"
    );
    let e = verify_err("    v2: u32 = prmt v0, v1, v1", "v0: i32, v1: u32");
    assert!(e.contains("operand 0 of `prmt` must be u32"), "{e}");
    let e = verify_err("    v2: u64 = bfi v0, v1, v1, v1", "v0: u64, v1: u32");
    assert!(e.contains("base operand has type u32, expected u64"), "{e}");
    let e = verify_err(
        "    v2: u16 = load.acquire.device v0",
        "v0: ptr<global, u16>, v1: u32",
    );
    assert!(e.contains("32- or 64-bit scalars, got u16"), "{e}");
    let e = verify_err("    red.and.device v0, v1", "v0: ptr<global, f32>, v1: f32");
    assert!(e.contains("atomic.and works on"), "{e}");
    let e = verify_err(
        "    store.release.device v0, v1",
        "v0: ptr<local, u32>, v1: u32",
    );
    assert!(e.contains("global, shared or generic"), "{e}");
}

/// GPU-only: a host function may not use them (the verifier's placement rule).
#[test]
fn bit_ops_are_gpu_only() {
    let text = "module \"h\"\nhost @f(v0: u32) -> u32 {\nblock0(v0: u32):\n    v1: u32 = prmt v0, v0, v0\n    return v1\n}\n";
    if let Ok(m) = parse_module(text) {
        assert!(verify_module(&m).is_err());
    }
}

#[test]
fn redux_needs_sm_80() {
    let text = data("redux.zir");
    let m = parse(&text);
    assert_eq!(parse(&print_module(&m)), m);
    for (_, ptx) in check_archs(&m, Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "redux.sync.add.u32",
                "redux.sync.min.u32",
                "redux.sync.max.u32",
                "redux.sync.and.b32",
                "redux.sync.or.b32",
                "redux.sync.xor.b32",
                "redux.sync.min.s32",
                "redux.sync.max.s32",
            ],
        );
    }
    let old = parse(&text.replace("targets(sm_80, sm_90)", "targets(sm_75)"));
    let e = verify_module(&old).unwrap_err().to_string();
    assert!(e.contains("redux.sync needs sm_80 and PTX 7.0"), "{e}");
    assert!(e.contains("redux.add"), "{e}");
}

/// `exact_threads` (issue 12 item 7): `.reqntid`, round trip, limits.
#[test]
fn exact_threads_is_reqntid() {
    let text = "module \"x\" targets(sm_70)\nkernel @k exact_threads(128, 2, 1) min_blocks(4) {\nblock0(v0: ptr<global, u32>):\n    v1: u32 = thread_idx.x\n    store v0, v1\n    return\n}\n";
    let m = parse(text);
    assert_eq!(parse(&print_module(&m)), m);
    assert!(print_module(&m).contains("exact_threads(128, 2, 1)"));
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(&ptx, &[".reqntid 128, 2, 1", ".minnctapersm 4"]);
        assert_not(&ptx, ".maxntid");
    }
    let both = text.replace("min_blocks(4)", "max_threads(256, 2, 1)");
    let e = verify_module(&parse(&both)).unwrap_err().to_string();
    assert!(e.contains("and max_threads cannot both be declared"), "{e}");
    let e = verify_module(&parse(
        &text.replace("exact_threads(128, 2, 1)", "exact_threads(0, 2, 1)"),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("exact_threads(0, 2, 1): every dimension at least 1"),
        "{e}"
    );
}

// --- issue 12 (rest): named barriers and packed conversions

#[test]
fn named_barriers_on_every_arch() {
    let text = data("named_barrier.zir");
    let m = parse(&text);
    assert_eq!(parse(&print_module(&m)), m);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                "bar.arrive 1, 128;",
                "bar.sync 2, 128;",
                "bar.arrive 1, 128;",
                "bar.sync 1, 128;",
                "bar.arrive 2, 128;",
                "bar.sync 1, 128;",
            ],
        );
    }
    for (from, to, want) in [
        (
            "bar.arrive 2, 128",
            "bar.arrive 16, 128",
            "named-barrier id 16 is out of range 1..15",
        ),
        ("bar.sync 2, 128", "bar.sync 0, 128", "id 0 is out of range"),
        (
            "bar.sync 1, 128",
            "bar.sync 1, 48",
            "the thread count 48 must be a multiple of 32",
        ),
        (
            "bar.arrive 1, 128",
            "bar.arrive 1, 256",
            "256 threads can never arrive in a block of at most 128",
        ),
    ] {
        // Indented: the instruction, not the header comment.
        let bad = parse(&text.replacen(&format!("    {from}"), &format!("    {to}"), 1));
        let e = match verify_module(&bad) {
            Ok(()) => panic!("{to} verified"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want) && e.contains(to), "{to}: {e}");
    }
}

#[test]
fn cvt_pack_needs_sm_89_for_fp8() {
    let text = data("cvt_pack.zir");
    let m = parse(&text);
    assert_eq!(parse(&print_module(&m)), m);
    for (_, ptx) in check_archs(&m, Arch::Sm89) {
        assert_in_order(
            &ptx,
            &[
                "cvt.rn.f16x2.f32",
                "cvt.rn.bf16x2.f32",
                "cvt.rn.satfinite.e4m3x2.f32",
                "cvt.rn.satfinite.e5m2x2.f32",
                "cvt.rn.f16x2.e4m3x2",
                "cvt.rn.f16x2.e5m2x2",
            ],
        );
    }
    let old = parse(&text.replace("targets(sm_89, sm_90) ptx(8.1)", "targets(sm_80)"));
    let e = verify_module(&old).unwrap_err().to_string();
    assert!(
        e.contains("fp8 pair conversions needs sm_89 and PTX 8.1"),
        "{e}"
    );
    assert!(e.contains("cvt_pack.e4m3x2"), "{e}");
    // f16x2/bf16x2 alone need sm_80.
    let f16_only = "module \"p\" targets(sm_75)\nkernel @k {\nblock0(v0: ptr<global, u32>, v1: f32):\n    v2: vec<f16, 2> = cvt_pack.f16x2 v1, v1\n    v3: u32 = bitcast v2\n    store v0, v3\n    return\n}\n";
    let e = verify_module(&parse(f16_only)).unwrap_err().to_string();
    assert!(e.contains("needs sm_80"), "{e}");
    let ok = parse(&f16_only.replace("sm_75", "sm_80"));
    for (_, ptx) in check_archs(&ok, Arch::Sm80) {
        assert_in_order(&ptx, &["cvt.rn.f16x2.f32"]);
    }
    // Only fp8 pairs unpack; operands are f32.
    let bad = f16_only
        .replace("sm_75", "sm_90")
        .replace("cvt_pack.f16x2 v1, v1", "cvt_pack.f16x2 v1, v0");
    assert!(verify_module(&parse(&bad)).is_err());
}

/// Declared shared-memory alignment (issue 12 item 7): `.align` in the PTX of
/// static and dynamic shared memory; a power of two up to 1024.
#[test]
fn shared_alignment_is_declared_in_ptx() {
    let text = "module \"a\" version(2) targets(sm_70, sm_90)\nkernel @k {\nblock0(v0: ptr<global, u32>):\n    v1: ptr<shared, u32> = shared_alloc u32, 256 align 1024\n    v2: ptr<shared, f16> = dyn_shared f16 align 128\n    v3: u32 = thread_idx.x\n    v4: ptr<shared, u32> = ptr_add v1, v3\n    store v4, v3\n    v5: ptr<shared, u32> = ptr_cast v2\n    v6: ptr<shared, u32> = ptr_add v5, v3\n    store v6, v3\n    barrier\n    v7: u32 = load v4\n    v8: u32 = load v6\n    v9: u32 = add v7, v8\n    v10: ptr<global, u32> = ptr_add v0, v3\n    store v10, v9\n    return\n}\n";
    let m = parse(text);
    let printed = print_module(&m);
    assert!(
        printed.contains("shared_alloc u32, 256 align 1024"),
        "{printed}"
    );
    assert!(printed.contains("dyn_shared f16 align 128"), "{printed}");
    assert_eq!(parse(&printed), m);
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(&ptx, &[".extern .shared .align 128"]);
        assert_in_order(&ptx, &[".shared .align 1024 .b8 __zyntax_shared_k_0"]);
    }
    // Without `align`: the default 16 bytes.
    let plain = parse(&text.replace(" align 1024", "").replace(" align 128", ""));
    let ptx = compile_checked(&plain, Arch::Sm80);
    assert_in_order(&ptx, &[".shared .align 16 .b8 __zyntax_shared_k_0"]);
    for bad in ["align 48", "align 2048"] {
        let m = parse(&text.replace("align 1024", bad));
        let e = verify_module(&m).unwrap_err().to_string();
        assert!(e.contains("must be a power of two up to 1024"), "{e}");
    }
}

/// L2 eviction priorities on global loads and stores (issue 12 item 3):
/// `createpolicy` + `.L2::cache_hint`, sm_80 with PTX 7.4.
#[test]
fn l2_eviction_hints() {
    let text = "module \"h\" version(2) targets(sm_80, sm_90) ptx(8.0)\nkernel @k {\nblock0(v0: ptr<global, vec<f32, 4>>, v1: ptr<global, vec<f32, 4>>, v2: ptr<global, u32>):\n    v3: u32 = thread_idx.x\n    v4: ptr<global, vec<f32, 4>> = ptr_add v0, v3\n    v5: vec<f32, 4> = load.evict_last v4\n    v6: ptr<global, vec<f32, 4>> = ptr_add v1, v3\n    store.evict_first v6, v5\n    v7: ptr<global, u32> = ptr_add v2, v3\n    v8: u32 = load.evict_first v7\n    store.evict_last v7, v8\n    return\n}\n";
    let m = parse(text);
    assert_eq!(parse(&print_module(&m)), m);
    for (_, ptx) in check_archs(&m, Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "createpolicy.fractional.L2::evict_last.b64",
                "ld.global.L2::cache_hint.v4.f32",
                "createpolicy.fractional.L2::evict_first.b64",
                "st.global.L2::cache_hint.v4.f32",
                "createpolicy.fractional.L2::evict_first.b64",
                "ld.global.L2::cache_hint.b32",
                "createpolicy.fractional.L2::evict_last.b64",
                "st.global.L2::cache_hint.b32",
            ],
        );
    }
    let old = parse(&text.replace("targets(sm_80, sm_90) ptx(8.0)", "targets(sm_80)"));
    let e = verify_module(&old).unwrap_err().to_string();
    assert!(
        e.contains("L2 eviction hints needs sm_80 and PTX 7.4"),
        "{e}"
    );
}

/// Packed half arithmetic (issue 12 item 3): `add/sub/mul/min/max/fma` on
/// `vec<f16, 2>` and `vec<bf16, 2>` are one f16x2 / bf16x2 instruction each.
#[test]
fn packed_half_arithmetic() {
    let f16 = "module \"p\" version(2) targets(sm_80, sm_90)\nkernel @k {\nblock0(v0: ptr<global, vec<f16, 2>>, v1: ptr<global, vec<f16, 2>>):\n    v2: u32 = thread_idx.x\n    v3: ptr<global, vec<f16, 2>> = ptr_add v0, v2\n    v4: vec<f16, 2> = load v3\n    v5: ptr<global, vec<f16, 2>> = ptr_add v1, v2\n    v6: vec<f16, 2> = load v5\n    v7: vec<f16, 2> = add v4, v6\n    v8: vec<f16, 2> = mul v7, v6\n    v9: vec<f16, 2> = sub v8, v4\n    v10: vec<f16, 2> = fma v9, v6, v7\n    v11: vec<f16, 2> = min v10, v4\n    v12: vec<f16, 2> = max v11, v6\n    store v5, v12\n    return\n}\n";
    let m = parse(f16);
    assert_eq!(parse(&print_module(&m)), m);
    for (_, ptx) in check_archs(&m, Arch::Sm80) {
        assert_in_order(
            &ptx,
            &[
                "add.rn.f16x2",
                "mul.rn.f16x2",
                "sub.rn.f16x2",
                "fma.rn.f16x2",
                "min.f16x2",
                "max.f16x2",
            ],
        );
    }
    let bf16 = parse(&f16.replace("f16", "bf16"));
    for (arch, ptx) in check_archs(&bf16, Arch::Sm80) {
        // sm_80 has only fma.rn.bf16x2 (add/sub/mul become fmas); sm_90 has them all.
        if arch >= Arch::Sm90 {
            assert_in_order(
                &ptx,
                &[
                    "add.rn.bf16x2",
                    "mul.rn.bf16x2",
                    "sub.rn.bf16x2",
                    "fma.rn.bf16x2",
                ],
            );
        } else {
            assert_in_order(
                &ptx,
                &[
                    "fma.rn.bf16x2",
                    "fma.rn.bf16x2",
                    "fma.rn.bf16x2",
                    "fma.rn.bf16x2",
                ],
            );
        }
        assert_in_order(&ptx, &["min.bf16x2", "max.bf16x2"]);
    }
    // Other ops and other vectors stay rejected.
    let bad = parse(&f16.replace(
        "v7: vec<f16, 2> = add v4, v6",
        "v7: vec<f16, 2> = div v4, v6",
    ));
    let e = verify_module(&bad).unwrap_err().to_string();
    assert!(
        e.contains("half pairs take add, sub, mul, min, max and fma"),
        "{e}"
    );
}
