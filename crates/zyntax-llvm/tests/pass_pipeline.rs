//! `Options::passes`: a caller's LLVM pass pipeline replaces the level's;
//! O1 on the GPU runs `KERNEL_PIPELINE`.

mod common;

use zyntax_hir::*;
use zyntax_llvm::{compile_ptx, emit_llvm, CompileError, Options, KERNEL_PIPELINE};

/// `y[i] = x[i] * 1 + -0` over one thread per element: `default<O3>`
/// folds both (exactly: `x * 1` and `x + -0` are `x`), a pipeline without
/// instcombine keeps them.
fn module() -> Module {
    parse_module(
        "module \"pp\" targets(sm_80)\nkernel @k {\nblock0(v0: ptr<global, f32>, v1: ptr<global, f32>):\n    v2: u32 = thread_idx.x\n    v3: ptr<global, f32> = ptr_add v0, v2\n    v4: f32 = load v3\n    v5: f32 = const 1.0\n    v6: f32 = mul v4, v5\n    v7: f32 = const -0.0\n    v8: f32 = add v6, v7\n    v9: ptr<global, f32> = ptr_add v1, v2\n    store v9, v8\n    return\n}\n",
    )
    .unwrap()
}

#[test]
fn a_given_pipeline_replaces_the_levels() {
    let m = module();
    let o3 = emit_llvm(&m, &Options::new(Arch::Sm80)).unwrap();
    let none = emit_llvm(&m, &Options::new(Arch::Sm80).with_passes("function(sroa)")).unwrap();
    assert!(!o3.contains("fmul") && !o3.contains("fadd"), "{o3}");
    assert!(none.contains("fmul") && none.contains("fadd"), "{none}");
    let ptx = compile_ptx(
        &m,
        &Options::new(Arch::Sm80).with_passes("function(instcombine)"),
    );
    assert!(ptx.unwrap().ptx.contains("st.global.f32"));
}

#[test]
fn a_pipeline_llvm_does_not_parse_is_unsupported() {
    let err = compile_ptx(
        &module(),
        &Options::new(Arch::Sm80).with_passes("no-such-pass"),
    )
    .unwrap_err();
    match err {
        CompileError::Unsupported(msg) => assert!(msg.contains("no-such-pass"), "{msg}"),
        e => panic!("expected Unsupported, got {e:?}"),
    }
}

#[test]
fn every_example_at_o1_takes_the_kernel_pipeline_and_passes_ptxas() {
    // The IR at O1 is the kernel pipeline's (the same text as asked for by
    // name), and its PTX assembles: on the first declared GPU target.
    let manifest = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR")).unwrap();
    let dir = manifest.join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "zir") {
            continue;
        }
        let m = parse_module(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(&arch) = m.targets.first() else {
            continue;
        };
        if !m.functions.iter().any(|f| f.kind.is_gpu()) {
            continue;
        }
        let o1 = Options::new(arch).with_opt_level(OptLevel::O1);
        let named = o1.clone().with_passes(KERNEL_PIPELINE);
        let name = path.display();
        assert_eq!(
            emit_llvm(&m, &o1).unwrap(),
            emit_llvm(&m, &named).unwrap(),
            "{name}"
        );
        let ptx = compile_ptx(&m, &o1).unwrap().ptx;
        if let Err(e) = common::ptxas().assemble(&ptx, arch) {
            panic!("{name} at O1 for {arch}: {e}");
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} examples");
}
