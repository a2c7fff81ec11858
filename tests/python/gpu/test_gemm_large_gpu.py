"""The tile GEMM's large-output schedules on the warp-specialised pipeline
(issue 30): cuBLAS's layer tile, 256x128 over two consumer warpgroups of
128x128 (two m64 wgmmas each), alone and in clusters of two along N (the
256-row ``a`` tile loaded half by each CTA with TMA multicast) or along M
(sharing ``b``), and 128x256 in clusters along M; each forced with
``gemm_tile.WS_FORCE`` through ``zyntax.kernels.matmul(variant="tile")``
and checked against float64 torch on fresh random inputs, the output
poisoned with NaN first: tails in M and N (a partial cluster unit at 4097
rows), bias, relu and GELU epilogues, bf16 and f32 outputs, the output
stored through TMA and from registers; and the library's default route on
transposed and sliced operands (``A.T @ B``, ``A @ W.T``, a column slice of
A: the training step's weight- and input-gradient shapes among them).
Skipped without an sm_90 GPU."""

from __future__ import annotations

from typing import Any

import pytest
from test_gemm_epilogue_gpu import TOL, rand, reference, run, torch  # noqa: F401 (torch: fixture)

pytestmark = pytest.mark.gpu

#: ((bm, bn, warps, stages), wgmma groups in flight, ping-pong, CTAs per
#: cluster, cluster along N)
SCHEDULES = {
    "t256x128": ((256, 128, 8, 4), 1, False),
    "t256x128_cn": ((256, 128, 8, 4), 1, False, 2, 1),
    "t256x128_cm": ((256, 128, 8, 4), 1, False, 2, 0),
    "t128x256_cm": ((128, 256, 8, 4), 1, False, 2, 0),
}


@pytest.mark.parametrize("sched", list(SCHEDULES))
@pytest.mark.parametrize(
    "m,n,k,out_dt,bias,act,tma",
    [
        (4097, 1000, 1024, "bf16", True, "gelu", True),
        (1000, 520, 448, "f32", True, None, True),
        # K = 448: 7 steps, not split (split K stays off the WS pipeline)
        (777, 264, 448, "bf16", False, "relu", False),
    ],
)
def test_layer_schedules(
    torch: Any,  # noqa: F811
    monkeypatch: Any,
    sched: str,
    m: int,
    n: int,
    k: int,
    out_dt: str,
    bias: bool,
    act: Any,
    tma: bool,
) -> None:
    from zyntax.kernels import gemm, gemm_tile

    forced = SCHEDULES[sched]
    monkeypatch.setattr(gemm_tile, "TMA_STORE", tma)
    monkeypatch.setattr(gemm_tile, "WS_FORCE", forced)

    def clear() -> None:
        # matmul's call plans replay the last case's kernel for the same shape
        gemm_tile.ws_schedule.cache_clear()
        gemm_tile.matmul.plans.clear()
        gemm._plans.clear()

    clear()
    try:
        specs = run(torch, monkeypatch, m, n, k, "bf16", out_dt, bias, act)
    finally:
        clear()
    (bm, bn, warps, stages), in_flight, _, *cl = forced
    cluster = (cl[0], bool(cl[1])) if cl else (1, False)
    assert [(s.ws, s.tma_store) for s in specs] == [(True, tma)], specs
    assert specs[0].schedule[:5] == (bm, bn, 64, warps, stages)
    assert specs[0].ws_opts == (in_flight, False, *cluster)


def operand(torch: Any, rows: int, cols: int, layout: str) -> Any:  # noqa: F811
    """A bf16 `rows` x `cols` operand stored as `layout`: ``row`` (row-major),
    ``t`` (the transpose of a stored cols x rows tensor) or ``slice`` (the
    first `cols` columns of a rows x (2 cols + 8) tensor)."""
    if layout == "t":
        return rand(torch, cols, rows, dt=torch.bfloat16).t()
    if layout == "slice":
        return rand(torch, rows, 2 * cols + 8, dt=torch.bfloat16)[:, :cols]
    return rand(torch, rows, cols, dt=torch.bfloat16)


@pytest.mark.parametrize(
    "m,n,k,a_layout,b_layout,bias,act",
    [
        # the GPT-2-small step's weight gradient x.T @ dy (K = 2048 tokens)
        (768, 3072, 2048, "t", "row", False, None),
        # its input gradient dy @ w.T, and an odd-sized one with bias + GELU
        (2048, 768, 3072, "row", "t", False, None),
        (4097, 1000, 1024, "row", "t", True, "gelu"),
        # both transposed, a row slice (row stride 2K + 8), odd M and K tails
        (1000, 520, 448, "t", "t", True, "relu"),
        (4097, 1024, 1000, "slice", "row", True, None),
    ],
)
def test_transposed_and_sliced_operands(
    torch: Any,  # noqa: F811
    m: int,
    n: int,
    k: int,
    a_layout: str,
    b_layout: str,
    bias: bool,
    act: Any,
) -> None:
    # The library's default route (no forced schedule) on views: strides
    # only, no copies; output poisoned with NaN first, float64 reference.
    import zyntax.kernels as zk

    a, b = operand(torch, m, k, a_layout), operand(torch, k, n, b_layout)
    bv = rand(torch, n, dt=torch.bfloat16) if bias else None
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    zk.matmul(a, b, out, bias=bv, activation=act)
    got = out.double()
    assert not got.isnan().any(), "an output element was never written"
    ref = reference(torch, a, b, bv, act)
    err = ((got - ref).norm() / ref.norm()).item()
    assert err < TOL["bf16"], (zk.choose_variant(a, b, bias=bv, activation=act), err)
