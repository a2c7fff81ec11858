"""zyntax.kernels.attention_sm90 (FlashAttention-3 style: TMA, an mbarrier
ring, wgmma with P from registers, a producer and two consumer warpgroups)
on the reference interpreter: tiny problems against float64 with odd
lengths, causal masks and both head dims; outputs are poisoned with NaN
first so every element must be written. The device version:
tests/python/gpu/test_attention_sm90_gpu.py."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import ArgumentError, kernels, ptxinfo

att_mod = importlib.import_module("zyntax.kernels.attention")
sm90 = importlib.import_module("zyntax.kernels.attention_sm90")

rng = np.random.default_rng()


def reference(q: Any, k: Any, v: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:  # aligned bottom-right: query i sits at key i + Sk - Sq
        sq, sk = s.shape[-2:]
        s = np.where(np.tri(sq, sk, sk - sq, dtype=bool), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (m + np.log(e.sum(-1, keepdims=True)))[..., 0]
    return np.einsum("bhqk,bhkd->bhqd", e / e.sum(-1, keepdims=True), v.astype(np.float64)), lse


def check_attention(
    q: Any, k: Any, v: Any, causal: bool, scale: float, variant: str, lse_tol: float = 1e-2
) -> Any:
    """Runs `variant` with the log-sum-exp output and checks both against
    float64: every element written, relative error norm < 5e-3, LSE within
    `lse_tol`. Returns the output."""
    out, lse = kernels.attention(
        q, k, v, causal=causal, scale=scale, return_lse=True, variant=variant
    )
    ref, ref_lse = reference(q, k, v, causal, scale)
    o = out.astype(np.float64)
    assert not np.isnan(o).any() and not np.isnan(lse).any()
    assert np.linalg.norm(o - ref) / np.linalg.norm(ref) < 5e-3
    assert np.abs(lse - ref_lse).max() < lse_tol
    return out


def loop_variant(loop: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The `variant` argument that runs consumer loop `loop` (a Loop, named
    for this test in attention_sm90.LOOPS)."""
    monkeypatch.setitem(sm90.LOOPS, "under_test", loop)
    return "sm90_under_test"


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs allocated by attention() start as NaN."""
    real = att_mod.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj[...] = np.nan
        return obj, t

    monkeypatch.setattr(att_mod.T, "output", output)


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(
    ("sq", "sk", "d", "causal", "overlap", "pingpong", "defer"),
    [
        (64, 64, 64, False, False, False, False),
        (64, 64, 64, False, True, True, False),
        (130, 130, 64, True, False, False, False),
        (130, 130, 64, True, True, False, False),
        (130, 130, 64, True, True, True, True),
        (75, 300, 64, False, False, False, False),
        (75, 300, 64, False, True, False, True),
        (75, 300, 64, False, True, True, False),
        (131, 131, 128, True, False, False, False),
        (257, 257, 128, True, True, True, False),
        (257, 300, 128, True, True, True, True),
        (33, 97, 128, False, False, False, False),
    ],
)
def test_attention_sm90_interpreter(
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    overlap: bool,
    pingpong: bool,
    defer: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both consumer loops (with and without the S/PV overlap, with and
    without ping-pong, O rescaled late or early); key counts over several
    tiles so the ring wraps and its phases flip. f16 (numpy has no bf16
    here; the GPU test covers both)."""
    variant = loop_variant(sm90.Loop(overlap, pingpong, defer), monkeypatch)
    dt = np.float16
    q = rng.standard_normal((1, 1, sq, d)).astype(dt)
    k = rng.standard_normal((1, 1, sk, d)).astype(dt)
    v = rng.standard_normal((1, 1, sk, d)).astype(dt)
    scale = float(rng.uniform(0.05, 0.2))
    out = check_attention(q, k, v, causal, scale, variant)
    assert out.dtype == q.dtype and out.shape == q.shape


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(
    ("sq", "sk", "causal", "overlap", "pingpong", "defer"),
    [
        (200, 200, True, False, False, False),
        (75, 300, False, True, True, True),
        (257, 300, True, True, True, False),
        (193, 193, True, True, False, True),
    ],
)
def test_attention_sm90_three_consumers(
    sq: int,
    sk: int,
    causal: bool,
    overlap: bool,
    pingpong: bool,
    defer: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Head dim 64 with three consumer warpgroups (192 query rows a block,
    the ping-pong round-robin over three): against float64."""
    variant = loop_variant(sm90.Loop(overlap, pingpong, defer, consumers=3), monkeypatch)
    dt = np.float16
    q = rng.standard_normal((1, 2, sq, 64)).astype(dt)
    k = rng.standard_normal((1, 2, sk, 64)).astype(dt)
    v = rng.standard_normal((1, 2, sk, 64)).astype(dt)
    scale = float(rng.uniform(0.05, 0.2))
    check_attention(q, k, v, causal, scale, variant)


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(("overlap", "defer"), [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("growing", [False, True])
def test_attention_sm90_lazy_rescale(
    overlap: bool, defer: bool, growing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LAZY: the running maximum raised only past the headroom, O rescaled
    only then. `growing` keys make the maximum grow by far more than the
    headroom from tile to tile (by 25-50 in log2 units: every rescale taken),
    plain causal ones hardly at all (most skipped); a tail either way."""
    variant = loop_variant(sm90.Loop(overlap, overlap, defer, lazy=True), monkeypatch)
    dt = np.float16
    sq, sk, d = 130, 300, 64
    q = (rng.standard_normal((1, 1, sq, d)) * 2).astype(dt)
    k = rng.standard_normal((1, 1, sk, d))
    if growing:
        k *= np.linspace(1.0, 12.0, sk)[:, None]
    k = k.astype(dt)
    v = rng.standard_normal((1, 1, sk, d)).astype(dt)
    scale = 0.125
    causal = not growing  # growing: every row sees all three key tiles
    _, ref_lse = reference(q, k, v, causal, scale)
    lse_tol = 1e-2 * max(1.0, np.abs(ref_lse).max() / 100)
    check_attention(q, k, v, causal, scale, variant, lse_tol=lse_tol)


@pytest.mark.parametrize(
    ("overlap", "pingpong", "defer"),
    [(False, False, False), (True, False, False), (True, True, False), (True, True, True)],
)
@pytest.mark.parametrize(("d", "consumers"), [(64, 2), (128, 2), (64, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_sm90_assembles(
    d: int, consumers: int, causal: bool, overlap: bool, pingpong: bool, defer: bool
) -> None:
    """ptxas -Werror for sm_90a accepts it (setmaxnreg honoured, no C7508
    warning) with wgmma, tensor copies, no spilled registers and no
    serialised wgmma."""
    module = sm90.build("bf16", d, causal, sm90.Loop(overlap, pingpong, defer, consumers))
    ptx = zyntax.compile(module, backend="nvptx", arch="sm_90a")
    log = zyntax.validate_ptx(ptx, "sm_90a").log
    # C7513: ptxas serialises every wgmma when registers a pending wgmma
    # reads are written before its wait (P packed during P·V, say).
    assert "C7513" not in log and "serialized" not in log, log
    r = ptxinfo.ptxas_resources(log)["attention"]
    assert r["spill_store_bytes"] == 0, r
    # The overlapped loop has a prologue S and an epilogue P·V besides the loop's.
    assert ptx.count("wgmma.mma_async") == (1 + overlap) * (d // 16 + sm90.BN // 16)
    assert f"setmaxnreg.inc.sync.aligned.u32 {sm90.REGS[consumers][1]}" in ptx
    # One MUFU per exp: the .ftz form (no range fix-up around each ex2).
    assert "ex2.approx.ftz.f32" in ptx and "ex2.approx.f32" not in ptx
    # P packed two at a time.
    assert "cvt.rn.bf16x2.f32" in ptx
    assert "cp.async.bulk.tensor.4d" in ptx


def test_attention_variant_bad_input() -> None:
    q = np.ones((1, 1, 8, 64), np.float16)
    for bad in ("sm70", "sm90_", "sm90_nope", 90):
        with pytest.raises(ArgumentError, match="'variant'"):
            kernels.attention(q, q, q, variant=bad)


def test_attention_sm90_named_loops_and_defaults() -> None:
    """Every named loop (the bench's rows) assembles for the head dims whose
    shared memory it fits, and the defaults name loops of LOOPS."""
    for (d, causal), name in sm90.DEFAULT_LOOP.items():
        assert name in sm90.LOOPS and sm90.fits(d, sm90.LOOPS[name])
        # The defaults assemble without spills or serialised wgmma.
        ptx = zyntax.compile(
            sm90.build("bf16", d, causal, sm90.LOOPS[name]), backend="nvptx", arch="sm_90a"
        )
        log = zyntax.validate_ptx(ptx, "sm_90a").log
        assert "C7513" not in log and "serialized" not in log, log
        assert ptxinfo.ptxas_resources(log)["attention"]["spill_store_bytes"] == 0
    assert not sm90.fits(128, sm90.Loop(stages=4))


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("name", list(sm90.LOOPS))
def test_attention_sm90_named_loop(name: str) -> None:
    """Each named loop by its `variant` string, as the bench runs it, on
    both head dims where it fits, causal with a ragged tail: against float64."""
    dt = np.float16
    for d in (64, 128):
        if not sm90.fits(d, sm90.LOOPS[name]):
            continue
        sq = 203
        q, k, v = (rng.standard_normal((1, 1, sq, d)).astype(dt) for _ in range(3))
        check_attention(q, k, v, True, 0.1, f"sm90_{name}")


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize(
    ("name", "d", "causal", "sq", "sk"),
    [
        ("overlap_persist", 128, True, 400, 400),
        ("overlap_persist", 64, False, 300, 500),
        ("overlap_persist_nosplit", 64, False, 400, 300),
        ("pingpong_persist", 128, True, 300, 300),
        ("pingpong_persist", 64, False, 130, 700),
    ],
)
def test_attention_sm90_persistent(name: str, d: int, causal: bool, sq: int, sk: int) -> None:
    """Persistent loops on two heads of 4-8 tiles: the interpreter runs its
    three blocks one after another, so the first takes every tile from the
    counter (Q's two slots, the K/V ring and the ping-pong turns carry their
    phases from tile to tile, each tile's S_0 overlapping the last P V of the
    one before) and the other two find none left and stop at once."""
    dt = np.float16
    q = rng.standard_normal((1, 2, sq, d)).astype(dt)
    k, v = (rng.standard_normal((1, 2, sk, d)).astype(dt) for _ in range(2))
    check_attention(q, k, v, causal, 0.1, f"sm90_{name}")
