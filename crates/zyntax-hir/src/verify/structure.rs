//! Structure: the layout, where every value is defined, the entry block,
//! and the blocks' terminators.

use crate::entities::{BlockId, InstId, ValueId};
use crate::ir::{FunctionKind, ValueDef};
use crate::types::{AddrSpace, Type};

use super::diag::Ctx;
use super::types::mentions_frag;
use super::MAX_KERNEL_PARAM_BYTES;

pub(super) fn check_layout(cx: &mut Ctx) {
    let f = cx.f;
    cx.layout_pos = vec![None; f.blocks.len()];
    for (n, b) in f.layout.iter().enumerate() {
        if !f.has_block(*b) {
            cx.func_err(format!(
                "layout entry {n} names {b}, which does not exist ({} blocks)",
                f.blocks.len()
            ));
        } else if cx.layout_pos[b.index()].is_some() {
            cx.block_err(*b, format!("{b} appears more than once in the layout"));
        } else {
            cx.layout_pos[b.index()] = Some(n);
        }
    }
}

/// Placed blocks in layout order (each once, existing).
pub(super) fn placed_blocks(cx: &Ctx) -> Vec<BlockId> {
    cx.f.layout
        .iter()
        .enumerate()
        .filter(|(n, b)| cx.layout_pos.get(b.index()).copied().flatten() == Some(*n))
        .map(|(_, b)| *b)
        .collect()
}

pub(super) fn check_defs(cx: &mut Ctx) {
    let f = cx.f;
    cx.def_site = vec![None; f.values.len()];
    let mut inst_site: Vec<Option<BlockId>> = vec![None; f.insts.len()];
    for b in placed_blocks(cx) {
        let bd = &f.blocks[b.index()];
        for (n, v) in bd.params.iter().enumerate() {
            let Some(vd) = f.values.get(v.index()) else {
                cx.block_err(
                    b,
                    format!(
                        "parameter {n} is {v}, which does not exist ({} values)",
                        f.values.len()
                    ),
                );
                continue;
            };
            if cx.def_site[v.index()].is_some() {
                cx.block_err(b, format!("{v} is defined more than once"));
                continue;
            }
            cx.def_site[v.index()] = Some((b, 0));
            if vd.def != ValueDef::Param(b, n as u32) {
                cx.block_err(
                    b,
                    format!(
                        "{v} is parameter {n} of {b} but its definition says {}",
                        def_text(vd.def)
                    ),
                );
            }
        }
        for (k, i) in bd.insts.iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                cx.block_err(
                    b,
                    format!(
                        "position {k} holds {i}, which does not exist ({} instructions)",
                        f.insts.len()
                    ),
                );
                continue;
            };
            if let Some(other) = inst_site[i.index()] {
                cx.inst_err(
                    b,
                    *i,
                    format!("{i} is placed more than once (also in {other})"),
                );
                continue;
            }
            inst_site[i.index()] = Some(b);
            for (n, v) in d.results.iter().enumerate() {
                let Some(vd) = f.values.get(v.index()) else {
                    cx.inst_err(
                        b,
                        *i,
                        format!(
                            "result {n} is {v}, which does not exist ({} values)",
                            f.values.len()
                        ),
                    );
                    continue;
                };
                if cx.def_site[v.index()].is_some() {
                    cx.inst_err(b, *i, format!("{v} is defined more than once"));
                    continue;
                }
                cx.def_site[v.index()] = Some((b, k + 1));
                if vd.def != ValueDef::Result(*i, n as u32) {
                    cx.inst_err(
                        b,
                        *i,
                        format!(
                            "{v} is result {n} of {i} but its definition says {}",
                            def_text(vd.def)
                        ),
                    );
                }
            }
        }
    }
    check_nothing_unplaced(cx, &inst_site);
}

