"""Attention backward as tile programs (zyntax.kernels.attention_backward,
attention_bwd.py) on the CPU/interpreter against the gradients of a float64
reference on fresh random inputs: every head dim (64, 96, 128, 256),
grouped-query and multi-query heads (dk, dv summed over a group), causal
masks aligned bottom-right for Sq < Sk and Sq > Sk (rows that see no key:
no gradient, never NaN), sliding windows, tails, the LSE output's gradient;
outputs poisoned with NaN first; dQ by atomics (the default) and by its
own pass (``deterministic=True``, bit-identical reruns); typed errors. The device
version: tests/python/gpu/test_attention_bwd_gpu.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from test_attention_tile import scores
from zyntax import ArgumentError, kernels
from zyntax.kernels import _tensors as T
from zyntax.kernels import attention_bwd, attention_tile

rng = np.random.default_rng()


def reference(
    q: Any, k: Any, v: Any, do: Any, dlse: Any, scale: float, causal: bool, window: Any
) -> tuple[Any, Any, Any]:
    """float64 gradients (dq, dk, dv) of (o, lse) = attention(q, k, v) for
    the output gradients (do, dlse), masks aligned bottom-right."""
    group = q.shape[1] // k.shape[1]
    q64, k64, v64, do64 = (x.astype(np.float64) for x in (q, k, v, do))
    kr, vr = np.repeat(k64, group, 1), np.repeat(v64, group, 1)
    s = scores(q, k, scale, causal, window)
    sk = s.shape[-1]
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isinf(m), 0.0, m))
    den = e.sum(-1, keepdims=True)
    p = e / np.where(den == 0, 1, den)
    o = p @ vr
    dv = np.einsum("bhqk,bhqd->bhkd", p, do64)
    dp = do64 @ vr.swapaxes(-1, -2)
    # d lse / d s = p: the LSE's gradient adds p * dlse to the scores'.
    ds = p * (dp - (do64 * o).sum(-1, keepdims=True) + dlse[..., None])
    dq = ds @ kr * scale
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q64) * scale
    b, hk, d = k.shape[0], k.shape[1], q.shape[3]
    return dq, dk.reshape(b, hk, group, sk, d).sum(2), dv.reshape(b, hk, group, sk, d).sum(2)


def forward(q: Any, k: Any, v: Any, scale: float, causal: bool, window: Any) -> tuple[Any, Any]:
    """The forward tile program's output and LSE (what the backward is given)."""
    b, h, sq, d = q.shape
    o = np.full((b, h, sq, d), np.nan, q.dtype)
    lse = np.full((b, h, sq), np.nan, np.float32)
    to, tl = T.tensor(o, "o"), T.tensor(lse, "lse")
    ts = [T.tensor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"))]
    w = attention_tile.window_arg(window)
    attention_tile.launch(*ts, to, tl, causal=causal, scale=scale, window=w, stream=None)
    return to.arr, tl.arr


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs (and the scratch rows) allocated by attention_backward start as NaN."""
    real = attention_bwd.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj.fill(np.nan)
        return obj, t

    monkeypatch.setattr(attention_bwd.T, "output", output)


def run(
    b: int,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    window: Any = None,
    with_dlse: bool = False,
    deterministic: bool = False,
) -> tuple[Any, ...]:
    q = rng.standard_normal((b, h, sq, d)).astype(np.float16)
    k = rng.standard_normal((b, hk, sk, d)).astype(np.float16)
    v = rng.standard_normal((b, hk, sk, d)).astype(np.float16)
    do = rng.standard_normal((b, h, sq, d)).astype(np.float16)
    scale = 0.7 / math.sqrt(d)
    o, lse = forward(q, k, v, scale, causal, window)
    dlse = rng.standard_normal((b, h, sq)).astype(np.float32) if with_dlse else None
    got = kernels.attention_backward(
        q,
        k,
        v,
        o,
        lse,
        do,
        causal=causal,
        scale=scale,
        window=window,
        dlse=dlse,
        deterministic=deterministic,
    )
    zero = np.zeros((b, h, sq))
    want = reference(q, k, v, do, zero if dlse is None else dlse, scale, causal, window)
    for name, g, w, like in zip(("dq", "dk", "dv"), got, want, (q, k, v), strict=True):
        assert g.shape == like.shape and g.dtype == np.float16, name
        g64 = g.astype(np.float64)
        assert not np.isnan(g64).any(), f"NaN in {name} (an element not written?)"
        # f16 inputs and outputs, f32 accumulation: within a few f16 units.
        assert np.abs(g64 - w).max() < 5e-3 * max(1.0, np.abs(w).max()), name
    return got


@pytest.mark.parametrize("d", [64, 96, 128, 256])
def test_every_head_dim(d: int) -> None:
    run(1, 2, 2, 37, 45, d, causal=False)


@pytest.mark.parametrize(("h", "hk"), [(4, 2), (4, 1), (6, 3)])
def test_grouped_and_multi_query(h: int, hk: int) -> None:
    run(2, h, hk, 20, 33, 64, causal=True)


@pytest.mark.parametrize(
    ("sq", "sk", "d"), [(70, 70, 64), (20, 90, 128), (90, 20, 64), (130, 129, 64), (1, 77, 96)]
)
def test_causal_bottom_right(sq: int, sk: int, d: int) -> None:
    """Sq > Sk: the first Sq - Sk rows see no key (lse -inf) and get dq 0."""
    dq, _, _ = run(1, 2, 1, sq, sk, d, causal=True)
    if sq > sk:
        assert not dq[:, :, : sq - sk].any()


@pytest.mark.parametrize(("window", "causal"), [((16, 0), False), ((5, 9), False), (7, True)])
def test_sliding_windows(window: Any, causal: bool) -> None:
    run(1, 2, 2, 75, 100, 64, causal=causal, window=window)


@pytest.mark.parametrize(
    ("h", "hk", "sq", "sk", "d", "causal", "window"),
    [
        (4, 2, 37, 45, 64, True, None),
        (2, 1, 90, 20, 128, True, None),
        (2, 2, 20, 33, 256, False, None),
        (2, 2, 75, 100, 96, False, (5, 9)),
    ],
)
def test_deterministic_dq_pass(
    h: int, hk: int, sq: int, sk: int, d: int, causal: bool, window: Any
) -> None:
    """deterministic=True: dQ by a pass of its own (the other tests: atomics)."""
    run(1, h, hk, sq, sk, d, causal=causal, window=window, deterministic=True)


def test_lse_gradient() -> None:
    run(1, 2, 1, 40, 50, 64, causal=True, with_dlse=True)


def test_deterministic() -> None:
    """deterministic=True: the same inputs give bit-identical gradients."""
    q = rng.standard_normal((1, 4, 70, 64)).astype(np.float16)
    k = rng.standard_normal((1, 2, 90, 64)).astype(np.float16)
    v = rng.standard_normal((1, 2, 90, 64)).astype(np.float16)
    do = rng.standard_normal((1, 4, 70, 64)).astype(np.float16)
    o, lse = forward(q, k, v, 0.125, True, None)
    first = kernels.attention_backward(q, k, v, o, lse, do, causal=True, deterministic=True)
    second = kernels.attention_backward(q, k, v, o, lse, do, causal=True, deterministic=True)
    for a, b in zip(first, second, strict=True):
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_bad_arguments_are_named() -> None:
    q = rng.standard_normal((1, 4, 8, 64)).astype(np.float16)
    kv = q[:, :2].copy()
    lse = np.zeros((1, 4, 8), np.float32)
    bw = kernels.attention_backward
    with pytest.raises(ArgumentError, match=r"'k'.*divisor"):
        bw(q, q[:, :3], q[:, :3], q, lse, q)
    with pytest.raises(ArgumentError, match="'lse'"):
        bw(q, kv, kv, q, lse[:, :2], q)
    with pytest.raises(ArgumentError, match="'lse'"):
        bw(q, kv, kv, q, lse.astype(np.float16), q)
    with pytest.raises(ArgumentError, match="'do'"):
        bw(q, kv, kv, q, lse, q[:, :, :4])
    with pytest.raises(ArgumentError, match="'o'"):
        bw(q, kv, kv, q.astype(np.float32), lse, q)
    with pytest.raises(ArgumentError, match="head dim 80"):
        x = np.ones((1, 1, 8, 80), np.float16)
        bw(x, x, x, x, lse[:, :1], x)
    with pytest.raises(ArgumentError, match="'window'"):
        bw(q, kv, kv, q, lse, q, window=(1, 2, 3))
    with pytest.raises(ArgumentError, match="'dlse'"):
        bw(q, kv, kv, q, lse, q, dlse=lse[:, :, :3])


def test_fake_backward_gives_the_gradients_shapes() -> None:
    """With torch (skipped without it): a backward through the attention op on
    meta tensors runs the fakes of both ops and gives each input's shape."""
    torch = pytest.importorskip("torch")
    from zyntax.kernels import torch_ops as zt

    def meta(*shape: int) -> Any:
        return torch.empty(shape, device="meta", dtype=torch.bfloat16).requires_grad_()

    q, k, v = meta(2, 8, 33, 128), meta(2, 2, 40, 128), meta(2, 2, 40, 128)
    out, lse = zt.attention(q, k, v, causal=True, return_lse=True)
    (out.float().sum() + lse.sum()).backward()
    for t in (q, k, v):
        assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == t.dtype
