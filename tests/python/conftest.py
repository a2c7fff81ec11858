"""Shared pytest configuration for the zyntax Python tests."""

from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# The example builder scripts are importable as modules (`import saxpy`).
sys.path.insert(0, str(EXAMPLES))
sys.path.insert(0, str(ROOT / "tests"))

import isolated_home  # noqa: E402

# Before any test imports zyntax or starts a process: a temporary HOME and kernel cache.
TEST_ROOT = isolated_home.isolate()
#: The user's home, which no test may write to.
REAL_HOME = isolated_home.real_home()


@functools.cache
def gpu_available() -> bool:
    """True when an NVIDIA driver is loadable and reports at least one device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    if cuda.cuInit(0) != 0:
        return False
    count = ctypes.c_int(0)
    return cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests under tests/python/gpu are GPU tests whether or not they carry the marker.
    # (Only below this directory: the hook sees every collected item, tests/gpu's too.)
    gpu_dir = Path(__file__).resolve().parent / "gpu"
    for item in items:
        if gpu_dir in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.gpu)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU/driver on this machine")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)
