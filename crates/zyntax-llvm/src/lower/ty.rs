//! HIR types → LLVM types.
//!
//! | HIR | LLVM value | in memory |
//! |---|---|---|
//! | `bool` | `i1` | `i8` (0 or 1) |
//! | `i8`/`u8` … `i64`/`u64` | `i8` … `i64` (signedness lives in the ops) | same |
//! | `f16`, `bf16`, `f32`, `f64` | `half`, `bfloat`, `float`, `double` | same |
//! | `vec<T, n>` | `<n x T>` | same |
//! | `[T; n]` | `[n x T]` | same |
//! | `ptr<space, T>` | `ptr addrspace(space)` (opaque; `constant` → 1, see [`llvm_space`]) | same |
//! | `frag<…>` | a struct of the WMMA registers (see [`frag_regs`]) | – |
//! | `tensormap` | `ptr` (generic address of the `byval` kernel parameter) | – |

use crate::error::{CompileError, CompileResult};
use inkwell::context::Context;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::AddressSpace;
use zyntax_hir::{FragKind, FragType, MmaShape, ScalarType, Type};

/// The register of a WMMA fragment as LLVM's `llvm.nvvm.wmma.*` intrinsics see it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FragReg {
    /// `<2 x half>`
    Half2,
    /// `float`
    F32,
    /// `i32` (packed bf16 pairs, packed 8-bit integers, or s32 accumulators)
    I32,
}

/// Register layout of a fragment: (register kind, count). `None` if LLVM has no
/// WMMA intrinsic for it (the verifier rejects such fragments first).
pub fn frag_regs(f: &FragType) -> Option<(FragReg, u32)> {
    use FragKind::*;
    use MmaShape::*;
    use ScalarType as S;
    Some(match (f.kind, f.elem, f.shape) {
        (A | B, S::F16, _) => (FragReg::Half2, 8),
        (Acc, S::F16, _) => (FragReg::Half2, 4),
        (Acc, S::F32, _) => (FragReg::F32, 8),
        (Acc, S::I32, _) => (FragReg::I32, 8),
        (A | B, S::BF16, M16N16K16) => (FragReg::I32, 4),
        (A, S::BF16, M32N8K16) | (B, S::BF16, M8N32K16) => (FragReg::I32, 8),
        (A, S::BF16, M8N32K16) | (B, S::BF16, M32N8K16) => (FragReg::I32, 2),
        (A | B, S::I8 | S::U8, M16N16K16) => (FragReg::I32, 2),
        (A, S::I8 | S::U8, M32N8K16) | (B, S::I8 | S::U8, M8N32K16) => (FragReg::I32, 4),
        (A, S::I8 | S::U8, M8N32K16) | (B, S::I8 | S::U8, M32N8K16) => (FragReg::I32, 1),
        _ => return None,
    })
}

/// The PTX / LLVM intrinsic spelling of a fragment's element type.
pub fn frag_elem_name(s: ScalarType) -> Option<&'static str> {
    Some(match s {
        ScalarType::F16 => "f16",
        ScalarType::BF16 => "bf16",
        ScalarType::F32 => "f32",
        ScalarType::I32 => "s32",
        ScalarType::I8 => "s8",
        ScalarType::U8 => "u8",
        _ => return None,
    })
}

pub fn scalar_type<'ctx>(ctx: &'ctx Context, s: ScalarType) -> BasicTypeEnum<'ctx> {
    match s {
        ScalarType::Bool => ctx.bool_type().into(),
        ScalarType::I8 | ScalarType::U8 => ctx.i8_type().into(),
        ScalarType::I16 | ScalarType::U16 => ctx.i16_type().into(),
        ScalarType::I32 | ScalarType::U32 => ctx.i32_type().into(),
        ScalarType::I64 | ScalarType::U64 => ctx.i64_type().into(),
        ScalarType::F16 => ctx.f16_type().into(),
        ScalarType::BF16 => ctx.bf16_type().into(),
        ScalarType::F32 => ctx.f32_type().into(),
        ScalarType::F64 => ctx.f64_type().into(),
    }
}

/// The LLVM address space of an HIR one. `constant` pointers reach kernels
/// from the runtime's allocations (HIR declares no `__constant__` banks), so
/// they are read-only *global* memory: LLVM address space 1, with loads marked
/// `!invariant.load` (→ `ld.global.nc`, the read-only data path).
pub fn llvm_space(space: zyntax_hir::AddrSpace) -> u16 {
    match space {
        zyntax_hir::AddrSpace::Constant => 1,
        other => other.number() as u16,
    }
}

/// LLVM pointer type of an address space.
pub fn ptr_type(ctx: &Context, space: zyntax_hir::AddrSpace) -> inkwell::types::PointerType<'_> {
    ctx.ptr_type(AddressSpace::from(llvm_space(space)))
}

/// The type of an SSA value of HIR type `t`.
pub fn value_type<'ctx>(ctx: &'ctx Context, t: &Type) -> CompileResult<BasicTypeEnum<'ctx>> {
    Ok(match t {
        Type::Scalar(s) => scalar_type(ctx, *s),
        Type::Vector(s, n) => vector_of(scalar_type(ctx, *s), *n)?,
        Type::Array(e, n) => array_of(memory_type(ctx, e)?, *n)?,
        Type::Ptr(space, _) => ptr_type(ctx, *space).into(),
        Type::Frag(f) => {
            let (reg, n) = frag_regs(f).ok_or_else(|| {
                CompileError::Unsupported(format!("no WMMA intrinsic for fragment {f}"))
            })?;
            let r: BasicTypeEnum = match reg {
                FragReg::Half2 => ctx.f16_type().vec_type(2).into(),
                FragReg::F32 => ctx.f32_type().into(),
                FragReg::I32 => ctx.i32_type().into(),
            };
            let fields = vec![r; n as usize];
            ctx.struct_type(&fields, false).into()
        }
        // The generic address of the `byval` parameter (issue 13).
        Type::TensorMap => ctx.ptr_type(AddressSpace::default()).into(),
    })
}

/// The type of `t` when stored in memory (`bool` is a byte).
pub fn memory_type<'ctx>(ctx: &'ctx Context, t: &Type) -> CompileResult<BasicTypeEnum<'ctx>> {
    Ok(match t {
        Type::Scalar(ScalarType::Bool) => ctx.i8_type().into(),
        Type::Vector(ScalarType::Bool, n) => vector_of(ctx.i8_type().into(), *n)?,
        Type::Frag(_) | Type::TensorMap => {
            return Err(CompileError::internal(
                "lowering",
                format!("{t} has no memory representation"),
            ))
        }
        other => value_type(ctx, other)?,
    })
}

fn vector_of(elem: BasicTypeEnum<'_>, n: u32) -> CompileResult<BasicTypeEnum<'_>> {
    Ok(match elem {
        BasicTypeEnum::IntType(t) => t.vec_type(n).into(),
        BasicTypeEnum::FloatType(t) => t.vec_type(n).into(),
        BasicTypeEnum::PointerType(t) => t.vec_type(n).into(),
        other => {
            return Err(CompileError::internal(
                "lowering",
                format!("vector of {other:?}"),
            ));
        }
    })
}

fn array_of(elem: BasicTypeEnum<'_>, n: u64) -> CompileResult<BasicTypeEnum<'_>> {
    let n = u32::try_from(n)
        .map_err(|_| CompileError::Unsupported(format!("array of {n} elements is too long")))?;
    Ok(elem.array_type(n).into())
}
