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
