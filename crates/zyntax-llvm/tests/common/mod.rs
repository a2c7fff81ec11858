//! Shared helpers of the integration tests: building small modules, compiling
//! them for every arch and checking the PTX with ptxas (which must be present:
//! a missing ptxas fails the tests, it never skips them).
#![allow(dead_code)]

use std::sync::OnceLock;
use zyntax_hir::{Arch, Function, Module};
use zyntax_llvm::{compile_ptx, CompileOutput, Options, Ptxas};

pub fn ptxas() -> &'static Ptxas {
    static P: OnceLock<Ptxas> = OnceLock::new();
    P.get_or_init(|| match Ptxas::locate() {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    })
}

pub fn module(name: &str, functions: Vec<Function>) -> Module {
    let mut m = Module::new(name);
    m.functions = functions;
    m
}

pub fn compile(m: &Module, arch: Arch) -> CompileOutput {
    match compile_ptx(m, &Options::new(arch)) {
        Ok(o) => o,
        Err(e) => panic!(
            "{} for {arch}: {e}\n{}",
            m.name,
            zyntax_hir::print_module(m)
        ),
    }
}

/// Compile for `arch` and assemble with `ptxas -Werror`; returns the PTX.
pub fn compile_checked(m: &Module, arch: Arch) -> String {
    let out = compile(m, arch);
    if let Err(e) = ptxas().assemble(&out.ptx, arch) {
        panic!("{} for {arch}: {e}\n--- PTX ---\n{}", m.name, out.ptx);
    }
    out.ptx
}

/// Archs at or above `min`.
pub fn archs_from(min: Arch) -> Vec<Arch> {
    Arch::ALL.iter().copied().filter(|a| *a >= min).collect()
}

/// Compile + ptxas for every arch from `min`; returns (arch, PTX) pairs.
pub fn check_archs(m: &Module, min: Arch) -> Vec<(Arch, String)> {
    archs_from(min)
        .into_iter()
        .map(|a| (a, compile_checked(m, a)))
        .collect()
}

/// FileCheck-style: every needle appears, in order.
pub fn assert_in_order(ptx: &str, needles: &[&str]) {
    let mut rest = ptx;
    for n in needles {
        match rest.find(n) {
            Some(i) => rest = &rest[i + n.len()..],
            None => panic!("expected `{n}` (in order) in PTX:\n{ptx}"),
        }
    }
}

pub fn assert_not(ptx: &str, needle: &str) {
    assert!(
        !ptx.contains(needle),
        "unexpected `{needle}` in PTX:\n{ptx}"
    );
}
