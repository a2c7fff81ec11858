//! The scalar semantics both lowerings share: which LLVM operation each HIR
//! binary, unary, comparison and numeric conversion becomes, by the operand's
//! class (signed, unsigned, float, bool). The NVPTX lowering (`lower`,
//! inkwell) and the CPU lowering (`host::lower`, textual IR) both emit from
//! these tables; what stays theirs is how: builder calls or text, the CPU's
//! f16/bf16 arithmetic in f32, how a zero divisor fails (a trap on the GPU,
//! an error code on the CPU), and the transcendentals ([`Scalar::Math`]:
//! PTX's approximate instructions on the GPU, LLVM's libm intrinsics on the
//! CPU). `docs/semantics.md` defines the results; the differential tests
//! against the interpreter check both backends.

use zyntax_hir::{BinOp, CmpOp, ScalarType, UnOp};

/// How an op on a scalar (or on each vector lane) behaves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Signed,
    Unsigned,
    Float,
    Bool,
}

pub fn class_of(s: ScalarType) -> Class {
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

/// An LLVM instruction with two operands of the same type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Inst {
    Add,
    Sub,
    Mul,
    FAdd,
    FSub,
    FMul,
    FDiv,
    FRem,
    And,
    Or,
    Xor,
}

impl Inst {
    /// Its opcode in textual LLVM IR.
    pub fn name(self) -> &'static str {
        match self {
            Inst::Add => "add",
            Inst::Sub => "sub",
            Inst::Mul => "mul",
            Inst::FAdd => "fadd",
            Inst::FSub => "fsub",
            Inst::FMul => "fmul",
            Inst::FDiv => "fdiv",
            Inst::FRem => "frem",
            Inst::And => "and",
            Inst::Or => "or",
            Inst::Xor => "xor",
        }
    }
}

/// The LLVM form of one binary or unary scalar op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// One instruction on the operands.
    Inst(Inst),
    /// An intrinsic overloaded on the operand type (`llvm.smin`, `llvm.ctpop`).
    Intrinsic(&'static str),
    /// An intrinsic with a trailing `i1 false` (`llvm.abs`: no poison on MIN;
    /// `llvm.ctlz`: defined at zero, giving the width).
    IntrinsicFalse(&'static str),
    /// `0 - x`.
    Neg,
    /// `fneg x`.
    FNeg,
    /// `x ^ all ones` (logical not on bool).
    Not,
    /// The operand itself (`abs` of an unsigned integer).
    Identity,
    /// `width - 1 - ctlz(x)` (all ones for 0).
    Bfind,
    /// Integer division or remainder: a zero divisor fails, `MIN / -1` wraps
    /// (quotient MIN, remainder 0).
    IntDiv { div: bool, signed: bool },
    /// PTX shifts: an amount of at least the width gives 0 (`shl`, unsigned
    /// `shr`) or the sign in every bit (signed `shr`).
    Shift { left: bool, signed: bool },
    /// A transcendental (`rsqrt`, `exp`, `log`, `sin`, `cos`, `tanh`): each
    /// target's own.
    Math,
}

/// The form of binary `op` on operands of class `c` (`None`: not defined there).
pub fn binary(op: BinOp, c: Class) -> Option<Scalar> {
    use Class::*;
    let float = c == Float;
    Some(match (op, c) {
        (BinOp::Add, _) => Scalar::Inst(if float { Inst::FAdd } else { Inst::Add }),
        (BinOp::Sub, _) => Scalar::Inst(if float { Inst::FSub } else { Inst::Sub }),
        (BinOp::Mul, _) => Scalar::Inst(if float { Inst::FMul } else { Inst::Mul }),
        (BinOp::Div, Float) => Scalar::Inst(Inst::FDiv),
        (BinOp::Rem, Float) => Scalar::Inst(Inst::FRem),
        (BinOp::Div | BinOp::Rem, Signed | Unsigned) => Scalar::IntDiv {
            div: op == BinOp::Div,
            signed: c == Signed,
        },
        (BinOp::Min, Float) => Scalar::Intrinsic("llvm.minnum"),
        (BinOp::Max, Float) => Scalar::Intrinsic("llvm.maxnum"),
        (BinOp::Min, Signed) => Scalar::Intrinsic("llvm.smin"),
        (BinOp::Max, Signed) => Scalar::Intrinsic("llvm.smax"),
        (BinOp::Min, Unsigned) => Scalar::Intrinsic("llvm.umin"),
        (BinOp::Max, Unsigned) => Scalar::Intrinsic("llvm.umax"),
        (BinOp::And, Signed | Unsigned | Bool) => Scalar::Inst(Inst::And),
        (BinOp::Or, Signed | Unsigned | Bool) => Scalar::Inst(Inst::Or),
        (BinOp::Xor, Signed | Unsigned | Bool) => Scalar::Inst(Inst::Xor),
        (BinOp::Shl | BinOp::Shr, Signed | Unsigned) => Scalar::Shift {
            left: op == BinOp::Shl,
            signed: c == Signed,
        },
        _ => return None,
    })
}

/// The form of unary `op` on an operand of class `c` (`None`: not defined there).
pub fn unary(op: UnOp, c: Class) -> Option<Scalar> {
    use Class::*;
    let int = matches!(c, Signed | Unsigned);
    Some(match (op, c) {
        (UnOp::Neg, Float) => Scalar::FNeg,
        (UnOp::Neg, Signed | Unsigned) => Scalar::Neg,
        (UnOp::Not, Signed | Unsigned | Bool) => Scalar::Not,
        (UnOp::Abs, Float) => Scalar::Intrinsic("llvm.fabs"),
        (UnOp::Abs, Signed) => Scalar::IntrinsicFalse("llvm.abs"),
        (UnOp::Abs, Unsigned) => Scalar::Identity,
        (UnOp::Popc, _) if int => Scalar::Intrinsic("llvm.ctpop"),
        (UnOp::Brev, _) if int => Scalar::Intrinsic("llvm.bitreverse"),
        (UnOp::Clz, _) if int => Scalar::IntrinsicFalse("llvm.ctlz"),
        (UnOp::Bfind, _) if int => Scalar::Bfind,
        (UnOp::Sqrt, Float) => Scalar::Intrinsic("llvm.sqrt"),
        (UnOp::Floor, Float) => Scalar::Intrinsic("llvm.floor"),
        (UnOp::Ceil, Float) => Scalar::Intrinsic("llvm.ceil"),
        (UnOp::Rsqrt | UnOp::Exp | UnOp::Log | UnOp::Sin | UnOp::Cos | UnOp::Tanh, Float) => {
            Scalar::Math
        }
        _ => return None,
    })
}

/// The `fcmp` predicate of `op`: ordered (false on NaN) except `ne`.
pub fn fcmp(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "oeq",
        CmpOp::Ne => "une",
        CmpOp::Lt => "olt",
        CmpOp::Le => "ole",
        CmpOp::Gt => "ogt",
        CmpOp::Ge => "oge",
    }
}

