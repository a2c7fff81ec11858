"""zyntax.kernels.attention (FlashAttention-2 on mma.sync + ldmatrix) on the
reference interpreter: tiny problems against float64, tails and causal masks
included; bad input raises ArgumentError naming the argument. The device
version: tests/python/gpu/test_memory_bound_gpu.py."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest

from zyntax import ArgumentError, kernels

att_mod = importlib.import_module("zyntax.kernels.attention")

rng = np.random.default_rng()


def reference(q: Any, k: Any, v: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tri(sq, sk, dtype=bool), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (m + np.log(e.sum(-1, keepdims=True)))[..., 0]
    return np.einsum("bhqk,bhkd->bhqd", e / e.sum(-1, keepdims=True), v.astype(np.float64)), lse


@pytest.mark.parametrize(
    ("sq", "sk", "d", "causal", "shape"),
    [
        (70, 70, 64, True, (2, 64)),
        (20, 90, 64, False, (2, 64)),
        (33, 33, 128, False, (2, 64)),
        (150, 150, 64, True, (1, 64)),
        (140, 200, 64, True, (2, 128)),
        (70, 70, 128, True, (1, 64)),
    ],
)
def test_attention_interpreter(
    sq: int, sk: int, d: int, causal: bool, shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tile shapes (16-row slabs per warp, keys per tile) the kernel may use."""
    monkeypatch.setitem(att_mod.SHAPES, (d, causal), shape)
    q = rng.standard_normal((1, 2, sq, d)).astype(np.float16)
    k = rng.standard_normal((1, 2, sk, d)).astype(np.float16)
    v = rng.standard_normal((1, 2, sk, d)).astype(np.float16)
    # named: the default runs the tile program where Sq != Sk (bottom-right causal)
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="sm80")
    ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(d))
    assert out.dtype == np.float16 and out.shape == q.shape
    o = out.astype(np.float64)
    assert not np.isnan(o).any()
    assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 5e-3
    assert np.linalg.norm(lse - ref_lse) / np.linalg.norm(ref_lse) < 1e-4


def test_attention_bad_input() -> None:
    q = np.ones((1, 1, 8, 64), np.float16)
    with pytest.raises(ArgumentError, match=r"'q'.*f32"):
        kernels.attention(q.astype(np.float32), q, q)
    with pytest.raises(ArgumentError, match="'k'"):
        kernels.attention(q, np.ones((1, 1, 8, 32), np.float16), q)
    with pytest.raises(ArgumentError, match="'v'"):
        kernels.attention(q, q, np.ones((1, 2, 8, 64), np.float16))
    with pytest.raises(ArgumentError, match="head dim 80"):
        kernels.attention(*(np.ones((1, 1, 8, 80), np.float16),) * 3)
    with pytest.raises(ArgumentError, match="'scale'"):
        kernels.attention(q, q, q, scale=-1.0)
    with pytest.raises(ArgumentError, match="'q'"):
        kernels.attention(q[0], q, q)
