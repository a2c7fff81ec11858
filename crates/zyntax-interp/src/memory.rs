//! Memory: allocations are byte vectors; a pointer value is
//! `(allocation id << 40) | (byte offset as 40-bit two's complement)`.
//! Id 0 is the null pointer. The allocation knows its address space, so a
//! generic pointer resolves to the space it was made from.
//!
//! Shared memory carries shadow state for the initialization check and the
//! race check (one entry per byte, see [`Shadow`]).

use crate::decode::{DOp, InstCx, MemTy, Program};
use crate::exec::{lanes, r, w, Ctx, Exec, Flow};
use crate::scalar;
use crate::InterpError;
use zyntax_hir::{AddrSpace, Op, ScalarType, Type};

pub const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1u64 << OFFSET_BITS) - 1;

#[inline]
pub fn make_ptr(id: u32, offset: i64) -> u64 {
    (u64::from(id) << OFFSET_BITS) | (offset as u64 & OFFSET_MASK)
}

#[inline]
pub fn ptr_id(p: u64) -> u32 {
    (p >> OFFSET_BITS) as u32
}

#[inline]
pub fn ptr_offset(p: u64) -> i64 {
    ((p << (64 - OFFSET_BITS)) as i64) >> (64 - OFFSET_BITS)
}

/// `p + delta` bytes, wrapping in the offset field.
#[inline]
pub fn ptr_add(p: u64, delta: i64) -> u64 {
    make_ptr(ptr_id(p), ptr_offset(p).wrapping_add(delta))
}

/// Per-byte shadow state of shared memory. A race is two accesses to one byte
/// by different threads in the same barrier interval (`epoch`), at least one a
/// write, neither atomic.
#[derive(Clone, Copy, Default)]
pub struct Shadow {
    pub init: bool,
    pub w_epoch: u32,
    pub w_tid: u32,
    pub r_epoch: u32,
    /// Reading thread, or `MANY` when several threads read in the epoch.
    pub r_tid: u32,
}

pub const MANY: u32 = u32::MAX;

pub struct Alloc {
    pub data: Vec<u8>,
    pub space: AddrSpace,
    /// What to call it in messages (`global buffer #0`, `shared v3`).
    pub name: String,
    pub shadow: Vec<Shadow>,
}

impl Alloc {
    pub fn new(data: Vec<u8>, space: AddrSpace, name: String) -> Alloc {
        Alloc {
            data,
            space,
            name,
            shadow: Vec::new(),
        }
    }
}

/// Why an access failed (turned into a trap with context by the executor).
#[derive(Clone, Debug)]
pub enum Fault {
    Null,
    BadPointer(u64),
    OutOfBounds {
        name: String,
        size: usize,
        offset: i64,
        len: usize,
    },
    Misaligned {
        name: String,
        offset: i64,
        align: u64,
    },
    WrongSpace {
        name: String,
        have: AddrSpace,
        want: AddrSpace,
    },
    ReadOnly {
        name: String,
    },
    Race {
        name: String,
        offset: usize,
        what: &'static str,
        other_tid: u32,
    },
    Uninit {
        name: String,
        offset: usize,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Atomic read-modify-write: never a race, initializes.
    Atomic,
}

pub struct Memory {
    pub allocs: Vec<Alloc>,
    /// Racecheck/initcheck on shared memory.
    pub checks: bool,
    pub epoch: u32,
}

impl Memory {
    pub fn new(checks: bool) -> Memory {
        Memory {
            // Id 0 is null.
            allocs: vec![Alloc::new(Vec::new(), AddrSpace::Generic, "null".into())],
            checks,
            epoch: 1,
        }
    }

    pub fn add(&mut self, a: Alloc) -> u32 {
        self.allocs.push(a);
        (self.allocs.len() - 1) as u32
    }

    /// Space of the allocation `p` points into, if any.
    pub fn space_of(&self, p: u64) -> Option<AddrSpace> {
        let id = ptr_id(p) as usize;
        if id == 0 {
            return None;
        }
        self.allocs.get(id).map(|a| a.space)
    }

