//! The executor: blocks run one after another; in a block, warps run one
//! after another, each until all its lanes are blocked (barrier, collective)
//! or exited; a barrier releases when every warp is blocked and every
//! non-exited thread waits at the same barrier instruction.
//!
//! In a warp every lane has its own pc; the lanes at the lowest pc among the
//! runnable ones run together, one instruction for all of them per step
//! (lockstep), so divergent paths reconverge where they meet. A warp
//! collective runs when every non-exited lane named in the masks of the lanes
//! that reached it has reached the same instruction.
//!
//! Kernels that use cluster barriers, `mapa`, TMA multicast or `grid_sync` run co-scheduled
//! (h13-cluster): the blocks of one cluster (with `grid_sync`, of the whole
//! grid) are resident together and take turns, each until its warps are all
//! blocked, done, or out of their time slice (see `run_co`).
//!
//! Each op family executes in its own file (`scalar.rs`, `memory.rs`,
//! `atomic.rs`, `warp.rs`, `control.rs`, ...): `run_group` matches
//! an instruction's family and calls the family's `exec_*` method, and
//! `collective` does the same for warp collectives.

use crate::cluster::Cta;
use crate::cp_async::CpThread;
use crate::decode::{DOp, Edge, MemTy, Program, VLoc, FRAG_ELEMS};
use crate::memory::{self, Alloc, Fault, Memory};
use crate::scalar;
use crate::wgmma;
use crate::{InterpError, Result, Trap, TrapKind};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use zyntax_hir::{AddrSpace, Module};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum St {
    Run,
    /// Waiting at a warp collective.
    Coll,
    /// Waiting at a barrier.
    Bar,
    /// Waiting at a named barrier (`bar.sync id, count`).
    NBar,
    /// Waiting at `cluster_barrier.wait`.
    ClusterWait,
    /// Waiting at `grid_sync`.
    GridWait,
    Done,
}

pub(crate) struct Warp {
    pub(crate) regs: Vec<u64>,
    pub(crate) frags: Vec<f64>,
    pub(crate) pc: [u32; 32],
    pub(crate) st: [St; 32],
    /// Lanes that exist (the last warp of a block may be partial).
    pub(crate) exist: u32,
    pub(crate) base_tid: u32,
}

pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u64,
    /// Tensor maps of the launch (issue 13 item 2).
    pub tensor_maps: Rc<Vec<crate::tma::InterpTensorMap>>,
    /// Blocks per cluster ([1, 1, 1]: no clusters) and whether the launch or kernel declared it.
    pub cluster: [u32; 3],
    pub explicit_cluster: bool,
    /// Allocation id of the module's first global (the rest follow in order).
    pub global_base: u32,
}

/// How one scheduling round of a block ended.
pub(crate) enum Round {
    /// A warp's time slice ended: it can run on.
    Yielded,
    /// A block barrier released.
    Released,
    /// Every thread is done or waits for something outside the block.
    Stopped,
}

pub struct Exec<'a> {
    pub(crate) m: &'a Module,
    pub(crate) p: &'a Program,
    pub mem: Memory,
    pub(crate) fuel: u64,
    pub(crate) fuel_total: u64,
    pub(crate) grid: [u32; 3],
    pub(crate) bdim: [u32; 3],
    pub(crate) bid: [u32; 3],
    pub(crate) tids: Vec<[u32; 3]>,
    pub(crate) shared_ids: Vec<u32>,
    pub(crate) global_base: u32,
    pub(crate) dyn_id: u32,
    /// The block's shared window: (address, allocation id, bytes) per allocation (see `wgmma`).
    pub(crate) window: Vec<(u64, u32, u64)>,
    pub(crate) local_base: u32,
    pub(crate) nthreads: u32,
    pub(crate) warps: Vec<Warp>,
    pub(crate) cp: Vec<CpThread>,
    pub(crate) scratch: Vec<u64>,
    pub(crate) fscratch: Vec<f64>,
    /// Return values of the entry (host calls), as slot bits.
    pub returned: Option<Vec<Vec<u64>>>,
    /// Warp-steps and thread-instructions executed.
    pub steps: u64,
    /// Nesting depth of recursive activations (0: the launch itself).
    pub(crate) depth: u32,
    /// Lane id of the thread a nested activation runs for.
    pub(crate) lane_base: u32,
    /// Programs of recursively called functions, decoded once per launch.
    pub(crate) progs: Rc<RefCell<HashMap<usize, Rc<Program>>>>,
    /// The launched function.
    pub(crate) root: usize,
    /// Whether the program issues `cp.async` (else per-thread copy state is never touched).
    pub(crate) uses_cp: bool,
    /// Tensor maps of the launch, indexed by a `tensormap` register's bits - 1.
    pub(crate) tensor_maps: Rc<Vec<crate::tma::InterpTensorMap>>,
    /// Named barriers 1..=15 of the block: (threads arrived, expected count).
    pub(crate) nbar: [(u32, u32); 16],
    /// A named barrier completed in this round: its waiters can run again.
    pub(crate) nbar_released: bool,
    // h13-cluster: clusters and co-scheduled blocks.
    pub(crate) cluster: [u32; 3],
    pub(crate) explicit_cluster: bool,
    /// Whether blocks run co-scheduled (cluster barriers, `mapa`, `grid_sync`).
    pub(crate) co: bool,
    /// Cluster-barrier arrivals and completed waits of each thread of the running block.
    pub(crate) c_arrived: Vec<u32>,
    pub(crate) c_waited: Vec<u32>,
    /// The blocks of the running group; `parked[k]` holds block k's state
    /// unless it is the running one (`cur`).
    pub(crate) group: Vec<[u32; 3]>,
    pub(crate) parked: Vec<Option<Cta>>,
    pub(crate) cur: usize,
}

