//! Schedules: how a tile program is cut up and run, kept apart from what it
//! computes. A program reads its tile shapes from its schedule, so one
//! algorithm serves every schedule a heuristic or the autotuner picks.

use crate::error::{TileError, TileResult};
use zyntax_hir::arch::max_shared_bytes;
use zyntax_hir::Arch;

/// Registers a thread may use (the PTX limit).
pub const MAX_REGISTERS: u32 = 255;
/// Pipeline stages a schedule may ask for.
pub const MAX_STAGES: u32 = 16;

/// A schedule: block tile, K step, warps, pipeline stages, cluster size and
/// the arch it is for. Built with chained setters:
/// `Schedule::block(&[64, 64]).k(16).warps(4)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// The output tile of one program instance, per dim.
    pub block: Vec<u32>,
    /// The reduction step of a K loop.
    pub k: u32,
    /// Warps per CTA (`warps * 32` threads hold each tile).
    pub warps: u32,
    /// Software-pipeline stages. Recorded and validated; the lowering is
    /// single-stage for now (see docs/tile.md, "Not built yet").
    pub stages: u32,
    /// CTAs per thread-block cluster. Lowered by the warp-specialised,
    /// persistent pipeline (`lower/pipeline_ws.rs`): the cluster's CTAs take
    /// adjacent program instances that share an operand tile, and each
    /// loads its share of that tile with TMA multicast into every CTA of
    /// the cluster. Without `warp_specialize` the kernel declares clusters
    /// of this many CTAs and every `reduce` combines the cluster's CTAs
    /// (`lower/reduce.rs`, step 4: each CTA holds a slice of the axis).
    pub cluster: u32,
    /// With `cluster` > 1: the cluster's CTAs are adjacent along N and share
    /// the `a` tile (cuBLAS's "2x1"); otherwise along M, sharing `b`.
    pub cluster_n: bool,
    /// The arch whose limits the schedule is checked against.
    pub arch: Arch,
    /// How `dot` is computed: FFMA, tensor cores (`mma.sync`), or the best
    /// the arch and the operand types allow.
    pub dot_path: DotPath,
    /// sm_90a GEMM loops: one producer warpgroup beside the `warps` consumer
    /// warps loads the stages with TMA through mbarrier full/empty rings
    /// (`lower/pipeline_ws.rs`). A program or view the path does not fit
    /// keeps the `cp.async` pipeline.
    pub warp_specialize: bool,
    /// With `warp_specialize`: a grid of about one CTA per SM walks the
    /// program instances (`grid` of the program) in a grouped order; the
    /// launch passes the program's grid as two extra `u32` parameters.
    pub persistent: bool,
    /// With `warp_specialize` and 3 stages or more: wgmma groups a consumer
    /// keeps in flight across K steps (`wgmma.wait_group` depth, 0 or 1).
    /// With 1 a stage is handed back one step late (the tensor cores work
    /// through the wait); with 0 at once (the producer runs a stage further
    /// ahead). The default is 0: on an H200 it was faster at every measured
    /// shape (712 vs 670 TFLOP/s at 4096^3, 309 vs 249 at 256x4096x4096).
    pub wgmma_in_flight: u32,
    /// With `persistent`: two consumer sets of `warps` warps each (CUTLASS's
    /// "ping-pong") take the CTA's program instances in turn, each holding a
    /// whole block tile; one set's epilogue runs while the other's wgmmas
    /// do. The block tile must fit one set's registers (128x128 over 4
    /// warps: 128 accumulators per thread).
    pub pingpong: bool,
    /// With `warp_specialize`: the epilogue's store of the output tile goes
    /// through shared memory and TMA (`cp.async.bulk.tensor` from 128-byte
    /// swizzled column boxes, one thread per consumer set issuing them), so
    /// the consumers write registers to shared memory and return to the
    /// next tile's wgmmas while the copy runs (`lower/pipeline_ws.rs`). A
    /// program whose store the path cannot take keeps the register stores.
    pub tma_store: bool,
}

/// How a `dot` is lowered.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum DotPath {
    /// Scalar `fma` from shared memory (every arch and operand type).
    Ffma,
    /// `mma.sync.m16n8k16` (sm_80+, f16/bf16 operands, f32 accumulator,
    /// M a multiple of 16, N of 8, K of 16); any other `dot` is a
    /// `BadSchedule` error naming `dot_path`.
    MmaSync,
    /// `wgmma.mma_async` (sm_90, f16/bf16 operands): the GEMM loop of a
    /// program is lowered to a pipeline of `stages` shared-memory stages fed
    /// by `cp.async` (`lower/pipeline.rs`); a `dot` that cannot be lowered so
    /// is a `BadSchedule` error naming `dot_path`.
    Wgmma,
    /// The best path that applies: on sm_90 `wgmma` for a GEMM loop that fits
    /// it, else `mma.sync` where it applies, else FFMA. f32 operands stay on
    /// FFMA (tf32 would round them to 10 mantissa bits without being asked to).
    #[default]
    Auto,
}

impl Schedule {
    pub fn block(block: &[u32]) -> Schedule {
        Schedule {
            block: block.to_vec(),
            k: 16,
            warps: 4,
            stages: 1,
            cluster: 1,
            cluster_n: false,
            // The target table's default arch (docs/lowering.md, "Targets").
            arch: Arch::DEFAULT,
            dot_path: DotPath::Auto,
            warp_specialize: false,
            persistent: false,
            wgmma_in_flight: 0,
            pingpong: false,
            tma_store: false,
        }
    }
    pub fn tma_store(mut self, on: bool) -> Schedule {
        self.tma_store = on;
        self
    }
    pub fn pingpong(mut self, on: bool) -> Schedule {
        self.pingpong = on;
        self
    }
    /// Consumer sets of a warp-specialised schedule (2 with `pingpong`).
    pub fn consumer_sets(&self) -> u32 {
        if self.pingpong {
            2
        } else {
            1
        }
    }
    pub fn wgmma_in_flight(mut self, n: u32) -> Schedule {
        self.wgmma_in_flight = n;
        self
    }
    pub fn warp_specialize(mut self, on: bool) -> Schedule {
        self.warp_specialize = on;
        self
    }
    pub fn persistent(mut self, on: bool) -> Schedule {
        self.persistent = on;
        self
    }
    pub fn dot_path(mut self, dot_path: DotPath) -> Schedule {
        self.dot_path = dot_path;
        self
    }
    pub fn k(mut self, k: u32) -> Schedule {
        self.k = k;
        self
    }
    pub fn warps(mut self, warps: u32) -> Schedule {
        self.warps = warps;
        self
    }
    pub fn stages(mut self, stages: u32) -> Schedule {
        self.stages = stages;
        self
    }
    pub fn cluster(mut self, cluster: u32) -> Schedule {
        self.cluster = cluster;
        self
    }
    /// Clusters along N (sharing `a`) instead of along M (sharing `b`).
    pub fn cluster_n(mut self, on: bool) -> Schedule {
        self.cluster_n = on;
        self
    }
    pub fn arch(mut self, arch: Arch) -> Schedule {
        self.arch = arch;
        self
    }

