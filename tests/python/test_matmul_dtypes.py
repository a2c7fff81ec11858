"""fp8 (e4m3, per-tensor scales) and tf32 products on the tile program without
a GPU (``matmul(..., variant="tile")``: the dot reads the fp8 bytes and the
tf32 values as wgmma does, on FFMA here) against float64 of the values the
tensor cores read, on fresh random inputs, outputs poisoned with NaN first;
the typed errors of the layouts wgmma cannot read."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zyntax import kernels
from zyntax.errors import ArgumentError

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = ml_dtypes.float8_e4m3fn


def fp8_operands(rng: Any, m: int, n: int, k: int, wide: bool) -> tuple[Any, Any]:
    """a (M, K) row-major, b (K, N) the transpose of an (N, K) array: every
    finite e4m3 byte (`wide`: subnormals and the largest values too)."""

    def draw(r: int, c: int) -> Any:
        if wide:
            bits = rng.integers(0, 256, (r, c), dtype=np.uint8)
            bits[(bits & 0x7F) == 0x7F] = 0x38  # no NaNs (S.1111.111): 1.0
            return bits.view(E4M3)
        return rng.standard_normal((r, c)).astype(E4M3)

    return draw(m, k), draw(n, k).T


@pytest.mark.parametrize("m,n,k", [(1, 17, 33), (17, 40, 100), (33, 20, 130)])
@pytest.mark.parametrize("wide", [False, True])
def test_e4m3_scaled(m: int, n: int, k: int, wide: bool) -> None:
    rng = np.random.default_rng()
    a, b = fp8_operands(rng, m, n, k, wide)
    out = np.full((m, n), np.nan, np.float32)
    kernels.matmul(a, b, out, variant="tile", scale_a=0.5, scale_b=3.0)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * 1.5
    # f32 accumulation of K products: K roundings of the running magnitude.
    size = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) * 1.5
    assert not np.isnan(out).any()
    assert np.all(np.abs(out - ref) <= k * 1.2e-7 * np.maximum(size, 1.0))


def test_e4m3_bias_relu_f16_out() -> None:
    rng = np.random.default_rng()
    m, n, k = 9, 24, 64
    a, b = fp8_operands(rng, m, n, k, False)
    bias = rng.standard_normal(n).astype(np.float32)
    out = np.full((m, n), np.nan, np.float16)
    kernels.matmul(
        a, b, out, variant="tile", bias=bias, activation="relu", scale_a=1.0, scale_b=0.25
    )
    ref = np.maximum((a.astype(np.float64) @ b.astype(np.float64)) * 0.25 + bias, 0.0)
    np.testing.assert_allclose(out, ref, rtol=2e-3, atol=2e-3)


def test_tf32_reads_truncated_f32() -> None:
    rng = np.random.default_rng()
    m, n, k = 20, 33, 70
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T
    out = np.full((m, n), np.nan, np.float32)
    kernels.matmul(a, b, out, variant="tile", allow_tf32=True)

    def read(x: Any) -> Any:
        return (np.ascontiguousarray(x).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

    ref = read(a).astype(np.float64) @ read(b).astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    # The exact product differs by more than the accumulation error: the
    # operands really were read as tf32.
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - exact).max() > 10 * np.abs(out - ref).max()


def test_layouts_wgmma_cannot_read_are_typed_errors() -> None:
    rng = np.random.default_rng()
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)  # row-major: N-major
    with pytest.raises(ArgumentError, match="K-major"):
        kernels.matmul(a, b, variant="tile", allow_tf32=True)
    with pytest.raises(ArgumentError, match="K-major"):
        kernels.matmul(
            a.astype(E4M3),
            b.astype(E4M3),
            variant="tile",
            scale_a=1.0,
            scale_b=1.0,
            out_dtype="f32",
        )
    with pytest.raises(ArgumentError, match="pairs"):
        kernels.matmul(a.astype(E4M3), b.T.astype(E4M3).T, variant="tile", scale_a=1.0)


def test_e4m3_scaled_split_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """K split in 3 (the f32 partials are scaled, then summed by the second pass)."""
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "FORCE", ((16, 16, 16, 2, 1), 3))
    rng = np.random.default_rng()
    m, n, k = 5, 20, 90
    a, b = fp8_operands(rng, m, n, k, False)
    out = np.full((m, n), np.nan, np.float32)
    kernels.matmul(a, b, out, variant="tile", scale_a=0.25, scale_b=2.0)
    ref = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
