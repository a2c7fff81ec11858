"""cuBLAS's layer tile on the warp-specialised pipeline, on the interpreter
(issue 30): 256x128 over two consumer warpgroups (each 128x128, two m64
wgmmas a K step), alone and in clusters of two along N (each CTA loads half
of the shared 256-row ``a`` box with TMA multicast) or along M (sharing
``b``), the output stored through TMA or from registers. f16 numpy inputs
against a float64 reference of the same values, the output poisoned (NaN)
first, tails in M, N and K (3 tile rows and columns: a partial cluster
unit along either dim)."""

from __future__ import annotations

import numpy as np
import pytest

from test_tile_ws import ws_gemm
from zyntax import tile


@pytest.mark.parametrize(
    "cluster,cluster_n,tma_store", [(1, False, True), (2, True, True), (2, False, False)]
)
def test_256x128_over_two_warpgroups(cluster: int, cluster_n: bool, tma_store: bool) -> None:
    s = tile.Schedule(
        (256, 128), k=64, warps=8, stages=3, arch="sm_90a", warp_specialize=True,
        persistent=True, wgmma_in_flight=1, cluster=cluster, cluster_n=cluster_n,
        tma_store=tma_store,
    )  # fmt: skip
    k = ws_gemm(s)
    assert k.cluster == cluster and k.block == (384, 1, 1)
    # clusters along N split the one 256-row box of `a` between the CTAs
    a_rows = 256 // cluster if cluster_n else 256
    assert [x.box for x in k.tensor_maps][:2] == [(64, a_rows), (64, 64)]
    m, n, kk = 520, 264, 136
    rng = np.random.default_rng()
    a = rng.standard_normal((m, kk)).astype(np.float16)
    b = rng.standard_normal((kk, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    k.run_interp(a, b, c, grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