    /// Threads per CTA.
    pub fn threads(&self) -> u32 {
        self.warps * crate::layout::WARP
    }

    /// The grid for a problem of `extents` (one per block dim): ceil-divided,
    /// unused grid dims 1.
    pub fn grid(&self, extents: &[u64]) -> TileResult<[u32; 3]> {
        if extents.len() != self.block.len() || extents.len() > 3 {
            return Err(TileError::BadSchedule {
                field: "block",
                message: format!(
                    "grid of a {}-d problem from a {}-d block",
                    extents.len(),
                    self.block.len()
                ),
            });
        }
        let mut grid = [1; 3];
        for (i, (&e, &b)) in extents.iter().zip(&self.block).enumerate() {
            grid[i] = u32::try_from(e.div_ceil(u64::from(b)).max(1)).map_err(|_| {
                TileError::BadSchedule {
                    field: "block",
                    message: format!("extent {e} needs more than 2^32 program instances"),
                }
            })?;
        }
        Ok(grid)
    }

    /// Checks the fields on their own (powers of two, ranges).
    pub fn validate(&self) -> TileResult<()> {
        let bad = |field, message: String| Err(TileError::BadSchedule { field, message });
        if !(1..=32).contains(&self.warps) || !self.warps.is_power_of_two() {
            return bad(
                "warps",
                format!("{} is not a power of two in 1..=32", self.warps),
            );
        }
        if self.block.is_empty() || self.block.len() > 3 {
            return bad(
                "block",
                format!("{} dims; 1 to 3 are supported", self.block.len()),
            );
        }
        if let Some(b) = self
            .block
            .iter()
            .find(|b| !b.is_power_of_two() || **b > 4096)
        {
            return bad("block", format!("{b} is not a power of two up to 4096"));
        }
        if !self.k.is_power_of_two() || self.k > 1024 {
            return bad("k", format!("{} is not a power of two up to 1024", self.k));
        }
        // Up to 16: the narrow swapped tiles hold 12-14 stages of TMA ring
        // (cuBLAS runs 11-12 at small M); shared memory bounds the rest.
        if !(1..=MAX_STAGES).contains(&self.stages) {
            return bad(
                "stages",
                format!("{} is not in 1..={MAX_STAGES}", self.stages),
            );
        }
        if ![1, 2, 4, 8].contains(&self.cluster) {
            return bad("cluster", format!("{} is not 1, 2, 4 or 8", self.cluster));
        }
        if self.wgmma_in_flight > 1 {
            return bad(
                "wgmma_in_flight",
                format!("{} is not 0 or 1", self.wgmma_in_flight),
            );
        }
        if self.persistent && !self.warp_specialize {
            return bad(
                "persistent",
                "persistent tile scheduling is built for warp-specialised schedules only".into(),
            );
        }
        if self.pingpong && !self.persistent {
            return bad(
                "pingpong",
                "two consumer sets take turns over a persistent grid: set persistent too".into(),
            );
        }
        if self.tma_store && !self.warp_specialize {
            return bad(
                "tma_store",
                "the TMA store epilogue is built for warp-specialised schedules only".into(),
            );
        }
        if self.cluster > 1 && self.arch < Arch::Sm90 {
            return bad(
                "cluster",
                format!("clusters need sm_90, the schedule is for {}", self.arch),
            );
        }
        Ok(())
    }

    /// Checks that a GEMM-shaped use of the schedule (`[block[0], k]` and
    /// `[k, block[1]]` operand tiles of `operand_bytes`-byte elements staged
    /// in shared memory per stage, an f32 accumulator in registers) fits the
    /// arch's shared memory and the register file.
    pub fn validate_gemm(&self, operand_bytes: u32) -> TileResult<()> {
        self.validate()?;
        if self.block.len() != 2 {
            return Err(TileError::BadSchedule {
                field: "block",
                message: format!("a GEMM needs a 2-d block, got {:?}", self.block),
            });
        }
        let (bm, bn, bk) = (
            u64::from(self.block[0]),
            u64::from(self.block[1]),
            u64::from(self.k),
        );
        let staged = (bm * bk + bk * bn) * u64::from(operand_bytes) * u64::from(self.stages);
        let limit = max_shared_bytes(self.arch);
        if staged > limit {
            return Err(TileError::DoesNotFit {
                field: "block",
                message: format!(
                    "{} stage(s) of {bm}x{bk} and {bk}x{bn} tiles need {staged} bytes of shared memory; {} allows {limit}",
                    self.stages, self.arch
                ),
            });
        }
        let regs = self.registers_estimate(bm * bn, bm + bn);
        if regs > u64::from(MAX_REGISTERS) {
            return Err(TileError::DoesNotFit {
                field: "warps",
                message: format!(
                    "a {bm}x{bn} f32 accumulator over {} threads needs about {regs} registers per thread (limit {MAX_REGISTERS})",
                    self.threads()
                ),
            });
        }
        Ok(())
    }

    /// Registers per thread of the FFMA GEMM: the accumulator's share, the
    /// A and B fragments of one K step, and a fixed allowance for addresses.
    fn registers_estimate(&self, acc_elems: u64, fragment_elems: u64) -> u64 {
        let threads = u64::from(self.threads());
        acc_elems.div_ceil(threads) + fragment_elems.div_ceil(threads).max(2) + 24
    }
}

/// A GEMM problem, for [`heuristic`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GemmProblem {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Bytes per operand element.
    pub operand_bytes: u32,
}

