"""The GPU suite runs with a temporary home and kernel cache (tests/isolated_home.py),
so that neither zyntax's cache nor the driver's or a peer's lands in the user's home."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import REAL_HOME, TEST_ROOT


def test_home_and_caches_are_under_the_session_root() -> None:
    root = TEST_ROOT.resolve()
    assert Path.home().resolve() != REAL_HOME.resolve()
    for name in ("HOME", "XDG_CACHE_HOME", "ZYNTAX_CACHE_DIR"):
        assert root in Path(os.environ[name]).resolve().parents, name
