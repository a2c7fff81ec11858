//! Scalar semantics: every value is held as the bits of its type in the low
//! bits of a `u64` (upper bits zero). Integer ops wrap; float ops are IEEE-754
//! with round-to-nearest-even; f16/bf16 ops are computed in f64 and rounded
//! once (exact for add/sub/mul/div/sqrt because f64 has more than 2p+2 bits).
//! See `docs/semantics.md` for the definitions where PTX leaves a choice.

use crate::decode::{DOp, InstCx, MemTy};
use crate::exec::{lanes, r, vget, vset, w, Ctx, Exec, Flow};
use crate::warp_mma;
use crate::{InterpError, Result, TrapKind};
use half::{bf16, f16};
use zyntax_hir::{BinOp, BitOp, CmpOp, Op, ScalarType, Type, UnOp};

/// Mask of the low `bits` bits.
#[inline]
pub fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Sign-extend the low `bits` bits.
#[inline]
pub fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let s = 64 - bits;
        ((v << s) as i64) >> s
    }
}

/// The value of `bits` of type `ty` as an f64 (exact for every float type and
/// for integers up to 2^53).
#[inline]
pub fn to_f64(ty: ScalarType, v: u64) -> f64 {
    match ty {
        ScalarType::F16 => f16::from_bits(v as u16).to_f64(),
        ScalarType::BF16 => bf16::from_bits(v as u16).to_f64(),
        ScalarType::F32 => f64::from(f32::from_bits(v as u32)),
        ScalarType::F64 => f64::from_bits(v),
        ScalarType::Bool => (v & 1) as f64,
        s if s.is_signed() => sext(v, s.bits()) as f64,
        _ => v as f64,
    }
}

/// Round an f64 to a float type (round to nearest even) and give its bits.
#[inline]
/// `x` rounded once to the nearest f16 (ties to even). `half`'s conversions
/// round twice (through f32 with F16C, or after dropping the low 32 mantissa
/// bits), which misrounds values just off a tie: pick the nearest of the
/// candidate and its two neighbours, measured exactly in f64.
fn f16_from_f64(x: f64) -> u16 {
    let h = f16::from_f64_const(x);
    if x.is_nan() {
        return h.to_bits();
    }
    // 65520 is the midpoint between f16::MAX and the next power of two.
    if x.abs() >= 65520.0 {
        return if x > 0.0 { 0x7c00 } else { 0xfc00 };
    }
    let b = h.to_bits() & 0x7fff;
    let b = if b >= 0x7c00 { 0x7bff } else { b };
    let sign = if x < 0.0 { 0x8000 } else { 0 };
    let mag = x.abs();
    let mut best = b;
    let mut err = (mag - f64::from(f16::from_bits(b))).abs();
    for c in [b.wrapping_sub(1), b + 1] {
        if c > 0x7bff {
            continue;
        }
        let e = (mag - f64::from(f16::from_bits(c))).abs();
        if e < err || (e == err && c & 1 == 0) {
            best = c;
            err = e;
        }
    }
    best | sign
}

pub fn float_from_f64(ty: ScalarType, x: f64) -> u64 {
    match ty {
        ScalarType::F16 => u64::from(f16_from_f64(x)),
        ScalarType::BF16 => u64::from(bf16::from_f64(x).to_bits()),
        ScalarType::F32 => u64::from((x as f32).to_bits()),
        _ => x.to_bits(),
    }
}

/// Whether `op` is defined on `ty` (checked once when decoding).
pub fn binop_defined(op: BinOp, ty: ScalarType) -> bool {
    match ty {
        ScalarType::Bool => matches!(op, BinOp::And | BinOp::Or | BinOp::Xor),
        t if t.is_float() => matches!(
            op,
            BinOp::Add
                | BinOp::Sub
                | BinOp::Mul
                | BinOp::Div
                | BinOp::Rem
                | BinOp::Min
                | BinOp::Max
        ),
        _ => true,
    }
}

pub fn unop_defined(op: UnOp, ty: ScalarType) -> bool {
    if ty.is_float() {
        op != UnOp::Not && !op.int_only()
    } else if ty == ScalarType::Bool {
        op == UnOp::Not
    } else {
        !op.float_only()
    }
}

/// IEEE min with NaN ignored (PTX `min.f32`), and -0 < +0.
#[inline]
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        // Equal (possibly +0/-0): prefer the negative zero.
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

