//! Which types a value may have and which may live in memory.

use crate::ir::FunctionKind;
use crate::types::{FragKind, FragType, ScalarType, Type};

use super::diag::Ctx;
use super::structure::placed_blocks;
use super::MAX_TYPE_BYTES;

pub(super) fn check_value_types(cx: &mut Ctx) {
    let f = cx.f;
    let host = matches!(f.kind, FunctionKind::Host);
    for b in placed_blocks(cx) {
        let kernel_entry = f.is_kernel() && Some(b) == f.entry();
        for v in f.blocks[b.index()].params.clone() {
            let Some(t) = cx.ty(v).cloned() else { continue };
            if t == Type::TensorMap && !kernel_entry {
                cx.block_err(b, format!("parameter {v}: {TENSORMAP_PLACE}"));
            } else if let Some(msg) = value_type_problem(&t) {
                cx.block_err(b, format!("parameter {v}: {msg}"));
            } else if host && mentions_frag(&t) {
                cx.block_err(
                    b,
                    format!("parameter {v}: host functions cannot use fragment types"),
                );
            }
        }
        for i in f.blocks[b.index()].insts.clone() {
            let Some(d) = f.insts.get(i.index()) else {
                continue;
            };
            for v in &d.results {
                let Some(t) = cx.ty(*v).cloned() else {
                    continue;
                };
                if t == Type::TensorMap {
                    cx.inst_err(b, i, format!("result {v}: {TENSORMAP_PLACE}"));
                } else if let Some(msg) = value_type_problem(&t) {
                    cx.inst_err(b, i, format!("result {v}: {msg}"));
                } else if host && mentions_frag(&t) {
                    cx.inst_err(
                        b,
                        i,
                        format!("result {v}: host functions cannot use fragment types"),
                    );
                }
            }
        }
    }
}

/// Issue 13: a tensor map is a 128-byte `__grid_constant__` kernel parameter
/// that only the TMA instructions read.
pub(super) const TENSORMAP_PLACE: &str =
    "a tensormap may only be a kernel parameter (it is passed by value as a __grid_constant__)";

pub(super) fn mentions_frag(t: &Type) -> bool {
    match t {
        Type::Frag(_) => true,
        Type::Ptr(_, e) | Type::Array(e, _) => mentions_frag(e),
        _ => false,
    }
}

/// Why `t` cannot be the type of an SSA value, if it cannot.
pub fn value_type_problem(t: &Type) -> Option<String> {
    match t {
        Type::Scalar(_) => None,
        Type::Vector(s, n) => {
            // Longer vectors exist as values for wgmma accumulators (N/2 lanes).
            let long = *n > 8 && *n <= 128 && n.is_multiple_of(4);
            if !matches!(n, 2 | 4 | 8) && !long {
                Some(format!(
                    "vector {t} must have 2, 4 or 8 lanes (values: also 12 to 128 by 4)"
                ))
            } else if s.is_bool() {
                Some(format!("vector {t}: vectors of bool are not supported"))
            } else {
                None
            }
        }
        Type::Array(..) => Some(format!(
            "array {t} is not a value type (arrays live in memory: use a pointer to it)"
        )),
        Type::Ptr(_, pointee) => {
            memory_type_problem(pointee).map(|m| format!("pointee of {t}: {m}"))
        }
        Type::Frag(fr) => frag_problem(fr),
        // Where a tensor map may appear is checked by `tensormap_place_problem`.
        Type::TensorMap => None,
    }
}

/// Why `t` cannot live in memory (be a pointee or an allocation's element), if it cannot.
pub fn memory_type_problem(t: &Type) -> Option<String> {
    match t {
        Type::Vector(_, n) if *n > 8 => Some(format!(
            "vector {t} cannot live in memory (at most 8 lanes; extract the lanes)"
        )),
        Type::Scalar(_) | Type::Vector(..) | Type::Ptr(..) => value_type_problem(t),
        Type::Array(e, n) => {
            if *n == 0 {
                Some(format!("array {t} must have at least one element"))
            } else if let Some(m) = memory_type_problem(e) {
                Some(m)
            } else {
                match t.size_bytes() {
                    Some(s) if s <= MAX_TYPE_BYTES => None,
                    _ => Some(format!("array {t} is larger than 2^40 bytes")),
                }
            }
        }
        Type::Frag(_) => Some(format!(
            "fragment {t} cannot live in memory (use mma.store)"
        )),
        Type::TensorMap => {
            Some("a tensormap cannot live in memory (it is only a kernel parameter)".into())
        }
    }
}

pub(super) fn frag_problem(fr: &FragType) -> Option<String> {
    match fr.kind {
        FragKind::A | FragKind::B => {
            if !matches!(fr.elem, ScalarType::F16 | ScalarType::BF16) {
                return Some(format!("{fr}: A/B fragments hold f16 or bf16"));
            }
            if fr.layout.is_none() {
                return Some(format!("{fr}: A/B fragments carry a layout (row or col)"));
            }
        }
        FragKind::Acc => {
            if !matches!(fr.elem, ScalarType::F16 | ScalarType::F32) {
                return Some(format!("{fr}: accumulators hold f32 or f16"));
            }
            if fr.layout.is_some() {
                return Some(format!("{fr}: accumulators carry no layout"));
            }
        }
    }
    None
}
