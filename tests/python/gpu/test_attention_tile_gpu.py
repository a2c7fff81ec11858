"""Attention forward as a tile program (zyntax.kernels.attention_tile) on the
GPU against a float64 reference on fresh random inputs: bf16 and f16, head
dims 64/96/128/256, grouped-query (32/8) and multi-query heads, causal masks
aligned bottom-right for Sq < Sk and Sq > Sk, sliding windows, tails, strided
(B, S, H, D) storage; outputs poisoned with NaN first. The interpreter
version: tests/python/test_attention_tile.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zyntax import kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
from attention_ref import (  # noqa: E402 (after the skips: it imports torch)
    BF16,
    DEV,
    check,
    issue_shapes_case,
    poison_outputs,
    reference,
    strided_storage_case,
)


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs allocated by attention() start as NaN."""
    poison_outputs(monkeypatch)


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("d", [64, 96, 128, 256])
@pytest.mark.parametrize(("sq", "sk", "causal"), [(1, 1, False), (257, 300, True), (300, 97, True)])
def test_head_dims_and_tails(dtype: Any, d: int, sq: int, sk: int, causal: bool) -> None:
    q = torch.randn(2, 3, sq, d, device=DEV, dtype=dtype)
    k = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    v = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="tile")
    check(out, lse, *reference(q, k, v, 1 / math.sqrt(d), causal))


@pytest.mark.parametrize("variant", ["tile", None])  # None: sm90 (GQA by TMA coordinates)
@pytest.mark.parametrize(("h", "hk"), [(32, 8), (8, 1)])
def test_grouped_and_multi_query(h: int, hk: int, variant: str | None) -> None:
    q = torch.randn(1, h, 333, 128, device=DEV, dtype=BF16)
    k = torch.randn(1, hk, 333, 128, device=DEV, dtype=BF16)
    v = torch.randn(1, hk, 333, 128, device=DEV, dtype=BF16)
    out, lse = kernels.attention(q, k, v, causal=True, return_lse=True, variant=variant)
    check(out, lse, *reference(q, k, v, 1 / math.sqrt(128), True))


@pytest.mark.parametrize(("window", "causal"), [((64, 0), False), ((100, 50), False), (200, True)])
def test_sliding_windows(window: Any, causal: bool) -> None:
    q, k, v = (torch.randn(2, 4, 517, 64, device=DEV, dtype=BF16) for _ in range(3))
    out, lse = kernels.attention(q, k, v, causal=causal, window=window, return_lse=True)
    check(out, lse, *reference(q, k, v, 1 / 8, causal, window))


def test_strided_storage_and_large_logits() -> None:
    strided_storage_case("tile")


def test_issue_shapes_against_sdpa() -> None:
    """The shapes benches/attention.py times for issue 24, against SDPA (fp32)."""
    shapes = [(1, 32, 32, 1000, 128, 0), (4, 16, 16, 512, 64, 1), (1, 32, 8, 2048, 128, 1)]
    issue_shapes_case(shapes, "tile")


@pytest.mark.parametrize(
    "tiles",
    # (rows, keys, warps, prefetch): warps along M with P and Q in registers
    # (16+ rows per warp), with and without prefetch; warps split along N.
    [
        (128, 64, 8, True),
        (128, 64, 8, False),
        (128, 32, 8, True),
        (64, 32, 4, True),
        (16, 32, 4, True),
        (128, 64, 8, True, True),
        (64, 64, 4, True, True),
    ],
)
@pytest.mark.parametrize(("sq", "sk", "d"), [(700, 650, 128), (333, 517, 64)])
def test_block_shapes(tiles: tuple[int, ...], sq: int, sk: int, d: int) -> None:
    """Each tile shape the bench sweeps (a fifth True: whole key blocks in
    a loop without the mask), over several query and key blocks with tails,
    causal with Sq != Sk, grouped-query heads."""
    q = torch.randn(2, 4, sq, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 2, sk, d, device=DEV, dtype=BF16) for _ in range(2))
    launch_checked(q, k, v, True, None, tiles)


def launch_checked(q: Any, k: Any, v: Any, causal: bool, window: Any, tiles: Any) -> None:
    """attention_tile.launch at `tiles` into NaN-poisoned outputs, checked
    against the float64 reference."""
    from zyntax.kernels import _tensors as T
    from zyntax.kernels import attention_tile

    o = torch.full_like(q, float("nan"))
    lse = torch.full(q.shape[:3], float("nan"), device=DEV)
    args = [T.tensor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse"))]
    scale = 1 / math.sqrt(q.shape[-1])
    w = attention_tile.window_arg(window)
    attention_tile.launch(*args, causal=causal, scale=scale, window=w, stream=None, tiles=tiles)
    check(o, lse, *reference(q, k, v, scale, causal, window))


@pytest.mark.parametrize(
    "tiles",
    [(64, 64, 4, True, False, "sm_90a"), (128, 64, 8, False, False, "sm_90a")],
)
@pytest.mark.parametrize(("s", "causal"), [(200, False), (333, True)])
def test_wgmma_hd64_after_the_first_key_block(tiles: tuple[Any, ...], s: int, causal: bool) -> None:
    """hd 64 on wgmma over several key blocks: the fault of session 11
    (every key block after the first computed S = P K^T: ptxas reused the
    registers of Q's fragments for P's; the tile layer now stages Q once,
    docs/tile.md), with and without the prefetch."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the program is built for sm_90a")
    q, k, v = (torch.randn(1, 2, s, 64, device=DEV, dtype=BF16) for _ in range(3))
    launch_checked(q, k, v, causal, None, tiles)


@pytest.mark.parametrize(
    "tiles",
    [
        (128, 64, 8, False, False, "sm_90a", 2),
        (128, 64, 8, False, False, "sm_90a", 3, True, True),
        (64, 64, 4, False, False, "sm_90a", 2, True),
        (128, 64, 8, False, True, "sm_90a", 2, True),
    ],
)
@pytest.mark.parametrize(
    ("sq", "sk", "d", "causal", "window", "strided"),
    [
        (700, 650, 128, True, None, False),
        (333, 517, 64, True, None, True),
        (300, 300, 96, False, (100, 50), False),
    ],
)
def test_tma_ring(
    tiles: tuple[Any, ...], sq: int, sk: int, d: int, causal: bool, window: Any, strided: bool
) -> None:
    """The key loop on a TMA ring (build's `stages`, the seventh of `tiles`;
    the eighth: P V in flight across the next block's softmax; the ninth:
    the warpgroups taking turns; the fifth:
    the split program's three loops on one ring): K and V
    loaded by a producer warp through 4-d tensor maps (batch and
    KV head by coordinates), key and head-dim tails zero-filled by TMA,
    grouped-query heads, (B, S, H, D) storage viewed as (B, H, S, D)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the program is built for sm_90a")

    def make(h: int, s: int) -> Any:
        if strided:
            return torch.randn(2, s, h, d, device=DEV, dtype=BF16).transpose(1, 2)
        return torch.randn(2, h, s, d, device=DEV, dtype=BF16)

    q, k, v = make(4, sq), make(2, sk), make(2, sk)
    launch_checked(q, k, v, causal, window, tiles)
