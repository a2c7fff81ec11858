//! Operand rules of particular ops that `check_op` delegates: `wgmma`, named
//! barriers, bulk reductions, ordered accesses, constants, allocations and
//! atomics.

use crate::ir::Function;
use crate::op::{AtomicOp, BulkRedOp, ConstValue};
use crate::types::{AddrSpace, ScalarType, Type};

use super::inst::{same, scalar, want_u32, Check};
use super::types::memory_type_problem;

/// Operand types of `wgmma.mma_async` (issue 13 item 1).
pub(super) fn check_wgmma(w: crate::op::Wgmma, a: &[&Type], r: &[&Type]) -> Check {
    use crate::op::MmaElem as E;
    let name = w.to_string();
    let pair_ok = match (w.a, w.b) {
        (E::E4m3 | E::E5m2, E::E4m3 | E::E5m2) | (E::S8 | E::U8, E::S8 | E::U8) => true,
        (E::F64, _) => false,
        (x, y) => x == y,
    };
    if !pair_ok {
        return Err(format!(
            "{name}: wgmma takes f16, bf16, tf32, e4m3/e5m2 or s8/u8 inputs (A and B alike), got {} and {}",
            w.a, w.b
        ));
    }
    if !w.n_allowed() {
        let steps = if matches!(w.a, E::S8 | E::U8) {
            "8, 16, 24, then 32 to 256 by 16"
        } else {
            "8 to 256 by 8"
        };
        return Err(format!(
            "{name}: N = {} is not a wgmma shape for {} (N is {steps})",
            w.n, w.a
        ));
    }
    let b16 = matches!(w.a, E::F16 | E::Bf16);
    if (w.trans_a || w.trans_b) && !b16 {
        return Err(format!(
            "{name}: transposed (MN-major) operands exist for f16/bf16 only"
        ));
    }
    if (w.neg_a || w.neg_b) && matches!(w.a, E::S8 | E::U8) {
        return Err(format!("{name}: integer wgmma has no negated inputs"));
    }
    let lanes = w.n / 2;
    let acc = match a[0] {
        Type::Vector(s, n) if *n == lanes && w.accumulators().contains(s) => *s,
        t => {
            let want: Vec<String> = w
                .accumulators()
                .iter()
                .map(|s| format!("vec<{s}, {lanes}>"))
                .collect();
            return Err(format!(
                "{name}: the accumulator must be {}, got {t}",
                want.join(" or ")
            ));
        }
    };
    let regs = Type::Vector(ScalarType::U32, 4);
    if *a[1] == regs {
        if w.trans_a {
            return Err(format!(
                "{name}: A in registers cannot be transposed (trans_a needs a descriptor)"
            ));
        }
    } else if *a[1] != Type::U64 {
        return Err(format!(
            "{name}: A must be a u64 shared-memory descriptor or vec<u32, 4> registers, got {}",
            a[1]
        ));
    }
    if *a[2] != Type::U64 {
        return Err(format!(
            "{name}: B must be a u64 shared-memory descriptor, got {}",
            a[2]
        ));
    }
    same("scale_d", a[3], &Type::BOOL)?;
    same("the result", r[0], &Type::Vector(acc, lanes))
}

/// `vec<f16, 2>` or `vec<bf16, 2>`: the packed pairs `add`/`sub`/`mul`/`min`/`max`/`fma` take.
pub(super) fn is_half_pair(t: &Type) -> bool {
    matches!(t, Type::Vector(ScalarType::F16 | ScalarType::BF16, 2))
}

/// A declared shared-memory alignment: 0 (the default) or a power of two up to 1024.
pub(super) fn check_shared_align(align: u32, what: &str) -> Check {
    if align != 0 && (!align.is_power_of_two() || align > crate::op::MAX_SHARED_ALIGN) {
        return Err(format!(
            "{what}: align {align} must be a power of two up to {}",
            crate::op::MAX_SHARED_ALIGN
        ));
    }
    Ok(())
}

/// `bar.sync`/`bar.arrive`: id 1..=15 (0 is `barrier`), a count of whole warps
/// that fits the kernel's declared block size.
pub(super) fn check_named_barrier(f: &Function, mn: &str, id: u32, count: u32) -> Check {
    if !(1..=15).contains(&id) {
        return Err(format!(
            "`{mn}`: named-barrier id {id} is out of range 1..15 (barrier 0 is the block-wide `barrier`)"
        ));
    }
    if count == 0 || !count.is_multiple_of(32) || count > 1024 {
        return Err(format!(
            "`{mn}`: the thread count {count} must be a multiple of 32 (whole warps) in 32..1024"
        ));
    }
    let info = f.kind.kernel_info();
    let block = info.and_then(|k| k.exact_threads.or(k.max_threads));
    if let Some(b) = block {
        let threads = u64::from(b[0]) * u64::from(b[1]) * u64::from(b[2]);
        // Whole warps: a partial last warp still counts 32 at a barrier.
        let warps = threads.div_ceil(32) * 32;
        if u64::from(count) > warps {
            return Err(format!(
                "`{mn}`: {count} threads can never arrive in a block of at most {threads} threads"
            ));
        }
    }
    Ok(())
}

