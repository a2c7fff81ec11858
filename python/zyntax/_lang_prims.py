"""``Primitive``, the marker of a ``zyntax.lang`` GPU primitive, apart from
``zyntax.lang``: the primitives generated from the op table
(``_lang_ops.py``) are built from it without importing ``zyntax.lang``, which
re-exports both (no import cycle)."""

from __future__ import annotations

from typing import Any


def _outside(what: str) -> Exception:
    # Imported here: zyntax.frontend imports zyntax.lang.
    from zyntax.frontend.errors import KernelError

    return KernelError(f"{what} can only be used inside a @zyntax.kernel or @zyntax.func function")


class Primitive:
    """A GPU primitive: only meaningful inside a kernel, where the front-end lowers it."""

    def __init__(self, qualname: str, inst: str | None = None) -> None:
        self.qualname = qualname
        #: For a primitive that is one HIR instruction on its own operands:
        #: ``"mnemonic(params) [-> type]"`` (``"bfe(a, pos, length)"``, a
        #: parameter may have a literal default, ``-> i32`` casts the result).
        #: The front-end takes its operand and result types and their checks
        #: from the op table's row (``frontend/translate/plain.py``).
        self.inst = inst

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _outside(f"zyntax.lang.{self.qualname}()")

    def __repr__(self) -> str:
        return f"<zyntax primitive {self.qualname}>"
