//! The instruction table `OPS`: one row per HIR instruction, in the order of
//! the docs, concatenated at compile time from the families' files (each
//! holds its rows and the shorthand macros that build them):
//!
//! - `scalar.rs`: constants, arithmetic (its `BinOp` / `UnOp` are declared
//!   by their rows), comparisons, conversions, approximate math, bit ops,
//!   packed conversions;
//! - `memory.rs`: memory, the scoped memory model, module globals;
//! - `threads.rs`: indices, synchronization, atomics, warp collectives;
//! - `mma.rs`: wmma, warp MMA, warpgroup MMA;
//! - `hopper.rs`: `cp.async`, mbarriers, TMA and bulk copies, clusters, PDL;
//! - `control.rs`: calls and control flow.

use super::*;
use super::{control, hopper, memory, mma, scalar, threads};

/// Every instruction, in the order of the docs: the parts, concatenated.
pub static OPS: &[OpDef] = &ALL;

const PARTS: &[&[OpDef]] = &[
    scalar::CONST,
    scalar::BINARY,
    scalar::UNARY,
    scalar::SCALAR,
    memory::MEMORY,
    threads::THREADS,
    mma::WMMA,
    hopper::ASYNC_COPY,
    mma::WARP_MMA,
    scalar::APPROX,
    control::CONTROL,
    scalar::BITS,
    memory::MEMORY_MODEL,
    threads::WARP_REDUX,
    mma::WARPGROUP_MMA,
    hopper::TMA_BULK,
    threads::NAMED_BARRIER,
    scalar::PACK,
    hopper::CLUSTERS,
    hopper::PDL,
    memory::GLOBALS,
];
static ALL: [OpDef; total(PARTS)] = concat(PARTS);

/// The number of rows in `parts`.
const fn total(parts: &[&[OpDef]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// The rows of `parts`, in order, as one array: built at compile time, so
/// `OPS` stays a plain static slice however many files hold its rows.
const fn concat<const N: usize>(parts: &[&[OpDef]]) -> [OpDef; N] {
    let mut out = [row("", "", "", NONE, 0, ""); N];
    let (mut k, mut i) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
}
