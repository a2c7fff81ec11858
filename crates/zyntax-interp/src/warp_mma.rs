//! Warp-level `mma.sync`, `ldmatrix` and `stmatrix` (issue 12 items 1-2):
//! PTX's per-lane fragment layouts and the numerics the interpreter defines
//! (docs/semantics.md, "Warp MMA").
//!
//! A lane's fragment is an ordinary value: inputs narrower than 64 bits are
//! packed into `u32` registers, element `i` in bits `[i*w, (i+1)*w)` of the
//! value (element 0 in the low half of register 0, as PTX packs `f16x2`).

use crate::decode::{DOp, InstCx};
use crate::exec::{mma_lanes, r, Ctx, Exec};
use crate::memory::Access;
use crate::scalar;
use crate::{InterpError, Result};
use zyntax_hir::{ApproxOp, MmaElem, Op, ScalarType, WarpShape};

/// The operand of `D = A * B + C` a fragment belongs to (C and D share a layout).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    C,
}

/// Elements of `operand` each lane holds.
pub fn count(shape: WarpShape, operand: Operand) -> u32 {
    let (m, n, k) = shape.dims();
    match operand {
        Operand::A => m * k / 32,
        Operand::B => k * n / 32,
        Operand::C => m * n / 32,
    }
}

/// `(row, col)` in the matrix of element `i` held by `lane` (for B: `(k, n)`).
/// `g = lane / 4` is PTX's groupID, `t = lane % 4` its threadID_in_group.
pub fn position(shape: WarpShape, operand: Operand, lane: u32, i: u32) -> (u32, u32) {
    let (g, t) = (lane >> 2, lane & 3);
    match (shape, operand) {
        (WarpShape::M8n8k4, Operand::A) => (g, t),
        (WarpShape::M8n8k4, Operand::B) => (t, g),
        (WarpShape::M8n8k4, Operand::C) => (g, 2 * t + i),
        (_, Operand::C) => (g + 8 * (i >> 1), 2 * t + (i & 1)),
        (WarpShape::M16n8k16, Operand::A) => {
            (g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2))
        }
        (WarpShape::M16n8k16, Operand::B) => (2 * t + (i & 1) + 8 * (i >> 1), g),
        (WarpShape::M16n8k8, Operand::A) => (g + 8 * (i & 1), t + 4 * (i >> 1)),
        (WarpShape::M16n8k8, Operand::B) => (t + 4 * i, g),
        (WarpShape::M16n8k32, Operand::A) => {
            (g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3))
        }
        (WarpShape::M16n8k32, Operand::B) => (4 * t + (i & 3) + 16 * (i >> 2), g),
    }
}

