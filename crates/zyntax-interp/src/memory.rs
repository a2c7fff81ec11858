//! Memory: allocations are byte vectors; a pointer value is
//! `(allocation id << 40) | (byte offset as 40-bit two's complement)`.
//! Id 0 is the null pointer. The allocation knows its address space, so a
//! generic pointer resolves to the space it was made from.
//!
//! Shared memory carries shadow state for the initialization check and the
//! race check (one entry per byte, see [`Shadow`]).

use zyntax_hir::AddrSpace;

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
