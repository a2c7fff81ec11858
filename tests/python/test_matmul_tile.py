"""The tile-program matmul (``zyntax.kernels.gemm_tile``) on numpy inputs (this
CPU, or the reference interpreter for tensor-core code): every dtype, odd
sizes, epilogues, split K, batched with broadcasting, grouped products, and
the typed errors. Results against float64 on fresh random inputs; outputs
poisoned with NaN first. The GPU versions: tests/python/gpu/test_matmul_tile_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax.kernels as zk
from zyntax.errors import ArgumentError
from zyntax.kernels import gemm_tile

rng = np.random.default_rng()
TOL = {np.float32: 1e-5, np.float16: 2e-3}


def ref_mm(a: Any, b: Any, bias: Any = None, act: str | None = None) -> Any:
    r = np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))
    if bias is not None:
        r = r + np.asarray(bias, np.float64)
    if act == "relu":
        r = np.maximum(r, 0.0)
    elif act == "gelu":
        r = 0.5 * r * (1.0 + np.tanh(gemm_tile.GELU_C * (r + 0.044715 * r**3)))
    return r


def check(out: Any, ref: Any, dt: Any) -> None:
    got = np.asarray(out, np.float64)
    assert got.shape == ref.shape
    assert not np.isnan(got).any(), "an output element was never written"
    err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
    assert err < TOL[dt], err


def rand(*shape: int, dt: Any = np.float32) -> Any:
    return rng.standard_normal(shape).astype(dt)


def nan(*shape: int, dt: Any = np.float32) -> Any:
    return np.full(shape, np.nan, dt)


@pytest.fixture(params=["sm_80", "sm_90a"])
def host_arch(request: Any, monkeypatch: Any) -> str:
    """The code the host runs: mma.sync (sm_80) or the wgmma pipeline (sm_90a)."""
    monkeypatch.setattr(gemm_tile, "HOST_ARCH", request.param)
    return str(request.param)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 33, 9), (1, 40, 300), (70, 17, 130)])
def test_shapes(host_arch: str, dt: Any, m: int, n: int, k: int) -> None:
    a, b = rand(m, k, dt=dt), rand(k, n, dt=dt)
    out = nan(m, n, dt=dt)
    zk.matmul(a, b, out, variant="tile")
    check(out, ref_mm(a, b), dt)


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_epilogue_and_split(act: str | None) -> None:
    # M = 5, K = 400 on the host's 4-SM grid: split into K chunks, summed by a second pass
    a, b, bias = rand(5, 400), rand(400, 24), rand(24)
    _, splits = gemm_tile.schedule("f32", 5, 24, 400, 1, "sm_80", 4)
    assert splits > 1
    out = nan(5, 24)
    zk.matmul(a, b, out, bias=bias, activation=act, variant="tile")
    check(out, ref_mm(a, b, bias, act), np.float32)


def test_out_dtype() -> None:
    a, b = rand(17, 40, dt=np.float16), rand(40, 9, dt=np.float16)
    out = gemm_tile.matmul(a, b, out_dtype="f32")
    assert out.dtype == np.float32
    check(out, ref_mm(a, b), np.float16)


def test_out_names_the_output_dtype() -> None:
    # An f32 `out` for f16 operands, no out_dtype: the output is f32 (as the
    # other matmul variants; the H200 suite found the tile route refusing it).
    a, b = rand(17, 40, dt=np.float16), rand(40, 9, dt=np.float16)
    out = np.full((17, 9), np.nan, np.float32)
    assert gemm_tile.matmul(a, b, out) is out
    check(out, ref_mm(a, b), np.float16)
    with pytest.raises(ArgumentError, match="argument 'out'"):
        gemm_tile.matmul(a, b, np.zeros((17, 9), np.int32))


@pytest.mark.parametrize(
    "sa,sb",
    [((3, 17, 20), (20, 24)), ((3, 17, 20), (3, 20, 24)), ((1, 17, 64), (4, 64, 24)),
     ((17, 64), (2, 64, 8)), ((2, 70, 64), (2, 64, 40))],
)  # fmt: skip
def test_batched(host_arch: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = rand(*sa, dt=np.float16), rand(*sb, dt=np.float16)
    got = zk.matmul(a, b)
    assert zk.choose_variant(a, b) == "tile"
    check(got, ref_mm(a, b), np.float16)


def test_batched_out_and_bias() -> None:
    a, b, bias = rand(2, 9, 33), rand(2, 33, 7), rand(7)
    out = nan(2, 9, 7)
    assert zk.matmul(a, b, out, bias=bias, activation="relu") is out
    check(out, ref_mm(a, b, bias, "relu"), np.float32)


@pytest.mark.parametrize("sizes", [(5, 0, 17, 3), (1,), (64, 65, 1)])
def test_grouped(host_arch: str, sizes: tuple[int, ...]) -> None:
    a, b = rand(sum(sizes), 64, dt=np.float16), rand(len(sizes), 64, 24, dt=np.float16)
    out = nan(sum(sizes), 24, dt=np.float16)
    zk.grouped_matmul(a, b, sizes, out)
    starts = np.cumsum((0, *sizes[:-1]))
    parts = [ref_mm(a[s : s + g], b[i]) for i, (s, g) in enumerate(zip(starts, sizes, strict=True))]
    check(out, np.concatenate(parts), np.float16)


def test_grouped_k_tail() -> None:
    """K not a multiple of the K step: b stays a 3-D view (no fold into rows)."""
    sizes = (7, 20)
    a, b, bias = rand(27, 30), rand(2, 30, 5), rand(5)
    out = zk.grouped_matmul(a, b, list(sizes), bias=bias, activation="gelu")
    ref = np.concatenate([ref_mm(a[:7], b[0], bias, "gelu"), ref_mm(a[7:], b[1], bias, "gelu")])
    check(out, ref, np.float32)


def test_errors() -> None:
    a, b = rand(4, 8), rand(8, 5)
    with pytest.raises(ArgumentError, match="argument 'b'"):
        gemm_tile.matmul(a, rand(7, 5))
    with pytest.raises(ArgumentError, match="argument 'b'"):
        gemm_tile.matmul(a, b.astype(np.float16))
    with pytest.raises(ArgumentError, match=r"argument 'b'.*broadcast"):
        gemm_tile.matmul(rand(2, 4, 8), rand(3, 8, 5))
    with pytest.raises(ArgumentError, match="argument 'a'"):
        gemm_tile.matmul(rand(1, 2, 4, 8), b)
    with pytest.raises(ArgumentError, match="argument 'bias'"):
        gemm_tile.matmul(a, b, bias=rand(4))
    with pytest.raises(ArgumentError, match="argument 'activation'"):
        gemm_tile.matmul(a, b, activation="tanh")
    with pytest.raises(ArgumentError, match="argument 'out'"):
        gemm_tile.matmul(a, b, nan(4, 6))
    with pytest.raises(ArgumentError, match=r"argument 'a'.*batched"):
        zk.matmul(rand(2, 4, 8), b, variant="simt")
    with pytest.raises(ArgumentError, match="argument 'groups'"):
        zk.grouped_matmul(a, rand(2, 8, 5), (3, 2))
    with pytest.raises(ArgumentError, match="argument 'groups'"):
        zk.grouped_matmul(a, rand(2, 8, 5), (3,))
    with pytest.raises(ArgumentError, match="argument 'groups'"):
        zk.grouped_matmul(a, rand(2, 8, 5), "2,2")
    with pytest.raises(ArgumentError, match="argument 'b'"):
        zk.grouped_matmul(a, rand(8, 5), (4,))


def test_variant_tile_takes_any_strides() -> None:
    """A view with no unit stride (every other column) is accepted (on a GPU: read in place)."""
    a = rand(9, 40)[:, ::2]
    b = rand(20, 7)
    out = zk.matmul(a, b, variant="tile")
    check(out, ref_mm(a, b), np.float32)
    assert zk.choose_variant(a, b, variant="tile") == "tile"
    # tf32 reads both operands K-major (wgmma): b row-major is refused by name.
    with pytest.raises(ArgumentError, match="K-major"):
        zk.matmul(a, b, variant="tile", allow_tf32=True)
