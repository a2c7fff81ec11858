"""Issue 12 (warp-sync) instructions on the device: the bit ops
(bfe/bfi/prmt/shf) bit for bit against the reference interpreter on fresh
random inputs; red.*, packed f16x2 atomics, float atomic min and ordered
accesses against exact totals; and a message-passing litmus test across
blocks (release store / acquire load), run many times. Kernels:
tests/data/warp_sync.zir."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpu_helpers import ROOT

from zyntax import cuda, hir, interp

pytestmark = pytest.mark.gpu
U32 = np.uint32


def _module() -> hir.Module:
    path = ROOT / "tests" / "data" / "warp_sync.zir"
    return hir.parse_zir(path.read_text(), filename=str(path))


def _small(rng: np.random.Generator, n: int) -> np.ndarray:
    """Positions/lengths: mostly inside a word, some past it, some full-range."""
    v = rng.integers(0, 70, n, dtype=U32)
    wide = rng.random(n) < 0.2
    v[wide] = rng.integers(0, 2**32, int(wide.sum()), dtype=np.uint64).astype(U32)
    return v


@pytest.mark.parametrize("n", [256, 1024])
def test_bits32_match_interpreter(rng: np.random.Generator, n: int) -> None:
    m = _module()
    k = cuda.load_hir(m).kernel("bits32")
    a, b, e = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(U32) for _ in range(3))
    c, d = _small(rng, n), _small(rng, n)
    poison = rng.integers(0, 2**32, 8 * n, dtype=np.uint64).astype(U32)
    want = poison.copy()
    interp.launch(m, "bits32", 1, n, a, b, c, d, e, want)
    out = cuda.to_device(poison)
    ins = [cuda.to_device(x) for x in (a, b, c, d, e)]
    k.launch(1, n, *ins, out)
    got = out.to_host()
    for op in range(8):
        np.testing.assert_array_equal(
            got[op * n : (op + 1) * n], want[op * n : (op + 1) * n], f"op {op}"
        )


def test_bits64_match_interpreter(rng: np.random.Generator) -> None:
    m = _module()
    k = cuda.load_hir(m).kernel("bits64")
    n = 512
    a = rng.integers(0, 2**64, n, dtype=np.uint64)
    b = rng.integers(0, 2**64, n, dtype=np.uint64)
    c, d = _small(rng, n), _small(rng, n)
    poison = rng.integers(0, 2**64, 3 * n, dtype=np.uint64)
    want = poison.copy()
    interp.launch(m, "bits64", 1, n, a, b, c, d, want)
    out = cuda.to_device(poison)
    k.launch(1, n, cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), cuda.to_device(d), out)
    np.testing.assert_array_equal(out.to_host(), want)


def test_reductions_and_ordered_accesses(dev: Any, rng: np.random.Generator) -> None:
    k = cuda.load_hir(_module()).kernel("memory_model")
    blocks, threads = 4 * dev.sm_count, 64
    total = blocks * threads
    cnt0 = rng.integers(0, 1 << 20, 5, dtype=U32)
    # Quarter-integers and small integers: every order of additions gives the same sums.
    vals = ((rng.integers(0, 400, threads) - 200) / 4).astype(np.float32)
    fs0 = np.array([rng.integers(0, 100) / 4, 1000.0], np.float32)
    # f16 sums are exact only while every partial sum stays within 2048 (11-bit
    # significand): two +-1 lanes keep |partial| <= 2 * blocks < 2048 in any order.
    hv = np.zeros(2 * threads, np.float16)
    hv[:2] = rng.choice([-1.0, 1.0], 2)
    h0 = np.array([rng.integers(0, 16), -rng.integers(0, 16)], np.float16)
    cnt, fs, h = cuda.to_device(cnt0), cuda.to_device(fs0), cuda.to_device(h0)
    data = cuda.to_device(rng.integers(0, 2**32, threads, dtype=np.uint64).astype(U32))
    olds = cuda.to_device(rng.integers(-9, 9, 2 * threads).astype(np.float16))
    k.launch(blocks, threads, cnt, fs, cuda.to_device(vals), h, cuda.to_device(hv), data, olds)
    c = cnt.to_host()
    assert c[0] == (int(cnt0[0]) + total) % 2**32
    assert c[1] == max(int(cnt0[1]), threads - 1)
    inc = int(cnt0[2])
    for _ in range(total):
        inc = 0 if inc >= 1000 else inc + 1
    assert c[2] == inc
    assert c[3] == (int(cnt0[3]) - 2 * total) % 2**32
    assert c[4] == sum(range(threads))
    f = fs.to_host()
    assert f[0] == np.float32(fs0[0] + blocks * vals.astype(np.float64).sum())
    assert f[1] == min(vals.min(), fs0[1])
    hs = hv.astype(np.float64).reshape(threads, 2).sum(axis=0)
    np.testing.assert_array_equal(h.to_host().astype(np.float64), h0 + 2 * blocks * hs)
    # Every block stores 3 * tid then increments what it acquires; blocks race
    # on the same words, so each word gained between 1 and `blocks` increments.
    gained = data.to_host().astype(np.int64) - 3 * np.arange(threads)
    assert ((gained >= 1) & (gained <= blocks)).all(), gained


def test_litmus_message_passing(dev: Any, rng: np.random.Generator) -> None:
    """Block 2p writes 32 words and releases flag[p]; block 2p+1 acquires it and
    counts stale words. With release/acquire the count is 0 on every run."""
    k = cuda.load_hir(_module()).kernel("litmus_mp")
    pairs = 4 * dev.sm_count  # one-thread blocks: all co-resident
    bad = 0
    for _ in range(50):
        seed = int(rng.integers(0, 2**32))
        data = cuda.to_device(rng.integers(0, 2**32, 32 * pairs, dtype=np.uint64).astype(U32))
        flag = cuda.zeros(pairs, U32)
        out = cuda.to_device(np.full(pairs, 0xDEAD, U32))
        k.launch(2 * pairs, 1, data, flag, out, seed)
        got = out.to_host()
        assert (flag.to_host() == 1).all()
        bad += int(got.sum())
    assert bad == 0


def test_redux_matches_interpreter(dev: Any, rng: np.random.Generator) -> None:
    if dev.compute_capability < (8, 0):
        pytest.skip("redux.sync needs sm_80")
    path = ROOT / "tests" / "data" / "redux.zir"
    m = hir.parse_zir(path.read_text(), filename=str(path))
    k = cuda.load_hir(m).kernel("redux_ops")
    n = 256
    vals = rng.integers(0, 2**32, n, dtype=np.uint64).astype(U32)
    poison = rng.integers(0, 2**32, 10 * n, dtype=np.uint64).astype(U32)
    want = poison.copy()
    interp.launch(m, "redux_ops", 1, n, vals, want)
    out = cuda.to_device(poison)
    k.launch(1, n, cuda.to_device(vals), out)
    np.testing.assert_array_equal(out.to_host(), want)


# --- issue 12 (rest): named barriers and packed conversions


def _data(name: str) -> hir.Module:
    path = ROOT / "tests" / "data" / name
    return hir.parse_zir(path.read_text(), filename=str(path))


def test_named_barrier_producer_consumer(rng: np.random.Generator) -> None:
    """Producer warps hand a shared buffer to consumer warps through
    `bar.arrive`/`bar.sync` on barriers 1 and 2, two rounds per block: the
    device matches the interpreter and the closed form, on many blocks."""
    m = _data("named_barrier.zir")
    k = cuda.load_hir(m).kernel("producer_consumer")
    blocks = 264
    inp = rng.integers(0, 2**32, 64 * blocks, dtype=np.uint64).astype(U32)
    poison = rng.integers(0, 2**32, 128 * blocks, dtype=np.uint64).astype(U32)
    want = poison[: 128 * 8].copy()
    interp.launch(m, "producer_consumer", 8, 128, inp[: 64 * 8].copy(), want)
    out = cuda.to_device(poison)
    for _ in range(20):
        k.launch(blocks, 128, cuda.to_device(inp), out)
        got = out.to_host().reshape(blocks, 2, 64)
        rev = inp.reshape(blocks, 64)[:, ::-1].astype(np.uint64)
        for r in range(2):
            np.testing.assert_array_equal(got[:, r], ((rev * 3 + r) % 2**32).astype(U32))
    np.testing.assert_array_equal(out.to_host()[: 128 * 8], want)


def test_cvt_pack_matches_interpreter(dev: Any, rng: np.random.Generator) -> None:
    """cvt_pack (f16x2, bf16x2, e4m3x2, e5m2x2 with satfinite) and cvt_unpack
    bit for bit against the interpreter's exact rounding, on magnitudes from
    fp8 subnormals past every maximum, both signs, and exact ties."""
    if dev.compute_capability < (8, 9):
        pytest.skip("fp8 conversions need sm_89")
    m = _data("cvt_pack.zir")
    k = cuda.load_hir(m).kernel("cvt_all")
    n = 4096
    mag = rng.uniform(1.0, 2.0, 2 * n) * np.exp2(rng.integers(-20, 20, 2 * n))
    vals = (mag * rng.choice([-1.0, 1.0], 2 * n)).astype(np.float32)
    # Ties of every format: halfway between neighbouring codes.
    vals[:8] = [1.0625, 1.0 + 2.0**-11, 1.0 + 2.0**-8, 2.0**-10, 3 * 2.0**-10, 1e6, -1e6, 464.0]
    a, b = vals[:n].copy(), vals[n:].copy()
    poison = rng.integers(0, 2**32, 6 * n, dtype=np.uint64).astype(U32)
    want = poison.copy()
    interp.launch(m, "cvt_all", 16, n // 16, a, b, want)
    out = cuda.to_device(poison)
    k.launch(16, n // 16, cuda.to_device(a), cuda.to_device(b), out)
    got = out.to_host().reshape(6, n)
    ref = want.reshape(6, n)
    for row, name in enumerate(
        ["f16x2", "bf16x2", "e4m3x2", "e5m2x2", "unpack e4m3", "unpack e5m2"]
    ):
        bad = np.nonzero(got[row] != ref[row])[0]
        assert bad.size == 0, (
            name,
            [(a[i], b[i], hex(got[row][i]), hex(ref[row][i])) for i in bad[:5]],
        )
    # The f16x2 lanes are numpy's own rounding too.
    lo = (got[0] & 0xFFFF).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(lo, a.astype(np.float16))


def _pairs_module(elem: str) -> hir.Module:
    """out[k * n + i] for op k of add, sub, mul, fma, min, max on pairs a[i], b[i]."""
    t = hir.vec(getattr(hir, elem), 2)
    m = hir.Module(f"pairs_{elem}", targets=["sm_80", "sm_90"])
    p = hir.ptr("global", t)
    with m.kernel("pairs", [p, p, p, hir.u32]) as b:
        a, c, out, n = b.params
        i = b.add(b.mul(b.block_idx(), b.block_dim()), b.thread_idx())
        with b.if_(b.lt(i, n)):
            x, y = b.load(b.ptr_add(a, i)), b.load(b.ptr_add(c, i))
            rows = [b.add(x, y), b.sub(x, y), b.mul(x, y), b.fma(x, y, x), b.min(x, y)]
            rows.append(b.max(x, y))
            for k, r in enumerate(rows):
                b.store(b.ptr_add(out, b.add(b.mul(n, k), i)), r)
        b.ret()
    m.verify()
    return m


@pytest.mark.parametrize("elem", ["f16", "bf16"])
@pytest.mark.parametrize("arch", ["sm_80", None])
def test_packed_half_arithmetic_matches_interpreter(
    rng: np.random.Generator, elem: str, arch: str | None
) -> None:
    """f16x2 / bf16x2 add, sub, mul, fma, min, max bit for bit against the
    interpreter's lane-wise round-to-nearest-even; sm_80 PTX (bf16x2 add/sub/mul
    as fma.rn.bf16x2) and the device's own."""
    m = _pairs_module(elem)
    k = cuda.load_hir(m, arch=arch).kernel("pairs")
    n = 2048
    f32 = (rng.uniform(-4, 4, 2 * n) * np.exp2(rng.integers(-6, 6, 2 * n))).astype(np.float32)
    if elem == "f16":
        bits = f32.astype(np.float16).view(np.uint16)
    else:
        u = f32.view(np.uint32).astype(np.uint64)
        bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    # Pairs travel as arrays of their lanes: numpy's float16, ml_dtypes' bfloat16
    # (the launch checks the element type, so bf16 bits cannot go as uint16).
    dt = np.float16 if elem == "f16" else pytest.importorskip("ml_dtypes").bfloat16
    a, b = bits[:n].view(dt).copy(), bits[n:].view(dt).copy()
    half = n // 2
    poison = rng.integers(0, 2**16, 6 * n, dtype=np.uint64).astype(np.uint16).view(dt)
    want = poison.copy()
    interp.launch(m, "pairs", 8, 128, a, b, want, np.uint32(half))
    out = cuda.to_device(poison)
    k.launch(8, 128, cuda.to_device(a), cuda.to_device(b), out, np.uint32(half))
    np.testing.assert_array_equal(out.to_host().view(np.uint16), want.view(np.uint16))


