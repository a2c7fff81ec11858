//! The function header: type nesting depth, parameters and returns, the
//! `alloca` total, and kernel metadata (launch bounds, registers, shared memory).

use crate::arch;
use crate::ir::{FunctionKind, KernelInfo};
use crate::op::Op;
use crate::types::Type;

use super::callgraph::{kernel_static_shared, placed_insts};
use super::diag::Ctx;
use super::types::{mentions_frag, value_type_problem, TENSORMAP_PLACE};
use super::{MAX_ALLOCA_BYTES, MAX_SHARED_BYTES, MAX_STATIC_SHARED_BYTES};

/// Every type in the function nests at most [`crate::MAX_TYPE_DEPTH`] deep;
/// checked first (without recursion) so that the other checks, which recurse
/// over types, are safe. Returns whether they all do.
pub(super) fn check_type_depths(cx: &mut Ctx) -> bool {
    let f = cx.f;
    let mut ok = true;
    for (k, t) in f.returns.iter().enumerate() {
        if let Err(m) = t.check_depth() {
            cx.func_err(format!("return type {k}: {m}"));
            ok = false;
        }
    }
    for (k, d) in f.values.iter().enumerate() {
        if let Err(m) = d.ty.check_depth() {
            cx.func_err(format!("type of v{k}: {m}"));
            ok = false;
        }
    }
    for (k, d) in f.insts.iter().enumerate() {
        if let Op::Alloca { elem, .. } | Op::SharedAlloc { elem, .. } | Op::DynShared { elem, .. } =
            &d.op
        {
            // The result is a pointer to `elem`, one level deeper.
            let d = elem.depth();
            if d >= u64::from(crate::MAX_TYPE_DEPTH) {
                cx.func_err(format!(
                    "element type of inst{k} nests {d} levels deep; a pointer to it would exceed the limit of {}",
                    crate::MAX_TYPE_DEPTH
                ));
                ok = false;
            }
        }
    }
    ok
}

/// Each `alloca` is bounded on its own (in `check_op`); their sum must fit too.
pub(super) fn check_alloca_total(cx: &mut Ctx) {
    let total = placed_insts(cx.f)
        .filter_map(|d| match &d.op {
            Op::Alloca { elem, count } => elem.size_bytes().map(|s| s.saturating_mul(*count)),
            _ => None,
        })
        .fold(0u64, u64::saturating_add);
    if total > MAX_ALLOCA_BYTES {
        cx.func_err(format!(
            "the allocas of this function take {total} bytes; at most {MAX_ALLOCA_BYTES} in all (CUDA's local memory per thread)"
        ));
    }
}

pub(super) fn check_header(cx: &mut Ctx) {
    let f = cx.f;
    for t in &f.returns {
        if *t == Type::TensorMap {
            cx.func_err(format!("return type {t}: {TENSORMAP_PLACE}"));
        } else if let Some(msg) = value_type_problem(t) {
            cx.func_err(format!("return type {t}: {msg}"));
        }
    }
    match &f.kind {
        FunctionKind::Kernel(info) => {
            if !f.returns.is_empty() {
                cx.func_err("a kernel returns nothing; write results through pointers");
            }
            check_kernel_info(cx, info);
        }
        FunctionKind::Host => {
            if f.returns.iter().any(mentions_frag) {
                cx.func_err("host functions cannot use fragment types");
            }
            // The CPU ABI returns several values through 8-byte slots.
            if f.returns.len() > 1 {
                for t in &f.returns {
                    if t.size_bytes().is_some_and(|b| b > 8) {
                        cx.func_err(format!(
                            "return type {t} is larger than 8 bytes; a host function returning several values returns each in an 8-byte slot"
                        ));
                    }
                }
            }
        }
        FunctionKind::Device => {}
    }
}

fn check_kernel_info(cx: &mut Ctx, k: &KernelInfo) {
    // issue 12: the exact block shape (`.reqntid`) obeys the same limits and
    // must fit a declared upper bound.
    if let Some([x, y, z]) = k.exact_threads {
        let n = u64::from(x) * u64::from(y) * u64::from(z);
        if n == 0 || x > 1024 || y > 1024 || z > 64 || n > 1024 {
            cx.func_err(format!(
                "exact_threads({x}, {y}, {z}): every dimension at least 1, x and y at most 1024, z at most 64, at most 1024 threads"
            ));
        } else if k.max_threads.is_some() {
            // ptxas: "Conflicting directives: .maxntid and .reqntid cannot both be specified".
            cx.func_err(format!(
                "exact_threads({x}, {y}, {z}) and max_threads cannot both be declared (the exact shape is also the bound)"
            ));
        }
    }
    // issue 13: `.reqnctapercluster`; the hardware's largest cluster is 16
    // blocks (above 8 only with the runtime's non-portable opt-in).
    if let Some([x, y, z]) = k.cluster {
        let n = u64::from(x) * u64::from(y) * u64::from(z);
        if n == 0 || n > 16 {
            cx.func_err(format!(
                "cluster({x}, {y}, {z}): every dimension at least 1 and at most 16 blocks per cluster, got {n}"
            ));
        }
    }
    if let Some([x, y, z]) = k.max_threads {
        if x == 0 || y == 0 || z == 0 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): every dimension must be at least 1"
            ));
        } else if x > 1024 || y > 1024 || z > 64 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): x and y are at most 1024 and z at most 64"
            ));
        } else if u64::from(x) * u64::from(y) * u64::from(z) > 1024 {
            cx.func_err(format!(
                "max_threads({x}, {y}, {z}): a block has at most 1024 threads, this allows {}",
                u64::from(x) * u64::from(y) * u64::from(z)
            ));
        }
    }
    if let Some(n) = k.min_blocks {
        if k.max_threads.is_none() && k.exact_threads.is_none() {
            cx.func_err("min_blocks needs max_threads or exact_threads (PTX .minnctapersm requires .maxntid or .reqntid)");
        }
        if !(1..=32).contains(&n) {
            cx.func_err(format!("min_blocks({n}) must be in 1..=32"));
        }
    }
    if let Some(n) = k.max_registers {
        if !(arch::MIN_MAX_REGISTERS..=255).contains(&n) {
            cx.func_err(format!(
                "max_registers({n}) must be in {}..=255 (ptxas raises smaller caps to {})",
                arch::MIN_MAX_REGISTERS,
                arch::MIN_MAX_REGISTERS
            ));
        }
    }
    let dynamic = u64::from(k.shared_bytes);
    if dynamic > MAX_SHARED_BYTES {
        cx.func_err(format!(
            "shared_bytes({dynamic}) exceeds the largest per-block shared memory of any target ({MAX_SHARED_BYTES} bytes)"
        ));
    }
    let static_bytes = kernel_static_shared(cx.m, cx.f);
    if static_bytes > MAX_STATIC_SHARED_BYTES {
        cx.func_err(format!(
            "static shared memory of this kernel and the device functions it calls is {static_bytes} bytes; at most {MAX_STATIC_SHARED_BYTES} (use dyn_shared for more)"
        ));
    }
    // Per-arch limits (shared memory, occupancy) are checked in `arch`, so
    // that `check_arch` covers archs the module does not list.
}
