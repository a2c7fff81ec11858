//! Every integer binary op on every integer type, and float ops on f32/f64,
//! against Rust's native arithmetic on random operands.

mod common;

use common::*;
use zyntax_hir::*;
use zyntax_interp::{Arg, Interpreter};

/// A host function returning `op(a, b)` for every binary op the type has
/// (floats: add, sub, mul, div, min, max).
fn all_binops(t: ScalarType) -> Module {
    let ty = Type::Scalar(t);
    let ops: Vec<BinOp> = BinOp::ALL
        .iter()
        .copied()
        .filter(|op| {
            t.is_int()
                || !matches!(
                    op,
                    BinOp::Rem | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr
                )
        })
        .collect();
    let rets = vec![ty.clone(); ops.len()];
    let mut b = FunctionBuilder::host("f", &[ty.clone(), ty.clone()], &rets);
    let (x, y) = (b.param(0), b.param(1));
    let mut outs = Vec::new();
    for op in &ops {
        outs.push(b.binary(*op, x, y).unwrap());
    }
    b.ret(&outs).unwrap();
    let mut m = Module::new("ops");
    m.functions.push(b.finish().unwrap());
    m
}

macro_rules! int_ref {
    ($t:ty, $u:ty, $a:expr, $b:expr) => {{
        let (a, b) = ($a as $t, $b as $t);
        let bits = <$t>::BITS;
        let sh = b as $u as u64; // shift amounts are unsigned
        vec![
            a.wrapping_add(b) as i128,
            a.wrapping_sub(b) as i128,
            a.wrapping_mul(b) as i128,
            a.wrapping_div(b) as i128,
            a.wrapping_rem(b) as i128,
            a.min(b) as i128,
            a.max(b) as i128,
            (a & b) as i128,
            (a | b) as i128,
            (a ^ b) as i128,
            if sh >= u64::from(bits) {
                0
            } else {
                a.wrapping_shl(sh as u32)
            } as i128,
            if sh >= u64::from(bits) {
                if a < (0 as $t) {
                    (-1i64) as $t
                } else {
                    0
                }
            } else {
                a.wrapping_shr(sh as u32)
            } as i128,
        ]
    }};
}

#[test]
fn integer_ops_on_every_type() {
    let mut rng = Rng::new(51);
    for t in [
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
    ] {
        let m = all_binops(t);
        let it = Interpreter::new(&m).unwrap();
        for round in 0..200 {
            let bits = t.bits();
            let raw = |r: &mut Rng| -> i128 {
                let v = r.next_u64() >> (64 - bits);
                // Small values often, to hit shifts in range and equal operands.
                let v = if r.below(3) == 0 { v % 40 } else { v };
                if t.is_signed() {
                    i128::from(((v << (64 - bits)) as i64) >> (64 - bits))
                } else {
                    i128::from(v)
                }
            };
            let a = raw(&mut rng);
            let mut b = raw(&mut rng);
            if b == 0 {
                b = 1;
            }
            if round == 0 && t.is_signed() {
                // MIN / -1 wraps.
                let min = -(1i128 << (bits - 1));
                let r = it
                    .call("f", &[Arg::Int(min), Arg::Int(-1)], &mut [])
                    .unwrap();
                assert_eq!(r[3].as_i128(), Some(min), "{t} MIN / -1");
                assert_eq!(r[4].as_i128(), Some(0), "{t} MIN % -1");
            }
            let r = it.call("f", &[Arg::Int(a), Arg::Int(b)], &mut []).unwrap();
            let got: Vec<i128> = r.iter().map(|v| v.as_i128().unwrap()).collect();
            let want = match t {
                ScalarType::I8 => int_ref!(i8, u8, a, b),
                ScalarType::I16 => int_ref!(i16, u16, a, b),
                ScalarType::I32 => int_ref!(i32, u32, a, b),
                ScalarType::I64 => int_ref!(i64, u64, a, b),
                ScalarType::U8 => int_ref!(u8, u8, a, b),
                ScalarType::U16 => int_ref!(u16, u16, a, b),
                ScalarType::U32 => int_ref!(u32, u32, a, b),
                _ => int_ref!(u64, u64, a, b),
            };
            assert_eq!(got, want, "{t} a={a} b={b}");
        }
    }
}

