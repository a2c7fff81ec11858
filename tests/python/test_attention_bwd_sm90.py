"""The sm_90a attention backward (attention_bwd_sm90.py: TMA ring, wgmma
with Pᵀ and dSᵀ from registers, dS through shared memory for dQ, dQ by
a TMA reduction) on the reference interpreter, through
``kernels.attention_backward`` with ``attention_bwd.SM90 = True``: tiny
problems against the float64 gradients (test_attention_bwd.reference) on
fresh random inputs, outputs poisoned with NaN; head dims 64, 96 and 128,
grouped-query heads, causal masks with Sq < Sk and Sq > Sk, windows, tails,
several key and query blocks. The device version:
tests/python/gpu/test_attention_bwd_gpu.py (the default on sm_90)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import zyntax
from test_attention_bwd import reference
from test_attention_tile import reference as attention_reference
from zyntax import hir, kernels, ptxinfo
from zyntax.kernels import attention_bwd, attention_bwd_sm90

rng = np.random.default_rng()


@pytest.fixture(autouse=True)
def sm90_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sm_90a kernel on the interpreter too; outputs and scratch start as NaN."""
    monkeypatch.setattr(attention_bwd, "SM90", True)
    real = attention_bwd.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj.fill(np.nan)
        return obj, t

    monkeypatch.setattr(attention_bwd.T, "output", output)


def forward(q: Any, k: Any, v: Any, scale: float, causal: bool, window: Any) -> tuple[Any, Any]:
    """o (q's dtype) and the LSE (f32) in float64, masks aligned bottom-right:
    the backward's inputs, independent of any forward kernel."""
    o, lse = attention_reference(q, k, v, scale, causal, window)
    return o.astype(q.dtype), lse.astype(np.float32)


def run(
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    window: Any = None,
    with_dlse: bool = False,
    b: int = 1,
) -> tuple[Any, ...]:
    q, do = (rng.standard_normal((b, h, sq, d)).astype(np.float16) for _ in range(2))
    k, v = (rng.standard_normal((b, hk, sk, d)).astype(np.float16) for _ in range(2))
    scale = 0.7 / math.sqrt(d)
    o, lse = forward(q, k, v, scale, causal, window)
    dlse = rng.standard_normal((b, h, sq)).astype(np.float32) if with_dlse else None
    got = kernels.attention_backward(
        q, k, v, o, lse, do, causal=causal, scale=scale, window=window, dlse=dlse
    )
    zero = np.zeros((b, h, sq))
    want = reference(q, k, v, do, zero if dlse is None else dlse, scale, causal, window)
    for name, g, w, like in zip(("dq", "dk", "dv"), got, want, (q, k, v), strict=True):
        assert g.shape == like.shape and g.dtype == np.float16, name
        g64 = g.astype(np.float64)
        assert not np.isnan(g64).any(), f"NaN in {name} (an element not written?)"
        assert np.abs(g64 - w).max() < 5e-3 * max(1.0, np.abs(w).max()), name
    return got


@pytest.mark.parametrize("d", [64, 96, 128])
def test_head_dims_with_tails(d: int) -> None:
    """Two key blocks (the second a tail), two query blocks (a tail)."""
    run(2, 2, 70, 130, d, causal=False)


@pytest.mark.parametrize(("sq", "sk", "d"), [(150, 150, 64), (100, 100, 128), (20, 90, 64)])
def test_causal(sq: int, sk: int, d: int) -> None:
    run(2, 2, sq, sk, d, causal=True)


def test_causal_more_queries_than_keys() -> None:
    """Sq > Sk: the first Sq - Sk rows see no key, dq 0 there."""
    dq, _, _ = run(2, 1, 90, 20, 128, causal=True)
    assert not dq[:, :, :70].any()


@pytest.mark.parametrize(("h", "hk"), [(4, 2), (4, 1)])
def test_grouped_query_heads(h: int, hk: int) -> None:
    run(h, hk, 37, 45, 64, causal=True, b=2)


@pytest.mark.parametrize(("window", "causal"), [((16, 0), False), ((5, 9), False), (7, True)])
def test_windows(window: Any, causal: bool) -> None:
    run(2, 2, 75, 200, 64, causal=causal, window=window)


