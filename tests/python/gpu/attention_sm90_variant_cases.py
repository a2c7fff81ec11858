"""The sm_90a attention kernel's consumer loops and shapes that are off by
default (attention_sm90's OVERLAP, PINGPONG, DEFER, CONSUMERS, LAZY) on a Hopper
GPU against float64, run by test_attention_sm90_gpu.py in child processes
with a timeout (a wrong barrier phase would hang the kernel)."""

from __future__ import annotations

import math

import pytest
from test_attention_sm90_gpu import (
    BF16,
    DEV,
    poisoned,  # noqa: F401 (the fixture)
    ref_attention,
    rel_err,
    torch,
)

from zyntax import kernels

pytestmark = pytest.mark.gpu


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("pingpong", [False, True], ids=["pingpong_off", "pingpong_on"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_overlapped_loop(
    d: int, causal: bool, pingpong: bool, defer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer loop with FA3's S_j / P_{j-1}V_{j-1} overlap (OVERLAP),
    with and without the warpgroup ping-pong (PINGPONG) and O's rescale
    moved before P·V (DEFER)."""
    sm90 = __import__("zyntax.kernels.attention_sm90", fromlist=["OVERLAP"])
    monkeypatch.setattr(sm90, "OVERLAP", True)
    monkeypatch.setattr(sm90, "PINGPONG", pingpong)
    monkeypatch.setattr(sm90, "DEFER", defer)
    q, k, v = (torch.randn(2, 3, 777, d, device=DEV, dtype=BF16) for _ in range(3))
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="sm90")
    ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(d))
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("loop", [(False, False, False), (True, True, True), (True, False, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_three_consumers(
    causal: bool, loop: tuple[bool, bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Head dim 64 with three consumer warpgroups (CONSUMERS), each loop."""
    sm90 = __import__("zyntax.kernels.attention_sm90", fromlist=["OVERLAP"])
    monkeypatch.setattr(sm90, "CONSUMERS", {64: 3, 128: 2})
    for knob, on in zip(("OVERLAP", "PINGPONG", "DEFER"), loop, strict=True):
        monkeypatch.setattr(sm90, knob, on)
    for sq, sk in ((777, 777), (100, 1000), (2048, 2048)):
        q = torch.randn(2, 3, sq, 64, device=DEV, dtype=BF16)
        k, v = (torch.randn(2, 3, sk, 64, device=DEV, dtype=BF16) for _ in range(2))
        out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="sm90")
        ref, ref_lse = ref_attention(q, k, v, causal, 1 / 8)
        assert rel_err(out, ref) < 1e-2
        assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("loop", [(False, False), (True, True)])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("growing", [False, True])
def test_attention_sm90_lazy_rescale(
    d: int, growing: bool, loop: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LAZY (the maximum raised only past the headroom, O rescaled only
    then), with keys whose scores grow by far more than the headroom from
    tile to tile (every rescale taken) or plain ones (most skipped)."""
    sm90 = __import__("zyntax.kernels.attention_sm90", fromlist=["LAZY"])
    monkeypatch.setattr(sm90, "LAZY", True)
    for knob in ("OVERLAP", "PINGPONG", "DEFER"):
        monkeypatch.setattr(sm90, knob, loop[0])
    q = torch.randn(2, 3, 1000, d, device=DEV, dtype=BF16) * 2
    k = torch.randn(2, 3, 1000, d, device=DEV, dtype=torch.float64)
    if growing:
        k *= torch.linspace(1.0, 12.0, 1000, device=DEV, dtype=torch.float64)[:, None]
    k = k.to(BF16)
    v = torch.randn(2, 3, 1000, d, device=DEV, dtype=BF16)
    causal = not growing
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="sm90")
    ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(d))
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3
