//! Module-wide rules: the module header (`ptx_version`, unique function
//! names), module globals, and which names a function may take.

use std::collections::HashMap;

use crate::arch;
use crate::error::Diagnostic;
use crate::ir::Module;
use crate::types::{AddrSpace, Type};

use super::callgraph::module_archs;
use super::diag::fn_diag;
use super::op_rules::check_const;

pub(super) fn check_module_header(m: &Module, diags: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for f in &m.functions {
        if let Some(msg) = name_problem(&f.name) {
            diags.push(fn_diag(f, msg));
        }
        let count = seen.entry(f.name.as_str()).or_insert(0);
        *count += 1;
        if *count == 2 {
            diags.push(fn_diag(
                f,
                format!("function name @{} is defined more than once", f.name),
            ));
        }
    }
    check_globals(m, diags);
    if let Some(v) = m.ptx_version {
        if !arch::ptx_supported(v) {
            diags.push(arch::module_diag(format!(
                "ptx({v}) is not a PTX version LLVM 19 can emit (6.0-6.5, 7.0-7.8, 8.0-8.5)"
            )));
        }
        for a in module_archs(m) {
            arch::check_ptx_for(m, a, diags);
        }
    }
}

/// Constant memory of a module (`__constant__` bank 0): 64 KiB.
pub const MAX_CONSTANT_BYTES: u64 = 64 * 1024;
/// The largest module global (`__device__` arrays beyond this belong in allocations).
pub const MAX_GLOBAL_BYTES: u64 = 1 << 30;

/// Module globals: identifier names unique among globals and functions, a
/// numeric scalar or vector element, a count of at least one, an initializer
/// of exactly one literal per lane (or none), and at most 64 KiB of constants.
fn check_globals(m: &Module, diags: &mut Vec<Diagnostic>) {
    let mut constant_bytes = 0u64;
    for (n, g) in m.globals.iter().enumerate() {
        let mut bad =
            |msg: String| diags.push(arch::module_diag(format!("global @{}: {msg}", g.name)));
        if let Some(msg) = name_problem(&g.name) {
            bad(msg.replace("function name", "name"));
        }
        if m.globals[..n].iter().any(|o| o.name == g.name) {
            bad("defined more than once".into());
        }
        if m.function(&g.name).is_some() {
            bad("has the name of a function of the module".into());
        }
        if !matches!(g.space, AddrSpace::Constant | AddrSpace::Global) {
            bad(format!(
                "lives in `constant` or `global`, not `{}`",
                g.space
            ));
        }
        let lane = match &g.elem {
            Type::Scalar(s) | Type::Vector(s, _) if !s.is_bool() => *s,
            other => {
                bad(format!(
                    "element type {other} is not a numeric scalar or vector"
                ));
                continue;
            }
        };
        if g.count == 0 {
            bad("has no elements (count 0)".into());
        }
        let Some(bytes) = g.size_bytes().filter(|b| *b <= MAX_GLOBAL_BYTES) else {
            bad(format!("{} elements of {} is too large", g.count, g.elem));
            continue;
        };
        if g.space == AddrSpace::Constant {
            constant_bytes += bytes;
        }
        if !g.init.is_empty() && g.init.len() as u64 != g.lanes() {
            bad(format!(
                "initializer has {} literals, but {} x {} has {} lanes",
                g.init.len(),
                g.count,
                g.elem,
                g.lanes()
            ));
        }
        if let Some(e) = g
            .init
            .iter()
            .find_map(|c| check_const(*c, &Type::Scalar(lane)).err())
        {
            bad(format!("initializer: {e}"));
        }
    }
    if constant_bytes > MAX_CONSTANT_BYTES {
        diags.push(arch::module_diag(format!(
            "constant globals take {constant_bytes} bytes, more than the {MAX_CONSTANT_BYTES} of constant memory"
        )));
    }
}

/// Symbols the backends call implicitly (LLVM lowers memory intrinsics and
/// math to them, the CUDA runtime provides `vprintf`/`malloc`); a function of
/// that name would silently replace them.
const RESERVED_NAMES: &[&str] = &[
    "main", "memcpy", "memmove", "memset", "memcmp", "malloc", "free", "calloc", "realloc",
    "abort", "exit", "printf", "vprintf", "puts", "sqrt", "sqrtf", "exp", "expf", "exp2", "exp2f",
    "log", "logf", "log2", "log2f", "sin", "sinf", "cos", "cosf", "tanh", "tanhf", "floor",
    "floorf", "ceil", "ceilf", "fma", "fmaf", "fmin", "fminf", "fmax", "fmaxf", "fabs", "fabsf",
    "pow", "powf", "fmod", "fmodf",
];

fn name_problem(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let ok_first = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok_first || !ok_rest || name == "_" {
        return Some(format!(
            "function name {name:?} is not an identifier ([A-Za-z_][A-Za-z0-9_]*, not `_` alone)"
        ));
    }
    if name.len() > 1024 {
        return Some("function name is longer than 1024 bytes".into());
    }
    if name.starts_with("__") {
        return Some(format!(
            "function name @{name} is reserved (names starting with `__` belong to the C runtime and libdevice)"
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return Some(format!(
            "function name @{name} is reserved: the backends call the C runtime or libm function of that name"
        ));
    }
    None
}
