//! zyntax-llvm: HIR → LLVM IR lowering and the NVPTX backend.
//!
//! (Phase 1: target machines and ptxas; the HIR lowering follows.)

pub mod error;
pub mod nvptx;

pub use error::{CompileError, CompileResult};
