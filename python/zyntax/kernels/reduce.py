"""Sum and max over the last axis or over the whole tensor (f32, bf16, f16
inputs; f32 accumulation and f32 results).

Rows: one block per row, 16-byte loads strided by the block, a block
all-reduction. Whole tensor: a grid-stride pass whose threads keep four
independent accumulators (four 16-byte loads in flight per thread) and write
one partial per block, then one block reduces the partials: the same order on
every run (no atomics), so results are reproducible.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from zyntax import hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import (
    NEG_INF,
    RowAccess,
    archs_for,
    block_allreduce,
    load_f32,
    nan_max,
    row_base,
    tree,
    vec_ptr,
)

__all__ = ["reduce_max", "reduce_sum"]

ROW_THREADS = 256
FLAT_THREADS = 512
UNROLL = 4


def _ops(b: hir.FunctionBuilder, op: str) -> tuple[Any, float]:
    """The combining operation and its identity; max propagates NaN, as
    numpy's and PyTorch's do (HIR's max drops a NaN operand)."""
    if op == "sum":
        return b.add, 0.0
    return (lambda x, y: nan_max(b, x, y)), NEG_INF


def _build_rows(op: str, dtype: str, lanes: int) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    m = hir.Module(f"reduce_rows_{op}_{dtype}_v{lanes}", targets=archs_for(dtype))
    params = [hir.ptr("constant", elem), hir.ptr("global", hir.f32), hir.u32]
    with m.kernel(
        "reduce_rows", [*params, hir.i64, hir.i64, hir.i64], max_threads=ROW_THREADS
    ) as b:
        x, out, n, xs, xcs, ys = b.params
        f, ident = _ops(b, op)
        row, tid = b.block_idx(), b.thread_idx()
        src = RowAccess(b, x, row, xs, xcs, "constant", elem, lanes)
        nv = n if lanes == 1 else n >> (lanes.bit_length() - 1)
        with b.loop(tid, nv, ROW_THREADS, carry=[b.const(ident, hir.f32)], type=hir.u32) as lp:
            lp.next(f(lp.carried[0], tree(f, src.load(lp.index))))
        total = block_allreduce(b, lp.results[0], f, ROW_THREADS)
        with b.if_(b.eq(tid, 0)):
            b.store(row_base(b, out, row, ys), total)
    return m


def _build_flat(op: str, dtype: str, lanes: int) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    m = hir.Module(f"reduce_flat_{op}_{dtype}_v{lanes}", targets=archs_for(dtype))
    f32p = hir.ptr("global", hir.f32)
    # Stage 1: partial[block] = op over a grid-stride share of x.
    with m.kernel(
        "partials", [hir.ptr("constant", elem), f32p, hir.u32, hir.u32], max_threads=FLAT_THREADS
    ) as b:
        x, partial, n, nv = b.params
        f, ident = _ops(b, op)
        tid = b.thread_idx()
        gt = b.block_idx() * FLAT_THREADS + tid
        stride = b.grid_dim() * FLAT_THREADS
        vp = vec_ptr(b, x, "constant", elem, lanes)
        chunk = stride * UNROLL
        accs = [b.const(ident, hir.f32) for _ in range(UNROLL)]
        with b.loop(0, b.div(nv, chunk), carry=accs, type=hir.u32) as lp:
            at = lp.index * chunk + gt
            loads = [load_f32(b, vp, at + u * stride, elem, lanes) for u in range(UNROLL)]
            lp.next(*[f(a, tree(f, v)) for a, v in zip(lp.carried, loads, strict=True)])
        acc = tree(f, lp.results)
        with b.loop(b.div(nv, chunk) * chunk + gt, nv, stride, carry=[acc], type=hir.u32) as lp:
            lp.next(f(lp.carried[0], tree(f, load_f32(b, vp, lp.index, elem, lanes))))
        acc = lp.results[0]
        if lanes > 1:  # the elements after the last whole vector
            with b.loop(nv * lanes + gt, n, stride, carry=[acc], type=hir.u32) as lp:
                lp.next(f(lp.carried[0], load_f32(b, x, lp.index, elem, 1)[0]))
            acc = lp.results[0]
        total = block_allreduce(b, acc, f, FLAT_THREADS)
        with b.if_(b.eq(tid, 0)):
            b.store(b.ptr_add(partial, b.block_idx()), total)
    # Stage 2: out[0] = op over the partials, times `scale` (1, or 1/n for a mean).
    with m.kernel("finish", [f32p, f32p, hir.u32, hir.f32], max_threads=1024) as b:
        partial, out, count, scale = b.params
        f, ident = _ops(b, op)
        tid = b.thread_idx()
        with b.loop(tid, count, 1024, carry=[b.const(ident, hir.f32)], type=hir.u32) as lp:
            lp.next(f(lp.carried[0], b.load(b.ptr_add(partial, lp.index))))
        total = block_allreduce(b, lp.results[0], f, 1024)
        with b.if_(b.eq(tid, 0)):
            b.store(out, total * scale)
    return m


def flat_reduce(
    t: T.Tensor, op: str, out: T.Tensor, scale: float, stream: Any, count: int | None = None
) -> None:
    """out[0] = op over every element of the contiguous `t` (its first
    `count` when given), times `scale`."""
    n = t.size if count is None else count
    if n >= 1 << 31:
        raise ArgumentError(f"argument '{t.name}': {n} elements; at most 2**31 - 1 are supported")
    lanes = T.vector_lanes(t.dtype, t)
    nv = n // lanes
    per_block = FLAT_THREADS * UNROLL * lanes
    key = (op, t.dtype, lanes)
    most = T.one_wave(_build_flat, key, "partials", t.device, FLAT_THREADS) if t.on_gpu else 4
    grid = max(1, min(most, -(-n // per_block)))
    partial = T.tensor(T.empty_like(t, (grid,), "f32"), "partial")
    T.launch(_build_flat, key, "partials", grid, FLAT_THREADS, [t, partial, n, nv], t, stream)
    T.launch(_build_flat, key, "finish", 1, 1024, [partial, out, grid, scale], t, stream)


def _reduce(x: Any, axis: int | None, out: Any, stream: Any, op: str) -> Any:
    T.stream_arg(stream)
    if axis is not None and (
        isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral)
    ):
        raise ArgumentError(f"argument 'axis': expected -1 or None, got {T.show(axis)}")
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    if axis is None:
        if t.size == 0 and op == "max":
            raise ArgumentError("argument 'x': max of an empty tensor")
        obj, o = T.output(out, t, (), "f32", reads=[t])
        if not T.contiguous(t):  # reduce the rows first, then their results
            per_row = T.tensor(_reduce(x, -1, None, stream, op), "rows")
            flat_reduce(per_row, op, o, 1.0, stream)
        else:
            flat_reduce(t, op, o, 1.0, stream)
        return obj
    if axis not in (-1, len(t.shape) - 1):
        raise ArgumentError(
            f"argument 'axis': {axis!r}; reductions run over the last axis (-1) or all (None)"
        )
    rows, n, xs, xcs = T.rows_of(t)
    if n == 0 and op == "max":
        raise ArgumentError("argument 'x': max over an empty axis")
    obj, o = T.output(out, t, t.shape[:-1], "f32", reads=[t])
    if rows == 0:
        return obj
    lanes = T.vector_lanes(t.dtype, t, extents=[n])
    if not T.contiguous(o):
        raise ArgumentError("argument 'out': must be contiguous")
    args = [t, o, n, xs, xcs, 1]
    T.launch(_build_rows, (op, t.dtype, lanes), "reduce_rows", rows, ROW_THREADS, args, t, stream)
    return obj


@T.planned
def reduce_sum(x: Any, axis: int | None = None, *, out: Any = None, stream: Any = None) -> Any:
    """Sum of `x` over the last axis (``axis=-1``) or over all elements
    (``axis=None``, a 0-d result); f32 result."""
    return _reduce(x, axis, out, stream, "sum")


@T.planned
def reduce_max(x: Any, axis: int | None = None, *, out: Any = None, stream: Any = None) -> Any:
    """Maximum of `x` over the last axis or over all elements; f32 result."""
    return _reduce(x, axis, out, stream, "max")