/// The element types PTX's `cp.reduce.async.bulk` (and `.tensor`) reduce:
/// `add` on u32, i32, u64, f32, f64, f16, bf16; `min`/`max` on u32, i32,
/// u64, i64, f16, bf16.
pub fn bulk_reduce_type_ok(op: BulkRedOp, s: ScalarType) -> bool {
    use ScalarType as S;
    match op {
        BulkRedOp::Add => matches!(
            s,
            S::U32 | S::I32 | S::U64 | S::F32 | S::F64 | S::F16 | S::BF16
        ),
        BulkRedOp::Min | BulkRedOp::Max => {
            matches!(s, S::U32 | S::I32 | S::U64 | S::I64 | S::F16 | S::BF16)
        }
    }
}

/// `bulk.reduce.<op> dst, src, bytes`: global and shared pointers to one
/// scalar type PTX reduces, a u32 byte count.
pub(super) fn check_bulk_reduce(op: BulkRedOp, mn: &str, a: &[&Type]) -> Check {
    let (Type::Ptr(AddrSpace::Global, d), Type::Ptr(AddrSpace::Shared, s)) = (a[0], a[1]) else {
        return Err(format!(
            "`{mn}` takes a global destination and a shared source, got {} and {}",
            a[0], a[1]
        ));
    };
    if d != s {
        return Err(format!(
            "`{mn}`: destination and source point to {d} and {s}; they must agree"
        ));
    }
    match scalar(d) {
        Some(t) if bulk_reduce_type_ok(op, t) => {}
        _ => return Err(format!("`{mn}`: PTX has no bulk {op} reduction of {d}")),
    }
    want_u32("the byte count", a[2])
}

/// `ld.acquire`/`st.release` move 32 or 64 bits.
pub(super) fn ordered_access_type(t: &Type) -> Check {
    match scalar(t) {
        Some(s) if !s.is_bool() && matches!(s.bits(), 32 | 64) => Ok(()),
        _ => Err(format!(
            "acquire loads and release stores work on 32- or 64-bit scalars, got {t}"
        )),
    }
}

pub(super) fn check_const(c: ConstValue, t: &Type) -> Check {
    let Some(s) = scalar(t) else {
        return Err(format!("constants are scalars, got {t}"));
    };
    match c {
        ConstValue::Int(v) => {
            if !s.is_int() {
                return Err(format!("integer constant {v} for non-integer type {s}"));
            }
            if crate::builder::normalize_int(s, v) != v {
                return Err(format!(
                    "integer constant {v} does not fit {s} (store it truncated to the type's width)"
                ));
            }
            Ok(())
        }
        ConstValue::Float(bits) => {
            if !s.is_float() {
                return Err(format!("float constant for non-float type {s}"));
            }
            let v = f64::from_bits(bits);
            let max = match s {
                ScalarType::F16 => 65504.0,
                ScalarType::BF16 => 3.389_531_389_251_535_5e38,
                ScalarType::F32 => f64::from(f32::MAX),
                _ => f64::MAX,
            };
            if v.is_finite() && v.abs() > max {
                return Err(format!(
                    "float constant {v} overflows {s} (largest finite {max}); write inf explicitly"
                ));
            }
            Ok(())
        }
        ConstValue::Bool(_) => {
            if !s.is_bool() {
                return Err(format!("bool constant for type {s}"));
            }
            Ok(())
        }
    }
}

pub(super) fn check_alloc(elem: &Type, count: u64, max: u64, what: &str) -> Check {
    if let Some(m) = memory_type_problem(elem) {
        return Err(format!("{what} element: {m}"));
    }
    if count == 0 {
        return Err(format!("{what} needs a count of at least 1"));
    }
    let bytes = elem.size_bytes().and_then(|s| s.checked_mul(count));
    match bytes {
        Some(n) if n <= max => Ok(()),
        _ => Err(format!("{what} of {count} x {elem} exceeds {max} bytes")),
    }
}

/// Which atomic ops PTX has for which types (see `docs/hir.md`).
pub(super) fn check_atomic_type(op: AtomicOp, t: &Type) -> Check {
    use ScalarType as S;
    let s = scalar(t);
    let int32_64 = matches!(s, Some(S::I32 | S::U32 | S::I64 | S::U64));
    let ok = match op {
        AtomicOp::Add => {
            int32_64
                || matches!(s, Some(S::F16 | S::BF16 | S::F32 | S::F64))
                || matches!(t, Type::Vector(S::F16 | S::BF16, 2))
        }
        // Float min/max have no PTX `atom` form: the lowering loops on CAS.
        AtomicOp::Min | AtomicOp::Max => int32_64 || matches!(s, Some(S::F32 | S::F64)),
        AtomicOp::Sub | AtomicOp::And | AtomicOp::Or | AtomicOp::Xor => int32_64,
        AtomicOp::Exch => int32_64 || matches!(s, Some(S::F32 | S::F64)),
        AtomicOp::Inc | AtomicOp::Dec => s == Some(S::U32),
    };
    if ok {
        return Ok(());
    }
    let want = match op {
        AtomicOp::Add => "i32, u32, i64, u64, f16, bf16, f32, f64, vec<f16, 2> or vec<bf16, 2>",
        AtomicOp::Exch => "i32, u32, i64, u64, f32 or f64",
        AtomicOp::Inc | AtomicOp::Dec => "u32",
        AtomicOp::Min | AtomicOp::Max => "i32, u32, i64, u64, f32 or f64",
        _ => "i32, u32, i64 or u64",
    };
    Err(format!("atomic.{op} works on {want}, got {t}"))
}
