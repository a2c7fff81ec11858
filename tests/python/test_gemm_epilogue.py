"""The tile matmul's epilogues lower onto the warp-specialised pipeline
(issue 30): with a bias and relu / GELU the program under a WS schedule has
its two tensor maps and no shared-memory scratch (the bias is loaded in the
accumulator's layout, ``infer/remat.rs``), where it fell back to the
cp.async pipeline before. No GPU needed: lowering only (the GPU runs are in
tests/python/gpu/test_gemm_epilogue_gpu.py, the interpreter runs of the same
lowering in crates/zyntax-tile/tests/wgmma_ws_epilogue.rs)."""

from __future__ import annotations

import pytest

from zyntax.kernels import gemm_tile


@pytest.mark.parametrize("bias", [None, "bf16", "f32"])
@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize(
    "sched,opts",
    [((128, 256, 64, 8, 4, "sm_90a"), (1, False)), ((128, 128, 64, 4, 6, "sm_90a"), (1, True))],
)  # fmt: skip
def test_epilogue_stays_warp_specialised(
    bias: str | None, act: str | None, sched: tuple, opts: tuple
) -> None:
    # (in flight, ping-pong) and the defaults of any later knobs (clusters)
    opts = (*opts, *gemm_tile.Spec.__dataclass_fields__["ws_opts"].default[2:])
    s = gemm_tile.Spec(
        "bf16", "bf16", bias, act, 2, 2, 1, 1, (True, True, True), 0, False, sched, True, opts
    )
    k = gemm_tile.program(s)
    assert len(k.tensor_maps) == 2 and k.persistent
    assert k.shared_bytes == 0
    threads = 32 * sched[3] * (2 if opts[1] else 1) + 128
    assert k.block == (threads, 1, 1)


@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_tma_store_spec(out: str) -> None:
    # Spec.tma_store: a 2-D output view stored through shared memory and TMA,
    # its tensor map the third (64 bf16 or 32 f32 columns by 64 rows: the
    # warpgroup's part of a box, docs/tile.md).
    opts = (1, True, *gemm_tile.Spec.__dataclass_fields__["ws_opts"].default[2:])
    sched = (128, 128, 64, 4, 6, "sm_90a")
    s = gemm_tile.Spec(
        "bf16", out, "bf16", "gelu", 2, 2, 1, 1, (True, True, True), 0, False, sched, True, opts,
        tma_store=True, gelu_approx=out == "bf16",
    )  # fmt: skip
    k = gemm_tile.program(s)
    assert [m.view for m in k.tensor_maps] == ["a", "b", "c0"]
    assert k.tensor_maps[2].box == ((64 if out == "bf16" else 32), 64)
    assert k.shared_bytes == 0 and k.dynamic_shared_bytes <= 232448
    zir = k.module.to_zir()
    assert "tma.store" in zir
    # GELU on tanh.approx (Spec.gelu_approx) for bf16 outputs only
    assert ("tanh.approx" in zir) == (out == "bf16")
