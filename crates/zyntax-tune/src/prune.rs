//! Occupancy from a ptxas resource report, and pruning configs not worth measuring.

/// What bounds occupancy on one SM (the defaults are an H100's / H200's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub registers_per_sm: u32,
    pub threads_per_block: u32,
    pub threads_per_sm: u32,
    pub blocks_per_sm: u32,
    pub shared_per_sm: u32,
    pub shared_per_block: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            registers_per_sm: 65536,
            threads_per_block: 1024,
            threads_per_sm: 2048,
            blocks_per_sm: 32,
            shared_per_sm: 233472,
            shared_per_block: 232448,
        }
    }
}

/// A compiled config's resources per thread / per block (ptxas' report) and launch shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub registers: u32,
    /// Static shared memory per block.
    pub shared_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// Threads per block of the launch.
    pub threads: u32,
    /// Dynamic shared memory per block of the launch.
    pub dynamic_shared: u32,
}

/// Fraction of the SM's threads resident with `r`.
pub fn occupancy(r: &Resources, lim: &Limits) -> f64 {
    let warps = u64::from(r.threads.div_ceil(32));
    // Registers are allocated per warp in units of 256.
    let per_warp = (u64::from(r.registers) * 32).div_ceil(256) * 256;
    let blocks_lim = u64::from(lim.blocks_per_sm);
    let by_regs = if per_warp > 0 && warps > 0 {
        u64::from(lim.registers_per_sm) / (per_warp * warps)
    } else {
        blocks_lim
    };
    let by_threads = if warps > 0 {
        u64::from(lim.threads_per_sm) / (warps * 32)
    } else {
        blocks_lim
    };
    let smem = u64::from(r.dynamic_shared) + u64::from(r.shared_bytes);
    let by_smem = u64::from(lim.shared_per_sm)
        .checked_div(smem)
        .unwrap_or(blocks_lim);
    let blocks = by_regs.min(by_threads).min(by_smem).min(blocks_lim);
    (blocks * warps * 32) as f64 / f64::from(lim.threads_per_sm)
}

/// Splits `candidates` (name, resources) into those worth measuring (in the
/// given order) and those pruned, with why: over the device's thread or shared
/// memory limits, unable to launch for registers, spilling while another
/// config does not, or under `min_occupancy_ratio` of the best occupancy.
pub fn prune(
    candidates: &[(String, Resources)],
    lim: &Limits,
    min_occupancy_ratio: f64,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut pruned: Vec<(String, String)> = Vec::new();
    let mut occ: Vec<(&str, f64, u64)> = Vec::new();
    for (n, r) in candidates {
        if r.threads > lim.threads_per_block {
            let why = format!(
                "{} threads per block (device limit {})",
                r.threads, lim.threads_per_block
            );
            pruned.push((n.clone(), why));
            continue;
        }
        let smem = u64::from(r.dynamic_shared) + u64::from(r.shared_bytes);
        if smem > u64::from(lim.shared_per_block) {
            let why = format!(
                "{smem} bytes of shared memory (device limit {})",
                lim.shared_per_block
            );
            pruned.push((n.clone(), why));
            continue;
        }
        let o = occupancy(r, lim);
        if o <= 0.0 {
            let why = format!(
                "cannot launch: {} registers x {} threads",
                r.registers, r.threads
            );
            pruned.push((n.clone(), why));
            continue;
        }
        let spill = u64::from(r.spill_store_bytes) + u64::from(r.spill_load_bytes);
        occ.push((n, o, spill));
    }
    if occ.iter().any(|(_, _, s)| *s == 0) {
        occ.retain(|(n, _, s)| {
            if *s > 0 {
                pruned.push((
                    n.to_string(),
                    format!("spills {s} bytes while other configs do not"),
                ));
            }
            *s == 0
        });
    }
    let best = occ.iter().map(|(_, o, _)| *o).fold(0.0, f64::max);
    occ.retain(|(n, o, _)| {
        let keep = *o >= best * min_occupancy_ratio;
        if !keep {
            pruned.push((
                n.to_string(),
                format!(
                    "occupancy {o:.2} under {} x the best ({best:.2})",
                    crate::pyjson::float_repr(min_occupancy_ratio)
                ),
            ));
        }
        keep
    });
    let keep = occ.into_iter().map(|(n, _, _)| n.to_string()).collect();
    (keep, pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(registers: u32, threads: u32) -> Resources {
        Resources {
            registers,
            threads,
            ..Resources::default()
        }
    }

    #[test]
    fn occupancy_matches_the_cuda_formula() {
        let h = Limits::default();
        assert_eq!(occupancy(&res(32, 256), &h), 1.0);
        assert_eq!(occupancy(&res(64, 256), &h), 0.5);
        // 40 registers round up to 1280 per warp: 65536 / (1280 * 8) = 6 blocks.
        assert_eq!(occupancy(&res(40, 256), &h), 6.0 * 256.0 / 2048.0);
        let smem = Resources {
            shared_bytes: 100 << 10,
            ..res(16, 128)
        };
        assert_eq!(occupancy(&smem, &h), 2.0 * 128.0 / 2048.0);
        assert_eq!(occupancy(&res(255, 1024), &h), 0.0);
    }

    #[test]
    fn prune_keeps_reasons() {
        let h = Limits::default();
        let spilling = Resources {
            spill_store_bytes: 64,
            spill_load_bytes: 64,
            ..res(32, 256)
        };
        let cands = vec![
            ("ok".to_string(), res(32, 256)),
            ("huge".to_string(), res(32, 2048)),
            ("regs".to_string(), res(255, 1024)),
            ("spill".to_string(), spilling),
            ("low".to_string(), res(255, 128)), // 2 blocks of 4 warps: 1/8 of the best
            (
                "smem".to_string(),
                Resources {
                    dynamic_shared: h.shared_per_block,
                    shared_bytes: 1,
                    ..res(32, 256)
                },
            ),
        ];
        let (keep, pruned) = prune(&cands, &h, 0.25);
        assert_eq!(keep, vec!["ok"]);
        let why = |n: &str| pruned.iter().find(|(m, _)| m == n).unwrap().1.clone();
        assert!(why("huge").contains("threads per block"));
        assert!(why("regs").starts_with("cannot launch"));
        assert!(why("spill").contains("spills 128 bytes"));
        assert!(why("low").starts_with("occupancy 0.12 under 0.25"));
        assert!(why("smem").contains("shared memory"));
        // Every config spills: none is pruned for it.
        let (keep, _) = prune(&[("s".to_string(), spilling)], &h, 0.25);
        assert_eq!(keep, vec!["s"]);
    }
}