/// What a lockstep group does after an instruction (see `run_group`).
pub(crate) enum Flow {
    /// Go on at the next instruction.
    Next,
    /// Go on at the next instruction with the lanes `mask`: a collective
    /// gathered the lanes that waited there.
    NextWith(u32),
    /// Go on at `pc`: a branch every lane of the group takes.
    Goto(u32),
    /// The group stops: its lanes wait, diverged or exited.
    Stop,
}

/// What a trap needs to say where it happened.
pub(crate) struct Ctx<'a> {
    pub(crate) m: &'a Module,
    pub(crate) p: &'a Program,
    pub(crate) tids: &'a [[u32; 3]],
    pub(crate) bid: [u32; 3],
    /// The launched function (nested activations run other programs).
    pub(crate) root: usize,
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        m: &'a Module,
        p: &'a Program,
        tids: &'a [[u32; 3]],
        bid: [u32; 3],
        root: usize,
    ) -> Ctx<'a> {
        Ctx {
            m,
            p,
            tids,
            bid,
            root,
        }
    }

    pub(crate) fn trap(&self, kind: TrapKind, pc: u32, tid: u32, message: String) -> InterpError {
        let (function, inst) = match self.p.insts.get(pc as usize) {
            Some(di) => match self.m.functions.get(di.func as usize) {
                Some(f) => (f.name.clone(), zyntax_hir::print_inst(f, di.inst)),
                None => (String::new(), String::new()),
            },
            None => (String::new(), String::new()),
        };
        let kernel = self
            .m
            .functions
            .get(self.root)
            .map_or(String::new(), |f| f.name.clone());
        InterpError::Trap(Box::new(Trap {
            kind,
            kernel,
            function,
            inst,
            thread: self.tids.get(tid as usize).copied().unwrap_or([tid, 0, 0]),
            block: self.bid,
            message,
        }))
    }

    pub(crate) fn fault(&self, f: Fault, pc: u32, tid: u32, what: &str) -> InterpError {
        let (kind, msg) = match f {
            Fault::Null => (TrapKind::NullPointer, format!("{what} through a null pointer")),
            Fault::BadPointer(p) => (
                TrapKind::InvalidPointer,
                format!("{what} through an invalid pointer 0x{p:016x}"),
            ),
            Fault::OutOfBounds {
                name,
                size,
                offset,
                len,
            } => (
                TrapKind::OutOfBounds,
                format!(
                    "{what} of {size} bytes at byte offset {offset} (element index {}) is outside {name} of {len} bytes",
                    if size > 0 { offset.div_euclid(size as i64) } else { offset }
                ),
            ),
            Fault::Misaligned {
                name,
                offset,
                align,
            } => (
                TrapKind::Misaligned,
                format!("{what} at byte offset {offset} of {name} is not {align}-byte aligned"),
            ),
            Fault::WrongSpace { name, have, want } => (
                TrapKind::AddressSpace,
                format!("{what}: pointer into {name} ({have}) used as a {want} pointer"),
            ),
            Fault::ReadOnly { name } => (TrapKind::ReadOnly, format!("{what} writes to {name}, which is read-only")),
            Fault::Race {
                name,
                offset,
                what: kind,
                other_tid,
            } => {
                let o = self.tids.get(other_tid as usize).copied().unwrap_or([other_tid, 0, 0]);
                (
                    TrapKind::DataRace,
                    format!(
                        "data race ({kind}) on byte offset {offset} of {name}: thread ({}, {}, {}) accessed it in the same barrier interval",
                        o[0], o[1], o[2]
                    ),
                )
            }
            Fault::Uninit { name, offset } => (
                TrapKind::UninitializedRead,
                format!("{what} reads uninitialized byte offset {offset} of {name}"),
            ),
        };
        self.trap(kind, pc, tid, msg)
    }
}

