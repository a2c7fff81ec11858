"""The CPU backend: HIR host functions and kernels as native code.

``zyntax.cpu.compile(module)`` JIT-compiles every function of a verified module
for this machine's CPU through LLVM, applying each function's execution
constraints (``critical_path``, ``no_alloc``, ``inline_always``,
``no_bounds_check``, ``opt_level``); ``cm["fn"](*args)`` calls one with numpy
arrays and scalars, and ``cm.launch(name, grid, block, *args)`` runs a kernel
over its grid (natively, blocks in parallel on all cores or on
``ZYNTAX_CPU_THREADS`` workers, barriers, shared memory, warp shuffles,
votes, ``warp_sync``, ``elect.sync``, ``redux`` and ``match.any`` included;
on the interpreter when it uses MMA, TMA, mbarriers, clusters or the other
ops docs/cpu.md lists). ``zyntax.cpu.emit(module, "obj" | "so" | "asm" | "llvm")`` compiles
ahead of time.

``zyntax.cpu.launch(module, name, grid, block, *args, mode=...)`` is the one
door the front-ends (``@zyntax.kernel(...).run_cpu``, the kernel library with
numpy inputs, tile programs, nests, fusion sequences) run kernels on the CPU
through: it compiles a module once (kept per module object) and launches
natively; ``mode="interp"`` runs the reference interpreter instead (the
checking mode: shared-memory race checks, exact trap locations). See
docs/cpu.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from zyntax._native import CpuFunction, CpuModule, cpu_compile, cpu_emit, cpu_target
from zyntax.errors import ArgumentError, CompileError

__all__ = [
    "MODES",
    "CpuFunction",
    "CpuModule",
    "compile",
    "compiled",
    "emit",
    "launch",
    "resolve_mode",
    "target",
]

compile = cpu_compile
emit = cpu_emit
target = cpu_target

#: How a kernel runs on the CPU:
#: ``"auto"``   natively; a kernel the native lowering refuses (the ops in
#:              ``CpuModule.functions[...]["interp_reason"]``: MMA, wgmma, TMA,
#:              mbarriers, warp match/redux/elect/sync, module globals, tensor
#:              maps and bf16 arrays as arguments; or a module the CPU backend
#:              cannot compile, a `CompileError` naming the construct) runs on
#:              the interpreter;
#: ``"native"`` natively, and such a kernel is a ``CompileError`` naming the ops;
#: ``"interp"`` on the reference interpreter with its checks (bounds, races).
MODES = ("auto", "native", "interp")

# Compiled modules, keyed by the id of the ``hir.Module`` (which takes no weak
# references): the entry holds the module, so its id is not reused while the
# entry lives. Bounded, oldest first out.
_COMPILED: dict[int, tuple[Any, CpuModule | CompileError]] = {}
_MAX_COMPILED = 64


def resolve_mode(m: str | None = None) -> str:
    """`m`, else ``$ZYNTAX_CPU_MODE``, else ``"auto"``; an unknown mode is an `ArgumentError`."""
    name = m if m is not None else os.environ.get("ZYNTAX_CPU_MODE") or "auto"
    if name not in MODES:
        src = "argument 'mode'" if m is not None else "ZYNTAX_CPU_MODE"
        raise ArgumentError(f"{src}: expected one of {', '.join(MODES)}, got {name!r}")
    return name


def compiled(module: Any) -> CpuModule:
    """The module compiled for this CPU (once per module object; a
    `CompileError` is kept and raised again, not retried)."""
    hit = _COMPILED.get(id(module))
    if hit is None or hit[0] is not module:
        try:
            got: CpuModule | CompileError = cpu_compile(module)
        except CompileError as e:
            got = e
        if len(_COMPILED) >= _MAX_COMPILED:
            del _COMPILED[next(iter(_COMPILED))]
        hit = (module, got)
        _COMPILED[id(module)] = hit
    if isinstance(hit[1], CompileError):
        raise hit[1]
    cm: CpuModule = hit[1]
    return cm


def native_refusal(cm: CpuModule, name: str, args: Sequence[Any] = ()) -> str | None:
    """Why kernel `name` cannot run natively with `args` (None: it can)."""
    from zyntax.interp import TensorMap

    for f in cm.functions:
        if f["name"] == name and f["kind"] == "interp_kernel":
            return ", ".join(f.get("interp_reason") or ["an op the CPU lowering lacks"])
    if any(isinstance(a, TensorMap) for a in args):
        return "a tensor map argument (TMA)"
    if any(isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" for a in args):
        return "a bf16 array argument (numpy has no bfloat16 the CPU entry accepts)"
    return None


def launch(
    module: Any,
    name: str,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    *args: Any,
    shared_bytes: int = 0,
    mode: str | None = None,
    checks: bool = True,
) -> str:
    """Run kernel `name` of `module` over `grid` blocks of `block` threads on
    this CPU; numpy arrays are read and written in place (a non-contiguous
    array through a contiguous copy, written back). Returns where it ran:
    ``"cpu"`` or ``"interp"``. `mode` (default ``$ZYNTAX_CPU_MODE`` or
    ``"auto"``): see `MODES`; `checks` applies to the interpreter only."""
    how = resolve_mode(mode)
    if how == "interp":
        return _interp(module, name, grid, block, args, shared_bytes, checks)
    try:
        cm = compiled(module)
    except CompileError as e:
        # A construct the CPU lowering lacks (the error names it).
        if how == "native":
            raise
        del e
        return _interp(module, name, grid, block, args, shared_bytes, checks)
    why = native_refusal(cm, name, args)
    if why is not None:
        if how == "native":
            raise CompileError(
                f"@{name} cannot run natively on the CPU: it uses {why} "
                "(mode='auto' runs it on the interpreter)"
            )
        return _interp(module, name, grid, block, args, shared_bytes, checks)
    flat: list[Any] = []
    copies: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
    seen: dict[int, np.ndarray[Any, Any]] = {}
    for a in args:
        if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
            c = seen.get(id(a))
            if c is None:
                c = np.ascontiguousarray(a)
                seen[id(a)] = c
                copies.append((a, c))
            a = c
        flat.append(a)
    where: str = cm.launch(name, grid, block, *flat, shared_bytes=shared_bytes)
    for orig, c in copies:
        if np.array_equal(orig, c, equal_nan=orig.dtype.kind in "fc"):
            continue
        if not orig.flags.writeable:
            raise ArgumentError(
                f"@{name}: a read-only array argument was written by the kernel "
                "(pass a writeable copy, e.g. numpy.array(a))"
            )
        orig[...] = c
    return where


def _interp(
    module: Any,
    name: str,
    grid: Any,
    block: Any,
    args: Sequence[Any],
    shared_bytes: int,
    checks: bool,
) -> str:
    from zyntax import interp

    interp.launch(module, name, grid, block, *args, shared_bytes=shared_bytes, checks=checks)
    return "interp"
