"""Compile HIR modules with the LLVM backend.

``compile(module, backend="nvptx", arch="sm_90", emit="ptx")`` returns PTX
(or, with ``emit="llvm"``, the optimized LLVM IR). ``compile_ptx`` returns the
full result (PTX, LLVM IR, kernel names, per-stage timings) and
``validate_ptx`` assembles PTX with ``ptxas`` (from ``nvidia-cuda-nvcc-cu12``,
``$ZYNTAX_PTXAS`` or ``PATH``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from zyntax import _native
from zyntax import profiling as _profiling
from zyntax.errors import CompileError
from zyntax.hir import Module

__all__ = ["CompileResult", "PtxasResult", "compile", "compile_ptx", "validate_ptx"]


@dataclass(frozen=True)
class CompileResult:
    """The output of one PTX compilation."""

    ptx: str
    llvm_ir: str
    arch: str
    ptx_version: str
    kernels: list[str]
    #: Seconds per pipeline stage: verify, lower, llvm_verify, optimize, codegen.
    timings: dict[str, float]


@dataclass(frozen=True)
class PtxasResult:
    """What ``ptxas`` produced for accepted PTX."""

    cubin: bytes
    log: str
    ptxas: str


def _backend(name: str) -> Any:
    fn = getattr(_native, name, None)
    if fn is None:
        raise CompileError(
            "this build of zyntax has no LLVM backend (the extension was built without "
            "the `llvm` feature)"
        )
    return fn


def compile_ptx(
    module: Module,
    arch: str = "sm_90",
    *,
    ptx_version: str | None = None,
    opt_level: str | None = None,
) -> CompileResult:
    """Verifies `module` and compiles it to PTX for `arch`.

    Raises `VerifyError` if the module is rejected (including arch gating for
    `arch`), `CompileError` for unsupported requests.
    """
    prof = _profiling.current()
    start = prof.now() if prof is not None else 0.0
    out = _backend("compile_ptx")(module, arch, ptx_version=ptx_version, opt_level=opt_level)
    if prof is not None:
        _profiling.span_from(
            "compile", f"compile {arch}", start, out.get("timings"), kernels=out.get("kernels")
        )
    return CompileResult(**out)


def compile(  # noqa: A001 - the documented entry point shadows the builtin on purpose
    module: Module,
    backend: Literal["nvptx"] = "nvptx",
    arch: str = "sm_90",
    emit: Literal["ptx", "llvm"] = "ptx",
    *,
    ptx_version: str | None = None,
    opt_level: str | None = None,
) -> str:
    """Compiles `module` and returns PTX (``emit="ptx"``) or LLVM IR (``emit="llvm"``)."""
    if backend != "nvptx":
        raise CompileError(f"unknown backend {backend!r} (available: 'nvptx')")
    if emit == "ptx":
        return compile_ptx(module, arch, ptx_version=ptx_version, opt_level=opt_level).ptx
    if emit == "llvm":
        ir: str = _backend("emit_llvm")(module, arch, ptx_version=ptx_version, opt_level=opt_level)
        return ir
    raise CompileError(f"unknown emit kind {emit!r} (expected 'ptx' or 'llvm')")


def validate_ptx(ptx: str, arch: str, ptxas: str | None = None) -> PtxasResult:
    """Assembles `ptx` for `arch` with ``ptxas -Werror``; raises `CompileError`
    when ptxas rejects it or cannot be found."""
    out = _backend("ptxas_assemble")(ptx, arch, ptxas)
    return PtxasResult(**out)
