//! Errors of the LLVM backend.
//!
//! Two kinds, as in GPUCompiler.jl: the user's fault (the module did not pass
//! zyntax's verifier, an unsupported option, `ptxas` rejected or is missing),
//! and internal compiler errors (LLVM's verifier rejected IR we built, an
//! inkwell builder call failed). An internal error always means a bug in
//! zyntax: a module the HIR verifier accepts must lower cleanly.

#[cfg(feature = "compute")]
use crate::nvptx::ptxas::PtxasError;

/// Result alias of this crate.
pub type CompileResult<T> = Result<T, CompileError>;

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The HIR verifier rejected the module (the user's fault).
    #[error(transparent)]
    Verify(#[from] zyntax_hir::VerifyError),

    /// A request the backend cannot honour (e.g. an arch the module does not allow).
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// LLVM's module verifier rejected the IR we generated. Always a zyntax bug.
    #[error(
        "internal compiler error: LLVM rejected the generated IR of module `{module}`: {message}\n\
         (this is a bug in zyntax; please report it with the .zir input)"
    )]
    LlvmVerify { module: String, message: String },

    /// Any other LLVM failure (builder, target machine, pass pipeline, emission).
    /// Always a zyntax bug.
    #[error(
        "internal compiler error in {stage}: {message}\n\
         (this is a bug in zyntax; please report it with the .zir input)"
    )]
    Internal {
        stage: &'static str,
        message: String,
    },

    /// `ptxas` validation failed or could not run.
    #[cfg(feature = "compute")]
    #[error(transparent)]
    Ptxas(#[from] PtxasError),
}

impl CompileError {
    pub(crate) fn internal(stage: &'static str, message: impl Into<String>) -> CompileError {
        CompileError::Internal {
            stage,
            message: message.into(),
        }
    }

    /// Whether the error is a zyntax bug rather than a problem with the input.
    pub fn is_internal(&self) -> bool {
        matches!(
            self,
            CompileError::LlvmVerify { .. } | CompileError::Internal { .. }
        )
    }
}

impl From<inkwell::builder::BuilderError> for CompileError {
    fn from(e: inkwell::builder::BuilderError) -> CompileError {
        CompileError::internal("IR builder", e.to_string())
    }
}
