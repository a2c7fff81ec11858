//! # zyntax
//!
//! The crate a Rust front-end embeds: one dependency re-exporting what it
//! needs to build HIR, verify it, run it on the reference interpreter, compile
//! it for the CPU and, with the `compute` feature, compile it to PTX and run it
//! on a CUDA device.
//!
//! | path | crate | feature |
//! | --- | --- | --- |
//! | [`hir`] (and the common items at the root) | `zyntax-hir`: types, builder, verifier, `.zir` | always |
//! | [`interp`] | `zyntax-interp`: the reference interpreter | always |
//! | [`opt`] | `zyntax-opt`: HIR passes; `opt::nest_tile`: loop nests recognised as maps/contractions and lowered to tile programs | always |
//! | [`cpu`] | `zyntax-llvm`'s CPU backend | always |
//! | [`tune`] | `zyntax-tune`: autotuning (configs, pruning, signed records, the search loop over your launcher) | always |
//! | `ptx` | `zyntax-llvm`'s NVPTX backend: [`compile_ptx`](ptx::compile_ptx), `ptxas` | `compute` |
//! | `cuda` | `zyntax-cuda`: devices, modules, launches, memory | `compute` |
//!
//! `examples/tiny_dsl.rs` is a complete front-end for a small language on top
//! of this crate; `docs/embedding.md` is the embedder's guide.

pub use zyntax_hir as hir;
pub use zyntax_interp as interp;
pub use zyntax_llvm::host as cpu;
pub use zyntax_opt as opt;
pub use zyntax_tune as tune;

pub use zyntax_hir::{
    parse_module, parse_module_named, print_module, verify_module, AddrSpace, Arch, BinOp,
    BuildError, CmpOp, Dim, Function, FunctionBuilder, FunctionKind, Loc, Module, ParseError,
    ScalarType, Type, ValueId, VerifyError,
};
pub use zyntax_llvm::{CompileError, CompileResult};

/// The CUDA driver runtime (crate `zyntax-cuda`).
#[cfg(feature = "compute")]
pub use zyntax_cuda as cuda;

/// The NVPTX backend: HIR to PTX through LLVM, and `ptxas`.
#[cfg(feature = "compute")]
pub mod ptx {
    pub use zyntax_llvm::{
        compile_and_validate, compile_ptx, emit_llvm, CompileOutput, KernelResources, Options,
        PtxTarget, Ptxas, PtxasError, PtxasOutput, Timings,
    };
}

/// Whether this build has the GPU half (the `compute` feature).
pub const HAS_COMPUTE: bool = cfg!(feature = "compute");

/// Whether kernels can run on a GPU here: the build has `compute`, a CUDA
/// driver loads and it reports at least one device. Never fails or panics.
pub fn gpu_available() -> bool {
    #[cfg(feature = "compute")]
    {
        zyntax_cuda::is_available()
    }
    #[cfg(not(feature = "compute"))]
    {
        false
    }
}

#[cfg(all(test, not(feature = "compute")))]
mod tests {
    /// Without `compute` nothing runs on a GPU, whatever the machine has.
    #[test]
    fn no_gpu_without_compute() {
        assert!(!super::gpu_available());
    }
}
