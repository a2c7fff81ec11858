"""Bias and activation epilogues on the warp-specialised tile GEMM (issue 30):
``zyntax.kernels.matmul(..., variant="tile")`` with a bias and relu / GELU
runs the persistent TMA pipeline on sm_90a, the epilogue applied to the
wgmma accumulator in the consumers' registers (``lower/fuse.rs``). Each case
checks that the WS kernel ran (the compiled spec), against float64 torch on
fresh random inputs, output poisoned with NaN first: odd M (17, 1000, 4097),
bf16 and f16, f32 and low-precision outputs, a K not a multiple of 8 (TMA
refuses it: the cp.async pipeline runs the same epilogue). Skipped without
an sm_90 GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu
GELU_C = 0.7978845608028654
TOL = {"bf16": 2e-2, "f16": 2e-3, "f32": 1e-5}


@pytest.fixture(scope="module")
def torch() -> Any:
    t = pytest.importorskip("torch")
    if not t.cuda.is_available() or t.cuda.get_device_capability()[0] != 9:
        pytest.skip("the warp-specialised pipeline needs an sm_90 GPU")
    return t


def reference(torch: Any, a: Any, b: Any, bias: Any, act: str | None) -> Any:
    ref = torch.matmul(a.double(), b.double())
    if bias is not None:
        ref = ref + bias.double()
    if act == "relu":
        ref = ref.clamp_min(0.0)
    elif act == "gelu":
        ref = 0.5 * ref * (1.0 + torch.tanh(GELU_C * (ref + 0.044715 * ref**3)))
    return ref


def rand(torch: Any, *shape: int, dt: Any) -> Any:
    return (torch.randn(*shape, device="cuda") / shape[-1] ** 0.25).to(dt)


def run(
    torch: Any, monkeypatch: Any, m: int, n: int, k: int, dt: str, out_dt: str, bias: bool, act: Any
) -> list[Any]:
    """Runs one product; returns the specs compiled for it."""
    import zyntax.kernels as zk
    from zyntax.kernels import gemm_tile

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    specs: list[Any] = []
    program = gemm_tile.program

    def spy(s: Any) -> Any:
        specs.append(s)
        return program(s)

    monkeypatch.setattr(gemm_tile, "program", spy)
    gemm_tile._kernel.cache_clear()
    a, b = rand(torch, m, k, dt=tdt[dt]), rand(torch, k, n, dt=tdt[dt])
    bv = rand(torch, n, dt=tdt[dt]) if bias else None
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt[out_dt])
    zk.matmul(a, b, out, bias=bv, activation=act, variant="tile")
    got = out.double()
    assert not got.isnan().any(), "an output element was never written"
    ref = reference(torch, a, b, bv, act)
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < TOL[out_dt if out_dt != "f32" else dt], err
    gemm_tile._kernel.cache_clear()  # the spy's kernels are not kept
    return specs


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize(
    "m,n,k,ws", [(1000, 1000, 1000, True), (4097, 512, 512, True), (17, 3072, 1024, None)]
)
def test_ws_bias_activation(
    torch: Any, monkeypatch: Any, act: Any, dt: str, m: int, n: int, k: int, ws: Any
) -> None:
    # 1000^3: 64x128 tiles, 4097 rows: 128x128 ping-pong (the crate's WS
    # table; K at least the ring's 6 steps of 64); M = 17: split K (the
    # epilogue in the finishing pass).
    specs = run(torch, monkeypatch, m, n, k, dt, dt, True, act)
    if ws:
        assert [s.ws for s in specs] == [True], specs
        assert specs[0].bias == dt and specs[0].activation == act


@pytest.mark.parametrize("out_dt", ["f32", "bf16"])
def test_ws_activation_without_bias(torch: Any, monkeypatch: Any, out_dt: str) -> None:
    specs = run(torch, monkeypatch, 4097, 512, 512, "bf16", out_dt, False, "gelu")
    assert [s.ws for s in specs] == [True], specs


def test_odd_k_keeps_the_epilogue_off_tma(torch: Any, monkeypatch: Any) -> None:
    # K = 4097: a's rows are not 16-byte multiples, TMA refuses them.
    specs = run(torch, monkeypatch, 17, 1000, 4097, "bf16", "bf16", True, "gelu")
    assert specs and not any(s.ws for s in specs), specs