    /// A `WrongSpace` fault when `p` (not null) points outside shared memory:
    /// the check of operands that must be shared (`cp.async` destinations,
    /// mbarriers); a null `p` faults at the access that follows.
    pub(crate) fn shared_only(&self, p: u64) -> Result<(), Fault> {
        if self.space_of(p) == Some(AddrSpace::Shared) || ptr_id(p) == 0 {
            return Ok(());
        }
        let name = self
            .allocs
            .get(ptr_id(p) as usize)
            .map_or(String::new(), |a| a.name.clone());
        Err(Fault::WrongSpace {
            name,
            have: self.space_of(p).unwrap_or(AddrSpace::Generic),
            want: AddrSpace::Shared,
        })
    }

    /// Resolve and check an access of `size` bytes with alignment `align`;
    /// returns (allocation index, byte offset).
    #[inline]
    pub fn check(
        &mut self,
        p: u64,
        size: usize,
        align: u64,
        access: Access,
        tid: u32,
    ) -> Result<(usize, usize), Fault> {
        let id = ptr_id(p) as usize;
        if id == 0 {
            return Err(Fault::Null);
        }
        let epoch = self.epoch;
        let checks = self.checks;
        let Some(a) = self.allocs.get_mut(id) else {
            return Err(Fault::BadPointer(p));
        };
        let off = ptr_offset(p);
        if off < 0 || (off as u64).saturating_add(size as u64) > a.data.len() as u64 {
            return Err(Fault::OutOfBounds {
                name: a.name.clone(),
                size,
                offset: off,
                len: a.data.len(),
            });
        }
        if align > 1 && (off as u64) & (align - 1) != 0 {
            return Err(Fault::Misaligned {
                name: a.name.clone(),
                offset: off,
                align,
            });
        }
        let off = off as usize;
        if access != Access::Read && a.space == AddrSpace::Constant {
            return Err(Fault::ReadOnly {
                name: a.name.clone(),
            });
        }
        if checks && !a.shadow.is_empty() {
            shadow_check(a, off, size, access, tid, epoch)?;
        }
        Ok((id, off))
    }

    #[inline]
    pub fn read(&self, id: usize, off: usize, size: usize) -> u64 {
        let d = &self.allocs[id].data[off..off + size];
        let mut buf = [0u8; 8];
        buf[..size].copy_from_slice(d);
        u64::from_le_bytes(buf)
    }

    #[inline]
    pub fn write(&mut self, id: usize, off: usize, size: usize, v: u64) {
        let bytes = v.to_le_bytes();
        self.allocs[id].data[off..off + size].copy_from_slice(&bytes[..size]);
    }

    /// Checked scalar load of `size` <= 8 bytes.
    #[inline]
    pub fn load(&mut self, p: u64, size: usize, align: u64, tid: u32) -> Result<u64, Fault> {
        let (id, off) = self.check(p, size, align, Access::Read, tid)?;
        Ok(self.read(id, off, size))
    }