/// A reasonable FFMA schedule for `problem` on `arch`: 64x64 output tiles
/// over 4 warps (32 accumulators per thread) for large problems, smaller
/// tiles when the problem would not fill the GPU's SMs, a K step of 16.
/// A stub for the MMA heuristics and the autotuner to come.
pub fn heuristic(problem: &GemmProblem, arch: Arch) -> Schedule {
    let tiles = |b: u64| problem.m.div_ceil(b) * problem.n.div_ceil(b);
    // About one CTA per SM or more (the smallest SM count is ~40).
    let block = if tiles(64) >= 40 || problem.m.max(problem.n) > 1024 {
        64
    } else if tiles(32) >= 40 {
        32
    } else {
        16
    };
    let warps = if block == 16 { 2 } else { 4 };
    let k = if problem.k < 16 { 8 } else { 16 };
    Schedule::block(&[block, block])
        .k(k)
        .warps(warps)
        .arch(arch)
}

/// Tile shapes of the library's matmul (`zyntax.kernels.gemm_tile`), largest
/// first, as `[bm, bn, bk, warps, stages]`. sm_90a runs the wgmma pipeline
/// (K steps of 64; on an H200 128x256 over 8 warps led at large outputs and
/// 64x64 over 4 at small M, docs/tile.md "Performance"); other sm_80+ code
/// runs `mma.sync` (no software pipeline yet), f32 operands FFMA.
pub const WGMMA_TILES: [[u32; 5]; 4] = [
    [128, 256, 64, 8, 4],
    [128, 128, 64, 8, 4],
    [64, 128, 64, 4, 6],
    [64, 64, 64, 4, 4],
];
pub const MMA_TILES: [[u32; 5]; 3] = [[128, 128, 32, 8, 1], [64, 64, 32, 4, 1], [16, 64, 32, 4, 1]];
pub const FFMA_TILES: [[u32; 5]; 3] = [[64, 64, 16, 4, 1], [32, 32, 16, 4, 1], [16, 16, 16, 2, 1]];
/// The sm_90a tile of one row of tiles (M up to 64: decode, gemv). On an H200
/// (B1) at 1x4096x4096, 64x128 split in 4 ran 1.08 TFLOP/s against 0.80 for
/// 64x64 split in 5 and 0.45 unsplit (cuBLAS 0.87 in that run); at
/// 16x14336x4096 37 against 28 for 64x64 (which filled the SMs unsplit).
pub const WGMMA_SMALL_M_TILE: [u32; 5] = [64, 128, 64, 4, 4];
/// Rows up to which products take [`WGMMA_SMALL_M_TILE`] (and split K to
/// fill the SMs) instead of the table's first tile that fills them: 128 since
/// session 13, where 128x4096x4096 took 64x64 tiles unsplit on the `cp.async`
/// pipeline (128 tiles fill the SMs) and ran 32.5 us against cuBLAS's 15.8
/// (H200, B1); on 64x128 tiles it splits in 2 as 64 rows split in 4.
pub const WGMMA_SMALL_M_MAX: u64 = 128;
/// When the output has fewer tiles than the GPU has SMs, K is split until
/// the grid has `SPLIT_WAVES` CTAs per SM, each split at least
/// `SPLIT_MIN_STEPS` K steps long. One wave: on an H200 (session 12 B1,
/// device time, us) more splits lost at every small-M shape, 1x4096x4096
/// 64x128 split in 2 / 4 / 8 / 16: 23.6 / 23.0 / 25.1 / 36.0 (two waves
/// made 9 splits: 25.2), 16x14336x4096 in 2 / 4 / 8: 42.3 / 47.5 / 51.0
/// (two waves: 3, 45.7), 64x4096x4096 in 2 / 4 / 8: 19.3 / 18.9 / 23.2.
pub const SPLIT_WAVES: u64 = 1;
pub const SPLIT_MIN_STEPS: u64 = 4;
/// Products of 129 to 256 rows with K of at least `MID_SPLIT_MIN_K` whose
/// 128x128 tiles leave SMs idle take those tiles and split K until they fill
/// one wave (one CTA per SM): 256x4096x14336 (64 tiles) in 2 ran 55.4 us
/// against 67.3 for unsplit 64x128 (B1 above; cuBLAS 48.5). With K = 4096
/// the split lost (256x6144x4096: 41.5 split, 30.3 unsplit).
pub const MID_SPLIT_MIN_K: u64 = 8192;

/// Rows up to which the library's matmul runs the gemv program
/// (`kernels/gemv_tile.py`: FFMA over `[bk, bn]` slabs of `b`, no tensor
/// cores) instead of a tensor-core tile: a product of a few rows reads each
/// weight once, and wgmma pads the rows to 64. One row only: on an H200
/// (session 12 B1, device time) 4x4096x4096 took 32.8 us on it against 22.1
/// for the split tensor-core route (each row of an instance re-reads its
/// slab); at M = 1 it ran 21.3 against 23.0 (4096x4096) and 45.4 against
/// 43.4 (K = 14336) for 64x128 split in 4 (cuBLAS 14.9 and 32.6).
pub const GEMV_MAX_M: u64 = 1;
/// The gemv program's slab per K step, `[bk, bn, warps, stages]` (stages 2:
/// the loop loads the next K step's slab before this step's FMAs).
pub const GEMV_TILE: [u32; 4] = [16, 128, 4, 1];
/// A narrow slab, `[bk, bn, warps, stages]`, that runs the whole of K with
/// no split (no partials, no finishing pass: the program applies the
/// epilogue) wherever its N tiles alone give about every SM an instance;
/// `None`: always the split schedule above.
/// On an H200 (session 13 B1, device time, us; the split 16x128 slab over 4
/// warps, 4 instances per SM, with the one-load finishing pass beside it):
/// 512x16 over 8 warps 16.5 against 17.4 at 1x4096x4096 and 41.9 against
/// 41.7 at 1x4096x14336 (cuBLAS 14.7 and 32.9); 256x32 over 8 warps 17.4
/// and 49.5. The next slab loaded ahead (stages 2) lost everywhere: 16x128
/// split 18.4 / 44.7, 256x32 19.2 / 54.9. Off since B2, where the sweep's
/// other one-row shapes lost on 512x16: 1x14336x4096 48.1 (split, session
/// 12: 40.1), the LM head 1x50304x768 45.4 (27.6), 1x6144x4096 24.5 (25.4);
/// `Some([512, 16, 8, 1])` takes it back.
pub const GEMV_UNSPLIT_TILE: Option<[u32; 4]> = None;
/// Program instances per SM the gemv program's K split aims at (the loop is
/// not software-pipelined: many resident slabs keep loads in flight), each
/// split at least `GEMV_MIN_STEPS` K steps long. B1 at 1x4096x4096: 4 per
/// SM 21.3 us, 6 25.8, 12 30.5 (80 registers a thread: 6 resident).
pub const GEMV_CTAS_PER_SM: u64 = 4;
pub const GEMV_MIN_STEPS: u64 = 2;

