"""The ``@zyntax.kernel`` front-end: Python functions to HIR, specialised per signature.

Public names are re-exported by :mod:`zyntax`: ``zyntax.kernel``, ``zyntax.func``,
the scalar types (``zyntax.f32`` ...), ``zyntax.Array`` and ``zyntax.lang``.
"""

from zyntax.frontend.errors import (
    KernelArgumentError,
    KernelError,
    KernelNameError,
    KernelSyntaxError,
    KernelTypeError,
)
from zyntax.frontend.kernel import DeviceFunction, Kernel, compile_hooks, func, kernel

__all__ = [
    "DeviceFunction",
    "Kernel",
    "KernelArgumentError",
    "KernelError",
    "KernelNameError",
    "KernelSyntaxError",
    "KernelTypeError",
    "compile_hooks",
    "func",
    "kernel",
]
