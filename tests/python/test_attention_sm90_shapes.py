"""zyntax.kernels.attention_sm90 at the shapes beyond head dims 64/128 with
as many KV heads as query heads: grouped- and multi-query heads, causal
masks aligned bottom-right for Sq != Sk (rows that see no key), sliding
windows, head dims 96 and 256, on the reference interpreter against float64
(test_attention_tile's reference) on fresh random inputs with the outputs
poisoned with NaN. The device version: tests/python/gpu/test_attention_sm90_shapes_gpu.py."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest

import zyntax
from test_attention_tile import reference
from zyntax import ArgumentError, kernels, ptxinfo

sm90 = importlib.import_module("zyntax.kernels.attention_sm90")
att_mod = importlib.import_module("zyntax.kernels.attention")

rng = np.random.default_rng()

#: The consumer loops the cases run: per tile without and with the S / P V
#: overlap, and the persistent one (two Q slots, tiles from a counter).
LOOPS = {
    "plain": sm90.Loop(),
    "overlap": sm90.Loop(overlap=True),
    "persist": sm90.Loop(overlap=True, split=True, persistent=True),
    "overlap_n96": sm90.LOOPS["overlap_n96"],
    "persist_n96": sm90.LOOPS["overlap_persist_n96"],
    "bn80": sm90.LOOPS["pingpong_defer_lazy_bn80"],
}


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs allocated by attention() start as NaN."""
    real = att_mod.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj[...] = np.nan
        return obj, t

    monkeypatch.setattr(att_mod.T, "output", output)


