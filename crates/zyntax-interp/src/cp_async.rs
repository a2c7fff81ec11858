//! `cp.async` (sm_80 asynchronous global-to-shared copies): both ends are
//! checked at issue and the source read then; the destination is written at
//! the `cp.async.wait_group` that retires the copy's group.

use crate::decode::{DOp, InstCx};
use crate::exec::{lanes, r, Ctx, Exec, Flow};
use crate::memory::Access;
use crate::{InterpError, Result};
use zyntax_hir::{CacheHint, Op};

/// One issued copy: up to 16 bytes read at issue, written to `dst` at the wait.
#[derive(Clone)]
pub(crate) struct CpCopy {
    dst: u64,
    bytes: [u8; 16],
    len: usize,
}

/// A thread's copies: the open group and the committed ones, oldest first.
#[derive(Default)]
pub(crate) struct CpThread {
    pub(crate) open: Vec<CpCopy>,
    pub(crate) groups: std::collections::VecDeque<Vec<CpCopy>>,
}

/// Decode a `cp.async` op.
pub(crate) fn decode_cp_async(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::CpAsync { bytes, cache } => {
            if !matches!(bytes, 4 | 8 | 16) || (*cache == CacheHint::Cg && *bytes != 16) {
                return ic.bad("cp.async copies 4, 8 or 16 bytes (cg: 16)");
            }
            DOp::CpAsync {
                bytes: *bytes,
                dst: ic.arg(0)?,
                src: ic.arg(1)?,
            }
        }
        Op::CpAsyncCommit => DOp::CpCommit,
        Op::CpAsyncWait(n) => DOp::CpWait(*n),
        _ => return Err(InterpError::Internal("not a cp.async op".into())),
    })
}

impl Exec<'_> {
    /// Issue, commit or wait for `cp.async` copies for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_cp_async(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
        op: &DOp,
    ) -> Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        let mem = &mut self.mem;
        match op {
            DOp::CpAsync { bytes, dst, src } => {
                let n = *bytes as usize;
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let (dv, sv) = (r(regs, *dst, l), r(regs, *src, l));
                    // Both ends are checked when the copy is issued; the source is read now
                    // and the destination written at the matching wait.
                    let (sid, soff) = mem
                        .check(sv, n, n as u64, Access::Read, tid)
                        .map_err(|f| ctx.fault(f, pc, tid, "cp.async source read"))?;
                    mem.shared_only(dv)
                        .map_err(|f| ctx.fault(f, pc, tid, "cp.async destination"))?;
                    let mut copy = CpCopy {
                        dst: dv,
                        bytes: [0; 16],
                        len: n,
                    };
                    copy.bytes[..n].copy_from_slice(&mem.allocs[sid].data[soff..soff + n]);
                    // Bounds of the destination, without touching its shadow state.
                    let saved = mem.checks;
                    mem.checks = false;
                    let chk = mem.check(dv, n, n as u64, Access::Write, tid);
                    mem.checks = saved;
                    chk.map_err(|f| ctx.fault(f, pc, tid, "cp.async destination write"))?;
                    self.cp[tid as usize].open.push(copy);
                }
            }
            DOp::CpCommit => {
                for l in lanes(mask) {
                    let c = &mut self.cp[(base + l as u32) as usize];
                    let g = std::mem::take(&mut c.open);
                    c.groups.push_back(g);
                }
            }
            DOp::CpWait(n) => {
                for l in lanes(mask) {
                    let tid = base + l as u32;
                    let c = &mut self.cp[tid as usize];
                    while c.groups.len() > *n as usize {
                        let Some(g) = c.groups.pop_front() else { break };
                        for copy in g {
                            let (id, off) = mem
                                .check(copy.dst, copy.len, 1, Access::Write, tid)
                                .map_err(|f| ctx.fault(f, pc, tid, "cp.async completion"))?;
                            mem.allocs[id].data[off..off + copy.len]
                                .copy_from_slice(&copy.bytes[..copy.len]);
                        }
                    }
                }
            }
            _ => return Err(InterpError::Internal("not a cp.async op".into())),
        }
        Ok(Flow::Next)
    }
}
