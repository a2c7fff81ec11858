"""The row kernels as tile programs (``zyntax.kernels.rows_tile``) on the
reference interpreter: softmax, layer_norm, rms_norm and cross-entropy,
forward and backward, at widths 1 to 20000 (every program shape: several
rows per instance, one row, chunks) with tails, against float64 numpy on
fresh random inputs, outputs poisoned with NaN first. The backward
references are derived by hand in float64 (and checked against central
differences of the forward once). The same programs on the GPU:
tests/python/gpu/test_rows_tile_gpu.py."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from zyntax import ArgumentError, kernels
from zyntax.kernels import rows_tile

rng = np.random.default_rng()

#: widths around every boundary of the plan table (1024, 16384) and tails.
WIDTHS = [1, 63, 64, 65, 1000, 1025, 4097]
#: The programs whose chunk loops can load ahead (rows_tile.CHUNK_AHEAD).
CHUNK_PROGRAMS = ("softmax_fwd", "softmax_bwd", "norm_fwd", "rms_fwd", "ce_fwd", "ce_bwd")
CHUNK_PROGRAMS += ("norm_bwd_stats",)
#: The programs that hold wide rows whole over several tiles (rows_tile.wide).
WIDE_PROGRAMS = ("softmax_fwd", "norm_fwd", "ce_fwd", "ce_bwd")


def rel_err(out: Any, ref: Any) -> float:
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "NaN in the output (an element not written?)"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def rows_for(n: int) -> int:
    """Enough rows for two program instances and a partial one."""
    return 2 * rows_tile.plan(n).rows + 1 if n <= 128 else 3


@pytest.fixture(params=["whole", "chunks", "chunks_row_state", "wide"])
def shape(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test as the plan table says, and again with every width on the
    chunked program with 64-column chunks (so the loops run several times),
    carrying per-lane statistics with the next chunk loaded ahead or
    per-row statistics without, and with the chunked rows that
    fit held whole over several 64-column tiles and a tail (``WIDE``), the
    norms' wider ones with their first tiles held (``HELD``: 4097)."""
    if request.param == "wide":
        monkeypatch.setattr(rows_tile, "ROWS_MAX", 0)
        monkeypatch.setattr(rows_tile, "ROW_MAX", 0)
        monkeypatch.setattr(rows_tile, "CHUNK", 64)
        monkeypatch.setattr(rows_tile, "WIDE", frozenset(WIDE_PROGRAMS))
        monkeypatch.setattr(rows_tile, "WIDE_TILE", 64)
        monkeypatch.setattr(rows_tile, "WIDE_WARPS", 2)
        monkeypatch.setattr(rows_tile, "HELD", frozenset({"norm_fwd", "rms_fwd"}))
        monkeypatch.setattr(rows_tile, "HELD_FORM", {})
        monkeypatch.setattr(rows_tile, "HELD_TILE", 64)
        monkeypatch.setattr(rows_tile, "HELD_WARPS", 2)
    if request.param.startswith("chunks"):
        state = "row" if request.param == "chunks_row_state" else "lanes"
        monkeypatch.setattr(rows_tile, "STATE", state)
        # Per-lane state with the next chunk loaded ahead (CHUNK_AHEAD), the
        # per-row state without.
        monkeypatch.setattr(
            rows_tile, "CHUNK_AHEAD", frozenset(CHUNK_PROGRAMS if state == "lanes" else ())
        )
        monkeypatch.setattr(rows_tile, "ROWS_MAX", 0)
        monkeypatch.setattr(rows_tile, "ROW_MAX", 0)
        monkeypatch.setattr(rows_tile, "CHUNK", 64)
        monkeypatch.setattr(rows_tile, "CHUNK_WARPS", 2)
    return str(request.param)


def test_plan_table() -> None:
    p = rows_tile.plan
    assert p(1) == rows_tile.Plan("rows", 128, 16, 4)
    assert p(1000) == rows_tile.Plan("rows", 2, 1024, 4)
    assert p(1025).shape == "row" and p(1025).width == 2048
    assert p(16384) == rows_tile.Plan("row", 1, 16384, 32)
    assert p(16384, 2) == rows_tile.Plan("chunks", 1, 4096, 8, "row")
    assert p(8192, 2) == rows_tile.Plan("row", 1, 8192, 16)
    assert p(16385) == rows_tile.Plan("chunks", 1, 4096, 8, "row")
    for n in (1, 63, 1000, 5000, 262144):
        q = p(n)
        assert q.rows * q.width // (q.warps * 32) <= 32  # registers per tile


# ---------------------------------------------------------------- softmax


def ref_softmax(x: Any) -> Any:
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("n", WIDTHS)
def test_softmax_forward_backward(n: int, shape: str) -> None:
    rows = rows_for(n)
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    out = np.full_like(x, np.nan)
    assert kernels.softmax(x, out=out) is out
    y = ref_softmax(x)
    assert rel_err(out, y) < 1e-5
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    y32 = y.astype(np.float32)
    dx = np.full_like(x, np.nan)
    kernels.softmax_backward(y32, dy, out=dx)
    y64 = y32.astype(np.float64)
    ref = y64 * (dy - (dy * y64).sum(-1, keepdims=True))
    assert rel_err(dx, ref) < 1e-5


