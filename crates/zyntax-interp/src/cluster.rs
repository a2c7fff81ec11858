//! Clusters and co-scheduled blocks (h13-cluster): kernels that use cluster
//! barriers, `mapa`, TMA multicast or `grid_sync` run the blocks of one
//! cluster (with `grid_sync`, of the whole grid) resident together, taking
//! turns, each until its warps are all blocked, done, or out of their time
//! slice.

use crate::cp_async::CpThread;
use crate::decode::{DOp, InstCx};
use crate::exec::{
    block_memory, lanes, new_warps, r, shared_window, w, Ctx, Exec, Flow, Round, St, Warp,
};
use crate::memory;
use crate::{InterpError, Result, TrapKind};
use std::collections::HashMap;
use zyntax_hir::{ClusterBarrierOp, Op};

/// The per-block state of a parked block of a co-scheduled group (the
/// running block's lives in [`Exec`]'s fields of the same names).
pub(crate) struct Cta {
    bid: [u32; 3],
    warps: Vec<Warp>,
    cp: Vec<CpThread>,
    shared_ids: Vec<u32>,
    dyn_id: u32,
    local_base: u32,
    c_arrived: Vec<u32>,
    c_waited: Vec<u32>,
    /// The block's named barriers (`bar.sync id` is per CTA).
    nbar: [(u32, u32); 16],
}

/// Most blocks a `grid_sync` kernel may launch on the interpreter (all are resident at once).
const MAX_CO_BLOCKS: usize = 4096;

/// Decode a cluster barrier, `grid_sync`, `griddepcontrol` or `mapa`.
pub(crate) fn decode_cluster(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::ClusterBarrier(c) => match c {
            ClusterBarrierOp::Wait => DOp::ClusterWait,
            _ => DOp::ClusterArrive,
        },
        Op::GridSync => DOp::GridSync,
        // Launches run one after another, so `griddepcontrol` has nothing to wait for.
        Op::Griddep(_) => DOp::Nop,
        Op::Mapa => DOp::Mapa {
            dst: ic.res(0)?,
            ptr: ic.arg(0)?,
            rank: ic.arg(1)?,
        },
        _ => return Err(InterpError::Internal("not a cluster op".into())),
    })
}

impl Exec<'_> {
    /// Execute a cluster barrier, `grid_sync` or `mapa` for the lanes `mask`.
    #[inline]
    pub(crate) fn exec_cluster(&mut self, wi: usize, pc: u32, mask: u32, op: &DOp) -> Result<Flow> {
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        match op {
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
                return Ok(Flow::Stop);
            }
            DOp::GridSync => {
                for l in lanes(mask) {
                    warp.st[l] = St::GridWait;
                    warp.pc[l] = pc;
                }
                return Ok(Flow::Stop);
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

            _ => return Err(InterpError::Internal("not a cluster op".into())),
        }
        Ok(Flow::Next)
    }
}

/// `%cluster_ctarank`: the block's index in its cluster, x fastest.
pub(crate) fn cluster_rank(bid: [u32; 3], c: [u32; 3]) -> u32 {
    let [x, y, z] = [bid[0] % c[0], bid[1] % c[1], bid[2] % c[2]];
    x + c[0] * (y + c[1] * z)
}

/// `mapa`: the pointer `p` into the running block's shared memory, moved to
/// the same offset of the same allocation in the cluster's block `rank`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn mapa_target(
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
    pub(crate) fn run_co(&mut self, args: &[Vec<u64>]) -> Result<()> {
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
        std::mem::swap(&mut self.nbar, &mut c.nbar);
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
                nbar: [(0, 0); 16],
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
