"""Small-M matmuls on the GPU (decode and small batches, issue 30): the rows
``zyntax.kernels.matmul`` sends to the gemv program (``gemv_tile``, one
row) and to the tensor-core split-K route, at M in {1, 3, 16, 17, 64,
200, 256} with odd N and K, a transposed weight and epilogues, against
float64 torch on fresh random inputs, outputs poisoned with NaN first.
Skipped without a GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu
GELU_C = 0.7978845608028654
TOL = {"bf16": 2e-2, "f16": 2e-3, "f32": 1e-5}


@pytest.fixture(scope="module")
def torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch


def tdt(torch: Any, dt: str) -> Any:
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]


def rand(torch: Any, *shape: int, dt: str = "bf16") -> Any:
    return (torch.randn(*shape, device="cuda") / shape[-1] ** 0.25).to(tdt(torch, dt))


def check(out: Any, ref: Any, dt: str) -> None:
    got = out.double()
    assert not got.isnan().any(), "an output element was never written"
    err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    assert err < TOL[dt], err
    # element by element too (one wrong column hides in a norm)
    worst = ((got - ref).abs() / ref.abs().max().clamp_min(1e-30)).max()
    assert worst.item() < 4 * TOL[dt], (worst.item(), int((got - ref).abs().argmax()))


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("m", [1, 3, 16, 17, 64, 200, 256])
@pytest.mark.parametrize("n,k", [(4097, 1000), (1000, 4100)])
def test_library_route(torch: Any, dt: str, m: int, n: int, k: int) -> None:
    import zyntax.kernels as zk

    a, b = rand(torch, m, k, dt=dt), rand(torch, k, n, dt=dt)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt(torch, dt))
    zk.matmul(a, b, out)
    check(out, a.double() @ b.double(), dt)
    out.fill_(float("nan"))
    zk.matmul(a, b, out)  # the repeated call replays its plan
    check(out, a.double() @ b.double(), dt)


@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_gemv_program(torch: Any, dt: str) -> None:
    """The gemv program (one row): row-major b, a transposed (N, K) weight,
    an odd K and a bias with GELU."""
    from zyntax.kernels import gemm_tile, gemv_tile

    m = 1
    assert gemv_tile.applies(m, (1, 1, 1), None)
    a, b = rand(torch, m, 4100, dt=dt), rand(torch, 4100, 515, dt=dt)
    w = rand(torch, 515, 4100, dt=dt)
    out = torch.full((m, 515), float("nan"), device="cuda", dtype=tdt(torch, dt))
    gemm_tile.matmul(a, b, out)
    check(out, a.double() @ b.double(), dt)
    out.fill_(float("nan"))
    gemm_tile.matmul(a, w.t(), out)
    check(out, a.double() @ w.double().t(), dt)
    bias = rand(torch, 515, dt=dt)
    out.fill_(float("nan"))
    gemm_tile.matmul(a, b, out, bias=bias, activation="gelu")
    r = a.double() @ b.double() + bias.double()
    check(out, 0.5 * r * (1.0 + torch.tanh(GELU_C * (r + 0.044715 * r**3))), dt)


@pytest.mark.parametrize("m", [136, 200, 256])
@pytest.mark.parametrize("n,k", [(4000, 8300), (6100, 4096)])
def test_mid_rows(torch: Any, m: int, n: int, k: int) -> None:
    """129 to 256 rows: a long K splits 128x128 tiles on the warp-specialised
    split route; N = 6100 takes the 128x128 tile over 8 warps unsplit."""
    import zyntax.kernels as zk

    a, b = rand(torch, m, k), rand(torch, k, n)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    zk.matmul(a, b, out)
    check(out, a.double() @ b.double(), "bf16")


def gelu(torch: Any, r: Any) -> Any:
    return 0.5 * r * (1.0 + torch.tanh(GELU_C * (r + 0.044715 * r**3)))


@pytest.mark.parametrize("m", [1, 3, 16, 17, 64, 128, 200, 256])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_library_route_epilogues(torch: Any, m: int, act: str | None) -> None:
    """Bias (and GELU) through every small-M route: the gemv program's own
    epilogue or the finishing pass of a split (odd N and K)."""
    import zyntax.kernels as zk

    n, k = 1031, 3000
    a, b, bias = rand(torch, m, k), rand(torch, k, n), rand(torch, n)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    zk.matmul(a, b, out, bias=bias, activation=act)
    r = a.double() @ b.double() + bias.double()
    check(out, gelu(torch, r) if act else r, "bf16")


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("force", [((256, 32, 8), 0), ((16, 128, 4), 8), ((32, 128, 4), 4)])
def test_gemv_schedules(torch: Any, monkeypatch: Any, prefetch: bool, force: Any) -> None:
    """The gemv program unsplit (its own epilogue) and split, with and
    without the next slab loaded ahead, at an odd N and K, with a bias."""
    from zyntax.kernels import gemm_tile, gemv_tile

    monkeypatch.setattr(gemv_tile, "GEMV_FORCE", force)
    monkeypatch.setattr(gemv_tile, "GEMV_PREFETCH", prefetch)
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    a, b, bias = rand(torch, 1, 4100), rand(torch, 4100, 4099), rand(torch, 4099)
    out = torch.full((1, 4099), float("nan"), device="cuda", dtype=torch.bfloat16)
    try:
        gemm_tile.matmul(a, b, out, bias=bias, activation="relu")
    finally:
        gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    check(out, (a.double() @ b.double() + bias.double()).clamp_min(0), "bf16")


@pytest.mark.parametrize("splits", [2, 3, 17, 40])
def test_split_finish(torch: Any, monkeypatch: Any, splits: int) -> None:
    """The finishing pass sums a power of two of splits in one load (rows past
    the splits masked) over rows of M * N that cross row ends (odd N)."""
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "FORCE", ((64, 128, 64, 4, 4), splits))
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    m, n, k = 17, 1001, 64 * 4 * 40
    a, b, bias = rand(torch, m, k), rand(torch, k, n), rand(torch, n)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    try:
        gemm_tile.matmul(a, b, out, bias=bias)
    finally:
        gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    check(out, a.double() @ b.double() + bias.double(), "bf16")
