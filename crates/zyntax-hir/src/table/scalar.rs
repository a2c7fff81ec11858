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

/// `binary_ops! { Variant => "mnemonic" [as "python name"], Operands, "doc",
/// lower "LLVM" => "PTX"; ... }` (the lowering note is its line in
/// `docs/lowering.md`, generated):
/// the `BinOp` enum and its rows, `BINARY`, in the same order.
macro_rules! binary_ops {
    ($(#[$m:meta])* { $($v:ident => $sub:literal $(as $py:literal)?, $t:ident, $doc:literal,
        lower $llvm:literal => $ptx:literal;)+ }) => {
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
                .lower($llvm, $ptx)
        ),+];
    };
}

/// `unary_ops! { Variant => "mnemonic" [as "python name"], Operands, "doc",
/// [lang "name(x)",] lower "LLVM" => "PTX"; ... }` (`lang`: its `zyntax.lang`
/// primitive, generated into `python/zyntax/_lang_ops.py`):
/// the `UnOp` enum and its rows, `UNARY`, in the same order.
macro_rules! unary_ops {
    ($(#[$m:meta])* { $($v:ident => $sub:literal $(as $py:literal)?, $t:ident, $doc:literal,
        $(lang $lang:literal,)? lower $llvm:literal => $ptx:literal;)+ }) => {
        named_enum!($(#[$m])* UnOp { $($v => $sub),+ });

        /// The `unary` rows, in `UnOp` order.
        pub(super) const UNARY: &[OpDef] = &[$(
            row("unary", $sub, $sub, A, 1, "type of a")
                .op(|| Op::Unary(UnOp::$v))
                .types(T::$t)
                .rust(concat!($sub, "(a)"))
                .py(Py::Unary(py_name!($sub $(, $py)?)))
                .doc($doc)
                .lower($llvm, $ptx)
                .lang(concat!("" $(, $lang)?))
        ),+];
    };
}

macro_rules! bits {
    ($sub:literal, $v:ident, $py:literal, $ops:expr, $res:literal, $sig:literal, $doc:literal) => {
        row("bits", $sub, $sub, $ops, 1, $res)
            .op(|| Op::Bits(BitOp::$v))
            .sig($sig)
            .gpu()
            .rust(concat!("bits(BitOp::", stringify!($v), ", args)"))
            .py(Py::Bits($py))
            .doc($doc)
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
        Add => "add", IntOrFloat, "Sum (integers wrap).",
            lower "`add` (wrapping) / `fadd`" => "`add.s32`, `add.f32`, `add.rn.f16`";
        Sub => "sub", IntOrFloat, "Difference (integers wrap).",
            lower "`sub` (wrapping) / `fsub`" => "`sub.s32`, `sub.f32`";
        Mul => "mul", IntOrFloat, "Product (integers wrap).",
            lower "`mul` (wrapping) / `fmul`" => "`mul.lo.s32`, `mul.f32`";
        Div => "div", IntOrFloat, "Quotient; integers truncate by signedness.",
            lower "ints: zero check → `llvm.trap`, `MIN / -1` guarded, `sdiv`/`udiv` by signedness; floats: `fdiv`" => "`trap;`, `div.s32`, `div.rn.f32`";
        Rem => "rem", Int, "Remainder, sign of the dividend.",
            lower "zero check → `llvm.trap`, `MIN / -1` guarded, `srem`/`urem` by signedness" => "`trap;`, `rem.s32`, `rem.u64`";
        Min => "min", IntOrFloat, "Minimum.",
            lower "`llvm.smin`/`umin`, `llvm.minnum`" => "`min.s32`, `min.f32`";
        Max => "max", IntOrFloat, "Maximum.",
            lower "`llvm.smax`/`umax`, `llvm.maxnum`" => "`max.s32`, `max.f32`";
        And => "and" as "and_", IntOrBool, "Bitwise (logical on bool) and.",
            lower "`and`" => "`and.b32`, `and.pred`";
        Or => "or" as "or_", IntOrBool, "Bitwise (logical on bool) or.",
            lower "`or`" => "`or.b32`, `or.pred`";
        Xor => "xor", IntOrBool, "Bitwise (logical on bool) exclusive or.",
            lower "`xor`" => "`xor.b32`, `xor.pred`";
        Shl => "shl", Int, "Shift left.",
            lower "`shl`; amounts ≥ the width clamp (PTX's rule)" => "`shl.b32`";
        Shr => "shr", Int, "Shift right, arithmetic on signed types.",
            lower "`lshr` (unsigned) / `ashr` (signed); amounts ≥ the width clamp" => "`shr.u32`, `shr.s32`";
    }
}

unary_ops! {
    /// One-operand ops. `not` is bitwise (logical on bool); the math functions take floats;
    /// the bit ops (`popc`, `clz`, `brev`, `bfind`) take integers and work on their bits.
    {
        Neg => "neg", IntOrFloat, "Negation (integers wrap).",
            lower "`sub 0, x` / `fneg`" => "`neg.s32`, `neg.f32`";
        Not => "not" as "not_", IntOrBool, "Bitwise (logical on bool) not.",
            lower "`xor x, -1`" => "`not.b32`, `not.pred`";
        Abs => "abs", SignedOrFloat, "Absolute value (integers wrap).",
            lower "`llvm.abs` / `llvm.fabs`" => "`abs.s32`, `abs.f32`";
        Sqrt => "sqrt", Float, "Square root.",
            lower "`llvm.sqrt`" => "`sqrt.rn.f32`";
        Rsqrt => "rsqrt", Float, "Reciprocal square root.",
            lower "`llvm.nvvm.rsqrt.approx.f` (f64: `1 / llvm.sqrt`)" => "`rsqrt.approx.f32`";
        Exp => "exp", Float, "e to the power.",
            lower "`llvm.nvvm.ex2.approx.f(x · log2 e)`" => "`ex2.approx.f32`";
        Log => "log", Float, "Natural logarithm.",
            lower "`llvm.nvvm.lg2.approx.f(x) · ln 2`" => "`lg2.approx.f32`";
        Sin => "sin", Float, "Sine.",
            lower "`llvm.nvvm.sin.approx.f`" => "`sin.approx.f32`";
        Cos => "cos", Float, "Cosine.",
            lower "`llvm.nvvm.cos.approx.f`" => "`cos.approx.f32`";
        Tanh => "tanh", Float, "Hyperbolic tangent.",
            lower "`copysign(1 − 2 / (ex2(2·|x|·log2 e) + 1), x)`" => "`ex2.approx.f32`, `div.rn.f32`";
        Floor => "floor", Float, "Round toward negative infinity.",
            lower "`llvm.floor`" => "`cvt.rmi.f32.f32`";
        Ceil => "ceil", Float, "Round toward positive infinity.",
            lower "`llvm.ceil`" => "`cvt.rpi.f32.f32`";
        Popc => "popc", Int, "Number of set bits.",
            lang "popc(x)",
            lower "`llvm.ctpop`" => "`popc.b32`";
        Clz => "clz", Int, "Number of leading zero bits (the width for 0).",
            lang "clz(x)",
            lower "`llvm.ctlz` (defined at 0)" => "`clz.b32`";
        Brev => "brev", Int, "The bits in reverse order.",
            lang "brev(x)",
            lower "`llvm.bitreverse`" => "`brev.b32`";
        Bfind => "bfind", Int, "Index of the highest set bit; all ones for 0.",
            lang "bfind(x)",
            lower "`width − 1 − llvm.ctlz` (all ones for 0)" => "`clz.b32`, `sub.s32`";
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

/// Fast approximate f32 math (issue 12 item 3).
pub(super) const APPROX: &[OpDef] = &[
    // --- GPU: fast approximate math (issue 12 item 3)
    row("approx", "ex2", "ex2.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Ex2))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Ex2, a)")
        .py(Py::Hand("ex2_approx"))
        .doc("2^a, fast approximation (`ex2.approx.f32`)."),
    row("approx", "rcp", "rcp.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Rcp))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Rcp, a)")
        .py(Py::Hand("rcp_approx"))
        .doc("1/a, fast approximation (`rcp.approx.f32`)."),
    row("approx", "tanh", "tanh.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Tanh))
        .sig("f32 -> f32")
        .gpu()
        .needs(TANH_APPROX)
        .rust("approx(ApproxOp::Tanh, a)")
        .py(Py::Hand("tanh_approx"))
        .doc("tanh(a), fast approximation (`tanh.approx.f32`, sm_80+)."),
    row("approx", "ex2_ftz", "ex2_ftz.approx", A, 1, "f32")
        .op(|| Op::Approx(ApproxOp::Ex2Ftz))
        .sig("f32 -> f32")
        .gpu()
        .rust("approx(ApproxOp::Ex2Ftz, a)")
        .py(Py::Hand("ex2_ftz_approx"))
        .doc("2^a, fast approximation with subnormals flushed to zero (`ex2.approx.ftz.f32`: one MUFU, no range fix-up)."),
    row("load_cached", "", "load.<cop>", &["ptr"], 1, "pointee")
        .imms(imms!(LoadCached(cop: CacheOp = "cache operator")))
        .class(Mem)
        .fx(fx::READ)
        .rust("load_cached(cop, ptr)")
        .py(Py::Hand("load_cached"))
        .doc("Global load with a cache operator (ca, cg, cs, lu, cv) or L2 hint (evict_first, evict_last)."),
    row("store_cached", "", "store.<cop>", &["ptr", "value"], 0, "–")
        .imms(imms!(StoreCached(cop: CacheOp = "cache operator")))
        .class(Mem)
        .fx(fx::WRITE)
        .rust("store_cached(cop, ptr, value)")
        .py(Py::Hand("store_cached"))
        .doc("Global store with a cache operator (wb, cg, cs, wt) or L2 hint (evict_first, evict_last)."),
];

/// PTX bit-field, byte-permute and funnel-shift ops (issue 12).
pub(super) const BITS: &[OpDef] = &[
    // --- issue 12 (warp-sync): bit ops
    bits!(
        "bfe",
        Bfe,
        "bfe",
        &["a", "pos", "len"],
        "type of a",
        "T, u32, u32 -> T where T: i32|u32|i64|u64",
        "Bit-field extract: len bits of a from bit pos, sign-extended for signed types."
    ),
    bits!(
        "bfi",
        Bfi,
        "bfi",
        &["a", "b", "pos", "len"],
        "type of b",
        "T, T 'the base operand', u32, u32 -> T where T: i32|u32|i64|u64",
        "Bit-field insert: b with its len bits from pos replaced by the low bits of a."
    ),
    bits!(
        "prmt",
        Prmt,
        "prmt",
        &["a", "b", "sel"],
        "u32",
        "u32, u32, u32 -> u32",
        "Byte permute: each selector nibble picks one of the 8 bytes of b:a (bit 3: replicate its sign)."
    ),
    bits!(
        "shf.l.wrap",
        ShfLWrap,
        "shf_l_wrap",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift left: high word of hi:lo << (n mod 32)."
    ),
    bits!(
        "shf.l.clamp",
        ShfLClamp,
        "shf_l_clamp",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift left: high word of hi:lo << min(n, 32)."
    ),
    bits!(
        "shf.r.wrap",
        ShfRWrap,
        "shf_r_wrap",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift right: low word of hi:lo >> (n mod 32)."
    ),
    bits!(
        "shf.r.clamp",
        ShfRClamp,
        "shf_r_clamp",
        &["lo", "hi", "n"],
        "u32",
        "u32, u32, u32 -> u32",
        "Funnel shift right: low word of hi:lo >> min(n, 32)."
    ),
];

/// Packed conversions (issue 12).
pub(super) const PACK: &[OpDef] = &[
    row(
        "cvt_pack",
        "",
        "cvt_pack.<fmt>",
        &["lo", "hi"],
        1,
        "packed pair",
    )
    .imms(imms!(CvtPack(fmt: PackFmt = "pair format")))
    .sig("f32, f32 -> _")
    .gpu()
    .rust("cvt_pack(fmt, lo, hi)")
    .py(Py::Hand("cvt_pack"))
    .doc(
        "Two f32 rounded to nearest even into a pair: vec<f16|bf16, 2>, or u16 of fp8 (satfinite).",
    ),
    row(
        "cvt_unpack",
        "",
        "cvt_unpack.<fmt>",
        &["a"],
        1,
        "vec<f16, 2>",
    )
    .imms(imms!(CvtUnpack(fmt: PackFmt = "pair format")))
    .sig("u16 'the packed pair' -> vec<f16, 2>")
    .gpu()
    .rust("cvt_unpack(fmt, a)")
    .py(Py::Hand("cvt_unpack"))
    .doc("A packed fp8 pair (u16) widened exactly to vec<f16, 2>."),
];
