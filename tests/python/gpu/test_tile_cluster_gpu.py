"""Thread-block clusters on the warp-specialised tile GEMM (sm_90a): the CTAs
of a cluster take adjacent program instances along M (sharing the `b` tile)
or along N (sharing `a`), each loading its share of the shared tile with TMA
multicast into both CTAs' stages (crates/zyntax-tile/src/lower/pipeline_ws.rs).
Launched through ``zyntax.tile`` and through the library's matmul with the
schedule forced (cluster on and off), against float64 references of the same
rounded inputs, outputs poisoned (NaN) first: odd sizes with tails in M, N
and K, partial cluster units (an odd number of instance rows or columns),
transposed operands, ping-pong consumer sets. Skipped without an sm_90 GPU."""

from __future__ import annotations

from typing import Any

import pytest

from zyntax import tile

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("clusters, TMA multicast and wgmma need an sm_90 GPU")


def _gemm(s: tile.Schedule, a_trans: bool, b_trans: bool) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm_cluster", s)
    a = t.view("a", "bf16", 2, unit_stride_dim=0 if a_trans else 1, align_bytes=16)
    b = t.view("b", "bf16", 2, unit_stride_dim=0 if b_trans else 1, align_bytes=16)
    c = t.view("c", "bf16", 2, unit_stride_dim=1, align_bytes=16)
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: Any, acc: list[Any]) -> list[Any]:
        return [t.dot(t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn)), acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc.cast("bf16"))  # type: ignore[union-attr]
    return t.finish()


def _operand(rows: int, cols: int, trans: bool) -> Any:
    if trans:
        return torch.randn(cols, rows, device="cuda").bfloat16().t()
    return torch.randn(rows, cols, device="cuda").bfloat16()


def _check(got: Any, want: Any, kk: int) -> None:
    got = got.double()
    assert not torch.isnan(got).any(), "an output element was never written"
    torch.testing.assert_close(got, want, rtol=1e-2, atol=2e-2 * max(1.0, kk**0.5 / 8))


@pytest.mark.parametrize(
    ("block", "warps", "stages", "in_flight", "pingpong", "along_n"),
    [((128, 256), 8, 4, 1, False, False), ((128, 256), 8, 4, 1, False, True),
     ((128, 256), 8, 4, 0, False, False), ((128, 128), 4, 6, 1, True, True),
     ((128, 128), 4, 6, 1, True, False), ((64, 128), 4, 6, 0, False, False)],
)  # fmt: skip
@pytest.mark.parametrize(
    ("m", "n", "kk", "a_trans", "b_trans"),
    [(1000, 1000, 1000, False, False), (257, 264, 4104, False, False),
     (520, 600, 136, True, False), (300, 136, 520, False, True), (2048, 4096, 768, False, False)],
)  # fmt: skip
def test_tile_cluster_gemm(
    block: tuple[int, int],
    warps: int,
    stages: int,
    in_flight: int,
    pingpong: bool,
    along_n: bool,
    m: int,
    n: int,
    kk: int,
    a_trans: bool,
    b_trans: bool,
) -> None:
    _sm90()
    s = tile.Schedule(
        block, k=64, warps=warps, stages=stages, arch="sm_90a", warp_specialize=True,
        persistent=True, wgmma_in_flight=in_flight, pingpong=pingpong, cluster=2,
        cluster_n=along_n,
    )  # fmt: skip
    k = _gemm(s, a_trans, b_trans)
    assert k.cluster == 2 and k.persistent
    a, b = _operand(m, kk, a_trans), _operand(kk, n, b_trans)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    k.launch(a, b, c, grid=k.grid(m, n))
    torch.cuda.synchronize()
    _check(c, a.double() @ b.double(), kk)


def test_tile_cluster_launch_runs_whole_clusters() -> None:
    """The persistent launch of a clustered kernel is a whole number of
    clusters, no more than can be resident."""
    _sm90()
    s = tile.Schedule(
        (128, 256), k=64, warps=8, stages=4, arch="sm_90a", warp_specialize=True,
        persistent=True, cluster=2,
    )  # fmt: skip
    k = _gemm(s, False, False)
    resident = k.resident_ctas(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert resident % 2 == 0 and 0 < resident <= sms
    grid, extra = k.launch_grid(k.grid(8192, 8192), resident)
    assert grid[0] % 2 == 0 and grid[0] <= resident and extra == [64, 32]


@pytest.mark.parametrize(
    ("m", "n", "kk", "force"),
    [(1000, 1000, 1000, ((128, 256, 8, 4), 1, False, 2, False)),
     (2048, 50304, 768, ((128, 128, 4, 6), 1, True, 2, True)),
     (300, 4104, 520, ((128, 128, 4, 6), 1, True, 2, False)),
     (1000, 1000, 1000, ((128, 256, 8, 4), 1, False, 1, False))],
)  # fmt: skip
def test_matmul_with_clusters(
    monkeypatch: Any, m: int, n: int, kk: int, force: tuple[Any, ...]
) -> None:
    """The library's matmul on a forced clustered schedule (and one without)."""
    _sm90()
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "WARP_SPECIALIZE", True)
    monkeypatch.setattr(gemm_tile, "WS_FORCE", force)
    gemm_tile.ws_schedule.cache_clear()
    gemm_tile.matmul.plans.clear()
    try:
        for _ in range(2):  # the second call replays the plan
            a = torch.randn(m, kk, device="cuda").bfloat16()
            b = torch.randn(kk, n, device="cuda").bfloat16()
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            gemm_tile.matmul(a, b, out)
            torch.cuda.synchronize()
            _check(out, a.double() @ b.double(), kk)
    finally:
        gemm_tile.ws_schedule.cache_clear()
        gemm_tile.matmul.plans.clear()
