"""Exception hierarchy of zyntax.

All classes are declared in Rust (``zyntax._native``) so that Rust code raises
the precise subclass; this module only re-exports them::

    ZyntaxError(Exception)
    ├── VerifyError     the HIR verifier rejected a module
    ├── ParseError      a .zir text could not be parsed
    ├── CompileError    lowering / code generation failed
    ├── CudaError       the CUDA driver failed, or no driver/GPU is present
    ├── LaunchError     a kernel launch was rejected
    ├── TrapError       the interpreter stopped a program fault (out of bounds, race, ...)
    ├── BuildError      the HIR builder was misused (unknown name, closed builder, ...)
    ├── ArgumentError   a value passed from Python has the wrong type or is out of range
    └── InternalError   a zyntax bug (never a user error)
"""

from zyntax._native import (
    ArgumentError,
    BuildError,
    CompileError,
    CudaError,
    InternalError,
    LaunchError,
    ParseError,
    TrapError,
    VerifyError,
    ZyntaxError,
)

__all__ = [
    "ArgumentError",
    "BuildError",
    "CompileError",
    "CudaError",
    "InternalError",
    "LaunchError",
    "ParseError",
    "TrapError",
    "VerifyError",
    "ZyntaxError",
]
