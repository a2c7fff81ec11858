"""What the runtime (:mod:`zyntax.cuda`) calls but may not import.

``cuda.load_hir`` compiles through the kernel cache's pipeline
(:func:`zyntax.frontend.pipeline.ptx_for_module`) and ``cuda.load_bundle``
reads AOT bundles (:func:`zyntax.bundle.load_bundle`): both live in layers
above the runtime (docs/architecture.md, "Layers"). ``import zyntax`` sets
these slots (``zyntax/__init__.py``) before any user code runs, so the
runtime reaches them without importing upward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from zyntax.errors import InternalError

T = TypeVar("T")

#: ``(module, arch) -> PTX`` for a ``zyntax.hir.Module``, through the kernel cache.
compile_hir: Callable[[Any, str], str] | None = None
#: ``(path, device) -> Bundle``: loads an AOT bundle.
load_bundle: Callable[[str, int], Any] | None = None


def need(slot: T | None, name: str) -> T:
    """The provider in `slot`; unset only when the package was not imported as a whole."""
    if slot is None:
        raise InternalError(
            f"zyntax._providers.{name} is unset: `import zyntax` sets it "
            "(zyntax/__init__.py); please report this as a zyntax bug"
        )
    return slot