#[inline]
pub(crate) fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

#[inline]
pub(crate) fn r(regs: &[u64], slot: u32, l: usize) -> u64 {
    regs[slot as usize * 32 + l]
}

#[inline]
pub(crate) fn w(regs: &mut [u64], slot: u32, l: usize, v: u64) {
    regs[slot as usize * 32 + l] = v;
}

/// Element `i` of a packed vector starting at `slot`.
#[inline]
pub(crate) fn vget(regs: &[u64], slot: u32, l: usize, mt: MemTy, i: u32) -> u64 {
    let es = mt.elem.size_bytes() as u32;
    let bit = i * es * 8;
    let v = r(regs, slot + bit / 64, l);
    (v >> (bit % 64)) & scalar::mask(es * 8)
}

#[inline]
pub(crate) fn vset(regs: &mut [u64], slot: u32, l: usize, mt: MemTy, i: u32, x: u64) {
    let es = mt.elem.size_bytes() as u32;
    let bit = i * es * 8;
    let m = scalar::mask(es * 8) << (bit % 64);
    let s = slot + bit / 64;
    let old = r(regs, s, l);
    w(regs, s, l, (old & !m) | ((x << (bit % 64)) & m));
}

impl<'a> Exec<'a> {
    /// Set up memory for a launch: `buffers` are the global/constant buffers (ids 1..).
    pub fn new(
        m: &'a Module,
        p: &'a Program,
        buffers: Vec<Alloc>,
        launch: &Launch,
        checks: bool,
        fuel: u64,
    ) -> Exec<'a> {
        let mut mem = Memory::new(checks);
        for b in buffers {
            mem.add(b);
        }
        let [bx, by, bz] = launch.block;
        let nthreads = bx * by * bz;
        let (shared_ids, dyn_id, local_base) =
            block_memory(&mut mem, p, launch.shared_bytes, nthreads);
        let window = shared_window(&mem, &shared_ids, dyn_id);
        let tids = (0..nthreads)
            .map(|t| [t % bx, (t / bx) % by, t / (bx * by)])
            .collect();
        let warps = new_warps(p, nthreads);
        let co = p.insts.iter().any(|i| match i.op {
            DOp::ClusterArrive | DOp::ClusterWait | DOp::GridSync | DOp::Mapa { .. } => true,
            DOp::Tma(t) => matches!(
                p.tma[t as usize].op,
                zyntax_hir::Op::TmaLoad { multicast: true }
            ),
            _ => false,
        });
        Exec {
            m,
            p,
            mem,
            fuel,
            fuel_total: fuel,
            grid: launch.grid,
            bdim: launch.block,
            bid: [0; 3],
            tids,
            shared_ids,
            global_base: launch.global_base,
            dyn_id,
            window,
            local_base,
            nthreads,
            warps,
            cp: (0..nthreads).map(|_| CpThread::default()).collect(),
            scratch: Vec::new(),
            fscratch: Vec::new(),
            returned: None,
            steps: 0,
            depth: 0,
            lane_base: 0,
            progs: Rc::default(),
            root: p.entry,
            uses_cp: p.insts.iter().any(|i| matches!(i.op, DOp::CpAsync { .. })),
            tensor_maps: launch.tensor_maps.clone(),
            nbar: [(0, 0); 16],
            nbar_released: false,
            cluster: launch.cluster,
            explicit_cluster: launch.explicit_cluster,
            co,
            c_arrived: vec![0; nthreads as usize],
            c_waited: vec![0; nthreads as usize],
            group: Vec::new(),
            parked: vec![None],
            cur: 0,
        }
    }

    /// Run every block of the grid with `args` (slot bits per parameter).
    pub fn run(&mut self, args: &[Vec<u64>]) -> Result<()> {
        if self.co {
            return self.run_co(args);
        }
        let [gx, gy, gz] = self.grid;
        for z in 0..gz {
            for y in 0..gy {
                for x in 0..gx {
                    self.bid = [x, y, z];
                    self.run_block(args)?;
                }
            }
        }
        Ok(())
    }

    fn reset_block(&mut self) {
        if self.depth > 0 {
            // A nested activation shares the block's memory; its locals are fresh.
            return;
        }
        let first_shared = self.shared_ids.first().copied().unwrap_or(self.dyn_id) as usize;
        let local_base = self.local_base as usize;
        let end = local_base + self.p.locals.len() * self.nthreads as usize;
        for a in &mut self.mem.allocs[first_shared..local_base] {
            a.data.fill(0);
            for s in &mut a.shadow {
                s.init = false;
            }
        }
        // Locals come back (zeroed) when their `alloca` runs in the new block.
        for a in &mut self.mem.allocs[local_base..end] {
            a.data.clear();
        }
        self.mem.epoch = self.mem.epoch.wrapping_add(1);
        self.nbar = [(0, 0); 16];
        if self.uses_cp {
            for c in &mut self.cp {
                c.open.clear();
                c.groups.clear();
            }
        }
    }

    pub(crate) fn run_block(&mut self, args: &[Vec<u64>]) -> Result<()> {
        self.start_block(args);
        loop {
            if let Round::Stopped = self.block_round()? {
                return Ok(());
            }
        }
    }

    /// Reset the running block's memory and start its threads at the entry.
    pub(crate) fn start_block(&mut self, args: &[Vec<u64>]) {
        self.reset_block();
        self.c_arrived.fill(0);
        self.c_waited.fill(0);
        let p = self.p;
        for warp in &mut self.warps {
            for l in 0..32 {
                let live = warp.exist & (1 << l) != 0;
                warp.st[l] = if live { St::Run } else { St::Done };
                warp.pc[l] = 0;
            }
            for ((loc, _), bits) in p.params.iter().zip(args) {
                if let VLoc::Slots(s, n) = loc {
                    for k in 0..*n {
                        let v = bits.get(k as usize).copied().unwrap_or(0);
                        let base = (s + k) as usize * 32;
                        warp.regs[base..base + 32].fill(v);
                    }
                }
            }
        }
    }

    /// Run the running block's warps once each; when all are blocked or
    /// done, release a block barrier or report why not.
    pub(crate) fn block_round(&mut self) -> Result<Round> {
        {
            // Warps run in turn until every one is blocked or done; a warp
            // that used up its time slice is resumed in the next round.
            let mut yielded = false;
            for wi in 0..self.warps.len() {
                yielded |= self.run_warp(wi)?;
            }
            if yielded || std::mem::take(&mut self.nbar_released) {
                return Ok(Round::Yielded);
            }
            // Every warp is blocked or done: release a barrier or report why not.
            let mut bar: Option<(u32, u32)> = None;
            // Threads waiting for other blocks (cluster barrier, grid sync).
            let mut elsewhere = false;
            // A thread at a named barrier nothing in the block can complete.
            let mut nbar_wait: Option<(&Warp, usize)> = None;
            for warp in &self.warps {
                for l in lanes(warp.exist) {
                    match warp.st[l] {
                        St::Done => {}
                        St::ClusterWait | St::GridWait => elsewhere = true,
                        St::Bar => {
                            let tid = warp.base_tid + l as u32;
                            match bar {
                                None => bar = Some((warp.pc[l], tid)),
                                Some((pc, first)) if pc != warp.pc[l] => {
                                    let cx = self.ctx_full();
                                    let o =
                                        cx.tids.get(first as usize).copied().unwrap_or_default();
                                    let there = cx.trap(
                                        TrapKind::DivergentBarrier,
                                        pc,
                                        first,
                                        String::new(),
                                    );
                                    let there = match there {
                                        InterpError::Trap(t) => {
                                            format!("`{}` in @{}", t.inst, t.function)
                                        }
                                        _ => String::new(),
                                    };
                                    return Err(cx.trap(
                                        TrapKind::DivergentBarrier,
                                        warp.pc[l],
                                        tid,
                                        format!(
                                            "divergent barrier: this thread waits here while thread ({}, {}, {}) waits at {there}",
                                            o[0], o[1], o[2]
                                        ),
                                    ));
                                }
                                Some(_) => {}
                            }
                        }
                        St::NBar => {
                            nbar_wait.get_or_insert((warp, l));
                        }
                        St::Run | St::Coll => {
                            return Err(InterpError::Internal(
                                "a warp stopped with runnable lanes".into(),
                            ))
                        }
                    }
                }
            }
            if elsewhere {
                return Ok(Round::Stopped);
            }
            if let Some((warp, l)) = nbar_wait {
                return Err(self.named_barrier_deadlock(warp, l));
            }
            if bar.is_none() {
                return Ok(Round::Stopped);
            }
            for warp in &mut self.warps {
                for l in 0..32 {
                    if warp.st[l] == St::Bar {
                        warp.st[l] = St::Run;
                        warp.pc[l] += 1;
                    }
                }
            }
            self.mem.epoch = self.mem.epoch.wrapping_add(1);
            Ok(Round::Released)
        }
    }

    pub fn fuel_left(&self) -> u64 {
        self.fuel
    }

    /// Run warp `wi` until all its lanes are blocked or done (false), or its
    /// time slice ends while other warps could run (true).
    fn run_warp(&mut self, wi: usize) -> Result<bool> {
        let mut slice_used = 0u32;
        // After a group yields, the next pick starts above its pc (round robin).
        let mut after: Option<u32> = None;
        loop {
            let warp = &self.warps[wi];
            let mut pc = u32::MAX;
            let mut mask = 0u32;
            let (mut pc2, mut mask2) = (u32::MAX, 0u32);
            for l in lanes(warp.exist) {
                if warp.st[l] == St::Run {
                    let lp = warp.pc[l];
                    if lp < pc {
                        pc = lp;
                        mask = 1 << l;
                    } else if lp == pc {
                        mask |= 1 << l;
                    }
                    if after.is_some_and(|a| lp > a) {
                        if lp < pc2 {
                            pc2 = lp;
                            mask2 = 1 << l;
                        } else if lp == pc2 {
                            mask2 |= 1 << l;
                        }
                    }
                }
            }
            if mask2 != 0 {
                (pc, mask) = (pc2, mask2);
            }
            after = None;
            if mask != 0 {
                if self.run_group(wi, pc, mask)? {
                    slice_used += 1;
                    if slice_used >= WARP_SLICES && (self.warps.len() > 1 || self.co) {
                        return Ok(true);
                    }
                    after = Some(pc_of_group(&self.warps[wi], mask));
                }
                continue;
            }
            // No runnable lane: run a collective whose lanes have all arrived, or stop.
            let mut waiting = 0u32;
            for l in lanes(warp.exist) {
                if warp.st[l] == St::Coll {
                    waiting |= 1 << l;
                }
            }
            if waiting == 0 {
                return Ok(false);
            }
            let mut progressed = false;
            let mut rest = waiting;
            while rest != 0 {
                let l0 = rest.trailing_zeros() as usize;
                let cpc = self.warps[wi].pc[l0];
                let mut group = 0u32;
                for l in lanes(rest) {
                    if self.warps[wi].pc[l] == cpc {
                        group |= 1 << l;
                    }
                }
                rest &= !group;
                if self.collective_ready(wi, cpc, group)? == 0 {
                    for l in lanes(group) {
                        self.warps[wi].st[l] = St::Run;
                    }
                    let _ = self.run_group(wi, cpc, group)?;
                    progressed = true;
                    break;
                }
            }
            if !progressed {
                let warp = &self.warps[wi];
                let l0 = waiting.trailing_zeros() as usize;
                let cpc = warp.pc[l0];
                let missing = self.collective_ready(wi, cpc, waiting & self.same_pc(wi, cpc))?;
                let ml = missing.trailing_zeros() as usize;
                let why = match warp.st.get(ml) {
                    Some(St::Done) => "has exited",
                    Some(St::Bar | St::NBar) => "waits at a barrier",
                    Some(St::Coll) => "waits at a different warp collective",
                    _ => "cannot reach it",
                };
                let tid = warp.base_tid + l0 as u32;
                let other = self.tids[(warp.base_tid as usize + ml).min(self.tids.len() - 1)];
                return Err(self.ctx_full().trap(
                    TrapKind::DivergentWarp,
                    cpc,
                    tid,
                    format!(
                        "warp collective deadlock: lane {ml} (thread ({}, {}, {})) is named in the mask but {why}",
                        other[0], other[1], other[2]
                    ),
                ));
            }
        }
    }

    /// Lanes `mask` of warp `wi` arrive at the collective at `pc`, joining
    /// the lanes already waiting there: Some(the whole group), set running,
    /// once every lane it names has arrived; else None, `mask` parked.
    pub(crate) fn gather_collective(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
    ) -> Result<Option<u32>> {
        let warp = &self.warps[wi];
        let mut group = mask;
        for l in lanes(warp.exist) {
            if warp.st[l] == St::Coll && warp.pc[l] == pc {
                group |= 1 << l;
            }
        }
        let missing = self.collective_ready(wi, pc, group)?;
        let warp = &mut self.warps[wi];
        if missing != 0 {
            for l in lanes(mask) {
                warp.st[l] = St::Coll;
                warp.pc[l] = pc;
            }
            return Ok(None);
        }
        for l in lanes(group) {
            warp.st[l] = St::Run;
        }
        Ok(Some(group))
    }

    fn same_pc(&self, wi: usize, pc: u32) -> u32 {
        let warp = &self.warps[wi];
        let mut m = 0;
        for l in lanes(warp.exist) {
            if warp.pc[l] == pc && matches!(warp.st[l], St::Coll | St::Run) {
                m |= 1 << l;
            }
        }
        m
    }

    pub(crate) fn ctx_full(&self) -> Ctx<'_> {
        Ctx {
            m: self.m,
            p: self.p,
            tids: &self.tids,
            bid: self.bid,
            root: self.root,
        }
    }

    /// Lanes a collective at `pc` reached by `group` still waits for (0: ready).
    fn collective_ready(&self, wi: usize, pc: u32, group: u32) -> Result<u32> {
        let warp = &self.warps[wi];
        // Exited lanes stay required: a collective naming a lane that has exited
        // never completes (PTX leaves it undefined; we report it).
        let Some(di) = self.p.insts.get(pc as usize) else {
            return Err(InterpError::Internal("pc out of range".into()));
        };
        // A named barrier waits for the lanes that have not exited (like `barrier`).
        let live = if matches!(di.op, DOp::NamedBarrier { .. }) {
            let mut m = 0u32;
            for l in lanes(warp.exist) {
                if warp.st[l] != St::Done {
                    m |= 1 << l;
                }
            }
            m
        } else {
            warp.exist
        };
        let mask_slot = match &di.op {
            DOp::WarpSync { mask }
            | DOp::Shfl { mask, .. }
            | DOp::Vote { mask, .. }
            | DOp::Match { mask, .. }
            | DOp::Redux { mask, .. } => Some(*mask),
            _ => None,
        };
        let required = match mask_slot {
            Some(s) => {
                let mut req = 0u32;
                for l in lanes(group) {
                    let m = r(&warp.regs, s, l) as u32;
                    if m & (1 << l) == 0 {
                        return Err(self.ctx_full().trap(
                            TrapKind::InvalidCollective,
                            pc,
                            warp.base_tid + l as u32,
                            format!(
                                "member mask 0x{m:08x} does not include the executing lane {l}"
                            ),
                        ));
                    }
                    req |= m;
                }
                req & live
            }
            // MMA: the whole warp.
            None => live,
        };
        Ok(required & !group)
    }

    /// Run the lanes `mask`, all at `pc`, until they diverge, block or exit.
    /// Returns true when the group stopped only because its time slice ended
    /// (`GROUP_SLICE` backward branches); its lanes stay runnable at their pc.
    fn run_group(&mut self, wi: usize, mut pc: u32, mut mask: u32) -> Result<bool> {
        let p = self.p;
        let mut back = 0u32;
        loop {
            let cnt = u64::from(mask.count_ones());
            if self.fuel < cnt {
                return Err(InterpError::FuelExhausted {
                    fuel: self.fuel_total,
                });
            }
            self.fuel -= cnt;
            self.steps += 1;
            let Some(di) = p.insts.get(pc as usize) else {
                return Err(InterpError::Internal(format!("pc {pc} out of range")));
            };
            let op = &di.op;
            let flow = match op {
                DOp::Const { .. }
                | DOp::Bin { .. }
                | DOp::BinV { .. }
                | DOp::Un { .. }
                | DOp::UnV { .. }
                | DOp::Approx { .. }
                | DOp::Fma { .. }
                | DOp::FmaV { .. }
                | DOp::Cmp { .. }
                | DOp::Select { .. }
                | DOp::Cast { .. }
                | DOp::Copy { .. }
                | DOp::Extract { .. }
                | DOp::Insert { .. }
                | DOp::Bits { .. } => self.exec_scalar(wi, pc, mask, op)?,
                DOp::Load { .. }
                | DOp::Store { .. }
                | DOp::PtrAdd { .. }
                | DOp::PtrToSpace { .. }
                | DOp::Alloca { .. }
                | DOp::GlobalAddr { .. }
                | DOp::SharedAlloc { .. }
                | DOp::DynShared { .. } => self.exec_memory(wi, pc, mask, op)?,
                DOp::Special { .. } => self.exec_special(wi, mask, op)?,
                DOp::Atomic { .. } | DOp::Cas { .. } | DOp::AtomicV { .. } => {
                    self.exec_atomic(wi, pc, mask, op)?
                }
                DOp::CpAsync { .. } | DOp::CpCommit | DOp::CpWait(_) => {
                    self.exec_cp_async(wi, pc, mask, op)?
                }
                DOp::Tma(_) => self.exec_tma(wi, pc, mask, op)?,
                DOp::Mbarrier { .. } => self.exec_mbarrier(wi, pc, mask, op)?,
                DOp::CvtPack { .. } | DOp::CvtUnpack { .. } => self.exec_pack(wi, mask, op)?,
                DOp::MmaFill { .. } => self.exec_frag_fill(wi, mask, op)?,
                DOp::WgmmaDesc { .. } | DOp::Zero { .. } => self.exec_wgmma(wi, pc, mask, op)?,
                DOp::ClusterArrive | DOp::ClusterWait | DOp::GridSync | DOp::Mapa { .. } => {
                    self.exec_cluster(wi, pc, mask, op)?
                }
                DOp::Nop
                | DOp::Barrier
                | DOp::NamedBarrier { .. }
                | DOp::Jump(_)
                | DOp::Br { .. }
                | DOp::Exit { .. }
                | DOp::CallRec { .. }
                | DOp::Unreachable => self.exec_control(wi, pc, mask, op)?,
                DOp::WarpSync { .. }
                | DOp::Shfl { .. }
                | DOp::Vote { .. }
                | DOp::Match { .. }
                | DOp::Redux { .. }
                | DOp::Elect { .. }
                | DOp::MmaLoad { .. }
                | DOp::Mma { .. }
                | DOp::MmaStore { .. }
                | DOp::MmaSync { .. }
                | DOp::Ldmatrix { .. }
                | DOp::Stmatrix { .. }
                | DOp::Wgmma { .. } => {
                    // Gather lanes already waiting here; run only when everyone named has arrived.
                    let Some(group) = self.gather_collective(wi, pc, mask)? else {
                        return Ok(false);
                    };
                    self.collective(wi, pc, group, op)?;
                    Flow::NextWith(group)
                }
            };
            // Per-lane pcs are written only when the group stops (barrier,
            // divergence, collective wait, exit); until then `pc` is the truth.
            match flow {
                Flow::Next => pc += 1,
                Flow::NextWith(group) => {
                    mask = group;
                    pc += 1;
                }
                Flow::Goto(to) => {
                    if to <= pc {
                        back += 1;
                        if back >= GROUP_SLICE {
                            return Ok(yield_group(&mut self.warps[wi], mask, to));
                        }
                    }
                    pc = to;
                }
                Flow::Stop => return Ok(false),
            }
        }
    }

    /// Execute the warp collective `op` (at `pc`) for the lanes `group`.
    fn collective(&mut self, wi: usize, pc: u32, group: u32, op: &DOp) -> Result<()> {
        match op {
            DOp::WarpSync { .. }
            | DOp::Shfl { .. }
            | DOp::Vote { .. }
            | DOp::Match { .. }
            | DOp::Redux { .. }
            | DOp::Elect { .. } => self.exec_warp(wi, group, op),
            DOp::MmaLoad { .. } | DOp::Mma { .. } | DOp::MmaStore { .. } => {
                self.exec_frag_mma(wi, pc, group, op)
            }
            DOp::MmaSync { .. } | DOp::Ldmatrix { .. } | DOp::Stmatrix { .. } => {
                self.exec_warp_mma(wi, pc, group, op)
            }
            DOp::Wgmma { .. } => self.exec_wgmma_mma(wi, pc, group, op),
            _ => Err(InterpError::Internal("not a collective".into())),
        }
    }
}

