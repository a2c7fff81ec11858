"""The `compute` feature as Python sees it: the wheel carries it, and
``zyntax.gpu_available()`` agrees with an independent driver probe."""

from __future__ import annotations

import zyntax
from conftest import gpu_available


def test_wheel_is_built_with_compute() -> None:
    assert zyntax.build_info()["compute"] is True
    # compute is what brings PTX emission and the CUDA runtime.
    assert hasattr(zyntax._native, "compile_ptx")
    assert hasattr(zyntax._native, "cuda_is_available")


def test_gpu_available_agrees_with_the_driver() -> None:
    # conftest probes libcuda through ctypes, not through zyntax.
    assert zyntax.gpu_available() is gpu_available()
