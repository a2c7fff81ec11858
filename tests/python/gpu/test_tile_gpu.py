"""zyntax.tile on the GPU: the programs of tests/python/test_tile.py at larger
sizes, launched through zyntax.cuda with device arrays, against float64 numpy
on fresh random inputs with outputs poisoned (NaN) first."""

from __future__ import annotations

import numpy as np
import pytest

# The programs and input helpers are the interpreter tests' own (tests/python is on
# sys.path: its conftest).
from test_tile import copy, gemm, nan, rand, softmax
from zyntax import tile


@pytest.fixture(scope="module")
def cuda():  # type: ignore[no-untyped-def]
    from zyntax import cuda

    return cuda


@pytest.mark.parametrize("shape", [(1000, 1000), (1, 4097), (257, 129)])
def test_copy_gpu(cuda, shape: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    k = copy(tile.Schedule((64, 64), warps=4))
    x = rand(*shape)
    dx, dy = cuda.to_device(x), cuda.to_device(nan(*shape))
    k.launch(dx, dy, grid=k.grid(*shape))
    np.testing.assert_array_equal(dy.to_host(), x)


@pytest.mark.parametrize(("rows", "cols"), [(1000, 1000), (257, 129)])
def test_softmax_gpu(cuda, rows: int, cols: int) -> None:  # type: ignore[no-untyped-def]
    bn = 1 << (cols - 1).bit_length()
    k = softmax(tile.Schedule((4, bn), warps=4))
    x = rand(rows, cols) * 8
    dx, dy = cuda.to_device(x), cuda.to_device(nan(rows, cols))
    k.launch(dx, dy, grid=k.grid(rows, 1))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(dy.to_host(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(("m", "n", "kk"), [(1000, 1000, 1000), (257, 129, 300), (64, 64, 64)])
def test_gemm_gpu(cuda, m: int, n: int, kk: int) -> None:  # type: ignore[no-untyped-def]
    schedule = tile.heuristic(m, n, kk, arch=cuda.device_arch())
    k = gemm(schedule)
    a, b = rand(m, kk), rand(kk, n)
    da, db, dc = cuda.to_device(a), cuda.to_device(b), cuda.to_device(nan(m, n))
    k.launch(da, db, dc, grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * kk)


def test_gemm_gpu_strided_foreign_views(cuda) -> None:  # type: ignore[no-untyped-def]
    """Views from __cuda_array_interface__ with strides (a CuPy transpose and
    a column slice) are passed as pointer, extents and element strides."""
    cp = pytest.importorskip("cupy")
    m, n, kk = 129, 70, 45
    at, b = rand(kk, m), rand(kk, 2 * n)
    c = nan(m, n)
    dat, db, dc = cp.asarray(at), cp.asarray(b), cp.asarray(c)
    k = gemm(tile.Schedule((32, 32), k=16, warps=4))
    k.launch(dat.T, db[:, ::2], dc, grid=k.grid(m, n))
    cp.cuda.Device().synchronize()
    want = at.T.astype(np.float64) @ b[:, ::2].astype(np.float64)
    np.testing.assert_allclose(cp.asnumpy(dc), want, rtol=1e-4, atol=1e-5 * kk)
