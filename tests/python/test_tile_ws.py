"""The warp-specialised tile GEMM (TMA producer warpgroup, mbarrier rings,
wgmma consumers; crates/zyntax-tile/src/lower/pipeline_ws.rs) through
``zyntax.tile`` on the interpreter: the launch builds the tensor maps from the
views and, persistent, walks the program's grid from a few CTAs. f16 numpy
inputs (numpy has no bf16) against a float64 reference of the same values,
the output poisoned (NaN) first; tails in M, N and K."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zyntax import tile
from zyntax.errors import ArgumentError


def ws_gemm(s: tile.Schedule, a_trans: bool = False) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm_ws", s)
    a = t.view("a", "f16", 2, unit_stride_dim=0 if a_trans else 1, align_bytes=16)
    b = t.view("b", "f16", 2, unit_stride_dim=1, align_bytes=16)
    c = t.view("c", "f32", 2, unit_stride_dim=1, align_bytes=16)
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: Any, acc: list[Any]) -> list[Any]:
        return [t.dot(t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn)), acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc)
    return t.finish()


def schedule(persistent: bool, stages: int = 2) -> tile.Schedule:
    return tile.Schedule(
        (64, 64), k=64, warps=4, stages=stages, arch="sm_90a", warp_specialize=True,
        persistent=persistent,
    )  # fmt: skip


@pytest.mark.parametrize(("persistent", "a_trans"), [(False, False), (True, False), (True, True)])
def test_ws_gemm_interp(persistent: bool, a_trans: bool) -> None:
    m, n, kk = 72, 136, 200
    k = ws_gemm(schedule(persistent, stages=3 if persistent else 2), a_trans)
    assert [m.view for m in k.tensor_maps] == ["a", "b"]
    assert k.persistent == persistent and k.block == (256, 1, 1)
    rng = np.random.default_rng()
    a = rng.standard_normal((m, kk)).astype(np.float16)
    b = rng.standard_normal((kk, n)).astype(np.float16)
    a_arg = np.ascontiguousarray(a.T).T if a_trans else a
    c = np.full((m, n), np.nan, np.float32)
    k.run_interp(a_arg, b, c, grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    if persistent and not a_trans:
        # The CPU backend has no TMA: run_cpu takes the interpreter.
        c[:] = np.nan
        assert k.run_cpu(a_arg, b, c, grid=k.grid(m, n)) == "interp"
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_ws_schedule_fields_and_errors() -> None:
    s = schedule(True)
    assert s.warp_specialize and s.persistent
    assert "warp_specialize=True" in repr(s) and s.wgmma_in_flight == 0
    with pytest.raises(ArgumentError, match="wgmma_in_flight"):
        tile.Schedule((64, 64), arch="sm_90a", wgmma_in_flight=2).validate()
    with pytest.raises(ArgumentError, match="persistent"):
        tile.Schedule((64, 64), k=64, warps=4, arch="sm_90a", persistent=True).validate()
    # A view whose TMA dim is not unit-stride is refused before the launch.
    k = ws_gemm(schedule(False))
    a = np.zeros((64, 64), np.float16)[:, ::1]
    bad = np.zeros((64, 128), np.float16)[:, ::2]
    with pytest.raises(ArgumentError, match="stride"):
        k.run_interp(a, bad, np.zeros((64, 64), np.float32), grid=k.grid(64, 64))


@pytest.mark.parametrize("pingpong", [False, True])
def test_ws_tma_store_interp(pingpong: bool) -> None:
    # The output through shared memory and TMA (Schedule(tma_store=True)):
    # a third tensor map, over c; run_interp hands the map's copy back to
    # the view. c is a column slice of a wider buffer (16-byte rows), tails
    # in M and N; the columns past the view stay untouched.
    m, n, kk = 100, 136, 200
    s = tile.Schedule(
        (64, 64), k=64, warps=4, stages=3, arch="sm_90a", warp_specialize=True,
        persistent=True, pingpong=pingpong, tma_store=True,
    )  # fmt: skip
    assert s.tma_store and "tma_store=True" in repr(s)
    k = ws_gemm(s)
    assert [(x.view, x.box) for x in k.tensor_maps] == [
        ("a", (64, 64)),
        ("b", (64, 64)),
        ("c", (32, 64)),
    ]
    rng = np.random.default_rng()
    a = rng.standard_normal((m, kk)).astype(np.float16)
    b = rng.standard_normal((kk, n)).astype(np.float16)
    big = np.full((m, n + 4), np.nan, np.float32)
    k.run_interp(a, b, big[:, :n], grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(big[:, :n], want, rtol=1e-5, atol=1e-4)
    assert np.isnan(big[:, n:]).all()


def test_tma_store_needs_warp_specialize() -> None:
    with pytest.raises(ArgumentError, match="tma_store"):
        tile.Schedule((64, 64), k=64, arch="sm_90a", tma_store=True).validate()
