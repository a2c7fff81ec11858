//! The call graph: which archs each function is compiled for, which
//! functions a function reaches through calls, and what the reached functions
//! use (static shared memory, `grid_sync`, any op).

use std::collections::HashMap;

use crate::ir::{Function, FunctionKind, InstData, Module};
use crate::op::Op;
use crate::target::Arch;

/// For each function, the archs it is compiled for: a kernel its own `arch`
/// or else the module's targets; a device function every arch the module is
/// compiled for (targets plus every kernel's `arch`), because the PTX of each
/// arch holds every device function.
pub(super) fn compile_archs(m: &Module) -> Vec<Vec<Arch>> {
    m.functions
        .iter()
        .map(|f| match f.kind {
            FunctionKind::Device => module_archs(m),
            _ => own_archs(m, f),
        })
        .collect()
}

/// Every arch the module is compiled for: its targets and the kernels' `arch`.
pub(super) fn module_archs(m: &Module) -> Vec<Arch> {
    let mut all = m.targets.clone();
    all.extend(m.kernels().filter_map(|k| k.kind.kernel_info()?.arch));
    all.sort();
    all.dedup();
    all
}

pub(super) fn own_archs(m: &Module, f: &Function) -> Vec<Arch> {
    match f.kind.kernel_info().and_then(|k| k.arch) {
        Some(a) => vec![a],
        None => {
            let mut t = m.targets.clone();
            t.sort();
            t.dedup();
            t
        }
    }
}

/// Indices of the functions reachable through calls from function `start` (excluding it unless recursive).
pub(super) fn reachable_callees(
    m: &Module,
    index: &HashMap<&str, usize>,
    start: usize,
) -> Vec<usize> {
    let mut seen = vec![false; m.functions.len()];
    let mut stack = vec![start];
    let mut out = Vec::new();
    while let Some(n) = stack.pop() {
        for callee in callees(&m.functions[n]) {
            if let Some(&c) = index.get(callee) {
                if !seen[c] {
                    seen[c] = true;
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

/// Names called by placed instructions of `f`.
pub(super) fn callees(f: &Function) -> impl Iterator<Item = &str> {
    placed_insts(f).filter_map(|d| match &d.op {
        Op::Call(name) => Some(name.as_str()),
        _ => None,
    })
}

pub(super) fn placed_insts(f: &Function) -> impl Iterator<Item = &InstData> {
    f.layout
        .iter()
        .filter_map(|b| f.blocks.get(b.index()))
        .flat_map(|bd| bd.insts.iter())
        .filter_map(|i| f.insts.get(i.index()))
}

/// Static shared memory of a kernel: its `shared_alloc`s plus those of every function it reaches.
pub(crate) fn kernel_static_shared(m: &Module, f: &Function) -> u64 {
    let (me, reached) = reached_from(m, f);
    let mut total = own_static_shared(f);
    for n in reached {
        if Some(n) != me {
            total = total.saturating_add(own_static_shared(&m.functions[n]));
        }
    }
    total
}

/// Whether kernel `f` (with `m`: or a function of `m` it calls) uses
/// `grid_sync`, so the runtime must launch it cooperatively (h13-cluster).
pub fn uses_grid_sync(m: Option<&Module>, f: &Function) -> bool {
    let is_sync = |op: &Op| matches!(op, Op::GridSync);
    match m {
        Some(m) => reaches_op(m, f, is_sync),
        None => placed_insts(f).any(|d| is_sync(&d.op)),
    }
}

/// Whether `f` or a function it reaches through calls has a placed
/// instruction satisfying `pred`.
pub(crate) fn reaches_op(m: &Module, f: &Function, pred: impl Fn(&Op) -> bool) -> bool {
    let (_, reached) = reached_from(m, f);
    std::iter::once(f)
        .chain(reached.iter().map(|&n| &m.functions[n]))
        .any(|g| placed_insts(g).any(|d| pred(&d.op)))
}

/// The largest `value` of an instruction placed in `f` or a function it reaches (0 if none).
pub(crate) fn max_over_reached(
    m: &Module,
    f: &Function,
    value: impl Fn(&Function, &InstData) -> u32,
) -> u32 {
    let (_, reached) = reached_from(m, f);
    std::iter::once(f)
        .chain(reached.iter().map(|&n| &m.functions[n]))
        .flat_map(|g| placed_insts(g).map(move |d| (g, d)))
        .map(|(g, d)| value(g, d))
        .max()
        .unwrap_or(0)
}

/// `f`'s index in the module, if it is there, and the indices of the functions it reaches.
fn reached_from(m: &Module, f: &Function) -> (Option<usize>, Vec<usize>) {
    let index: HashMap<&str, usize> = m
        .functions
        .iter()
        .enumerate()
        .map(|(n, g)| (g.name.as_str(), n))
        .collect();
    let me = m.functions.iter().position(|g| std::ptr::eq(g, f));
    let reached = match me {
        Some(n) => reachable_callees(m, &index, n),
        None => {
            // Not in the module: follow its direct callees.
            let mut out = Vec::new();
            for c in callees(f) {
                if let Some(&n) = index.get(c) {
                    out.push(n);
                    out.extend(reachable_callees(m, &index, n));
                }
            }
            out.sort_unstable();
            out.dedup();
            out
        }
    };
    (me, reached)
}

fn own_static_shared(f: &Function) -> u64 {
    placed_insts(f)
        .filter_map(|d| match &d.op {
            Op::SharedAlloc { elem, count, .. } => {
                elem.size_bytes().map(|s| s.saturating_mul(*count))
            }
            _ => None,
        })
        .fold(0u64, u64::saturating_add)
}