/// The `icmp` predicate of `op` by signedness (pointers compare unsigned).
pub fn icmp(op: CmpOp, signed: bool) -> &'static str {
    match (op, signed) {
        (CmpOp::Eq, _) => "eq",
        (CmpOp::Ne, _) => "ne",
        (CmpOp::Lt, true) => "slt",
        (CmpOp::Le, true) => "sle",
        (CmpOp::Gt, true) => "sgt",
        (CmpOp::Ge, true) => "sge",
        (CmpOp::Lt, false) => "ult",
        (CmpOp::Le, false) => "ule",
        (CmpOp::Gt, false) => "ugt",
        (CmpOp::Ge, false) => "uge",
    }
}

/// How a numeric conversion (`cast`) between two scalar types is lowered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Conv {
    /// Same bits: the value itself.
    Same,
    /// To bool: non-zero is true (`fcmp une 0` / `icmp ne 0`).
    NonZero,
    /// One LLVM cast instruction (`sext`, `sitofp`, `fptrunc`, ...).
    Cast(&'static str),
    /// Float to integer saturating, NaN to 0 (PTX `cvt.rzi`): this intrinsic.
    Saturating(&'static str),
    /// f16 <-> bf16 (equal widths): `fpext` to f32, then `fptrunc`.
    ViaF32,
}

/// The conversion of a `from` value to `to`.
pub fn cast(from: ScalarType, to: ScalarType) -> Conv {
    use Class::*;
    let (fc, tc) = (class_of(from), class_of(to));
    let (fb, tb) = (from.bits(), to.bits());
    if from == to {
        return Conv::Same;
    }
    match (fc, tc) {
        (_, Bool) => Conv::NonZero,
        (Bool, Float) | (Unsigned, Float) => Conv::Cast("uitofp"),
        (Signed, Float) => Conv::Cast("sitofp"),
        (Float, Signed) => Conv::Saturating("llvm.fptosi.sat"),
        (Float, Unsigned) => Conv::Saturating("llvm.fptoui.sat"),
        (Float, Float) if fb == tb => Conv::ViaF32,
        (Float, Float) if fb < tb => Conv::Cast("fpext"),
        (Float, Float) => Conv::Cast("fptrunc"),
        // Integers (and bool, zero-extended) to integers.
        _ if fb == tb => Conv::Same,
        _ if fb > tb => Conv::Cast("trunc"),
        (Signed, _) => Conv::Cast("sext"),
        _ => Conv::Cast("zext"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zyntax_hir::Op;

    /// Every op has a form on every scalar type the instruction table lets it take.
    #[test]
    fn every_accepted_type_has_a_form() {
        for s in ScalarType::ALL {
            let c = class_of(s);
            for &op in BinOp::ALL {
                if Op::Binary(op).def().types.accepts(s) {
                    assert!(binary(op, c).is_some(), "{op} on {s}");
                }
            }
            for &op in UnOp::ALL {
                if Op::Unary(op).def().types.accepts(s) {
                    assert!(unary(op, c).is_some(), "{op} on {s}");
                }
            }
        }
    }
}
