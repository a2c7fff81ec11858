"""Row softmax over the last axis and its backward (f32, bf16, f16; f32
arithmetic), as tile programs (``rows_tile``: several rows per program
instance for narrow rows, one row in registers for medium ones, a chunked
online max/sum for wide ones).
"""

from __future__ import annotations

from typing import Any

from zyntax.errors import ArgumentError

from . import _tensors as T
from . import rows_tile

__all__ = ["softmax", "softmax_backward"]


@T.planned
def softmax(x: Any, *, out: Any = None, stream: Any = None) -> Any:
    """``exp(x - max) / sum(exp(x - max))`` along the last axis of `x`.

    `x`: a GPU tensor (any library) or a numpy array (runs on the reference
    interpreter) of float32, bfloat16 or float16. Returns `out`, or a new
    array like `x`. A row of only -inf gives NaN (as PyTorch does).
    """
    T.stream_arg(stream)
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, _, _ = T.rows_of(t)
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t])
    T.rows_of(o)
    if rows == 0 or n == 0:
        return obj
    rows_tile.run_softmax(t, o, stream)
    return obj


@T.planned
def softmax_backward(y: Any, dy: Any, *, out: Any = None, stream: Any = None) -> Any:
    """The gradient of :func:`softmax` along the last axis: ``dx = y * (dy -
    sum(dy * y))`` from the softmax output `y` and the output's gradient
    `dy` (same shape and dtype). Returns `out`, or a new array like `y`."""
    T.stream_arg(stream)
    t = T.tensor(y, "y")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, _, _ = T.rows_of(t)
    g = T.tensor(dy, "dy")
    T.same_place(t, g)
    if g.dtype != t.dtype:
        raise ArgumentError(f"argument 'dy': dtype {g.dtype}, expected {t.dtype} (y's)")
    T.want_shape(g, t.shape, "y's shape")
    T.rows_of(g)
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t, g])
    T.rows_of(o)
    if rows == 0 or n == 0:
        return obj
    rows_tile.run_softmax_backward(t, g, o, stream)
    return obj