/// The gemv program's schedule (block `[1, bn]`, K step `bk`, `stages` 2
/// where the next slab is loaded ahead) for `problem` on `arch` with `sms`
/// SMs and its K splits (1: none), or `None` above [`GEMV_MAX_M`] rows.
pub fn gemv_schedule(problem: &GemmProblem, arch: Arch, sms: u64) -> Option<(Schedule, u32)> {
    if problem.m == 0 || problem.m > GEMV_MAX_M {
        return None;
    }
    let slab = |[bk, bn, warps, stages]: [u32; 4]| {
        Schedule::block(&[1, bn])
            .k(bk)
            .warps(warps)
            .stages(stages)
            .arch(arch)
    };
    if let Some(t) = GEMV_UNSPLIT_TILE {
        // Within 10 % of the SMs counts as filling them (as gemm_schedule).
        if problem.m * problem.n.div_ceil(u64::from(t[1])) * 10 >= sms * 9 {
            return Some((slab(t), 1));
        }
    }
    let schedule = slab(GEMV_TILE);
    let splits = gemv_splits(problem, &schedule, GEMV_CTAS_PER_SM, sms);
    Some((schedule, splits))
}

/// K splits of the gemv program under `schedule` (one instance per row, N
/// tile and split): enough for `ctas_per_sm` instances per SM, each split a
/// whole number of K steps, at least [`GEMV_MIN_STEPS`] (or all of K), so
/// that none is empty.
pub fn gemv_splits(problem: &GemmProblem, schedule: &Schedule, ctas_per_sm: u64, sms: u64) -> u32 {
    let (bk, bn) = (u64::from(schedule.k), u64::from(schedule.block[1]));
    let blocks = problem.m.max(1) * problem.n.div_ceil(bn).max(1);
    let want = (ctas_per_sm * sms).div_ceil(blocks).max(1);
    let steps = problem.k.div_ceil(bk).max(1);
    // Rounded down: at least `want` splits.
    let per = (steps / want).max(GEMV_MIN_STEPS);
    u32::try_from(steps.div_ceil(per)).unwrap_or(u32::MAX)
}

/// The schedule of a `batch` of `problem`s for the library's matmul on
/// `arch` with `sms` SMs, and its number of K splits (1: none): the largest
/// tile of the arch's table whose grid still gives every SM a CTA (else the
/// smallest), and split K when even that leaves SMs idle (decode shapes:
/// memory bandwidth is the limit there, and idle SMs do not load).
pub fn gemm_schedule(problem: &GemmProblem, batch: u64, arch: Arch, sms: u64) -> (Schedule, u32) {
    let table: &[[u32; 5]] = if problem.operand_bytes != 2 || arch < Arch::Sm80 {
        // A machine of a few SMs is the host (interpreter): its small tiles run quicker.
        if sms < 8 {
            &FFMA_TILES[1..]
        } else {
            &FFMA_TILES
        }
    } else if arch == Arch::Sm90a {
        &WGMMA_TILES
    } else {
        &MMA_TILES
    };
    let tiles = |t: &[u32; 5]| {
        problem.m.div_ceil(u64::from(t[0])) * problem.n.div_ceil(u64::from(t[1])) * batch.max(1)
    };
    let hopper16 = arch == Arch::Sm90a && problem.operand_bytes == 2;
    if hopper16 && 128 < problem.m && problem.m <= 256 && problem.k >= MID_SPLIT_MIN_K {
        let t = &WGMMA_TILES[1]; // 128x128 over 8 warps
        let n_tiles = tiles(t);
        if n_tiles * 10 < sms * 9 {
            let steps = problem.k.div_ceil(u64::from(t[2]));
            let splits = (sms / n_tiles).clamp(1, (steps / SPLIT_MIN_STEPS).max(1));
            let [bm, bn, bk, warps, stages] = *t;
            let s = Schedule::block(&[bm, bn])
                .k(bk)
                .warps(warps)
                .stages(stages)
                .arch(arch);
            return (s, u32::try_from(splits).unwrap_or(u32::MAX));
        }
    }
    let pick = if hopper16 && problem.m <= WGMMA_SMALL_M_MAX {
        &WGMMA_SMALL_M_TILE
    } else {
        // A tile count within 10 % of the SMs counts as filling them: at
        // 256x4096x4096 64x128 tiles (128 of them on 132 SMs, 6 stages, the
        // warp-specialised pipeline) ran 0.94x cuBLAS on an H200 (docs/tile.md).
        table
            .iter()
            .find(|t| tiles(t) * 10 >= sms * 9)
            .unwrap_or(&table[table.len() - 1])
    };
    let [bm, bn, bk, warps, stages] = *pick;
    let schedule = Schedule::block(&[bm, bn])
        .k(bk)
        .warps(warps)
        .stages(stages)
        .arch(arch);
    let (n_tiles, steps) = (tiles(pick), problem.k.div_ceil(u64::from(bk)));
    let mut splits = 1;
    if n_tiles * 10 < sms * 9 {
        // At most one CTA per SM where the tiles fill half of them or fewer
        // (rounded down: the SMs that would take a second CTA finish last);
        // session 13 B1 on an H200, with the one-load finishing pass, us:
        // 32 tiles (N = 4096) split in 4 / 5 / 8: 16x4096x4096 17.3 / 18.3 /
        // 17.5, 64x4096x4096 16.4 / 17.8 / 18.4. Above half, one wave
        // rounded up: 16x14336x4096 (112 tiles) in 2 / 4 40.6 / 44.3.
        let n = n_tiles.max(1);
        let want = if 2 * n <= sms {
            sms / n
        } else {
            (SPLIT_WAVES * sms).div_ceil(n)
        };
        splits = want.min(steps / SPLIT_MIN_STEPS).max(1);
    }
    (schedule, u32::try_from(splits).unwrap_or(u32::MAX))
}

