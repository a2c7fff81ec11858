"""Cross-entropy's tile programs for :mod:`rows_tile` (forward, fused
backward, and few wide rows split over several instances): the loss
``logsumexp(x[r]) - x[r, t[r]]`` and ``(softmax(x[r]) - onehot(t[r])) *
dloss[r]``, NaN rows for a target outside ``[0, n)``; the program pieces
(``_P``) are rows_tile's, the online softmax state _rows'."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zyntax import tile

from ._rows import NEG_INF, _merge, _online, _split_merged

if TYPE_CHECKING:
    from . import rows_tile as rt


def _ce_target(P: rt._P, tg: tile.View, r0: Any, n: tile.Scalar, R: int) -> tuple[Any, Any]:
    """(target column as u32 [R, 1], whether it is in [0, n)) of rows r0.."""
    t64 = P.t.load(tg, (r0, 0), (R, 1)).cast("i64")
    n64 = P.splat(n, (R, 1)).cast("i64")
    ok = P.t.binary("and", P.t.cmp("ge", t64, P.t.zeros((R, 1), "i64")), P.t.cmp("lt", t64, n64))
    return t64.cast("u32"), ok


def _whole_rows(
    P: rt._P, x: tile.View, body: Callable[[Any, list[Any], list[tile.Tile]], None]
) -> None:
    """body(first row, pieces, f32 tiles of x) for this instance's whole
    rows: its own, or with ``Plan.persist`` each row block's loads issued
    before the previous block's reductions (``_P.prefetched_rows``)."""
    if P.p.persist:
        P.prefetched_rows([(x, NEG_INF)], body)
        return
    r0 = P.t.program_id(0) * P.p.rows
    segs = P.pieces(P.head(r0))
    body(r0, segs, [P.load(x, (r0, c), sh, NEG_INF) for c, sh in segs])


