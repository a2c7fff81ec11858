"""zyntax: an ahead-of-time GPU compiler backend.

Build HIR from Python with :mod:`zyntax.hir`, verify it, print it as ``.zir``
text, and (where the backend is compiled in) lower it to PTX or native code.
"""

from zyntax import cpu, hir, interp
from zyntax._native import __version__, build_info
from zyntax.compiler import compile, compile_ptx, validate_ptx
from zyntax.errors import (
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
from zyntax.profiling import profile

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
    "__version__",
    "build_info",
    "compile",
    "compile_ptx",
    "cpu",
    "gpu_available",
    "hir",
    "interp",
    "profile",
    "validate_ptx",
]

# The @zyntax.kernel front-end (python/zyntax/frontend/, python/zyntax/lang.py).
from zyntax import _providers, lang
from zyntax.bundle import load_bundle as _load_bundle
from zyntax.frontend import KernelError, func, kernel
from zyntax.frontend.pipeline import ptx_for_module as _ptx_for_module
from zyntax.lang import (
    Array,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from zyntax.tuning import Config, autotune

__all__ += [
    "Array",
    "Config",
    "KernelError",
    "autotune",
    "bf16",
    "bool_",
    "f16",
    "f32",
    "f64",
    "func",
    "i8",
    "i16",
    "i32",
    "i64",
    "kernel",
    "lang",
    "u8",
    "u16",
    "u32",
    "u64",
]

# What the runtime (zyntax.cuda) calls but may not import: the layers above it
# provide it here, before any user code runs (zyntax/_providers.py).
_providers.compile_hir = _ptx_for_module
_providers.load_bundle = _load_bundle


def gpu_available() -> bool:
    """Whether kernels can run on a GPU here: the extension was built with the
    ``compute`` feature (``build_info()["compute"]``), a CUDA driver loads and
    it reports at least one device. A build without CUDA, a missing driver or
    no device give False; any other failure (a driver that fails to
    initialise, ...) is raised as the `CudaError` it is."""
    from zyntax.frontend import pipeline

    return pipeline.gpu_available()
