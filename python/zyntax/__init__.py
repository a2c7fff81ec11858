"""zyntax: an ahead-of-time GPU compiler backend.

Build HIR from Python with :mod:`zyntax.hir`, verify it, print it as ``.zir``
text, and (where the backend is compiled in) lower it to PTX or native code.
"""

from zyntax import hir
from zyntax._native import __version__, build_info
from zyntax.errors import (
    BuildError,
    CompileError,
    CudaError,
    InternalError,
    LaunchError,
    ParseError,
    VerifyError,
    ZyntaxError,
)

__all__ = [
    "BuildError",
    "CompileError",
    "CudaError",
    "InternalError",
    "LaunchError",
    "ParseError",
    "VerifyError",
    "ZyntaxError",
    "__version__",
    "build_info",
    "hir",
]