def test_softmax_masked_and_dominant(shape: str) -> None:
    x = (rng.standard_normal((4, 203)) * 30 + 1e4).astype(np.float32)
    x[1, ::3] = -np.inf
    x[2, 5] = 3e38
    x[3, :150] = -np.inf  # whole chunks of -inf before the first finite value
    out = kernels.softmax(x)
    assert rel_err(out, ref_softmax(x)) < 1e-5
    assert np.all(out[1, ::3] == 0) and np.all(out[3, :150] == 0)
    assert np.isnan(kernels.softmax(np.full((2, 40), -np.inf, np.float32))).all()


@pytest.mark.parametrize("state", ["lanes", "row"])
@pytest.mark.parametrize(("rows", "n"), [(1, 200), (3, 1000), (2, 4097)])
def test_softmax_split_rows(rows: int, n: int, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few wide rows: each row split over several program instances
    (partial statistics, then the write), with -inf runs and a dominant logit."""
    for k, v in {
        "ROWS_MAX": 0,
        "ROW_MAX": 0,
        "CHUNK": 64,
        "STATE": state,
        "SPLIT_TARGET": 8,
    }.items():
        monkeypatch.setattr(rows_tile, k, v)
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    x[0, : n // 2] = -np.inf  # whole instances see only -inf
    x[-1, n - 1] = 3e38
    assert rows_tile.split(kernels_tensor(x), rows, n, rows_tile.plan(n)) > 1
    out = np.full_like(x, np.nan)
    kernels.softmax(x, out=out)
    assert rel_err(out, ref_softmax(x)) < 1e-5
    # The backward on the same split (partial sums of y·dy, then the write).
    y = ref_softmax(x).astype(np.float32)
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    dx = np.full_like(x, np.nan)
    kernels.softmax_backward(y, dy, out=dx)
    y64 = y.astype(np.float64)
    assert rel_err(dx, y64 * (dy - (dy * y64).sum(-1, keepdims=True))) < 1e-5
    # Cross-entropy, forward and backward, on the same split (targets in
    # different instances' chunks, one out of range).
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    t = rng.integers(0, n, rows)
    t[-1] = n - 1 if rows == 1 else n
    ok = t < n
    loss = np.full(rows, np.nan, np.float32)
    kernels.cross_entropy(x, t, out=loss)
    ref, p = ref_ce(x, t)
    assert np.array_equal(np.isnan(loss), ~ok)
    assert rel_err(loss[ok], ref[ok]) < 1e-5
    dl = rng.standard_normal(rows).astype(np.float32)
    dx = np.full_like(x, np.nan)
    kernels.cross_entropy_backward(dl, x, t, out=dx)
    p[ok, t[ok]] -= 1
    assert np.isnan(dx[~ok]).all()
    assert rel_err(dx[ok], p[ok] * dl[ok, None]) < 1e-5


def kernels_tensor(x: Any) -> Any:
    from zyntax.kernels import _tensors

    return _tensors.tensor(x, "x")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_softmax_half(dtype: str) -> None:
    ml = pytest.importorskip("ml_dtypes")
    nd = np.float16 if dtype == "f16" else ml.bfloat16
    x = rng.standard_normal((5, 137)).astype(nd)
    out = kernels.softmax(x)
    assert out.dtype == x.dtype
    assert rel_err(out.astype(np.float64), ref_softmax(x.astype(np.float64))) < 1e-2
    dy = rng.standard_normal((5, 137)).astype(nd)
    y = out.astype(np.float64)
    ref = y * (dy.astype(np.float64) - (dy.astype(np.float64) * y).sum(-1, keepdims=True))
    assert rel_err(kernels.softmax_backward(out, dy).astype(np.float64), ref) < 2e-2


def test_transposed_views_take_the_scalar_path() -> None:
    """A view whose columns are not unit stride (a transposed array) on the
    program built without the unit-stride promise."""
    p = rows_tile.plan(37)
    k = rows_tile.kernel("softmax_fwd", p, "f32", 0)
    x = (rng.standard_normal((37, 9)) * 3).astype(np.float32).T  # (9, 37), column stride 9
    y = np.full((37, 9), np.nan, np.float32).T
    k.run_interp(x, y, grid=-(-9 // p.rows))
    assert rel_err(y, ref_softmax(x)) < 1e-5


# ---------------------------------------------------------------- layer_norm, rms_norm


def ref_norm(x: Any, w: Any, b: Any, eps: float, rms: bool) -> tuple[Any, Any, Any]:
    """(y, x̂, rstd) in float64."""
    x = np.asarray(x, np.float64)
    d = x if rms else x - x.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt((d * d).mean(-1, keepdims=True) + eps)
    xh = d * rstd
    y = xh * w + (0 if b is None else b)
    return y, xh, rstd


def ref_norm_backward(dy: Any, x: Any, w: Any, eps: float, rms: bool) -> tuple[Any, Any, Any]:
    """dx, dweight, dbias of y = x̂·w + b: with g = dy·w,
    dx = (g - mean(g) - x̂·mean(g·x̂)) * rstd (no mean(g) term for rms)."""
    dy = np.asarray(dy, np.float64)
    _, xh, rstd = ref_norm(x, w, None, eps, rms)
    g = dy * np.asarray(w, np.float64)
    inner = g - xh * (g * xh).mean(-1, keepdims=True)
    if not rms:
        inner -= g.mean(-1, keepdims=True)
    return inner * rstd, (dy * xh).sum(0), dy.sum(0)


def test_norm_backward_reference_matches_differences() -> None:
    """The hand-derived reference against central differences of the forward."""
    x, w = rng.standard_normal((2, 6)), rng.standard_normal(6)
    dy = rng.standard_normal((2, 6))
    for rms in (False, True):
        dx, dw, _ = ref_norm_backward(dy, x, w, 1e-5, rms)
        h = 1e-6
        for i, j in [(0, 1), (1, 4)]:
            xp, xm = x.copy(), x.copy()
            xp[i, j] += h
            xm[i, j] -= h
            fd = (ref_norm(xp, w, None, 1e-5, rms)[0] - ref_norm(xm, w, None, 1e-5, rms)[0]) * dy
            assert abs(fd.sum() / (2 * h) - dx[i, j]) < 1e-6
        wp, wm = w.copy(), w.copy()
        wp[2] += h
        wm[2] -= h
        fd = (ref_norm(x, wp, None, 1e-5, rms)[0] - ref_norm(x, wm, None, 1e-5, rms)[0]) * dy
        assert abs(fd.sum() / (2 * h) - dw[2]) < 1e-6


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("kind", ["layer", "layer_nobias", "rms"])
def test_norm_forward_backward(n: int, kind: str, shape: str) -> None:
    rows = rows_for(n)
    x = (rng.standard_normal((rows, n)) * 3 + 50).astype(np.float32)  # a large mean
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if kind == "layer" else None
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    rms, eps = kind == "rms", 1e-5
    y = np.full_like(x, np.nan)
    dx = np.full_like(x, np.nan)
    if rms:
        kernels.rms_norm(x, w, eps, out=y)
        dx_, dw = kernels.rms_norm_backward(dy, x, w, eps, out=dx)
        db = None
    else:
        kernels.layer_norm(x, w, b, eps, out=y)
        dx_, dw, db = kernels.layer_norm_backward(dy, x, w, b, eps, out=dx)
        assert (db is None) == (b is None)
    assert dx_ is dx
    assert rel_err(y, ref_norm(x, w, b, eps, rms)[0]) < 1e-5
    rdx, rdw, rdb = ref_norm_backward(dy, x, w, eps, rms)
    # dx is a difference of terms of the size of dy·w·rstd (at width 1 it
    # cancels to ~0): the error is measured against that size.
    terms = np.linalg.norm(dy * w * ref_norm(x, w, b, eps, rms)[2])
    assert not np.isnan(dx).any()
    assert np.linalg.norm(dx - rdx) / terms < 1e-5
    assert rel_err(dw, rdw) < 1e-5
    if db is not None:
        assert rel_err(db, rdb) < 1e-5


def test_norm_backward_is_deterministic() -> None:
    x = rng.standard_normal((70, 33)).astype(np.float32)
    w, b = rng.standard_normal(33).astype(np.float32), rng.standard_normal(33).astype(np.float32)
    dy = rng.standard_normal((70, 33)).astype(np.float32)
    a = kernels.layer_norm_backward(dy, x, w, b)
    c = kernels.layer_norm_backward(dy, x, w, b)
    for u, v in zip(a, c, strict=True):
        assert np.array_equal(u, v)


def test_norm_backward_no_rows() -> None:
    w = rng.standard_normal(9).astype(np.float32)
    x = np.zeros((0, 9), np.float32)
    dx, dw, db = kernels.layer_norm_backward(x, x, w, w)
    assert dx.shape == (0, 9) and np.array_equal(dw, np.zeros(9)) and np.array_equal(db, 0 * w)


# ---------------------------------------------------------------- cross-entropy


def ref_ce(x: Any, t: Any) -> tuple[Any, Any]:
    """(losses, softmax) in float64; NaN losses for targets out of range."""
    x = np.asarray(x, np.float64)
    n = x.shape[-1]
    m = x.max(-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(x - m).sum(-1))
    ok = (t >= 0) & (t < n)
    xt = np.take_along_axis(x, np.clip(t, 0, n - 1)[..., None].astype(np.int64), -1)[..., 0]
    return np.where(ok, lse - xt, np.nan), np.exp(x - lse[..., None])


@pytest.mark.parametrize("n", WIDTHS)
@pytest.mark.parametrize("tdtype", [np.int64, np.int32])
def test_cross_entropy_forward_backward(n: int, tdtype: Any, shape: str) -> None:
    rows = rows_for(n)
    x = (rng.standard_normal((rows, n)) * 4).astype(np.float32)
    t = rng.integers(0, n, rows).astype(tdtype)
    loss = np.full(rows, np.nan, np.float32)
    kernels.cross_entropy(x, t, out=loss)
    ref, p = ref_ce(x, t)
    assert rel_err(loss, ref) < 1e-5
    onehot = np.zeros_like(p)
    onehot[np.arange(rows), t] = 1
    dl = rng.standard_normal(rows).astype(np.float32)
    dx = np.full_like(x, np.nan)
    kernels.cross_entropy_backward(dl, x, t, out=dx)
    assert rel_err(dx, (p - onehot) * dl[:, None]) < 1e-5
    g = np.float32(rng.standard_normal())
    dxm = kernels.cross_entropy_backward(np.array(g), x, t, reduction="mean")
    assert rel_err(dxm, (p - onehot) * float(g) / rows) < 1e-5


def test_cross_entropy_targets_out_of_range(shape: str) -> None:
    x = (rng.standard_normal((4, 300)) * 4).astype(np.float32)
    t = np.array([3, 300, -1, 299], np.int64)
    loss = kernels.cross_entropy(x, t)
    ref, p = ref_ce(x, t)
    assert np.array_equal(np.isnan(loss), [False, True, True, False])
    assert rel_err(loss[[0, 3]], ref[[0, 3]]) < 1e-5
    dx = kernels.cross_entropy_backward(np.ones(4, np.float32), x, t)
    assert np.isnan(dx[1:3]).all()
    p[0, 3] -= 1
    p[3, 299] -= 1
    assert rel_err(dx[[0, 3]], p[[0, 3]]) < 1e-5


# ---------------------------------------------------------------- bad input


def test_backward_bad_input_is_typed() -> None:
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w = rng.standard_normal(8).astype(np.float32)
    t = np.array([1, 2, 3])
    with pytest.raises(ArgumentError, match="'dy'"):
        kernels.softmax_backward(x, x[:, :4])
    with pytest.raises(ArgumentError, match="'dy'"):
        kernels.softmax_backward(x, x.astype(np.float16))
    with pytest.raises(ArgumentError, match="'weight'"):
        kernels.layer_norm_backward(x, x, w[:4])
    with pytest.raises(ArgumentError, match="'eps'"):
        kernels.rms_norm_backward(x, x, w, -1.0)
    with pytest.raises(ArgumentError, match="'dloss'"):
        kernels.cross_entropy_backward(np.ones(2, np.float32), x, t)
    with pytest.raises(ArgumentError, match="'dloss'"):
        kernels.cross_entropy_backward(np.ones(3, np.float32), x, t, reduction="mean")
    with pytest.raises(ArgumentError, match="'reduction'"):
        kernels.cross_entropy_backward(np.ones(3, np.float32), x, t, reduction="sum")
    with pytest.raises(ArgumentError, match="'out'"):
        kernels.softmax_backward(x, x.copy(), out=x)


def test_leading_axes_collapse_into_rows() -> None:
    """(2, 3, n) inputs are 6 rows: every backward against its 2-D result."""
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 40)).astype(np.float32)
    w, b = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    x2, dy2 = x.reshape(6, 40), dy.reshape(6, 40)
    y = kernels.softmax(x)
    assert y.shape == x.shape
    np.testing.assert_array_equal(
        kernels.softmax_backward(y, dy).reshape(6, 40),
        kernels.softmax_backward(y.reshape(6, 40), dy2),
    )
    for got, want in zip(
        kernels.layer_norm_backward(dy, x, w, b),
        kernels.layer_norm_backward(dy2, x2, w, b),
        strict=True,
    ):
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    t = rng.integers(0, 40, (2, 3))
    dl = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        kernels.cross_entropy_backward(dl, x, t).reshape(6, 40),
        kernels.cross_entropy_backward(dl.reshape(6), x2, t.reshape(6)),
    )


def test_backward_of_no_rows() -> None:
    x = np.zeros((0, 12), np.float32)
    assert kernels.softmax_backward(x, x).shape == (0, 12)
    dx, dw = kernels.rms_norm_backward(x, x, np.ones(12, np.float32))
    assert dx.shape == (0, 12) and np.array_equal(dw, np.zeros(12, np.float32))
    t = np.zeros(0, np.int64)
    assert kernels.cross_entropy_backward(np.zeros(0, np.float32), x, t).shape == (0, 12)
    got = kernels.cross_entropy_backward(np.array(1, np.float32), x, t, reduction="mean")
    assert got.shape == (0, 12)


# ---------------------------------------------------------------- peeled rows


@pytest.mark.parametrize("n", [1025, 4097])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_peeled_rows(n: int, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Odd widths: every row's tiles start at its last 16-byte boundary (a
    peel, so all but the head are vector accesses); 9 rows give every
    misalignment of a bf16 row, and the one-pass norm backward loops
    several rows per instance. Every kernel, checked against float64, and
    each launch's plan asserted to be peeled."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rows = 9
    x = (rng.standard_normal((rows, n)) * 3).astype(nd)
    x64 = x.astype(np.float64)
    dy = rng.standard_normal((rows, n)).astype(nd)
    w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
    assert rel_err(kernels.softmax(x).astype(np.float64), ref_softmax(x64)) < tol
    y = ref_softmax(x64)
    ref = y * (dy - (dy * y).sum(-1, keepdims=True))
    assert rel_err(kernels.softmax_backward(y.astype(nd), dy).astype(np.float64), ref) < tol
    out = kernels.layer_norm(x, w, b, 1e-5).astype(np.float64)
    assert (
        rel_err(out, ref_norm(x64, w.astype(np.float64), b.astype(np.float64), 1e-5, False)[0])
        < tol
    )
    dx, dw, db = kernels.layer_norm_backward(dy, x, w, b, 1e-5)
    rdx, rdw, rdb = ref_norm_backward(dy, x64, w.astype(np.float64), 1e-5, False)
    for got, r in ((dx, rdx), (dw, rdw), (db, rdb)):
        assert rel_err(got.astype(np.float64), r) < 3 * tol
    t = rng.integers(0, n, rows)
    loss, p = ref_ce(x64, t)
    assert rel_err(kernels.cross_entropy(x, t), loss) < 1e-5
    dl = rng.standard_normal(rows).astype(np.float32)
    p[np.arange(rows), t] -= 1
    got = kernels.cross_entropy_backward(dl, x, t).astype(np.float64)
    assert rel_err(got, p * dl[:, None]) < tol
    assert {name for name, _ in plans} >= {"softmax_fwd", "norm_bwd_rows", "ce_bwd"}
    for name, plan in plans:
        assert name == "colsum" or plan.peel == n % (16 // x.itemsize), name


def test_peel_needs_one_misalignment() -> None:
    """A peel shifts every row view alike, so views whose row strides leave
    different misalignments (x of width 1001 in a wider array, y dense) are
    not peeled, and still right; a whole row too close to its tile's width
    for the head gets the next tile."""
    base = (rng.standard_normal((6, 1030)) * 3).astype(np.float32)
    x = base[:, :1025]
    y = np.full((6, 1025), np.nan, np.float32)
    kernels.softmax(x, out=y)
    assert rel_err(y, ref_softmax(x)) < 1e-5
    p = rows_tile.plan(2047)
    q = rows_tile.peeled("softmax", p, "f32", 16, 2047, 2047, 2047)
    assert (p.width, q.width, q.peel) == (2048, 4096, 3)
    assert rows_tile.peeled("softmax", p, "f32", 16, 2047, 2047, 2048) == p
    assert rows_tile.peeled("softmax", p, "f32", 1, 2047, 2047) == p


# ---------------------------------------------------------------- tailed rows


@pytest.mark.parametrize("n", [1025, 1200])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_tailed_rows(n: int, dtype: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows just past a power of two (with the peel's head) take a [1, W/2]
    tile and a narrow tail tile (``Plan.tail``), not a [1, W] tile half
    empty: the norms forward and backward against float64, outputs poisoned,
    each launch's plan asserted to have the tail, dweight bit-identical on a
    rerun; and on an unaligned (not peeled) view."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rms, rows = kind == "rms", 9
    base = (rng.standard_normal((rows, n + 1)) * 3 + 20).astype(nd)
    for x in (np.ascontiguousarray(base[:, :n]), base[:, 1:]):
        plans.clear()
        x64 = x.astype(np.float64)
        dy = rng.standard_normal((rows, n)).astype(nd)
        w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
        w64, b64 = w.astype(np.float64), None if rms else b.astype(np.float64)
        y = np.full((rows, n), np.nan, nd)
        dx = np.full((rows, n), np.nan, nd)
        if rms:
            kernels.rms_norm(x, w, 1e-5, out=y)
            got = kernels.rms_norm_backward(dy, x, w, 1e-5, out=dx)
            again = kernels.rms_norm_backward(dy, x, w, 1e-5)
        else:
            kernels.layer_norm(x, w, b, 1e-5, out=y)
            got = kernels.layer_norm_backward(dy, x, w, b, 1e-5, out=dx)
            again = kernels.layer_norm_backward(dy, x, w, b, 1e-5)
        assert rel_err(y, ref_norm(x64, w64, b64, 1e-5, rms)[0]) < tol
        rdx, rdw, rdb = ref_norm_backward(dy, x64, w64, 1e-5, rms)
        for g, r in zip(got, (rdx, rdw, rdb), strict=False):
            assert rel_err(np.asarray(g, np.float64), r) < 3 * tol
        for u, v in zip(got[1:], again[1:], strict=True):
            assert np.array_equal(u, v)
        assert {name for name, _ in plans} >= {"norm_fwd", "norm_bwd_rows"}
        for name, plan in plans:
            assert name == "colsum" or (plan.tail and plan.width == 1024), (name, plan)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_peeled_chunked_norm_backward(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked rows of odd width: the norm backward's dx pass peels too (its
    row groups a multiple of the vector, so every row of a group has the
    group's head); against float64, dx poisoned, dweight bit-identical on a
    rerun, and the launch's plan asserted to be peeled."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    monkeypatch.setattr(rows_tile, "ROWS_MAX", 0)
    monkeypatch.setattr(rows_tile, "ROW_MAX", 0)
    monkeypatch.setattr(rows_tile, "ROW_MAX_16", 0)
    monkeypatch.setattr(rows_tile, "CHUNK", 64)
    monkeypatch.setattr(rows_tile, "CHUNK_WARPS", 2)
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rows, n = 11, 301
    x = (rng.standard_normal((rows, n)) * 3 + 20).astype(nd)
    dy = rng.standard_normal((rows, n)).astype(nd)
    w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
    dx = np.full((rows, n), np.nan, nd)
    got = kernels.layer_norm_backward(dy, x, w, b, 1e-5, out=dx)
    again = kernels.layer_norm_backward(dy, x, w, b, 1e-5)
    ref = ref_norm_backward(dy, x.astype(np.float64), w.astype(np.float64), 1e-5, False)
    for g, r in zip(got, ref, strict=True):
        assert rel_err(np.asarray(g, np.float64), r) < 3 * tol
    for u, v in zip(got, again, strict=True):
        assert np.array_equal(u, v)
    chunk_plans = [p for name, p in plans if name == "norm_bwd_chunks"]
    assert chunk_plans and all(p.peel == n % (16 // x.itemsize) for p in chunk_plans)


@pytest.mark.parametrize("n", [1025, 1200])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_tailed_softmax_cross_entropy(n: int, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail tile (``Plan.tail``) in softmax and cross-entropy, forward
    and backward, against float64 with outputs poisoned, on an aligned
    (peeled) and an unaligned view; each launch's plan asserted to have it."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rows = 9
    base = (rng.standard_normal((rows, n + 1)) * 4).astype(nd)
    for x in (np.ascontiguousarray(base[:, :n]), base[:, 1:]):
        plans.clear()
        x64 = x.astype(np.float64)
        y = np.full((rows, n), np.nan, nd)
        kernels.softmax(x, out=y)
        p64 = ref_softmax(x64)
        assert rel_err(y, p64) < tol
        dy = rng.standard_normal((rows, n)).astype(nd)
        dx = np.full((rows, n), np.nan, nd)
        yb = p64.astype(nd)
        kernels.softmax_backward(yb, dy, out=dx)
        y64 = yb.astype(np.float64)
        ref = y64 * (dy - (dy * y64).sum(-1, keepdims=True))
        assert rel_err(dx, ref) < 3 * tol
        t = rng.integers(0, n, rows)
        loss, p = ref_ce(x64, t)
        assert rel_err(kernels.cross_entropy(x, t), loss) < 1e-5
        dl = rng.standard_normal(rows).astype(np.float32)
        p[np.arange(rows), t] -= 1
        dxc = np.full((rows, n), np.nan, nd)
        kernels.cross_entropy_backward(dl, x, t, out=dxc)
        assert rel_err(dxc, p * dl[:, None]) < tol
        assert {name for name, _ in plans} == {"softmax_fwd", "softmax_bwd", "ce_fwd", "ce_bwd"}
        for name, plan in plans:
            assert plan.tail and plan.width == 1024, (name, plan)


def test_min_blocks_caps_registers_not_below_128() -> None:
    """MIN_BLOCKS asks ptxas for instances per SM (``.minnctapersm`` in the
    kernel's HIR) only where that leaves 128 registers a thread or more."""

    def min_blocks(p: Any) -> Any:
        m = json.loads(rows_tile._module("norm_bwd_rows", p, "bf16", 16, "layer").to_json())
        return m["functions"][0]["kind"]["kernel"]["min_blocks"]

    Plan = rows_tile.Plan
    assert rows_tile.MIN_BLOCKS[("norm_bwd_rows", "row")] == 2
    assert min_blocks(Plan("row", 1, 4096, 8, peel=1, tail=16)) == 2  # 2 x 256 threads
    assert min_blocks(Plan("row", 1, 8192, 16)) is None  # 2 x 512 would leave 64


@pytest.mark.parametrize("reload", [False, True])
def test_norm_backward_prefetch(reload: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass norm backward that loads the next row block ahead (the
    default from NORM_BWD_PREFETCH_WARPS warps; here every plan), with the
    weight held or reloaded per row block (NORM_BWD_W_RELOAD), against
    float64, dx poisoned."""
    monkeypatch.setattr(rows_tile, "NORM_BWD_PREFETCH_WARPS", 4)
    monkeypatch.setattr(rows_tile, "NORM_BWD_W_RELOAD", reload)
    rows, n = 9, 1025
    x = (rng.standard_normal((rows, n)) * 3 + 20).astype(np.float32)
    w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dy = rng.standard_normal((rows, n)).astype(np.float32)
    dx = np.full_like(x, np.nan)
    got = kernels.layer_norm_backward(dy, x, w, b, 1e-5, out=dx)
    ref = ref_norm_backward(dy, x.astype(np.float64), w.astype(np.float64), 1e-5, False)
    for g, r in zip(got, ref, strict=True):
        assert rel_err(g, r) < 1e-5


# ---------------------------------------------------------------- wide rows held in registers


def test_wide_and_held_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 50257-wide bf16 row (peeled) is six [1, 8192] tiles and a [1, 2048]
    tail on 32 warps; a 128256-wide one keeps HELD_TILES tiles and loops over
    the rest; programs outside WIDE/HELD keep the chunks."""
    monkeypatch.setattr(rows_tile, "WIDE", frozenset({"softmax_fwd"}))
    monkeypatch.setattr(rows_tile, "HELD", frozenset({"norm_fwd"}))
    p = rows_tile.peeled("softmax", rows_tile.plan(50257, 2), "bf16", 16, 50257, 50257)
    q = rows_tile.wide("softmax_fwd", p, 50257, "bf16")
    assert (q.shape, q.width, q.reps, q.tail, q.warps) == ("row", 8192, 6, 2048, 32)
    assert rows_tile.wide("ce_fwd", p, 50257, "bf16") == p
    c = rows_tile.plan(128256, 2)
    assert rows_tile.wide("softmax_fwd", c, 128256, "bf16") == c  # 125 elements a thread
    h = rows_tile.held("norm_fwd", c, 128256)
    assert (h.shape, h.width, h.held, h.unroll) == ("chunks", 8192, rows_tile.HELD_TILES, 2)
    assert rows_tile.held("norm_fwd", c, 40000) == c  # not wider than the held tiles and one

    # The defaults: the RMSNorm forward's loop (HELD_FORM: nothing held,
    # [1, 4096] tiles one a step on 8 warps), LayerNorm's chunks; the
    # softmax forward's one-tile rows prefetched, 4 instances per SM, not
    # its wide rows.
    monkeypatch.undo()
    r = rows_tile.held("rms_fwd", c, 128256)
    assert (r.shape, r.width, r.warps, r.held, r.unroll) == ("chunks", 4096, 8, 0, 1)
    assert rows_tile.held("norm_fwd", c, 128256) == c
    t = rows_tile.tailed("softmax", rows_tile.plan(4097, 2), 4097, "bf16")
    assert rows_tile.prefetching("softmax_fwd", t).persist == 4
    assert rows_tile.prefetching("norm_fwd", t) == t
    assert rows_tile.prefetching("softmax_fwd", q) == q


@pytest.mark.parametrize("n", [1000, 4097])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_wide_and_held_rows(n: int, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked rows held whole over several tiles (``WIDE``: softmax and
    cross-entropy forward, cross-entropy backward, the norms' forward) or,
    for the norms' forward, with their first tiles held and the rest read
    twice (``HELD``), shrunk to 64-column tiles on 2 warps so that 1000 is
    wide and 4097 held (bf16: 3 tiles a step, written backwards; f32:
    nothing held, 2 tiles a step); aligned
    (peeled) and unaligned rows, outputs
    poisoned, against float64; each launch's plan asserted."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    for k, v in {
        "ROWS_MAX": 0,
        "ROW_MAX": 0,
        "ROW_MAX_16": 0,
        "CHUNK": 64,
        "WIDE": frozenset(WIDE_PROGRAMS),
        "WIDE_TILE": 64,
        "WIDE_WARPS": 2,
        "WIDE_PER_THREAD": 40,
        "HELD": frozenset({"norm_fwd", "rms_fwd"}),
        "HELD_FORM": {},
        "HELD_TILES": 2 if ml else 0,  # f32: the unrolled loop alone
        "HELD_TILE": 64,
        "HELD_WARPS": 2,
        # bf16: 3 tiles a loop step, the write loop from the row's end
        "HELD_UNROLL": 3 if ml else 2,
        "HELD_REVERSE": bool(ml),
    }.items():
        monkeypatch.setattr(rows_tile, k, v)
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rows = 9
    base = (rng.standard_normal((rows, n + 1)) * 4 + 2).astype(nd)
    w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
    w64, b64 = w.astype(np.float64), b.astype(np.float64)
    for x in (np.ascontiguousarray(base[:, :n]), base[:, 1:]):
        plans.clear()
        x64 = x.astype(np.float64)
        for kind in ("layer", "rms"):
            y = np.full((rows, n), np.nan, nd)
            if kind == "layer":
                kernels.layer_norm(x, w, b, 1e-5, out=y)
            else:
                kernels.rms_norm(x, w, 1e-5, out=y)
            ref = ref_norm(x64, w64, b64 if kind == "layer" else None, 1e-5, kind == "rms")[0]
            assert rel_err(y, ref) < tol, kind
        if n == 1000:
            y = np.full((rows, n), np.nan, nd)
            kernels.softmax(x, out=y)
            assert rel_err(y, ref_softmax(x64)) < tol
            t = rng.integers(0, n, rows)
            loss, p = ref_ce(x64, t)
            assert rel_err(kernels.cross_entropy(x, t), loss) < 1e-5
            dl = rng.standard_normal(rows).astype(np.float32)
            p[np.arange(rows), t] -= 1
            dxc = np.full((rows, n), np.nan, nd)
            kernels.cross_entropy_backward(dl, x, t, out=dxc)
            assert rel_err(dxc, p * dl[:, None]) < tol
        for name, plan in plans:
            if n == 1000:
                assert plan.shape == "row" and plan.reps > 1 and plan.width == 64, (name, plan)
            else:
                held = (2, 3) if ml else (0, 2)
                assert plan.shape == "chunks" and (plan.held, plan.unroll) == held, (name, plan)
        assert len(plans) == (5 if n == 1000 else 2)


def test_norm_forward_row_warps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole row of one [1, 8192] tile runs the norm forward on ROW_WARPS
    (32) warps: plan and values (against float64, output poisoned)."""
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append(key[0])
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    n = 6000
    x = (rng.standard_normal((3, n)) * 3 + 2).astype(np.float32)
    w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    y = np.full_like(x, np.nan)
    kernels.layer_norm(x, w, b, 1e-5, out=y)
    ref = ref_norm(x, w.astype(np.float64), b.astype(np.float64), 1e-5, False)[0]
    assert rel_err(y, ref) < 1e-5
    assert [(p.width, p.warps, p.tail) for p in plans] == [(8192, 32, 0)]


@pytest.mark.parametrize("n", [300, 1000])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("persist", [0, 1])
def test_cluster_rows(n: int, dtype: str, persist: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked rows split over a cluster of CTAs (``CLUSTER``: the norms'
    and softmax forward; the tile layer's reductions combine the cluster
    through distributed shared memory), shrunk to 64-column tiles on 2
    warps: 4 CTAs a row for the norms, 2 for softmax, aligned (peeled) and
    unaligned rows, outputs poisoned, against float64; with `persist`
    (``CLUSTER_PERSIST``) two clusters loop over the rows, loading the next
    row before this one's reductions; each launch's plan asserted."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    for k, v in {
        "ROWS_MAX": 0,
        "ROW_MAX": 0,
        "ROW_MAX_16": 0,
        "CHUNK": 64,
        "WIDE": frozenset(),
        "CLUSTER": {"norm_fwd": 4, "rms_fwd": 4, "softmax_fwd": 2},
        "CLUSTER_MIN": 0,
        "CLUSTER_TILE": 64,
        "CLUSTER_WARPS": 2,
        "CLUSTER_PERSIST": {k: persist for k in ("norm_fwd", "rms_fwd", "softmax_fwd")},
    }.items():
        monkeypatch.setattr(rows_tile, k, v)
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0], rest[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    rows = 5
    base = (rng.standard_normal((rows, n + 1)) * 4 + 2).astype(nd)
    w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
    w64, b64 = w.astype(np.float64), b.astype(np.float64)
    for x in (np.ascontiguousarray(base[:, :n]), base[:, 1:]):
        plans.clear()
        x64 = x.astype(np.float64)
        for kind in ("layer", "rms"):
            y = np.full((rows, n), np.nan, nd)
            if kind == "layer":
                kernels.layer_norm(x, w, b, 1e-5, out=y)
            else:
                kernels.rms_norm(x, w, 1e-5, out=y)
            ref = ref_norm(x64, w64, b64 if kind == "layer" else None, 1e-5, kind == "rms")[0]
            assert rel_err(y, ref) < tol, kind
        y = np.full((rows, n), np.nan, nd)
        kernels.softmax(x, out=y)
        assert rel_err(y, ref_softmax(x64)) < tol
        for name, plan, grid in plans:
            c = 2 if name == "softmax_fwd" else 4
            assert (plan.shape, plan.cluster, plan.width) == ("row", c, 64), (name, plan)
            assert plan.persist == persist
            # The slices cover the row and its peel's head.
            assert c * plan.reps * 64 >= n + (7 if plan.peel else 0)
            assert grid == ((2 if persist else rows) * c,)
        assert len(plans) == 3


#: Every program that prefetches whole rows (PREFETCH, PREFETCH_ROWS).
PREFETCHED = ("softmax_fwd", "softmax_bwd", "norm_fwd", "rms_fwd", "ce_fwd", "ce_bwd")


@pytest.mark.parametrize("n", [60, 1000, 1025, 3000])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_prefetched_rows(n: int, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole rows with ``PREFETCH`` (one row an instance: 1025 a tailed row,
    3000) and ``PREFETCH_ROWS`` (several rows an instance: 60, 1000): two
    instances loop over the row blocks, loading the next block before this
    one's reductions, for every program that takes it (softmax forward and
    backward, the norms' forward, cross-entropy forward and backward),
    aligned (peeled) and unaligned rows, outputs poisoned, against float64;
    each launch's plan and grid asserted."""
    ml = pytest.importorskip("ml_dtypes") if dtype == "bf16" else None
    nd = np.float32 if ml is None else ml.bfloat16
    tol = 1e-5 if ml is None else 2e-2
    monkeypatch.setattr(rows_tile, "PREFETCH", dict.fromkeys(PREFETCHED, 1))
    monkeypatch.setattr(rows_tile, "PREFETCH_ROWS", dict.fromkeys(PREFETCHED, 1))
    monkeypatch.setattr(rows_tile, "PREFETCH_MIN_WIDTH", 0)
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0], rest[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    # Two instances and a partial row block each (five rows of one-row plans).
    per = rows_tile.plan(n).rows
    rows = 4 * per + 1 if per > 1 else 5
    base = (rng.standard_normal((rows, n + 1)) * 4 + 2).astype(nd)
    w, b = (rng.standard_normal(n).astype(nd) for _ in range(2))
    w64, b64 = w.astype(np.float64), b.astype(np.float64)
    t = rng.integers(0, n, rows)
    dl = rng.standard_normal(rows).astype(np.float32)
    for x in (np.ascontiguousarray(base[:, :n]), base[:, 1:]):
        plans.clear()
        x64 = x.astype(np.float64)
        for kind in ("layer", "rms"):
            y = np.full((rows, n), np.nan, nd)
            if kind == "layer":
                kernels.layer_norm(x, w, b, 1e-5, out=y)
            else:
                kernels.rms_norm(x, w, 1e-5, out=y)
            ref = ref_norm(x64, w64, b64 if kind == "layer" else None, 1e-5, kind == "rms")[0]
            assert rel_err(y, ref) < tol, kind
        y = np.full((rows, n), np.nan, nd)
        kernels.softmax(x, out=y)
        assert rel_err(y, ref_softmax(x64)) < tol
        dy = rng.standard_normal((rows, n)).astype(nd)
        dx = np.full((rows, n), np.nan, nd)
        kernels.softmax_backward(x, dy, out=dx)  # any y: the backward is its formula
        dy64 = dy.astype(np.float64)
        assert rel_err(dx, x64 * (dy64 - (dy64 * x64).sum(-1, keepdims=True))) < tol
        loss = np.full(rows, np.nan, np.float32)
        kernels.cross_entropy(x, t, out=loss)
        lref, p = ref_ce(x64, t)
        assert rel_err(loss, lref) < 1e-5
        dx = np.full((rows, n), np.nan, nd)
        kernels.cross_entropy_backward(dl, x, t, out=dx)
        onehot = np.zeros_like(p)
        onehot[np.arange(rows), t] = 1
        assert rel_err(dx, (p - onehot) * dl[:, None]) < tol
        for name, plan, grid in plans:
            assert (plan.shape, plan.rows, plan.persist) == (
                ("row", 1, 1) if per == 1 else ("rows", per, 1)
            ), (name, plan)
            assert grid == (2,)
        assert len(plans) == 6