/// Rows (tokens) up to which a 16-bit product on sm_90a may run swapped
/// ([`swapped_schedule`]): the tile program computes `C^T = B^T A^T`, the
/// weight rows (N) on wgmma's 64-row M side and the tokens as a narrow N
/// tile, as cuBLAS runs these shapes (Nsight Compute, docs/kernels.md
/// "Small M, session 13": 128 weight rows x 8 / 16 tokens, 11-12 TMA stages).
pub const SWAP_MAX_M: u64 = 128;
/// Token tiles of the swapped form: the smallest power of two holding M,
/// from 8 (wgmma's narrowest N) to this, or half that where the wider one
/// leaves SMs idle.
pub const SWAP_MAX_TOKENS: u32 = 32;
/// Weight rows of a swapped tile: 128 (two m64 wgmmas a K step) where its
/// tiles give about every SM one, else 64.
pub const SWAP_WEIGHT_ROWS: [u32; 2] = [128, 64];
/// K steps from which the swapped form splits K where its tiles fill more
/// than half of the SMs but not all (one wave rounded up, as
/// `gemm_schedule`); `None`: never. Session 14 B1 on an H200:
/// 128x768x3072 + bias (96 tiles of 64x16, 48 steps) ran 12.3 us unsplit
/// against 11.0 on the split route before (cuBLAS 10.1, split in 2).
pub const SWAP_LONG_K_STEPS: Option<u64> = None;
/// Waves of swapped tiles above which the form declines: with that many
/// tiles the unswapped 64-row tiles fill the SMs as well (64x50304x768, 786
/// swapped tiles of 128x32 with 2-stage rings, against the plain route's
/// 1.04x cuBLAS in session 13 B2), and the rings get shallow.
pub const SWAP_MAX_WAVES: u64 = 4;
/// CTAs per SM the swapped form sizes its rings for: every CTA of a grid of
/// up to this many waves is resident at once; larger grids run in waves.
pub const SWAP_RESIDENT_MAX: u64 = 2;
/// Shared memory a CTA of the swapped form keeps back from its stages (the
/// mbarriers, the 1024-byte alignment of the ring, the CTA's reserved KiB).
const SWAP_SMEM_SLACK: u64 = 2048;

/// The swapped-operand schedule of `problem` (M tokens, N weight rows, K)
/// on sm_90a with `sms` SMs, in the swapped product's terms (block `[weight
/// rows, tokens]`, warp-specialised, not persistent), and its K splits; or
/// `None` where the form does not apply (not 16-bit, more than
/// [`SWAP_MAX_M`] rows). The ring is as deep as shared memory holds when
/// every CTA of the grid (up to [`SWAP_RESIDENT_MAX`] an SM) is resident at
/// once, at most the K steps of a split and [`MAX_STAGES`]. K is split only where the tiles fill
/// half of the SMs or fewer (a short K keeps one launch: the split's
/// partials need a second, summing one).
pub fn swapped_schedule(problem: &GemmProblem, sms: u64) -> Option<(Schedule, u32)> {
    if problem.operand_bytes != 2 || problem.m == 0 || problem.m > SWAP_MAX_M {
        return None;
    }
    let sms = sms.max(1);
    let bt0 = u32::try_from(problem.m.next_power_of_two())
        .unwrap_or(u32::MAX)
        .clamp(8, SWAP_MAX_TOKENS);
    let tiles =
        |bw: u32, bt: u32| problem.n.div_ceil(u64::from(bw)) * problem.m.div_ceil(u64::from(bt));
    // The widest tiles whose count is within 10 % of the SMs (as
    // gemm_schedule), token tiles down to half of M's; else the narrowest.
    let narrowest = (bt0 / 2).max(8);
    let mut shapes = [bt0, narrowest]
        .into_iter()
        .flat_map(|bt| SWAP_WEIGHT_ROWS.into_iter().map(move |bw| (bw, bt)));
    let (bw, bt) = shapes
        .find(|&(bw, bt)| tiles(bw, bt) * 10 >= sms * 9)
        .unwrap_or((SWAP_WEIGHT_ROWS[SWAP_WEIGHT_ROWS.len() - 1], narrowest));
    let tiles = |bw: u32| tiles(bw, bt);
    let n_tiles = tiles(bw).max(1);
    if n_tiles > SWAP_MAX_WAVES * sms {
        return None; // the plain tiles fill the SMs many times over too
    }
    let steps = problem.k.div_ceil(64).max(1);
    let splits = if 2 * n_tiles <= sms {
        (sms / n_tiles).min(steps / SPLIT_MIN_STEPS).max(1)
    } else if n_tiles < sms && SWAP_LONG_K_STEPS.is_some_and(|at| steps >= at) {
        sms.div_ceil(n_tiles).min(steps / SPLIT_MIN_STEPS).max(1)
    } else {
        1
    };
    let per_split = steps.div_ceil(splits);
    let per_sm = (n_tiles * splits).div_ceil(sms).min(SWAP_RESIDENT_MAX);
    // A stage: each operand tile as rows of 128 bytes (64 K elements).
    let stage_bytes = u64::from(bw + bt) * 128;
    let fit =
        (max_shared_bytes(Arch::Sm90a) / per_sm).saturating_sub(SWAP_SMEM_SLACK) / stage_bytes;
    let stages = fit.min(per_split).min(u64::from(MAX_STAGES)).max(2);
    let schedule = Schedule::block(&[bw, bt])
        .k(64)
        .warps(4)
        .stages(u32::try_from(stages).unwrap_or(2))
        .arch(Arch::Sm90a)
        .warp_specialize(true);
    Some((schedule, u32::try_from(splits).unwrap_or(u32::MAX)))
}

