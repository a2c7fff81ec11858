//! MMA on fragments (`mma.load`, `mma.fill`, `mma`, `mma.store`): a warp's
//! fragment is one matrix held as f64 elements in the warp's fragment
//! registers (element `e` belongs to lane `e % 32`); products are exact in
//! f64, summed in f64 and rounded once to the accumulator type.

use crate::decode::{DOp, InstCx, VLoc, FRAG_ELEMS};
use crate::exec::{lanes, mma_lanes, r, Ctx, Exec, Flow, Warp};
use crate::memory::{self, Memory};
use crate::scalar;
use crate::{InterpError, Result, TrapKind};
use zyntax_hir::{FragKind, FragType, Layout, Op, ScalarType, Type};

/// Decode an MMA on fragments.
pub(crate) fn decode_frag_mma(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::MmaLoad { frag, layout } => {
            let Some(&v) = ic.d.results.first() else {
                return ic.bad("missing result");
            };
            let VLoc::Frag(dst) = ic.loc(v) else {
                return ic.bad("mma.load result is not a fragment");
            };
            DOp::MmaLoad {
                frag: *frag,
                layout: *layout,
                dst,
                ptr: ic.arg(0)?,
                ldm: ic.arg(1)?,
            }
        }
        Op::MmaFill => {
            let (Some(&v), Type::Frag(frag)) = (ic.d.results.first(), ic.res_ty(0)) else {
                return ic.bad("mma.fill result is not a fragment");
            };
            let VLoc::Frag(dst) = ic.loc(v) else {
                return ic.bad("mma.fill result is not a fragment");
            };
            let Some(val_ty) = ic.arg_ty(0).as_scalar() else {
                return ic.bad("mma.fill needs a scalar");
            };
            DOp::MmaFill {
                frag,
                dst,
                val: ic.arg(0)?,
                val_ty,
            }
        }
        Op::Mma => {
            let (a, fa) = ic.frag_of(0)?;
            let (b, fb) = ic.frag_of(1)?;
            let (c, fc) = ic.frag_of(2)?;
            let Some(VLoc::Frag(dr)) = ic.d.results.first().map(|v| ic.loc(*v)) else {
                return ic.bad("mma result is not a fragment");
            };
            if fa.kind != FragKind::A || fb.kind != FragKind::B || fc.kind != FragKind::Acc {
                return ic.bad("mma needs (a, b, acc) fragments");
            }
            if fa.shape != fb.shape || fa.shape != fc.shape {
                return ic.bad("mma fragment shapes differ");
            }
            DOp::Mma {
                a,
                b,
                c,
                d: dr,
                fa,
                fb,
                fc,
            }
        }
        Op::MmaStore { layout } => {
            let (src, frag) = ic.frag_of(1)?;
            DOp::MmaStore {
                layout: *layout,
                frag,
                ptr: ic.arg(0)?,
                src,
                ldm: ic.arg(2)?,
            }
        }
        _ => return Err(InterpError::Internal("not a fragment MMA".into())),
    })
}

impl Exec<'_> {
    /// `mma.fill`: every element of a fragment from each lane's scalar.
    #[inline]
    pub(crate) fn exec_frag_fill(&mut self, wi: usize, mask: u32, op: &DOp) -> Result<Flow> {
        let warp = &mut self.warps[wi];
        let regs = &mut warp.regs;
        match op {
            DOp::MmaFill {
                frag,
                dst,
                val,
                val_ty,
            } => {
                let (rows, cols) = frag_dims(*frag);
                let n = (rows * cols) as usize;
                let fb = *dst as usize * FRAG_ELEMS;
                for l in lanes(mask) {
                    let x = to_frag_elem(frag.elem, scalar::to_f64(*val_ty, r(regs, *val, l)));
                    let mut e = l;
                    while e < n {
                        warp.frags[fb + e] = x;
                        e += 32;
                    }
                }
            }

            _ => return Err(InterpError::Internal("not mma.fill".into())),
        }
        Ok(Flow::Next)
    }
}

