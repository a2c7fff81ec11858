"""Kernel fusion on the GPU: the fused and unfused programs of zyntax.fusion
against numpy on fresh random inputs (f32 chain, bf16 bias-gelu-rowsum)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from test_fusion import chain  # the CPU suite's sequence, one copy
from zyntax import cuda, fusion, hir

pytestmark = pytest.mark.gpu
F32 = np.float32


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


@pytest.mark.parametrize("enabled", [True, False])
def test_chain_program(enabled: bool) -> None:
    n, length = 100_003, 8
    f = chain(n, length).fuse(enabled=enabled)
    assert len(f.kernels) == (1 if enabled else length)
    xh = rng().standard_normal(n).astype(F32)
    x, y = cuda.to_device(xh), cuda.to_device(np.full(n, np.nan, F32))
    ex = f.program().prepare({"x": x, "y": y}, warmup=1)
    ex.run(2)
    ex.synchronize()
    want = xh.astype(np.float64)
    for k in range(length):
        want = want * (1.0 + 0.25 * k) + (0.5 - 0.1 * k)
        if k % 2:
            want = want + xh
    np.testing.assert_allclose(y.to_host(), want, rtol=1e-5, atol=1e-5)


def bf16(a: np.ndarray) -> np.ndarray:
    u = a.astype(F32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def unbf16(b: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(b).view(np.uint16).astype(np.uint32) << 16).view(F32)


def bf16_device(bits: np.ndarray) -> cuda.DeviceArray:
    """A bf16 DeviceArray holding these bf16 bit patterns."""
    d = cuda.empty(bits.shape, "bf16")
    d.copy_from_host(bits)
    return d


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("cols", [257, 520, 1024])  # scalar; vector runs + tail; unrolled runs
def test_bias_gelu_rowsum_bf16_program(enabled: bool, cols: int) -> None:
    rows = 300
    s = fusion.Sequence("bgr")
    x = s.input("x", (rows, cols), hir.bf16)
    bias = s.input("bias", cols, hir.bf16)
    y = s.output("y", (rows, cols), hir.bf16)
    sums = s.output("sums", rows, hir.f32)

    def bias_gelu(e: Any) -> Any:
        v = e.b.cast(e[x], hir.f32) + e.b.cast(e.load(bias, e.point[1]), hir.f32)
        u = (v + v * v * v * 0.044715) * 0.7978845608028654
        return v * 0.5 * (e.b.tanh(u) + 1.0)

    s.map("bias_gelu", y, bias_gelu)
    s.reduce("rowsum", sums, cols, lambda e: e.b.cast(e[y], hir.f32))
    f = s.fuse(enabled=enabled)
    assert len(f.kernels) == (1 if enabled else 2)
    r = rng()
    xb, bb = bf16(r.standard_normal((rows, cols))), bf16(r.standard_normal(cols))
    binds = {
        "x": bf16_device(xb),
        "bias": bf16_device(bb),
        "y": bf16_device(np.full((rows, cols), 0x7FC0, np.uint16)),  # NaN
        "sums": cuda.to_device(np.full(rows, np.nan, F32)),
    }
    ex = f.program().prepare(binds, warmup=None)
    ex.run()
    ex.synchronize()
    v = unbf16(xb).astype(np.float64) + unbf16(bb)
    want_y = 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))
    got_y = unbf16(binds["y"].to_host())
    np.testing.assert_allclose(got_y, want_y, rtol=1e-2, atol=1e-2)
    # The sums add the stored (bf16-rounded) y in f32.
    np.testing.assert_allclose(
        binds["sums"].to_host(), got_y.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3
    )
