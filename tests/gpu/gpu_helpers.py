"""Helpers shared by the GPU tests. A module of its own (not conftest) so the
tests import the right one when tests/python's conftest is loaded too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "examples"


def optional_import(name: str) -> Any:
    """A peer library (cupy, torch, ...) or None when it is missing or broken."""
    try:
        return __import__(name)
    except Exception:
        return None
