//! Warpgroup MMA and warp specialisation (issue 13 items 1 and 5): the PTX
//! each form becomes, `ptxas -Werror` on sm_90a for every input family and a
//! few N, accumulators kept in registers (no spills at N = 128 and 256), and
//! the by-name error on archs without `sm_90a`.

mod common;

use common::*;
use zyntax_hir::*;

fn gptr(t: Type) -> Type {
    Type::ptr(AddrSpace::Global, t)
}

fn form(n: u32, a: MmaElem, b: MmaElem) -> Wgmma {
    Wgmma {
        n,
        a,
        b,
        trans_a: false,
        trans_b: false,
        neg_a: false,
        neg_b: false,
    }
}

/// One warpgroup: descriptors into dynamic shared memory, two wgmmas (the
/// first zeroing the accumulator), fence/commit/wait, every accumulator lane
/// stored to `out[tid * N/2 + i]`.
fn wgmma_kernel(w: Wgmma, acc: ScalarType, a_regs: bool) -> Module {
    let lanes = w.n / 2;
    let at = Type::Vector(acc, lanes);
    let mut b = FunctionBuilder::kernel(
        "wg",
        &[
            gptr(Type::Scalar(acc)),
            gptr(Type::Vector(ScalarType::U32, 4)),
        ],
    );
    if let Some(k) = b.kernel_info_mut() {
        k.max_threads = Some([128, 1, 1]);
        k.shared_bytes = 48 * 1024;
    }
    let (out, afrag) = (b.param(0), b.param(1));
    let smem = b.dyn_shared(Type::U8).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let lbo = b.iconst(Type::U32, 16).unwrap();
    let sbo = b.iconst(Type::U32, 1024).unwrap();
    let off = b.iconst(Type::U32, 16384).unwrap();
    let bsm = b.ptr_add(smem, off).unwrap();
    let da = b.wgmma_desc(Swizzle::B128, smem, lbo, sbo).unwrap();
    let db = b.wgmma_desc(Swizzle::B128, bsm, lbo, sbo).unwrap();
    let a = if a_regs {
        let p = b.ptr_add(afrag, tid).unwrap();
        b.load(p).unwrap()
    } else {
        da
    };
    let z = b.wgmma_zero(at).unwrap();
    let f = b.bconst(false).unwrap();
    let t = b.bconst(true).unwrap();
    b.wgmma_fence().unwrap();
    let d = b.wgmma(w, z, a, db, f).unwrap();
    let d = b.wgmma(w, d, a, db, t).unwrap();
    b.wgmma_commit_group().unwrap();
    b.wgmma_wait_group(0).unwrap();
    let n2 = b.iconst(Type::U32, i64::from(lanes)).unwrap();
    let base = b.mul(tid, n2).unwrap();
    let base = b.ptr_add(out, base).unwrap();
    for i in 0..lanes {
        let x = b.extract(d, i).unwrap();
        let ii = b.iconst(Type::U32, i64::from(i)).unwrap();
        let p = b.ptr_add(base, ii).unwrap();
        b.store(p, x).unwrap();
    }
    b.ret(&[]).unwrap();
    let mut m = module("wgmma", vec![b.finish().unwrap()]);
    m.targets = vec![Arch::Sm90a];
    m
}

fn assemble(m: &Module) -> (String, zyntax_llvm::KernelResources) {
    let out = compile(m, Arch::Sm90a);
    let asm = ptxas()
        .assemble(&out.ptx, Arch::Sm90a)
        .unwrap_or_else(|e| panic!("{e}\n--- PTX ---\n{}", out.ptx));
    let k = asm.kernels().into_iter().next().expect("one kernel");
    (out.ptx, k)
}

#[test]
fn every_input_family_assembles_on_sm_90a() {
    use MmaElem::*;
    let cases = [
        (F16, F16, ScalarType::F32, 8, "m64n8k16.f32.f16.f16"),
        (F16, F16, ScalarType::F16, 64, "m64n64k16.f16.f16.f16"),
        (Bf16, Bf16, ScalarType::F32, 256, "m64n256k16.f32.bf16.bf16"),
        (Tf32, Tf32, ScalarType::F32, 32, "m64n32k8.f32.tf32.tf32"),
        (E4m3, E5m2, ScalarType::F32, 96, "m64n96k32.f32.e4m3.e5m2"),
        (E5m2, E5m2, ScalarType::F16, 24, "m64n24k32.f16.e5m2.e5m2"),
        (S8, U8, ScalarType::I32, 48, "m64n48k32.s32.s8.u8"),
        (U8, U8, ScalarType::I32, 24, "m64n24k32.s32.u8.u8"),
    ];
    for (a, b, acc, n, ptx_form) in cases {
        for a_regs in [false, true] {
            let mut m = wgmma_kernel(form(n, a, b), acc, a_regs);
            if a != b && a == S8 {
                // Mixed integer inputs need PTX 8.4.
                m.ptx_version = Some(PtxVersion::new(8, 4));
            }
            let (ptx, k) = assemble(&m);
            assert_in_order(
                &ptx,
                &[
                    "wgmma.fence.sync.aligned;",
                    &format!("wgmma.mma_async.sync.aligned.{ptx_form}"),
                    &format!("wgmma.mma_async.sync.aligned.{ptx_form}"),
                    "wgmma.commit_group.sync.aligned;",
                    "wgmma.wait_group.sync.aligned 0;",
                ],
            );
            assert_eq!(k.spill_store_bytes, 0, "{ptx_form}: {k:?}");
        }
    }
}

