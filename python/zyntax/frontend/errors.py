"""Errors of the kernel front-end, pointing at the user's source with a caret.

::

    ZyntaxError
    └── KernelError                      any problem with a @zyntax.kernel / @zyntax.func
        ├── KernelSyntaxError            a Python construct the kernel language does not support
        ├── KernelTypeError (TypeError)  operands or arguments of the wrong type
        ├── KernelNameError (NameError)  a name that is not defined in the kernel or its globals
        └── KernelArgumentError (TypeError)  a wrong argument at launch
"""

from __future__ import annotations

import linecache
import os
from types import TracebackType

from zyntax.errors import ZyntaxError


class KernelError(ZyntaxError):
    """A problem in a kernel's source or its use, with file:line:column and a caret excerpt."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        end_col: int | None = None,
        kernel: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.col = col  # 1-based
        self.kernel = kernel
        super().__init__(_format(message, file, line, col, end_col, kernel))


class KernelSyntaxError(KernelError):
    """The kernel uses a Python construct outside the supported subset."""


class KernelTypeError(KernelError, TypeError):
    """Operands, annotations or arguments have incompatible types."""


class KernelNameError(KernelError, NameError):
    """A name is neither a local, a parameter, nor a supported global."""


class KernelArgumentError(KernelError, TypeError):
    """A launch got an argument the kernel cannot take."""


def _format(
    message: str,
    file: str | None,
    line: int | None,
    col: int | None,
    end_col: int | None,
    kernel: str | None,
) -> str:
    if file is None or line is None:
        return message
    where = f"{file}:{line}:{col or 1}"
    head = f"{where}: {message}"
    if kernel:
        head += f" (in kernel '{kernel}')"
    src = linecache.getline(file, line).rstrip("\n")
    if not src:
        return head
    c = max(1, col or 1)
    width = 1
    if end_col is not None and end_col > c:
        width = end_col - c
    caret = " " * (c - 1) + "^" + "~" * (width - 1)
    return f"{head}\n    {src}\n    {caret}"


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def trim_traceback(exc: BaseException) -> BaseException:
    """Drop the frames that belong to the zyntax package from ``exc``'s traceback."""
    tb: TracebackType | None = exc.__traceback__
    kept: list[TracebackType] = []
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PKG_DIR):
            kept.append(tb)
        tb = tb.tb_next
    head: TracebackType | None = None
    for t in reversed(kept):
        t.tb_next = head
        head = t
    return exc.with_traceback(head)
