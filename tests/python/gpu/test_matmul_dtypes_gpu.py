"""fp8 (e4m3, per-tensor scales) and tf32 products on the tile program
(``matmul(..., variant="tile")``: wgmma ``.e4m3`` k32 / ``.tf32`` k8, both
operands K-major) against float64 of the values the tensor cores read (the
fp8 inputs themselves; f32 with the low 13 mantissa bits dropped), outputs
poisoned with NaN first, odd sizes. Skipped without a GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch() -> Any:
    t = pytest.importorskip("torch")
    if not t.cuda.is_available() or t.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma needs an sm_90 GPU")
    return t


def tf32_read(torch: Any, x: Any) -> Any:
    """`x` (f32) as the tensor cores read it: the low 13 mantissa bits dropped."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def fp8_tol(k: int) -> float:
    """Relative error of an fp8 product with an f32 output: Hopper's fp8
    wgmma keeps fewer accumulator bits than f32 (DeepSeek-V3 reports ~14 on
    H800; session 12 B1 on an H200: 6.5e-5 at K = 48, 5.3e-4 at K = 1000,
    1.3e-3 at K = 4096, the hand-written sm90 kernel alike), so the bound
    grows with K; about 3x what was measured."""
    return 1e-4 + 1e-6 * k


def rel_err(torch: Any, out: Any, ref: Any) -> float:
    got = out.double()
    assert not got.isnan().any(), "an output element was never written"
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def fp8_operands(torch: Any, m: int, n: int, k: int) -> tuple[Any, Any]:
    """a (M, K) row-major and b (K, N) as the transpose of an (N, K) matrix."""
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
    return a, b


# 4097 rows: K tails and M/N tails; 1000: a K that is not a whole stage (128);
# 4096^2 x 4096: the warp-specialised persistent route; 17 x 33 x 48: K
# shorter than the ring (the cp.async pipeline).
SHAPES = [(17, 33, 48), (1000, 1000, 1000), (4097, 1024, 1000), (256, 4096, 4096), (4096,) * 3]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("out_dtype", ["bf16", "f32"])
def test_e4m3_scaled(torch: Any, m: int, n: int, k: int, out_dtype: str) -> None:
    from zyntax import kernels

    a, b = fp8_operands(torch, m, n, k)
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[out_dtype]
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
    sa, sb = 0.5, 3.0
    kernels.matmul(a, b, out, variant="tile", scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()) * (sa * sb)
    err = rel_err(torch, out, ref)
    assert err < (1e-2 if out_dtype == "bf16" else fp8_tol(k)), err


def test_e4m3_bias_relu(torch: Any) -> None:
    from zyntax import kernels

    m, n, k = 300, 384, 640
    a, b = fp8_operands(torch, m, n, k)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    kernels.matmul(
        a, b, out, variant="tile", bias=bias, activation="relu", scale_a=2.0, scale_b=0.25
    )
    torch.cuda.synchronize()
    ref = ((a.double() @ b.double()) * 0.5 + bias.double()).clamp_min(0.0)
    assert rel_err(torch, out, ref) < fp8_tol(k)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_tf32(torch: Any, m: int, n: int, k: int) -> None:
    from zyntax import kernels

    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda").t()
    out = torch.full((m, n), float("nan"), device="cuda")
    kernels.matmul(a, b, out, variant="tile", allow_tf32=True)
    torch.cuda.synchronize()
    ref = tf32_read(torch, a).double() @ tf32_read(torch, b.contiguous()).double()
    assert rel_err(torch, out, ref) < 1e-5


def test_fp8_and_tf32_need_k_major_operands(torch: Any) -> None:
    from zyntax import kernels
    from zyntax.errors import ArgumentError

    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(ArgumentError, match="K-major"):
        kernels.matmul(a, a, variant="tile", allow_tf32=True)  # b row-major
    f8 = a.to(torch.float8_e4m3fn)
    with pytest.raises(ArgumentError, match="K-major"):
        kernels.matmul(f8, f8, variant="tile", scale_a=1.0, scale_b=1.0)
