//! A module the verifier accepts must assemble (issue 10, item 6): every
//! example kernel, on every arch it may be compiled for, with `max_registers`
//! swept from the verifier's floor for that kernel and arch upward, compiles
//! and passes `ptxas -Werror`; one below the floor is a verify error.
//! The floors (`zyntax_hir::arch::min_max_registers`) were measured with this
//! sweep: below them ptxas reports "Insufficient registers".

mod common;

use common::ptxas;
use std::path::Path;
use zyntax_hir::*;
use zyntax_llvm::{compile_ptx, Options};

fn examples() -> Vec<(String, Module)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in ["examples", "tests/data"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "zir"))
            .collect();
        paths.sort();
        for p in paths {
            let m = parse_module(&std::fs::read_to_string(&p).unwrap()).unwrap();
            out.push((p.file_name().unwrap().to_string_lossy().into_owned(), m));
        }
    }
    out
}

/// `m` with kernel `k` capped at `n` registers and compiled for `arch` only.
fn capped(m: &Module, k: &str, n: u32, arch: Arch) -> Module {
    let mut m = m.clone();
    m.targets = vec![arch];
    m.ptx_version = None;
    for f in &mut m.functions {
        if let FunctionKind::Kernel(info) = &mut f.kind {
            info.arch = None;
            if f.name == k {
                info.max_registers = Some(n);
            }
        }
    }
    m
}

#[test]
fn every_example_kernel_assembles_at_its_register_floor_on_every_arch() {
    let mut checked = 0;
    for (file, m) in examples() {
        let kernels: Vec<String> = m.kernels().map(|f| f.name.clone()).collect();
        for k in kernels {
            for arch in Arch::ALL {
                let base = capped(&m, &k, 255, arch);
                if verify_module(&base).is_err() {
                    continue; // the kernel needs a newer arch
                }
                let f = base.function(&k).unwrap();
                let floor = arch::min_max_registers(&base, f, arch);
                // 64 too, unless the floor is above it (wgmma accumulators).
                for n in [floor, floor + 1, floor + 4, 64.max(floor)] {
                    let mm = capped(&m, &k, n, arch);
                    verify_module(&mm)
                        .unwrap_or_else(|e| panic!("{file} @{k} {arch} max_registers({n}): {e}"));
                    let out = compile_ptx(&mm, &Options::new(arch))
                        .unwrap_or_else(|e| panic!("{file} @{k} {arch} {n}: {e}"));
                    assert!(out.ptx.contains(&format!(".maxnreg {n}")), "{file} @{k}");
                    ptxas().assemble(&out.ptx, arch).unwrap_or_else(|e| {
                        panic!("{file} @{k} {arch} max_registers({n}) verifies but: {e}")
                    });
                    checked += 1;
                }
                if floor > arch::MIN_MAX_REGISTERS {
                    let e = verify_module(&capped(&m, &k, floor - 1, arch))
                        .expect_err("below the floor");
                    assert!(e.to_string().contains("max_registers"), "{e}");
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} combinations");
}