#[test]
fn float_ops_are_ieee() {
    let mut rng = Rng::new(52);
    let m32 = all_binops(ScalarType::F32);
    let m64 = all_binops(ScalarType::F64);
    let (i32_, i64_) = (
        Interpreter::new(&m32).unwrap(),
        Interpreter::new(&m64).unwrap(),
    );
    let specials = [
        0.0f64,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -3.5,
    ];
    for round in 0..300 {
        let (a, b) = if round < 49 {
            (specials[round % 7], specials[round / 7])
        } else {
            (
                f64::from(rng.f32(-1e3, 1e3)),
                f64::from(rng.f32(-10.0, 10.0)),
            )
        };
        let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
        // f32: min/max return the non-NaN operand; -0 < +0.
        let (fa, fb) = (a as f32, b as f32);
        let mn = |x: f32, y: f32| {
            if x.is_nan() {
                y
            } else if y.is_nan() {
                x
            } else if x == y {
                if x.is_sign_negative() {
                    x
                } else {
                    y
                }
            } else {
                x.min(y)
            }
        };
        let mx = |x: f32, y: f32| {
            if x.is_nan() {
                y
            } else if y.is_nan() {
                x
            } else if x == y {
                if x.is_sign_negative() {
                    y
                } else {
                    x
                }
            } else {
                x.max(y)
            }
        };
        let want32 = [fa + fb, fa - fb, fa * fb, fa / fb, mn(fa, fb), mx(fa, fb)];
        let r = i32_
            .call("f", &[Arg::Float(a), Arg::Float(b)], &mut [])
            .unwrap();
        for (k, (g, w)) in r.iter().zip(want32).enumerate() {
            let g = g.as_f64().unwrap();
            assert!(
                same(g, f64::from(w)),
                "f32 op {k}: {a} {b}: got {g}, want {w}"
            );
        }
        let want64 = [a + b, a - b, a * b, a / b];
        let r = i64_
            .call("f", &[Arg::Float(a), Arg::Float(b)], &mut [])
            .unwrap();
        for (k, (g, w)) in r.iter().zip(want64).enumerate() {
            let g = g.as_f64().unwrap();
            assert!(same(g, w), "f64 op {k}: {a} {b}: got {g}, want {w}");
        }
    }
}

const NUMERIC: [ScalarType; 10] = [
    ScalarType::I8,
    ScalarType::I16,
    ScalarType::I32,
    ScalarType::I64,
    ScalarType::U8,
    ScalarType::U16,
    ScalarType::U32,
    ScalarType::U64,
    ScalarType::F32,
    ScalarType::F64,
];

/// `x as T` for every numeric T, as (is_float, i128 value or f64 bits).
macro_rules! casts {
    ($x:expr) => {{
        let x = $x;
        vec![
            (false, x as i8 as i128),
            (false, x as i16 as i128),
            (false, x as i32 as i128),
            (false, x as i64 as i128),
            (false, x as u8 as i128),
            (false, x as u16 as i128),
            (false, x as u32 as i128),
            (false, x as u64 as i128),
            (true, f64::from(x as f32).to_bits() as i128),
            (true, (x as f64).to_bits() as i128),
        ]
    }};
}

