"""Compile HIR modules with the LLVM backend.

``compile(module, backend="nvptx", arch="sm_90", emit="ptx")`` returns PTX
(or, with ``emit="llvm"``, the optimized LLVM IR). Without `arch` a module
compiles for its first declared target, else the default arch
(:data:`zyntax.targets.DEFAULT_ARCH`, as the ``zyntax compile`` command).
``compile_ptx`` returns the full result (PTX, LLVM IR, kernel names, per-stage timings) and
``validate_ptx`` assembles PTX with ``ptxas`` (from ``nvidia-cuda-nvcc-cu12``,
``$ZYNTAX_PTXAS`` or ``PATH``).

``isolate=True`` compiles in a separate worker process (``zyntax._worker``):
for untrusted input, so that an abort inside LLVM becomes a `CompileError`
instead of ending this process. See docs/python.md, "Untrusted input".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Literal

from zyntax import _native, errors, targets
from zyntax import profiling as _profiling
from zyntax.errors import ArgumentError, CompileError
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
    #: Seconds per pipeline stage: verify, lower, llvm_verify, optimize, print_ir, codegen.
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


def _in_worker(module: Module, request: dict[str, Any]) -> dict[str, Any]:
    """Runs one compile request in a fresh worker process and returns its result.

    A worker that dies (LLVM or ptxas aborting on hostile input) is a
    `CompileError` naming the signal; an error the worker reports is raised
    here as the same `ZyntaxError` subclass.
    """
    if not isinstance(module, Module):
        raise ArgumentError(
            f"argument 'module': expected a zyntax.hir.Module, got {type(module).__name__}"
        )
    if not sys.executable:
        raise CompileError("isolate=True needs sys.executable to start the worker process")
    request = dict(request, module=module.to_json())
    env = dict(os.environ)
    # The worker imports this very zyntax, wherever it was found.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-m", "zyntax._worker"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    tail = " ".join(proc.stderr.strip().splitlines()[-3:])
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise CompileError(
            f"compiling module {module.name!r} killed the compiler worker process ({sig}): "
            f"the input makes LLVM or ptxas abort; this process is unaffected"
            + (f" (worker stderr: {tail})" if tail else "")
        )
    try:
        reply: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        reply = {}
    if proc.returncode != 0 or not reply:
        raise CompileError(
            f"the compiler worker process failed (exit status {proc.returncode}) "
            f"compiling module {module.name!r}" + (f": {tail}" if tail else "")
        )
    if "error" in reply:
        cls = getattr(errors, str(reply["error"]), None)
        if not (isinstance(cls, type) and issubclass(cls, errors.ZyntaxError)):
            cls = CompileError
        err = cls(reply.get("message", ""))
        if "diagnostics" in reply:
            err.diagnostics = reply["diagnostics"]  # type: ignore[attr-defined]
        raise err
    result: dict[str, Any] = reply["result"]
    return result


def compile_ptx(
    module: Module,
    arch: str | None = None,
    *,
    ptx_version: str | None = None,
    opt_level: str | None = None,
    isolate: bool = False,
    line_info: bool = False,
    llvm_ir: bool = True,
) -> CompileResult:
    """Verifies `module` and compiles it to PTX for `arch`.

    Raises `VerifyError` if the module is rejected (including arch gating for
    `arch`), `CompileError` for unsupported requests. With ``isolate=True``
    the compile runs in a worker process (for untrusted input). With
    ``line_info=True`` the PTX carries ``.file``/``.loc`` lines from the
    instructions' source locations (nvcc's ``-lineinfo``; profilers show
    source lines with it). ``llvm_ir=False`` skips printing the optimized
    LLVM IR (``llvm_ir`` is then empty): 10-15 % of LLVM's time on an
    unrolled tile kernel, for callers that want only the PTX.
    """
    arch = arch or targets.default_arch_of(module)
    if isolate:
        req = {
            "arch": arch,
            "ptx_version": ptx_version,
            "opt_level": opt_level,
            "emit": "ptx",
            "line_info": line_info,
        }
        return CompileResult(**_in_worker(module, req))
    prof = _profiling.current()
    start = prof.now() if prof is not None else 0.0
    out = _backend("compile_ptx")(
        module,
        arch,
        ptx_version=ptx_version,
        opt_level=opt_level,
        line_info=line_info,
        llvm_ir=llvm_ir,
    )
    if prof is not None:
        _profiling.span_from(
            "compile", f"compile {arch}", start, out.get("timings"), kernels=out.get("kernels")
        )
    return CompileResult(**out)


def compile(  # noqa: A001 - the documented entry point shadows the builtin on purpose
    module: Module,
    backend: Literal["nvptx"] = "nvptx",
    arch: str | None = None,
    emit: Literal["ptx", "llvm"] = "ptx",
    *,
    ptx_version: str | None = None,
    opt_level: str | None = None,
    isolate: bool = False,
    line_info: bool = False,
) -> str:
    """Compiles `module` and returns PTX (``emit="ptx"``) or LLVM IR (``emit="llvm"``).

    ``isolate=True`` compiles in a worker process, so that input that makes
    LLVM abort raises `CompileError` instead of ending this process.
    """
    if backend != "nvptx":
        raise CompileError(f"unknown backend {backend!r} (available: 'nvptx')")
    arch = arch or targets.default_arch_of(module)
    if emit == "ptx":
        return compile_ptx(
            module,
            arch,
            ptx_version=ptx_version,
            opt_level=opt_level,
            isolate=isolate,
            line_info=line_info,
            llvm_ir=False,  # only the PTX is returned
        ).ptx
    if emit == "llvm" and isolate:
        req = {
            "arch": arch,
            "ptx_version": ptx_version,
            "opt_level": opt_level,
            "emit": "llvm",
            "line_info": line_info,
        }
        return str(_in_worker(module, req)["llvm_ir"])
    if emit == "llvm":
        ir: str = _backend("emit_llvm")(
            module, arch, ptx_version=ptx_version, opt_level=opt_level, line_info=line_info
        )
        return ir
    raise CompileError(f"unknown emit kind {emit!r} (expected 'ptx' or 'llvm')")


def validate_ptx(ptx: str, arch: str, ptxas: str | None = None) -> PtxasResult:
    """Assembles `ptx` for `arch` with ``ptxas -Werror``; raises `CompileError`
    when ptxas rejects it or cannot be found."""
    out = _backend("ptxas_assemble")(ptx, arch, ptxas)
    return PtxasResult(**out)
