"""zyntax.kernels memory-bound kernels on the reference interpreter (numpy
inputs): float64 references on fresh random inputs, odd sizes, extreme
values, outputs poisoned first; bad input raises typed errors naming the
argument. The same kernels on the GPU: tests/python/gpu/test_memory_bound_gpu.py."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import ArgumentError, kernels

# The modules (the package exports functions of the same names).
rows_tile = importlib.import_module("zyntax.kernels.rows_tile")
elementwise = importlib.import_module("zyntax.kernels.elementwise")

rng = np.random.default_rng()


def rel_err(out: Any, ref: Any) -> float:
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "NaN in the output (an element not written?)"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def ref_softmax(x: Any) -> Any:
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(3, 37), (2, 300), (1, 4), (5, 129), (4, 2, 24)])
def test_softmax_f32(shape: tuple[int, ...]) -> None:
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    assert kernels.softmax(x, out=out) is out
    assert rel_err(out, ref_softmax(x)) < 1e-5


def test_softmax_extreme_values() -> None:
    x = (rng.standard_normal((4, 67)) * 30 + 1e4).astype(np.float32)
    x[1, ::3] = -np.inf  # masked entries
    x[2, 5] = 3e38  # one dominant logit
    out = kernels.softmax(x)
    ref = ref_softmax(x)
    assert rel_err(out, ref) < 1e-5
    assert np.all(out[1, ::3] == 0)
    row = np.full((1, 40), -np.inf, np.float32)
    assert np.isnan(kernels.softmax(row)).all()  # as PyTorch: a row of -inf is NaN


def test_softmax_streaming_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows too long for registers take the online (max, sum) path."""
    monkeypatch.setattr(rows_tile, "ROWS_MAX", 0)
    monkeypatch.setattr(rows_tile, "ROW_MAX", 0)
    monkeypatch.setattr(rows_tile, "CHUNK", 64)
    x = (rng.standard_normal((3, 203)) * 5).astype(np.float32)
    x[0, :100] = -np.inf
    out = np.full_like(x, np.nan)
    kernels.softmax(x, out=out)
    assert rel_err(out, ref_softmax(x)) < 1e-5


def test_softmax_bf16() -> None:
    ml = pytest.importorskip("ml_dtypes")
    x = rng.standard_normal((3, 136)).astype(ml.bfloat16)
    out = kernels.softmax(x)
    assert out.dtype == x.dtype
    assert rel_err(out.astype(np.float64), ref_softmax(x.astype(np.float64))) < 1e-2


def ref_layer_norm(x: Any, w: Any, b: Any, eps: float) -> Any:
    x = np.asarray(x, np.float64)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * w
    return y if b is None else y + b


@pytest.mark.parametrize("n", [37, 64, 301])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm(n: int, bias: bool) -> None:
    x = (rng.standard_normal((3, n)) * 3 + 100).astype(np.float32)  # a large mean
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    out = np.full_like(x, np.nan)
    kernels.layer_norm(x, w, b, 1e-5, out=out)
    assert rel_err(out, ref_layer_norm(x, w, b, 1e-5)) < 1e-5


def test_rms_norm_and_streaming(monkeypatch: pytest.MonkeyPatch) -> None:
    x = rng.standard_normal((4, 75)).astype(np.float32)
    w = rng.standard_normal(75).astype(np.float32)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    assert rel_err(kernels.rms_norm(x, w, 1e-6), ref) < 1e-5
    monkeypatch.setattr(rows_tile, "ROWS_MAX", 0)
    monkeypatch.setattr(rows_tile, "ROW_MAX", 0)
    monkeypatch.setattr(rows_tile, "CHUNK", 64)
    assert rel_err(kernels.rms_norm(x, w, 1e-6), ref) < 1e-5
    b = rng.standard_normal(75).astype(np.float32)
    assert rel_err(kernels.layer_norm(x, w, b, 1e-5), ref_layer_norm(x, w, b, 1e-5)) < 1e-5


