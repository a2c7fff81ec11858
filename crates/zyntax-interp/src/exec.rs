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

use crate::decode::{DOp, Edge, MemTy, Program, Special, VLoc, FRAG_ELEMS, NO_SLOT};
use crate::mbarrier;
use crate::memory::{self, Access, Alloc, Fault, Memory};
use crate::scalar;
use crate::warp_mma;
use crate::wgmma;
use crate::{InterpError, Result, Trap, TrapKind};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use zyntax_hir::{
    AddrSpace, AtomicOp, BinOp, FragKind, FragType, Layout, MatchMode, Module, ReduxOp, ScalarType,
    ShflMode, VoteMode,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
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

struct Warp {
    regs: Vec<u64>,
    frags: Vec<f64>,
    pc: [u32; 32],
    st: [St; 32],
    /// Lanes that exist (the last warp of a block may be partial).
    exist: u32,
    base_tid: u32,
}

#[derive(Clone)]
struct CpCopy {
    dst: u64,
    bytes: [u8; 16],
    len: usize,
}

#[derive(Default)]
struct CpThread {
    open: Vec<CpCopy>,
    groups: std::collections::VecDeque<Vec<CpCopy>>,
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

/// The per-block state of a parked block of a co-scheduled group (the
/// running block's lives in [`Exec`]'s fields of the same names).
struct Cta {
    bid: [u32; 3],
    warps: Vec<Warp>,
    cp: Vec<CpThread>,
    shared_ids: Vec<u32>,
    dyn_id: u32,
    local_base: u32,
    c_arrived: Vec<u32>,
    c_waited: Vec<u32>,
}

/// How one scheduling round of a block ended.
enum Round {
    /// A warp's time slice ended: it can run on.
    Yielded,
    /// A block barrier released.
    Released,
    /// Every thread is done or waits for something outside the block.
    Stopped,
}

pub struct Exec<'a> {
    m: &'a Module,
    p: &'a Program,
    pub mem: Memory,
    fuel: u64,
    fuel_total: u64,
    grid: [u32; 3],
    bdim: [u32; 3],
    bid: [u32; 3],
    tids: Vec<[u32; 3]>,
    shared_ids: Vec<u32>,
    global_base: u32,
    dyn_id: u32,
    /// The block's shared window: (address, allocation id, bytes) per allocation (see `wgmma`).
    window: Vec<(u64, u32, u64)>,
    local_base: u32,
    nthreads: u32,
    warps: Vec<Warp>,
    cp: Vec<CpThread>,
    scratch: Vec<u64>,
    fscratch: Vec<f64>,
    /// Return values of the entry (host calls), as slot bits.
    pub returned: Option<Vec<Vec<u64>>>,
    /// Warp-steps and thread-instructions executed.
    pub steps: u64,
    /// Nesting depth of recursive activations (0: the launch itself).
    depth: u32,
    /// Lane id of the thread a nested activation runs for.
    lane_base: u32,
    /// Programs of recursively called functions, decoded once per launch.
    progs: Rc<RefCell<HashMap<usize, Rc<Program>>>>,
    /// The launched function.
    root: usize,
    /// Whether the program issues `cp.async` (else per-thread copy state is never touched).
    uses_cp: bool,
    /// Tensor maps of the launch, indexed by a `tensormap` register's bits - 1.
    tensor_maps: Rc<Vec<crate::tma::InterpTensorMap>>,
    /// Named barriers 1..=15 of the block: (threads arrived, expected count).
    nbar: [(u32, u32); 16],
    /// A named barrier completed in this round: its waiters can run again.
    nbar_released: bool,
    // h13-cluster: clusters and co-scheduled blocks.
    cluster: [u32; 3],
    explicit_cluster: bool,
    /// Whether blocks run co-scheduled (cluster barriers, `mapa`, `grid_sync`).
    co: bool,
    /// Cluster-barrier arrivals and completed waits of each thread of the running block.
    c_arrived: Vec<u32>,
    c_waited: Vec<u32>,
    /// The blocks of the running group; `parked[k]` holds block k's state
    /// unless it is the running one (`cur`).
    group: Vec<[u32; 3]>,
    parked: Vec<Option<Cta>>,
    cur: usize,
}

/// Deepest recursion the interpreter runs (GPU stacks are small too).
const MAX_DEPTH: u32 = 200;

/// What a trap needs to say where it happened.
struct Ctx<'a> {
    m: &'a Module,
    p: &'a Program,
    tids: &'a [[u32; 3]],
    bid: [u32; 3],
    /// The launched function (nested activations run other programs).
    root: usize,
}

