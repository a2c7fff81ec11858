//! The HIR's scalar semantics in LLVM terms, for every backend.
//!
//! Which LLVM operation implements each arithmetic, bit, compare and
//! conversion op for each operand class is decided here, once. The NVPTX
//! lowering (`lower/`, inkwell builder calls) and the CPU lowering
//! (`host/lower.rs`, LLVM text) only *emit* the answer, so the two cannot
//! drift apart. What stays per target: how a zero divisor is reported
//! (a trap on the GPU, an error code on the CPU), the transcendentals
//! (approximate PTX instructions vs libm), half-precision arithmetic (native
//! on the GPU, widened to f32 on the CPU: the same results, since f32 holds
//! every exact f16/bf16 sum and product before the one rounding), address
//! spaces and vector support.
//!
//! The semantics, where LLVM would otherwise leave behaviour undefined
//! (`docs/lowering.md`): integer division or remainder by zero is an error,
//! `MIN / -1` wraps to `MIN` (remainder 0), shift amounts of at least the bit
//! width clamp as in PTX (`shl` and logical `shr` give 0, arithmetic `shr`
//! fills with the sign), float→int casts saturate and map NaN to 0 (PTX
//! `cvt.rzi`), float `min`/`max` return the non-NaN operand, `clz(0)` is the
//! width and `bfind(0)` all ones.

use inkwell::values::InstructionOpcode as O;
use inkwell::{FloatPredicate, IntPredicate};
use zyntax_hir::{BinOp, CmpOp, ScalarType, UnOp};

/// Integer, float or bool: how an op on a scalar (or vector element) behaves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Signed,
    Unsigned,
    Float,
    Bool,
}

impl Class {
    pub fn of(s: ScalarType) -> Self {
        if s.is_bool() {
            Class::Bool
        } else if s.is_float() {
            Class::Float
        } else if s.is_signed() {
            Class::Signed
        } else {
            Class::Unsigned
        }
    }
}

/// How a binary op is built.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Binary {
    /// One LLVM instruction on the operands.
    Inst(O),
    /// An overloaded intrinsic on the operand type (`llvm.smin.i32`).
    Intrinsic(&'static str),
    /// Integer division (`div`) or remainder with the given instruction, guarded:
    /// a zero divisor is an error, `MIN / -1` wraps.
    DivRem { div: bool, signed: bool, inst: O },
    /// A shift with PTX's clamping of amounts >= the width: `shl`/`lshr` give
    /// 0, `ashr` shifts by width - 1.
    Shift(O),
}

/// The lowering of `op` on operands of class `c`; `None` where the verifier
/// rejects the combination (bit ops on floats, `rem` on bools, ...).
pub fn binary(op: BinOp, c: Class) -> Option<Binary> {
    use Binary::{DivRem, Inst, Intrinsic, Shift};
    let float = c == Class::Float;
    let signed = c == Class::Signed;
    Some(match op {
        BinOp::Add => Inst(if float { O::FAdd } else { O::Add }),
        BinOp::Sub => Inst(if float { O::FSub } else { O::Sub }),
        BinOp::Mul => Inst(if float { O::FMul } else { O::Mul }),
        BinOp::Div if float => Inst(O::FDiv),
        BinOp::Rem if float => Inst(O::FRem),
        BinOp::Div | BinOp::Rem => {
            let div = op == BinOp::Div;
            let inst = match (div, signed) {
                (true, true) => O::SDiv,
                (true, false) => O::UDiv,
                (false, true) => O::SRem,
                (false, false) => O::URem,
            };
            DivRem { div, signed, inst }
        }
        BinOp::Min | BinOp::Max => Intrinsic(match (op == BinOp::Min, c) {
            (true, Class::Float) => "llvm.minnum",
            (false, Class::Float) => "llvm.maxnum",
            (true, Class::Signed) => "llvm.smin",
            (false, Class::Signed) => "llvm.smax",
            (true, _) => "llvm.umin",
            (false, _) => "llvm.umax",
        }),
        _ if float => return None,
        BinOp::And => Inst(O::And),
        BinOp::Or => Inst(O::Or),
        BinOp::Xor => Inst(O::Xor),
        BinOp::Shl => Shift(O::Shl),
        BinOp::Shr => Shift(if signed { O::AShr } else { O::LShr }),
    })
}

