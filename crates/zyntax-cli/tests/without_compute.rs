//! The command built without the `compute` feature: the CPU backend works and
//! the GPU backends are refused with one line naming the missing feature.
#![cfg(not(feature = "compute"))]

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

#[test]
fn gpu_backends_name_the_missing_feature() {
    for backend in ["nvptx", "cuda"] {
        let o = Command::new(env!("CARGO_BIN_EXE_zyntax"))
            .args(["compile", "--backend", backend])
            .arg(example("saxpy.zir"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{backend}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("--backend {backend}")) && err.contains("`compute` feature"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn cpu_backend_still_compiles() {
    let o = Command::new(env!("CARGO_BIN_EXE_zyntax"))
        .args(["compile", "--backend", "llvm"])
        .arg(example("critical_host.zir"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("define"));
}

/// LLVM's NVPTX code generator is not linked: the static initializers of its
/// translation units (local symbols, kept in the unstripped test build's
/// symbol table) are absent, while the X86 backend's are present.
#[test]
fn binary_carries_no_nvptx_code_generator() {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_zyntax")).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("_GLOBAL__sub_I_X86TargetMachine.cpp"));
    assert!(!text.contains("_GLOBAL__sub_I_NVPTXAsmPrinter.cpp"));
    assert!(!text.contains("_GLOBAL__sub_I_NVPTXTargetMachine.cpp"));
}