    #[inline]
    pub fn store(
        &mut self,
        p: u64,
        size: usize,
        align: u64,
        v: u64,
        tid: u32,
    ) -> Result<(), Fault> {
        let (id, off) = self.check(p, size, align, Access::Write, tid)?;
        self.write(id, off, size, v);
        Ok(())
    }
}

fn shadow_check(
    a: &mut Alloc,
    off: usize,
    size: usize,
    access: Access,
    tid: u32,
    epoch: u32,
) -> Result<(), Fault> {
    for i in off..off + size {
        let s = &mut a.shadow[i];
        match access {
            Access::Read => {
                if !s.init {
                    return Err(Fault::Uninit {
                        name: a.name.clone(),
                        offset: i,
                    });
                }
                if s.w_epoch == epoch && s.w_tid != tid {
                    return Err(Fault::Race {
                        name: a.name.clone(),
                        offset: i,
                        what: "read after write",
                        other_tid: s.w_tid,
                    });
                }
                if s.r_epoch != epoch {
                    s.r_epoch = epoch;
                    s.r_tid = tid;
                } else if s.r_tid != tid {
                    s.r_tid = MANY;
                }
            }
            Access::Write => {
                if s.w_epoch == epoch && s.w_tid != tid {
                    return Err(Fault::Race {
                        name: a.name.clone(),
                        offset: i,
                        what: "write after write",
                        other_tid: s.w_tid,
                    });
                }
                if s.r_epoch == epoch && s.r_tid != tid {
                    return Err(Fault::Race {
                        name: a.name.clone(),
                        offset: i,
                        what: "write after read",
                        other_tid: s.r_tid,
                    });
                }
                s.w_epoch = epoch;
                s.w_tid = tid;
                s.init = true;
            }
            Access::Atomic => s.init = true,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- decoding

/// Decode a load, store, fence, pointer or allocation op.
pub(crate) fn decode_memory(ic: &InstCx, p: &mut Program) -> crate::Result<DOp> {
    Ok(match &ic.d.op {
        // Cache operators change speed, never values (issue 12 item 3). Execution
        // is sequentially consistent, so acquire/release accesses are plain ones.
        Op::Load | Op::LoadCached(_) | Op::LoadAcquire(_) => {
            let t = ic.res_ty(0);
            let Some(mt) = MemTy::of(&t) else {
                let what = match ic.d.op {
                    Op::LoadAcquire(_) => "load.acquire",
                    _ => "load",
                };
                return ic.bad(format!("{what} of {t}"));
            };
            DOp::Load {
                mt,
                dst: ic.res(0)?,
                ptr: ic.arg(0)?,
            }
        }
        Op::Store | Op::StoreCached(_) | Op::StoreRelease(_) => {
            let t = ic.arg_ty(1);
            let Some(mt) = MemTy::of(&t) else {
                let what = match ic.d.op {
                    Op::StoreRelease(_) => "store.release",
                    _ => "store",
                };
                return ic.bad(format!("{what} of {t}"));
            };
            DOp::Store {
                mt,
                ptr: ic.arg(0)?,
                val: ic.arg(1)?,
            }
        }
        Op::PtrAdd => {
            let elem_size = ic
                .arg_ty(0)
                .pointee()
                .and_then(Type::size_bytes)
                .unwrap_or(0);
            let Some(idx_ty) = ic.arg_ty(1).as_scalar().filter(|s| s.is_int()) else {
                return ic.bad("ptr_add index must be an integer");
            };
            DOp::PtrAdd {
                dst: ic.res(0)?,
                ptr: ic.arg(0)?,
                idx: ic.arg(1)?,
                idx_ty,
                elem_size,
            }
        }
        Op::PtrCast => {
            let to = ic.res_ty(0).addr_space().unwrap_or(AddrSpace::Generic);
            let from = ic.arg_ty(0).addr_space().unwrap_or(AddrSpace::Generic);
            if to == from || to == AddrSpace::Generic {
                DOp::Copy {
                    dst: ic.res(0)?,
                    a: ic.arg(0)?,
                    n: 1,
                }
            } else {
                DOp::PtrToSpace {
                    dst: ic.res(0)?,
                    a: ic.arg(0)?,
                    space: to,
                }
            }
        }
        // Every allocation starts at offset 0 of its own region: any declared alignment holds.
        Op::Alloca { elem, count } | Op::SharedAlloc { elem, count, .. } => {
            let Some(bytes) = elem.size_bytes().and_then(|b| b.checked_mul(*count)) else {
                return ic.bad("allocation size overflows");
            };
            if bytes > (1u64 << (OFFSET_BITS - 2)) {
                return ic.bad("allocation too large");
            }
            let name = format!(
                "@{}:{}",
                ic.func_name(),
                ic.d.results
                    .first()
                    .map_or(ic.inst_id().to_string(), |v| v.to_string())
            );
            if matches!(ic.d.op, Op::Alloca { .. }) {
                p.locals.push((bytes, format!("local {name}")));
                DOp::Alloca {
                    dst: ic.res(0)?,
                    k: p.locals.len() as u32 - 1,
                }
            } else {
                p.shared.push((bytes, format!("shared {name}")));
                DOp::SharedAlloc {
                    dst: ic.res(0)?,
                    k: p.shared.len() as u32 - 1,
                }
            }
        }
        Op::DynShared { .. } => DOp::DynShared { dst: ic.res(0)? },
        Op::GlobalAddr(name) => {
            let Some(k) = ic.m.globals.iter().position(|g| &g.name == name) else {
                return ic.bad("global_addr of an unknown global");
            };
            DOp::GlobalAddr {
                dst: ic.res(0)?,
                k: k as u32,
            }
        }
        // Execution is sequentially consistent, so fences have nothing to order.
        Op::Fence(_) | Op::FenceAcqRel(_) | Op::CompilerFence => DOp::Nop,
        _ => return Err(InterpError::Internal("not a memory op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Execute a load, store, pointer or allocation op for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_memory(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
        op: &DOp,
    ) -> crate::Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        let mem = &mut self.mem;
        match op {
            DOp::Load { mt, dst, ptr } => {
                let size = mt.size as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let pv = r(regs, *ptr, l);
                    if size <= 8 {
                        let v = mem
                            .load(pv, size, u64::from(mt.align), tid)
                            .map_err(|f| ctx.fault(f, pc, tid, "load"))?;
                        let v = if mt.elem == ScalarType::Bool {
                            u64::from(v != 0)
                        } else {
                            v
                        };
                        w(regs, *dst, l, v);
                    } else {
                        let (id, off) = mem
                            .check(pv, size, u64::from(mt.align), Access::Read, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, "load"))?;
                        for k in 0..mt.slots() {
                            let chunk = (size - k as usize * 8).min(8);
                            let v = mem.read(id, off + k as usize * 8, chunk);
                            w(regs, dst + k, l, v);
                        }
                    }
                }
            }
            DOp::Store { mt, ptr, val } => {
                let size = mt.size as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let pv = r(regs, *ptr, l);
                    let (id, off) = mem
                        .check(pv, size, u64::from(mt.align), Access::Write, tid)
                        .map_err(|f| ctx.fault(f, pc, tid, "store"))?;
                    for k in 0..mt.slots() {
                        let chunk = (size - k as usize * 8).min(8);
                        let v = r(regs, val + k, l);
                        mem.write(id, off + k as usize * 8, chunk, v);
                    }
                }
            }
            DOp::PtrAdd {
                dst,
                ptr,
                idx,
                idx_ty,
                elem_size,
            } => {
                let (bits, signed, es) = (idx_ty.bits(), idx_ty.is_signed(), *elem_size as i64);
                for l in lanes(mask) {
                    let i = r(regs, *idx, l);
                    let i = if signed {
                        scalar::sext(i, bits)
                    } else {
                        i as i64
                    };
                    let v = ptr_add(r(regs, *ptr, l), i.wrapping_mul(es));
                    w(regs, *dst, l, v);
                }
            }
            DOp::PtrToSpace { dst, a, space } => {
                for l in lanes(mask) {
                    let pv = r(regs, *a, l);
                    if let Some(have) = mem.space_of(pv) {
                        if have != *space {
                            let tid = base + l as u32;
                            let name = mem.allocs[ptr_id(pv) as usize].name.clone();
                            return Err(ctx.fault(
                                Fault::WrongSpace {
                                    name,
                                    have,
                                    want: *space,
                                },
                                pc,
                                tid,
                                "ptr_cast",
                            ));
                        }
                    }
                    w(regs, *dst, l, pv);
                }
            }
            DOp::Alloca { dst, k } => {
                let size = self.p.locals.get(*k as usize).map_or(0, |x| x.0 as usize);
                for l in lanes(mask) {
                    let id = self.local_base + k * self.nthreads + base + l as u32;
                    // First execution in this block: zeroed memory (a re-execution keeps it).
                    let data = &mut mem.allocs[id as usize].data;
                    if data.len() != size {
                        data.clear();
                        data.resize(size, 0);
                    }
                    w(regs, *dst, l, make_ptr(id, 0));
                }
            }
            DOp::GlobalAddr { dst, k } => {
                let v = make_ptr(self.global_base + k, 0);
                for l in lanes(mask) {
                    w(regs, *dst, l, v);
                }
            }
            DOp::SharedAlloc { dst, k } => {
                let v = make_ptr(self.shared_ids[*k as usize], 0);
                for l in lanes(mask) {
                    w(regs, *dst, l, v);
                }
            }
            DOp::DynShared { dst } => {
                let v = make_ptr(self.dyn_id, 0);
                for l in lanes(mask) {
                    w(regs, *dst, l, v);
                }
            }
            _ => return Err(InterpError::Internal("not a memory op".into())),
        }
        Ok(Flow::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_encoding() {
        let p = make_ptr(7, 100);
        assert_eq!(ptr_id(p), 7);
        assert_eq!(ptr_offset(p), 100);
        let q = ptr_add(p, -104);
        assert_eq!(ptr_id(q), 7);
        assert_eq!(ptr_offset(q), -4);
    }
}
