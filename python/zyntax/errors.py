"""Exception hierarchy of zyntax.

All classes are declared in Rust (``zyntax._native``) so that Rust code raises
the precise subclass; this module only re-exports them::

    ZyntaxError(Exception)
    ├── VerifyError     the HIR verifier rejected a module
    ├── ParseError      a .zir text could not be parsed
    ├── CompileError    lowering / code generation failed
    ├── CudaError       the CUDA driver failed, or no driver/GPU is present
    ├── LaunchError     a kernel launch was rejected
    └── InternalError   a zyntax bug (never a user error)
"""

from zyntax._native import (
    CompileError,
    CudaError,
    InternalError,
    LaunchError,
    ParseError,
    VerifyError,
    ZyntaxError,
)

__all__ = [
    "CompileError",
    "CudaError",
    "InternalError",
    "LaunchError",
    "ParseError",
    "VerifyError",
    "ZyntaxError",
]