impl Ctx<'_> {
    fn trap(&self, kind: TrapKind, pc: u32, tid: u32, message: String) -> InterpError {
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

    fn fault(&self, f: Fault, pc: u32, tid: u32, what: &str, tids: &[[u32; 3]]) -> InterpError {
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
                let o = tids.get(other_tid as usize).copied().unwrap_or([other_tid, 0, 0]);
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
fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
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
fn r(regs: &[u64], slot: u32, l: usize) -> u64 {
    regs[slot as usize * 32 + l]
}

#[inline]
fn w(regs: &mut [u64], slot: u32, l: usize, v: u64) {
    regs[slot as usize * 32 + l] = v;
}

/// Element `i` of a packed vector starting at `slot`.
#[inline]
fn vget(regs: &[u64], slot: u32, l: usize, mt: MemTy, i: u32) -> u64 {
    let es = mt.elem.size_bytes() as u32;
    let bit = i * es * 8;
    let v = r(regs, slot + bit / 64, l);
    (v >> (bit % 64)) & scalar::mask(es * 8)
}

#[inline]
fn vset(regs: &mut [u64], slot: u32, l: usize, mt: MemTy, i: u32, x: u64) {
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

    fn run_block(&mut self, args: &[Vec<u64>]) -> Result<()> {
        self.start_block(args);
        loop {
            if let Round::Stopped = self.block_round()? {
                return Ok(());
            }
        }
    }

    /// Reset the running block's memory and start its threads at the entry.
    fn start_block(&mut self, args: &[Vec<u64>]) {
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
    fn block_round(&mut self) -> Result<Round> {
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
    fn named_barrier_deadlock(&self, warp: &Warp, l: usize) -> InterpError {
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

    /// Lanes `mask` of warp `wi` arrive at the collective at `pc`, joining
    /// the lanes already waiting there: Some(the whole group), set running,
    /// once every lane it names has arrived; else None, `mask` parked.
    fn gather_collective(&mut self, wi: usize, pc: u32, mask: u32) -> Result<Option<u32>> {
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

    fn ctx_full(&self) -> Ctx<'_> {
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
    #[allow(clippy::too_many_lines)]
    /// Returns true when the group stopped only because its time slice ended
    /// (`GROUP_SLICE` backward branches); its lanes stay runnable at their pc.
    fn run_group(&mut self, wi: usize, mut pc: u32, mut mask: u32) -> Result<bool> {
        let p = self.p;
        let m = self.m;
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
            let ctx = Ctx {
                m,
                p,
                tids: &self.tids,
                bid: self.bid,
                root: self.root,
            };
            let warp = &mut self.warps[wi];
            let base = warp.base_tid;
            let regs = &mut warp.regs;
            let mem = &mut self.mem;
            match &di.op {
                DOp::Const { dst, bits } => {
                    for l in lanes(mask) {
                        w(regs, *dst, l, *bits);
                    }
                }
                DOp::Bin { op, ty, dst, a, b } => {
                    let (op, ty) = (*op, *ty);
                    // Integer division by zero traps, as the lowering does (`trap;`).
                    if matches!(op, BinOp::Div | BinOp::Rem) && !ty.is_float() {
                        for l in lanes(mask) {
                            if r(regs, *b, l) == 0 {
                                return Err(ctx.trap(
                                    TrapKind::DivisionByZero,
                                    pc,
                                    base + l as u32,
                                    format!("integer {op} by zero"),
                                ));
                            }
                        }
                    }
                    if mask == u32::MAX {
                        let (d0, a0, b0) = (*dst as usize * 32, *a as usize * 32, *b as usize * 32);
                        for l in 0..32 {
                            regs[d0 + l] = scalar::binary(op, ty, regs[a0 + l], regs[b0 + l]);
                        }
                    } else {
                        for l in lanes(mask) {
                            let v = scalar::binary(op, ty, r(regs, *a, l), r(regs, *b, l));
                            w(regs, *dst, l, v);
                        }
                    }
                }
                DOp::BinV { op, mt, dst, a, b } => {
                    if matches!(op, BinOp::Div | BinOp::Rem) && !mt.elem.is_float() {
                        for l in lanes(mask) {
                            if (0..mt.n).any(|i| vget(regs, *b, l, *mt, i) == 0) {
                                return Err(ctx.trap(
                                    TrapKind::DivisionByZero,
                                    pc,
                                    base + l as u32,
                                    format!("integer {op} by zero"),
                                ));
                            }
                        }
                    }
                    for l in lanes(mask) {
                        for i in 0..mt.n {
                            let v = scalar::binary(
                                *op,
                                mt.elem,
                                vget(regs, *a, l, *mt, i),
                                vget(regs, *b, l, *mt, i),
                            );
                            vset(regs, *dst, l, *mt, i, v);
                        }
                    }
                }
                DOp::Un { op, ty, dst, a } => {
                    for l in lanes(mask) {
                        let v = scalar::unary(*op, *ty, r(regs, *a, l));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::Approx { op, dst, a } => {
                    for l in lanes(mask) {
                        let v = warp_mma::approx(*op, r(regs, *a, l));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::UnV { op, mt, dst, a } => {
                    for l in lanes(mask) {
                        for i in 0..mt.n {
                            let v = scalar::unary(*op, mt.elem, vget(regs, *a, l, *mt, i));
                            vset(regs, *dst, l, *mt, i, v);
                        }
                    }
                }
                DOp::Fma { ty, dst, a, b, c } => {
                    for l in lanes(mask) {
                        let v = scalar::fma(*ty, r(regs, *a, l), r(regs, *b, l), r(regs, *c, l));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::Cmp { op, ty, dst, a, b } => {
                    for l in lanes(mask) {
                        let v = scalar::compare(*op, *ty, r(regs, *a, l), r(regs, *b, l));
                        w(regs, *dst, l, u64::from(v));
                    }
                }
                DOp::Select { dst, cond, a, b, n } => {
                    for l in lanes(mask) {
                        let src = if r(regs, *cond, l) & 1 != 0 { *a } else { *b };
                        for k in 0..*n {
                            let v = r(regs, src + k, l);
                            w(regs, dst + k, l, v);
                        }
                    }
                }
                DOp::Cast { from, to, dst, a } => {
                    for l in lanes(mask) {
                        let v = scalar::cast(*from, *to, r(regs, *a, l));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::Copy { dst, a, n } => {
                    for l in lanes(mask) {
                        for k in 0..*n {
                            let v = r(regs, a + k, l);
                            w(regs, dst + k, l, v);
                        }
                    }
                }
                DOp::Extract { mt, lane, dst, v } => {
                    for l in lanes(mask) {
                        let x = vget(regs, *v, l, *mt, *lane);
                        w(regs, *dst, l, x);
                    }
                }
                DOp::Insert {
                    mt,
                    lane,
                    dst,
                    v,
                    s,
                } => {
                    for l in lanes(mask) {
                        for k in 0..mt.slots() {
                            let x = r(regs, v + k, l);
                            w(regs, dst + k, l, x);
                        }
                        let x = r(regs, *s, l);
                        vset(regs, *dst, l, *mt, *lane, x);
                    }
                }
                DOp::Load { mt, dst, ptr } => {
                    let size = mt.size as usize;
                    for l in lanes(mask) {
                        let tid = base + l as u32;
                        let pv = r(regs, *ptr, l);
                        if size <= 8 {
                            let v = mem
                                .load(pv, size, u64::from(mt.align), tid)
                                .map_err(|f| ctx.fault(f, pc, tid, "load", &self.tids))?;
                            let v = if mt.elem == ScalarType::Bool {
                                u64::from(v != 0)
                            } else {
                                v
                            };
                            w(regs, *dst, l, v);
                        } else {
                            let (id, off) = mem
                                .check(pv, size, u64::from(mt.align), Access::Read, tid)
                                .map_err(|f| ctx.fault(f, pc, tid, "load", &self.tids))?;
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
                            .map_err(|f| ctx.fault(f, pc, tid, "store", &self.tids))?;
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
                        let v = memory::ptr_add(r(regs, *ptr, l), i.wrapping_mul(es));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::PtrToSpace { dst, a, space } => {
                    for l in lanes(mask) {
                        let pv = r(regs, *a, l);
                        if let Some(have) = mem.space_of(pv) {
                            if have != *space {
                                let tid = base + l as u32;
                                let name = mem.allocs[memory::ptr_id(pv) as usize].name.clone();
                                return Err(ctx.fault(
                                    Fault::WrongSpace {
                                        name,
                                        have,
                                        want: *space,
                                    },
                                    pc,
                                    tid,
                                    "ptr_cast",
                                    &self.tids,
                                ));
                            }
                        }
                        w(regs, *dst, l, pv);
                    }
                }
                DOp::Alloca { dst, k } => {
                    let size = p.locals.get(*k as usize).map_or(0, |x| x.0 as usize);
                    for l in lanes(mask) {
                        let id = self.local_base + k * self.nthreads + base + l as u32;
                        // First execution in this block: zeroed memory (a re-execution keeps it).
                        let data = &mut mem.allocs[id as usize].data;
                        if data.len() != size {
                            data.clear();
                            data.resize(size, 0);
                        }
                        w(regs, *dst, l, memory::make_ptr(id, 0));
                    }
                }
                DOp::GlobalAddr { dst, k } => {
                    let v = memory::make_ptr(self.global_base + k, 0);
                    for l in lanes(mask) {
                        w(regs, *dst, l, v);
                    }
                }
                DOp::SharedAlloc { dst, k } => {
                    let v = memory::make_ptr(self.shared_ids[*k as usize], 0);
                    for l in lanes(mask) {
                        w(regs, *dst, l, v);
                    }
                }
                DOp::WgmmaDesc {
                    swizzle,
                    dst,
                    ptr,
                    lbo,
                    sbo,
                } => {
                    for l in lanes(mask) {
                        let pv = r(regs, *ptr, l);
                        let at = self.window.iter().find(|e| e.1 == memory::ptr_id(pv));
                        let Some(&(start, _, _)) = at else {
                            return Err(ctx.trap(
                                TrapKind::AddressSpace,
                                pc,
                                base + l as u32,
                                format!("wgmma.desc of 0x{pv:016x}, not a shared-memory pointer"),
                            ));
                        };
                        let addr = start.wrapping_add(memory::ptr_offset(pv) as u64);
                        let (lb, sb) = (r(regs, *lbo, l), r(regs, *sbo, l));
                        w(regs, *dst, l, wgmma::encode(addr, lb, sb, *swizzle));
                    }
                }
                DOp::Zero { dst, n } => {
                    for l in lanes(mask) {
                        for k in 0..*n {
                            w(regs, dst + k, l, 0);
                        }
                    }
                }
                DOp::DynShared { dst } => {
                    let v = memory::make_ptr(self.dyn_id, 0);
                    for l in lanes(mask) {
                        w(regs, *dst, l, v);
                    }
                }
                DOp::Special { dst, which } => {
                    for l in lanes(mask) {
                        let t = self.tids[(base + l as u32) as usize];
                        let v = match which {
                            Special::Tid(d) => t[*d],
                            Special::Bid(d) => self.bid[*d],
                            Special::BDim(d) => self.bdim[*d],
                            Special::GDim(d) => self.grid[*d],
                            Special::Lane => l as u32 + self.lane_base,
                            Special::ClusterIdx(d) => self.bid[*d] / self.cluster[*d],
                            Special::ClusterDim(d) => self.cluster[*d],
                            Special::ClusterBlockIdx(d) => self.bid[*d] % self.cluster[*d],
                            Special::ClusterGridDim(d) => self.grid[*d] / self.cluster[*d],
                            Special::ClusterRank => cluster_rank(self.bid, self.cluster),
                            Special::ClusterNRank => self.cluster.iter().product(),
                            Special::IsExplicitCluster => u32::from(self.explicit_cluster),
                        };
                        w(regs, *dst, l, u64::from(v));
                    }
                }
                DOp::Nop => {}
                DOp::Barrier => {
                    for l in lanes(mask) {
                        warp.st[l] = St::Bar;
                        warp.pc[l] = pc;
                    }
                    return Ok(false);
                }
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
                            .map_err(|f| ctx.fault(f, pc, tid, "atomic", &self.tids))?;
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
                            .map_err(|f| ctx.fault(f, pc, tid, "atomic.cas", &self.tids))?;
                        let old = mem.read(id, off, size);
                        if old == r(regs, *exp, l) {
                            mem.write(id, off, size, r(regs, *des, l));
                        }
                        w(regs, *dst, l, old);
                    }
                }
                // --- issue 12 (warp-sync)
                DOp::Bits { op, ty, dst, a } => {
                    for l in lanes(mask) {
                        let x = a.map(|s| r(regs, s, l));
                        w(regs, *dst, l, scalar::bits(*op, *ty, x));
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
                            .map_err(|f| ctx.fault(f, pc, tid, "atomic", &self.tids))?;
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
                DOp::CpAsync { bytes, dst, src } => {
                    let n = *bytes as usize;
                    for l in lanes(mask) {
                        let tid = base + l as u32;
                        let (dv, sv) = (r(regs, *dst, l), r(regs, *src, l));
                        // Both ends are checked when the copy is issued; the source is read now
                        // and the destination written at the matching wait.
                        let (sid, soff) =
                            mem.check(sv, n, n as u64, Access::Read, tid).map_err(|f| {
                                ctx.fault(f, pc, tid, "cp.async source read", &self.tids)
                            })?;
                        if mem.space_of(dv) != Some(AddrSpace::Shared) && memory::ptr_id(dv) != 0 {
                            let name = mem
                                .allocs
                                .get(memory::ptr_id(dv) as usize)
                                .map_or(String::new(), |a| a.name.clone());
                            let have = mem.space_of(dv).unwrap_or(AddrSpace::Generic);
                            return Err(ctx.fault(
                                Fault::WrongSpace {
                                    name,
                                    have,
                                    want: AddrSpace::Shared,
                                },
                                pc,
                                tid,
                                "cp.async destination",
                                &self.tids,
                            ));
                        }
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
                        chk.map_err(|f| {
                            ctx.fault(f, pc, tid, "cp.async destination write", &self.tids)
                        })?;
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
                                    .map_err(|f| {
                                        ctx.fault(f, pc, tid, "cp.async completion", &self.tids)
                                    })?;
                                mem.allocs[id].data[off..off + copy.len]
                                    .copy_from_slice(&copy.bytes[..copy.len]);
                            }
                        }
                    }
                }
                DOp::Tma(i) => {
                    let inst = &p.tma[*i as usize];
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
                            .map_err(|(k, m)| {
                                crate::tma::TmaError::Trap(k, format!("tma.load.multicast: {m}"))
                            })
                        };
                        crate::tma::exec(inst, &self.tensor_maps, mem, val, tid, peer).map_err(
                            |e| match e {
                                crate::tma::TmaError::Mem(f, what) => {
                                    ctx.fault(f, pc, tid, what, &self.tids)
                                }
                                crate::tma::TmaError::Trap(kind, msg) => {
                                    ctx.trap(kind, pc, tid, msg)
                                }
                            },
                        )?;
                    }
                }
                DOp::Mbarrier {
                    op,
                    bar,
                    a1,
                    a2,
                    dst,
                } => {
                    let opt = |regs: &[u64], s: u32, l: usize| {
                        if s == NO_SLOT {
                            0
                        } else {
                            r(regs, s, l)
                        }
                    };
                    // Lanes act one after another, each atomically on the barrier word.
                    for l in lanes(mask) {
                        let tid = base + l as u32;
                        let pv = r(regs, *bar, l);
                        let what = format!("mbarrier.{op}");
                        if mem.space_of(pv) != Some(AddrSpace::Shared) && memory::ptr_id(pv) != 0 {
                            let name = mem
                                .allocs
                                .get(memory::ptr_id(pv) as usize)
                                .map_or(String::new(), |a| a.name.clone());
                            let have = mem.space_of(pv).unwrap_or(AddrSpace::Generic);
                            return Err(ctx.fault(
                                Fault::WrongSpace {
                                    name,
                                    have,
                                    want: AddrSpace::Shared,
                                },
                                pc,
                                tid,
                                &what,
                                &self.tids,
                            ));
                        }
                        let (id, off) = mem
                            .check(pv, 8, 8, Access::Atomic, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, &what, &self.tids))?;
                        let word = mem.read(id, off, 8);
                        let st = mbarrier::step(*op, word, opt(regs, *a1, l), opt(regs, *a2, l))
                            .map_err(|m| ctx.trap(TrapKind::InvalidMbarrier, pc, tid, m))?;
                        if let Some(nw) = st.word {
                            mem.write(id, off, 8, nw);
                        }
                        if let (Some(v), true) = (st.result, *dst != NO_SLOT) {
                            w(regs, *dst, l, v);
                        }
                        if st.completed {
                            // A completed phase orders the accesses before it
                            // against those after it, as a block barrier does.
                            mem.epoch = mem.epoch.wrapping_add(1);
                        }
                    }
                }
                DOp::Jump(e) => {
                    let e = &p.edges[*e as usize];
                    edge_copies(warp, e, mask, &mut self.scratch, &mut self.fscratch);
                    if e.pc <= pc {
                        back += 1;
                        if back >= GROUP_SLICE {
                            return Ok(yield_group(warp, mask, e.pc));
                        }
                    }
                    pc = e.pc;
                    continue;
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
                        if e.pc <= pc {
                            back += 1;
                            if back >= GROUP_SLICE {
                                return Ok(yield_group(warp, mask, e.pc));
                            }
                        }
                        pc = e.pc;
                        continue;
                    }
                    edge_copies(warp, te, tmask, &mut self.scratch, &mut self.fscratch);
                    edge_copies(warp, ee, emask, &mut self.scratch, &mut self.fscratch);
                    for l in lanes(tmask) {
                        warp.pc[l] = te.pc;
                    }
                    for l in lanes(emask) {
                        warp.pc[l] = ee.pc;
                    }
                    return Ok(false);
                }
                DOp::Exit { rets } => {
                    if self.returned.is_none() && !p.returns.is_empty() {
                        let l = mask.trailing_zeros() as usize;
                        let vals = p.ret_lists[*rets as usize]
                            .iter()
                            .map(|loc| match loc {
                                VLoc::Slots(s, n) => {
                                    (0..*n).map(|k| r(&warp.regs, s + k, l)).collect()
                                }
                                VLoc::Frag(_) => Vec::new(),
                            })
                            .collect();
                        self.returned = Some(vals);
                    }
                    for l in lanes(mask) {
                        warp.st[l] = St::Done;
                    }
                    return Ok(false);
                }
                DOp::CallRec { call } => {
                    let call = *call;
                    for l in lanes(mask) {
                        self.call_rec(wi, pc, l, call)?;
                    }
                }
                DOp::ClusterArrive => {
                    for l in lanes(mask) {
                        let t = (base + l as u32) as usize;
                        if self.c_arrived[t] != self.c_waited[t] {
                            return Err(ctx.trap(
                                TrapKind::DivergentBarrier,
                                pc,
                                t as u32,
                                "cluster_barrier.arrive again before cluster_barrier.wait".into(),
                            ));
                        }
                        self.c_arrived[t] += 1;
                    }
                }
                DOp::ClusterWait => {
                    for l in lanes(mask) {
                        let t = (base + l as u32) as usize;
                        if self.c_arrived[t] == self.c_waited[t] {
                            return Err(ctx.trap(
                                TrapKind::DivergentBarrier,
                                pc,
                                t as u32,
                                "cluster_barrier.wait without a cluster_barrier.arrive before it"
                                    .into(),
                            ));
                        }
                        warp.st[l] = St::ClusterWait;
                        warp.pc[l] = pc;
                    }
                    return Ok(false);
                }
                DOp::GridSync => {
                    for l in lanes(mask) {
                        warp.st[l] = St::GridWait;
                        warp.pc[l] = pc;
                    }
                    return Ok(false);
                }
                DOp::Mapa { dst, ptr, rank } => {
                    for l in lanes(mask) {
                        let target = mapa_target(
                            (&self.shared_ids, self.dyn_id),
                            &self.parked,
                            &self.group,
                            self.cur,
                            self.cluster,
                            self.bid,
                            r(regs, *ptr, l),
                            r(regs, *rank, l) as u32,
                        )
                        .map_err(|(k, m)| ctx.trap(k, pc, base + l as u32, m))?;
                        w(regs, *dst, l, target);
                    }
                }
                DOp::Unreachable => {
                    let tid = base + mask.trailing_zeros();
                    return Err(ctx.trap(
                        TrapKind::Unreachable,
                        pc,
                        tid,
                        "reached `unreachable`".into(),
                    ));
                }
                DOp::NamedBarrier { arrive, id, count } => {
                    // The whole warp arrives together (PTX's `bar` is `.aligned`).
                    let Some(group) = self.gather_collective(wi, pc, mask)? else {
                        return Ok(false);
                    };
                    mask = group;
                    let (arrive, id, count) = (*arrive, *id, *count);
                    if self.named_barrier(wi, pc, mask, arrive, id, count)? {
                        let warp = &mut self.warps[wi];
                        for l in lanes(mask) {
                            warp.st[l] = St::NBar;
                            warp.pc[l] = pc;
                        }
                        return Ok(false);
                    }
                }
                DOp::FmaV { mt, dst, a, b, c } => {
                    for l in lanes(mask) {
                        for i in 0..mt.n {
                            let (x, y, z) = (
                                vget(regs, *a, l, *mt, i),
                                vget(regs, *b, l, *mt, i),
                                vget(regs, *c, l, *mt, i),
                            );
                            vset(regs, *dst, l, *mt, i, scalar::fma(mt.elem, x, y, z));
                        }
                    }
                }
                DOp::CvtPack { fmt, dst, lo, hi } => {
                    for l in lanes(mask) {
                        let (a, b) = (r(regs, *lo, l) as u32, r(regs, *hi, l) as u32);
                        let v = crate::pack::cvt_pack(*fmt, f32::from_bits(a), f32::from_bits(b));
                        w(regs, *dst, l, v);
                    }
                }
                DOp::CvtUnpack { fmt, dst, a } => {
                    for l in lanes(mask) {
                        let v = crate::pack::cvt_unpack(*fmt, r(regs, *a, l));
                        w(regs, *dst, l, v);
                    }
                }
                op if op.is_collective() => {
                    // Gather lanes already waiting here; run only when everyone named has arrived.
                    let Some(group) = self.gather_collective(wi, pc, mask)? else {
                        return Ok(false);
                    };
                    mask = group;
                    self.collective(wi, pc, mask)?;
                }
                _ => {
                    return Err(InterpError::Internal("unhandled op".into()));
                }
            }
            // Per-lane pcs are written only when the group stops (barrier,
            // divergence, collective wait, exit); until then `pc` is the truth.
            pc += 1;
        }
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

    /// Execute a warp collective for the lanes `group` (all at `pc`).
    #[allow(clippy::too_many_lines)]
    fn collective(&mut self, wi: usize, pc: u32, group: u32) -> Result<()> {
        let p = self.p;
        let ctx = Ctx {
            m: self.m,
            p,
            tids: &self.tids,
            bid: self.bid,
            root: self.root,
        };
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let op = &p.insts[pc as usize].op;
        match op {
            DOp::WarpSync { .. } => {}
            DOp::Shfl {
                mode,
                width,
                dst,
                mask,
                val,
                lane,
                n,
            } => {
                let segmask = (32 - width) & 31;
                let cval = if *mode == ShflMode::Up { 0 } else { 31 };
                for l in lanes(group) {
                    let li = l as i32;
                    let b = (r(&warp.regs, *lane, l) & 31) as i32;
                    let seg = segmask as i32;
                    let max_lane = (li & seg) | (cval & !seg & 31);
                    let min_lane = li & seg;
                    let (j, ok) = match mode {
                        ShflMode::Up => {
                            let j = li - b;
                            (j, j >= max_lane)
                        }
                        ShflMode::Down => {
                            let j = li + b;
                            (j, j <= max_lane)
                        }
                        ShflMode::Xor => {
                            let j = li ^ b;
                            (j, j <= max_lane)
                        }
                        ShflMode::Idx => {
                            let j = min_lane | (b & !seg & 31);
                            (j, j <= max_lane)
                        }
                    };
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    // Out of the segment: own value (PTX). A source lane that does not
                    // take part: own value too (PTX leaves it undefined).
                    let j = if ok && (0..32).contains(&j) && mm & (1 << j) != 0 {
                        j as usize
                    } else {
                        l
                    };
                    for k in 0..*n {
                        let v = r(&warp.regs, val + k, j);
                        w(&mut warp.regs, dst + k, l, v);
                    }
                }
            }
            DOp::Vote {
                mode,
                dst,
                mask,
                pred,
            } => {
                let mut ballot_all = 0u32;
                for l in lanes(group) {
                    if r(&warp.regs, *pred, l) & 1 != 0 {
                        ballot_all |= 1 << l;
                    }
                }
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let b = ballot_all & mm;
                    let v = match mode {
                        VoteMode::Ballot => u64::from(b),
                        VoteMode::Any => u64::from(b != 0),
                        VoteMode::All => u64::from(b == mm),
                    };
                    w(&mut warp.regs, *dst, l, v);
                }
            }
            // issue 12: each lane gets the reduction over the lanes of its mask.
            DOp::Redux {
                op,
                signed,
                dst,
                mask,
                val,
            } => {
                let mut out = [0u64; 32];
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let vals = lanes(mm).map(|j| r(&warp.regs, *val, j) as u32);
                    let key = |x: u32| {
                        if *signed {
                            i64::from(x as i32)
                        } else {
                            i64::from(x)
                        }
                    };
                    out[l] = u64::from(match op {
                        ReduxOp::Add => vals.fold(0u32, u32::wrapping_add),
                        ReduxOp::Min => vals.min_by_key(|x| key(*x)).unwrap_or(0),
                        ReduxOp::Max => vals.max_by_key(|x| key(*x)).unwrap_or(0),
                        ReduxOp::And => vals.fold(u32::MAX, |a, x| a & x),
                        ReduxOp::Or => vals.fold(0, |a, x| a | x),
                        ReduxOp::Xor => vals.fold(0, |a, x| a ^ x),
                    });
                }
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, out[l]);
                }
            }
            DOp::Match {
                mode,
                dst,
                dst2,
                mask,
                val,
                n,
            } => {
                let eq = |regs: &[u64], a: usize, b: usize| {
                    (0..*n).all(|k| r(regs, val + k, a) == r(regs, val + k, b))
                };
                let mut out = [(0u32, false); 32];
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let mut same = 0u32;
                    for j in lanes(mm) {
                        if eq(&warp.regs, l, j) {
                            same |= 1 << j;
                        }
                    }
                    out[l] = match mode {
                        MatchMode::Any => (same, false),
                        MatchMode::All => {
                            if same == mm {
                                (mm, true)
                            } else {
                                (0, false)
                            }
                        }
                    };
                }
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, u64::from(out[l].0));
                    if *mode == MatchMode::All {
                        w(&mut warp.regs, *dst2, l, u64::from(out[l].1));
                    }
                }
            }
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
                            .map_err(|f| ctx.fault(f, pc, tid, "mma.load", &self.tids))?;
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
                            .map_err(|f| ctx.fault(f, pc, tid, "mma.store", &self.tids))?;
                    }
                }
            }
            // Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
            DOp::MmaSync {
                elem,
                acc,
                a,
                b,
                c,
                d,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                warp_mma::mma_sync(&mut warp.regs, *elem, *acc, *a, *b, *c, *d);
            }
            // Warpgroup MMA (issue 13 item 1): each warp computes its 16-row slab.
            DOp::Wgmma {
                form,
                acc,
                c,
                a,
                a_regs,
                b,
                scale_d,
                d,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let q = (base / 32) % 4;
                let eb = |e: zyntax_hir::MmaElem| u64::from(e.bits() / 8);
                // Every byte either descriptor names, read once through the checks.
                let mut bytes: HashMap<u64, u8> = HashMap::new();
                let mut read = |addr: u64, len: u64| -> Result<u64> {
                    let mut v = 0u64;
                    for i in 0..len {
                        let x = addr + i;
                        if let Some(b) = bytes.get(&x) {
                            v |= u64::from(*b) << (8 * i);
                            continue;
                        }
                        let at = self.window.iter().find(|e| x >= e.0 && x < e.0 + e.2);
                        let Some(&(start, id, _)) = at else {
                            return Err(ctx.trap(
                                TrapKind::OutOfBounds,
                                pc,
                                base,
                                format!("wgmma descriptor addresses window byte 0x{x:x}, outside the block's shared memory"),
                            ));
                        };
                        let p = memory::make_ptr(id, (x - start) as i64);
                        let b = self
                            .mem
                            .load(p, 1, 1, base)
                            .map_err(|f| ctx.fault(f, pc, base, "wgmma", &self.tids))?
                            as u8;
                        bytes.insert(x, b);
                        v |= u64::from(b) << (8 * i);
                    }
                    Ok(v)
                };
                let (k, n) = (form.k(), form.n);
                let mut am = vec![0u64; 16 * k as usize];
                if *a_regs {
                    let shape = wgmma::a_shape(form.a);
                    let bits = form.a.bits();
                    for lane in 0..32u32 {
                        for i in 0..warp_mma::count(shape, warp_mma::Operand::A) {
                            let (row, col) =
                                warp_mma::position(shape, warp_mma::Operand::A, lane, i);
                            am[(row * k + col) as usize] =
                                warp_mma::elem(&warp.regs, *a, lane as usize, bits, i);
                        }
                    }
                } else {
                    let da = wgmma::decode(r(&warp.regs, *a, 0));
                    for row in 0..16u32 {
                        for kk in 0..k {
                            let m = u64::from(16 * q + row);
                            let x = wgmma::address(&da, m, u64::from(kk), eb(form.a), form.trans_a);
                            am[(row * k + kk) as usize] = read(x, eb(form.a))?;
                        }
                    }
                }
                let db = wgmma::decode(r(&warp.regs, *b, 0));
                let mut bm = vec![0u64; (n * k) as usize];
                for j in 0..n {
                    for kk in 0..k {
                        let x = wgmma::address(
                            &db,
                            u64::from(j),
                            u64::from(kk),
                            eb(form.b),
                            form.trans_b,
                        );
                        bm[(j * k + kk) as usize] = read(x, eb(form.b))?;
                    }
                }
                let aw = acc.bits();
                let regs = &warp.regs;
                let out = wgmma::compute(
                    *form,
                    *acc,
                    r(regs, *scale_d, 0) & 1 != 0,
                    &|row, kk| am[(row * k + kk) as usize],
                    &|j, kk| bm[(j * k + kk) as usize],
                    &|lane, i| warp_mma::elem(regs, *c, lane as usize, aw, i),
                );
                for (lane, vals) in out.iter().enumerate() {
                    for i in 0..n / 2 {
                        warp_mma::set_elem(&mut warp.regs, *d, lane, aw, i, vals[i as usize]);
                    }
                }
            }
            DOp::Elect { dst } => {
                let first = group.trailing_zeros() as usize;
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, u64::from(l == first));
                }
            }
            DOp::Ldmatrix {
                num,
                trans,
                dst,
                ptr,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let what = if *trans { "ldmatrix.trans" } else { "ldmatrix" };
                for i in 0..*num {
                    let mut m = [0u16; 64];
                    for row in 0..8u32 {
                        let l = (i * 8 + row) as usize;
                        let tid = base + l as u32;
                        let pv = r(&warp.regs, *ptr, l);
                        let (id, off) = self
                            .mem
                            .check(pv, 16, 16, Access::Read, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, what, &self.tids))?;
                        for (j, e) in m[row as usize * 8..][..8].iter_mut().enumerate() {
                            *e = self.mem.read(id, off + 2 * j, 2) as u16;
                        }
                    }
                    for l in 0..32u32 {
                        let v = warp_mma::ldmatrix_reg(&m, l, *trans);
                        warp_mma::set_reg(&mut warp.regs, *dst, l as usize, i, v);
                    }
                }
            }
            DOp::Stmatrix {
                num,
                trans,
                ptr,
                src,
            } => {
                mma_lanes(&ctx, warp, group, pc)?;
                let what = if *trans { "stmatrix.trans" } else { "stmatrix" };
                for i in 0..*num {
                    let mut m = [0u16; 64];
                    for l in 0..32u32 {
                        let v = warp_mma::reg(&warp.regs, *src, l as usize, i);
                        warp_mma::stmatrix_reg(&mut m, l, *trans, v);
                    }
                    for row in 0..8u32 {
                        let l = (i * 8 + row) as usize;
                        let tid = base + l as u32;
                        let pv = r(&warp.regs, *ptr, l);
                        let (id, off) = self
                            .mem
                            .check(pv, 16, 16, Access::Write, tid)
                            .map_err(|f| ctx.fault(f, pc, tid, what, &self.tids))?;
                        for (j, e) in m[row as usize * 8..][..8].iter().enumerate() {
                            self.mem.write(id, off + 2 * j, 2, u64::from(*e));
                        }
                    }
                }
            }
            _ => return Err(InterpError::Internal("not a collective".into())),
        }
        Ok(())
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