/// Every block is in the layout, every instruction in a placed block and
/// every value defined by one: the `.zir` text prints only what the layout
/// reaches, and the entry block is `layout[0]`, so anything left outside
/// would be dropped by a print/parse round trip (a layout that omits block0
/// silently turned a kernel's parameters into none).
fn check_nothing_unplaced(cx: &mut Ctx, inst_site: &[Option<BlockId>]) {
    let f = cx.f;
    fn listed(ids: &[String]) -> String {
        const SHOWN: usize = 4;
        let mut s = ids[..ids.len().min(SHOWN)].join(", ");
        if ids.len() > SHOWN {
            s.push_str(&format!(" and {} more", ids.len() - SHOWN));
        }
        s
    }
    let blocks: Vec<String> = (0..f.blocks.len())
        .filter(|&k| cx.layout_pos.get(k).copied().flatten().is_none())
        .map(|k| BlockId::from_index(k).to_string())
        .collect();
    if !blocks.is_empty() {
        cx.func_err(format!(
            "{} not in the layout (of {} blocks): every block must be placed, \
             since the entry block is the layout's first and printing drops what it omits",
            listed(&blocks),
            f.blocks.len()
        ));
    }
    let insts: Vec<String> = (0..f.insts.len())
        .filter(|&k| inst_site[k].is_none())
        .map(|k| InstId::from_index(k).to_string())
        .collect();
    if !insts.is_empty() {
        cx.func_err(format!(
            "{} not placed in any block of the layout (of {} instructions)",
            listed(&insts),
            f.insts.len()
        ));
    }
    let values: Vec<String> = (0..f.values.len())
        .filter(|&k| cx.def_site[k].is_none())
        .map(|k| ValueId::from_index(k).to_string())
        .collect();
    if !values.is_empty() {
        cx.func_err(format!(
            "{} defined by no placed block or instruction (of {} values)",
            listed(&values),
            f.values.len()
        ));
    }
}

fn def_text(d: ValueDef) -> String {
    match d {
        ValueDef::Param(b, n) => format!("parameter {n} of {b}"),
        ValueDef::Result(i, n) => format!("result {n} of {i}"),
    }
}

pub(super) fn check_entry(cx: &mut Ctx) {
    let f = cx.f;
    let Some(entry) = f.entry().filter(|b| f.has_block(*b)) else {
        return;
    };
    let params = f.blocks[entry.index()].params.clone();
    if f.is_kernel() {
        let bytes: u64 = params
            .iter()
            .filter_map(|v| {
                cx.ty(*v).and_then(|t| match t {
                    Type::TensorMap => Some(crate::tensormap::TENSORMAP_BYTES as u64),
                    t => t.size_bytes(),
                })
            })
            .fold(0, u64::saturating_add);
        if bytes > MAX_KERNEL_PARAM_BYTES {
            cx.block_err(
                entry,
                format!(
                    "kernel parameters take {bytes} bytes; PTX allows at most {MAX_KERNEL_PARAM_BYTES} (pass a pointer to a struct in memory)"
                ),
            );
        }
    }
    for v in params {
        let Some(t) = cx.ty(v).cloned() else { continue };
        match &f.kind {
            FunctionKind::Kernel(_) => {
                let ok = match &t {
                    Type::Scalar(_) | Type::Vector(..) | Type::TensorMap => true,
                    Type::Ptr(space, _) => matches!(
                        space,
                        AddrSpace::Global | AddrSpace::Generic | AddrSpace::Constant
                    ),
                    _ => false,
                };
                if !ok {
                    cx.block_err(
                        entry,
                        format!(
                            "kernel parameter {v} has type {t}; kernel parameters are scalars, vectors, tensormaps or pointers to global, generic or constant memory"
                        ),
                    );
                }
            }
            FunctionKind::Host => {
                if mentions_frag(&t) {
                    cx.block_err(
                        entry,
                        format!("parameter {v}: host functions cannot use fragment types"),
                    );
                }
            }
            FunctionKind::Device => {}
        }
    }
}

pub(super) fn check_blocks(cx: &mut Ctx) {
    let f = cx.f;
    for b in placed_blocks(cx) {
        let insts = &f.blocks[b.index()].insts;
        if insts.is_empty() {
            cx.block_err(b, format!("{b} is empty; every block ends in a terminator"));
            continue;
        }
        let last = insts.len() - 1;
        for (k, i) in insts.iter().enumerate() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            let term = d.op.is_terminator();
            if k < last && term {
                cx.inst_err(
                    b,
                    *i,
                    format!(
                        "terminator `{}` in the middle of {b}; only the last instruction may be a terminator",
                        d.op.mnemonic()
                    ),
                );
            } else if k == last && !term {
                cx.inst_err(
                    b,
                    *i,
                    format!(
                        "{b} ends with `{}`, which is not a terminator (jump, br, return or unreachable)",
                        d.op.mnemonic()
                    ),
                );
            }
        }
    }
}
