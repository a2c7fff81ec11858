"""Parallel loop nests on the GPU: builder nests (zyntax.nest.parallel_for)
compiled to PTX and loaded, and @zyntax.kernel(workgroup=...) prange kernels,
against numpy on fresh random inputs with ragged sizes."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
import zyntax.cuda as cuda
from zyntax import hir
from zyntax.nest import launch_grid, parallel_for

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
F32P = hir.ptr("global", hir.f32)


def test_builder_matmul_nest_on_gpu() -> None:
    m = hir.Module("mm")
    with m.kernel("mm", [F32P, F32P, F32P, hir.u32, hir.u32, hir.u32], max_threads=(16, 16)) as b:
        a, bm, c, mm, nn, kk = b.params
        with parallel_for(b, (mm, nn), workgroup=(16, 16)) as (i, j):
            with b.loop(0, kk, carry=[b.const(0.0, hir.f32)]) as lp:
                x = b.load(b.ptr_add(a, i * kk + lp.index))
                y = b.load(b.ptr_add(bm, lp.index * nn + j))
                lp.next(b.fma(x, y, lp.carried[0]))
            b.store(b.ptr_add(c, i * nn + j), lp.results[0])
    mod = cuda.load_hir(m)
    mm, nn, kk = 300, 257, 129
    a = rng.standard_normal((mm, kk)).astype(np.float32)
    bm = rng.standard_normal((kk, nn)).astype(np.float32)
    c = np.full((mm, nn), np.nan, np.float32)
    da, db, dc = cuda.to_device(a), cuda.to_device(bm), cuda.to_device(c)
    grid, block = launch_grid((mm, nn), (16, 16))
    mod.kernel("mm").launch(grid, block, da, db, dc, mm, nn, kk)
    cuda.synchronize()
    np.testing.assert_allclose(dc.to_host(), a.astype(np.float64) @ bm, rtol=1e-4, atol=1e-4)


def test_prange_kernel_on_gpu() -> None:
    @zyntax.kernel(workgroup=(16, 16), device="gpu")
    def scale_add(a, bias, out):
        for i, j in zyntax.lang.prange(a.shape[0], a.shape[1]):
            out[i, j] = a[i, j] * 3 + bias[j]

    rows, cols = 1000, 777
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    grid, block = scale_add.launch_grid(rows, cols)
    scale_add[grid, block](a, bias, out)
    np.testing.assert_allclose(out, a * np.float32(3) + bias, rtol=1e-6, atol=1e-6)
