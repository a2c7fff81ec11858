//! TMA and bulk copies (issue 13 item 2) as the data movement they describe.
//!
//! A tensor map reaches the interpreter as an [`InterpTensorMap`]: a
//! [`TensorMapDesc`] over one of the launch's buffers (the register of a
//! `tensormap` parameter holds its index + 1). Each copy happens when the
//! issuing thread executes it (one allowed order of an asynchronous copy):
//!
//! - `tma.load`: every box element, at global coordinate
//!   `coords[k] + i_k * elem_strides[k]`, is read from the tensor, or is the
//!   fill value (0, or a NaN with `oob_fill = nan`) when any coordinate lies
//!   outside `0..dims[k]`; it is written to the shared destination at
//!   [`TensorMapDesc::shared_offset`] (row by row, innermost first, then the
//!   swizzle). Then the box's bytes complete on the mbarrier (`complete_tx`).
//!   With a multicast mask the box and its `complete_tx` go to the same
//!   shared offsets in every CTA of the cluster the mask names (the blocks
//!   run co-scheduled, as with `mapa`).
//! - `tma.store` / `tma.reduce.*`: the reverse for in-bounds elements only;
//!   the reduction combines with the tensor's value in its element type. A
//!   box that starts before the tensor (any negative coordinate) is a trap:
//!   an H100 raises an illegal instruction for it (a box crossing the far
//!   edge is clipped there, as here).
//! - `bulk.copy.*`: `bytes` (a multiple of 16, both ends 16-byte aligned).
//! - `bulk.commit_group` / `bulk.wait_group` and `prefetch.tensormap` change no value.
//!
//! The innermost coordinate of a tensor copy must address a 16-byte boundary
//! (`coords[0] * size` a multiple of 16; Hopper raises an illegal instruction
//! otherwise). The shared destination of a tensor copy must be 128-byte aligned within
//! its allocation, and, with a swizzle, aligned to one repeat of the pattern
//! (256, 512 or 1024 bytes for 32B, 64B and 128B), so that the pattern the
//! interpreter applies to offsets is the one the hardware applies to
//! addresses. Anything else is a `TrapKind::InvalidTma` naming it. The shared
//! box spans [`TensorMapDesc::shared_bytes`]: rows narrower than the swizzle
//! span are a span apart, and the bytes between them are left as they were.

use crate::cluster::{cluster_rank, mapa_target};
use crate::decode::{DOp, InstCx, Program};
use crate::exec::{lanes, r, Ctx, Exec, Flow};
use crate::mbarrier;
use crate::memory::{self, Access, Fault, Memory};
use crate::InterpError;
use crate::{scalar, TrapKind};
use zyntax_hir::tensormap::{OobFill, TensorMapDesc};
use zyntax_hir::{AddrSpace, BinOp, BulkRedOp, MbarrierOp, Op, ScalarType, Type};

/// A tensor map argument of an interpreter launch: `desc` over buffer
/// `buffer` (its index in the launch's buffers) starting `offset` bytes in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpTensorMap {
    pub buffer: usize,
    pub offset: u64,
    pub desc: TensorMapDesc,
}

/// One decoded TMA instruction: the op and its operand slots.
#[derive(Clone, Debug)]
pub struct TmaInst {
    pub op: Op,
    pub slots: Vec<u32>,
    /// The element type of `bulk.reduce`.
    pub elem: Option<ScalarType>,
}

