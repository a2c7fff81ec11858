//! SSA dominance: every use is dominated by its definition
//! (Cooper–Harvey–Kennedy dominators over the reachable blocks).

use super::diag::Ctx;
use super::structure::placed_blocks;

pub(super) fn check_dominance(cx: &mut Ctx) {
    let f = cx.f;
    let blocks = placed_blocks(cx);
    let nb = f.blocks.len();
    let Some(&entry) = blocks.first() else {
        return;
    };
    if f.entry() != Some(entry) {
        // The first layout entry is invalid; structure errors already reported.
        return;
    }
    // Successors of each placed block.
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &b in &blocks {
        if let Some(d) = f.blocks[b.index()]
            .insts
            .last()
            .and_then(|i| f.insts.get(i.index()))
        {
            for t in &d.targets {
                if cx
                    .layout_pos
                    .get(t.block.index())
                    .copied()
                    .flatten()
                    .is_some()
                {
                    succs[b.index()].push(t.block.index());
                }
            }
        }
    }
    // Reverse postorder from the entry (iterative DFS).
    let mut rpo_num = vec![usize::MAX; nb];
    let mut postorder = Vec::new();
    let mut visited = vec![false; nb];
    let mut stack: Vec<(usize, usize)> = vec![(entry.index(), 0)];
    visited[entry.index()] = true;
    while let Some(top) = stack.last_mut() {
        let (node, next) = *top;
        if next < succs[node].len() {
            top.1 += 1;
            let s = succs[node][next];
            if !visited[s] {
                visited[s] = true;
                stack.push((s, 0));
            }
        } else {
            postorder.push(node);
            stack.pop();
        }
    }
    let rpo: Vec<usize> = postorder.iter().rev().copied().collect();
    for (n, &blk) in rpo.iter().enumerate() {
        rpo_num[blk] = n;
    }
    // A parameter needs an incoming value: LLVM rejects a phi with no entries.
    let mut has_pred = vec![false; nb];
    for &b in &blocks {
        for &s in &succs[b.index()] {
            has_pred[s] = true;
        }
    }
    for &b in blocks.iter().skip(1) {
        if !has_pred[b.index()] && !f.blocks[b.index()].params.is_empty() {
            cx.block_err(
                b,
                format!("{b} has parameters but no branch targets it; remove the parameters"),
            );
        }
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &blk in &rpo {
        for &s in &succs[blk] {
            preds[s].push(blk);
        }
    }
    // Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm".
    let mut idom = vec![usize::MAX; nb];
    idom[entry.index()] = entry.index();
    let mut changed = true;
    while changed {
        changed = false;
        for &blk in rpo.iter().skip(1) {
            let mut new_idom = usize::MAX;
            for &p in &preds[blk] {
                if idom[p] == usize::MAX {
                    continue;
                }
                new_idom = if new_idom == usize::MAX {
                    p
                } else {
                    intersect(&idom, &rpo_num, p, new_idom)
                };
            }
            if new_idom != usize::MAX && idom[blk] != new_idom {
                idom[blk] = new_idom;
                changed = true;
            }
        }
    }
    // Number the dominator tree (pre/post order) so each query is O(1):
    // a dominates b iff b's interval lies inside a's.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for &blk in rpo.iter().skip(1) {
        if idom[blk] != usize::MAX {
            children[idom[blk]].push(blk);
        }
    }
    let (mut pre, mut post) = (vec![0usize; nb], vec![0usize; nb]);
    let mut clock = 0usize;
    let mut walk: Vec<(usize, usize)> = vec![(entry.index(), 0)];
    pre[entry.index()] = clock;
    while let Some(top) = walk.last_mut() {
        let (node, next) = *top;
        if let Some(&c) = children[node].get(next) {
            top.1 += 1;
            clock += 1;
            pre[c] = clock;
            walk.push((c, 0));
        } else {
            clock += 1;
            post[node] = clock;
            walk.pop();
        }
    }
    let dominates = |a: usize, b: usize| pre[a] <= pre[b] && post[b] <= post[a];
    for &b in &blocks {
        let reachable = visited[b.index()];
        for (k, i) in f.blocks[b.index()].insts.clone().into_iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let uses = d
                .args
                .iter()
                .chain(d.targets.iter().flat_map(|t| t.args.iter()));
            let mut problems = Vec::new();
            for &v in uses {
                if !f.has_value(v) {
                    continue; // reported by check_inst
                }
                let Some((db, dpos)) = cx.def_site[v.index()] else {
                    problems.push(format!(
                        "uses {v}, which no placed block parameter or instruction defines"
                    ));
                    continue;
                };
                let upos = k + 1;
                let ok = if db == b {
                    dpos < upos
                } else if reachable {
                    visited[db.index()] && dominates(db.index(), b.index())
                } else {
                    db == entry
                };
                if !ok {
                    let why = if db == b {
                        format!("{v} is used before it is defined")
                    } else if reachable {
                        format!("the definition of {v} in {db} does not dominate this use")
                    } else {
                        format!(
                            "{b} is unreachable from the entry, so it may only use values defined in itself or the entry block; {v} is defined in {db}"
                        )
                    };
                    problems.push(why);
                }
            }
            if !problems.is_empty() {
                cx.inst_err(b, i, problems.join("; "));
            }
        }
    }
}

fn intersect(idom: &[usize], rpo_num: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while rpo_num[a] > rpo_num[b] {
            a = idom[a];
        }
        while rpo_num[b] > rpo_num[a] {
            b = idom[b];
        }
    }
    a
}
