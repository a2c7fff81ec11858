"""The attention tile program built for sm_90a (its two dots on wgmma:
docs/tile.md, "Row-statistics dots on wgmma") on the reference interpreter
against float64: causal bottom-right masks with Sq != Sk, grouped-query
heads, a sliding window, tails, several query and key blocks, with and
without the prefetch and the split loops; outputs poisoned with NaN first
(``test_attention_tile.run``). The device version:
tests/python/gpu/test_attention_tile_gpu.py (the default on sm_90a)."""

from __future__ import annotations

from typing import Any

import pytest

from test_attention_tile import run
from zyntax.kernels import attention_tile


@pytest.mark.parametrize(
    ("tiles", "d"),
    [
        ((64, 64, 4, True, False, "sm_90a"), 64),
        ((64, 64, 4, False, True, "sm_90a"), 64),
        ((128, 64, 8, True, False, "sm_90a"), 64),
        ((128, 64, 8, True, False, "sm_90a"), 128),
        ((128, 64, 8, True, True, "sm_90a"), 96),
    ],
)
@pytest.mark.parametrize(
    ("h", "hk", "sq", "sk", "causal", "window"),
    [(2, 1, 150, 200, True, None), (2, 2, 130, 70, False, (40, 10))],
)
def test_wgmma_program_against_float64(
    tiles: tuple[Any, ...], d: int, h: int, hk: int, sq: int, sk: int, causal: bool, window: Any
) -> None:
    run(1, h, hk, sq, sk, d, causal, window, tiles)


def test_wgmma_program_is_on_wgmma() -> None:
    """Built for sm_90a the kernel issues wgmma (and targets sm_90a); for
    sm_80 mma.sync."""
    k = attention_tile.build("f16", 128, 128, 64, 8, "sm_90a")
    assert "wgmma" in str(k.module) and "sm_90a" in str(k.module.targets)
    k = attention_tile.build("f16", 128, 128, 64, 8, "sm_80")
    assert "wgmma" not in str(k.module) and "mma.sync" in str(k.module)


@pytest.mark.parametrize(
    ("tiles", "d"),
    [
        ((64, 64, 4, False, False, "sm_90a", 2), 64),
        ((128, 64, 8, False, False, "sm_90a", 3, True, True), 128),
        ((128, 64, 8, True, False, "sm_90a", 2, True), 96),
        ((64, 64, 4, False, True, "sm_90a", 2, True), 64),
    ],
)
@pytest.mark.parametrize(
    ("b", "h", "hk", "sq", "sk", "causal", "window"),
    [(2, 2, 1, 150, 200, True, None), (1, 2, 2, 130, 70, False, (40, 10))],
)
def test_tma_ring_program_against_float64(
    tiles: tuple[Any, ...],
    d: int,
    b: int,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    causal: bool,
    window: Any,
) -> None:
    """The key loop on a TMA ring (the seventh of `tiles`: its stages; the
    prefetch is dropped), rotated with the eighth (P V in flight across the
    next block's softmax) and the ninth (the warpgroups taking turns), and
    the split program's three loops on one ring (the fifth): K and V by 4-d
    tensor maps over batch and KV head, key and head-dim tails zero-filled."""
    run(b, h, hk, sq, sk, d, causal, window, tiles)


def test_tma_ring_program_has_a_producer() -> None:
    """With stages on sm_90a: a producer beside the 8 consumer warps (a
    warpgroup, whose registers setmaxnreg gives to the consumers; a warp
    beside 4), one tensor map each for K (k^T's view) and V; no ring on
    sm_80."""
    k = attention_tile.build("f16", 128, 128, 64, 8, "sm_90a", stages=3)
    assert k.block[0] == 8 * 32 + 128
    assert attention_tile.build("f16", 64, 64, 64, 4, "sm_90a", stages=3).block[0] == 4 * 32 + 32
    assert [(m.view, m.box) for m in k.tensor_maps] == [("kt", (64, 64)), ("v", (64, 64))]
    split = attention_tile.build("f16", 128, 128, 64, 8, "sm_90a", split=True, stages=3)
    assert len(split.tensor_maps) == 2  # one per view for the three loops
    other = attention_tile.build("f16", 128, 128, 64, 8, "sm_80", stages=3)
    assert other.block[0] == 8 * 32 and not other.tensor_maps
