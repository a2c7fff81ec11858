//! # zyntax-tile
//!
//! The tile layer: a kernel written over tiles (values with a static shape
//! and an element type, held together by all threads of a CTA) with a
//! schedule kept apart from the algorithm, lowered to HIR that the verifier,
//! the interpreter and both backends already handle. See `docs/tile.md`.
//!
//! - [`ir`]: the tile program (ops in SSA form over tile and scalar ids).
//! - [`builder`]: [`TileBuilder`], the Rust API a front-end writes programs with
//!   (parameters, scalars and memory ops there; tile ops in `builder/ops.rs`).
//! - [`layout`]: distributed layouts (blocked, `mma.sync` accumulator and
//!   operand fragments) and the shared staging layout.
//! - [`infer`]: layout inference (the program names no layout).
//! - [`schedule`]: [`Schedule`], its validation and a heuristic.
//! - `lower`: tile program → one HIR kernel ([`TileKernel`]).
//! - [`error`]: [`TileError`], typed and naming the op and operand.

pub mod builder;
pub mod error;
pub mod infer;
pub mod ir;
pub mod layout;
mod lower;
pub mod schedule;

pub use builder::TileBuilder;
pub use error::{TileError, TileResult};
pub use ir::{Const, DotInputs, MapOp, ReduceOp, ScalarId, TileId, TileProgram, Value, ViewId};
pub use layout::{Blocked, DotOperand, Layout, Mma, SharedLayout};
pub use lower::{KernelParam, LaunchInfo, TensorMapParam, TileKernel, MAX_SCRATCH_BYTES};
pub use schedule::{heuristic, swapped_schedule, ws_heuristic, DotPath, GemmProblem, Schedule};
