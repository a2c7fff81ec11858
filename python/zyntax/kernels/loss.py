"""Cross-entropy loss forward over a large vocabulary:
``loss[r] = logsumexp(logits[r]) - logits[r, targets[r]]`` (f32 losses).

One block per row streams the row once with 16-byte loads, four vectors in
flight per thread, keeping an online (max, sum of exp) state per thread that
is rescaled once per four vectors; the states merge across the block, then
one thread reads the target logit. ``reduction="mean"`` adds the deterministic
two-stage sum of ``reduce``.
"""

from __future__ import annotations

import math
from typing import Any

from zyntax import hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import (
    NEG_INF,
    RowAccess,
    archs_for,
    block_allreduce_ms,
    exp_minus,
    flat,
    row_base,
    row_shape,
    safe_max,
    tree,
)
from .reduce import flat_reduce

__all__ = ["cross_entropy"]

UNROLL = 4


def _build(dtype: str, tdtype: str, lanes: int, threads: int) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    m = hir.Module(f"cross_entropy_{dtype}_{tdtype}_v{lanes}_t{threads}", targets=archs_for(dtype))
    params = [
        hir.ptr("constant", elem),
        hir.ptr("constant", T.HIR_TYPE[tdtype]),
        hir.ptr("global", hir.f32),
        hir.u32,
        hir.i64,
        hir.i64,
        hir.i64,
    ]
    with m.kernel("cross_entropy", params, max_threads=threads) as b:
        x, targets, loss, n, xs, xcs, ts = b.params
        row, tid = b.block_idx(), b.thread_idx()
        src = RowAccess(b, x, row, xs, xcs, "constant", elem, lanes)
        nv = n if lanes == 1 else n >> (lanes.bit_length() - 1)

        def step(mo: hir.Value, so: hir.Value, vals: list[hir.Value]) -> list[hir.Value]:
            mn = b.max(mo, tree(b.max, vals))
            base = safe_max(b, mn)
            terms = [exp_minus(b, v, base) for v in vals]
            return [mn, b.fma(so, exp_minus(b, mo, base), tree(b.add, terms))]

        chunk = threads * UNROLL
        full = b.div(nv, chunk)
        init = [b.const(NEG_INF, hir.f32), b.const(0.0, hir.f32)]
        with b.loop(0, full, carry=init, type=hir.u32) as lp:
            at = lp.index * chunk + tid
            vals = flat([src.load(at + u * threads) for u in range(UNROLL)])
            m_run, s_run = lp.carried
            lp.next(*step(m_run, s_run, vals))
        with b.loop(full * chunk + tid, nv, threads, carry=lp.results, type=hir.u32) as tl:
            m_run, s_run = tl.carried
            tl.next(*step(m_run, s_run, src.load(tl.index)))
        m_run, s_run = tl.results
        mx, total = block_allreduce_ms(b, m_run, s_run, threads)
        with b.if_(b.eq(tid, 0)):
            t = b.cast(b.load(row_base(b, targets, row, ts)), hir.i64)
            ok = b.and_(t >= 0, t < b.cast(n, hir.i64))
            col = b.select(ok, t, b.const(0, hir.i64))
            xt = b.load(b.ptr_add(src.base, col * xcs))
            xt = xt if elem == hir.f32 else b.cast(xt, hir.f32)
            lse = mx + b.log(total)
            b.store(b.ptr_add(loss, row), b.select(ok, lse - xt, math.nan))
    return m


def _row_stride(g: T.Tensor) -> int:
    """Stride between consecutive rows' class indices."""
    if len(g.shape) <= 1:
        return g.strides[0] if g.shape else 0
    if not T.contiguous(g):
        raise ArgumentError("argument 'targets': must be contiguous when it has several axes")
    return 1


def cross_entropy(
    logits: Any, targets: Any, *, reduction: str = "none", out: Any = None, stream: Any = None
) -> Any:
    """Per-row cross-entropy of `logits` (rows x vocabulary; f32, bf16, f16)
    against class indices `targets` (int64 or int32, one per row): f32
    losses of shape ``logits.shape[:-1]``, or their mean (0-d) with
    ``reduction="mean"``. A target outside [0, vocabulary) gives NaN."""
    T.choice(reduction, "reduction", ("none", "mean"), "reduction")
    T.stream_arg(stream)
    t = T.tensor(logits, "logits")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, xs, xcs = T.rows_of(t)
    g = T.tensor(targets, "targets")
    T.same_place(t, g)
    T.want_dtype(g, ("i64", "i32"))
    T.want_shape(g, t.shape[:-1], "one class index per row of logits")
    gs = _row_stride(g)
    if n == 0:
        raise ArgumentError("argument 'logits': an empty vocabulary")
    if reduction == "mean":
        obj, o = T.output(out, t, (), "f32", reads=[t, g])
        per_row = T.tensor(T.empty_like(t, (max(rows, 1),), "f32"), "loss")
    else:
        obj, o = T.output(out, t, t.shape[:-1], "f32", reads=[t, g])
        per_row = o
    if rows == 0:
        if reduction == "mean":  # the mean of no losses is NaN, as in PyTorch
            flat_reduce(per_row, "sum", o, math.nan, stream, count=0)
        return obj
    lanes = T.vector_lanes(t.dtype, t, extents=[n])
    threads = min(512, row_shape(n, lanes)[0])
    args = [t, g, per_row, n, xs, xcs, gs]
    key = (t.dtype, g.dtype, lanes, threads)
    T.launch(_build, key, "cross_entropy", rows, threads, args, t, stream)
    if reduction == "mean":
        flat_reduce(per_row, "sum", o, 1.0 / rows, stream)
    return obj