#[inline]
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else if a > b {
        a
    } else {
        b
    }
}

#[inline]
fn f32op(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        BinOp::Min => fmin(f64::from(a), f64::from(b)) as f32,
        BinOp::Max => fmax(f64::from(a), f64::from(b)) as f32,
        _ => f32::NAN,
    }
}

#[inline]
fn f64op(op: BinOp, a: f64, b: f64) -> f64 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        BinOp::Min => fmin(a, b),
        BinOp::Max => fmax(a, b),
        _ => f64::NAN,
    }
}

/// A binary op on two values of type `ty` (defined by [`binop_defined`]).
#[inline]
pub fn binary(op: BinOp, ty: ScalarType, a: u64, b: u64) -> u64 {
    match ty {
        ScalarType::F32 => {
            u64::from(f32op(op, f32::from_bits(a as u32), f32::from_bits(b as u32)).to_bits())
        }
        ScalarType::F64 => f64op(op, f64::from_bits(a), f64::from_bits(b)).to_bits(),
        ScalarType::F16 | ScalarType::BF16 => {
            float_from_f64(ty, f64op(op, to_f64(ty, a), to_f64(ty, b)))
        }
        _ => int_binary(op, ty, a, b),
    }
}

#[inline]
fn int_binary(op: BinOp, ty: ScalarType, a: u64, b: u64) -> u64 {
    let w = ty.bits();
    let m = mask(w);
    let signed = ty.is_signed();
    let r = match op {
        BinOp::Add => a.wrapping_add(b),
        BinOp::Sub => a.wrapping_sub(b),
        BinOp::Mul => a.wrapping_mul(b),
        // Division by zero traps in the executor before getting here; the value
        // (all ones, as PTX div.u gives) is only for direct callers.
        BinOp::Div => {
            if b == 0 {
                u64::MAX
            } else if signed {
                sext(a, w).wrapping_div(sext(b, w)) as u64
            } else {
                a / b
            }
        }
        // Remainder by zero gives the dividend.
        BinOp::Rem => {
            if b == 0 {
                a
            } else if signed {
                sext(a, w).wrapping_rem(sext(b, w)) as u64
            } else {
                a % b
            }
        }
        BinOp::Min | BinOp::Max => {
            let less = if signed {
                sext(a, w) < sext(b, w)
            } else {
                a < b
            };
            if less == (op == BinOp::Min) {
                a
            } else {
                b
            }
        }
        BinOp::And => a & b,
        BinOp::Or => a | b,
        BinOp::Xor => a ^ b,
        // Shift amounts are unsigned and clamp at the width (PTX shl/shr).
        BinOp::Shl => {
            if b >= u64::from(w) {
                0
            } else {
                a << b
            }
        }
        BinOp::Shr => {
            if signed {
                let amt = b.min(u64::from(w) - 1);
                (sext(a, w) >> amt) as u64
            } else if b >= u64::from(w) {
                0
            } else {
                a >> b
            }
        }
    };
    r & m
}

/// A unary op (defined by [`unop_defined`]). Math functions are computed in
/// f64 and rounded once to the type.
#[inline]
pub fn unary(op: UnOp, ty: ScalarType, a: u64) -> u64 {
    if ty.is_float() {
        if ty == ScalarType::F32 {
            let x = f32::from_bits(a as u32);
            let r = match op {
                UnOp::Neg => -x,
                UnOp::Abs => x.abs(),
                UnOp::Sqrt => x.sqrt(),
                UnOp::Floor => x.floor(),
                UnOp::Ceil => x.ceil(),
                _ => return float_from_f64(ty, float_math(op, f64::from(x))),
            };
            return u64::from(r.to_bits());
        }
        let x = to_f64(ty, a);
        return match op {
            // Sign-bit ops are exact on the bits (also for NaN).
            UnOp::Neg => a ^ (1u64 << (ty.bits() - 1)),
            UnOp::Abs => a & !(1u64 << (ty.bits() - 1)),
            _ => float_from_f64(ty, float_math(op, x)),
        };
    }
    let w = ty.bits();
    let m = mask(w);
    match op {
        UnOp::Neg => a.wrapping_neg() & m,
        UnOp::Not => !a & m,
        UnOp::Abs => {
            if ty.is_signed() {
                (sext(a, w).wrapping_abs() as u64) & m
            } else {
                a
            }
        }
        // Bit ops see the type's bits, whatever its signedness.
        UnOp::Popc => u64::from((a & m).count_ones()),
        UnOp::Clz => u64::from((a & m).leading_zeros() - (64 - w)),
        UnOp::Brev => (a & m).reverse_bits() >> (64 - w),
        UnOp::Bfind => match a & m {
            0 => m,
            x => u64::from(63 - x.leading_zeros()),
        },
        _ => a,
    }
}

