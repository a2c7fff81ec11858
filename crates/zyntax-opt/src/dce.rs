//! Dead-code elimination on HIR: removes instructions without side effects
//! whose results are never used.

use zyntax_hir::{Function, Op};

/// Remove dead instructions; returns how many were removed.
pub fn dce(f: &mut Function) -> usize {
    let mut removed = 0;
    loop {
        let mut used = vec![false; f.values.len()];
        for (_, i) in f.insts_in_order() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            for v in d
                .args
                .iter()
                .chain(d.targets.iter().flat_map(|t| t.args.iter()))
            {
                if let Some(u) = used.get_mut(v.index()) {
                    *u = true;
                }
            }
        }
        let mut round = 0;
        for b in f.layout.clone() {
            let Some(bd) = f.blocks.get(b.index()) else {
                continue;
            };
            let keep: Vec<_> = bd
                .insts
                .iter()
                .copied()
                .filter(|i| {
                    let Some(d) = f.insts.get(i.index()) else {
                        return true;
                    };
                    // Loads stay: with bounds checks they may report an error.
                    let pure =
                        !d.op.has_side_effects() && d.op != Op::Load && !d.results.is_empty();
                    let dead = d
                        .results
                        .iter()
                        .all(|r| !used.get(r.index()).copied().unwrap_or(true));
                    !(pure && dead)
                })
                .collect();
            round += bd.insts.len() - keep.len();
            f.blocks[b.index()].insts = keep;
        }
        if round == 0 {
            break;
        }
        removed += round;
    }
    removed
}
