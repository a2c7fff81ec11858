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


def _var(b: hir.FunctionBuilder, init: Any) -> hir.Var:
    """An f32 accumulator variable holding `init` (the builder's SSA
    construction threads it through the loops that assign it)."""
    v = b.declare_var(hir.f32, "acc")
    b.def_var(v, init)
    return v


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
        acc = _var(b, ident)
        with b.for_range(tid, nv, ROW_THREADS, type=hir.u32) as i:
            b.def_var(acc, f(b.use_var(acc), tree(f, src.load(i))))
        total = block_allreduce(b, b.use_var(acc), f, ROW_THREADS)
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
        accs = [_var(b, ident) for _ in range(UNROLL)]
        with b.for_range(0, b.div(nv, chunk), type=hir.u32) as i:
            at = i * chunk + gt
            # Every load first: UNROLL 16-byte loads in flight per thread.
            loads = [load_f32(b, vp, at + u * stride, elem, lanes) for u in range(UNROLL)]
            for a, v in zip(accs, loads, strict=True):
                b.def_var(a, f(b.use_var(a), tree(f, v)))
        acc = _var(b, tree(f, [b.use_var(a) for a in accs]))
        with b.for_range(b.div(nv, chunk) * chunk + gt, nv, stride, type=hir.u32) as i:
            b.def_var(acc, f(b.use_var(acc), tree(f, load_f32(b, vp, i, elem, lanes))))
        if lanes > 1:  # the elements after the last whole vector
            with b.for_range(nv * lanes + gt, n, stride, type=hir.u32) as i:
                b.def_var(acc, f(b.use_var(acc), load_f32(b, x, i, elem, 1)[0]))
        total = block_allreduce(b, b.use_var(acc), f, FLAT_THREADS)
        with b.if_(b.eq(tid, 0)):
            b.store(b.ptr_add(partial, b.block_idx()), total)
    # Stage 2: out[0] = op over the partials, times `scale` (1, or 1/n for a mean).
    with m.kernel("finish", [f32p, f32p, hir.u32, hir.f32], max_threads=1024) as b:
        partial, out, count, scale = b.params
        f, ident = _ops(b, op)
        tid = b.thread_idx()
        acc = _var(b, ident)
        with b.for_range(tid, count, 1024, type=hir.u32) as i:
            b.def_var(acc, f(b.use_var(acc), b.load(b.ptr_add(partial, i))))
        total = block_allreduce(b, b.use_var(acc), f, 1024)
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
