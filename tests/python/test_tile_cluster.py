"""Clusters on the warp-specialised tile GEMM (TMA multicast of the operand
tile two CTAs share; crates/zyntax-tile/src/lower/pipeline_ws.rs) through
``zyntax.tile`` on the interpreter, which runs a cluster's CTAs together:
f16 numpy inputs against a float64 reference of the same values, the output
poisoned (NaN) first; tails in M, N and K and a partial cluster unit (an
odd number of instance rows or columns)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zyntax import tile
from zyntax.errors import ArgumentError


def gemm(s: tile.Schedule) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm_cluster", s)
    a = t.view("a", "f16", 2, unit_stride_dim=1, align_bytes=16)
    b = t.view("b", "f16", 2, unit_stride_dim=1, align_bytes=16)
    c = t.view("c", "f32", 2, unit_stride_dim=1, align_bytes=16)
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: Any, acc: list[Any]) -> list[Any]:
        return [t.dot(t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn)), acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc)
    return t.finish()


def schedule(along_n: bool, persistent: bool = True) -> tile.Schedule:
    return tile.Schedule(
        (64, 64), k=64, warps=4, stages=3, arch="sm_90a", warp_specialize=True,
        persistent=persistent, cluster=2, cluster_n=along_n,
    )  # fmt: skip


@pytest.mark.parametrize("along_n", [False, True])
def test_cluster_gemm_interp(along_n: bool) -> None:
    m, n, kk = 130, 136, 200  # 3 x 3 instances: the last unit is half outside
    s = schedule(along_n)
    assert s.cluster == 2 and s.cluster_n == along_n
    assert ("cluster_n=True" in repr(s)) == along_n
    k = gemm(s)
    assert k.cluster == 2 and k.persistent
    # whole clusters: 4 CTAs (2 clusters) walk the 6 units of 2 instances
    assert k.launch_grid(k.grid(m, n), 4) == ([4, 1, 1], [3, 3])
    rng = np.random.default_rng()
    a = rng.standard_normal((m, kk)).astype(np.float16)
    b = rng.standard_normal((kk, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    k.run_interp(a, b, c, grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_cluster_needs_persistent() -> None:
    with pytest.raises(ArgumentError, match="cluster"):
        gemm(schedule(False, persistent=False))
