//! Control flow and block barriers: branches (the group goes on together or
//! splits), exit, recursive calls (a nested single-thread activation),
//! `unreachable`, `barrier` and named barriers (`bar.sync`/`bar.arrive`).

use crate::cp_async::CpThread;
use crate::decode::{DOp, InstCx, VLoc};
use crate::exec::{edge_copies, lanes, r, w, Exec, Flow, St, Warp};
use crate::memory::{Alloc, Memory};
use crate::{InterpError, Result, TrapKind};
use std::rc::Rc;
use zyntax_hir::{AddrSpace, Op};

/// Deepest recursion the interpreter runs (GPU stacks are small too).
const MAX_DEPTH: u32 = 200;

/// Decode a block barrier or named barrier.
pub(crate) fn decode_barrier(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::Barrier => DOp::Barrier,
        Op::NamedBarrier { arrive, id, count } => DOp::NamedBarrier {
            arrive: *arrive,
            id: *id,
            count: *count,
        },
        _ => return Err(InterpError::Internal("not a barrier".into())),
    })
}

impl Exec<'_> {
    /// Execute a branch, exit, recursive call, `unreachable` or block
    /// barrier for the lanes `mask`: what the group does next.
    #[inline]
    pub(crate) fn exec_control(&mut self, wi: usize, pc: u32, mask: u32, op: &DOp) -> Result<Flow> {
        let p = self.p;
        let warp = &mut self.warps[wi];
        match op {
            DOp::Nop => Ok(Flow::Next),
            DOp::Barrier => {
                for l in lanes(mask) {
                    warp.st[l] = St::Bar;
                    warp.pc[l] = pc;
                }
                Ok(Flow::Stop)
            }
            DOp::Jump(e) => {
                let e = &p.edges[*e as usize];
                edge_copies(warp, e, mask, &mut self.scratch, &mut self.fscratch);
                Ok(Flow::Goto(e.pc))
            }
            DOp::Br { cond, t, e } => {
                let mut tmask = 0u32;
                for l in lanes(mask) {
                    if r(&warp.regs, *cond, l) & 1 != 0 {
                        tmask |= 1 << l;
                    }
                }
                let emask = mask & !tmask;
                let (te, ee) = (&p.edges[*t as usize], &p.edges[*e as usize]);
                if emask == 0 || tmask == 0 {
                    let e = if emask == 0 { te } else { ee };
                    edge_copies(warp, e, mask, &mut self.scratch, &mut self.fscratch);
                    return Ok(Flow::Goto(e.pc));
                }
                edge_copies(warp, te, tmask, &mut self.scratch, &mut self.fscratch);
                edge_copies(warp, ee, emask, &mut self.scratch, &mut self.fscratch);
                for l in lanes(tmask) {
                    warp.pc[l] = te.pc;
                }
                for l in lanes(emask) {
                    warp.pc[l] = ee.pc;
                }
                Ok(Flow::Stop)
            }
            DOp::Exit { rets } => {
                if self.returned.is_none() && !p.returns.is_empty() {
                    let l = mask.trailing_zeros() as usize;
                    let vals = p.ret_lists[*rets as usize]
                        .iter()
                        .map(|loc| match loc {
                            VLoc::Slots(s, n) => (0..*n).map(|k| r(&warp.regs, s + k, l)).collect(),
                            VLoc::Frag(_) => Vec::new(),
                        })
                        .collect();
                    self.returned = Some(vals);
                }
                for l in lanes(mask) {
                    warp.st[l] = St::Done;
                }
                Ok(Flow::Stop)
            }
            DOp::CallRec { call } => {
                for l in lanes(mask) {
                    self.call_rec(wi, pc, l, *call)?;
                }
                Ok(Flow::Next)
            }
            DOp::Unreachable => {
                let tid = warp.base_tid + mask.trailing_zeros();
                Err(self.ctx_full().trap(
                    TrapKind::Unreachable,
                    pc,
                    tid,
                    "reached `unreachable`".into(),
                ))
            }
            DOp::NamedBarrier { arrive, id, count } => {
                // The whole warp arrives together (PTX's `bar` is `.aligned`).
                let Some(group) = self.gather_collective(wi, pc, mask)? else {
                    return Ok(Flow::Stop);
                };
                if self.named_barrier(wi, pc, group, *arrive, *id, *count)? {
                    let warp = &mut self.warps[wi];
                    for l in lanes(group) {
                        warp.st[l] = St::NBar;
                        warp.pc[l] = pc;
                    }
                    return Ok(Flow::Stop);
                }
                Ok(Flow::NextWith(group))
            }
            _ => Err(InterpError::Internal("not a control op".into())),
        }
    }

    /// Warp `wi` (lanes `mask`, at `pc`) arrives at named barrier `id`; true
    /// when it must wait (`bar.sync` before the count is reached). Completing
    /// the barrier releases every warp waiting at it and, like `barrier`,
    /// starts a new race-check interval.
    fn named_barrier(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
        arrive: bool,
        id: u32,
        count: u32,
    ) -> Result<bool> {
        let tid = self.warps[wi].base_tid + mask.trailing_zeros();
        if self.depth > 0 {
            return Err(self.ctx_full().trap(
                TrapKind::InvalidCollective,
                pc,
                tid,
                "named barrier inside a recursive call".into(),
            ));
        }
        let slot = &mut self.nbar[id as usize % 16];
        if slot.0 > 0 && slot.1 != count {
            let (got, want) = (slot.0, slot.1);
            return Err(self.ctx_full().trap(
                TrapKind::DivergentBarrier,
                pc,
                tid,
                format!(
                    "named barrier {id} reached with count {count} while {got} threads wait with count {want}"
                ),
            ));
        }
        // The hardware counts a warp as 32 threads, even a partial one.
        slot.0 += 32;
        slot.1 = count;
        if slot.0 < count {
            return Ok(!arrive);
        }
        *slot = (0, 0);
        let p = self.p;
        for warp in &mut self.warps {
            for l in lanes(warp.exist) {
                let here = warp.st[l] == St::NBar
                    && matches!(p.insts.get(warp.pc[l] as usize).map(|i| &i.op),
                        Some(DOp::NamedBarrier { id: i, .. }) if *i == id);
                if here {
                    warp.st[l] = St::Run;
                    warp.pc[l] += 1;
                }
            }
        }
        self.mem.epoch = self.mem.epoch.wrapping_add(1);
        self.nbar_released = true;
        Ok(false)
    }

    /// Every thread is blocked or done while lane `l` of `warp` waits at a named barrier.
    pub(crate) fn named_barrier_deadlock(&self, warp: &Warp, l: usize) -> InterpError {
        let pc = warp.pc[l];
        let (id, count) = match self.p.insts.get(pc as usize).map(|i| &i.op) {
            Some(DOp::NamedBarrier { id, count, .. }) => (*id, *count),
            _ => (0, 0),
        };
        let got = self.nbar[id as usize % 16].0;
        self.ctx_full().trap(
            TrapKind::DivergentBarrier,
            pc,
            warp.base_tid + l as u32,
            format!(
                "named barrier {id} deadlock: {got} of {count} threads arrived and no other thread can arrive"
            ),
        )
    }

    /// Run recursive call `k` for lane `l` as a nested single-thread
    /// activation sharing this launch's memory; its allocas live until it returns.
    fn call_rec(&mut self, wi: usize, pc: u32, l: usize, k: u32) -> Result<()> {
        let p = self.p;
        let tid = self.warps[wi].base_tid + l as u32;
        let Some(rc) = p.rec_calls.get(k as usize) else {
            return Err(InterpError::Internal("bad recursive call index".into()));
        };
        if self.depth >= MAX_DEPTH {
            return Err(self.ctx_full().trap(
                TrapKind::StackOverflow,
                pc,
                tid,
                format!("recursion deeper than {MAX_DEPTH} calls"),
            ));
        }
        let cached = self.progs.borrow().get(&rc.callee).cloned();
        let prog = match cached {
            Some(prog) => prog,
            None => {
                let prog = crate::decode::decode(self.m, rc.callee)?;
                if !prog.shared.is_empty()
                    || prog.insts.iter().any(|i| {
                        i.op.is_collective()
                            || matches!(
                                i.op,
                                DOp::Barrier
                                    | DOp::ClusterArrive
                                    | DOp::ClusterWait
                                    | DOp::GridSync
                                    | DOp::Mapa { .. }
                            )
                    })
                {
                    let name = self
                        .m
                        .functions
                        .get(rc.callee)
                        .map_or("", |f| f.name.as_str());
                    return Err(InterpError::Unsupported(format!(
                        "@{name} is called recursively and uses shared_alloc, a barrier or a warp collective"
                    )));
                }
                let prog = Rc::new(prog);
                self.progs.borrow_mut().insert(rc.callee, prog.clone());
                prog
            }
        };
        let args: Vec<Vec<u64>> = rc
            .args
            .iter()
            .map(|loc| match loc {
                VLoc::Slots(s, n) => (0..*n).map(|k| r(&self.warps[wi].regs, s + k, l)).collect(),
                VLoc::Frag(_) => Vec::new(),
            })
            .collect();
        let mut mem = std::mem::replace(&mut self.mem, Memory::new(false));
        let allocs_before = mem.allocs.len();
        let local_base = allocs_before as u32;
        for (bytes, name) in &prog.locals {
            mem.add(Alloc::new(
                vec![0; *bytes as usize],
                AddrSpace::Local,
                format!("{name} (depth {})", self.depth + 1),
            ));
        }
        let mut sub = Exec {
            m: self.m,
            p: &prog,
            mem,
            fuel: self.fuel,
            fuel_total: self.fuel_total,
            grid: self.grid,
            bdim: self.bdim,
            bid: self.bid,
            tids: vec![self.tids[tid as usize]],
            shared_ids: Vec::new(),
            global_base: self.global_base,
            dyn_id: self.dyn_id,
            window: self.window.clone(),
            local_base,
            nthreads: 1,
            warps: vec![Warp {
                regs: vec![0; prog.nslots.max(1) * 32],
                frags: Vec::new(),
                pc: [0; 32],
                st: [St::Done; 32],
                exist: 1,
                base_tid: 0,
            }],
            cp: vec![CpThread::default()],
            scratch: Vec::new(),
            fscratch: Vec::new(),
            returned: None,
            steps: 0,
            depth: self.depth + 1,
            lane_base: self.lane_base + l as u32,
            progs: self.progs.clone(),
            root: self.root,
            uses_cp: false,
            tensor_maps: self.tensor_maps.clone(),
            nbar: [(0, 0); 16],
            nbar_released: false,
            cluster: self.cluster,
            explicit_cluster: self.explicit_cluster,
            co: false,
            c_arrived: vec![0],
            c_waited: vec![0],
            group: Vec::new(),
            parked: vec![None],
            cur: 0,
        };
        let res = sub.run_block(&args);
        let returned = sub.returned.take();
        let (fuel, steps) = (sub.fuel, sub.steps);
        let mut mem = std::mem::replace(&mut sub.mem, Memory::new(false));
        drop(sub);
        // The activation's allocas die with it (pointers to them become invalid).
        mem.allocs.truncate(allocs_before);
        self.mem = mem;
        self.fuel = fuel;
        self.steps += steps;
        res?;
        let vals = returned.unwrap_or_default();
        let warp = &mut self.warps[wi];
        for (loc, bits) in rc.results.iter().zip(vals) {
            if let VLoc::Slots(s, n) = loc {
                for k in 0..*n {
                    w(
                        &mut warp.regs,
                        s + k,
                        l,
                        bits.get(k as usize).copied().unwrap_or(0),
                    );
                }
            }
        }
        Ok(())
    }
}