fn float_math(op: UnOp, x: f64) -> f64 {
    match op {
        UnOp::Neg => -x,
        UnOp::Abs => x.abs(),
        UnOp::Sqrt => x.sqrt(),
        UnOp::Rsqrt => 1.0 / x.sqrt(),
        UnOp::Exp => x.exp(),
        UnOp::Log => x.ln(),
        UnOp::Sin => x.sin(),
        UnOp::Cos => x.cos(),
        UnOp::Tanh => x.tanh(),
        UnOp::Floor => x.floor(),
        UnOp::Ceil => x.ceil(),
        UnOp::Not | UnOp::Popc | UnOp::Clz | UnOp::Brev | UnOp::Bfind => f64::NAN,
    }
}

/// Fused multiply-add with a single rounding for f32/f64.
#[inline]
pub fn fma(ty: ScalarType, a: u64, b: u64, c: u64) -> u64 {
    match ty {
        ScalarType::F32 => {
            let r = f32::from_bits(a as u32)
                .mul_add(f32::from_bits(b as u32), f32::from_bits(c as u32));
            u64::from(r.to_bits())
        }
        ScalarType::F64 => f64::from_bits(a)
            .mul_add(f64::from_bits(b), f64::from_bits(c))
            .to_bits(),
        // The product of two f16/bf16 is exact in f64; the sum is rounded to f64, then to the type.
        _ => float_from_f64(ty, to_f64(ty, a).mul_add(to_f64(ty, b), to_f64(ty, c))),
    }
}

/// Comparison; float comparisons are ordered except `ne`.
#[inline]
pub fn compare(op: CmpOp, ty: ScalarType, a: u64, b: u64) -> bool {
    if ty.is_float() {
        let (x, y) = if ty == ScalarType::F32 {
            (
                f64::from(f32::from_bits(a as u32)),
                f64::from(f32::from_bits(b as u32)),
            )
        } else {
            (to_f64(ty, a), to_f64(ty, b))
        };
        return match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            CmpOp::Lt => x < y,
            CmpOp::Le => x <= y,
            CmpOp::Gt => x > y,
            CmpOp::Ge => x >= y,
        };
    }
    let ord = if ty.is_signed() {
        let w = ty.bits();
        sext(a, w).cmp(&sext(b, w))
    } else {
        a.cmp(&b)
    };
    match op {
        CmpOp::Eq => ord.is_eq(),
        CmpOp::Ne => ord.is_ne(),
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Le => ord.is_le(),
        CmpOp::Gt => ord.is_gt(),
        CmpOp::Ge => ord.is_ge(),
    }
}

/// Numeric conversion. Float to int truncates toward zero and saturates (NaN
/// gives 0), as PTX `cvt.rzi.sat`; int to float rounds to nearest even; bool
/// converts to 0/1 and anything to bool is `!= 0`.
pub fn cast(from: ScalarType, to: ScalarType, a: u64) -> u64 {
    if from == to {
        return a;
    }
    if to == ScalarType::Bool {
        return u64::from(if from.is_float() {
            to_f64(from, a) != 0.0
        } else {
            a != 0
        });
    }
    if from.is_float() {
        let x = to_f64(from, a);
        if to.is_float() {
            return float_from_f64(to, x);
        }
        // `as` saturates and maps NaN to 0.
        let m = mask(to.bits());
        return match to {
            ScalarType::I8 => (x as i8) as u64 & m,
            ScalarType::I16 => (x as i16) as u64 & m,
            ScalarType::I32 => (x as i32) as u64 & m,
            ScalarType::I64 => (x as i64) as u64,
            ScalarType::U8 => u64::from(x as u8),
            ScalarType::U16 => u64::from(x as u16),
            ScalarType::U32 => u64::from(x as u32),
            _ => x as u64,
        };
    }
    // From an integer or bool.
    let wide: i128 = if from.is_signed() {
        i128::from(sext(a, from.bits()))
    } else {
        i128::from(a)
    };
    if to.is_float() {
        return match to {
            ScalarType::F64 => (wide as f64).to_bits(),
            ScalarType::F32 => u64::from((wide as f32).to_bits()),
            // Exact through f64 for |x| <= 2^53; beyond that the value
            // overflows f16 anyway and bf16 may see a double rounding.
            _ => float_from_f64(to, wide as f64),
        };
    }
    (wide as u64) & mask(to.bits())
}

