//! Typed errors of the tile layer. Every check on user input reports one of
//! these, naming the op and the operand (or the schedule field) at fault;
//! nothing in this crate panics on user input.

use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum TileError {
    /// Two operands (or an operand and what the op needs) disagree in shape.
    #[error("{op}: operand `{operand}` has shape {found:?}, expected {expected}")]
    ShapeMismatch {
        op: &'static str,
        operand: &'static str,
        expected: String,
        found: Vec<u32>,
    },
    /// An element type (or a pair of them) the op does not support.
    #[error("{op}: operand `{operand}` has unsupported element type {found}: {why}")]
    UnsupportedDtype {
        op: &'static str,
        operand: &'static str,
        found: String,
        why: String,
    },
    /// An axis or dimension index out of range.
    #[error("{op}: axis {axis} is out of range for rank {rank}")]
    BadAxis {
        op: &'static str,
        axis: usize,
        rank: usize,
    },
    /// A schedule field with a value the lowering cannot use.
    #[error("schedule field `{field}`: {message}")]
    BadSchedule {
        field: &'static str,
        message: String,
    },
    /// A schedule whose tiles do not fit shared memory or registers.
    #[error("schedule does not fit (`{field}`): {message}")]
    DoesNotFit {
        field: &'static str,
        message: String,
    },
    /// A scalar, view or tile handle used with the wrong kind of operand, or a
    /// handle from another program.
    #[error("{op}: operand `{operand}`: {message}")]
    BadOperand {
        op: &'static str,
        operand: &'static str,
        message: String,
    },
    /// The HIR builder or verifier rejected the lowered kernel: a bug in this
    /// crate, reported instead of panicking.
    #[error("internal: lowering produced invalid HIR: {0}")]
    Internal(String),
}

impl From<zyntax_hir::BuildError> for TileError {
    fn from(e: zyntax_hir::BuildError) -> Self {
        TileError::Internal(e.to_string())
    }
}

pub type TileResult<T> = Result<T, TileError>;
