"""The CPU backend: HIR host functions and kernels as native code.

``zyntax.cpu.compile(module)`` JIT-compiles every function of a verified module
for this machine's CPU through LLVM, applying each function's execution
constraints (``critical_path``, ``no_alloc``, ``inline_always``,
``no_bounds_check``, ``opt_level``); ``cm["fn"](*args)`` calls one with numpy
arrays and scalars, and ``cm.launch(name, grid, block, *args)`` runs a kernel
over its grid (natively, blocks in parallel on all cores or on
``ZYNTAX_CPU_THREADS`` workers, barriers, shared memory, warp shuffles and
votes included; on the interpreter when it uses other warp collectives or
MMA). ``zyntax.cpu.emit(module, "obj" | "so" | "asm" | "llvm")`` compiles
ahead of time. See docs/cpu.md.
"""

from __future__ import annotations

from zyntax._native import CpuFunction, CpuModule, cpu_compile, cpu_emit, cpu_target

__all__ = ["CpuFunction", "CpuModule", "compile", "emit", "target"]

compile = cpu_compile
emit = cpu_emit
target = cpu_target