def run(
    monkeypatch: pytest.MonkeyPatch,
    loop: str,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    window: Any = None,
) -> None:
    """`loop` of LOOPS (``"default"``: attention_sm90.DEFAULT_LOOP's for the
    head dim and mask) on fresh f16 inputs (batch 2) against float64: the
    output within a few f16 roundings, the LSE to 1e-3, -inf exactly where a
    row sees no key."""
    masked = causal or window is not None
    lp = sm90.LOOPS[sm90.DEFAULT_LOOP[d, masked]] if loop == "default" else LOOPS[loop]
    monkeypatch.setitem(sm90.LOOPS, "under_test", lp)
    q = rng.standard_normal((2, h, sq, d)).astype(np.float16)
    k = rng.standard_normal((2, hk, sk, d)).astype(np.float16)
    v = rng.standard_normal((2, hk, sk, d)).astype(np.float16)
    scale = 0.7 / math.sqrt(d)
    out, lse = kernels.attention(
        q,
        k,
        v,
        causal=causal,
        scale=scale,
        window=window,
        return_lse=True,
        variant="sm90_under_test",
    )
    ref, ref_lse = reference(q, k, v, scale, causal, window)
    got = out.astype(np.float64)
    assert not np.isnan(got).any() and not np.isnan(lse).any()
    assert np.abs(got - ref).max() < 4e-3 * max(1.0, np.abs(ref).max())
    empty = np.isneginf(ref_lse)
    assert (np.isneginf(lse) == empty).all()
    assert np.allclose(lse[~empty], ref_lse[~empty], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("loop", ["plain", "overlap", "persist"])
@pytest.mark.parametrize(("h", "hk"), [(4, 2), (3, 1)])
def test_grouped_and_multi_query(
    monkeypatch: pytest.MonkeyPatch, loop: str, h: int, hk: int
) -> None:
    """Query head h reads KV head h // (H / Hk) by its TMA coordinates."""
    run(monkeypatch, loop, h, hk, 70, 150, 64, causal=True)


@pytest.mark.parametrize("loop", ["plain", "overlap", "persist"])
@pytest.mark.parametrize(("sq", "sk"), [(40, 300), (300, 130), (129, 128)])
def test_causal_bottom_right(monkeypatch: pytest.MonkeyPatch, loop: str, sq: int, sk: int) -> None:
    """Sq < Sk: every row sees the keys up to i + Sk - Sq (key tiles that no
    row of a block sees are not loaded); Sq > Sk: the first Sq - Sk rows see
    no key (0, LSE -inf), whole query blocks among them."""
    run(monkeypatch, loop, 1, 1, sq, sk, 64, causal=True)


@pytest.mark.parametrize("loop", ["plain", "overlap", "persist"])
@pytest.mark.parametrize(
    ("sq", "sk", "window", "causal"),
    [
        (300, 300, (64, 0), False),  # a left window: the first key tiles skipped
        (200, 333, (100, 50), False),
        (260, 260, 70, True),  # causal caps the right side at 0
        (90, 300, (None, 20), False),  # a right side only
        (300, 90, (10, 0), False),  # rows before the keys see none
    ],
)
def test_sliding_windows(
    monkeypatch: pytest.MonkeyPatch, loop: str, sq: int, sk: int, window: Any, causal: bool
) -> None:
    run(monkeypatch, loop, 2, 1, sq, sk, 64, causal, window)


@pytest.mark.parametrize("loop", ["plain", "overlap", "default", "bn80"])
@pytest.mark.parametrize("d", [96, 256])
@pytest.mark.parametrize(("sq", "sk", "causal"), [(100, 150, True), (70, 140, False)])
def test_head_dims_96_and_256(
    monkeypatch: pytest.MonkeyPatch, loop: str, d: int, sq: int, sk: int, causal: bool
) -> None:
    """96 on tiles of 128 (TMA fills columns 96.. with zeros, the stores skip
    them); 256 with 64-key tiles, four boxes of 64 columns."""
    run(monkeypatch, loop, 2, 1, sq, sk, d, causal)


@pytest.mark.parametrize("loop", ["persist", "overlap_n96", "persist_n96"])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dim_96_loops(monkeypatch: pytest.MonkeyPatch, loop: str, causal: bool) -> None:
    """The persistent loop, and P V with wgmma N = 96 (`narrow`): V's
    MN-major operand ends half-way into its second box."""
    run(monkeypatch, loop, 2, 2, 150, 150, 96, causal)


def test_sm80_refuses_what_it_lacks() -> None:
    """The mma.sync kernel, when named, takes head dims 64/128 without windows."""
    q = rng.standard_normal((1, 2, 10, 96)).astype(np.float16)
    k = rng.standard_normal((1, 1, 12, 96)).astype(np.float16)
    with pytest.raises(ArgumentError, match="variant"):
        kernels.attention(q, k, k, variant="sm80")  # D 96 has no sm80 kernel
    with pytest.raises(ArgumentError, match="variant"):
        kernels.attention(q[..., :64], k[..., :64], k[..., :64], window=4, variant="sm80")


@pytest.mark.parametrize(
    ("d", "loop", "causal", "left"),
    # The loops the defaults run (the persistent one only unmasked: masked,
    # it spills at head dim 128 as well) and the plain one at 256.
    [
        (96, "overlap", True, False),
        (96, "overlap", True, True),
        (96, "persist", False, False),
        (256, "overlap", True, False),
        (256, "overlap", False, True),
        (256, "plain", True, True),
        (128, "overlap", False, True),
        (256, "default", True, True),
        (256, "default", False, False),
        (256, "bn80", False, False),  # masked, its ping-pong spills 12-20 bytes
    ],
)
def test_assembles_without_spills(d: int, loop: str, causal: bool, left: bool) -> None:
    """ptxas -Werror for sm_90a with the masks of a window: no spills, no
    serialised wgmma; Q K^T runs over the real head dim only (96: 6 k-steps)."""
    lp = sm90.LOOPS[sm90.DEFAULT_LOOP[d, causal or left]] if loop == "default" else LOOPS[loop]
    module = sm90.build("bf16", d, causal, lp, left)
    ptx = zyntax.compile(module, backend="nvptx", arch="sm_90a")
    log = zyntax.validate_ptx(ptx, "sm_90a").log
    assert "C7513" not in log and "serialized" not in log, log
    r = ptxinfo.ptxas_resources(log)["attention"]
    assert r["spill_store_bytes"] == 0, r
    per_tile = d // 16 + sm90.kv_rows(d, lp) // 16
    # Copies of the key tile's GEMMs: the loop; the overlapped loop's prologue S
    # and epilogue P V; the persistent loop's next-tile S and last P V as well.
    copies = 1 if not lp.overlap else 3 if lp.persistent else 2
    assert ptx.count("wgmma.mma_async") == copies * per_tile
