//! Analyses the optimizer and the backends share: call graph, pointer
//! origins (for bounds checks), natural loops and streaming loads (for
//! prefetch and vectorization hints).

use std::collections::{BTreeMap, BTreeSet};
use zyntax_hir::{BlockId, Function, InstId, Module, Op, ValueDef, ValueId};

/// Direct callees of a function (names as written in `call @f`), in first-use order.
pub fn callees(f: &Function) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, i) in f.insts_in_order() {
        if let Some(Op::Call(name)) = f.insts.get(i.index()).map(|d| &d.op) {
            if !out.contains(name) {
                out.push(name.clone());
            }
        }
    }
    out
}

/// Whether `name` can reach itself through calls (directly or not).
pub fn is_recursive(m: &Module, name: &str) -> bool {
    find_cycle_from(m, name).is_some()
}

/// A call cycle through `start`, as the list of function names, if any.
pub fn find_cycle_from(m: &Module, start: &str) -> Option<Vec<String>> {
    // DFS with an explicit stack of (function, path); a revisit of `start` is a cycle.
    let mut seen = BTreeSet::new();
    let mut stack: Vec<(String, Vec<String>)> = vec![(start.to_string(), vec![start.to_string()])];
    while let Some((name, path)) = stack.pop() {
        let Some(f) = m.function(&name) else { continue };
        for c in callees(f) {
            if c == start {
                let mut p = path.clone();
                p.push(c);
                return Some(p);
            }
            if seen.insert(c.clone()) {
                let mut p = path.clone();
                p.push(c.clone());
                stack.push((c, p));
            }
        }
    }
    None
}

/// Where a pointer value points: the memory object it was derived from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// The n-th function parameter (its length is passed at call time).
    Param(u32),
    /// An `alloca` (its size is a constant).
    Alloca(InstId),
    /// A `shared_alloc` of a kernel (its size is a constant).
    Shared(InstId),
}

/// For every value, the memory object a pointer value is derived from through
/// `ptr_add`/`ptr_cast` and block parameters, when it is one object on every
/// path. Pointers loaded from memory or returned by calls have no origin (their
/// accesses cannot be checked).
pub fn pointer_origins(f: &Function) -> Vec<Option<Origin>> {
    let n = f.values.len();
    // Lattice: None = not yet seen (top), Some(Some(o)) = one origin, Some(None) = conflicting/unknown.
    let mut state: Vec<Option<Option<Origin>>> = vec![None; n];
    for (k, v) in f.params().iter().enumerate() {
        if f.value_type(*v).is_ptr() {
            state[v.index()] = Some(Some(Origin::Param(k as u32)));
        }
    }
    let meet = |a: Option<Option<Origin>>, b: Option<Option<Origin>>| match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) if x == y => Some(x),
        _ => Some(None),
    };
    let entry = f.entry();
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 64 {
        changed = false;
        rounds += 1;
        for (_, i) in f.insts_in_order() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let res = d.results.first().copied();
            let new = match &d.op {
                Op::Alloca { .. } => Some(Some(Origin::Alloca(i))),
                Op::SharedAlloc { .. } => Some(Some(Origin::Shared(i))),
                Op::PtrAdd | Op::PtrCast => d
                    .args
                    .first()
                    .and_then(|a| state.get(a.index()).copied().flatten()),
                _ => {
                    if res.is_some_and(|r| f.has_value(r) && f.value_type(r).is_ptr()) {
                        Some(None)
                    } else {
                        None
                    }
                }
            };
            if let (Some(r), Some(v)) = (res, new) {
                if r.index() < n && state[r.index()] != Some(v) {
                    let merged = meet(state[r.index()], Some(v));
                    if merged != state[r.index()] {
                        state[r.index()] = merged;
                        changed = true;
                    }
                }
            }
            for t in &d.targets {
                if Some(t.block) == entry {
                    continue;
                }
                let Some(bd) = f.blocks.get(t.block.index()) else {
                    continue;
                };
                for (p, a) in bd.params.iter().zip(&t.args) {
                    if p.index() >= n || !f.value_type(*p).is_ptr() {
                        continue;
                    }
                    // An argument not yet known stays top so loops converge optimistically.
                    let incoming = state.get(a.index()).copied().flatten();
                    let merged = meet(state[p.index()], incoming);
                    if merged != state[p.index()] {
                        state[p.index()] = merged;
                        changed = true;
                    }
                }
            }
        }
    }
    state.into_iter().map(|s| s.flatten()).collect()
}

/// A natural loop found from a back edge `latch -> header` in layout order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    pub header: BlockId,
    pub latch: BlockId,
    /// Blocks of the loop body, header included.
    pub blocks: BTreeSet<BlockId>,
    /// Header parameter index of a counted induction variable (`iv' = iv + c`
    /// on the back edge), if there is one.
    pub iv: Option<(u32, i64)>,
}

fn predecessors(f: &Function) -> BTreeMap<BlockId, Vec<BlockId>> {
    let mut preds: BTreeMap<BlockId, Vec<BlockId>> = BTreeMap::new();
    for b in &f.layout {
        if let Some(last) = f.blocks.get(b.index()).and_then(|bd| bd.insts.last()) {
            if let Some(d) = f.insts.get(last.index()) {
                for t in &d.targets {
                    preds.entry(t.block).or_default().push(*b);
                }
            }
        }
    }
    preds
}