/// The warp-specialised tile (as a [`WS_TILES`] entry) of 129 to 256 rows
/// when no table tile gives every SM one and it fills half of them: 128x128
/// over 8 cooperative warps. On an H200 (session 12 B1, device time)
/// 256x6144x4096 (96 tiles) ran 30.3 us against 43.0 on 64x128 (192 tiles)
/// and 34.0 on 64x256; cuBLAS 25.2.
pub const WS_MID_M_TILE: [u32; 6] = [128, 128, 8, 4, 0, 0];
/// Warp-specialised schedules on sm_90a (`lower/pipeline_ws.rs`), largest
/// first, as `[bm, bn, warps, stages, wgmma_in_flight, pingpong]` (K steps
/// of 64; `warps` consumer warps per set beside the producer warpgroup;
/// `pingpong` 1: two such sets take turns). On an H200 (B1 of session 10,
/// TFLOP/s): 128x256 cooperative 718 / 713 at 4096^3 (in flight 0 / 1), 661
/// / 641 for `A.T @ B`; 128x128 ping-pong (6 stages, one group in flight)
/// 582 on the LM head 2048x50304x768 against 488 for 128x256 and 457 for
/// 128x128 over 8 cooperative warps, 615 against 583 at 8192^3.
pub const WS_TILES: [[u32; 6]; 3] = [
    [128, 256, 8, 4, 1, 0],
    [128, 128, 4, 6, 1, 1],
    [64, 128, 4, 6, 0, 0],
];
/// Clusters per [`WS_TILES`] entry, as `[ctas, along_n]`: `ctas` 2 runs
/// clusters of two CTAs sharing an operand tile by TMA multicast
/// (`lower/pipeline_ws.rs`), along M (sharing `b`) or with `along_n` 1
/// along N (sharing `a`); 1: none. Taken only when the output has at least
/// [`WS_CLUSTER_MIN_TILES`] tiles. None is on: on an H200 (session 11 B1,
/// TFLOP/s, 1 CTA / clusters along M / along N) 761 / 742 / 746 at 8192^3
/// (128x256), 717 / 661 / 664 at 4096^3, 577 / 533 / 538 on the LM head
/// 2048x50304x768 (ping-pong 128x128): clusters lost 2-15 % everywhere.
pub const WS_CLUSTERS: [[u32; 2]; 3] = [[1, 0], [1, 0], [1, 0]];
/// Tiles from which [`WS_CLUSTERS`] applies: with fewer, a partial last
/// wave of clusters (or a unit half outside the grid) costs more than the
/// L2 traffic multicast saves.
pub const WS_CLUSTER_MIN_TILES: u64 = 1024;
/// Below this K (in elements) a tile's epilogue is a large share of its
/// time (12 K steps at K = 768): the ping-pong 128x128 schedule, whose
/// epilogue runs under the other set's wgmmas, replaces 128x256, or from
/// [`WS_LAYER_MIN_K`] on the layer tile.
pub const WS_SHORT_K: u64 = 2048;
/// cuBLAS's tile of the transformer layers (K = 1024): 256x128 over two
/// consumer warpgroups of 128x128 (two m64 wgmmas each), 4 stages, one
/// group in flight, as a [`WS_TILES`] row. Taken for K in [`WS_LAYER_MIN_K`,
/// [`WS_SHORT_K`]) when its tiles give every SM one. On an H200 (session 13
/// B1, TFLOP/s, the output stored through TMA; ping-pong 128x128 / this /
/// cuBLAS, same run): 8192x3072x1024 593 / 673 / 607, with a bias 568 / 626
/// / 690, 8192x4096x1024 with bias and GELU 523 / 588 / 507 (cuBLASLt's
/// fused epilogue 642). Not above: 794 against 128x256's 810 at 8192^3
/// (cuBLAS 809), 778 against 792 at 4096^3. Clusters of two (along N, the
/// CTAs sharing the 256-row `a` tile, as cuBLAS runs it; or along M) ran
/// 1-4 % below one CTA at every one of these shapes.
pub const WS_LAYER_TILE: [u32; 6] = [256, 128, 8, 4, 1, 0];
/// The shortest K the layer tile was measured faster at (K = 768, the GPT-2
/// LM head, keeps ping-pong 128x128 until measured).
pub const WS_LAYER_MIN_K: u64 = 1024;

