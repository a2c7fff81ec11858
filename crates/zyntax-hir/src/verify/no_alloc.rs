//! `no_alloc` functions: the `alloca` stack along their deepest call chain is
//! bounded and no recursion is reachable from them.

use std::collections::HashMap;

use crate::ir::{Function, Module};
use crate::op::Op;

use super::callgraph::{callees, placed_insts, reachable_callees};
use super::diag::Ctx;
use super::structure::placed_blocks;

/// Stack that a `no_alloc` function may use through `alloca`, summed along its
/// deepest call chain; past this an allocation counts as unbounded (it could
/// overflow a thread's stack). zyntax-opt's proof uses the same budget.
pub const NO_ALLOC_STACK_LIMIT: u64 = 64 * 1024;

/// Bytes of `alloca` in one function's own frame (saturating: huge is huge).
fn own_alloca_bytes(f: &Function) -> u64 {
    placed_insts(f)
        .filter_map(|d| match &d.op {
            Op::Alloca { elem, count } => {
                Some(elem.size_bytes().unwrap_or(u64::MAX).saturating_mul(*count))
            }
            _ => None,
        })
        .fold(0u64, u64::saturating_add)
}

/// Deepest `alloca` stack from function `n` down its calls, or the call cycle
/// that makes it unbounded. Iterative, so deep call chains cannot overflow.
fn max_alloca_stack(
    m: &Module,
    index: &HashMap<&str, usize>,
    n: usize,
) -> Result<u64, Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done(u64),
    }
    let callees_of = |k: usize| -> Vec<usize> {
        callees(&m.functions[k])
            .filter_map(|c| index.get(c).copied())
            .collect()
    };
    let mut state = vec![State::New; m.functions.len()];
    // Frames: (function, its callees, next callee to visit, deepest callee stack so far).
    let mut frames: Vec<(usize, Vec<usize>, usize, u64)> = vec![(n, callees_of(n), 0, 0)];
    state[n] = State::Open;
    while let Some(&(f, ref cs, next, deepest)) = frames.last() {
        if next >= cs.len() {
            let total = own_alloca_bytes(&m.functions[f]).saturating_add(deepest);
            state[f] = State::Done(total);
            frames.pop();
            if let Some(parent) = frames.last_mut() {
                parent.3 = parent.3.max(total);
            }
            continue;
        }
        let c = cs[next];
        if let Some(top) = frames.last_mut() {
            top.2 += 1;
        }
        match state[c] {
            State::Done(s) => {
                if let Some(top) = frames.last_mut() {
                    top.3 = top.3.max(s);
                }
            }
            State::Open => {
                let mut cycle: Vec<String> = frames
                    .iter()
                    .skip_while(|e| e.0 != c)
                    .map(|e| format!("@{}", m.functions[e.0].name))
                    .collect();
                cycle.push(format!("@{}", m.functions[c].name));
                return Err(cycle);
            }
            State::New => {
                state[c] = State::Open;
                frames.push((c, callees_of(c), 0, 0));
            }
        }
    }
    match state[n] {
        State::Done(s) => Ok(s),
        _ => Ok(0),
    }
}

pub(super) fn check_no_alloc(cx: &mut Ctx) {
    let f = cx.f;
    if !f.constraints.no_alloc {
        return;
    }
    let m = cx.m;
    let index: HashMap<&str, usize> = m
        .functions
        .iter()
        .enumerate()
        .map(|(n, g)| (g.name.as_str(), n))
        .collect();
    let Some(&me) = index.get(f.name.as_str()) else {
        return;
    };
    match max_alloca_stack(m, &index, me) {
        Err(cycle) => cx.func_err(format!(
            "no_alloc function reaches recursion, which needs unbounded stack: {}",
            cycle.join(" -> ")
        )),
        Ok(total) if total > NO_ALLOC_STACK_LIMIT => {
            // Name every site: each alloca of this function, and each callee that allocates.
            for b in placed_blocks(cx) {
                for i in f.blocks[b.index()].insts.clone() {
                    if let Some(Op::Alloca { .. }) = f.insts.get(i.index()).map(|d| &d.op) {
                        cx.inst_err(
                            b,
                            i,
                            format!(
                                "alloca in a no_alloc function whose stack reaches {total} bytes \
                                 (budget {NO_ALLOC_STACK_LIMIT})"
                            ),
                        );
                    }
                }
            }
            let mut reached = reachable_callees(m, &index, me);
            reached.sort_unstable();
            reached.dedup();
            for n in reached {
                let g = &m.functions[n];
                let own = own_alloca_bytes(g);
                if n != me && own > 0 {
                    cx.func_err(format!(
                        "no_alloc function reaches @{}, which allocates {own} bytes of stack \
                         (total {total}, budget {NO_ALLOC_STACK_LIMIT})",
                        g.name
                    ));
                }
            }
        }
        Ok(_) => {}
    }
}
