//! Schedules: how a tile program is cut up and run, kept apart from what it
//! computes. A program reads its tile shapes from its schedule, so one
//! algorithm serves every schedule a heuristic or the autotuner picks.

use crate::error::{TileError, TileResult};
use zyntax_hir::arch::max_shared_bytes;
use zyntax_hir::Arch;

/// Registers a thread may use (the PTX limit).
pub const MAX_REGISTERS: u32 = 255;

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
    /// CTAs per thread-block cluster. Recorded and validated; not lowered yet.
    pub cluster: u32,
    /// The arch whose limits the schedule is checked against.
    pub arch: Arch,
    /// How `dot` is computed: FFMA, tensor cores (`mma.sync`), or the best
    /// the arch and the operand types allow.
    pub dot_path: DotPath,
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
            arch: Arch::Sm80,
            dot_path: DotPath::Auto,
        }
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
        if !(1..=8).contains(&self.stages) {
            return bad("stages", format!("{} is not in 1..=8", self.stages));
        }
        if ![1, 2, 4, 8].contains(&self.cluster) {
            return bad("cluster", format!("{} is not 1, 2, 4 or 8", self.cluster));
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

#[cfg(test)]
mod tests {
    use super::*;

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
