//! Warpgroup MMA (issue 13 item 1): shared-memory matrix descriptors, the
//! canonical operand layouts they address (with the swizzle), the accumulator
//! fragment layout and the numerics (docs/semantics.md, "Warpgroup MMA").
//!
//! Shared memory has one address space per block, the *window*: each shared
//! allocation of the block (static ones in order, then the dynamic one) starts
//! at the next multiple of [`WINDOW_ALIGN`] bytes. A descriptor holds a window
//! address, so `wgmma` reads exactly the bytes the descriptor names, swizzled
//! by the address bits as the hardware does.

use crate::decode::{DOp, InstCx};
use crate::exec::{lanes, mma_lanes, r, w, Ctx, Exec, Flow};
use crate::memory;
use crate::warp_mma::{self, Operand};
use crate::{InterpError, Result, TrapKind};
use std::collections::HashMap;
use zyntax_hir::{MmaElem, Op, ScalarType, Swizzle, Type, WarpShape, Wgmma};

/// Alignment of each shared allocation in the interpreter's window (the
/// 128-byte swizzle pattern repeats every 1024 bytes).
pub const WINDOW_ALIGN: u64 = 1024;

/// The descriptor of the matrix at window address `addr` (base offset 0).
pub fn encode(addr: u64, lbo: u64, sbo: u64, swizzle: Swizzle) -> u64 {
    let f = |x: u64| (x >> 4) & 0x3fff;
    f(addr) | (f(lbo) << 16) | (f(sbo) << 32) | (swizzle.field() << 62)
}

/// A decoded descriptor: byte start address, leading and stride byte offsets, swizzle.
#[derive(Copy, Clone, Debug)]
pub struct Desc {
    pub start: u64,
    pub lbo: u64,
    pub sbo: u64,
    /// Swizzle row width in bytes (16: no swizzle).
    pub width: u64,
}

pub fn decode(d: u64) -> Desc {
    let f = |shift: u32| ((d >> shift) & 0x3fff) << 4;
    let width = match d >> 62 {
        1 => 128,
        2 => 64,
        3 => 32,
        _ => 16,
    };
    Desc {
        start: f(0),
        lbo: f(16),
        sbo: f(32),
        width,
    }
}

/// Window address of element (`mn`, `k`) of an operand (A: `mn` is the row
/// m; B: the column n) of `eb`-byte elements: CUTLASS's canonical GMMA layouts
/// (K-major, or MN-major when `mn_major`), then the swizzle, which XORs
/// address bits [4, 4+log2(width/16)) with bits [7, ...).
pub fn address(d: &Desc, mn: u64, k: u64, eb: u64, mn_major: bool) -> u64 {
    let t = 16 / eb; // elements per 16 bytes
    let w = d.width;
    let raw = match (mn_major, w) {
        (false, 16) => d.start + (mn % 8) * 16 + (mn / 8) * d.sbo + (k % t) * eb + (k / t) * d.lbo,
        (false, _) => d.start + (mn % 8) * w + (mn / 8) * d.sbo + k * eb,
        (true, 16) => d.start + (mn % t) * eb + (mn / t) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo,
        (true, _) => {
            let row = w / eb; // elements along MN in one swizzle row
            d.start + (mn % row) * eb + (mn / row) * d.lbo + (k % 8) * w + (k / 8) * d.sbo
        }
    };
    let mask = w / 16 - 1;
    raw ^ (((raw >> 7) & mask) << 4)
}

/// The shape whose per-warp A fragment a warpgroup's A registers use (one
/// 16-row slab per warp, as `mma.sync`'s A).
pub fn a_shape(elem: MmaElem) -> WarpShape {
    match elem {
        MmaElem::Tf32 => WarpShape::M16n8k8,
        MmaElem::F16 | MmaElem::Bf16 => WarpShape::M16n8k16,
        _ => WarpShape::M16n8k32,
    }
}

/// `(row within the warp's 16-row slab, column)` of accumulator element `i` of `lane`.
pub fn acc_position(lane: u32, i: u32) -> (u32, u32) {
    let (r, c) = warp_mma::position(WarpShape::M16n8k16, Operand::C, lane, i % 4);
    (r, c + 8 * (i / 4))
}