/// Backward branches a lockstep group takes before it lets the warp's other
/// groups run (forward progress for spin loops, as on sm_70+).
const GROUP_SLICE: u32 = 256;
/// Group time slices a warp uses before the block's other warps get a turn.
const WARP_SLICES: u32 = 16;

/// Park a group that used its time slice at `pc`, still runnable.
fn yield_group(warp: &mut Warp, mask: u32, pc: u32) -> bool {
    for l in lanes(mask) {
        warp.pc[l] = pc;
    }
    true
}

fn pc_of_group(warp: &Warp, mask: u32) -> u32 {
    warp.pc[mask.trailing_zeros() as usize & 31]
}

/// Checks that an MMA runs on the whole warp.
pub(crate) fn mma_lanes(ctx: &Ctx, warp: &Warp, group: u32, pc: u32) -> Result<usize> {
    if group != u32::MAX {
        let missing = (!group).trailing_zeros();
        return Err(ctx.trap(
            TrapKind::InvalidCollective,
            pc,
            warp.base_tid + group.trailing_zeros(),
            format!(
                "MMA needs all 32 lanes of the warp; lane {missing} has exited or does not exist"
            ),
        ));
    }
    Ok(0)
}

/// Bind a branch's arguments to its target's parameters for the lanes `mask`.
pub(crate) fn edge_copies(
    warp: &mut Warp,
    e: &Edge,
    mask: u32,
    scratch: &mut Vec<u64>,
    fscratch: &mut Vec<f64>,
) {
    if !e.copies.is_empty() {
        if e.copies.len() == 1 {
            let (s, d) = e.copies[0];
            for l in lanes(mask) {
                let v = r(&warp.regs, s, l);
                w(&mut warp.regs, d, l, v);
            }
        } else {
            for l in lanes(mask) {
                scratch.clear();
                for (s, _) in &e.copies {
                    scratch.push(r(&warp.regs, *s, l));
                }
                for ((_, d), v) in e.copies.iter().zip(scratch.iter()) {
                    w(&mut warp.regs, *d, l, *v);
                }
            }
        }
    }
    if !e.frag_copies.is_empty() {
        // Each lane owns fragment elements e with e % 32 == lane.
        for l in lanes(mask) {
            fscratch.clear();
            for (s, _) in &e.frag_copies {
                let mut k = l;
                while k < FRAG_ELEMS {
                    fscratch.push(warp.frags[*s as usize * FRAG_ELEMS + k]);
                    k += 32;
                }
            }
            let mut it = fscratch.iter();
            for (_, d) in &e.frag_copies {
                let mut k = l;
                while k < FRAG_ELEMS {
                    if let Some(v) = it.next() {
                        warp.frags[*d as usize * FRAG_ELEMS + k] = *v;
                    }
                    k += 32;
                }
            }
        }
    }
}

