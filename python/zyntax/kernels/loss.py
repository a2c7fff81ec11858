"""Cross-entropy over a large vocabulary, forward and backward, as tile
programs (``rows_tile``): ``loss[r] = logsumexp(logits[r]) - logits[r,
targets[r]]`` (f32 losses) and its gradient ``(softmax(logits[r]) -
onehot(targets[r])) * dloss[r]``, fused with the softmax (the logits are
read once for rows that fit in registers, twice for wider ones).
``reduction="mean"`` adds the deterministic two-stage sum of ``reduce``.
"""

from __future__ import annotations

import math
from typing import Any

from zyntax.errors import ArgumentError

from . import _tensors as T
from . import rows_tile
from .reduce import flat_reduce

__all__ = ["cross_entropy", "cross_entropy_backward"]


def _row_stride(g: T.Tensor) -> int:
    """Stride between consecutive rows' entries (class indices, gradients)."""
    if len(g.shape) <= 1:
        return g.strides[0] if g.shape else 0
    if not T.contiguous(g):
        raise ArgumentError(f"argument '{g.name}': must be contiguous when it has several axes")
    return 1


@T.planned
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
    rows, n, _, _ = T.rows_of(t)
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
    rows_tile.run_cross_entropy(t, g, gs, per_row, stream)
    if reduction == "mean":
        flat_reduce(per_row, "sum", o, 1.0 / rows, stream)
    return obj


@T.planned
def cross_entropy_backward(
    dloss: Any,
    logits: Any,
    targets: Any,
    *,
    reduction: str = "none",
    out: Any = None,
    stream: Any = None,
) -> Any:
    """The gradient of :func:`cross_entropy` with respect to the logits:
    ``(softmax(logits[r]) - onehot(targets[r])) * dloss[r]`` (``dloss[r]`` the
    gradient of row r's loss: f32 of shape ``logits.shape[:-1]``; with
    ``reduction="mean"`` a 0-d f32 gradient of the mean, each row getting
    ``dloss / rows``). Returns `out`, or a new array like `logits`. A row
    whose target is outside [0, vocabulary) gets NaN."""
    T.choice(reduction, "reduction", ("none", "mean"), "reduction")
    T.stream_arg(stream)
    t = T.tensor(logits, "logits")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, _, _ = T.rows_of(t)
    g = T.tensor(targets, "targets")
    T.same_place(t, g)
    T.want_dtype(g, ("i64", "i32"))
    T.want_shape(g, t.shape[:-1], "one class index per row of logits")
    gs = _row_stride(g)
    d = T.tensor(dloss, "dloss")
    T.same_place(t, d)
    T.want_dtype(d, ("f32",))
    if reduction == "mean":
        T.want_shape(d, (), "the gradient of the mean: a 0-d tensor")
        ds, scale = 0, 1.0 / max(rows, 1)
    else:
        T.want_shape(d, t.shape[:-1], "one gradient per row of logits")
        ds, scale = _row_stride(d), 1.0
    if n == 0:
        raise ArgumentError("argument 'logits': an empty vocabulary")
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t, g, d])
    T.rows_of(o)
    if rows == 0:
        return obj
    rows_tile.run_cross_entropy_backward(d, ds, scale, t, g, gs, o, stream)
    return obj
