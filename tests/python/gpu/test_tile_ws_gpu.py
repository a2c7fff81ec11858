"""The plain tile GEMM with a warp-specialised schedule on sm_90a: a TMA
producer warpgroup feeding wgmma consumer warpgroups through mbarrier rings,
optionally persistent (crates/zyntax-tile/src/lower/pipeline_ws.rs), launched
through ``zyntax.tile`` on torch tensors, against a float64 reference of the
same rounded inputs with the output poisoned (NaN) first: tails in M, N and
K, transposed operands, one and two consumer warpgroups, and two consumer
sets taking the instances in turn (ping-pong)."""

from __future__ import annotations

from typing import Any

import pytest

from zyntax import tile
from zyntax.errors import ArgumentError

torch = pytest.importorskip("torch")


def ws_gemm(s: tile.Schedule, a_trans: bool = False, b_trans: bool = False) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm_ws", s)
    a = t.view("a", "bf16", 2, unit_stride_dim=0 if a_trans else 1, align_bytes=16)
    b = t.view("b", "bf16", 2, unit_stride_dim=0 if b_trans else 1, align_bytes=16)
    c = t.view("c", "bf16", 2, unit_stride_dim=1, align_bytes=16)
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: Any, acc: list[Any]) -> list[Any]:
        return [t.dot(t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn)), acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc.cast("bf16"))  # type: ignore[union-attr]
    return t.finish()


def _sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("TMA and wgmma need an sm_90 GPU")


def _operand(rows: int, cols: int, trans: bool) -> Any:
    """A random (rows, cols) bf16 tensor, a transposed view when `trans`."""
    if trans:
        return torch.randn(cols, rows, device="cuda").bfloat16().t()
    return torch.randn(rows, cols, device="cuda").bfloat16()


@pytest.mark.parametrize(
    ("block", "warps", "stages", "persistent", "in_flight", "pingpong"),
    [((128, 256), 8, 4, True, 1, False), ((128, 256), 8, 4, True, 0, False),
     ((128, 256), 8, 3, False, 1, False), ((128, 128), 4, 4, True, 1, False),
     ((64, 128), 4, 2, False, 1, False), ((128, 128), 4, 6, True, 1, True),
     ((128, 128), 4, 5, True, 0, True), ((64, 256), 4, 5, True, 1, True)],
)  # fmt: skip
@pytest.mark.parametrize(
    ("m", "n", "kk", "a_trans", "b_trans"),
    [(1000, 1000, 1000, False, False), (257, 264, 4104, False, False),
     (520, 200, 136, True, False), (300, 136, 520, False, True), (4096, 4096, 512, False, False)],
)  # fmt: skip
def test_tile_ws_gemm(
    block: tuple[int, int],
    warps: int,
    stages: int,
    persistent: bool,
    in_flight: int,
    pingpong: bool,
    m: int,
    n: int,
    kk: int,
    a_trans: bool,
    b_trans: bool,
) -> None:
    _sm90()
    s = tile.Schedule(
        block, k=64, warps=warps, stages=stages, arch="sm_90a", warp_specialize=True,
        persistent=persistent, wgmma_in_flight=in_flight, pingpong=pingpong,
    )  # fmt: skip
    k = ws_gemm(s, a_trans, b_trans)
    assert len(k.tensor_maps) == 2 and k.persistent == persistent
    # ping-pong: two consumer sets of `warps` warps beside the producer warpgroup
    assert k.block[0] == 32 * warps * (2 if pingpong else 1) + 128
    a, b = _operand(m, kk, a_trans), _operand(kk, n, b_trans)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    k.launch(a, b, c, grid=k.grid(m, n))
    torch.cuda.synchronize()
    want = a.double() @ b.double()
    got = c.double()
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, want, rtol=1e-2, atol=2e-2 * max(1.0, kk**0.5 / 8))


def test_tile_ws_refuses_unaligned_rows() -> None:
    """TMA needs 16-byte row strides: a view with another is refused, named."""
    _sm90()
    s = tile.Schedule((64, 64), k=64, warps=4, stages=2, arch="sm_90a", warp_specialize=True)
    k = ws_gemm(s)
    a = torch.randn(100, 100, device="cuda").bfloat16()
    b = torch.randn(100, 64, device="cuda").bfloat16()
    c = torch.empty(100, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ArgumentError, match="stride"):
        k.launch(a, b, c, grid=k.grid(100, 64))
