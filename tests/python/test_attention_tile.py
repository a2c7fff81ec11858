"""Attention forward as a tile program (zyntax.kernels.attention_tile) on the
reference interpreter against float64: every head dim (64, 96, 128, 256),
grouped-query and multi-query heads, causal masks aligned bottom-right for
Sq < Sk and Sq > Sk (rows that see no key: 0 and an LSE of -inf), sliding
windows, tails in Sq and Sk; outputs poisoned with NaN first. Through
zyntax.kernels.attention: the dispatch to the tile program and the typed
errors of its new arguments. The device version:
tests/python/gpu/test_attention_tile_gpu.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from zyntax import ArgumentError, kernels
from zyntax.kernels import _tensors as T
from zyntax.kernels import attention_tile

rng = np.random.default_rng()


def scores(q: Any, k: Any, scale: float, causal: bool, window: Any) -> Any:
    """float64 scores ``q k^T * scale`` (KV heads repeated over their query
    heads), -inf where the masks (aligned bottom-right) hide a key."""
    group = q.shape[1] // k.shape[1]
    k64 = np.repeat(k.astype(np.float64), group, 1)
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k64) * scale
    sq, sk = s.shape[-2:]
    i = np.arange(sq)[:, None] + sk - sq
    j = np.arange(sk)[None, :]
    left, right = attention_tile.window_arg(window) or (None, None)
    visible = np.ones((sq, sk), bool)
    if left is not None:
        visible &= j >= i - left
    if right is not None:
        visible &= j <= i + right
    if causal:
        visible &= j <= i
    return np.where(visible, s, -np.inf)


def reference(q: Any, k: Any, v: Any, scale: float, causal: bool, window: Any) -> tuple[Any, Any]:
    """float64 attention with bottom-right aligned masks; rows that see no key
    give 0 and an LSE of -inf."""
    v64 = np.repeat(v.astype(np.float64), q.shape[1] // k.shape[1], 1)
    s = scores(q, k, scale, causal, window)
    m = s.max(-1, keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        lse = (m + np.log(den))[..., 0]
    return np.einsum("bhqk,bhkd->bhqd", e / np.where(den == 0, 1, den), v64), lse


def run(
    b: int,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    window: Any = None,
    tiles: tuple[Any, ...] | None = None,
) -> None:
    """The tile program on fresh f16 inputs, outputs poisoned with NaN."""
    q = rng.standard_normal((b, h, sq, d)).astype(np.float16)
    k = rng.standard_normal((b, hk, sk, d)).astype(np.float16)
    v = rng.standard_normal((b, hk, sk, d)).astype(np.float16)
    tq, tk, tv = T.tensor(q, "q"), T.tensor(k, "k"), T.tensor(v, "v")
    out = np.full((b, h, sq, d), np.nan, np.float16)
    lse = np.full((b, h, sq), np.nan, np.float32)
    to, tl = T.tensor(out, "out"), T.tensor(lse, "lse")
    scale = 0.7 / math.sqrt(d)
    attention_tile.launch(
        tq,
        tk,
        tv,
        to,
        tl,
        causal=causal,
        scale=scale,
        window=attention_tile.window_arg(window),
        stream=None,
        tiles=tiles,
    )
    ref, ref_lse = reference(q, k, v, scale, causal, window)
    got = to.arr.astype(np.float64)
    assert not np.isnan(got).any() and not np.isnan(tl.arr).any()
    # f16 output: within a few units of its rounding
    assert np.abs(got - ref).max() < 4e-3 * max(1.0, np.abs(ref).max())
    empty = np.isneginf(ref_lse)
    assert (np.isneginf(tl.arr) == empty).all()
    assert np.allclose(tl.arr[~empty], ref_lse[~empty], rtol=1e-5, atol=1e-5)


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
    run(1, 2, 1, sq, sk, d, causal=True)


@pytest.mark.parametrize(
    "tiles",
    # (rows, keys, warps, prefetch): warps along M with P and Q in registers
    # (16+ rows per warp), with and without prefetch; warps split along N.
    [(64, 32, 4, True), (32, 16, 2, False), (128, 64, 8, False), (16, 32, 4, True)],
)
@pytest.mark.parametrize(("sq", "sk", "d"), [(300, 350, 64), (260, 200, 128)])
def test_block_shapes_over_several_query_blocks(
    tiles: tuple[int, int, int, bool], sq: int, sk: int, d: int
) -> None:
    """Several query blocks (walked last-first) and key blocks, causal with
    Sq != Sk, for each kind of warp split."""
    run(1, 2, 1, sq, sk, d, causal=True, tiles=tiles)


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize(
    ("sq", "sk", "causal", "window"),
    [
        (300, 350, True, None),
        (350, 300, True, None),
        (200, 333, False, None),
        (260, 260, False, (70, 40)),
        (260, 300, True, 100),
        (100, 400, False, (None, 0)),
    ],
)
def test_split_masked_and_whole_blocks(
    prefetch: bool, sq: int, sk: int, causal: bool, window: Any
) -> None:
    """The program with whole key blocks in a loop of their own: causal
    diagonals, windows on both sides and key tails at several offsets."""
    run(1, 2, 1, sq, sk, 64, causal=causal, window=window, tiles=(32, 16, 2, prefetch, True))


@pytest.mark.parametrize(
    ("window", "causal"), [((16, 0), False), ((5, 9), False), (7, True), ((None, 3), False)]
)
def test_sliding_windows(window: Any, causal: bool) -> None:
    run(1, 2, 2, 75, 100, 64, causal=causal, window=window)


def test_dispatch_through_kernels_attention() -> None:
    """hd 96 with grouped-query heads and a window goes to the tile program."""
    q = rng.standard_normal((1, 4, 19, 96)).astype(np.float16)
    k = rng.standard_normal((1, 2, 26, 96)).astype(np.float16)
    v = rng.standard_normal((1, 2, 26, 96)).astype(np.float16)
    out, lse = kernels.attention(q, k, v, causal=True, window=(8, None), return_lse=True)
    ref, ref_lse = reference(q, k, v, 1 / math.sqrt(96), True, (8, None))
    assert out.shape == q.shape and out.dtype == np.float16
    assert np.abs(out.astype(np.float64) - ref).max() < 4e-3 * max(1.0, np.abs(ref).max())
    assert np.allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    # variant "tile" forces it where the hand-written kernel would run
    q = rng.standard_normal((1, 1, 17, 64)).astype(np.float16)
    out = kernels.attention(q, q, q, variant="tile")
    ref, _ = reference(q, q, q, 1 / 8, False, None)
    assert np.abs(out.astype(np.float64) - ref).max() < 4e-3 * max(1.0, np.abs(ref).max())


def test_grouped_query_default_repeats_heads() -> None:
    """hd 64 grouped-query heads by default: K and V repeated to the query
    heads run the hand-written kernel (the interpreter's sm80 path)."""
    q = rng.standard_normal((1, 4, 21, 64)).astype(np.float16)
    k = rng.standard_normal((1, 2, 21, 64)).astype(np.float16)
    v = rng.standard_normal((1, 2, 21, 64)).astype(np.float16)
    out, lse = kernels.attention(q, k, v, causal=True, return_lse=True)
    ref, ref_lse = reference(q, k, v, 1 / 8, True, None)
    assert np.abs(out.astype(np.float64) - ref).max() < 4e-3 * max(1.0, np.abs(ref).max())
    assert np.allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)


def test_bad_arguments_are_named() -> None:
    q = np.ones((1, 4, 8, 64), np.float16)
    with pytest.raises(ArgumentError, match=r"'k'.*divisor"):
        kernels.attention(q, q[:, :3], q[:, :3])
    with pytest.raises(ArgumentError, match="'v'"):
        kernels.attention(q, q[:, :2], q[:, :1])
    with pytest.raises(ArgumentError, match="head dim 80"):
        kernels.attention(*(np.ones((1, 1, 8, 80), np.float16),) * 3)
    for bad in (-1, (1, 2, 3), (1.5, None), "left", True):
        with pytest.raises(ArgumentError, match="'window'"):
            kernels.attention(q, q, q, window=bad)
    with pytest.raises(ArgumentError, match=r"'variant'.*'tile'"):
        kernels.attention(q, q[:, :2], q[:, :2], variant="sm80")