@pytest.mark.parametrize(
    ("form", "d"),
    [
        ("SPLIT_KEYS", 128),
        ("LATE_DK", 128),
        ("PINGPONG", 64),
        ("PINGPONG", 128),
        ("LONGEST_FIRST", 64),
        ("KV_REGS", 64),
        ("UNIFORM", 128),
        ("DQ_SWIZZLE", 64),
        ("DQ_SWIZZLE", 128),
        ("DEFER_DQ", 64),
        ("DEFER_DQ", 128),
        ("BM_HD64", 64),
        ("SMEM_EPILOGUE", 128),
        ("SMEM_EPILOGUE", 64),
        ("FUSE_ROWS", 128),
        ("FUSE_ROWS", 96),
        ("FUSE_ROWS", 64),
        ("WAIT_HINT", 128),
        ("ROWS_FIRST", 128),
        ("GROUP_BH", 64),
        ("GROUP_BH", 128),
    ],
)
def test_forms(monkeypatch: pytest.MonkeyPatch, form: str, d: int) -> None:
    """The kernel's forms (the bench's zyntax[<form>] rows) compute the same
    gradients; the window leaves the first key blocks with no query (no
    steps: the ping-pong's turns must still balance)."""
    # The knob's other value: the default forms' alternatives are off.
    value = {"BM_HD64": 64, "UNIFORM": False, "DQ_SWIZZLE": False, "SMEM_EPILOGUE": False}
    value |= {"WAIT_HINT": None, "GROUP_BH": 0}
    monkeypatch.setattr(attention_bwd_sm90, form, value.get(form, True))
    run(2, 1, 150, 130, d, causal=True)
    run(2, 2, 20, 300, d, causal=False, window=(5, 0))


@pytest.mark.parametrize(("group_bh", "causal"), [(1, True), (3, True), (3, False), (8, True)])
def test_grouped_blocks(monkeypatch: pytest.MonkeyPatch, group_bh: int, causal: bool) -> None:
    """GROUP_BH: a 1-d grid of key blocks grouped by (batch, KV head) pairs
    (four pairs here: groups of 3 leave a last group of one, 8 one group of
    four) computes the same gradients: every (pair, key block) exactly once."""
    monkeypatch.setattr(attention_bwd_sm90, "GROUP_BH", group_bh)
    run(4, 2, 70, 300, 64, causal=causal, b=2)


def test_lse_gradient() -> None:
    run(2, 1, 40, 50, 64, causal=True, with_dlse=True)


def test_deterministic_keeps_the_tile_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """deterministic=True never reaches the sm_90a kernel (its dQ is atomic)."""

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the sm_90a kernel ran for deterministic=True")

    monkeypatch.setattr(attention_bwd_sm90, "launch", refuse)
    q = rng.standard_normal((1, 2, 20, 64)).astype(np.float16)
    o, lse = forward(q, q, q, 0.125, True, None)
    dq, dk, dv = kernels.attention_backward(q, q, q, o, lse, q, causal=True, deterministic=True)
    assert not np.isnan(dq).any() and not np.isnan(dk).any() and not np.isnan(dv).any()


@pytest.mark.parametrize("d", [64, 96, 128])
def test_module_verifies(d: int) -> None:
    """Every mask form builds and verifies for sm_90a."""
    for upper in (False, True):
        for lower in (False, True):
            m = attention_bwd_sm90.build("bf16", d, upper, lower)
            assert isinstance(m, hir.Module)
            m.verify()


@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_assembles(d: int, causal: bool, pingpong: bool) -> None:
    """ptxas -Werror for sm_90a accepts the default forms (setmaxnreg
    honoured) with no serialised wgmma (C7512, C7513, C7518) and no spills
    but 12 bytes at head dim 64 with a causal mask (session 12's form reloaded 32-60
    bytes of loop invariants at head dim 128 every step)."""
    m = attention_bwd_sm90
    bm = m.BM_HD64 if d == 64 else m.BM
    module = m.build(
        "bf16",
        d,
        causal,
        False,
        pingpong=pingpong,
        uniform=m.UNIFORM,
        dq_swizzle=m.DQ_SWIZZLE,
        defer_dq=m.DEFER_DQ and not pingpong,
        bm=bm,
        smem_epilogue=m.SMEM_EPILOGUE,
        late_dk=m.LATE_DK and d != 64,
        grouped=m.GROUP_BH != 0,
        wait_hint=m.WAIT_HINT,
        rows_first=m.ROWS_FIRST and bm == m.BM,
    )
    ptx = zyntax.compile(module, backend="nvptx", arch="sm_90a")
    log = zyntax.validate_ptx(ptx, "sm_90a").log
    assert "C751" not in log and "serialized" not in log, log
    spills = ptxinfo.ptxas_resources(log)["attention_bwd"]["spill_store_bytes"]
    # hd 64 causal: 8 bytes, 12 in blocks grouped by GROUP_BH (B1 of session
    # 14: 3 % faster all the same)
    assert spills <= (12 if d == 64 else 0), spills
    # Sᵀ and dPᵀ (head_dim / 16 k-steps each), dV and dK (bm / 16 each), dQ:
    # all 128 keys, or its own 64 in two 64-column pieces, per 64 query rows.
    dq_steps = 4 * (bm // 64) if d == 64 else 8
    assert ptx.count("wgmma.mma_async") == 2 * (d // 16) + 2 * (bm // 16) + dq_steps
    assert "stmatrix.sync.aligned" in ptx and "cp.reduce.async.bulk.tensor" in ptx
