"""The one-row matmul program (``zyntax.kernels.gemv_tile``: FFMA over
[BK, BN] slabs of b, K split, f32 partials summed by gemm_tile's finishing
pass) on numpy inputs: odd N and K, strided and transposed operands,
epilogues, through ``gemm_tile.matmul`` and ``zyntax.kernels.matmul``, and
the program itself at several rows (grid axis 0). Results against float64 on fresh random inputs,
outputs poisoned with NaN first. The GPU versions: tests/python/gpu/test_gemm_smallm_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax.kernels as zk
from zyntax.kernels import gemm_tile, gemv_tile

rng = np.random.default_rng()
TOL = {np.float32: 1e-5, np.float16: 2e-3}


def ref_mm(a: Any, b: Any, bias: Any = None, act: str | None = None) -> Any:
    r = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    if bias is not None:
        r = r + np.asarray(bias, np.float64)
    if act == "relu":
        r = np.maximum(r, 0.0)
    elif act == "gelu":
        r = 0.5 * r * (1.0 + np.tanh(gemm_tile.GELU_C * (r + 0.044715 * r**3)))
    return r


def check(out: Any, ref: Any, dt: Any) -> None:
    got = np.asarray(out, np.float64)
    assert got.shape == ref.shape
    assert not np.isnan(got).any(), "an output element was never written"
    err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
    assert err < TOL[dt], err
    worst = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
    assert worst < 4 * TOL[dt], (worst, int(np.abs(got - ref).argmax()))  # each element


def rand(*shape: int, dt: Any = np.float32) -> Any:
    return rng.standard_normal(shape).astype(dt)


@pytest.fixture
def launches(monkeypatch: Any) -> list[int]:
    """Rows of each product the gemv program ran (the route was taken)."""
    seen: list[int] = []
    real = gemv_tile.launch

    def spy(a: Any, *args: Any, **kw: Any) -> None:
        seen.append(a[1][1])
        real(a, *args, **kw)

    monkeypatch.setattr(gemv_tile, "launch", spy)
    return seen


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 300, 77), (1, 17, 1000), (1, 513, 300)])
def test_shapes(launches: list[int], dt: Any, m: int, n: int, k: int) -> None:
    a, b = rand(m, k, dt=dt), rand(k, n, dt=dt)
    out = np.full((m, n), np.nan, dt)
    gemm_tile.matmul(a, b, out)
    check(out, ref_mm(a, b), dt)
    assert launches == [m]


def test_layouts(launches: list[int]) -> None:
    """b as the transpose of an (N, K) weight (K contiguous), a as a column
    slice of a wider row, a as a column of a (K, M) array."""
    w = rand(70, 300)
    a = rand(2, 600)[1:, 100:400]
    check(gemm_tile.matmul(a, w.T), ref_mm(a, w.T), np.float32)
    at = rand(300, 1).T
    b = rand(300, 41)[:, ::2]
    check(gemm_tile.matmul(at, b), ref_mm(at, b), np.float32)
    assert launches == [1, 1]


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
def test_epilogue(launches: list[int], act: str | None) -> None:
    a, b, bias = rand(1, 200, dt=np.float16), rand(200, 65, dt=np.float16), rand(65)
    out = gemm_tile.matmul(a, b, bias=bias.astype(np.float16), activation=act, out_dtype="f32")
    check(out, ref_mm(a, b, bias.astype(np.float16), act), np.float16)
    assert launches == [1]


def test_library_route(launches: list[int]) -> None:
    """zyntax.kernels.matmul sends M <= GEMV_MAX_M to the program on the interpreter."""
    a, b = rand(1, 130), rand(130, 40)
    out = np.full((1, 40), np.nan, np.float32)
    zk.matmul(a, b, out, variant="tile")
    check(out, ref_mm(a, b), np.float32)
    assert launches == [1]


def test_larger_m_and_batches_stay_off(launches: list[int]) -> None:
    m = 2  # above the tile crate's GEMV_MAX_M (one row)
    assert gemv_tile.schedule(m, 24, 40, "sm_90a", 132) is None
    a, b = rand(m, 40), rand(40, 24)
    check(gemm_tile.matmul(a, b), ref_mm(a, b), np.float32)
    a3, b3 = rand(2, 1, 40), rand(2, 40, 24)
    check(gemm_tile.matmul(a3, b3), ref_mm(a3, b3), np.float32)
    assert launches == []


@pytest.mark.parametrize(
    "m,n,k,sms", [(1, 4096, 4096, 132), (1, 4096, 14336, 132), (1, 1024, 8192, 132), (1, 300, 7, 4)]
)
def test_schedule_splits_cover_k(m: int, n: int, k: int, sms: int) -> None:
    """The crate's gemv schedule: about its instances per SM, whole K steps,
    no empty split (``launch`` derives K per split from the count)."""
    got = gemv_tile.schedule(m, n, k, "sm_90a", sms)
    assert got is not None
    (bk, bn, _), splits, _ = got
    steps = -(-k // bk)
    per = -(-steps // splits)
    assert (splits - 1) * per < steps <= splits * per
    if splits == 1 and k >= 4096:  # unsplit: the N tiles alone fill the SMs
        assert m * -(-n // bn) * 10 >= sms * 9
    elif k >= 4096:  # a long K is split until the instances cover the SMs several times
        assert m * -(-n // bn) * splits >= 2 * sms
        assert per >= 2


def test_forced_schedule(launches: list[int], monkeypatch: Any) -> None:
    monkeypatch.setattr(gemv_tile, "GEMV_FORCE", ((32, 64, 2), 3))
    got = gemv_tile.schedule(1, 100, 1000, "sm_80", 4)
    assert got is not None and got[0] == (32, 64, 2)
    a, b = rand(1, 1000), rand(1000, 100)
    check(gemm_tile.matmul(a, b), ref_mm(a, b), np.float32)
    assert launches == [1]


@pytest.mark.parametrize("b_unit", [1, 0])
def test_program_rows(b_unit: int) -> None:
    """The program itself over 3 rows (grid axis 0) and 4 K splits, b
    row-major or a transposed weight: the partials sum to a @ b."""
    m, n, k, kps = 3, 150, 200, 64
    spec = gemv_tile.Spec("f32", 0, b_unit, (True, True), (16, 128, 4, "sm_80"))
    kern = gemv_tile.program(spec)
    a = rand(m, k)
    b = rand(k, n) if b_unit == 1 else rand(n, k).T
    splits = -(-k // kps)
    ws = np.full((splits, m, n), np.nan, np.float32)
    kern.run_interp(a.T, b, ws, k, kps, grid=(m, -(-n // 128), splits))
    check(ws.sum(0), ref_mm(a, b), np.float32)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("force", [((16, 64, 2), 0), ((32, 32, 4), 0), ((16, 64, 2), 3)])
def test_gemv_unsplit_and_prefetch(monkeypatch: Any, prefetch: bool, force: Any) -> None:
    """Unsplit (0 instances per SM: the program's own epilogue, no finishing
    pass) and split schedules, with and without the next slab loaded ahead
    of the FMAs: odd N and K (tails inside and past the last slab), a bias
    and GELU, the output poisoned."""
    monkeypatch.setattr(gemv_tile, "GEMV_FORCE", force)
    monkeypatch.setattr(gemv_tile, "GEMV_PREFETCH", prefetch)
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    a, b, bias = rand(1, 203), rand(203, 97), rand(97)
    out = np.full((1, 97), np.nan, np.float32)
    try:
        gemm_tile.matmul(a, b, out, bias=bias, activation="gelu")
    finally:
        gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    check(out, ref_mm(a, b, bias, "gelu"), np.float32)
    got = gemv_tile.schedule(1, 97, 203, "sm_80", 4)
    assert got is not None and (got[1] == 1) == (force[1] == 0)


@pytest.mark.parametrize("splits", [2, 3, 5, 9])
def test_split_finish_one_load(monkeypatch: Any, splits: int) -> None:
    """The tensor-core route's finishing pass sums a power of two >= the
    splits in one load (rows past them read 0) over slabs of the [splits,
    M * N] partials that cross row ends (odd N), per batch (3-D operands)."""
    monkeypatch.setattr(gemm_tile, "FORCE", ((16, 16, 16, 2, 1), splits))
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    a, b, bias = rand(3, 5, 16 * splits), rand(3, 16 * splits, 37), rand(37)
    out = np.full((3, 5, 37), np.nan, np.float32)
    try:
        gemm_tile.matmul(a, b, out, bias=bias, activation="relu")
    finally:
        gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    check(out, ref_mm(a, b, bias, "relu"), np.float32)
