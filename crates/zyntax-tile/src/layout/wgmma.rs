//! The accumulator layout of `wgmma.mma_async` (sm_90a): [`Mma`] version 3.
//!
//! A `wgmma.m64nNk16` with an f32 accumulator is issued by a warpgroup (4
//! warps) and leaves a `vec<f32, N / 2>` in each thread. Element `i` of the
//! vector of warp `w` of the warpgroup, lane `4g + q`, is row `16w + g + 8 *
//! (i / 2 % 2)` and column `8 * (i / 4) + 2q + i % 2` of the 64 x N result
//! (PTX ISA, "wgmma .m64nNk16 register fragment layout for D"). That is the
//! `mma.sync` accumulator layout of each warp, continued along N: so the
//! wgmma accumulator of a `[M, N]` tile over `W` warps is `Mma { version: 3,
//! warps_per_cta: [W, 1], instr_shape: [16, 8] }`, whose dims map exactly as
//! version 2's with all warps along M. Warp `w` holds rows `16w + 16W r`
//! (repetition `r`); warpgroup `w / 4` issues one `wgmma` per repetition, on
//! rows `64 (w / 4) + 16W r` .. `+ 64` of the tile.

use super::Mma;

impl Mma {
    /// The wgmma accumulator layout over `warps` warps (a multiple of 4,
    /// all along M).
    pub fn wgmma(warps: u32) -> Mma {
        Mma {
            version: 3,
            warps_per_cta: [warps, 1],
            instr_shape: [16, 8],
        }
    }

    /// Whether this is the wgmma accumulator layout (version 3).
    pub fn is_wgmma(&self) -> bool {
        self.version == 3
    }
}

/// The register index along each dim (`[row, column]`, as
/// [`Layout::reg_index`](super::Layout::reg_index) takes them) of element `i`
/// of the accumulator vector of repetition `rep` along M.
pub fn wgmma_reg_dims(rep: u32, i: u32) -> [u32; 2] {
    [2 * rep + i / 2 % 2, 2 * (i / 4) + i % 2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Layout;

    /// Every element of the wgmma vectors lands where PTX puts it, and the
    /// vectors of all repetitions cover the tile's registers exactly once.
    #[test]
    fn wgmma_vector_matches_ptx_fragment() {
        for (warps, m, n) in [(4, 64, 64), (4, 128, 256), (8, 128, 128), (8, 256, 64)] {
            let layout = Layout::Mma(Mma::wgmma(warps));
            let shape = [m, n];
            let reps = m / (16 * warps);
            let mut seen = vec![false; layout.num_regs(&shape) as usize];
            for thread in 0..warps * 32 {
                let (w, lane) = (thread / 32, thread % 32);
                let (g, q) = (lane / 4, lane % 4);
                for rep in 0..reps {
                    for i in 0..n / 2 {
                        let reg = layout.reg_index(&shape, &wgmma_reg_dims(rep, i));
                        let (coords, owned) = layout.coords(&shape, thread, reg);
                        assert!(owned);
                        let row =
                            64 * (w / 4) + 16 * warps * rep + 16 * (w % 4) + g + 8 * (i / 2 % 2);
                        let col = 8 * (i / 4) + 2 * q + i % 2;
                        assert_eq!(
                            coords,
                            vec![row, col],
                            "warps {warps} {m}x{n} t{thread} r{rep} i{i}"
                        );
                        if thread == 0 {
                            assert!(!seen[reg as usize]);
                            seen[reg as usize] = true;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|s| *s));
        }
    }
}