fn mma_lanes(ctx: &Ctx, warp: &Warp, group: u32, pc: u32) -> Result<usize> {
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

/// Bind a branch's arguments to its target's parameters for the lanes `mask`.
fn edge_copies(
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

// ---------------------------------------------------------------- co-scheduled blocks (h13-cluster)

/// Most blocks a `grid_sync` kernel may launch on the interpreter (all are resident at once).
const MAX_CO_BLOCKS: usize = 4096;

/// Allocate one block's shared memory (static allocations, then dynamic) and
/// its threads' local-memory slots, in that order (`reset_block` relies on
/// it); returns (static ids, dynamic id, first local id).
fn block_memory(
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
fn shared_window(mem: &Memory, shared_ids: &[u32], dyn_id: u32) -> Vec<(u64, u32, u64)> {
    let mut window = Vec::new();
    let mut next = 0u64;
    for &id in shared_ids.iter().chain([&dyn_id]) {
        let bytes = mem.allocs[id as usize].data.len() as u64;
        window.push((next, id, bytes));
        next = (next + bytes).next_multiple_of(wgmma::WINDOW_ALIGN);
    }
    window
}

fn new_warps(p: &Program, nthreads: u32) -> Vec<Warp> {
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

/// `%cluster_ctarank`: the block's index in its cluster, x fastest.
fn cluster_rank(bid: [u32; 3], c: [u32; 3]) -> u32 {
    let [x, y, z] = [bid[0] % c[0], bid[1] % c[1], bid[2] % c[2]];
    x + c[0] * (y + c[1] * z)
}

/// `mapa`: the pointer `p` into the running block's shared memory, moved to
/// the same offset of the same allocation in the cluster's block `rank`.
#[allow(clippy::too_many_arguments)]
fn mapa_target(
    own: (&[u32], u32),
    parked: &[Option<Cta>],
    group: &[[u32; 3]],
    cur: usize,
    c: [u32; 3],
    bid: [u32; 3],
    p: u64,
    rank: u32,
) -> std::result::Result<u64, (TrapKind, String)> {
    let n: u32 = c.iter().product();
    if rank >= n {
        return Err((
            TrapKind::OutOfBounds,
            format!("mapa: rank {rank} is outside the cluster of {n} blocks"),
        ));
    }
    let id = memory::ptr_id(p);
    let slot = own
        .0
        .iter()
        .position(|&x| x == id)
        .or_else(|| (id == own.1).then_some(own.0.len()));
    let Some(slot) = slot else {
        return Err((
            TrapKind::AddressSpace,
            "mapa: the pointer does not point into this block's shared memory".into(),
        ));
    };
    let origin = [
        bid[0] - bid[0] % c[0],
        bid[1] - bid[1] % c[1],
        bid[2] - bid[2] % c[2],
    ];
    let target = [
        origin[0] + rank % c[0],
        origin[1] + (rank / c[0]) % c[1],
        origin[2] + rank / (c[0] * c[1]),
    ];
    let internal = || {
        (
            TrapKind::InvalidPointer,
            "mapa: block not resident (interpreter bug)".to_string(),
        )
    };
    let k = group
        .iter()
        .position(|b| *b == target)
        .ok_or_else(internal)?;
    let (ids, dyn_id) = if k == cur {
        own
    } else {
        let cta = parked
            .get(k)
            .and_then(Option::as_ref)
            .ok_or_else(internal)?;
        (cta.shared_ids.as_slice(), cta.dyn_id)
    };
    let tid = ids.get(slot).copied().unwrap_or(dyn_id);
    Ok(memory::make_ptr(tid, memory::ptr_offset(p)))
}

impl Exec<'_> {
    /// Run the grid in co-scheduled groups: each cluster (x fastest), or
    /// the whole grid when the program uses `grid_sync`.
    fn run_co(&mut self, args: &[Vec<u64>]) -> Result<()> {
        let [gx, gy, gz] = self.grid;
        let c = self.cluster;
        let grid_wide = self.p.insts.iter().any(|i| matches!(i.op, DOp::GridSync));
        if grid_wide {
            let n = gx as usize * gy as usize * gz as usize;
            if n > MAX_CO_BLOCKS {
                return Err(InterpError::Unsupported(format!(
                    "grid_sync with {n} blocks: the interpreter keeps at most {MAX_CO_BLOCKS} blocks resident"
                )));
            }
            let mut all = Vec::with_capacity(n);
            for z in 0..gz {
                for y in 0..gy {
                    for x in 0..gx {
                        all.push([x, y, z]);
                    }
                }
            }
            return self.run_together(all, args);
        }
        for oz in (0..gz).step_by(c[2] as usize) {
            for oy in (0..gy).step_by(c[1] as usize) {
                for ox in (0..gx).step_by(c[0] as usize) {
                    let mut bids = Vec::new();
                    for z in 0..c[2] {
                        for y in 0..c[1] {
                            for x in 0..c[0] {
                                bids.push([ox + x, oy + y, oz + z]);
                            }
                        }
                    }
                    self.run_together(bids, args)?;
                }
            }
        }
        Ok(())
    }

    /// Make block `k` of the group the running one.
    fn activate(&mut self, k: usize) -> Result<()> {
        if k == self.cur {
            return Ok(());
        }
        let Some(mut c) = self.parked.get_mut(k).and_then(Option::take) else {
            return Err(InterpError::Internal("co-scheduled block missing".into()));
        };
        std::mem::swap(&mut self.bid, &mut c.bid);
        std::mem::swap(&mut self.warps, &mut c.warps);
        std::mem::swap(&mut self.cp, &mut c.cp);
        std::mem::swap(&mut self.shared_ids, &mut c.shared_ids);
        std::mem::swap(&mut self.dyn_id, &mut c.dyn_id);
        self.window = shared_window(&self.mem, &self.shared_ids, self.dyn_id);
        std::mem::swap(&mut self.local_base, &mut c.local_base);
        std::mem::swap(&mut self.c_arrived, &mut c.c_arrived);
        std::mem::swap(&mut self.c_waited, &mut c.c_waited);
        self.parked[self.cur] = Some(c);
        self.cur = k;
        Ok(())
    }

    /// Run the blocks `bids` together to completion.
    fn run_together(&mut self, bids: Vec<[u32; 3]>, args: &[Vec<u64>]) -> Result<()> {
        let n = bids.len();
        let nthreads = self.nthreads;
        while self.parked.len() < n {
            // One more block's memory and threads, allocated once per launch.
            let dyn_bytes = self.mem.allocs[self.dyn_id as usize].data.len() as u64;
            let (shared_ids, dyn_id, local_base) =
                block_memory(&mut self.mem, self.p, dyn_bytes, nthreads);
            self.parked.push(Some(Cta {
                bid: [0; 3],
                warps: new_warps(self.p, nthreads),
                cp: (0..nthreads).map(|_| CpThread::default()).collect(),
                shared_ids,
                dyn_id,
                local_base,
                c_arrived: vec![0; nthreads as usize],
                c_waited: vec![0; nthreads as usize],
            }));
        }
        self.group = bids;
        for k in 0..n {
            self.activate(k)?;
            self.bid = self.group[k];
            self.start_block(args);
        }
        loop {
            let mut progress = false;
            let mut live = false;
            for k in 0..n {
                self.activate(k)?;
                let fuel = self.fuel;
                match self.block_round()? {
                    Round::Yielded | Round::Released => {
                        progress = true;
                        live = true;
                    }
                    Round::Stopped => {
                        progress |= self.fuel != fuel;
                        live |= self
                            .warps
                            .iter()
                            .any(|w| lanes(w.exist).any(|l| w.st[l] != St::Done));
                    }
                }
            }
            if !live {
                return Ok(());
            }
            if !progress && !self.release_waits()? {
                return Err(self.deadlock());
            }
        }
    }

    /// Every block of the group is blocked: release the cluster-barrier
    /// waits whose cluster has fully arrived and, when every thread of the
    /// grid waits at `grid_sync`, the grid. Whether anything was released.
    fn release_waits(&mut self) -> Result<bool> {
        let n = self.group.len();
        let c = self.cluster;
        let cluster_of = |b: [u32; 3]| [b[0] / c[0], b[1] / c[1], b[2] / c[2]];
        // Fewest arrivals of a live thread per cluster, and the grid's waiting state.
        let mut least: HashMap<[u32; 3], u32> = HashMap::new();
        let (mut grid_waiting, mut grid_other, mut exited) = (false, false, None);
        for k in 0..n {
            self.activate(k)?;
            let e = least.entry(cluster_of(self.bid)).or_insert(u32::MAX);
            for w in &self.warps {
                for l in lanes(w.exist) {
                    let t = w.base_tid as usize + l;
                    match w.st[l] {
                        St::Done => exited = exited.or(Some((k, t))),
                        st => {
                            *e = (*e).min(self.c_arrived[t]);
                            if st == St::GridWait {
                                grid_waiting = true;
                            } else {
                                grid_other = true;
                            }
                        }
                    }
                }
            }
        }
        let release_grid = grid_waiting && !grid_other;
        if let (true, Some((k, t))) = (release_grid, exited) {
            self.activate(k)?;
            let tid = self.tids[t];
            let waiting = self.warps.iter().find_map(|w| {
                lanes(w.exist)
                    .find(|&l| w.st[l] == St::GridWait)
                    .map(|l| (w.pc[l], w.base_tid + l as u32))
            });
            let (pc, by) = waiting.unwrap_or((0, 0));
            return Err(self.ctx_full().trap(
                TrapKind::DivergentBarrier,
                pc,
                by,
                format!(
                    "grid_sync: thread ({}, {}, {}) of block ({}, {}, {}) has exited; every thread of the grid must reach grid_sync",
                    tid[0], tid[1], tid[2], self.bid[0], self.bid[1], self.bid[2]
                ),
            ));
        }
        let mut released = false;
        for k in 0..n {
            self.activate(k)?;
            let most = least[&cluster_of(self.bid)];
            for wi in 0..self.warps.len() {
                for l in lanes(self.warps[wi].exist) {
                    let t = self.warps[wi].base_tid as usize + l;
                    let go = match self.warps[wi].st[l] {
                        St::ClusterWait if most > self.c_waited[t] => {
                            self.c_waited[t] += 1;
                            true
                        }
                        St::GridWait => release_grid,
                        _ => false,
                    };
                    if go {
                        self.warps[wi].st[l] = St::Run;
                        self.warps[wi].pc[l] += 1;
                        released = true;
                    }
                }
            }
        }
        if released {
            // Like a block barrier, a cluster barrier or grid sync orders what came before it.
            self.mem.epoch = self.mem.epoch.wrapping_add(1);
        }
        Ok(released)
    }

    /// The trap for a group whose blocks all wait and none can go on.
    fn deadlock(&mut self) -> InterpError {
        for k in 0..self.group.len() {
            if self.activate(k).is_err() {
                break;
            }
            let found = self.warps.iter().find_map(|w| {
                lanes(w.exist)
                    .find(|&l| w.st[l] != St::Done)
                    .map(|l| (w.pc[l], w.base_tid + l as u32, w.st[l]))
            });
            if let Some((pc, tid, st)) = found {
                let what = match st {
                    St::ClusterWait => {
                        "cluster_barrier.wait: a thread of the cluster never arrives"
                    }
                    St::GridWait => "grid_sync: a thread of the grid never reaches it",
                    _ => "this thread waits at a block barrier while others wait for other blocks",
                };
                return self.ctx_full().trap(
                    TrapKind::DivergentBarrier,
                    pc,
                    tid,
                    format!("deadlock between blocks: {what}"),
                );
            }
        }
        InterpError::Internal("co-scheduled deadlock without a waiting thread".into())
    }
}