#[test]
fn mixed_integer_inputs_need_ptx_8_4() {
    let m = wgmma_kernel(form(16, MmaElem::U8, MmaElem::S8), ScalarType::I32, false);
    let e = verify_module(&m).unwrap_err().to_string();
    assert!(
        e.contains("wgmma with mixed s8/u8 inputs needs sm_90a and PTX 8.4"),
        "{e}"
    );
}

#[test]
fn transposes_and_negations_assemble() {
    let mut w = form(128, MmaElem::Bf16, MmaElem::Bf16);
    w.trans_a = true;
    w.trans_b = true;
    w.neg_b = true;
    let (ptx, _) = assemble(&wgmma_kernel(w, ScalarType::F32, false));
    assert!(ptx.contains(", p, 1, -1, 1, 1;"), "{ptx}");
    w.trans_a = false;
    let (ptx, _) = assemble(&wgmma_kernel(w, ScalarType::F32, true));
    assert!(ptx.contains(", p, 1, -1, 1;"), "{ptx}");
}

/// LLVM keeps the accumulator in registers: no local memory for N = 128 and 256.
#[test]
fn accumulators_stay_in_registers() {
    for n in [128, 256] {
        let m = wgmma_kernel(
            form(n, MmaElem::Bf16, MmaElem::Bf16),
            ScalarType::F32,
            false,
        );
        let (ptx, k) = assemble(&m);
        assert_eq!(
            (k.stack_bytes, k.spill_store_bytes, k.spill_load_bytes),
            (0, 0, 0),
            "N = {n}: {k:?}"
        );
        assert_not(&ptx, ".local");
        assert!(k.registers >= n / 2, "N = {n}: {k:?}");
    }
}

#[test]
fn setmaxnreg_and_elect_sync() {
    let mut b = FunctionBuilder::kernel("ws", &[gptr(Type::U32)]);
    if let Some(k) = b.kernel_info_mut() {
        k.max_threads = Some([256, 1, 1]);
        k.min_blocks = Some(1);
    }
    let out = b.param(0);
    b.setmaxnreg(40, false).unwrap();
    b.setmaxnreg(232, true).unwrap();
    let e = b.elect_sync().unwrap();
    let v = b.cast(e, Type::U32).unwrap();
    let tid = b.thread_idx(Dim::X).unwrap();
    let p = b.ptr_add(out, tid).unwrap();
    b.store(p, v).unwrap();
    b.ret(&[]).unwrap();
    let mut m = module("ws", vec![b.finish().unwrap()]);
    m.targets = vec![Arch::Sm90a];
    let ptx = compile_checked(&m, Arch::Sm90a);
    assert_in_order(
        &ptx,
        &[
            "setmaxnreg.dec.sync.aligned.u32 40;",
            "setmaxnreg.inc.sync.aligned.u32 232;",
            "elect.sync _|p, 0xffffffff;",
        ],
    );
}

/// wgmma and setmaxnreg need `sm_90a`: on sm_90 the error names both.
#[test]
fn sm_90_without_a_is_refused_by_name() {
    let mut m = wgmma_kernel(form(64, MmaElem::F16, MmaElem::F16), ScalarType::F32, false);
    m.targets = vec![Arch::Sm90];
    let e = verify_module(&m).unwrap_err().to_string();
    assert!(e.contains("wgmma needs sm_90a"), "{e}");
    let e = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm90))
        .unwrap_err()
        .to_string();
    assert!(e.contains("wgmma needs sm_90a"), "{e}");
}

/// tests/data/wgmma.zir: every new instruction parses, verifies, prints back
/// to the same module and assembles for sm_90a; on sm_90 it is refused by name.
#[test]
fn zir_round_trips_and_assembles() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/wgmma.zir");
    let text = std::fs::read_to_string(&p).unwrap();
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
    verify_module(&m).unwrap();
    let printed = print_module(&m);
    assert_eq!(parse_module(&printed).unwrap(), m, "{printed}");
    let ptx = compile_checked(&m, Arch::Sm90a);
    assert_in_order(
        &ptx,
        &[
            ".entry tile(",
            "wgmma.fence.sync.aligned;",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
            ", p, 1, 1, 0, 0;",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
            ", p, -1, 1, 1;",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
            ", p, 1, -1, 1, 0;",
            "wgmma.commit_group.sync.aligned;",
            "wgmma.wait_group.sync.aligned 0;",
            ".entry specialised(",
            "setmaxnreg.inc.sync.aligned.u32 232;",
            "setmaxnreg.dec.sync.aligned.u32 40;",
            "elect.sync",
        ],
    );
    let e = zyntax_llvm::compile_ptx(&m, &zyntax_llvm::Options::new(Arch::Sm90))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("wgmma needs sm_90a") && e.contains("setmaxnreg needs sm_90a"),
        "{e}"
    );
}
