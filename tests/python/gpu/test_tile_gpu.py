"""zyntax.tile on the GPU: the programs of tests/python/test_tile.py at larger
sizes, launched through zyntax.cuda with device arrays, against float64 numpy
on fresh random inputs with outputs poisoned (NaN) first."""

from __future__ import annotations

import numpy as np
import pytest

from zyntax import tile

SEED = np.random.SeedSequence().entropy
print(f"test_tile_gpu seed {SEED}")
RNG = np.random.default_rng(SEED)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32)


def copy(s: tile.Schedule) -> tile.Kernel:
    bm, bn = s.block
    t = tile.Builder("copy", s)
    x, y = t.view("x", "f32", 2), t.view("y", "f32", 2)
    origin = (t.program_id(0) * bm, t.program_id(1) * bn)
    t.store(y, origin, t.load(x, origin, (bm, bn)))
    return t.finish()


def softmax(s: tile.Schedule) -> tile.Kernel:
    bm, bn = s.block
    t = tile.Builder("softmax", s)
    x, y = t.view("x", "f32", 2), t.view("y", "f32", 2)
    m0 = t.program_id(0) * bm
    v = t.load(x, (m0, 0), (bm, bn), other=float("-inf"))
    e = (v - v.max(1).broadcast((bm, bn))).exp()
    t.store(y, (m0, 0), e / e.sum(1).broadcast((bm, bn)))
    return t.finish()


def gemm(s: tile.Schedule) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm", s)
    a, b, c = (t.view(n, "f32", 2) for n in "abc")
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: tile.Scalar, acc: list[tile.Value]) -> list[tile.Value]:
        x, y = t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn))
        return [t.dot(x, y, acc[0])]  # type: ignore[arg-type]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc)  # type: ignore[arg-type]
    return t.finish()


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
