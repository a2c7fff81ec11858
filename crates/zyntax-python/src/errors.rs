//! Python exception hierarchy and the panic guard.
//!
//! Every exception is declared here, in Rust, so that Rust code can raise the
//! precise subclass; `python/zyntax/errors.py` re-exports them.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

create_exception!(
    zyntax,
    ZyntaxError,
    PyException,
    "Base class of every error raised by zyntax."
);
create_exception!(
    zyntax,
    VerifyError,
    ZyntaxError,
    "The HIR verifier rejected a module."
);
create_exception!(
    zyntax,
    ParseError,
    ZyntaxError,
    "A .zir text could not be parsed."
);
create_exception!(
    zyntax,
    CompileError,
    ZyntaxError,
    "Lowering or code generation failed."
);
create_exception!(
    zyntax,
    CudaError,
    ZyntaxError,
    "The CUDA driver reported an error (or no driver/GPU is present)."
);
create_exception!(
    zyntax,
    LaunchError,
    ZyntaxError,
    "A kernel launch was rejected (bad grid, arguments or resources)."
);
create_exception!(
    zyntax,
    TrapError,
    ZyntaxError,
    "The reference interpreter stopped a program fault (out-of-bounds access, data race, ...)."
);
create_exception!(
    zyntax,
    BuildError,
    ZyntaxError,
    "The HIR builder was misused (unknown name, wrong operand, closed builder, ...)."
);
create_exception!(
    zyntax,
    ArgumentError,
    ZyntaxError,
    "A value passed from Python is of the wrong type or out of range (the message says which)."
);
create_exception!(
    zyntax,
    InternalError,
    ZyntaxError,
    "A bug in zyntax (an internal invariant failed); please report it."
);

/// Runs `f`, turning a Rust panic into `InternalError`.
///
/// PyO3 would raise `PanicException`, which derives from `BaseException` and
/// so escapes `except Exception`; a zyntax bug must not look like Ctrl-C.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".to_owned());
            Err(InternalError::new_err(format!(
                "internal error (Rust panic): {msg}; please report this as a zyntax bug"
            )))
        }
    }
}