@pytest.mark.parametrize("shape", [(5, 33), (2, 256), (1, 1)])
def test_row_reductions(shape: tuple[int, int]) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.full(shape[:-1], np.nan, np.float32)
    kernels.reduce_sum(x, axis=-1, out=out)
    assert np.allclose(out, x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
    assert np.array_equal(kernels.reduce_max(x, axis=-1), x.max(-1))


@pytest.mark.parametrize("n", [1, 7, 1000, 4099])
def test_full_reductions(n: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.integers(0, n)] = 50.0
    s = kernels.reduce_sum(x)
    assert s.shape == ()
    assert abs(float(s) - x.astype(np.float64).sum()) < 1e-4 * max(1.0, np.abs(x).sum())
    assert float(kernels.reduce_max(x)) == x.max()
    xm = x[: (n // 2) * 2].reshape(2, -1)[:, ::-1] if n > 1 else x  # not contiguous
    assert abs(float(kernels.reduce_sum(xm)) - xm.astype(np.float64).sum()) < 1e-3


def ref_cross_entropy(x: Any, t: Any) -> Any:
    x = np.asarray(x, np.float64)
    m = x.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]
    return lse - np.take_along_axis(x, t[..., None].astype(np.int64), -1)[..., 0]


@pytest.mark.parametrize("tdtype", [np.int64, np.int32])
def test_cross_entropy(tdtype: Any) -> None:
    x = (rng.standard_normal((6, 301)) * 8).astype(np.float32)
    x[2, :150] = -np.inf
    t = rng.integers(0, 301, 6).astype(tdtype)
    t[2] = 200
    out = np.full(6, np.nan, np.float32)
    kernels.cross_entropy(x, t, out=out)
    ref = ref_cross_entropy(x, t)
    assert rel_err(out, ref) < 1e-5
    mean = kernels.cross_entropy(x, t, reduction="mean")
    assert abs(float(mean) - ref.mean()) < 1e-4 * abs(ref.mean())
    t[0] = 301  # out of range
    assert np.isnan(kernels.cross_entropy(x, t)[0])


@pytest.mark.parametrize("n", [1, 13, 2048, 3001])
def test_saxpy(n: int) -> None:
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    y0 = y.copy()
    assert kernels.saxpy(1.5, x, y) is y
    assert np.allclose(y, 1.5 * x.astype(np.float64) + y0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "cache", [(None, None, "cs"), ("lu", "cs", "wt"), ("evict_first", "evict_last", "evict_first")]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_saxpy_cache_operators(
    cache: tuple[str | None, ...], dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """elementwise.CACHE (the bench's variant rows): the same values through
    load_cached / store_cached, tails included."""
    monkeypatch.setattr(elementwise, "CACHE", cache)
    n = 4099
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    ref = 1.5 * x.astype(np.float64) + y
    kernels.saxpy(1.5, x, y)
    tol = 1e-6 if dtype == np.float32 else 2e-3
    assert np.allclose(y, ref, rtol=tol, atol=tol)
    if dtype == np.float32:
        ptx = zyntax.compile(
            elementwise._build("f32", 4, 512, 4, cache), backend="nvptx", arch="sm_90"
        )
        zyntax.validate_ptx(ptx, "sm_90")
        for op in (c for c in cache if c and not c.startswith("evict")):
            assert f".{op}.v4.f32" in ptx


@pytest.mark.parametrize(
    "knobs",
    [
        {"GRID_STRIDE": True},
        {"UNROLL": 4},
        {"UNROLL": 1, "THREADS": 64},
        {"UNROLL": 8, "THREADS": 32},
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_saxpy_launch_shapes(
    knobs: dict[str, Any], dtype: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch shapes the bench times (grid-stride, other unrolls and
    block sizes): whole chunks, a partial last one, a tail of single
    elements, and a misaligned view (one element a vector)."""
    for k, v in knobs.items():
        monkeypatch.setattr(elementwise, k, v)
    tol = 1e-6 if dtype == np.float32 else 2e-3
    for n in (3, 2 * 8 * 64 * 4 + 7, 1000):
        x = rng.standard_normal(n + 1).astype(dtype)[1:]  # misaligned: scalar lanes
        for xs in (x, np.ascontiguousarray(x)):
            y = rng.standard_normal(n).astype(dtype)
            ref = 1.5 * xs.astype(np.float64) + y
            kernels.saxpy(1.5, xs, y)
            assert np.allclose(y, ref, rtol=tol, atol=tol)


def test_bad_input_names_the_argument() -> None:
    x = rng.standard_normal((2, 8)).astype(np.float32)
    with pytest.raises(ArgumentError, match=r"'x'.*float64"):
        kernels.softmax(x.astype(np.float64))
    with pytest.raises(ArgumentError, match="'x'"):
        kernels.softmax([[1.0, 2.0]])
    with pytest.raises(ArgumentError, match="'out'"):
        kernels.softmax(x, out=np.empty((2, 9), np.float32))
    with pytest.raises(ArgumentError, match="'weight'"):
        kernels.layer_norm(x, np.ones(7, np.float32), None)
    with pytest.raises(ArgumentError, match="'bias'"):
        kernels.layer_norm(x, np.ones(8, np.float32), np.ones(8, np.float16))
    with pytest.raises(ArgumentError, match="'eps'"):
        kernels.rms_norm(x, np.ones(8, np.float32), eps=-1.0)
    with pytest.raises(ArgumentError, match="'targets'"):
        kernels.cross_entropy(x, np.zeros(2, np.float32))
    with pytest.raises(ArgumentError, match="'targets'"):
        kernels.cross_entropy(x, np.zeros(3, np.int64))
    with pytest.raises(ArgumentError, match="'reduction'"):
        kernels.cross_entropy(x, np.zeros(2, np.int64), reduction="sum")
    with pytest.raises(ArgumentError, match="'axis'"):
        kernels.reduce_sum(x, axis=0)
    with pytest.raises(ArgumentError, match="'y'"):
        kernels.saxpy(2.0, x[0], np.ones(9, np.float32))
    with pytest.raises(ArgumentError, match="'a'"):
        kernels.saxpy("2", x[0], x[1].copy())
