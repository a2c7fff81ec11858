//! Atomics (`atomic`, `atomic.cas`, `red`, packed `vec<f16|bf16, 2>` adds):
//! each lane's read-modify-write happens on its own, one lane after another,
//! so the interpreter's memory stays sequentially consistent.

use crate::decode::DOp;
use crate::exec::{lanes, r, w, Ctx, Exec, Flow};
use crate::memory::Access;
use crate::scalar;
use crate::{InterpError, Result};
use zyntax_hir::{AtomicOp, BinOp, ScalarType};

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
