//! Warpgroup MMA (issue 13 item 1): shared-memory matrix descriptors, the
//! canonical operand layouts they address (with the swizzle), the accumulator
//! fragment layout and the numerics (docs/semantics.md, "Warpgroup MMA").
//!
//! Shared memory has one address space per block, the *window*: each shared
//! allocation of the block (static ones in order, then the dynamic one) starts
//! at the next multiple of [`WINDOW_ALIGN`] bytes. A descriptor holds a window
//! address, so `wgmma` reads exactly the bytes the descriptor names, swizzled
//! by the address bits as the hardware does.

use crate::warp_mma::{self, Operand};
use zyntax_hir::{MmaElem, ScalarType, Swizzle, WarpShape, Wgmma};

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