/// One warp's part of a `wgmma`: rows `16*q .. 16*q+16` of D (`q` the warp's
/// index in its warpgroup). `a(m, k)` / `b(n, k)` give input element bits of
/// the warp's rows / of B; `acc(lane, i)` the accumulator's bits. Returns D per
/// lane and element.
///
/// Numerics as `mma.sync`: inputs and products are exact in f64; float
/// accumulators get `c + sum_k a*b` summed in f64 in k order, rounded once
/// (round to nearest even); s32 is exact and wraps modulo 2^32. `neg_a`/`neg_b`
/// negate the inputs; `scale_d = false` replaces c by 0.
pub fn compute(
    w: Wgmma,
    acc: ScalarType,
    scale_d: bool,
    a: &dyn Fn(u32, u32) -> u64,
    b: &dyn Fn(u32, u32) -> u64,
    c: &dyn Fn(u32, u32) -> u64,
) -> Vec<[u64; 128]> {
    let (n, k) = (w.n as usize, w.k() as usize);
    let sa = if w.neg_a { -1.0 } else { 1.0 };
    let sb = if w.neg_b { -1.0 } else { 1.0 };
    let mut am = vec![0.0; 16 * k];
    for r in 0..16 {
        for kk in 0..k {
            am[r * k + kk] = sa * warp_mma::input_value(w.a, a(r as u32, kk as u32));
        }
    }
    let mut bm = vec![0.0; n * k];
    for j in 0..n {
        for kk in 0..k {
            bm[j * k + kk] = sb * warp_mma::input_value(w.b, b(j as u32, kk as u32));
        }
    }
    let mut out = vec![[0u64; 128]; 32];
    for lane in 0..32u32 {
        for i in 0..w.n / 2 {
            let (r, col) = acc_position(lane, i);
            let (r, col) = (r as usize, col as usize);
            let cv = if scale_d { c(lane, i) } else { 0 };
            let dot = (0..k).map(|kk| am[r * k + kk] * bm[col * k + kk]);
            out[lane as usize][i as usize] = match acc {
                ScalarType::I32 => {
                    let s = dot.fold(i64::from(cv as u32 as i32), |s, p| s + p as i64);
                    u64::from(s as u32)
                }
                _ => {
                    let s = dot.fold(crate::scalar::to_f64(acc, cv), |s, p| s + p);
                    crate::scalar::float_from_f64(acc, s)
                }
            };
        }
    }
    out
}

// ---------------------------------------------------------------- decoding

/// Decode a warpgroup MMA op.
pub(crate) fn decode_wgmma(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        // Warpgroup MMA and warp specialisation (issue 13 items 1 and 5).
        Op::WgmmaDesc(swizzle) => DOp::WgmmaDesc {
            swizzle: *swizzle,
            dst: ic.res(0)?,
            ptr: ic.arg(0)?,
            lbo: ic.arg(1)?,
            sbo: ic.arg(2)?,
        },
        Op::Wgmma(form) => {
            let Some(acc) = ic.arg_ty(0).elem_scalar() else {
                return ic.bad("wgmma accumulator is not a vector");
            };
            DOp::Wgmma {
                form: *form,
                acc,
                c: ic.arg(0)?,
                a: ic.arg(1)?,
                a_regs: ic.arg_ty(1) != Type::U64,
                b: ic.arg(2)?,
                scale_d: ic.arg(3)?,
                d: ic.res(0)?,
            }
        }
        Op::WgmmaZero => DOp::Zero {
            dst: ic.res(0)?,
            n: ic.res_slots(),
        },
        // wgmma completes at issue in the interpreter; registers are not modelled.
        Op::WgmmaFence | Op::WgmmaCommit | Op::WgmmaWait(_) | Op::Setmaxnreg { .. } => DOp::Nop,
        _ => return Err(InterpError::Internal("not a wgmma op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Make a `wgmma` matrix descriptor, or zero an accumulator, for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_wgmma(&mut self, wi: usize, pc: u32, mask: u32, op: &DOp) -> Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        match op {
            DOp::WgmmaDesc {
                swizzle,
                dst,
                ptr,
                lbo,
                sbo,
            } => {
                for l in lanes(mask) {
                    let pv = r(regs, *ptr, l);
                    let at = self.window.iter().find(|e| e.1 == memory::ptr_id(pv));
                    let Some(&(start, _, _)) = at else {
                        return Err(ctx.trap(
                            TrapKind::AddressSpace,
                            pc,
                            base + l as u32,
                            format!("wgmma.desc of 0x{pv:016x}, not a shared-memory pointer"),
                        ));
                    };
                    let addr = start.wrapping_add(memory::ptr_offset(pv) as u64);
                    let (lb, sb) = (r(regs, *lbo, l), r(regs, *sbo, l));
                    w(regs, *dst, l, encode(addr, lb, sb, *swizzle));
                }
            }
            DOp::Zero { dst, n } => {
                for l in lanes(mask) {
                    for k in 0..*n {
                        w(regs, dst + k, l, 0);
                    }
                }
            }

            _ => return Err(InterpError::Internal("not a wgmma op".into())),
        }
        Ok(Flow::Next)
    }
}

