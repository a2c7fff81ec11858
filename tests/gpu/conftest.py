"""Shared setup of the GPU tests: every test marked ``gpu`` is skipped when
zyntax.cuda finds no driver or device; the CPU tests here always run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(ROOT / "tests"))

import isolated_home  # noqa: E402

# Before any test imports zyntax or starts a process: a temporary HOME and kernel cache.
TEST_ROOT = isolated_home.isolate()
#: The user's home, which no test may write to.
REAL_HOME = isolated_home.real_home()


def _gpu_available() -> bool:
    try:
        from zyntax import cuda
    except ImportError:
        return False
    return bool(cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU/driver on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def dev() -> Any:
    from zyntax import cuda

    return cuda.Device(0)


@pytest.fixture
def rng() -> np.random.Generator:
    # Fresh inputs every run; the seed is printed on failure by pytest's repr of the test.
    return np.random.default_rng()
