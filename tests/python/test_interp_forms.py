"""The call forms of ``zyntax.interp.launch``: by kernel name, the module's
only kernel, and a ``@zyntax.kernel`` function; each checked against numpy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import saxpy  # examples/saxpy.py
import zyntax
from zyntax import hir, interp

# Loaded by path: examples/kernels/ shares module names with examples/ (histogram).
_spec = importlib.util.spec_from_file_location(
    "kernels_vector_add",
    Path(__file__).resolve().parents[2] / "examples" / "kernels" / "vector_add.py",
)
assert _spec is not None and _spec.loader is not None
vector_add = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vector_add)


def _inputs(n: int) -> tuple[np.float32, np.ndarray, np.ndarray]:
    rng = np.random.default_rng()
    a = np.float32(rng.uniform(-3, 3))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return a, x, y


@pytest.mark.parametrize("by_name", [True, False])
def test_module_forms(by_name: bool) -> None:
    m = saxpy.build()
    n = 1000
    a, x, y = _inputs(n)
    want = a * x + y
    grid, block = (n + 127) // 128, 128
    if by_name:
        stats = interp.launch(m, "saxpy", grid, block, np.uint32(n), a, x, y)
    else:
        stats = interp.launch(m, grid, block, np.uint32(n), a, x, y)
    assert stats is not None and stats["instructions"] > 0
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_kernel_function_form() -> None:
    n = 777
    rng = np.random.default_rng()
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, dtype=np.float32)
    assert interp.launch(vector_add.vector_add, (n + 63) // 64, 64, a, b, out) is None
    np.testing.assert_array_equal(out, a + b)


def test_ambiguous_module_needs_a_name() -> None:
    m = hir.Module("two")
    for name in ("k1", "k2"):
        with m.kernel(name, []) as b:
            b.ret()
    with pytest.raises(zyntax.LaunchError, match="2 kernels"):
        interp.launch(m, 1, 1)


def test_wrong_target_type() -> None:
    with pytest.raises(zyntax.ArgumentError, match=r"Module or a @zyntax\.kernel"):
        interp.launch(42, 1, 1)
