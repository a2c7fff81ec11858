"""The sm_90a attention kernel's consumer loops and shapes (attention_sm90's
Loop: overlap, ping-pong, defer, three consumers, lazy rescale, ring depth)
on a Hopper GPU against float64, run by test_attention_sm90_gpu.py in child processes
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
sm90 = __import__("zyntax.kernels.attention_sm90", fromlist=["Loop"])


def loop_variant(loop: object, monkeypatch: pytest.MonkeyPatch) -> str:
    """The `variant` argument that runs consumer loop `loop` (named for this
    test in attention_sm90.LOOPS)."""
    monkeypatch.setitem(sm90.LOOPS, "under_test", loop)
    return "sm90_under_test"


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("pingpong", [False, True], ids=["pingpong_off", "pingpong_on"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_overlapped_loop(
    d: int, causal: bool, pingpong: bool, defer: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer loop with FA3's S_j / P_{j-1}V_{j-1} overlap, with and
    without the warpgroup ping-pong and O's rescale moved before P·V (defer)."""
    variant = loop_variant(sm90.Loop(True, pingpong, defer), monkeypatch)
    q, k, v = (torch.randn(2, 3, 777, d, device=DEV, dtype=BF16) for _ in range(3))
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant=variant)
    ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(d))
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("loop", [(False, False, False), (True, True, True), (True, False, True)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_three_consumers(
    causal: bool, loop: tuple[bool, bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Head dim 64 with three consumer warpgroups, each loop."""
    variant = loop_variant(sm90.Loop(*loop, consumers=3), monkeypatch)
    for sq, sk in ((777, 777), (100, 1000), (2048, 2048)):
        q = torch.randn(2, 3, sq, 64, device=DEV, dtype=BF16)
        k, v = (torch.randn(2, 3, sk, 64, device=DEV, dtype=BF16) for _ in range(2))
        out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant=variant)
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
    """Lazy rescale (the maximum raised only past the headroom, O rescaled only
    then), with keys whose scores grow by far more than the headroom from
    tile to tile (every rescale taken) or plain ones (most skipped)."""
    variant = loop_variant(sm90.Loop(loop[0], loop[0], loop[0], lazy=True), monkeypatch)
    q = torch.randn(2, 3, 1000, d, device=DEV, dtype=BF16) * 2
    k = torch.randn(2, 3, 1000, d, device=DEV, dtype=torch.float64)
    if growing:
        k *= torch.linspace(1.0, 12.0, 1000, device=DEV, dtype=torch.float64)[:, None]
    k = k.to(BF16)
    v = torch.randn(2, 3, 1000, d, device=DEV, dtype=BF16)
    causal = not growing
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant=variant)
    ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(d))
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(
    ("name", "d"),
    [
        (n, d)
        for n, lp in sm90.LOOPS.items()
        for d in (64, 128)
        # narrow: the same kernel there; keys: a head-dim-256 shape
        if sm90.fits(d, lp) and not lp.narrow and not lp.keys
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_named_loop(name: str, d: int, causal: bool) -> None:
    """Each named loop by its `variant` string (the bench's rows), ragged
    lengths over several ring wraps."""
    q = torch.randn(2, 3, 1111, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 3, 1111, d, device=DEV, dtype=BF16) for _ in range(2))
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant=f"sm90_{name}")
    ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(d))
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(
    "name", [n for n, lp in sm90.LOOPS.items() if lp.persistent and not lp.narrow and not lp.keys]
)
def test_attention_sm90_persistent_launches(name: str) -> None:
    """The persistent loops take tiles from a counter that the last block to
    stop zeroes: launches in a row (fewer tiles than SMs, so blocks find none;
    many more; ragged lengths; causal or not), then one on another stream
    (its own counter), each against float64."""
    shapes = [(1, 2, 300, 700, False), (2, 8, 1536, 1536, False), (2, 3, 1111, 1111, True)]
    shapes += [(1, 1, 1, 1, False), (2, 8, 1536, 1536, True)]
    side = torch.cuda.Stream(DEV)
    for i, (bsz, heads, sq, sk, causal) in enumerate(shapes):
        q = torch.randn(bsz, heads, sq, 128, device=DEV, dtype=BF16)
        k, v = (torch.randn(bsz, heads, sk, 128, device=DEV, dtype=BF16) for _ in range(2))
        stream = side if i == len(shapes) - 1 else torch.cuda.current_stream(DEV)
        with torch.cuda.stream(stream):
            out, lse = kernels.attention(
                q, k, v, causal=causal, return_lse=True, variant=f"sm90_{name}"
            )
        stream.synchronize()
        ref, ref_lse = ref_attention(q, k, v, causal, 1 / math.sqrt(128))
        assert rel_err(out, ref) < 1e-2, (name, i)
        assert rel_err(lse, ref_lse) < 1e-3, (name, i)
