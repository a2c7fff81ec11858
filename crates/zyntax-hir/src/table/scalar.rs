//! The scalar rows: constants, the arithmetic and bitwise families,
//! comparisons, conversions and vector lanes.
//!
//! The `BinOp` and `UnOp` enums are declared here, by their rows: one line of
//! [`binary_ops!`] / [`unary_ops!`] gives the variant, its `.zir` spelling
//! (which parsing and printing follow), its operand types and its doc, and the
//! row follows. A new two- or one-operand op is one line in this file; the
//! Rust and Python builder methods, the stubs and `docs/hir.md` are generated
//! from it (docs/add-an-hir-op.md).

use super::*;
use crate::op::named_enum;

/// The Python method's name: the mnemonic, unless the line gives one with
/// `as` (for Python keywords: `and_`, `not_`).
macro_rules! py_name {
    ($sub:literal) => {
        $sub
    };
    ($sub:literal, $py:literal) => {
        $py
    };
}

/// `binary_ops! { Variant => "mnemonic" [as "python name"], Operands, "doc"; ... }`:
/// the `BinOp` enum and its rows, `BINARY`, in the same order.
macro_rules! binary_ops {
    ($(#[$m:meta])* { $($v:ident => $sub:literal $(as $py:literal)?, $t:ident, $doc:literal;)+ }) => {
        named_enum!($(#[$m])* BinOp { $($v => $sub),+ });

        /// The `binary` rows, in `BinOp` order.
        pub(super) const BINARY: &[OpDef] = &[$(
            row("binary", $sub, $sub, AB, 1, "type of a")
                .op(|| Op::Binary(BinOp::$v))
                .sig("T, T -> T")
                .types(T::$t)
                .rust(concat!($sub, "(a, b)"))
                .py(Py::Binary(py_name!($sub $(, $py)?)))
                .doc($doc)
        ),+];
    };
}

/// `unary_ops! { Variant => "mnemonic" [as "python name"], Operands, "doc"; ... }`:
/// the `UnOp` enum and its rows, `UNARY`, in the same order.
macro_rules! unary_ops {
    ($(#[$m:meta])* { $($v:ident => $sub:literal $(as $py:literal)?, $t:ident, $doc:literal;)+ }) => {
        named_enum!($(#[$m])* UnOp { $($v => $sub),+ });

        /// The `unary` rows, in `UnOp` order.
        pub(super) const UNARY: &[OpDef] = &[$(
            row("unary", $sub, $sub, A, 1, "type of a")
                .op(|| Op::Unary(UnOp::$v))
                .types(T::$t)
                .rust(concat!($sub, "(a)"))
                .py(Py::Unary(py_name!($sub $(, $py)?)))
                .doc($doc)
        ),+];
    };
}

macro_rules! cmp {
    ($sub:literal, $v:ident, $doc:literal) => {
        row("cmp", $sub, concat!("cmp.", $sub), AB, 1, "bool")
            .op(|| Op::Cmp(CmpOp::$v))
            .sig("T, T -> bool")
            .what("comparison")
            .rust(concat!($sub, "(a, b)"))
            .py(Py::Cmp($sub))
            .doc($doc)
    };
}

/// `const`: its literal is read by its result type, so it is spelled by hand
/// in the parser and printer.
pub(super) const CONST: &[OpDef] = &[row("const", "", "const", NONE, 1, "the given type")
    .syntax("<value>")
    .rust("iconst / fconst / bconst")
    .py(Py::Hand("const"))
    .doc("A constant of the result type.")];

binary_ops! {
    /// Two-operand arithmetic and bitwise ops. Integer division and shifts follow
    /// the signedness of the operand type.
    {
        Add => "add", IntOrFloat, "Sum (integers wrap).";
        Sub => "sub", IntOrFloat, "Difference (integers wrap).";
        Mul => "mul", IntOrFloat, "Product (integers wrap).";
        Div => "div", IntOrFloat, "Quotient; integers truncate by signedness.";
        Rem => "rem", Int, "Remainder, sign of the dividend.";
        Min => "min", IntOrFloat, "Minimum.";
        Max => "max", IntOrFloat, "Maximum.";
        And => "and" as "and_", IntOrBool, "Bitwise (logical on bool) and.";
        Or => "or" as "or_", IntOrBool, "Bitwise (logical on bool) or.";
        Xor => "xor", IntOrBool, "Bitwise (logical on bool) exclusive or.";
        Shl => "shl", Int, "Shift left.";
        Shr => "shr", Int, "Shift right, arithmetic on signed types.";
    }
}

unary_ops! {
    /// One-operand ops. `not` is bitwise (logical on bool); the math functions take floats;
    /// the bit ops (`popc`, `clz`, `brev`, `bfind`) take integers and work on their bits.
    {
        Neg => "neg", IntOrFloat, "Negation (integers wrap).";
        Not => "not" as "not_", IntOrBool, "Bitwise (logical on bool) not.";
        Abs => "abs", SignedOrFloat, "Absolute value (integers wrap).";
        Sqrt => "sqrt", Float, "Square root.";
        Rsqrt => "rsqrt", Float, "Reciprocal square root.";
        Exp => "exp", Float, "e to the power.";
        Log => "log", Float, "Natural logarithm.";
        Sin => "sin", Float, "Sine.";
        Cos => "cos", Float, "Cosine.";
        Tanh => "tanh", Float, "Hyperbolic tangent.";
        Floor => "floor", Float, "Round toward negative infinity.";
        Ceil => "ceil", Float, "Round toward positive infinity.";
        Popc => "popc", Int, "Number of set bits.";
        Clz => "clz", Int, "Number of leading zero bits (the width for 0).";
        Brev => "brev", Int, "The bits in reverse order.";
        Bfind => "bfind", Int, "Index of the highest set bit; all ones for 0.";
    }
}

impl UnOp {
    /// Whether this op is defined only on floats (from its row).
    pub fn float_only(self) -> bool {
        Op::Unary(self).def().types == Operands::Float
    }
    /// Whether this op is defined only on integers (from its row).
    pub fn int_only(self) -> bool {
        Op::Unary(self).def().types == Operands::Int
    }
}

/// The scalar rows after the two families.
pub(super) const SCALAR: &[OpDef] = &[
    row("fma", "", "fma", &["a", "b", "c"], 1, "type of a")
        .op(|| Op::Fma)
        // Its operands are counted from 1 in messages the tests pin.
        .sig("T, T 'operand 2', T 'operand 3' -> T")
        .rust("fma(a, b, c)")
        .py(Py::Hand("fma"))
        .doc("a * b + c, rounded once."),
    cmp!("eq", Eq, "Equal."),
    cmp!("ne", Ne, "Not equal (true on NaN)."),
    cmp!("lt", Lt, "Less than."),
    cmp!("le", Le, "Less than or equal."),
    cmp!("gt", Gt, "Greater than."),
    cmp!("ge", Ge, "Greater than or equal."),
    row("select", "", "select", &["cond", "a", "b"], 1, "type of a")
        .op(|| Op::Select)
        .sig("bool, T, T -> T")
        .rust("select(cond, a, b)")
        .py(Py::Hand("select"))
        .doc("a if cond else b."),
    row("cast", "", "cast", A, 1, "the given type")
        .op(|| Op::Cast)
        .rust("cast(a, ty)")
        .py(Py::Hand("cast"))
        .doc("Numeric conversion."),
    row("bitcast", "", "bitcast", A, 1, "the given type (same size)")
        .op(|| Op::Bitcast)
        .rust("bitcast(a, ty)")
        .py(Py::Hand("bitcast"))
        .doc("Reinterpret the bits as another type of the same size."),
    row("extract", "", "extract", &["vec"], 1, "lane type")
        .imms(imms!(Extract(lane: u32 = "a lane number")))
        .syntax("{args}, <lane>")
        .rust("extract(vec, lane)")
        .py(Py::Hand("extract"))
        .doc("Read one lane of a vector."),
    row("insert", "", "insert", &["vec", "scalar"], 1, "type of vec")
        .imms(imms!(Insert(lane: u32 = "a lane number")))
        .syntax("{args}, <lane>")
        .rust("insert(vec, scalar, lane)")
        .py(Py::Hand("insert"))
        .doc("Replace one lane of a vector."),
];