/// Allocate one block's shared memory (static allocations, then dynamic) and
/// its threads' local-memory slots, in that order (`reset_block` relies on
/// it); returns (static ids, dynamic id, first local id).
pub(crate) fn block_memory(
    mem: &mut Memory,
    p: &Program,
    dyn_bytes: u64,
    nthreads: u32,
) -> (Vec<u32>, u32, u32) {
    let checks = mem.checks;
    let mut shared_ids = Vec::new();
    for (bytes, name) in &p.shared {
        let mut a = Alloc::new(vec![0; *bytes as usize], AddrSpace::Shared, name.clone());
        if checks {
            a.shadow = vec![memory::Shadow::default(); *bytes as usize];
        }
        shared_ids.push(mem.add(a));
    }
    let mut dyn_alloc = Alloc::new(
        vec![0; dyn_bytes as usize],
        AddrSpace::Shared,
        "dynamic shared memory".into(),
    );
    if checks {
        dyn_alloc.shadow = vec![memory::Shadow::default(); dyn_bytes as usize];
    }
    let dyn_id = mem.add(dyn_alloc);
    let local_base = mem.allocs.len() as u32;
    // Local memory is materialized when the `alloca` runs (see `DOp::Alloca`).
    for (_, name) in &p.locals {
        for t in 0..nthreads {
            mem.add(Alloc::new(
                Vec::new(),
                AddrSpace::Local,
                format!("{name} of thread #{t}"),
            ));
        }
    }
    (shared_ids, dyn_id, local_base)
}

/// A block's shared window for `wgmma` descriptors: (address, allocation id,
/// bytes) per shared allocation, the dynamic one last. Every block of a
/// launch has the same layout; only the allocation ids differ.
pub(crate) fn shared_window(mem: &Memory, shared_ids: &[u32], dyn_id: u32) -> Vec<(u64, u32, u64)> {
    let mut window = Vec::new();
    let mut next = 0u64;
    for &id in shared_ids.iter().chain([&dyn_id]) {
        let bytes = mem.allocs[id as usize].data.len() as u64;
        window.push((next, id, bytes));
        next = (next + bytes).next_multiple_of(wgmma::WINDOW_ALIGN);
    }
    window
}

pub(crate) fn new_warps(p: &Program, nthreads: u32) -> Vec<Warp> {
    (0..nthreads.div_ceil(32))
        .map(|wi| {
            let n = (nthreads - wi * 32).min(32);
            Warp {
                regs: vec![0; p.nslots.max(1) * 32],
                frags: vec![0.0; p.nfrags * FRAG_ELEMS],
                pc: [0; 32],
                st: [St::Done; 32],
                exist: if n == 32 { u32::MAX } else { (1u32 << n) - 1 },
                base_tid: wi * 32,
            }
        })
        .collect()
}
