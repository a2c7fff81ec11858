"""zyntax's log: compile, cache and tuning events, and progress bars.

Events go to the standard ``logging`` logger ``"zyntax"`` (what was compiled,
reused from the cache or rebuilt and why; what autotuning measured). Nothing
is printed unless the application configures logging, or ``ZYNTAX_LOG`` names
a level (``ZYNTAX_LOG=info`` or ``debug``): then zyntax adds one handler that
writes ``zyntax: <level>: <message>`` lines to stderr.

Progress bars (``tqdm``, the optional ``progress`` extra) are shown for long
jobs (AOT-compiling many kernels, autotuning) when stderr is a terminal or
``ZYNTAX_PROGRESS=1``; ``ZYNTAX_PROGRESS=0`` turns them off.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

logger = logging.getLogger("zyntax")

_T = TypeVar("_T")
_handler: logging.Handler | None = None


def configure_from_env() -> None:
    """Apply ``ZYNTAX_LOG`` (called once at import; again after changing it)."""
    global _handler
    level = os.environ.get("ZYNTAX_LOG", "").strip().upper()
    if _handler is not None:
        logger.removeHandler(_handler)
        _handler = None
    if not level or level in ("0", "OFF", "NONE"):
        return
    num = logging.getLevelName(level)
    if not isinstance(num, int):
        num = logging.INFO
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("zyntax: %(levelname)s: %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(num)


def progress(items: Iterable[_T], *, total: int | None = None, desc: str = "") -> Iterator[_T]:
    """``items``, with a tqdm progress bar on stderr when one is wanted and available."""
    want = os.environ.get("ZYNTAX_PROGRESS")
    show = sys.stderr.isatty() if want is None else want not in ("0", "", "off", "no")
    if show:
        try:
            from tqdm import tqdm  # type: ignore[import-untyped]
        except ImportError:
            show = False
        else:
            bar: Any = tqdm(items, total=total, desc=desc, file=sys.stderr, leave=False)
            yield from bar
            return
    yield from items


configure_from_env()