/// Bits of `x` as a value of `ty` for constants given as f64 / i64.
pub fn const_bits(ty: ScalarType, c: zyntax_hir::ConstValue) -> u64 {
    match c {
        zyntax_hir::ConstValue::Bool(b) => u64::from(b),
        zyntax_hir::ConstValue::Int(v) => {
            if ty.is_float() {
                float_from_f64(ty, v as f64)
            } else {
                (v as u64) & mask(ty.bits())
            }
        }
        zyntax_hir::ConstValue::Float(bits) => {
            let x = f64::from_bits(bits);
            if ty.is_float() {
                float_from_f64(ty, x)
            } else {
                cast(ScalarType::F64, ty, bits)
            }
        }
    }
}

/// The position or length operand of `bfe`/`bfi`: its low 8 bits for 32-bit
/// operands, as PTX defines it; the whole u32 for 64-bit operands, as the
/// hardware does (an H200 returned 0 from `bfe.u64` at pos 280 and a wider
/// field at len 300, where the low 8 bits would give 24 and 44: measured by
/// tests/gpu/test_warp_sync_gpu.py).
fn bit_field(w: u32, v: u64) -> u64 {
    if w == 64 {
        v & 0xffff_ffff
    } else {
        v & 0xff
    }
}

/// `bfe`, `bfi`, `prmt` (default mode) and `shf.*` as PTX defines them
/// (`docs/semantics.md`). `ty` is the integer type of the result (`bfe`, `bfi`)
/// or u32; `x` holds the operands in table order.
pub fn bits(op: BitOp, ty: ScalarType, x: [u64; 4]) -> u64 {
    let w = ty.bits();
    let m = mask(w);
    match op {
        BitOp::Bfe => {
            let (a, pos, len) = (x[0] & m, bit_field(w, x[1]), bit_field(w, x[2]));
            let msb = u64::from(w - 1);
            // The sign bit: bit min(pos+len-1, msb) of a, for signed types and len > 0.
            let sbit = if ty.is_signed() && len > 0 {
                (a >> (pos + len - 1).min(msb)) & 1
            } else {
                0
            };
            let mut d = 0u64;
            for i in 0..=msb {
                let bit = if i < len && pos + i <= msb {
                    (a >> (pos + i)) & 1
                } else {
                    sbit
                };
                d |= bit << i;
            }
            d
        }
        BitOp::Bfi => {
            let (a, mut f, pos, len) = (x[0] & m, x[1] & m, bit_field(w, x[2]), bit_field(w, x[3]));
            let msb = u64::from(w - 1);
            let mut i = 0;
            while i < len && pos + i <= msb {
                f = (f & !(1 << (pos + i))) | (((a >> i) & 1) << (pos + i));
                i += 1;
            }
            f
        }
        BitOp::Prmt => {
            let src = (x[0] & 0xffff_ffff) | ((x[1] & 0xffff_ffff) << 32);
            let mut d = 0u64;
            for k in 0..4 {
                let sel = (x[2] >> (4 * k)) & 0xf;
                let byte = (src >> (8 * (sel & 7))) & 0xff;
                let out = if sel & 8 != 0 {
                    if byte & 0x80 != 0 {
                        0xff
                    } else {
                        0
                    }
                } else {
                    byte
                };
                d |= out << (8 * k);
            }
            d
        }
        BitOp::ShfLWrap | BitOp::ShfLClamp | BitOp::ShfRWrap | BitOp::ShfRClamp => {
            let wide = (x[0] & 0xffff_ffff) | ((x[1] & 0xffff_ffff) << 32);
            let n = match op {
                BitOp::ShfLWrap | BitOp::ShfRWrap => x[2] & 31,
                _ => (x[2] & 0xffff_ffff).min(32),
            };
            match op {
                BitOp::ShfLWrap | BitOp::ShfLClamp => ((wide << n) >> 32) & 0xffff_ffff,
                _ => (wide >> n) & 0xffff_ffff,
            }
        }
    }
}