/// How a unary op is built.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Unary {
    /// `fneg x`.
    FNeg,
    /// `0 - x`.
    IntNeg,
    /// `x ^ all-ones`.
    Not,
    /// An overloaded intrinsic on the operand type; `i1_false`: with a
    /// trailing `i1 false` (`llvm.abs`: no poison at MIN; `llvm.ctlz`:
    /// defined at zero).
    Intrinsic { name: &'static str, i1_false: bool },
    /// `(width - 1) - ctlz(x, false)`: the highest set bit, all ones for 0.
    Bfind,
    /// exp, log, sin, cos, tanh, rsqrt: each target has its own.
    Transcendental,
}

/// The lowering of `op` on an operand of class `c`; `None` where the
/// verifier rejects the combination.
pub fn unary(op: UnOp, c: Class) -> Option<Unary> {
    use Unary::*;
    let float = c == Class::Float;
    let int = matches!(c, Class::Signed | Class::Unsigned);
    let intrinsic = |name| Intrinsic {
        name,
        i1_false: false,
    };
    Some(match op {
        UnOp::Neg if float => FNeg,
        UnOp::Neg => IntNeg,
        UnOp::Not if !float => Not,
        UnOp::Abs if float => intrinsic("llvm.fabs"),
        UnOp::Abs if c == Class::Signed => Intrinsic {
            name: "llvm.abs",
            i1_false: true,
        },
        UnOp::Popc if int => intrinsic("llvm.ctpop"),
        UnOp::Brev if int => intrinsic("llvm.bitreverse"),
        UnOp::Clz if int => Intrinsic {
            name: "llvm.ctlz",
            i1_false: true,
        },
        UnOp::Bfind if int => Bfind,
        UnOp::Floor if float => intrinsic("llvm.floor"),
        UnOp::Ceil if float => intrinsic("llvm.ceil"),
        UnOp::Sqrt if float => intrinsic("llvm.sqrt"),
        UnOp::Rsqrt | UnOp::Exp | UnOp::Log | UnOp::Sin | UnOp::Cos | UnOp::Tanh if float => {
            Transcendental
        }
        _ => return None,
    })
}

/// Integer (and pointer) comparison: signedness picks the predicate;
/// pointers and bools compare unsigned.
pub fn int_predicate(op: CmpOp, signed: bool) -> IntPredicate {
    match (op, signed) {
        (CmpOp::Eq, _) => IntPredicate::EQ,
        (CmpOp::Ne, _) => IntPredicate::NE,
        (CmpOp::Lt, true) => IntPredicate::SLT,
        (CmpOp::Le, true) => IntPredicate::SLE,
        (CmpOp::Gt, true) => IntPredicate::SGT,
        (CmpOp::Ge, true) => IntPredicate::SGE,
        (CmpOp::Lt, false) => IntPredicate::ULT,
        (CmpOp::Le, false) => IntPredicate::ULE,
        (CmpOp::Gt, false) => IntPredicate::UGT,
        (CmpOp::Ge, false) => IntPredicate::UGE,
    }
}

/// Float comparison: ordered (false when either side is NaN), except `ne`,
/// which is true for NaN (IEEE `!=`).
pub fn float_predicate(op: CmpOp) -> FloatPredicate {
    match op {
        CmpOp::Eq => FloatPredicate::OEQ,
        CmpOp::Ne => FloatPredicate::UNE,
        CmpOp::Lt => FloatPredicate::OLT,
        CmpOp::Le => FloatPredicate::OLE,
        CmpOp::Gt => FloatPredicate::OGT,
        CmpOp::Ge => FloatPredicate::OGE,
    }
}

/// How a `cast` between two scalar types (or vectors of them) is built.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cast {
    /// The value itself (same type, or integers of equal width).
    Same,
    /// `x != 0` (`fcmp une` for floats, `icmp ne` for integers).
    NonZero,
    /// One conversion instruction.
    Inst(O),
    /// A saturating conversion intrinsic, overloaded on (to, from):
    /// `llvm.fptosi.sat`, NaN -> 0.
    Saturating(&'static str),
    /// f16 <-> bf16: `fpext` to f32, then `fptrunc`.
    ViaF32,
}

/// The lowering of `cast` from `from` to `to`.
pub fn cast(from: ScalarType, to: ScalarType) -> Cast {
    let (fc, tc) = (Class::of(from), Class::of(to));
    let (fb, tb) = (from.bits(), to.bits());
    if from == to {
        return Cast::Same;
    }
    match (fc, tc) {
        (_, Class::Bool) => Cast::NonZero,
        (Class::Bool, Class::Float) | (Class::Unsigned, Class::Float) => Cast::Inst(O::UIToFP),
        (Class::Signed, Class::Float) => Cast::Inst(O::SIToFP),
        (Class::Float, Class::Signed) => Cast::Saturating("llvm.fptosi.sat"),
        (Class::Float, Class::Unsigned) => Cast::Saturating("llvm.fptoui.sat"),
        (Class::Float, Class::Float) if fb == tb => Cast::ViaF32,
        (Class::Float, Class::Float) if fb < tb => Cast::Inst(O::FPExt),
        (Class::Float, Class::Float) => Cast::Inst(O::FPTrunc),
        // Integers (and bool, zero-extended).
        _ if fb == tb => Cast::Same,
        _ if fb > tb => Cast::Inst(O::Trunc),
        (Class::Signed, _) => Cast::Inst(O::SExt),
        _ => Cast::Inst(O::ZExt),
    }
}

