//! Packed pair conversions (`cvt_pack`, `cvt_unpack`; issue 12 item 3):
//! exact round-to-nearest-even from f32, fp8 saturated to the largest finite
//! value (`.satfinite`). Definitions in `docs/semantics.md`.

use crate::decode::{DOp, InstCx};
use crate::exec::{lanes, r, w, Exec, Flow};
use crate::{InterpError, Result};
use half::{bf16, f16};
use zyntax_hir::{Op, PackFmt};

/// Exponent and mantissa widths, bias-derived minimum normal exponent and
/// largest finite value of an fp8 format.
struct Fp8 {
    mbits: i32,
    emin: i32,
    max: f64,
}

const E4M3: Fp8 = Fp8 {
    mbits: 3,
    emin: -6,
    max: 448.0,
};
const E5M2: Fp8 = Fp8 {
    mbits: 2,
    emin: -14,
    max: 57344.0,
};

/// `x` as fp8 bits: round to nearest even, |x| above the largest finite value
/// (infinity included) saturates to it, NaN gives 0x7f (with x's sign bit).
pub fn to_fp8(x: f32, e5m2: bool) -> u8 {
    let f = if e5m2 { &E5M2 } else { &E4M3 };
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    if x.is_nan() {
        return sign | 0x7f;
    }
    let a = f64::from(x.abs());
    if a == 0.0 {
        return sign;
    }
    // Every f32 (subnormals too) is a normal f64: its exponent is exact.
    let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let e = e.max(f.emin);
    let quantum = 2f64.powi(e - f.mbits);
    // a / quantum is exact (a power-of-two scaling); n < 2^(mbits+2).
    let n = (a / quantum).round_ties_even();
    if a.is_infinite() || n * quantum > f.max {
        return sign | encode(f, f.max);
    }
    // Below the normal range the exponent field is 0 and n the mantissa;
    // n reaching 2^mbits (or 2^(mbits+1)) carries into the exponent field.
    let bits = (((e - f.emin) as i64) << f.mbits) + n as i64;
    sign | bits as u8
}

/// Bits of a finite positive value exactly representable in `f`.
fn encode(f: &Fp8, v: f64) -> u8 {
    let e = (((v.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(f.emin);
    let n = v / 2f64.powi(e - f.mbits);
    ((((e - f.emin) as i64) << f.mbits) + n as i64) as u8
}

/// The value of fp8 bits (exact in f64).
pub fn from_fp8(b: u8, e5m2: bool) -> f64 {
    let f = if e5m2 { &E5M2 } else { &E4M3 };
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let mag = b & 0x7f;
    if e5m2 && mag >= 0x7c {
        return if mag == 0x7c {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if !e5m2 && mag == 0x7f {
        return f64::NAN;
    }
    let field = i32::from(mag >> f.mbits);
    let m = f64::from(mag & ((1 << f.mbits) - 1));
    let v = if field == 0 {
        m * 2f64.powi(f.emin - f.mbits)
    } else {
        (1.0 + m / f64::from(1 << f.mbits)) * 2f64.powi(field - 1 + f.emin)
    };
    sign * v
}

/// `cvt_pack.<fmt> lo, hi`: the packed bits, `lo` in the low half.
pub fn cvt_pack(fmt: PackFmt, lo: f32, hi: f32) -> u64 {
    match fmt {
        PackFmt::F16x2 => {
            u64::from(f16::from_f32(lo).to_bits()) | u64::from(f16::from_f32(hi).to_bits()) << 16
        }
        PackFmt::Bf16x2 => {
            u64::from(bf16::from_f32(lo).to_bits()) | u64::from(bf16::from_f32(hi).to_bits()) << 16
        }
        PackFmt::E4m3x2 | PackFmt::E5m2x2 => {
            let e5 = fmt == PackFmt::E5m2x2;
            u64::from(to_fp8(lo, e5)) | u64::from(to_fp8(hi, e5)) << 8
        }
    }
}

/// `cvt_unpack.<fmt> a`: the fp8 pair in `a` as `vec<f16, 2>` bits (exact).
pub fn cvt_unpack(fmt: PackFmt, a: u64) -> u64 {
    let e5 = fmt == PackFmt::E5m2x2;
    let one = |b: u8| {
        let v = from_fp8(b, e5);
        if v.is_nan() {
            0x7fff
        } else {
            f16::from_f64(v).to_bits()
        }
    };
    u64::from(one(a as u8)) | u64::from(one((a >> 8) as u8)) << 16
}

// ---------------------------------------------------------------- decoding

/// Decode `cvt_pack` or `cvt_unpack`.
pub(crate) fn decode_pack(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::CvtPack(fmt) => DOp::CvtPack {
            fmt: *fmt,
            dst: ic.res(0)?,
            lo: ic.arg(0)?,
            hi: ic.arg(1)?,
        },
        Op::CvtUnpack(fmt) => DOp::CvtUnpack {
            fmt: *fmt,
            dst: ic.res(0)?,
            a: ic.arg(0)?,
        },
        _ => return Err(InterpError::Internal("not a pack op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Convert packed pairs (`cvt_pack`, `cvt_unpack`) for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_pack(&mut self, wi: usize, mask: u32, op: &DOp) -> Result<Flow> {
        let regs = &mut self.warps[wi].regs;
        match op {
            DOp::CvtPack { fmt, dst, lo, hi } => {
                for l in lanes(mask) {
                    let (a, b) = (r(regs, *lo, l) as u32, r(regs, *hi, l) as u32);
                    let v = cvt_pack(*fmt, f32::from_bits(a), f32::from_bits(b));
                    w(regs, *dst, l, v);
                }
            }
            DOp::CvtUnpack { fmt, dst, a } => {
                for l in lanes(mask) {
                    let v = cvt_unpack(*fmt, r(regs, *a, l));
                    w(regs, *dst, l, v);
                }
            }
            _ => return Err(InterpError::Internal("not a pack op".into())),
        }
        Ok(Flow::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_round_trip_every_code() {
        for e5 in [false, true] {
            for b in 0..=255u8 {
                let v = from_fp8(b, e5);
                if v.is_nan() || v.is_infinite() {
                    continue;
                }
                assert_eq!(to_fp8(v as f32, e5), b, "code {b:#x} e5m2={e5}");
            }
        }
    }

    #[test]
    fn fp8_saturates_and_rounds_to_even() {
        assert_eq!(to_fp8(1e9, false), 0x7e); // 448
        assert_eq!(to_fp8(f32::NEG_INFINITY, true), 0xfb); // -57344
        assert_eq!(to_fp8(f32::NAN, false), 0x7f);
        // 1 + 1/16 lies halfway between 1 and 1.125 in e4m3: ties to even (1.0).
        assert_eq!(to_fp8(1.0625, false), 0x38);
        assert_eq!(to_fp8(1.1875, false), 0x3a); // halfway 1.125/1.25 -> 1.25
                                                 // Smallest e4m3 subnormal is 2^-9; half of it ties to 0.
        assert_eq!(to_fp8(2f32.powi(-10), false), 0x00);
        assert_eq!(to_fp8(3.0 * 2f32.powi(-10), false), 0x02);
    }
}