// ---------------------------------------------------------------- decoding

/// Decode a scalar, packed-vector or bit op.
pub(crate) fn decode_scalar(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::Const(c) => {
            let Some(s) = ic.res_ty(0).as_scalar() else {
                return ic.bad("constant of non-scalar type");
            };
            DOp::Const {
                dst: ic.res(0)?,
                bits: const_bits(s, *c),
            }
        }
        Op::Binary(op) => match ic.arg_ty(0) {
            Type::Scalar(s) if binop_defined(*op, s) => DOp::Bin {
                op: *op,
                ty: s,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
            },
            t @ Type::Vector(s, _) if binop_defined(*op, s) => DOp::BinV {
                op: *op,
                mt: MemTy::of(&t).unwrap_or(MemTy {
                    elem: s,
                    n: 1,
                    size: 1,
                    align: 1,
                }),
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
            },
            t => return ic.bad(format!("`{op}` is not defined on {t}")),
        },
        Op::Unary(op) => match ic.arg_ty(0) {
            Type::Scalar(s) if unop_defined(*op, s) => DOp::Un {
                op: *op,
                ty: s,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
            },
            t @ Type::Vector(s, _) if unop_defined(*op, s) => DOp::UnV {
                op: *op,
                mt: MemTy::of(&t).unwrap_or(MemTy {
                    elem: s,
                    n: 1,
                    size: 1,
                    align: 1,
                }),
                dst: ic.res(0)?,
                a: ic.arg(0)?,
            },
            t => return ic.bad(format!("`{op}` is not defined on {t}")),
        },
        Op::Fma => match ic.arg_ty(0) {
            Type::Scalar(s) if s.is_float() => DOp::Fma {
                ty: s,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
                c: ic.arg(2)?,
            },
            t @ Type::Vector(s, _) if s.is_float() => DOp::FmaV {
                mt: MemTy::of(&t).ok_or_else(|| InterpError::Internal("fma vector".into()))?,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
                c: ic.arg(2)?,
            },
            t => return ic.bad(format!("fma on {t}")),
        },
        Op::Cmp(op) => match ic.arg_ty(0) {
            Type::Scalar(s) => DOp::Cmp {
                op: *op,
                ty: s,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
            },
            // Pointers compare by their encoding (equality is exact; order only within one allocation).
            Type::Ptr(..) => DOp::Cmp {
                op: *op,
                ty: ScalarType::U64,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
            },
            t => return ic.bad(format!("comparison of {t}")),
        },
        Op::Select => DOp::Select {
            dst: ic.res(0)?,
            cond: ic.arg(0)?,
            a: ic.arg(1)?,
            b: ic.arg(2)?,
            n: ic.res_slots(),
        },
        Op::Cast => match (ic.arg_ty(0), ic.res_ty(0)) {
            (Type::Scalar(a), Type::Scalar(b)) => DOp::Cast {
                from: a,
                to: b,
                dst: ic.res(0)?,
                a: ic.arg(0)?,
            },
            (a, b) => return ic.bad(format!("cast from {a} to {b}")),
        },
        Op::Bitcast => {
            let (a, b) = (ic.arg_ty(0), ic.res_ty(0));
            if a.size_bytes() != b.size_bytes() || a.is_bool() != b.is_bool() {
                return ic.bad(format!("bitcast from {a} to {b}"));
            }
            DOp::Copy {
                dst: ic.res(0)?,
                a: ic.arg(0)?,
                n: ic.res_slots(),
            }
        }
        Op::Extract(lane) | Op::Insert(lane) => {
            let t = ic.arg_ty(0);
            let Some(mt) = MemTy::of(&t).filter(|_| matches!(t, Type::Vector(..))) else {
                return ic.bad("extract/insert needs a vector");
            };
            if *lane >= mt.n {
                return ic.bad("lane out of range");
            }
            if matches!(ic.d.op, Op::Extract(_)) {
                DOp::Extract {
                    mt,
                    lane: *lane,
                    dst: ic.res(0)?,
                    v: ic.arg(0)?,
                }
            } else {
                DOp::Insert {
                    mt,
                    lane: *lane,
                    dst: ic.res(0)?,
                    v: ic.arg(0)?,
                    s: ic.arg(1)?,
                }
            }
        }
        Op::Bits(op) => {
            let Some(ty) = ic
                .arg_ty(if *op == BitOp::Bfi { 1 } else { 0 })
                .as_scalar()
                .filter(|s| s.is_int())
            else {
                return ic.bad(format!("`{op}` on a non-integer"));
            };
            let mut a = [0u32; 4];
            for (i, slot) in a.iter_mut().enumerate().take(ic.d.args.len()) {
                *slot = ic.arg(i)?;
            }
            DOp::Bits {
                op: *op,
                ty,
                dst: ic.res(0)?,
                a,
            }
        }
        Op::Approx(op) => DOp::Approx {
            op: *op,
            dst: ic.res(0)?,
            a: ic.arg(0)?,
        },
        _ => return Err(InterpError::Internal("not a scalar op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Execute a scalar, packed-vector or bit op for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_scalar(&mut self, wi: usize, pc: u32, mask: u32, op: &DOp) -> Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        match op {
            DOp::Const { dst, bits } => {
                for l in lanes(mask) {
                    w(regs, *dst, l, *bits);
                }
            }
            DOp::Bin { op, ty, dst, a, b } => {
                let (op, ty) = (*op, *ty);
                // Integer division by zero traps, as the lowering does (`trap;`).
                if matches!(op, BinOp::Div | BinOp::Rem) && !ty.is_float() {
                    for l in lanes(mask) {
                        if r(regs, *b, l) == 0 {
                            return Err(ctx.trap(
                                TrapKind::DivisionByZero,
                                pc,
                                base + l as u32,
                                format!("integer {op} by zero"),
                            ));
                        }
                    }
                }
                if mask == u32::MAX {
                    let (d0, a0, b0) = (*dst as usize * 32, *a as usize * 32, *b as usize * 32);
                    for l in 0..32 {
                        regs[d0 + l] = binary(op, ty, regs[a0 + l], regs[b0 + l]);
                    }
                } else {
                    for l in lanes(mask) {
                        let v = binary(op, ty, r(regs, *a, l), r(regs, *b, l));
                        w(regs, *dst, l, v);
                    }
                }
            }
            DOp::BinV { op, mt, dst, a, b } => {
                if matches!(op, BinOp::Div | BinOp::Rem) && !mt.elem.is_float() {
                    for l in lanes(mask) {
                        if (0..mt.n).any(|i| vget(regs, *b, l, *mt, i) == 0) {
                            return Err(ctx.trap(
                                TrapKind::DivisionByZero,
                                pc,
                                base + l as u32,
                                format!("integer {op} by zero"),
                            ));
                        }
                    }
                }
                for l in lanes(mask) {
                    for i in 0..mt.n {
                        let v = binary(
                            *op,
                            mt.elem,
                            vget(regs, *a, l, *mt, i),
                            vget(regs, *b, l, *mt, i),
                        );
                        vset(regs, *dst, l, *mt, i, v);
                    }
                }
            }
            DOp::Un { op, ty, dst, a } => {
                for l in lanes(mask) {
                    let v = unary(*op, *ty, r(regs, *a, l));
                    w(regs, *dst, l, v);
                }
            }
            DOp::UnV { op, mt, dst, a } => {
                for l in lanes(mask) {
                    for i in 0..mt.n {
                        let v = unary(*op, mt.elem, vget(regs, *a, l, *mt, i));
                        vset(regs, *dst, l, *mt, i, v);
                    }
                }
            }
            DOp::Approx { op, dst, a } => {
                for l in lanes(mask) {
                    let v = warp_mma::approx(*op, r(regs, *a, l));
                    w(regs, *dst, l, v);
                }
            }
            DOp::Fma { ty, dst, a, b, c } => {
                for l in lanes(mask) {
                    let v = fma(*ty, r(regs, *a, l), r(regs, *b, l), r(regs, *c, l));
                    w(regs, *dst, l, v);
                }
            }
            DOp::FmaV { mt, dst, a, b, c } => {
                for l in lanes(mask) {
                    for i in 0..mt.n {
                        let (x, y, z) = (
                            vget(regs, *a, l, *mt, i),
                            vget(regs, *b, l, *mt, i),
                            vget(regs, *c, l, *mt, i),
                        );
                        vset(regs, *dst, l, *mt, i, fma(mt.elem, x, y, z));
                    }
                }
            }
            DOp::Cmp { op, ty, dst, a, b } => {
                for l in lanes(mask) {
                    let v = compare(*op, *ty, r(regs, *a, l), r(regs, *b, l));
                    w(regs, *dst, l, u64::from(v));
                }
            }
            DOp::Select { dst, cond, a, b, n } => {
                for l in lanes(mask) {
                    let src = if r(regs, *cond, l) & 1 != 0 { *a } else { *b };
                    for k in 0..*n {
                        let v = r(regs, src + k, l);
                        w(regs, dst + k, l, v);
                    }
                }
            }
            DOp::Cast { from, to, dst, a } => {
                for l in lanes(mask) {
                    let v = cast(*from, *to, r(regs, *a, l));
                    w(regs, *dst, l, v);
                }
            }
            DOp::Copy { dst, a, n } => {
                for l in lanes(mask) {
                    for k in 0..*n {
                        let v = r(regs, a + k, l);
                        w(regs, dst + k, l, v);
                    }
                }
            }
            DOp::Extract { mt, lane, dst, v } => {
                for l in lanes(mask) {
                    let x = vget(regs, *v, l, *mt, *lane);
                    w(regs, *dst, l, x);
                }
            }
            DOp::Insert {
                mt,
                lane,
                dst,
                v,
                s,
            } => {
                for l in lanes(mask) {
                    for k in 0..mt.slots() {
                        let x = r(regs, v + k, l);
                        w(regs, dst + k, l, x);
                    }
                    let x = r(regs, *s, l);
                    vset(regs, *dst, l, *mt, *lane, x);
                }
            }
            DOp::Bits { op, ty, dst, a } => {
                for l in lanes(mask) {
                    let x = a.map(|s| r(regs, s, l));
                    w(regs, *dst, l, bits(*op, *ty, x));
                }
            }
            _ => return Err(InterpError::Internal("not a scalar op".into())),
        }
        Ok(Flow::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_wrap_and_div0() {
        assert_eq!(binary(BinOp::Add, ScalarType::U8, 200, 100), 44);
        assert_eq!(binary(BinOp::Div, ScalarType::U32, 7, 0), 0xffff_ffff);
        assert_eq!(binary(BinOp::Div, ScalarType::I32, 7, 0), 0xffff_ffff);
        assert_eq!(binary(BinOp::Rem, ScalarType::I32, 7, 0), 7);
        let min = 0x8000_0000u64;
        assert_eq!(binary(BinOp::Div, ScalarType::I32, min, 0xffff_ffff), min);
        assert_eq!(binary(BinOp::Shr, ScalarType::I32, min, 40), 0xffff_ffff);
        assert_eq!(binary(BinOp::Shl, ScalarType::U32, 1, 32), 0);
        assert_eq!(binary(BinOp::Min, ScalarType::I8, 0xff, 1), 0xff);
        assert_eq!(binary(BinOp::Min, ScalarType::U8, 0xff, 1), 1);
    }

    #[test]
    fn floats() {
        let h = |x: f32| u64::from(f16::from_f32(x).to_bits());
        // 1 + 2^-11 is a tie in f16: rounds to even (1.0).
        let r = binary(
            BinOp::Add,
            ScalarType::F16,
            h(1.0),
            u64::from(f16::from_f64(2f64.powi(-11)).to_bits()),
        );
        assert_eq!(r, h(1.0));
        assert_eq!(
            cast(
                ScalarType::F32,
                ScalarType::I32,
                u64::from(f32::NAN.to_bits())
            ),
            0
        );
        assert_eq!(
            cast(ScalarType::F32, ScalarType::U8, u64::from(300f32.to_bits())),
            255
        );
        assert!(compare(
            CmpOp::Ne,
            ScalarType::F32,
            u64::from(f32::NAN.to_bits()),
            0
        ));
        assert!(!compare(
            CmpOp::Eq,
            ScalarType::F32,
            u64::from(f32::NAN.to_bits()),
            u64::from(f32::NAN.to_bits())
        ));
        let nz = u64::from((-0.0f32).to_bits());
        assert_eq!(binary(BinOp::Min, ScalarType::F32, 0, nz), nz);
        assert_eq!(binary(BinOp::Max, ScalarType::F32, nz, 0), 0);
    }
}