impl Exec<'_> {
    /// Execute `wgmma` for the whole warp: its 16-row slab of the warpgroup's tile.
    pub(crate) fn exec_wgmma_mma(
        &mut self,
        wi: usize,
        pc: u32,
        group: u32,
        op: &DOp,
    ) -> Result<()> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        match op {
            // Warpgroup MMA (issue 13 item 1): each warp computes its 16-row slab.
            DOp::Wgmma {
                form,
                acc,
                c,
                a,
                a_regs,
                b,
                scale_d,
                d,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let q = (base / 32) % 4;
                let eb = |e: zyntax_hir::MmaElem| u64::from(e.bits() / 8);
                // Every byte either descriptor names, read once through the checks.
                let mut bytes: HashMap<u64, u8> = HashMap::new();
                let mut read = |addr: u64, len: u64| -> Result<u64> {
                    let mut v = 0u64;
                    for i in 0..len {
                        let x = addr + i;
                        if let Some(b) = bytes.get(&x) {
                            v |= u64::from(*b) << (8 * i);
                            continue;
                        }
                        let at = self.window.iter().find(|e| x >= e.0 && x < e.0 + e.2);
                        let Some(&(start, id, _)) = at else {
                            return Err(ctx.trap(
                                TrapKind::OutOfBounds,
                                pc,
                                base,
                                format!("wgmma descriptor addresses window byte 0x{x:x}, outside the block's shared memory"),
                            ));
                        };
                        let p = memory::make_ptr(id, (x - start) as i64);
                        let b = self
                            .mem
                            .load(p, 1, 1, base)
                            .map_err(|f| ctx.fault(f, pc, base, "wgmma"))?
                            as u8;
                        bytes.insert(x, b);
                        v |= u64::from(b) << (8 * i);
                    }
                    Ok(v)
                };
                let (k, n) = (form.k(), form.n);
                let mut am = vec![0u64; 16 * k as usize];
                if *a_regs {
                    let shape = a_shape(form.a);
                    let bits = form.a.bits();
                    for lane in 0..32u32 {
                        for i in 0..warp_mma::count(shape, warp_mma::Operand::A) {
                            let (row, col) =
                                warp_mma::position(shape, warp_mma::Operand::A, lane, i);
                            am[(row * k + col) as usize] =
                                warp_mma::elem(&warp.regs, *a, lane as usize, bits, i);
                        }
                    }
                } else {
                    let da = decode(r(&warp.regs, *a, 0));
                    for row in 0..16u32 {
                        for kk in 0..k {
                            let m = u64::from(16 * q + row);
                            let x = address(&da, m, u64::from(kk), eb(form.a), form.trans_a);
                            am[(row * k + kk) as usize] = read(x, eb(form.a))?;
                        }
                    }
                }
                let db = decode(r(&warp.regs, *b, 0));
                let mut bm = vec![0u64; (n * k) as usize];
                for j in 0..n {
                    for kk in 0..k {
                        let x = address(&db, u64::from(j), u64::from(kk), eb(form.b), form.trans_b);
                        bm[(j * k + kk) as usize] = read(x, eb(form.b))?;
                    }
                }
                let aw = acc.bits();
                let regs = &warp.regs;
                let out = compute(
                    *form,
                    *acc,
                    r(regs, *scale_d, 0) & 1 != 0,
                    &|row, kk| am[(row * k + kk) as usize],
                    &|j, kk| bm[(j * k + kk) as usize],
                    &|lane, i| warp_mma::elem(regs, *c, lane as usize, aw, i),
                );
                for (lane, vals) in out.iter().enumerate() {
                    for i in 0..n / 2 {
                        warp_mma::set_elem(&mut warp.regs, *d, lane, aw, i, vals[i as usize]);
                    }
                }
            }

            _ => return Err(InterpError::Internal("not wgmma".into())),
        }
        Ok(())
    }
}
