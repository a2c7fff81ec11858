"""zyntax.tiling.nest_to_tile on the GPU: the nests of
tests/python/test_nest_tile.py at larger sizes, launched through zyntax.cuda
with device arrays, against float64 numpy on fresh random inputs with outputs
poisoned (NaN) first."""

from __future__ import annotations

import numpy as np
import pytest

from test_nest_tile import fused_spec, gelu64, map_spec, matmul_spec, nan, rand  # the CPU suite's
from zyntax.tiling import nest_to_tile

SIZES = [(1000, 1000, 512), (257, 129, 300)]


@pytest.fixture(scope="module")
def cuda():  # type: ignore[no-untyped-def]
    from zyntax import cuda

    return cuda


@pytest.mark.parametrize(("m", "n", "k"), SIZES)
@pytest.mark.parametrize("a_transposed", [False, True])
def test_matmul_gpu(cuda, m: int, n: int, k: int, a_transposed: bool) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(matmul_spec(m, n, k, a_transposed=a_transposed), arch=cuda.device_arch())
    assert nt.kind == "contraction", nt.report
    a = rand(k, m) if a_transposed else rand(m, k)
    b = rand(k, n)
    dc = cuda.to_device(nan(m, n))
    nt.launch(cuda.to_device(a), cuda.to_device(b), dc)
    a64 = (a.T if a_transposed else a).astype(np.float64)
    want = a64 @ b.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize(("m", "n", "k"), SIZES)
def test_matmul_bias_gelu_residual_gpu(cuda, m: int, n: int, k: int) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(fused_spec(m, n, k), arch=cuda.device_arch())
    assert nt.kind == "contraction", nt.report
    a, b, bias, r = rand(m, k), rand(k, n), rand(n), rand(m, n)
    dc = cuda.to_device(nan(m, n))
    ins = [cuda.to_device(x) for x in (a, b)]
    nt.launch(*ins, dc, cuda.to_device(bias), cuda.to_device(r))
    acc = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    want = gelu64(acc) + r.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize(("m", "n"), [(1000, 1000), (257, 129)])
def test_map_with_tails_gpu(cuda, m: int, n: int) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(map_spec(m, n), arch=cuda.device_arch())
    assert nt.kind == "map", nt.report
    x, bias = rand(m, n), rand(n)
    dy = cuda.to_device(nan(m, n))
    nt.launch(cuda.to_device(x), cuda.to_device(bias), dy)
    want = np.exp(x.astype(np.float64)) * 0.5 + bias.astype(np.float64)
    np.testing.assert_allclose(dy.to_host(), want, rtol=1e-5, atol=1e-6)