impl Exec<'_> {
    /// Execute `mma.load`, `mma` or `mma.store` on fragments for the whole warp.
    pub(crate) fn exec_frag_mma(&mut self, wi: usize, pc: u32, group: u32, op: &DOp) -> Result<()> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        match op {
            DOp::MmaLoad {
                frag,
                layout,
                dst,
                ptr,
                ldm,
            } => {
                let l0 = mma_lanes(&ctx, warp, group, pc)?;
                let tid = base + l0 as u32;
                let (pv, ld) = uniform2(&ctx, warp, group, *ptr, *ldm, pc, "mma.load")?;
                let (rows, cols) = frag_dims(*frag);
                let es = frag.elem.size_bytes();
                mma_align(&ctx, &self.mem, pv, ld, es, pc, tid)?;
                let fb = *dst as usize * FRAG_ELEMS;
                for i in 0..rows {
                    for j in 0..cols {
                        let idx = match layout {
                            Layout::Row => i * ld + j,
                            Layout::Col => j * ld + i,
                        };
                        let ep = memory::ptr_add(pv, (idx * es) as i64);
                        let bits = self
                            .mem
                            .load(ep, es as usize, es, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, "mma.load"))?;
                        warp.frags[fb + (i * cols + j) as usize] = scalar::to_f64(frag.elem, bits);
                    }
                }
            }
            DOp::Mma {
                a,
                b,
                c,
                d,
                fa,
                fb,
                fc,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let (m_, n_, k_) = fa.shape.dims();
                let (m_, n_, k_) = (m_ as usize, n_ as usize, k_ as usize);
                let (ab, bb, cb, db) = (
                    *a as usize * FRAG_ELEMS,
                    *b as usize * FRAG_ELEMS,
                    *c as usize * FRAG_ELEMS,
                    *d as usize * FRAG_ELEMS,
                );
                let _ = fb;
                self.fscratch.clear();
                for i in 0..m_ {
                    for j in 0..n_ {
                        // Exact products in f64, summed in f64, rounded once to the accumulator type.
                        let mut s = warp.frags[cb + i * n_ + j];
                        for k in 0..k_ {
                            s += warp.frags[ab + i * k_ + k] * warp.frags[bb + k * n_ + j];
                        }
                        self.fscratch.push(to_frag_elem(fc.elem, s));
                    }
                }
                warp.frags[db..db + m_ * n_].copy_from_slice(&self.fscratch);
            }
            DOp::MmaStore {
                layout,
                frag,
                ptr,
                src,
                ldm,
            } => {
                let l0 = mma_lanes(&ctx, warp, group, pc)?;
                let tid = base + l0 as u32;
                let (pv, ld) = uniform2(&ctx, warp, group, *ptr, *ldm, pc, "mma.store")?;
                let (rows, cols) = frag_dims(*frag);
                let es = frag.elem.size_bytes();
                mma_align(&ctx, &self.mem, pv, ld, es, pc, tid)?;
                let fb = *src as usize * FRAG_ELEMS;
                for i in 0..rows {
                    for j in 0..cols {
                        let idx = match layout {
                            Layout::Row => i * ld + j,
                            Layout::Col => j * ld + i,
                        };
                        let ep = memory::ptr_add(pv, (idx * es) as i64);
                        let x = warp.frags[fb + (i * cols + j) as usize];
                        let bits = if frag.elem.is_float() {
                            scalar::float_from_f64(frag.elem, x)
                        } else {
                            (x as i64 as u64) & scalar::mask(frag.elem.bits())
                        };
                        self.mem
                            .store(ep, es as usize, es, bits, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, "mma.store"))?;
                    }
                }
            }

            _ => return Err(InterpError::Internal("not a fragment MMA".into())),
        }
        Ok(())
    }
}

/// The (rows, cols) of a fragment.
fn frag_dims(f: FragType) -> (u64, u64) {
    let (m, n, k) = f.shape.dims();
    let (m, n, k) = (u64::from(m), u64::from(n), u64::from(k));
    match f.kind {
        FragKind::A => (m, k),
        FragKind::B => (k, n),
        FragKind::Acc => (m, n),
    }
}

/// A value rounded to a fragment's element type, kept as f64.
fn to_frag_elem(elem: ScalarType, x: f64) -> f64 {
    if elem.is_float() {
        scalar::to_f64(elem, scalar::float_from_f64(elem, x))
    } else {
        // Integer accumulators wrap to their width.
        let bits = (x as i64 as u64) & scalar::mask(elem.bits());
        scalar::to_f64(elem, bits)
    }
}

/// The pointer and `ldm` of an `mma.load`/`mma.store`, the same in every lane.
fn uniform2(
    ctx: &Ctx,
    warp: &Warp,
    group: u32,
    a: u32,
    b: u32,
    pc: u32,
    what: &str,
) -> Result<(u64, u64)> {
    let l0 = group.trailing_zeros() as usize;
    let (x, y) = (r(&warp.regs, a, l0), r(&warp.regs, b, l0) & 0xffff_ffff);
    for l in lanes(group) {
        if r(&warp.regs, a, l) != x || (r(&warp.regs, b, l) & 0xffff_ffff) != y {
            return Err(ctx.trap(
                TrapKind::InvalidCollective,
                pc,
                warp.base_tid + l as u32,
                format!("{what}: pointer and ldm must be the same in every lane (lane {l} differs from lane {l0})"),
            ));
        }
    }
    Ok((x, y))
}

fn mma_align(ctx: &Ctx, mem: &Memory, pv: u64, ld: u64, es: u64, pc: u32, tid: u32) -> Result<()> {
    let off = memory::ptr_offset(pv);
    if off.rem_euclid(32) != 0 || (ld * es) & 15 != 0 {
        let name = mem
            .allocs
            .get(memory::ptr_id(pv) as usize)
            .map_or(String::new(), |a| a.name.clone());
        return Err(ctx.trap(
            TrapKind::Misaligned,
            pc,
            tid,
            format!(
                "MMA tile at byte offset {off} of {name} with ldm {ld}: the address must be 32-byte aligned and ldm a multiple of 16 bytes"
            ),
        ));
    }
    Ok(())
}