def _ce_fwd(P: rt._P, tdtype: str) -> None:
    """loss[r] = logsumexp(x[r]) - x[r, t[r]]; NaN for a target outside [0, n)."""
    x, tg, loss = P.view("logits"), P.view("targets", tdtype, False), P.view("loss", "f32", False)
    R, W = P.shape
    nan = P.t.full((R, 1), "f32", math.nan)
    if P.p.shape != "chunks":

        def whole(r0: Any, segs: list[tuple[Any, tuple[int, int]]], vs: list[tile.Tile]) -> None:
            m = P.rowmax(vs)
            lse = m + P.unary("log", P.rowsum([(v - P.bc(m, v.shape)).exp() for v in vs]))
            t, ok = _ce_target(P, tg, r0, x.dim(1), R)
            xts = [
                P.t.where(P.t.cmp("eq", P.cols(c, sh), P.bc(t, sh)), v, P.t.zeros(sh))
                for (c, sh), v in zip(segs, vs, strict=True)
            ]
            P.t.store(loss, (r0, 0), P.t.where(ok, lse - P.rowsum(xts), nan))

        _whole_rows(P, x, whole)
        return
    row, n, sh = P.t.program_id(0), x.dim(1), (1, W)
    t, ok = _ce_target(P, tg, row, n, 1)
    tb = P.bc(t, sh)

    def step(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        v = vs[0]
        hit = P.t.cmp("eq", P.cols(c0, sh), tb)
        return [*_online(P, c[0], c[1], v), P.fold(P.t.where(hit, v, P.t.zeros(sh))) + c[2]]

    st = P.state
    inits = [P.t.full(st, "f32", NEG_INF), P.t.zeros(st), P.t.zeros(st)]
    m, s, xt = P.streamed(n, [(x, NEG_INF, row)], inits, step, P.head(row))
    base, total = _merge(P, m, s)
    lse = base + P.unary("log", total)
    P.t.store(loss, (row, 0), P.t.where(ok, lse - xt.sum(1), nan))


def _ce_bwd(P: rt._P, tdtype: str) -> None:
    """dx[r] = (softmax(x[r]) - onehot(t[r])) * dloss[r] * scale, fused with
    the softmax (NaN rows for a target outside [0, n))."""
    x, tg = P.view("logits"), P.view("targets", tdtype, False)
    dl, dx = P.view("dloss", "f32", False), P.view("dx")
    scale = P.t.scalar_param("scale", "f32")
    R, W = P.shape
    col = (R, 1)
    if P.p.shape != "chunks":

        def whole(r0: Any, segs: list[tuple[Any, tuple[int, int]]], vs: list[tile.Tile]) -> None:
            m = P.rowmax(vs)
            es = [(v - P.bc(m, v.shape)).exp() for v in vs]
            r = 1.0 / P.rowsum(es)
            t, ok = _ce_target(P, tg, r0, x.dim(1), R)
            g = P.t.load(dl, (r0, 0), col) * P.splat(scale, col)
            g = P.t.where(ok, g, P.t.full(col, "f32", math.nan))
            for (c, sh), e in zip(segs, es, strict=True):
                hit = P.t.cmp("eq", P.cols(c, sh), P.bc(t, sh))
                onehot = P.t.where(hit, P.t.full(sh, "f32", 1.0), P.t.zeros(sh))
                P.store(dx, (r0, c), (e * P.bc(r, sh) - onehot) * P.bc(g, sh))

        _whole_rows(P, x, whole)
        return
    row, n, sh, one = P.t.program_id(0), x.dim(1), (1, W), (1, 1)
    h = P.head(row)

    xs = [(x, NEG_INF, row)]

    def stats(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        return list(_online(P, c[0], c[1], vs[0]))

    m, s = P.streamed(n, xs, [P.t.full(P.state, "f32", NEG_INF), P.t.zeros(P.state)], stats, h)
    base, total = _merge(P, m, s)
    t, ok = _ce_target(P, tg, row, n, 1)
    g = P.t.load(dl, (row, 0), one) * P.splat(scale, one)
    g = P.t.where(ok, g, P.t.full(one, "f32", math.nan))
    base, r, tb, gb = P.bc(base, sh), P.bc(1.0 / total, sh), P.bc(t, sh), P.bc(g, sh)

    def write(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        p = (vs[0] - base).exp() * r
        hit = P.t.cmp("eq", P.cols(c0, sh), tb)
        onehot = P.t.where(hit, P.t.full(sh, "f32", 1.0), P.t.zeros(sh))
        P.store(dx, (row, c0), (p - onehot) * gb)
        return []

    P.streamed(n, xs, [], write, h)


def _ce_split_stats(P: rt._P, tdtype: str) -> None:
    """Split rows: :func:`_split_stats` plus this instance's part of the
    target logit (0 where the target is in another instance's chunks)."""
    x, tg = P.view("logits"), P.view("targets", tdtype, False)
    mp, sp = P.view("m_part", "f32", False), P.view("s_part", "f32", False)
    xp = P.view("xt_part", "f32", False)
    row, j, sh, w = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width
    t, _ = _ce_target(P, tg, row, x.dim(1), 1)
    tb = P.bc(t, sh)

    def step(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        v = P.load(x, (row, c0), sh, NEG_INF)
        hit = P.t.cmp("eq", P.cols(c0, sh), tb)
        return [*_online(P, c[0], c[1], v), P.fold(P.t.where(hit, v, P.t.zeros(sh))) + c[2]]

    st = P.state
    inits = [P.t.full(st, "f32", NEG_INF), P.t.zeros(st), P.t.zeros(st)]
    m, s, xt = P.strided(j * w, x.dim(1), mp.dim(1) * w, inits, step, P.head(row))
    base, total = _merge(P, m, s)
    for v, val in ((mp, base), (sp, total), (xp, xt.sum(1))):
        P.t.store(v, (row, j), val)


def _ce_split_loss(P: rt._P, tdtype: str, parts: int) -> None:
    """Split rows: one instance per row merges the parts into the loss."""
    x, tg = P.view("logits"), P.view("targets", tdtype, False)
    mp, sp = P.view("m_part", "f32", False), P.view("s_part", "f32", False)
    xp, loss = P.view("xt_part", "f32", False), P.view("loss", "f32", False)
    row = P.t.program_id(0)
    base, total = _split_merged(P, mp, sp, row, parts)
    xt = P.t.load(xp, (row, 0), (1, parts)).sum(1)
    _, ok = _ce_target(P, tg, row, x.dim(1), 1)
    nan = P.t.full((1, 1), "f32", math.nan)
    P.t.store(loss, (row, 0), P.t.where(ok, base + P.unary("log", total) - xt, nan))


def _ce_split_write(P: rt._P, tdtype: str, parts: int) -> None:
    """Split rows, the backward's second program: instance (row, j) writes
    (softmax - onehot) * dloss for chunks j, j + S, ..."""
    x, tg = P.view("logits"), P.view("targets", tdtype, False)
    dl, dx = P.view("dloss", "f32", False), P.view("dx")
    mp, sp = P.view("m_part", "f32", False), P.view("s_part", "f32", False)
    scale = P.t.scalar_param("scale", "f32")
    row, j, sh, w, one = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width, (1, 1)
    base, total = _split_merged(P, mp, sp, row, parts)
    t, ok = _ce_target(P, tg, row, x.dim(1), 1)
    g = P.t.load(dl, (row, 0), one) * P.splat(scale, one)
    g = P.t.where(ok, g, P.t.full(one, "f32", math.nan))
    base, r, tb, gb = P.bc(base, sh), P.bc(1.0 / total, sh), P.bc(t, sh), P.bc(g, sh)

    def write(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        p = (P.load(x, (row, c0), sh, NEG_INF) - base).exp() * r
        hit = P.t.cmp("eq", P.cols(c0, sh), tb)
        onehot = P.t.where(hit, P.t.full(sh, "f32", 1.0), P.t.zeros(sh))
        P.store(dx, (row, c0), (p - onehot) * gb)
        return []

    P.strided(j * w, x.dim(1), mp.dim(1) * w, [], write, P.head(row))
