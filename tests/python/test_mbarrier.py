"""mbarrier (issue 13): a two-warp producer/consumer ring synchronised only by
transaction barriers runs on the interpreter and matches numpy on fresh random
data (the race checker on); misuse is a typed error; the PTX passes ptxas.
The device twin is tests/python/gpu/test_mbarrier_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp, lang
from zyntax.frontend.errors import KernelTypeError

rng = np.random.default_rng()
SLOTS = 2
LANES = 32
SU64 = hir.ptr("shared", hir.u64)


def _wait(b: hir.FunctionBuilder, bar: hir.Value, parity: hir.Value) -> None:
    """Spin on `try_wait.parity` until the phase of `parity` has completed
    (the Rust builder's wait loop, which the tile layer and kernels use)."""
    b.mbarrier_wait_parity(bar, parity, 1000)


def ring_module(arch: str = "sm_90") -> hir.Module:
    """Kernel `ring(x, out, tiles)`, one block of 64 threads: warp 0 produces
    tile t into slot t % 2 (x * 3 + 1, counted as 4 transaction bytes per
    lane, announced by lane 0's `arrive_expect_tx`), warp 1 consumes it
    (out = slot ^ t) and hands the slot back through the `empty` barrier."""
    m = hir.Module("ring", targets=[arch])
    g = hir.ptr("global", hir.u32)
    with m.kernel("ring", [g, g, hir.u32]) as b:
        x, out, tiles = b.params
        tid = b.thread_idx()
        warp = tid >> 5
        lane = tid & 31
        full = b.shared_alloc(hir.u64, SLOTS)
        empty = b.shared_alloc(hir.u64, SLOTS)
        buf = b.shared_alloc(hir.u32, SLOTS * LANES)
        with b.if_(b.eq(tid, 0)):
            for k in range(SLOTS):
                b.mbarrier_init(b.ptr_add(full, k), LANES)
                b.mbarrier_init(b.ptr_add(empty, k), LANES)
            b.fence_mbarrier_init()
        b.barrier()
        with b.if_(b.eq(warp, 0)):
            with b.for_range(0, tiles, type=hir.u32) as t:
                s = t & 1
                phase = (t >> 1) & 1
                _wait(b, b.ptr_add(empty, s), phase ^ 1)
                v = b.load(b.ptr_add(x, t * LANES + lane))
                b.store(b.ptr_add(buf, s * LANES + lane), v * 3 + 1)
                f = b.ptr_add(full, s)
                b.mbarrier_complete_tx(f, 4)
                with b.if_(b.eq(lane, 0)):
                    b.mbarrier_arrive_expect_tx(f, 4 * LANES)
                with b.if_(b.ne(lane, 0)):
                    b.mbarrier_arrive(f)
        with b.if_(b.eq(warp, 1)):
            with b.for_range(0, tiles, type=hir.u32) as t:
                s = t & 1
                phase = (t >> 1) & 1
                _wait(b, b.ptr_add(full, s), phase)
                v = b.load(b.ptr_add(buf, s * LANES + lane))
                b.store(b.ptr_add(out, t * LANES + lane), v ^ t)
                b.mbarrier_arrive(b.ptr_add(empty, s))
        b.barrier()
        with b.if_(b.eq(tid, 0)):
            for k in range(SLOTS):
                b.mbarrier_inval(b.ptr_add(full, k))
                b.mbarrier_inval(b.ptr_add(empty, k))
        b.ret()
    m.verify()
    return m


def ring_case() -> tuple[np.ndarray, np.ndarray, int]:
    tiles = int(rng.integers(3, 12))
    x = rng.integers(0, 2**32, tiles * LANES, dtype=np.uint64).astype(np.uint32)
    t = np.repeat(np.arange(tiles, dtype=np.uint32), LANES)
    want = (x * np.uint32(3) + np.uint32(1)) ^ t
    return x, want, tiles


def test_mbarrier_ring_on_interpreter() -> None:
    m = ring_module()
    x, want, tiles = ring_case()
    out = np.full(want.shape, 0xDEADBEEF, np.uint32)
    interp.launch(m, "ring", 1, 64, x, out, tiles)
    np.testing.assert_array_equal(out, want)


def test_the_wait_loop_spins_on_try_wait_until_done() -> None:
    """mbarrier_wait_parity: a block that try-waits and branches back to
    itself until the phase completed; building continues after it."""
    m = hir.Module("w", targets=["sm_90"])
    with m.kernel("w", [hir.ptr("global", hir.u32)]) as b:
        bar = b.shared_alloc(hir.u64, 1)
        b.mbarrier_init(bar, 1)
        b.mbarrier_arrive(bar)
        b.mbarrier_wait_parity(bar, 0)
        b.store(b.params[0], 7)
        b.ret()
    m.verify()
    zir = m.to_zir()
    assert "jump block1" in zir
    assert "mbarrier.try_wait_parity" in zir and "br v" in zir and ", block2, block1" in zir
    out = np.full(1, 0xDEADBEEF, np.uint32)
    interp.launch(m, "w", 1, 1, out)
    assert out[0] == 7


def test_mbarrier_zir_round_trip() -> None:
    m = ring_module()
    text = m.to_zir()
    for op in (
        "mbarrier.init",
        "mbarrier.arrive_expect_tx",
        "mbarrier.complete_tx",
        "mbarrier.try_wait_parity",
        "mbarrier.arrive",
        "mbarrier.inval",
        "fence.mbarrier_init",
    ):
        assert op in text
    assert hir.parse_zir(text) == m


def test_mbarrier_ptx_passes_ptxas() -> None:
    m = ring_module()
    for arch in ("sm_90", "sm_90a"):
        ptx = zyntax.compile(m, backend="nvptx", arch=arch)
        assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
        assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx
        zyntax.validate_ptx(ptx, arch=arch)


def test_mbarrier_tx_forms_are_gated_by_name() -> None:
    with pytest.raises(zyntax.VerifyError, match="mbarrier transaction counts needs sm_90"):
        ring_module("sm_80")


def test_mbarrier_needs_a_shared_u64() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", [hir.ptr("global", hir.u64)]) as b:
        b.mbarrier_init(b.params[0], 1)
        b.ret()
    with pytest.raises(zyntax.VerifyError, match=r"barrier must be a ptr<shared, u64>"):
        m.verify()


def test_mbarrier_use_before_init_traps() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", []) as b:
        bar = b.shared_alloc(hir.u64, 1)
        b.mbarrier_arrive(bar)
        b.ret()
    m.verify()
    with pytest.raises(zyntax.ZyntaxError, match="not initialized"):
        interp.launch(m, "k", 1, 1)


@zyntax.kernel
def lang_ring(x: zyntax.u32[1], out: zyntax.u32[1], tiles: zyntax.u32) -> None:
    """`ring_module` written in zyntax.lang."""
    tid = lang.thread_idx.x
    lane = tid % 32
    bars = lang.shared.array(4, zyntax.u64)  # full[0..2], empty[2..4]
    buf = lang.shared.array(64, zyntax.u32)
    if tid == 0:
        for k in range(4):
            lang.mbarrier_init(bars, k, 32)
        lang.fence_mbarrier_init()
    lang.syncthreads()
    if tid < 32:
        for t in range(tiles):
            s = t % 2
            while not lang.mbarrier_try_wait_parity(bars, 2 + s, ((t // 2) % 2) ^ 1, 1000):
                pass
            buf[s * 32 + lane] = x[t * 32 + lane] * 3 + 1
            lang.mbarrier_complete_tx(bars, s, 4)
            if lane == 0:
                lang.mbarrier_arrive_expect_tx(bars, s, 128)
            else:
                lang.mbarrier_arrive(bars, s)
    else:
        for t in range(tiles):
            s = t % 2
            while not lang.mbarrier_try_wait_parity(bars, s, (t // 2) % 2, 1000):
                pass
            out[t * 32 + lane] = buf[s * 32 + lane] ^ t
            lang.mbarrier_arrive(bars, 2 + s)


def test_lang_mbarrier_ring_on_interpreter() -> None:
    x, want, tiles = ring_case()
    out = np.full(want.shape, 0xDEADBEEF, np.uint32)
    lang_ring.run_cpu(x, out, np.uint32(tiles), grid=1, block=64)
    np.testing.assert_array_equal(out, want)


def test_lang_mbarrier_needs_a_shared_u64_array() -> None:
    @zyntax.kernel
    def bad(x: zyntax.u64[1]) -> None:
        lang.mbarrier_init(x, 0, 1)

    with pytest.raises(KernelTypeError, match=r"shared u64 array"):
        bad.run_cpu(np.zeros(1, np.uint64), grid=1, block=1)
