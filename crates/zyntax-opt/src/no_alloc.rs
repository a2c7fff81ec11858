//! The `no_alloc` proof: every allocation reachable from a function is found
//! and reported; nothing is ever deleted to make the proof pass.
//!
//! HIR has no heap: the only allocations are `alloca` (per-call stack) and
//! calls. A function is allocation-free when
//! - every `alloca` it can reach is small (at most [`STACK_LIMIT`] bytes per
//!   frame along the deepest call chain) — HIR `alloca` sizes are constants,
//!   so a "dynamic" alloca cannot exist;
//! - every callee is defined in the module (an external function may allocate);
//! - no call cycle is reachable (recursion needs unbounded stack).

use crate::analysis::{callees, find_cycle_from};
use serde::Serialize;
use std::collections::BTreeMap;
use zyntax_hir::{Function, Module, Op};

/// Largest stack a `no_alloc` function may use through `alloca`, summed along
/// its deepest call chain. Beyond this an allocation is "huge": it could
/// overflow a thread's stack (8 MiB main, 2 MiB for Rust threads).
pub const STACK_LIMIT: u64 = 64 * 1024;

/// One allocation found by the proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllocSite {
    /// Function holding the site (may be a callee of the constrained function).
    pub function: String,
    pub block: Option<String>,
    pub inst: Option<String>,
    /// `file:line:col` when the instruction carries a location.
    pub loc: Option<String>,
    pub reason: String,
}

impl std::fmt::Display for AllocSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(l) = &self.loc {
            write!(f, "{l}: ")?;
        }
        write!(f, "@{}", self.function)?;
        if let Some(b) = &self.block {
            write!(f, ", {b}")?;
        }
        if let Some(i) = &self.inst {
            write!(f, ", `{i}`")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Stack bytes of a function's own allocas.
pub fn frame_bytes(f: &Function) -> u64 {
    let mut total: u64 = 0;
    for (_, i) in f.insts_in_order() {
        if let Some(Op::Alloca { elem, count }) = f.insts.get(i.index()).map(|d| &d.op) {
            let bytes = elem
                .size_bytes()
                .and_then(|s| s.checked_mul(*count))
                .unwrap_or(u64::MAX);
            total = total.saturating_add(bytes);
        }
    }
    total
}

/// Deepest stack (own allocas plus the deepest callee chain), `None` when a
/// cycle or an undefined callee makes it unbounded.
fn max_stack(
    m: &Module,
    name: &str,
    memo: &mut BTreeMap<String, Option<u64>>,
    depth: u32,
) -> Option<u64> {
    if let Some(v) = memo.get(name) {
        return *v;
    }
    if depth > 256 {
        return None;
    }
    let f = m.function(name)?;
    memo.insert(name.to_string(), None); // cycle guard
    let mut deepest = 0u64;
    for c in callees(f) {
        let s = max_stack(m, &c, memo, depth + 1)?;
        deepest = deepest.max(s);
    }
    let v = Some(frame_bytes(f).saturating_add(deepest));
    memo.insert(name.to_string(), v);
    v
}

/// Every allocation reachable from `f` (empty: proved allocation-free).
pub fn allocation_sites(m: &Module, f: &Function) -> Vec<AllocSite> {
    let mut sites = Vec::new();
    // Walk every function reachable from f once.
    let mut seen = vec![f.name.clone()];
    let mut work = vec![f.name.clone()];
    while let Some(name) = work.pop() {
        let Some(g) = m.function(&name) else { continue };
        // Recursion anywhere below f makes its stack depth unbounded.
        if let Some(cycle) = find_cycle_from(m, &g.name) {
            sites.push(AllocSite {
                function: g.name.clone(),
                block: None,
                inst: None,
                loc: g.loc.as_ref().map(|l| l.to_string()),
                reason: format!(
                    "recursion needs unbounded stack: call cycle {}",
                    cycle
                        .iter()
                        .map(|n| format!("@{n}"))
                        .collect::<Vec<_>>()
                        .join(" -> ")
                ),
            });
        }
        for (b, i) in g.insts_in_order() {
            let Some(d) = g.insts.get(i.index()) else {
                continue;
            };
            let site = |reason: String| AllocSite {
                function: g.name.clone(),
                block: Some(b.to_string()),
                inst: Some(zyntax_hir::print_inst(g, i)),
                loc: d.loc.as_ref().map(|l| l.to_string()),
                reason,
            };
            match &d.op {
                Op::Alloca { elem, count } => {
                    let bytes = elem.size_bytes().and_then(|s| s.checked_mul(*count));
                    match bytes {
                        Some(n) if n <= STACK_LIMIT => {}
                        Some(n) => sites.push(site(format!(
                            "alloca of {n} bytes exceeds the {STACK_LIMIT}-byte stack budget of a no_alloc function"
                        ))),
                        None => sites.push(site("alloca whose size overflows".into())),
                    }
                }
                Op::Call(c) => {
                    if m.function(c).is_none() {
                        sites.push(site(format!(
                            "call to @{c}, which is not defined in the module: it may allocate"
                        )));
                    } else if !seen.contains(c) {
                        seen.push(c.clone());
                        work.push(c.clone());
                    }
                }
                _ => {}
            }
        }
    }
    // Many small allocas along a deep chain can add up to a huge stack.
    if sites.is_empty() {
        let mut memo = BTreeMap::new();
        if let Some(total) = max_stack(m, &f.name, &mut memo, 0) {
            if total > STACK_LIMIT {
                sites.push(AllocSite {
                    function: f.name.clone(),
                    block: None,
                    inst: None,
                    loc: f.loc.as_ref().map(|l| l.to_string()),
                    reason: format!(
                        "allocas along the deepest call chain total {total} bytes, over the {STACK_LIMIT}-byte budget"
                    ),
                });
            }
        }
    }
    sites
}
