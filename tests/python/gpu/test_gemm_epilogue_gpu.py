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


#: forced WS schedules (``gemm_tile.WS_FORCE``) for the TMA-store cases:
#: ping-pong 128x128 with 6 stages (one box buffer a set) and 5 (two), and
#: 128x256 over 8 warps (two buffers for four boxes)
TMA_SCHEDULES = {
    "pp_s6": ((128, 128, 4, 6), 1, True),
    "pp_s5": ((128, 128, 4, 5), 1, True),
    "coop_s4": ((128, 256, 8, 4), 1, False),
}


@pytest.mark.parametrize("sched", list(TMA_SCHEDULES))
@pytest.mark.parametrize(
    "m,n,k,out_dt,act",
    [
        (4097, 1000, 1024, "bf16", "gelu"),
        # 3000 rows: enough tiles that K is not split (1000 rows split K in two
        # since the small-M schedules of session 12, and split K stays off TMA)
        (3000, 264, 512, "f32", None),
        (777, 520, 448, "bf16", "relu"),
    ],
)
def test_tma_store(
    torch: Any, monkeypatch: Any, sched: str, m: int, n: int, k: int, out_dt: str, act: Any
) -> None:
    # The output through shared memory and TMA (gemm_tile.TMA_STORE): tails
    # in M and N (TMA clips the boxes), bf16 and f32 outputs.
    from zyntax.kernels import gemm, gemm_tile

    monkeypatch.setattr(gemm_tile, "TMA_STORE", True)
    monkeypatch.setattr(gemm_tile, "WS_FORCE", TMA_SCHEDULES[sched])

    def clear() -> None:
        # matmul's call plans replay the last case's kernel for the same shape
        gemm_tile.ws_schedule.cache_clear()
        gemm_tile.matmul.plans.clear()
        gemm._plans.clear()

    clear()
    try:
        specs = run(torch, monkeypatch, m, n, k, "bf16", out_dt, True, act)
    finally:
        clear()
    # Ping-pong sets keep the register stores (gemm_tile: the per-warpgroup
    # TMA store hung on 128x128 ping-pong in the session-14 GPU suite).
    pingpong = TMA_SCHEDULES[sched][2]
    assert [(s.ws, s.tma_store) for s in specs] == [(True, not pingpong)], specs


def test_tma_store_refused_rows_fall_back(torch: Any, monkeypatch: Any) -> None:
    # An output whose rows are not 16-byte multiples (a column slice of a
    # 1001-wide buffer) keeps the register stores; the rest of the buffer
    # stays untouched.
    import zyntax.kernels as zk
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "TMA_STORE", True)
    gemm_tile.matmul.plans.clear()
    zk.gemm._plans.clear()
    specs: list[Any] = []
    program = gemm_tile.program
    monkeypatch.setattr(gemm_tile, "program", lambda s: specs.append(s) or program(s))
    gemm_tile._kernel.cache_clear()
    a, b = rand(torch, 4097, 1024, dt=torch.bfloat16), rand(torch, 1024, 1000, dt=torch.bfloat16)
    bias = rand(torch, 1000, dt=torch.bfloat16)
    big = torch.full((4097, 1001), float("nan"), device="cuda", dtype=torch.bfloat16)
    zk.matmul(a, b, big[:, :1000], bias=bias, variant="tile")
    gemm_tile._kernel.cache_clear()
    gemm_tile.matmul.plans.clear()
    assert [(s.ws, s.tma_store) for s in specs] == [(True, False)], specs
    ref = reference(torch, a, b, bias, None)
    got = big[:, :1000].double()
    assert ((got - ref).norm() / ref.norm()).item() < TOL["bf16"]
    assert big[:, 1000].isnan().all()