/// A warp-specialised, persistent schedule for `problem` on sm_90a with
/// `sms` SMs: the largest of [`WS_TILES`] whose grid still gives every SM an
/// instance (the smallest while it fills half of them), or `None` for
/// smaller outputs (the `cp.async` pipeline, or split K, serve those) and
/// operands that are not 1 (fp8), 2 or 4 (tf32) bytes; K steps of 128 bytes.
/// Only for callers that launch as `LaunchInfo` says (tensor maps, the
/// producer warpgroup's threads, the program's grid as parameters).
pub fn ws_heuristic(problem: &GemmProblem, sms: u64) -> Option<Schedule> {
    // 1-byte operands are fp8, 4-byte ones f32 read as tf32: a stage row is
    // 128 bytes whatever the type, so the stages, and the MMA time of one
    // (K elements per byte times the tensor cores' rate), are the 16-bit ones.
    if ![1, 2, 4].contains(&problem.operand_bytes) {
        return None;
    }
    let tiles =
        |t: &[u32; 6]| problem.m.div_ceil(u64::from(t[0])) * problem.n.div_ceil(u64::from(t[1]));
    let smallest = &WS_TILES[WS_TILES.len() - 1];
    // No tile taller than M needs (M of 64 or less: a 128-row tile would be
    // half TMA zeros, and fewer tiles fill fewer SMs).
    let fits = |t: &&[u32; 6]| {
        u64::from(t[0]) <= problem.m.next_power_of_two().max(64)
            && (problem.k >= WS_SHORT_K || t[5] == 1 || t[0] < 128)
    };
    let t = WS_TILES
        .iter()
        .filter(fits)
        .find(|t| tiles(t) >= sms)
        .or((2 * tiles(smallest) >= sms).then_some(smallest))?;
    // 129 to 256 rows whose 128-row table tiles do not fill the SMs: the mid
    // tile where it fills half of them, before 64-row tiles.
    let mid = 128 < problem.m && problem.m <= 256 && problem.k >= WS_SHORT_K;
    let layer = (WS_LAYER_MIN_K..WS_SHORT_K).contains(&problem.k)
        && problem.m > 128
        && tiles(&WS_LAYER_TILE) >= sms;
    let t = if mid && t[0] < 128 && 2 * tiles(&WS_MID_M_TILE) >= sms {
        &WS_MID_M_TILE
    } else if layer {
        &WS_LAYER_TILE
    } else {
        t
    };
    let &[bm, bn, warps, stages, in_flight, pingpong] = t;
    // Clusters by table row (none for the mid and layer tiles).
    let [ctas, along_n] = match WS_TILES.iter().position(|x| x == t) {
        Some(at) if tiles(t) >= WS_CLUSTER_MIN_TILES => WS_CLUSTERS[at],
        _ => [1, 0],
    };
    Some(
        Schedule::block(&[bm, bn])
            .k(128 / problem.operand_bytes)
            .warps(warps)
            .stages(stages)
            .arch(Arch::Sm90a)
            .warp_specialize(true)
            .persistent(true)
            .wgmma_in_flight(in_flight)
            .pingpong(pingpong == 1)
            .cluster(ctas)
            .cluster_n(along_n == 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(m: u64, n: u64, k: u64, operand_bytes: u32) -> GemmProblem {
        GemmProblem {
            m,
            n,
            k,
            operand_bytes,
        }
    }

    #[test]
    fn gemm_schedules_by_shape_and_arch() {
        let h200 = 132;
        let (s, splits) = gemm_schedule(&p(4096, 4096, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!(
            (s.block.as_slice(), s.k, s.warps, s.stages, splits),
            (&[128, 256][..], 64, 8, 4, 1)
        );
        // 256 rows: 64x128 tiles (128 of them, within 10 % of the SMs), no split
        let (s, splits) = gemm_schedule(&p(256, 4096, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!(
            (s.block.as_slice(), s.stages, splits),
            (&[64, 128][..], 6, 1)
        );
        // decode: 32 tiles of 64x128 on 132 SMs, K split in 4 (one CTA per SM)
        let (s, splits) = gemm_schedule(&p(1, 4096, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!((s.block.as_slice(), splits), (&[64, 128][..], 4));
        // 128 rows: 64 tiles of 64x128, split in 2
        let (s, splits) = gemm_schedule(&p(128, 4096, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!((s.block.as_slice(), splits), (&[64, 128][..], 2));
        let (s, splits) = gemm_schedule(&p(16, 14336, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!((s.block.as_slice(), splits), (&[64, 128][..], 2));
        // 256 rows, a long K: 64 128x128 tiles split in 2 (one wave)
        let (s, splits) = gemm_schedule(&p(256, 4096, 14336, 2), 1, Arch::Sm90a, h200);
        assert_eq!(
            (s.block.as_slice(), s.warps, splits),
            (&[128, 128][..], 8, 2)
        );
        // ... but not with K = 4096
        let (s, splits) = gemm_schedule(&p(256, 6144, 4096, 2), 1, Arch::Sm90a, h200);
        assert_eq!((s.block.as_slice(), splits), (&[64, 128][..], 1));
        // a batch counts as tiles: 8 x 16 128x128 tiles
        let (s, _) = gemm_schedule(&p(512, 512, 512, 2), 8, Arch::Sm90a, h200);
        assert_eq!(s.block, [128, 128]);
        // sm_80 code: mma.sync tiles; f32: FFMA; a short K is not split
        let (s, _) = gemm_schedule(&p(16, 64, 64, 2), 1, Arch::Sm80, h200);
        assert_eq!((s.block.as_slice(), s.k), (&[16, 64][..], 32));
        let (s, splits) = gemm_schedule(&p(5, 24, 40, 4), 1, Arch::Sm90a, 4);
        assert_eq!((s.block.as_slice(), s.k, splits), (&[16, 16][..], 16, 1));
        for t in WGMMA_TILES.iter().chain(&MMA_TILES).chain(&FFMA_TILES) {
            let s = Schedule::block(&t[..2])
                .k(t[2])
                .warps(t[3])
                .stages(t[4])
                .arch(Arch::Sm90a);
            s.validate_gemm(2).unwrap();
        }
    }

    #[test]
    fn swapped_schedules_for_small_m() {
        let h200 = 132;
        let sw = |m, n, k| swapped_schedule(&p(m, n, k, 2), h200).unwrap();
        // the block's projections at M = 128: 16-token tiles, no split
        // (a second launch would cost more than the idle SMs), the ring as
        // deep as the K loop where every CTA is resident at once
        let (s, splits) = sw(128, 768, 768);
        assert_eq!(
            (s.block.as_slice(), splits, s.stages),
            (&[64, 16][..], 1, 12)
        );
        assert!(s.warp_specialize && !s.persistent && s.arch == Arch::Sm90a);
        let (s, splits) = sw(128, 3072, 768);
        assert_eq!((s.block.as_slice(), splits), (&[64, 32][..], 1));
        // two CTAs an SM: each ring half of shared memory
        assert!(s.stages < 12);
        // decode: 8 tokens, K split to fill the SMs, a deep ring
        let (s, splits) = sw(1, 4096, 4096);
        assert_eq!((s.block.as_slice(), splits), (&[64, 8][..], 2));
        assert_eq!(s.stages, MAX_STAGES);
        for (m, n, k) in [
            (1, 4096, 4096),
            (16, 14336, 4096),
            (128, 768, 3072),
            (16, 50304, 768),
        ] {
            let (s, splits) = sw(m, n, k);
            s.validate_gemm(2).unwrap();
            let resident = (n.div_ceil(u64::from(s.block[0]))
                * m.div_ceil(u64::from(s.block[1]))
                * u64::from(splits))
            .div_ceil(h200)
            .min(SWAP_RESIDENT_MAX);
            let ring = u64::from(s.stages) * u64::from(s.block[0] + s.block[1]) * 128;
            assert!(resident * (ring + SWAP_SMEM_SLACK) <= max_shared_bytes(Arch::Sm90a));
        }
        // not for 8- or 32-bit operands, nor above SWAP_MAX_M rows
        assert!(swapped_schedule(&p(16, 4096, 4096, 1), h200).is_none());
        assert!(swapped_schedule(&p(SWAP_MAX_M + 1, 4096, 4096, 2), h200).is_none());
        assert!(swapped_schedule(&p(0, 4096, 4096, 2), h200).is_none());
        assert!(swapped_schedule(&p(64, 50304, 768, 2), h200).is_none());
    }

    #[test]
    fn gemv_schedules_split_k_to_fill_the_sms() {
        let h200 = 132;
        // (N = 1024: too few N tiles for the unsplit slab)
        let (s, splits) = gemv_schedule(&p(1, 1024, 4096, 2), Arch::Sm90a, h200).unwrap();
        let (bk, bn) = (u64::from(s.k), u64::from(s.block[1]));
        assert_eq!(s.block[0], 1);
        s.validate().unwrap();
        // enough instances, none empty, each split GEMV_MIN_STEPS steps or more
        let steps = 4096u64.div_ceil(bk);
        let per = steps.div_ceil(u64::from(splits));
        assert!(1024u64.div_ceil(bn) * u64::from(splits) >= GEMV_CTAS_PER_SM * h200);
        assert!(per >= GEMV_MIN_STEPS && (u64::from(splits) - 1) * per < steps);
        // a short K is not split below GEMV_MIN_STEPS steps
        let (_, short) = gemv_schedule(&p(1, 64, 16, 2), Arch::Sm90a, h200).unwrap();
        assert_eq!(short, 1);
        // rows past GEMV_MAX_M go to the tensor-core tiles
        assert!(gemv_schedule(&p(GEMV_MAX_M + 1, 4096, 4096, 2), Arch::Sm90a, h200).is_none());
        assert!(gemv_schedule(&p(0, 4096, 4096, 2), Arch::Sm90a, h200).is_none());
        // the unsplit slab where its N tiles fill the SMs, the split one where not
        if let Some(t) = GEMV_UNSPLIT_TILE {
            let wide = 4096u64.div_ceil(u64::from(t[1])) * 10 >= h200 * 9;
            let (s, splits) = gemv_schedule(&p(1, 4096, 4096, 2), Arch::Sm90a, h200).unwrap();
            assert_eq!((splits == 1, s.k == t[0]), (wide, wide));
            s.validate().unwrap();
            let (_, narrow) = gemv_schedule(&p(1, 256, 4096, 2), Arch::Sm90a, h200).unwrap();
            assert!(narrow > 1);
        }
        for t in GEMV_UNSPLIT_TILE.iter().chain([&GEMV_TILE]) {
            let s = Schedule::block(&[1, t[1]]).k(t[0]).warps(t[2]).stages(t[3]);
            s.validate().unwrap();
        }
    }

    #[test]
    fn ws_heuristic_by_shape() {
        let p = |m, n| GemmProblem {
            m,
            n,
            k: 4096,
            operand_bytes: 2,
        };
        let s = ws_heuristic(&p(4096, 4096), 132).unwrap();
        assert_eq!((s.block.as_slice(), s.warps), (&[128, 256][..], 8));
        assert!(!s.pingpong && s.wgmma_in_flight == 1);
        // a short K (the GPT-2 LM head): ping-pong 128x128, 4 warps a set
        let lm = ws_heuristic(
            &GemmProblem {
                m: 2048,
                n: 50304,
                k: 768,
                operand_bytes: 2,
            },
            132,
        )
        .unwrap();
        assert_eq!(
            (lm.block.as_slice(), lm.warps, lm.pingpong),
            (&[128, 128][..], 4, true)
        );
        assert!(s.warp_specialize && s.persistent && s.arch == Arch::Sm90a);
        assert!(ws_heuristic(&p(1024, 4096), 132).unwrap().pingpong);
        // K = 1024 (the layers' QKV, MLP up): 256x128 over two warpgroups
        let k1024 = |m, n| GemmProblem {
            m,
            n,
            k: 1024,
            operand_bytes: 2,
        };
        let qkv = ws_heuristic(&k1024(8192, 3072), 132).unwrap();
        assert_eq!(
            (qkv.block.as_slice(), qkv.warps, qkv.stages, qkv.pingpong),
            (&[256, 128][..], 8, 4, false)
        );
        assert_eq!((qkv.wgmma_in_flight, qkv.cluster), (1, 1));
        // ... where its tiles fill the SMs and M is above 128; else ping-pong
        assert!(ws_heuristic(&k1024(1024, 2304), 132).unwrap().pingpong);
        assert!(ws_heuristic(&k1024(128, 65536), 132).unwrap().block[0] < 256);
        assert_eq!(ws_heuristic(&p(256, 4096), 132).unwrap().block, [64, 128]);
        // 256 rows whose table tiles leave SMs idle: 96 128x128 tiles, 8 warps
        let mid = ws_heuristic(&p(256, 6144), 132).unwrap();
        assert_eq!(
            (mid.block.as_slice(), mid.warps, mid.pingpong),
            (&[128, 128][..], 8, false)
        );
        // M of 64 or less keeps 64-row tiles however wide the output
        assert_eq!(ws_heuristic(&p(16, 50304), 132).unwrap().block, [64, 128]);
        assert!(ws_heuristic(&p(16, 4096), 132).is_none());
        // fp8 (1 byte) and tf32 (4): the same tiles, K steps of 128 bytes.
        for (bytes, k) in [(1, 128), (4, 32)] {
            let q = GemmProblem {
                operand_bytes: bytes,
                ..p(4096, 4096)
            };
            let s = ws_heuristic(&q, 132).unwrap();
            assert_eq!((s.block.as_slice(), s.k), (&[128, 256][..], k));
        }
        assert!(ws_heuristic(
            &GemmProblem {
                operand_bytes: 8,
                ..p(4096, 4096)
            },
            132
        )
        .is_none());
        for t in WS_TILES {
            let s = Schedule::block(&t[..2])
                .k(64)
                .warps(t[2])
                .stages(t[3])
                .arch(Arch::Sm90a)
                .warp_specialize(true)
                .persistent(true)
                .wgmma_in_flight(t[4])
                .pingpong(t[5] == 1);
            s.validate_gemm(2).unwrap();
        }
        for t in [WS_LAYER_TILE, WS_MID_M_TILE] {
            let s = Schedule::block(&t[..2])
                .k(64)
                .warps(t[2])
                .stages(t[3])
                .arch(Arch::Sm90a)
                .warp_specialize(true)
                .persistent(true)
                .wgmma_in_flight(t[4]);
            s.validate_gemm(2).unwrap();
        }
        for (t, c) in WS_TILES.iter().zip(WS_CLUSTERS) {
            assert!([1, 2].contains(&c[0]) && c[1] <= 1, "{t:?}: {c:?}");
        }
    }

    #[test]
    fn heuristic_schedules_validate() {
        for (m, n, k) in [(17, 33, 9), (4096, 4096, 4096), (256, 256, 64), (1, 1, 1)] {
            for arch in [Arch::Sm70, Arch::Sm80, Arch::Sm90] {
                let p = GemmProblem {
                    m,
                    n,
                    k,
                    operand_bytes: 4,
                };
                let s = heuristic(&p, arch);
                s.validate_gemm(4).unwrap();
                assert_eq!(s.arch, arch);
            }
        }
    }
}
