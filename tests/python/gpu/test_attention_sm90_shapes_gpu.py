"""The sm_90a attention kernel (zyntax.kernels.attention_sm90) at every
shape class issue 24 names, on a Hopper GPU against float64 on fresh random
inputs with the outputs poisoned with NaN: grouped- and multi-query heads,
causal masks aligned bottom-right for Sq != Sk (rows that see no key),
sliding windows, head dims 96 and 256, tails; and that attention()'s
default runs it there (not the tile program). The interpreter version:
tests/python/test_attention_sm90_shapes.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zyntax import kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
if torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("the sm_90a kernel needs a Hopper GPU", allow_module_level=True)
from attention_ref import (  # noqa: E402 (after the skips: it imports torch)
    BF16,
    DEV,
    att_mod,
    check,
    issue_shapes_case,
    poison_outputs,
    reference,
    strided_storage_case,
)


@pytest.fixture(autouse=True)
def poisoned_and_no_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs allocated by attention() start as NaN, and the tile program
    may not run (every case here is the sm_90a kernel's)."""

    def no_tile(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the tile program ran")

    poison_outputs(monkeypatch)
    monkeypatch.setattr(att_mod.attention_tile, "launch", no_tile)


def run(
    b: int,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    window: Any = None,
    dtype: Any = BF16,
    variant: str | None = None,
) -> None:
    q = torch.randn(b, h, sq, d, device=DEV, dtype=dtype)
    k = torch.randn(b, hk, sk, d, device=DEV, dtype=dtype)
    v = torch.randn(b, hk, sk, d, device=DEV, dtype=dtype)
    scale = 1 / math.sqrt(d)
    out, lse = kernels.attention(
        q, k, v, causal=causal, window=window, return_lse=True, variant=variant
    )
    torch.cuda.synchronize()
    check(out, lse, *reference(q, k, v, scale, causal, window))


@pytest.mark.parametrize(
    ("h", "hk", "d", "causal", "variant"),
    # The defaults (the persistent loop unmasked) and two loops by name.
    [
        (32, 8, 128, True, None),
        (32, 8, 128, False, None),
        (8, 1, 64, True, None),
        (16, 4, 96, False, None),
        (32, 8, 128, True, "sm90_plain"),
        (8, 1, 64, False, "sm90_overlap_persist"),
    ],
)
def test_grouped_and_multi_query(h: int, hk: int, d: int, causal: bool, variant: Any) -> None:
    run(1, h, hk, 333, 333, d, causal, variant=variant)


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize(("sq", "sk"), [(17, 1000), (1000, 17), (300, 1111), (1000, 999)])
def test_causal_bottom_right(dtype: Any, d: int, sq: int, sk: int) -> None:
    """Sq < Sk: query i sees keys up to i + Sk - Sq; Sq > Sk: the first Sq - Sk
    rows see none (0, LSE -inf), whole query blocks among them."""
    run(2, 2, 2, sq, sk, d, True, dtype=dtype)


@pytest.mark.parametrize("d", [64, 128, 96])
@pytest.mark.parametrize(
    ("sq", "sk", "window", "causal"),
    [
        (2048, 2048, (256, 0), False),
        (1000, 1000, 100, True),
        (517, 777, (100, 50), False),
        (700, 300, (30, 0), False),
        (300, 700, (None, 10), False),
    ],
)
def test_sliding_windows(d: int, sq: int, sk: int, window: Any, causal: bool) -> None:
    run(1, 4, 2, sq, sk, d, causal, window)


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("d", [96, 256])
@pytest.mark.parametrize(
    ("sq", "sk", "causal"), [(1, 1, False), (1000, 1000, True), (17, 333, False)]
)
def test_head_dims_96_and_256(dtype: Any, d: int, sq: int, sk: int, causal: bool) -> None:
    run(2, 3, 3, sq, sk, d, causal, dtype=dtype)


@pytest.mark.parametrize(
    "variant",
    ["sm90_plain", "sm90_overlap", "sm90_pingpong_defer", "sm90_pingpong_defer_lazy_bn80"],
)
def test_head_dim_256_loops(variant: str) -> None:
    run(1, 4, 2, 777, 777, 256, True, variant=variant)


@pytest.mark.parametrize("variant", ["sm90_overlap_n96", "sm90_overlap_persist_n96"])
@pytest.mark.parametrize(("sq", "sk", "causal"), [(1000, 1000, True), (333, 777, False)])
def test_head_dim_96_narrow(variant: str, sq: int, sk: int, causal: bool) -> None:
    """P V with wgmma N = 96: V's MN-major operand ends half-way into its
    second 64-column box."""
    run(2, 4, 2, sq, sk, 96, causal, variant=variant)


def test_strided_storage_and_large_logits() -> None:
    """(B, S, H, D) storage viewed as (B, H, S, D), GQA, hd 96, Sq != Sk."""
    strided_storage_case(None)


def test_issue_shapes_against_sdpa() -> None:
    """The shapes benches/attention.py times for issue 24, against SDPA."""
    issue_shapes_case(
        [(1, 32, 8, 2048, 128, 1), (4, 16, 16, 2048, 256, 1), (2, 16, 16, 4096, 96, 0)], None
    )