/// The LLVM assembly spelling of an instruction this module names.
pub fn opcode_text(o: O) -> &'static str {
    match o {
        O::Add => "add",
        O::Sub => "sub",
        O::Mul => "mul",
        O::FAdd => "fadd",
        O::FSub => "fsub",
        O::FMul => "fmul",
        O::FDiv => "fdiv",
        O::FRem => "frem",
        O::SDiv => "sdiv",
        O::UDiv => "udiv",
        O::SRem => "srem",
        O::URem => "urem",
        O::And => "and",
        O::Or => "or",
        O::Xor => "xor",
        O::Shl => "shl",
        O::LShr => "lshr",
        O::AShr => "ashr",
        O::Trunc => "trunc",
        O::ZExt => "zext",
        O::SExt => "sext",
        O::FPExt => "fpext",
        O::FPTrunc => "fptrunc",
        O::SIToFP => "sitofp",
        O::UIToFP => "uitofp",
        other => unreachable!("scalar.rs names no {other:?}"),
    }
}

/// The LLVM assembly spelling of an integer predicate (`icmp slt`).
pub fn int_predicate_text(p: IntPredicate) -> &'static str {
    match p {
        IntPredicate::EQ => "eq",
        IntPredicate::NE => "ne",
        IntPredicate::SLT => "slt",
        IntPredicate::SLE => "sle",
        IntPredicate::SGT => "sgt",
        IntPredicate::SGE => "sge",
        IntPredicate::ULT => "ult",
        IntPredicate::ULE => "ule",
        IntPredicate::UGT => "ugt",
        IntPredicate::UGE => "uge",
    }
}

/// The LLVM assembly spelling of a float predicate (`fcmp olt`).
pub fn float_predicate_text(p: FloatPredicate) -> &'static str {
    match p {
        FloatPredicate::OEQ => "oeq",
        FloatPredicate::UNE => "une",
        FloatPredicate::OLT => "olt",
        FloatPredicate::OLE => "ole",
        FloatPredicate::OGT => "ogt",
        FloatPredicate::OGE => "oge",
        other => unreachable!("scalar.rs names no {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_instruction_has_a_spelling() {
        use zyntax_hir::ScalarType as S;
        let classes = [Class::Signed, Class::Unsigned, Class::Float, Class::Bool];
        for op in BinOp::ALL {
            for c in classes {
                match binary(*op, c) {
                    Some(Binary::Inst(o) | Binary::Shift(o) | Binary::DivRem { inst: o, .. }) => {
                        assert!(!opcode_text(o).is_empty());
                    }
                    Some(Binary::Intrinsic(_)) | None => {}
                }
            }
        }
        for from in S::ALL {
            for to in S::ALL {
                if let Cast::Inst(o) = cast(from, to) {
                    assert!(!opcode_text(o).is_empty(), "{from} -> {to}");
                }
            }
        }
    }

    #[test]
    fn abs_is_signed_or_float_only_as_the_verifier_says() {
        assert_eq!(unary(UnOp::Abs, Class::Unsigned), None);
        assert!(matches!(
            unary(UnOp::Abs, Class::Signed),
            Some(Unary::Intrinsic {
                name: "llvm.abs",
                i1_false: true
            })
        ));
    }

    #[test]
    fn casts_follow_the_operand_classes() {
        use zyntax_hir::ScalarType as S;
        assert_eq!(cast(S::I8, S::I32), Cast::Inst(O::SExt));
        assert_eq!(cast(S::U8, S::I32), Cast::Inst(O::ZExt));
        assert_eq!(cast(S::Bool, S::I32), Cast::Inst(O::ZExt));
        assert_eq!(cast(S::I32, S::U32), Cast::Same);
        assert_eq!(cast(S::F16, S::BF16), Cast::ViaF32);
        assert_eq!(cast(S::F32, S::U8), Cast::Saturating("llvm.fptoui.sat"));
        assert_eq!(cast(S::F32, S::Bool), Cast::NonZero);
    }
}
