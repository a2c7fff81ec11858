//! Atomics (`atomic`, `atomic.cas`, `red`, packed `vec<f16|bf16, 2>` adds):
//! each lane's read-modify-write happens on its own, one lane after another,
//! so the interpreter's memory stays sequentially consistent.

use crate::decode::{DOp, InstCx};
use crate::exec::{lanes, r, w, Ctx, Exec, Flow};
use crate::memory::Access;
use crate::scalar;
use crate::{InterpError, Result};
use zyntax_hir::{AtomicOp, BinOp, Op, ScalarType, Type};

/// Decode an atomic or `red`.
pub(crate) fn decode_atomic(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::Red { op, .. } => decode_atomic_v(ic, *op, ic.arg_ty(1), None)?,
        Op::Atomic { op, .. } if matches!(ic.arg_ty(1), Type::Vector(..)) => {
            decode_atomic_v(ic, *op, ic.arg_ty(1), Some(ic.res(0)?))?
        }
        Op::Atomic { op, .. } => {
            let Some(ty) = ic.arg_ty(1).as_scalar().filter(|s| *s != ScalarType::Bool) else {
                return ic.bad("atomic on a non-scalar");
            };
            let ok = match op {
                AtomicOp::And | AtomicOp::Or | AtomicOp::Xor | AtomicOp::Inc | AtomicOp::Dec => {
                    ty.is_int()
                }
                _ => true,
            };
            if !ok {
                return ic.bad(format!("atomic {op} on {ty}"));
            }
            DOp::Atomic {
                op: *op,
                ty,
                dst: ic.res(0)?,
                ptr: ic.arg(0)?,
                val: ic.arg(1)?,
            }
        }
        Op::AtomicCas { .. } => {
            let Some(ty) = ic.arg_ty(1).as_scalar().filter(|s| *s != ScalarType::Bool) else {
                return ic.bad("atomic.cas on a non-scalar");
            };
            DOp::Cas {
                ty,
                dst: ic.res(0)?,
                ptr: ic.arg(0)?,
                exp: ic.arg(1)?,
                des: ic.arg(2)?,
            }
        }
        _ => return Err(InterpError::Internal("not an atomic".into())),
    })
}

/// Decode `red`, and atomics on packed `vec<f16|bf16, 2>` (issue 12).
fn decode_atomic_v(ic: &InstCx, op: AtomicOp, t: Type, dst: Option<u32>) -> Result<DOp> {
    let (elem, n) = match t {
        Type::Scalar(s) if s != ScalarType::Bool => (s, 1),
        Type::Vector(s, 2) if s.is_float() && op == AtomicOp::Add => (s, 2),
        t => return ic.bad(format!("atomic {op} on {t}")),
    };
    if bitwise(op) && !elem.is_int() {
        return ic.bad(format!("atomic {op} on {elem}"));
    }
    Ok(DOp::AtomicV {
        op,
        elem,
        n,
        dst,
        ptr: ic.arg(0)?,
        val: ic.arg(1)?,
    })
}

/// Atomics defined on integers only.
fn bitwise(op: AtomicOp) -> bool {
    matches!(
        op,
        AtomicOp::And | AtomicOp::Or | AtomicOp::Xor | AtomicOp::Inc | AtomicOp::Dec
    )
}

impl Exec<'_> {
    /// Execute an atomic read-modify-write for the lanes `mask`, one lane after another.
    #[inline]
    pub(crate) fn exec_atomic(&mut self, wi: usize, pc: u32, mask: u32, op: &DOp) -> Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        let mem = &mut self.mem;
        match op {
            DOp::Atomic {
                op,
                ty,
                dst,
                ptr,
                val,
            } => {
                let size = ty.size_bytes() as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let pv = r(regs, *ptr, l);
                    let (id, off) = mem
                        .check(pv, size, size as u64, Access::Atomic, tid)
                        .map_err(|f| ctx.fault(f, pc, tid, "atomic"))?;
                    let old = mem.read(id, off, size);
                    let new = atomic_apply(*op, *ty, old, r(regs, *val, l));
                    mem.write(id, off, size, new);
                    w(regs, *dst, l, old);
                }
            }
            DOp::Cas {
                ty,
                dst,
                ptr,
                exp,
                des,
            } => {
                let size = ty.size_bytes() as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let pv = r(regs, *ptr, l);
                    let (id, off) = mem
                        .check(pv, size, size as u64, Access::Atomic, tid)
                        .map_err(|f| ctx.fault(f, pc, tid, "atomic.cas"))?;
                    let old = mem.read(id, off, size);
                    if old == r(regs, *exp, l) {
                        mem.write(id, off, size, r(regs, *des, l));
                    }
                    w(regs, *dst, l, old);
                }
            }
            DOp::AtomicV {
                op,
                elem,
                n,
                dst,
                ptr,
                val,
            } => {
                let es = elem.size_bytes() as usize;
                let size = es * *n as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let pv = r(regs, *ptr, l);
                    let (id, off) = mem
                        .check(pv, size, size as u64, Access::Atomic, tid)
                        .map_err(|f| ctx.fault(f, pc, tid, "atomic"))?;
                    let old = mem.read(id, off, size);
                    let v = r(regs, *val, l);
                    // Packed elements, little-endian as in memory, each updated on its own.
                    let bits = 8 * es as u32;
                    let mut new = 0u64;
                    for k in 0..*n {
                        let sh = k * bits;
                        let (o, x) = (
                            (old >> sh) & scalar::mask(bits),
                            (v >> sh) & scalar::mask(bits),
                        );
                        new |= atomic_apply(*op, *elem, o, x) << sh;
                    }
                    mem.write(id, off, size, new);
                    if let Some(dst) = dst {
                        w(regs, *dst, l, old);
                    }
                }
            }
            _ => return Err(InterpError::Internal("not an atomic".into())),
        }
        Ok(Flow::Next)
    }
}

/// The value an atomic `op` leaves in memory.
fn atomic_apply(op: AtomicOp, ty: ScalarType, old: u64, v: u64) -> u64 {
    match op {
        AtomicOp::Add => scalar::binary(BinOp::Add, ty, old, v),
        AtomicOp::Sub => scalar::binary(BinOp::Sub, ty, old, v),
        AtomicOp::Min => scalar::binary(BinOp::Min, ty, old, v),
        AtomicOp::Max => scalar::binary(BinOp::Max, ty, old, v),
        AtomicOp::And => old & v,
        AtomicOp::Or => old | v,
        AtomicOp::Xor => old ^ v,
        AtomicOp::Exch => v,
        // PTX atom.inc/dec (unsigned comparison).
        AtomicOp::Inc => {
            if old >= v {
                0
            } else {
                old + 1
            }
        }
        AtomicOp::Dec => {
            if old == 0 || old > v {
                v
            } else {
                old - 1
            }
        }
    }
}