#[test]
fn casts_between_every_numeric_type() {
    let mut rng = Rng::new(53);
    for from in NUMERIC {
        let targets: Vec<ScalarType> = NUMERIC.to_vec();
        let rets: Vec<Type> = targets.iter().map(|t| Type::Scalar(*t)).collect();
        let mut b = FunctionBuilder::host("c", &[Type::Scalar(from)], &rets);
        let x = b.param(0);
        let outs: Vec<ValueId> = targets
            .iter()
            .map(|t| {
                if *t == from {
                    x
                } else {
                    b.cast(x, Type::Scalar(*t)).unwrap()
                }
            })
            .collect();
        b.ret(&outs).unwrap();
        let mut m = Module::new("casts");
        m.functions.push(b.finish().unwrap());
        let it = Interpreter::new(&m).unwrap();
        for round in 0..100 {
            let r64 = rng.next_u64();
            let fval = match round % 4 {
                0 => f64::from(rng.f32(-300.0, 300.0)),
                1 => f64::from(rng.f32(-5e9, 5e9)),
                2 => [f64::NAN, f64::INFINITY, -1e30, 1e30, -0.0, 255.5, -128.5][round / 4 % 7],
                _ => (r64 as i64) as f64,
            };
            let bits = from.bits();
            let ival: i128 = if from.is_signed() {
                i128::from(((r64 << (64 - bits)) as i64) >> (64 - bits))
            } else {
                i128::from(r64 >> (64 - bits))
            };
            let (arg, want) = match from {
                ScalarType::I8 => (Arg::Int(ival), casts!(ival as i8)),
                ScalarType::I16 => (Arg::Int(ival), casts!(ival as i16)),
                ScalarType::I32 => (Arg::Int(ival), casts!(ival as i32)),
                ScalarType::I64 => (Arg::Int(ival), casts!(ival as i64)),
                ScalarType::U8 => (Arg::Int(ival), casts!(ival as u8)),
                ScalarType::U16 => (Arg::Int(ival), casts!(ival as u16)),
                ScalarType::U32 => (Arg::Int(ival), casts!(ival as u32)),
                ScalarType::U64 => (Arg::Int(ival), casts!(ival as u64)),
                ScalarType::F32 => (Arg::Float(fval), casts!(fval as f32)),
                _ => (Arg::Float(fval), casts!(fval)),
            };
            let r = it.call("c", &[arg], &mut []).unwrap();
            for ((v, (is_f, w)), t) in r.iter().zip(want).zip(&targets) {
                let got = if is_f {
                    v.as_f64().unwrap().to_bits() as i128
                } else {
                    v.as_i128().unwrap()
                };
                let nan_ok = is_f
                    && f64::from_bits(got as u64).is_nan()
                    && f64::from_bits(w as u64).is_nan();
                assert!(
                    got == w || nan_ok,
                    "{from} -> {t}: arg {arg:?}: got {got}, want {w}"
                );
            }
        }
    }
}

#[test]
fn unary_ops() {
    let mut rng = Rng::new(54);
    // Integers: neg, not, abs (wrapping at the minimum).
    let mut b = FunctionBuilder::host("i", &[Type::I32], &[Type::I32, Type::I32, Type::I32]);
    let x = b.param(0);
    let outs = [UnOp::Neg, UnOp::Not, UnOp::Abs].map(|op| b.unary(op, x).unwrap());
    b.ret(&outs).unwrap();
    // f32: exact ops bit for bit; math functions within 1 ulp of f64 math.
    let exact = [UnOp::Neg, UnOp::Abs, UnOp::Sqrt, UnOp::Floor, UnOp::Ceil];
    let math = [
        UnOp::Rsqrt,
        UnOp::Exp,
        UnOp::Log,
        UnOp::Sin,
        UnOp::Cos,
        UnOp::Tanh,
    ];
    let n = exact.len() + math.len();
    let mut b2 = FunctionBuilder::host("f", &[Type::F32], &vec![Type::F32; n]);
    let y = b2.param(0);
    let outs2: Vec<ValueId> = exact
        .iter()
        .chain(&math)
        .map(|op| b2.unary(*op, y).unwrap())
        .collect();
    b2.ret(&outs2).unwrap();
    let mut m = Module::new("un");
    m.functions.push(b.finish().unwrap());
    m.functions.push(b2.finish().unwrap());
    let it = Interpreter::new(&m).unwrap();
    for v in [
        0i32,
        1,
        -1,
        i32::MIN,
        i32::MAX,
        rng.u32() as i32,
        rng.u32() as i32,
    ] {
        let r = it.call("i", &[Arg::Int(v.into())], &mut []).unwrap();
        let got: Vec<i128> = r.iter().map(|x| x.as_i128().unwrap()).collect();
        let want = [v.wrapping_neg(), !v, v.wrapping_abs()].map(i128::from);
        assert_eq!(got, want, "{v}");
    }
    for _ in 0..200 {
        let v = rng.f32(0.01, 20.0) * if rng.below(2) == 0 { -1.0 } else { 1.0 };
        let r = it.call("f", &[Arg::Float(v.into())], &mut []).unwrap();
        let got: Vec<f32> = r.iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let want_exact = [-v, v.abs(), v.sqrt(), v.floor(), v.ceil()];
        for (k, (g, w)) in got.iter().zip(want_exact).enumerate() {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "exact op {k} of {v}: {g} vs {w}"
            );
        }
        let x = f64::from(v);
        let want_math = [1.0 / x.sqrt(), x.exp(), x.ln(), x.sin(), x.cos(), x.tanh()];
        for (k, (g, w)) in got[exact.len()..].iter().zip(want_math).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "math op {k} of {v}");
            } else {
                assert_eq!(*g, w as f32, "math op {k} of {v}: rounded once from f64");
            }
        }
    }
}
