//! The NVPTX backend: target machines per arch, kernel annotations, PTX
//! emission and `ptxas` validation.

pub mod annotations;
pub mod ptxas;
pub mod target;

pub use ptxas::{KernelResources, Ptxas, PtxasError, PtxasOutput, PtxasRelease};
pub use target::{emit_assembly, initialize, PtxTarget, TRIPLE};