/// Why a TMA instruction stopped: a memory fault (with what was accessed) or a trap.
pub enum TmaError {
    Mem(Fault, &'static str),
    Trap(TrapKind, String),
}

fn trap<T>(msg: String) -> Result<T, TmaError> {
    Err(TmaError::Trap(TrapKind::InvalidTma, msg))
}

fn mem_err(what: &'static str) -> impl Fn(Fault) -> TmaError {
    move |f| TmaError::Mem(f, what)
}

/// Executes `inst` for one thread. `val(k)` is the bits of operand `k`.
pub fn exec(
    inst: &TmaInst,
    maps: &[InterpTensorMap],
    mem: &mut Memory,
    val: impl Fn(usize) -> u64,
    tid: u32,
    peer: impl Fn(u64, u32) -> Result<u64, TmaError>,
) -> Result<(), TmaError> {
    let mn = inst.op.mnemonic();
    let map = |k: usize| -> Result<&InterpTensorMap, TmaError> {
        let bits = val(k);
        match bits.checked_sub(1).and_then(|i| maps.get(i as usize)) {
            Some(m) => Ok(m),
            None => trap(format!(
                "{mn}: operand {k} is not a tensor map of this launch"
            )),
        }
    };
    let coords = |from: usize, to: usize| -> Vec<i64> {
        (from..to)
            .map(|k| i64::from(scalar::sext(val(k), 32) as i32))
            .collect()
    };
    let n = inst.slots.len();
    match &inst.op {
        Op::TmaLoad { multicast } => {
            let end = n - usize::from(*multicast);
            let t = map(1)?;
            let c = coords(3, end);
            check_coords(&mn, &t.desc, &c)?;
            // (destination, barrier) per receiving CTA: the issuer's own, or
            // with a multicast mask the same offsets in every named CTA.
            let (dst, bar) = (val(0), val(2));
            let mut targets = Vec::new();
            if *multicast {
                let mask = val(end) & 0xffff;
                if mask == 0 {
                    return trap(format!("{mn}: the CTA mask is empty"));
                }
                for rank in (0..16).filter(|r| mask >> r & 1 != 0) {
                    targets.push((peer(dst, rank)?, peer(bar, rank)?));
                }
            } else {
                targets.push((dst, bar));
            }
            // Read the box once, then write it to every target.
            let fill = fill_bits(&t.desc);
            let esize = t.desc.elem_bytes() as usize;
            let mut data = Vec::new();
            for_each_box_elem(&t.desc, |idx| {
                data.push(match global_offset(t, &c, idx) {
                    Some(off) => {
                        let p = memory::make_ptr(t.buffer as u32 + 1, off as i64);
                        mem.load(p, esize, 1, tid)
                            .map_err(mem_err("tma.load tensor read"))?
                    }
                    None => fill,
                });
                Ok(())
            })?;
            for (dst, bar) in targets {
                shared_box_ptr(mem, dst, &t.desc, &mn)?;
                let mut k = 0;
                for_each_box_elem(&t.desc, |idx| {
                    let d = memory::ptr_add(dst, t.desc.shared_offset(idx) as i64);
                    k += 1;
                    mem.store(d, esize, 1, data[k - 1], tid)
                        .map_err(mem_err("tma.load shared write"))
                })?;
                complete_tx(mem, bar, t.desc.box_bytes(), tid)?;
            }
            Ok(())
        }
        Op::TmaStore | Op::TmaReduce(_) => {
            let t = map(0)?;
            let c = coords(2, n);
            check_coords(&mn, &t.desc, &c)?;
            if let Some(k) = c.iter().position(|&v| v < 0) {
                return trap(format!(
                    "{mn}: coordinate {k} is {}: a store or reduction box must not start before \
                     the tensor (the hardware raises an illegal instruction)",
                    c[k]
                ));
            }
            let src = val(1);
            shared_box_ptr(mem, src, &t.desc, &mn)?;
            let esize = t.desc.elem_bytes() as usize;
            let red = match &inst.op {
                Op::TmaReduce(r) => Some(reduce_op(*r, t.desc.dtype, &mn)?),
                _ => None,
            };
            for_each_box_elem(&t.desc, |idx| {
                let Some(off) = global_offset(t, &c, idx) else {
                    return Ok(());
                };
                let s = memory::ptr_add(src, t.desc.shared_offset(idx) as i64);
                let v = mem
                    .load(s, esize, 1, tid)
                    .map_err(mem_err("tma shared read"))?;
                let p = memory::make_ptr(t.buffer as u32 + 1, off as i64);
                let v = match red {
                    Some(op) => {
                        let old = mem
                            .load(p, esize, 1, tid)
                            .map_err(mem_err("tma.reduce tensor read"))?;
                        scalar::binary(op, t.desc.dtype, old, v) & scalar::mask(esize as u32 * 8)
                    }
                    None => v,
                };
                mem.store(p, esize, 1, v, tid)
                    .map_err(mem_err("tma tensor write"))
            })
        }
        Op::BulkCopyG2S | Op::BulkCopyS2G => {
            let (dst, src, bytes) = (val(0), val(1), val(2) as u32 as usize);
            if !bytes.is_multiple_of(16) {
                return trap(format!("{mn}: {bytes} bytes is not a multiple of 16"));
            }
            let want = if matches!(inst.op, Op::BulkCopyG2S) {
                AddrSpace::Shared
            } else {
                AddrSpace::Global
            };
            if mem.space_of(dst) != Some(want) {
                return trap(format!("{mn}: the destination is not {want} memory"));
            }
            let (sid, soff) = mem
                .check(src, bytes, 16, Access::Read, tid)
                .map_err(mem_err("bulk copy source read"))?;
            let data = mem.allocs[sid].data[soff..soff + bytes].to_vec();
            let (did, doff) = mem
                .check(dst, bytes, 16, Access::Write, tid)
                .map_err(mem_err("bulk copy destination write"))?;
            mem.allocs[did].data[doff..doff + bytes].copy_from_slice(&data);
            if matches!(inst.op, Op::BulkCopyG2S) {
                complete_tx(mem, val(3), bytes as u64, tid)?;
            }
            Ok(())
        }
        Op::BulkReduce(r) => {
            let (dst, src, bytes) = (val(0), val(1), val(2) as u32 as usize);
            let Some(ty) = inst.elem else {
                return trap(format!("{mn}: no element type"));
            };
            if !bytes.is_multiple_of(16) {
                return trap(format!("{mn}: {bytes} bytes is not a multiple of 16"));
            }
            if mem.space_of(dst) != Some(AddrSpace::Global) {
                return trap(format!("{mn}: the destination is not global memory"));
            }
            let op = match r {
                BulkRedOp::Add => BinOp::Add,
                BulkRedOp::Min => BinOp::Min,
                BulkRedOp::Max => BinOp::Max,
            };
            let esize = ty.size_bytes() as usize;
            for k in 0..bytes / esize {
                let at = (k * esize) as i64;
                let s = mem
                    .load(memory::ptr_add(src, at), esize, 16.min(esize as u64), tid)
                    .map_err(mem_err("bulk.reduce source read"))?;
                let p = memory::ptr_add(dst, at);
                let old = mem
                    .load(p, esize, 1, tid)
                    .map_err(mem_err("bulk.reduce destination read"))?;
                let v = scalar::binary(op, ty, old, s) & scalar::mask(esize as u32 * 8);
                mem.store(p, esize, 1, v, tid)
                    .map_err(mem_err("bulk.reduce destination write"))?;
            }
            Ok(())
        }
        Op::PrefetchTensormap => map(0).map(|_| ()),
        // Copies complete when issued: the groups have nothing left to wait for.
        Op::BulkCommitGroup | Op::BulkWaitGroup { .. } => Ok(()),
        other => trap(format!("`{}` is not a TMA op", other.mnemonic())),
    }
}

/// The coordinate count is the map's rank, and the innermost coordinate
/// addresses a 16-byte boundary (Hopper raises an illegal instruction otherwise).
fn check_coords(mn: &str, d: &TensorMapDesc, c: &[i64]) -> Result<(), TmaError> {
    if c.len() != d.rank() {
        return trap(format!(
            "{mn}: {} coordinates for a rank-{} tensor map",
            c.len(),
            d.rank()
        ));
    }
    let bytes = c[0] * d.elem_bytes() as i64;
    if bytes.rem_euclid(16) != 0 {
        return trap(format!(
            "{mn}: the innermost coordinate {} is {bytes} bytes into a row; it must be a multiple \
             of 16 bytes ({} elements of {})",
            c[0],
            16 / d.elem_bytes(),
            d.dtype
        ));
    }
    Ok(())
}

/// Checks the shared end of a tensor copy: shared memory, aligned for the swizzle.
fn shared_box_ptr(mem: &Memory, p: u64, d: &TensorMapDesc, mn: &str) -> Result<(), TmaError> {
    if mem.space_of(p) != Some(AddrSpace::Shared) {
        return trap(format!("{mn}: the box pointer is not shared memory"));
    }
    let atom = d.swizzle.atom_bytes();
    let off = memory::ptr_offset(p);
    if off.rem_euclid(atom as i64) != 0 {
        return trap(format!(
            "{mn}: the shared box at byte offset {off} is not {atom}-byte aligned \
             (tensor copies need 128; swizzle {} needs {atom})",
            d.swizzle
        ));
    }
    Ok(())
}

/// Calls `f` with each box index (innermost first), in shared-memory order.
fn for_each_box_elem(
    d: &TensorMapDesc,
    mut f: impl FnMut(&[u64]) -> Result<(), TmaError>,
) -> Result<(), TmaError> {
    let rank = d.rank();
    let n: Vec<u64> = (0..rank).map(|k| d.box_elems(k)).collect();
    let mut idx = vec![0u64; rank];
    let total: u64 = n.iter().product();
    for _ in 0..total {
        f(&idx)?;
        for k in 0..rank {
            idx[k] += 1;
            if idx[k] < n[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(())
}

/// The byte offset in the tensor's buffer of box element `idx` at `coords`,
/// `None` when it lies outside the tensor.
fn global_offset(t: &InterpTensorMap, coords: &[i64], idx: &[u64]) -> Option<u64> {
    let d = &t.desc;
    let mut off = t.offset;
    for k in 0..d.rank() {
        let g = coords[k] + (idx[k] * u64::from(d.elem_strides[k])) as i64;
        if g < 0 || g as u64 >= d.dims[k] {
            return None;
        }
        off += g as u64 * d.stride(k);
    }
    Some(off)
}

/// What an out-of-bounds element reads as: 0, or a quiet NaN of the float type.
fn fill_bits(d: &TensorMapDesc) -> u64 {
    match (d.oob_fill, d.dtype) {
        (OobFill::Nan, ScalarType::F16 | ScalarType::BF16) => 0x7fff,
        (OobFill::Nan, ScalarType::F32) => 0x7fff_ffff,
        (OobFill::Nan, ScalarType::F64) => 0x7fff_ffff_ffff_ffff,
        _ => 0,
    }
}

/// The element types PTX's `cp.reduce.async.bulk.tensor` reduces.
fn reduce_op(op: BulkRedOp, ty: ScalarType, mn: &str) -> Result<BinOp, TmaError> {
    use ScalarType as S;
    let ok = match op {
        BulkRedOp::Add => matches!(ty, S::U32 | S::I32 | S::U64 | S::F32 | S::F16 | S::BF16),
        BulkRedOp::Min | BulkRedOp::Max => {
            matches!(ty, S::U32 | S::I32 | S::U64 | S::I64 | S::F16 | S::BF16)
        }
    };
    if !ok {
        return trap(format!("{mn}: PTX has no {op} reduction of {ty} tensors"));
    }
    Ok(match op {
        BulkRedOp::Add => BinOp::Add,
        BulkRedOp::Min => BinOp::Min,
        BulkRedOp::Max => BinOp::Max,
    })
}

/// `mbarrier.complete_tx` of `bytes` on the barrier at `bar`, as the copy engine does.
fn complete_tx(mem: &mut Memory, bar: u64, bytes: u64, tid: u32) -> Result<(), TmaError> {
    if mem.space_of(bar) != Some(AddrSpace::Shared) {
        return trap("the mbarrier is not in shared memory".into());
    }
    let (id, off) = mem
        .check(bar, 8, 8, Access::Atomic, tid)
        .map_err(mem_err("mbarrier complete_tx"))?;
    mbarrier::apply(mem, id, off, MbarrierOp::CompleteTx, bytes, 0)
        .map_err(|m| TmaError::Trap(TrapKind::InvalidMbarrier, m))?;
    Ok(())
}

// ---------------------------------------------------------------- decoding

/// Decode a TMA or bulk-copy op.
pub(crate) fn decode_tma(ic: &InstCx, p: &mut Program) -> crate::Result<DOp> {
    Ok(match &ic.d.op {
        Op::TmaLoad { .. }
        | Op::TmaStore
        | Op::TmaReduce(_)
        | Op::BulkCopyG2S
        | Op::BulkCopyS2G
        | Op::BulkCommitGroup
        | Op::BulkWaitGroup { .. }
        | Op::PrefetchTensormap
        | Op::BulkReduce(_) => {
            let slots = (0..ic.d.args.len())
                .map(|k| ic.arg(k))
                .collect::<crate::Result<Vec<u32>>>()?;
            // `bulk.reduce`: the element type is the source pointer's.
            let elem = match ic.d.op {
                Op::BulkReduce(_) => ic.arg_ty(1).pointee().and_then(Type::as_scalar),
                _ => None,
            };
            p.tma.push(TmaInst {
                op: ic.d.op.clone(),
                slots,
                elem,
            });
            DOp::Tma(p.tma.len() as u32 - 1)
        }
        // The interpreter has one proxy and sequentially consistent memory.
        Op::FenceProxyAsync => DOp::Nop,
        _ => return Err(InterpError::Internal("not a TMA op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Execute a TMA or bulk-copy instruction for the lanes `mask`, one lane after another.
    #[inline]
    pub(crate) fn exec_tma(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
        op: &DOp,
    ) -> crate::Result<Flow> {
        let DOp::Tma(i) = op else {
            return Err(InterpError::Internal("not a TMA op".into()));
        };
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        let mem = &mut self.mem;
        let inst = &self.p.tma[*i as usize];
        // Each lane issues its own copy, one after another.
        for l in lanes(mask) {
            let tid = base + l as u32;
            let val = |k: usize| r(regs, inst.slots[k], l);
            // A multicast's target in the cluster's block `rank`.
            let own = cluster_rank(self.bid, self.cluster);
            let peer = |ptr: u64, rank: u32| {
                if rank == own {
                    return Ok(ptr);
                }
                mapa_target(
                    (&self.shared_ids, self.dyn_id),
                    &self.parked,
                    &self.group,
                    self.cur,
                    self.cluster,
                    self.bid,
                    ptr,
                    rank,
                )
                .map_err(|(k, m)| TmaError::Trap(k, format!("tma.load.multicast: {m}")))
            };
            exec(inst, &self.tensor_maps, mem, val, tid, peer).map_err(|e| match e {
                TmaError::Mem(f, what) => ctx.fault(f, pc, tid, what),
                TmaError::Trap(kind, msg) => ctx.trap(kind, pc, tid, msg),
            })?;
        }
        Ok(Flow::Next)
    }
}
