//! CPU names and feature strings are validated against LLVM's tables before a
//! target machine exists: unknown or ABI-breaking ones are a `HostError::Target`
//! naming them, never an LLVM warning on stderr or an abort (issue 10, item 3).

use zyntax_hir::*;
use zyntax_llvm::host::{self, Arg, Emit, HostError, HostOptions, Scalar};

fn module() -> Module {
    parse_module(
        r#"module "m"
host @f -> f32 {
block0(v0: f32, v1: f64):
    v2: f32 = cast v1
    v3: f32 = add v0, v2
    return v3
}
"#,
    )
    .unwrap()
}

fn opts(cpu: Option<&str>, features: Option<&str>) -> HostOptions {
    HostOptions {
        cpu: cpu.map(str::to_string),
        features: features.map(str::to_string),
        ..HostOptions::default()
    }
}

fn target_error(cpu: Option<&str>, features: Option<&str>) -> String {
    let m = module();
    let o = opts(cpu, features);
    let e = host::jit(&m, &o).err().expect("must be rejected");
    assert!(matches!(e, HostError::Target(_)), "jit: {e}");
    let e2 = host::emit(&m, &o, Emit::Asm).err().expect("emit too");
    assert!(matches!(e2, HostError::Target(_)), "emit: {e2}");
    e.to_string()
}

#[test]
fn unknown_cpus_and_features_are_named() {
    let e = target_error(Some("not-a-cpu"), None);
    assert!(e.contains("unknown CPU `not-a-cpu`"), "{e}");
    let e = target_error(Some("not-a-cpu"), Some("+nonsense"));
    assert!(e.contains("not-a-cpu"), "{e}");
    let e = target_error(None, Some("+avx2,+nonsense"));
    assert!(e.contains("unknown CPU feature `+nonsense`"), "{e}");
    let e = target_error(Some("generic"), Some("sse4.2x"));
    assert!(e.contains("`sse4.2x`"), "{e}");
}

#[test]
fn abi_breaking_features_and_32_bit_cpus_are_refused() {
    // Each of these made LLVM abort the process (or emit 32-bit code).
    for f in ["-64bit-mode", "+32bit-mode", "+16bit-mode", "+soft-float"] {
        let e = target_error(Some("generic"), Some(f));
        assert!(e.contains("changes the x86-64 ABI"), "{f}: {e}");
    }
    for f in ["-sse2", "-sse", "-64bit", "+avx,-sse"] {
        let e = target_error(Some("x86-64"), Some(f));
        assert!(e.contains("x86-64 ABI needs"), "{f}: {e}");
    }
}

#[test]
fn valid_cpus_and_features_compile_and_run() {
    let m = module();
    for (cpu, f) in [
        (Some("generic"), None),
        (Some("x86-64"), Some("+sse4.2,-avx")),
        (Some("x86-64-v3"), Some("")),
        (Some("skylake"), Some("-avx512f,+fma")),
        (None, None),
    ] {
        let jit = host::jit(&m, &opts(cpu, f)).unwrap_or_else(|e| panic!("{cpu:?} {f:?}: {e}"));
        let x = 1.0 + (std::process::id() % 97) as f64 / 8.0;
        let out = jit
            .call(
                "f",
                &mut [
                    Arg::Scalar(Scalar::Float(x)),
                    Arg::Scalar(Scalar::Float(0.25)),
                ],
            )
            .unwrap();
        assert_eq!(out, vec![Scalar::Float((x as f32 + 0.25) as f64)]);
    }
}
