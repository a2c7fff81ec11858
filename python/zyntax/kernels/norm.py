"""LayerNorm and RMSNorm over the last axis, forward and backward (f32,
bf16, f16 data; f32 statistics), as tile programs (``rows_tile``): the
variance of the centred values (large means lose nothing); the backward
recomputes the statistics from x and sums dweight/dbias over the rows in a
fixed order (partial sums per program instance, then a column sum).
"""

from __future__ import annotations

from typing import Any

from zyntax.errors import ArgumentError

from . import _tensors as T
from . import rows_tile

__all__ = ["layer_norm", "layer_norm_backward", "rms_norm", "rms_norm_backward"]


def _params(t: T.Tensor, weight: Any, bias: Any, n: int) -> tuple[T.Tensor, T.Tensor | None]:
    w = T.tensor(weight, "weight")
    T.same_place(t, w)
    if w.dtype != t.dtype:
        raise ArgumentError(f"argument 'weight': dtype {w.dtype}, expected {t.dtype} (x's)")
    T.want_shape(w, (n,), "x's last dimension")
    bt = None
    if bias is not None:
        bt = T.tensor(bias, "bias")
        T.same_place(t, bt)
        if bt.dtype != t.dtype:
            raise ArgumentError(f"argument 'bias': dtype {bt.dtype}, expected {t.dtype} (x's)")
        T.want_shape(bt, (n,), "x's last dimension")
    return w, bt


def _norm(x: Any, weight: Any, bias: Any, eps: float, out: Any, stream: Any, kind: str) -> Any:
    eps = T.real(eps, "eps", low=0.0)
    T.stream_arg(stream)
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, _, _ = T.rows_of(t)
    w, bt = _params(t, weight, bias, n)
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t, w] + ([bt] if bt else []))
    T.rows_of(o)
    if rows == 0 or n == 0:
        return obj
    rows_tile.run_norm(t, w, bt, eps, o, kind, stream)
    return obj


def _norm_backward(
    dy: Any, x: Any, weight: Any, eps: float, has_bias: bool, out: Any, stream: Any, kind: str
) -> tuple[Any, Any, Any]:
    eps = T.real(eps, "eps", low=0.0)
    T.stream_arg(stream)
    t = T.tensor(x, "x")
    T.want_dtype(t, ("f32", "bf16", "f16"))
    rows, n, _, _ = T.rows_of(t)
    g = T.tensor(dy, "dy")
    T.same_place(t, g)
    if g.dtype != t.dtype:
        raise ArgumentError(f"argument 'dy': dtype {g.dtype}, expected {t.dtype} (x's)")
    T.want_shape(g, t.shape, "x's shape")
    T.rows_of(g)
    w, _ = _params(t, weight, None, n)
    obj, o = T.output(out, t, t.shape, t.dtype, reads=[t, g, w])
    T.rows_of(o)
    dw_obj = T.empty_like(t, (n,), t.dtype)
    dw = T.tensor(dw_obj, "dweight")
    db_obj = T.empty_like(t, (n,), t.dtype) if has_bias else None
    db = T.tensor(db_obj, "dbias") if db_obj is not None else None
    if n == 0:
        return obj, dw_obj, db_obj
    if rows == 0:  # no rows: the parameter gradients are sums of nothing, zeros
        empty = T.tensor(T.empty_like(t, (0, n), "f32"), "partial sums")
        for d in (dw, db):
            if d is not None:
                rows_tile.colsum(empty, 0, n, d, stream)
        return obj, dw_obj, db_obj
    rows_tile.run_norm_backward(g, t, w, eps, o, dw, db, kind, stream)
    return obj, dw_obj, db_obj


@T.planned
def layer_norm(
    x: Any, weight: Any, bias: Any = None, eps: float = 1e-5, *, out: Any = None, stream: Any = None
) -> Any:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis
    (biased variance, as ``torch.nn.functional.layer_norm``). `weight` and
    `bias` (optional) have x's dtype and its last dimension."""
    return _norm(x, weight, bias, eps, out, stream, "layer" if bias is not None else "layer_nobias")


@T.planned
def rms_norm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None, stream: Any = None) -> Any:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the last axis."""
    return _norm(x, weight, None, eps, out, stream, "rms")


@T.planned
def layer_norm_backward(
    dy: Any,
    x: Any,
    weight: Any,
    bias: Any = None,
    eps: float = 1e-5,
    *,
    out: Any = None,
    stream: Any = None,
) -> tuple[Any, Any, Any]:
    """Gradients of :func:`layer_norm` from the output's gradient `dy` (x's
    shape and dtype): ``(dx, dweight, dbias)``; `dbias` is None without a
    `bias` (only whether one was given matters). The mean and variance are
    recomputed from `x`; dweight and dbias are summed over the rows in a
    fixed order (deterministic), in f32, and rounded to x's dtype. `out`
    receives dx."""
    kind = "layer" if bias is not None else "layer_nobias"
    return _norm_backward(dy, x, weight, eps, bias is not None, out, stream, kind)


@T.planned
def rms_norm_backward(
    dy: Any, x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None, stream: Any = None
) -> tuple[Any, Any]:
    """Gradients of :func:`rms_norm`: ``(dx, dweight)``, as
    :func:`layer_norm_backward`."""
    dx, dw, _ = _norm_backward(dy, x, weight, eps, False, out, stream, "rms")
    return dx, dw
