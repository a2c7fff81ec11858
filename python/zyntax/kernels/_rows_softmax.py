"""Softmax's tile programs for :mod:`rows_tile` (forward, backward, and few
wide rows split over several instances): ``exp(x - max) / sum`` per row and
``dx = y * (dy - sum(dy * y))``; the program pieces (``_P``) are rows_tile's,
the online softmax state _rows'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zyntax import tile

from ._rows import NEG_INF, _merge, _online, _split_merged

if TYPE_CHECKING:
    from . import rows_tile as rt


def _softmax_fwd(P: rt._P) -> None:
    x, y = P.view("x"), P.view("y")
    W = P.shape[1]
    if P.p.shape != "chunks":

        def whole(r0: Any, segs: list[tuple[Any, tuple[int, int]]], vs: list[tile.Tile]) -> None:
            m = P.rowmax(vs)
            es = [(v - P.bc(m, v.shape)).exp() for v in vs]
            r = 1.0 / P.rowsum(es)
            for (c, sh), e in zip(segs, es, strict=True):
                P.store(y, (r0, c), e * P.bc(r, sh))

        if P.p.persist:
            P.prefetched_rows([(x, NEG_INF)], whole)
            return
        r0, segs = P.whole_rows()
        whole(r0, segs, [P.load(x, (r0, c), sh, NEG_INF) for c, sh in segs])
        return
    n, sh = x.dim(1), (1, W)

    def one_row(row: Any) -> None:
        h = P.head(row)

        xs = [(x, NEG_INF, row)]

        def stats(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
            return list(_online(P, c[0], c[1], vs[0]))

        inits = [P.t.full(P.state, "f32", NEG_INF), P.t.zeros(P.state)]
        m, s = P.streamed(n, xs, inits, stats, h)
        base, total = _merge(P, m, s)
        base, r = P.bc(base, sh), P.bc(1.0 / total, sh)

        def write(c0: Any, vs: list[tile.Tile]) -> None:
            P.store(y, (row, c0), (vs[0] - base).exp() * r)

        P.write_chunks(n, xs, write, h)

    P.each_row(x.dim(0), one_row)


def _split_stats(P: rt._P) -> None:
    """Split rows, first program: instance (row, j) of S reduces chunks j,
    j + S, ... of its row to (safe max, sum of exp(x - safe max)), stored at
    [row, j] of the two f32 part views."""
    x = P.view("x")
    mp, sp = P.view("m_part", "f32", False), P.view("s_part", "f32", False)
    row, j, sh, w = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width

    def stats(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        return list(_online(P, c[0], c[1], P.load(x, (row, c0), sh, NEG_INF)))

    inits = [P.t.full(P.state, "f32", NEG_INF), P.t.zeros(P.state)]
    m, s = P.strided(j * w, x.dim(1), mp.dim(1) * w, inits, stats, P.head(row))
    base, total = _merge(P, m, s)
    P.t.store(mp, (row, j), base)
    P.t.store(sp, (row, j), total)


def _softmax_split_write(P: rt._P, parts: int) -> None:
    """Split rows, second program: instance (row, j) writes chunks j, j + S, ..."""
    x, y = P.view("x"), P.view("y")
    mp, sp = P.view("m_part", "f32", False), P.view("s_part", "f32", False)
    row, j, sh, w = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width
    base, total = _split_merged(P, mp, sp, row, parts)
    base, r = P.bc(base, sh), P.bc(1.0 / total, sh)

    def write(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        P.store(y, (row, c0), (P.load(x, (row, c0), sh, NEG_INF) - base).exp() * r)
        return []

    P.strided(j * w, x.dim(1), mp.dim(1) * w, [], write, P.head(row))


def _softmax_bwd(P: rt._P) -> None:
    """dx = y * (dy - sum(dy * y)) per row."""
    y, dy, dx = P.view("y"), P.view("dy"), P.view("dx")
    R, W = P.shape
    if P.p.shape != "chunks":

        def whole(r0: Any, segs: list[tuple[Any, tuple[int, int]]], vs: list[tile.Tile]) -> None:
            ys, gs = vs[: len(segs)], vs[len(segs) :]
            d = P.rowsum([a * b for a, b in zip(ys, gs, strict=True)])
            for (c, sh), yv, gv in zip(segs, ys, gs, strict=True):
                P.store(dx, (r0, c), yv * (gv - P.bc(d, sh)))

        if P.p.persist:
            P.prefetched_rows([(y, 0.0), (dy, 0.0)], whole)
            return
        r0 = P.t.program_id(0) * R
        segs = P.pieces(P.head(r0))
        whole(r0, segs, [P.load(v, (r0, c), sh) for v in (y, dy) for c, sh in segs])
        return
    row, n, sh = P.t.program_id(0), y.dim(1), (1, W)
    h = P.head(row)

    xs = [(y, 0.0, row), (dy, 0.0, row)]

    def dot(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        return [P.fold(vs[0] * vs[1]) + c[0]]

    (acc,) = P.streamed(n, xs, [P.t.zeros(P.state)], dot, h)
    d = P.bc(acc.sum(1), sh)

    def write(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        P.store(dx, (row, c0), vs[0] * (vs[1] - d))
        return []

    P.streamed(n, xs, [], write, h)


def _softmax_bwd_split_dot(P: rt._P) -> None:
    """Split rows, the backward's first program: instance (row, j) sums
    y·dy over chunks j, j + S, ... into [row, j] of the f32 part view."""
    y, dy, dp = P.view("y"), P.view("dy"), P.view("d_part", "f32", False)
    row, j, sh, w = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width

    def dot(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        return [P.fold(P.load(y, (row, c0), sh) * P.load(dy, (row, c0), sh)) + c[0]]

    (acc,) = P.strided(j * w, y.dim(1), dp.dim(1) * w, [P.t.zeros(P.state)], dot, P.head(row))
    P.t.store(dp, (row, j), acc.sum(1))


def _softmax_bwd_split_write(P: rt._P, parts: int) -> None:
    """Split rows, the backward's second program: instance (row, j) writes
    dx = y·(dy - Σ y·dy) for chunks j, j + S, ... (the sum of the S parts)."""
    y, dy, dx = P.view("y"), P.view("dy"), P.view("dx")
    dp = P.view("d_part", "f32", False)
    row, j, sh, w = P.t.program_id(0), P.t.program_id(1), P.shape, P.p.width
    d = P.bc(P.t.load(dp, (row, 0), (1, parts)).sum(1), sh)

    def write(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        yv = P.load(y, (row, c0), sh)
        P.store(dx, (row, c0), yv * (P.load(dy, (row, c0), sh) - d))
        return []

    P.strided(j * w, y.dim(1), dp.dim(1) * w, [], write, P.head(row))
