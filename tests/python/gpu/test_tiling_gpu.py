"""Automatically tiled loop-nest matmul (zyntax.tiling) on the GPU: against
numpy/float64, bit-for-bit against the untiled nest, and close to the
hand-tiled examples/kernels/sgemm.py, on fresh random inputs with ragged sizes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import zyntax.cuda as cuda
from nest_matmul import build_with_report
from zyntax.nest import launch_grid

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
ROOT = Path(__file__).resolve().parents[3]


def sgemm_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sgemm", ROOT / "examples/kernels/sgemm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(tiled: bool, a: np.ndarray, bm: np.ndarray, wg: tuple[int, int] = (16, 16)) -> np.ndarray:
    m, _ = build_with_report(wg, tiled=tiled)
    k = cuda.load_hir(m).kernel("mm")
    mm, kk = a.shape
    nn = bm.shape[1]
    da, db = cuda.to_device(a), cuda.to_device(bm)
    dc = cuda.to_device(np.full((mm, nn), np.nan, np.float32))
    grid, block = launch_grid((mm, nn), wg)
    k.launch(grid, block, da, db, dc, mm, nn, kk)
    cuda.synchronize()
    return dc.to_host()


@pytest.mark.parametrize(("mm", "nn", "kk"), [(300, 257, 129), (1000, 777, 515), (17, 5, 3)])
def test_tiled_nest_matmul_on_gpu(mm: int, nn: int, kk: int) -> None:
    a = rng.standard_normal((mm, kk)).astype(np.float32)
    bm = rng.standard_normal((kk, nn)).astype(np.float32)
    got = run(True, a, bm)
    np.testing.assert_allclose(got, a.astype(np.float64) @ bm, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, run(False, a, bm))  # same order, same fma


def test_tiled_nest_matches_the_hand_tiled_example() -> None:
    mm, nn, kk = 513, 300, 257
    a = rng.standard_normal((mm, kk)).astype(np.float32)
    bm = rng.standard_normal((kk, nn)).astype(np.float32)
    ex = sgemm_example()
    da, db = cuda.to_device(a), cuda.to_device(bm)
    dc = cuda.to_device(np.full((mm, nn), np.nan, np.float32))
    grid = ((nn + ex.TILE - 1) // ex.TILE, (mm + ex.TILE - 1) // ex.TILE)
    ex.sgemm[grid, (ex.TILE, ex.TILE)](da, db, dc)
    cuda.synchronize()
    # Both sum k = 0..K-1 in order with fma: the same bits.
    np.testing.assert_array_equal(run(True, a, bm), dc.to_host())


@pytest.mark.parametrize(("mm", "nn", "kk"), [(300, 257, 129), (17, 5, 3)])
def test_tiled_prange_kernel_on_gpu(mm: int, nn: int, kk: int) -> None:
    """examples/kernels/prange_matmul.py: the kernel front-end's tiled nest, the same
    bits as the builder's tiled nest (both fold k in order with fma)."""
    spec = importlib.util.spec_from_file_location(
        "prange_matmul", ROOT / "examples/kernels/prange_matmul.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    prange_mm = mod.mm
    assert sum("tiled through shared memory" in x for x in prange_mm.tiling_report()) == 2
    a = rng.standard_normal((mm, kk)).astype(np.float32)
    bm = rng.standard_normal((kk, nn)).astype(np.float32)
    da, db = cuda.to_device(a), cuda.to_device(bm)
    dc = cuda.to_device(np.full((mm, nn), np.nan, np.float32))
    prange_mm[prange_mm.launch_grid(mm, nn)](da, db, dc)
    cuda.synchronize()
    got = dc.to_host()
    np.testing.assert_allclose(got, a.astype(np.float64) @ bm, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, run(True, a, bm))