def test_l2_eviction_hints_copy(rng: np.random.Generator) -> None:
    """load.evict_last / store.evict_first (and the reverse) move the values
    unchanged; the PTX carries the createpolicy hints."""
    f4 = hir.vec(hir.f32, 4)
    m = hir.Module("l2", targets=["sm_80", "sm_90"], ptx_version="8.0")
    with m.kernel("copy", [hir.ptr("global", f4), hir.ptr("global", f4), hir.u32]) as b:
        src, dst, n = b.params
        i = b.add(b.mul(b.block_idx(), b.block_dim()), b.thread_idx())
        with b.if_(b.lt(i, n)):
            v = b.load_cached(b.ptr_add(src, i), "evict_last")
            b.store_cached(b.ptr_add(dst, i), v, "evict_first")
        b.ret()
    m.verify()
    lm = cuda.load_hir(m)
    n4 = 1 << 16
    x = rng.standard_normal(4 * n4).astype(np.float32)
    out = cuda.to_device(np.full(4 * n4, np.nan, np.float32))
    lm.kernel("copy").launch(n4 // 256, 256, cuda.to_device(x), out, np.uint32(n4))
    np.testing.assert_array_equal(out.to_host(), x)


def test_producer_consumer_example(rng: np.random.Generator) -> None:
    """examples/producer_consumer.py: warp-specialised two-stage streaming with
    named barriers, on many blocks, against the closed form and the interpreter."""
    import producer_consumer

    m = producer_consumer.build()
    k = cuda.load_hir(m).kernel("stream")
    blocks, tiles = 132 * 4, 8
    x = rng.standard_normal(blocks * tiles * 128).astype(np.float32)
    want = (2 * x.reshape(-1, 128)[:, ::-1] + 1).reshape(-1)
    out = cuda.to_device(np.full_like(x, np.nan))
    for _ in range(5):
        k.launch(blocks, 256, cuda.to_device(x), out, np.uint32(tiles))
        np.testing.assert_allclose(out.to_host(), want, rtol=1e-6)
    small = np.full(2 * tiles * 128, np.nan, np.float32)
    interp.launch(m, "stream", 2, 256, x[: small.size].copy(), small, np.uint32(tiles))
    np.testing.assert_array_equal(out.to_host()[: small.size], small)