/// Loops whose header comes before the latch in layout order (the shape the
/// builder's `begin_for` and every structured front-end produce).
pub fn loops(f: &Function) -> Vec<Loop> {
    let pos: BTreeMap<BlockId, usize> = f.layout.iter().enumerate().map(|(i, b)| (*b, i)).collect();
    let preds = predecessors(f);
    let mut out = Vec::new();
    for b in &f.layout {
        let Some(last) = f.blocks.get(b.index()).and_then(|bd| bd.insts.last()) else {
            continue;
        };
        let Some(d) = f.insts.get(last.index()) else {
            continue;
        };
        for t in &d.targets {
            let (Some(pb), Some(ph)) = (pos.get(b), pos.get(&t.block)) else {
                continue;
            };
            if ph > pb {
                continue;
            }
            // Body: everything that reaches the latch backwards without passing the header.
            let mut blocks = BTreeSet::from([t.block]);
            let mut work = vec![*b];
            while let Some(x) = work.pop() {
                if blocks.insert(x) {
                    for p in preds.get(&x).into_iter().flatten() {
                        work.push(*p);
                    }
                }
            }
            let iv = induction(f, t.block, &t.args);
            out.push(Loop {
                header: t.block,
                latch: *b,
                blocks,
                iv,
            });
        }
    }
    out
}

fn induction(f: &Function, header: BlockId, back_args: &[ValueId]) -> Option<(u32, i64)> {
    let hp = &f.blocks.get(header.index())?.params;
    for (k, (p, a)) in hp.iter().zip(back_args).enumerate() {
        let ValueDef::Result(i, _) = f.values.get(a.index())?.def else {
            continue;
        };
        let d = f.insts.get(i.index())?;
        if d.op != Op::Binary(zyntax_hir::BinOp::Add) || d.args.len() != 2 {
            continue;
        }
        let other = if d.args[0] == *p {
            d.args[1]
        } else if d.args[1] == *p {
            d.args[0]
        } else {
            continue;
        };
        if let Some(c) = const_int(f, other) {
            return Some((k as u32, c));
        }
    }
    None
}

/// The integer value of a `const`, if `v` is one.
pub fn const_int(f: &Function, v: ValueId) -> Option<i64> {
    let ValueDef::Result(i, _) = f.values.get(v.index())?.def else {
        return None;
    };
    match f.insts.get(i.index())?.op {
        Op::Const(zyntax_hir::ConstValue::Int(c)) => Some(c),
        _ => None,
    }
}

/// A load in a loop whose address walks a loop-invariant base with the
/// induction variable: `load(ptr_add(base, iv))`. Prefetching `distance`
/// elements ahead hides memory latency for such streams.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StreamingLoad {
    pub load: InstId,
    /// The `ptr_add` that forms the address.
    pub addr: InstId,
    pub header: BlockId,
    /// Elements ahead to prefetch.
    pub distance: i64,
}

/// Streaming loads of every loop (see [`StreamingLoad`]).
pub fn streaming_loads(f: &Function) -> Vec<StreamingLoad> {
    let mut out = Vec::new();
    let def_block = value_blocks(f);
    for l in loops(f) {
        let Some((k, step)) = l.iv else { continue };
        if step <= 0 {
            continue;
        }
        let Some(iv) = f
            .blocks
            .get(l.header.index())
            .and_then(|bd| bd.params.get(k as usize))
            .copied()
        else {
            continue;
        };
        for b in &l.blocks {
            let Some(bd) = f.blocks.get(b.index()) else {
                continue;
            };
            for i in &bd.insts {
                let Some(d) = f.insts.get(i.index()) else {
                    continue;
                };
                if d.op != Op::Load {
                    continue;
                }
                let Some(ValueDef::Result(ai, _)) = d
                    .args
                    .first()
                    .and_then(|a| f.values.get(a.index()))
                    .map(|v| v.def)
                else {
                    continue;
                };
                let Some(ad) = f.insts.get(ai.index()) else {
                    continue;
                };
                if ad.op != Op::PtrAdd || ad.args.len() != 2 || ad.args[1] != iv {
                    continue;
                }
                let base = ad.args[0];
                let invariant = def_block
                    .get(base.index())
                    .copied()
                    .flatten()
                    .is_some_and(|bb| !l.blocks.contains(&bb));
                if !invariant {
                    continue;
                }
                let elem = f
                    .value_type(base)
                    .pointee()
                    .and_then(|t| t.size_bytes())
                    .unwrap_or(8)
                    .max(1) as i64;
                // About 8 cache lines (512 bytes) ahead, in elements, in whole steps.
                let distance = ((512 / elem).max(step) / step) * step;
                out.push(StreamingLoad {
                    load: *i,
                    addr: ai,
                    header: l.header,
                    distance,
                });
            }
        }
    }
    out
}

/// Whether the loop at `header` carries a float value around (a reduction
/// that stays scalar: strict IEEE order forbids vectorizing it).
pub fn carries_float(f: &Function, header: BlockId) -> bool {
    f.blocks.get(header.index()).is_some_and(|bd| {
        bd.params
            .iter()
            .any(|p| f.has_value(*p) && f.value_type(*p).is_float())
    })
}

/// The block defining each value (params: their block; results: the instruction's block).
pub fn value_blocks(f: &Function) -> Vec<Option<BlockId>> {
    let mut out = vec![None; f.values.len()];
    for b in &f.layout {
        let Some(bd) = f.blocks.get(b.index()) else {
            continue;
        };
        for p in &bd.params {
            if let Some(s) = out.get_mut(p.index()) {
                *s = Some(*b);
            }
        }
        for i in &bd.insts {
            if let Some(d) = f.insts.get(i.index()) {
                for r in &d.results {
                    if let Some(s) = out.get_mut(r.index()) {
                        *s = Some(*b);
                    }
                }
            }
        }
    }
    out
}

/// The block holding each instruction.
pub fn inst_blocks(f: &Function) -> BTreeMap<InstId, BlockId> {
    f.insts_in_order().map(|(b, i)| (i, b)).collect()
}
