"""Row softmax over the last axis (f32, bf16, f16; f32 arithmetic).

One block per row; the row stays in registers between the max, the sum and
the write (``_rows``), so the input is read once and the output written once.
Exponentials are ``ex2.approx`` with the ``log2 e`` factor folded into one
FMA. Rows longer than fit in registers stream: an online max/sum pass, then
the write pass (the input is read twice).
"""

from __future__ import annotations

import functools
from typing import Any

from zyntax import hir

from . import _tensors as T
from ._rows import (
    K_MAX,
    NEG_INF,
    RowAccess,
    archs_for,
    block_allreduce,
    block_allreduce_ms,
    exp_minus,
    flat,
    guarded,
    row_params,
    row_shape,
    safe_max,
    tree,
)

__all__ = ["softmax"]


def _build(dtype: str, lanes: int, threads: int, k: int) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    m = hir.Module(f"softmax_{dtype}_v{lanes}_t{threads}_k{k}", targets=archs_for(dtype))
    with m.kernel("softmax", row_params(elem), max_threads=threads) as b:
        x, out, n, xs, xcs, ys, ycs = b.params
        row, tid = b.block_idx(), b.thread_idx()
        src = RowAccess(b, x, row, xs, xcs, "constant", elem, lanes)
        dst = RowAccess(b, out, row, ys, ycs, "global", elem, lanes)
        nv = n if lanes == 1 else n >> (lanes.bit_length() - 1)
        if k <= K_MAX:
            idx = [tid + j * threads for j in range(k)]
            oks = [i < nv for i in idx]
            vals = [
                guarded(b, ok, [hir.f32] * lanes, functools.partial(src.load, i), [NEG_INF] * lanes)
                for i, ok in zip(idx, oks, strict=True)
            ]
            mx = block_allreduce(b, tree(b.max, flat(vals)), b.max, threads)
            base = safe_max(b, mx)
            exps = [[exp_minus(b, v, base) for v in vs] for vs in vals]
            total = block_allreduce(b, tree(b.add, flat(exps)), b.add, threads)
            r = b.div(b.const(1.0, hir.f32), total)
            for i, ok, es in zip(idx, oks, exps, strict=True):
                with b.if_(ok):
                    dst.store(i, [e * r for e in es])
            return m
        # Streaming: per-thread online (max, sum), merged across the block.
        with b.loop(
            tid,
            nv,
            threads,
            carry=[b.const(NEG_INF, hir.f32), b.const(0.0, hir.f32)],
            type=hir.u32,
        ) as lp:
            mo, so = lp.carried
            vs = src.load(lp.index)
            mn = b.max(mo, tree(b.max, vs))
            base = safe_max(b, mn)
            terms = [exp_minus(b, v, base) for v in vs]
            lp.next(mn, b.fma(so, exp_minus(b, mo, base), tree(b.add, terms)))
        m_run, s_run = lp.results
        mx, total = block_allreduce_ms(b, m_run, s_run, threads)
        base = safe_max(b, mx)
        r = b.div(b.const(1.0, hir.f32), total)
        with b.for_range(tid, nv, threads, type=hir.u32) as i:
            dst.store(i, [exp_minus(b, v, base) * r for v in src.load(i)])
    return m


def softmax(x: Any, *, out: Any = None, stream: Any = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))`` along the last axis of `x`.

    `x`: a GPU tensor (any library) or a numpy array (runs on the reference
    interpreter) of float32, bfloat16 or float16. Returns `out`, or a new
    array like `x`. A row of only -inf gives NaN (as PyTorch does).
    """
    T.stream_arg(stream)
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, xs, xcs = T.rows_of(t)
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t])
    _, _, ys, ycs = T.rows_of(o)
    if rows == 0 or n == 0:
        return obj
    lanes = T.vector_lanes(t.dtype, t, o, extents=[n])
    threads, k = row_shape(n, lanes)
    if k > K_MAX:
        threads = 1024
    key = (t.dtype, lanes, threads, k if k <= K_MAX else K_MAX + 1)
    T.launch(_build, key, "softmax", rows, threads, [t, o, n, xs, xcs, ys, ycs], t, stream)
    return obj