/// Decode an fp8 value: `e` exponent bits, `m` mantissa bits. e4m3 has no
/// infinities and one NaN pattern per sign (all ones); e5m2 is IEEE-like.
pub fn fp8_to_f64(bits: u64, e4m3: bool) -> f64 {
    let b = bits as u8;
    let (eb, mb, bias) = if e4m3 { (4, 3, 7) } else { (5, 2, 15) };
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((b >> mb) & ((1 << eb) - 1));
    let man = f64::from(b & ((1 << mb) - 1));
    let emax = (1 << eb) - 1;
    if e4m3 && exp == emax && man == 7.0 {
        return f64::NAN;
    }
    if !e4m3 && exp == emax {
        return if man == 0.0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if exp == 0 {
        sign * man * 2f64.powi(1 - bias - mb)
    } else {
        sign * (1.0 + man / f64::from(1 << mb)) * 2f64.powi(exp - bias)
    }
}

/// The value of one input element's bits. tf32 ignores the 13 low mantissa
/// bits of its f32 register, as the tensor cores do.
pub fn input_value(elem: MmaElem, bits: u64) -> f64 {
    match elem {
        MmaElem::F16 => scalar::to_f64(ScalarType::F16, bits),
        MmaElem::Bf16 => scalar::to_f64(ScalarType::BF16, bits),
        MmaElem::Tf32 => f64::from(f32::from_bits(bits as u32 & !0x1fff)),
        MmaElem::S8 => f64::from(bits as u8 as i8),
        MmaElem::U8 => f64::from(bits as u8),
        MmaElem::E4m3 => fp8_to_f64(bits, true),
        MmaElem::E5m2 => fp8_to_f64(bits, false),
        MmaElem::F64 => f64::from_bits(bits),
    }
}

/// Bits `[e*w, (e+1)*w)` of the packed value at `slot` of lane `l`.
fn get(regs: &[u64], slot: u32, l: usize, w: u32, e: u32) -> u64 {
    let bit = e * w;
    let v = regs[(slot + bit / 64) as usize * 32 + l];
    (v >> (bit % 64)) & scalar::mask(w)
}

fn set(regs: &mut [u64], slot: u32, l: usize, w: u32, e: u32, x: u64) {
    let bit = e * w;
    let idx = (slot + bit / 64) as usize * 32 + l;
    let m = scalar::mask(w) << (bit % 64);
    regs[idx] = (regs[idx] & !m) | ((x << (bit % 64)) & m);
}

/// `D = A * B + C` for the whole warp on register slots (all 32 lanes present).
///
/// Numerics: every input is exact in f64 and so is every product. Float
/// accumulators (f32, f16) get `c + sum_k a*b` summed in f64 in k order and
/// rounded once (round to nearest even); f64 is a chain of fused multiply-adds
/// in k order starting from c; s32 is exact and wraps modulo 2^32.
#[allow(clippy::too_many_arguments)]
pub fn mma_sync(regs: &mut [u64], elem: MmaElem, acc: ScalarType, a: u32, b: u32, c: u32, d: u32) {
    let shape = elem.shape();
    let (m, n, k) = shape.dims();
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let w = elem.bits();
    let aw = acc.bits();
    let mut am = vec![0.0; m * k];
    let mut bm = vec![0.0; k * n];
    let mut cm = vec![0u64; m * n];
    for lane in 0..32u32 {
        let l = lane as usize;
        for i in 0..count(shape, Operand::A) {
            let (r, col) = position(shape, Operand::A, lane, i);
            am[r as usize * k + col as usize] = input_value(elem, get(regs, a, l, w, i));
        }
        for i in 0..count(shape, Operand::B) {
            let (r, col) = position(shape, Operand::B, lane, i);
            bm[r as usize * n + col as usize] = input_value(elem, get(regs, b, l, w, i));
        }
        for i in 0..count(shape, Operand::C) {
            let (r, col) = position(shape, Operand::C, lane, i);
            cm[r as usize * n + col as usize] = get(regs, c, l, aw, i);
        }
    }
    let mut dm = vec![0u64; m * n];
    for i in 0..m {
        for j in 0..n {
            let cv = cm[i * n + j];
            dm[i * n + j] = match acc {
                ScalarType::I32 => {
                    let mut s = i64::from(cv as u32 as i32);
                    for kk in 0..k {
                        s += (am[i * k + kk] * bm[kk * n + j]) as i64;
                    }
                    u64::from(s as u32)
                }
                ScalarType::F64 => {
                    let mut s = f64::from_bits(cv);
                    for kk in 0..k {
                        s = am[i * k + kk].mul_add(bm[kk * n + j], s);
                    }
                    s.to_bits()
                }
                _ => {
                    let mut s = scalar::to_f64(acc, cv);
                    for kk in 0..k {
                        s += am[i * k + kk] * bm[kk * n + j];
                    }
                    scalar::float_from_f64(acc, s)
                }
            };
        }
    }
    for lane in 0..32u32 {
        for i in 0..count(shape, Operand::C) {
            let (r, col) = position(shape, Operand::C, lane, i);
            set(
                regs,
                d,
                lane as usize,
                aw,
                i,
                dm[r as usize * n + col as usize],
            );
        }
    }
}

/// The u32 register `reg` of `lane` after `ldmatrix` from the 8x8 matrix of
/// 16-bit elements `m` (row-major): row `lane/4`, elements `2*(lane%4)` and
/// the next (column `lane/4` of rows `2*(lane%4)`, `+1` when transposed),
/// the first element in the low half.
pub fn ldmatrix_reg(m: &[u16; 64], lane: u32, trans: bool) -> u32 {
    let (g, t) = ((lane >> 2) as usize, (lane & 3) as usize);
    let (e0, e1) = if trans {
        (m[2 * t * 8 + g], m[(2 * t + 1) * 8 + g])
    } else {
        (m[g * 8 + 2 * t], m[g * 8 + 2 * t + 1])
    };
    u32::from(e0) | (u32::from(e1) << 16)
}

/// The inverse of [`ldmatrix_reg`]: place `lane`'s register into `m`.
pub fn stmatrix_reg(m: &mut [u16; 64], lane: u32, trans: bool, v: u32) {
    let (g, t) = ((lane >> 2) as usize, (lane & 3) as usize);
    let (i0, i1) = if trans {
        (2 * t * 8 + g, (2 * t + 1) * 8 + g)
    } else {
        (g * 8 + 2 * t, g * 8 + 2 * t + 1)
    };
    m[i0] = v as u16;
    m[i1] = (v >> 16) as u16;
}

/// Element `e` (`w` bits) of the packed value at `slot` of lane `l`.
pub fn elem(regs: &[u64], slot: u32, l: usize, w: u32, e: u32) -> u64 {
    get(regs, slot, l, w, e)
}

pub fn set_elem(regs: &mut [u64], slot: u32, l: usize, w: u32, e: u32, x: u64) {
    set(regs, slot, l, w, e, x);
}

/// Register `reg` (32 bits) of the value at `slot` of lane `l`.
pub fn reg(regs: &[u64], slot: u32, l: usize, reg: u32) -> u32 {
    get(regs, slot, l, 32, reg) as u32
}

pub fn set_reg(regs: &mut [u64], slot: u32, l: usize, reg: u32, v: u32) {
    set(regs, slot, l, 32, reg, u64::from(v));
}

/// `ex2.approx`, `rcp.approx`, `tanh.approx` on f32 bits: the interpreter
/// gives the correctly rounded value (computed in f64, rounded once); the
/// hardware is within the error bounds of docs/semantics.md. `ex2_ftz`
/// flushes a subnormal operand and a subnormal result to (signed) zero.
pub fn approx(op: ApproxOp, bits: u64) -> u64 {
    let ftz = |v: f32| {
        if v.is_subnormal() {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    let mut x32 = f32::from_bits(bits as u32);
    if op == ApproxOp::Ex2Ftz {
        x32 = ftz(x32);
    }
    let x = f64::from(x32);
    let y = match op {
        ApproxOp::Ex2 | ApproxOp::Ex2Ftz => x.exp2(),
        ApproxOp::Rcp => 1.0 / x,
        ApproxOp::Tanh => x.tanh(),
    } as f32;
    let y = if op == ApproxOp::Ex2Ftz { ftz(y) } else { y };
    u64::from(y.to_bits())
}

// ---------------------------------------------------------------- decoding

/// Decode `mma.sync`, `ldmatrix` or `stmatrix`.
pub(crate) fn decode_warp_mma(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::MmaSync { elem, .. } => {
            let Some(acc) = ic.arg_ty(2).elem_scalar() else {
                return ic.bad("mma.sync accumulator is not a vector");
            };
            DOp::MmaSync {
                elem: *elem,
                acc,
                a: ic.arg(0)?,
                b: ic.arg(1)?,
                c: ic.arg(2)?,
                d: ic.res(0)?,
            }
        }
        Op::Ldmatrix { num, trans } => DOp::Ldmatrix {
            num: *num,
            trans: *trans,
            dst: ic.res(0)?,
            ptr: ic.arg(0)?,
        },
        Op::Stmatrix { num, trans } => DOp::Stmatrix {
            num: *num,
            trans: *trans,
            ptr: ic.arg(0)?,
            src: ic.arg(1)?,
        },
        _ => return Err(InterpError::Internal("not a warp MMA".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Execute `mma.sync`, `ldmatrix` or `stmatrix` for the whole warp.
    pub(crate) fn exec_warp_mma(&mut self, wi: usize, pc: u32, group: u32, op: &DOp) -> Result<()> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        match op {
            // Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
            DOp::MmaSync {
                elem,
                acc,
                a,
                b,
                c,
                d,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                mma_sync(&mut warp.regs, *elem, *acc, *a, *b, *c, *d);
            }
            DOp::Ldmatrix {
                num,
                trans,
                dst,
                ptr,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let what = if *trans { "ldmatrix.trans" } else { "ldmatrix" };
                for i in 0..*num {
                    let mut m = [0u16; 64];
                    for row in 0..8u32 {
                        let l = (i * 8 + row) as usize;
                        let tid = base + l as u32;
                        let pv = r(&warp.regs, *ptr, l);
                        let (id, off) = self
                            .mem
                            .check(pv, 16, 16, Access::Read, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, what))?;
                        for (j, e) in m[row as usize * 8..][..8].iter_mut().enumerate() {
                            *e = self.mem.read(id, off + 2 * j, 2) as u16;
                        }
                    }
                    for l in 0..32u32 {
                        let v = ldmatrix_reg(&m, l, *trans);
                        set_reg(&mut warp.regs, *dst, l as usize, i, v);
                    }
                }
            }
            DOp::Stmatrix {
                num,
                trans,
                ptr,
                src,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let what = if *trans { "stmatrix.trans" } else { "stmatrix" };
                for i in 0..*num {
                    let mut m = [0u16; 64];
                    for l in 0..32u32 {
                        let v = reg(&warp.regs, *src, l as usize, i);
                        stmatrix_reg(&mut m, l, *trans, v);
                    }
                    for row in 0..8u32 {
                        let l = (i * 8 + row) as usize;
                        let tid = base + l as u32;
                        let pv = r(&warp.regs, *ptr, l);
                        let (id, off) = self
                            .mem
                            .check(pv, 16, 16, Access::Write, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, what))?;
                        for (j, e) in m[row as usize * 8..][..8].iter().enumerate() {
                            self.mem.write(id, off + 2 * j, 2, u64::from(*e));
                        }
                    }
                }
            }

            _ => return Err(InterpError::Internal("not a warp MMA".into())),
        }
        Ok(())
    }
}
