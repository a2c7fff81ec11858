"""LayerNorm and RMSNorm forward over the last axis (f32, bf16, f16 data;
f32 statistics).

One block per row with the row in registers (``_rows``): the mean and the
variance are two block reductions over registers (the variance of the
centred values, so large means lose nothing), then each element is written
once. Longer rows stream through memory once per statistic.
"""

from __future__ import annotations

import functools
from typing import Any

from zyntax import hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import (
    K_MAX,
    RowAccess,
    archs_for,
    block_allreduce,
    flat,
    guarded,
    row_params,
    row_shape,
    tree,
)

__all__ = ["layer_norm", "rms_norm"]


def _build(dtype: str, lanes: int, threads: int, k: int, kind: str) -> hir.Module:
    """kind: "layer" (weight and bias), "layer_nobias", "rms"."""
    elem = T.HIR_TYPE[dtype]
    centre, has_bias = kind != "rms", kind == "layer"
    extra = [hir.ptr("constant", elem), hir.i64, hir.ptr("constant", elem), hir.i64, hir.f32]
    m = hir.Module(f"norm_{kind}_{dtype}_v{lanes}_t{threads}_k{k}", targets=archs_for(dtype))
    with m.kernel("norm", row_params(elem, extra), max_threads=threads) as b:
        x, out, n, xs, xcs, ys, ycs, w, ws, bias, bs, eps = b.params
        row, tid = b.block_idx(), b.thread_idx()
        zero32, zero64 = b.const(0, hir.u32), b.const(0, hir.i64)
        src = RowAccess(b, x, row, xs, xcs, "constant", elem, lanes)
        dst = RowAccess(b, out, row, ys, ycs, "global", elem, lanes)
        wa = RowAccess(b, w, zero32, zero64, ws, "constant", elem, lanes)
        ba = RowAccess(b, bias, zero32, zero64, bs, "constant", elem, lanes)
        nv = n if lanes == 1 else n >> (lanes.bit_length() - 1)
        inv_n = b.div(b.const(1.0, hir.f32), b.cast(n, hir.f32))

        def block_sum(vals: list[hir.Value]) -> hir.Value:
            return block_allreduce(b, tree(b.add, vals), b.add, threads)

        def finish(i: hir.Value, d: list[hir.Value], mean: Any, rstd: hir.Value) -> None:
            ws_ = wa.load(i)
            y = [v * rstd * g for v, g in zip(d, ws_, strict=True)]
            if has_bias:
                y = [a + c for a, c in zip(y, ba.load(i), strict=True)]
            dst.store(i, y)

        if k <= K_MAX:
            idx = [tid + j * threads for j in range(k)]
            oks = [i < nv for i in idx]
            vals = [
                guarded(b, ok, [hir.f32] * lanes, functools.partial(src.load, i), [0.0] * lanes)
                for i, ok in zip(idx, oks, strict=True)
            ]
            if centre:
                mean = block_sum(flat(vals)) * inv_n
                vals = [
                    [b.select(ok, v - mean, 0.0) for v in vs]
                    for vs, ok in zip(vals, oks, strict=True)
                ]
            var = block_sum([v * v for v in flat(vals)]) * inv_n
            rstd = b.rsqrt(var + eps)
            for i, ok, d in zip(idx, oks, vals, strict=True):
                with b.if_(ok):
                    finish(i, d, None, rstd)
            return m
        # Streaming: one pass per statistic, then the write pass.
        f0 = b.const(0.0, hir.f32)
        mu: Any = f0
        if centre:
            with b.loop(tid, nv, threads, carry=[f0], type=hir.u32) as lp:
                lp.next(lp.carried[0] + tree(b.add, src.load(lp.index)))
            mu = block_sum([lp.results[0]]) * inv_n
        with b.loop(tid, nv, threads, carry=[f0], type=hir.u32) as lp:
            d = [v - mu for v in src.load(lp.index)] if centre else src.load(lp.index)
            lp.next(lp.carried[0] + tree(b.add, [v * v for v in d]))
        rstd = b.rsqrt(block_sum([lp.results[0]]) * inv_n + eps)
        with b.for_range(tid, nv, threads, type=hir.u32) as i:
            d = [v - mu for v in src.load(i)] if centre else src.load(i)
            finish(i, d, mu, rstd)
    return m


def _norm(x: Any, weight: Any, bias: Any, eps: float, out: Any, stream: Any, kind: str) -> Any:
    eps = T.real(eps, "eps", low=0.0)
    T.stream_arg(stream)
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, xs, xcs = T.rows_of(t)
    w = T.tensor(weight, "weight")
    T.same_place(t, w)
    if w.dtype != t.dtype:
        raise ArgumentError(f"argument 'weight': dtype {w.dtype}, expected {t.dtype} (x's)")
    T.want_shape(w, (n,), "x's last dimension")
    bt = w
    if bias is not None:
        bt = T.tensor(bias, "bias")
        T.same_place(t, bt)
        if bt.dtype != t.dtype:
            raise ArgumentError(f"argument 'bias': dtype {bt.dtype}, expected {t.dtype} (x's)")
        T.want_shape(bt, (n,), "x's last dimension")
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t, w, bt])
    _, _, ys, ycs = T.rows_of(o)
    if rows == 0 or n == 0:
        return obj
    lanes = T.vector_lanes(t.dtype, t, o, w, bt, extents=[n])
    threads, k = row_shape(n, lanes)
    if k > K_MAX:
        threads, k = 1024, K_MAX + 1
    args = [t, o, n, xs, xcs, ys, ycs, w, w.strides[0], bt, bt.strides[0], eps]
    T.launch(_build, (t.dtype, lanes, threads, k, kind), "norm", rows, threads, args, t, stream)
    return obj


def layer_norm(
    x: Any, weight: Any, bias: Any = None, eps: float = 1e-5, *, out: Any = None, stream: Any = None
) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis
    (biased variance, as ``torch.nn.functional.layer_norm``). `weight` and
    `bias` (optional) have x's dtype and its last dimension."""
    return _norm(x, weight, bias, eps, out, stream, "layer" if bias is not None else "layer_nobias")


def rms_norm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None, stream: Any = None) -> Any:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last axis."""
    return _norm(x, weight, None, eps, out, stream, "rms")
