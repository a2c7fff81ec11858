"""The rest of issue 12 on the CPU: named barriers, packed conversions and
shared-memory alignment through the builder; the issue-12 primitives of
``zyntax.lang`` (bit ops, named barriers, warp reductions, red, acquire/release,
approximate math, cache operators, 2/4-element vector access, cvt_pack) and
``@zyntax.kernel(exact_threads=...)``, on the reference interpreter against
numpy and references written here from the PTX ISA, on fresh random inputs.
The device runs of the same kernels are in tests/gpu/test_warp_sync_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp, lang

rng = np.random.default_rng()


# ----------------------------------------------------------------- references


def fp8_ref(x: np.ndarray, e5m2: bool) -> np.ndarray:
    """PTX `cvt.rn.satfinite.{e4m3,e5m2}.f32`: the nearest finite code (ties
    to the even code), saturated to the largest finite value; by search over
    every code, independent of the interpreter's arithmetic."""
    mb, emin, top = (2, -14, 0x7B) if e5m2 else (3, -6, 0x7E)
    codes = np.arange(top + 1)
    e = codes >> mb
    m = (codes & ((1 << mb) - 1)).astype(np.float64)
    vals = np.where(e == 0, m * 2.0 ** (emin - mb), (1 + m / 2**mb) * 2.0 ** (e - 1 + emin))
    a = np.abs(x.astype(np.float64))[:, None]
    d = np.abs(vals[None, :] - a)
    best = d.min(axis=1, keepdims=True)
    tie = d == best
    # Among the nearest codes prefer an even one (ties-to-even on the mantissa).
    pick = np.where(tie & (codes[None, :] % 2 == 0), codes[None, :], 10**6).min(axis=1)
    pick = np.where(pick == 10**6, np.argmax(tie, axis=1), pick)
    return (pick | np.where(np.signbit(x), 0x80, 0)).astype(np.uint32)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 round to nearest even, on the bits (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return r.astype(np.uint32)


def f16_bits(x: np.ndarray) -> np.ndarray:
    """numpy's f32 -> f16 (round to nearest even; overflow to infinity), as u32 bits."""
    with np.errstate(over="ignore"):
        return x.astype(np.float16).view(np.uint16).astype(np.uint32)


def random_f32(n: int) -> np.ndarray:
    """Magnitudes from fp8 subnormals to past every fp8 maximum, both signs."""
    mag = rng.uniform(1.0, 2.0, n) * np.exp2(rng.integers(-20, 20, n))
    return (mag * rng.choice([-1.0, 1.0], n)).astype(np.float32)


# ----------------------------------------------------------------- builder


def test_named_barrier_producer_consumer_builder() -> None:
    """Warps 0-1 produce into shared memory and `bar.arrive`; warps 2-3
    `bar.sync` and consume: out[b, j] = 5 * x[b, 63 - j] + 1."""
    m = hir.Module("nb", targets=["sm_70"])
    with m.kernel(
        "nb", [hir.ptr("global", hir.u32), hir.ptr("global", hir.u32)], max_threads=128
    ) as b:
        x, out = b.params
        t, blk = b.thread_idx(), b.block_idx()
        buf = b.shared_alloc(hir.u32, 64)
        with b.if_(b.lt(t, 64)):
            v = b.load(b.ptr_add(x, b.add(b.mul(blk, 64), t)))
            b.store(b.ptr_add(buf, t), b.add(b.mul(v, 5), 1))
            b.named_barrier_arrive(3, 128)
        with b.if_(b.ge(t, 64)):
            j = b.sub(t, 64)
            b.named_barrier_sync(3, 128)
            got = b.load(b.ptr_add(buf, b.sub(63, j)))
            b.store(b.ptr_add(out, b.add(b.mul(blk, 64), j)), got)
        b.ret()
    m.verify()
    assert "bar.arrive 3, 128" in m.to_zir() and "bar.sync 3, 128" in m.to_zir()
    blocks = 3
    x = rng.integers(0, 2**32, 64 * blocks, dtype=np.uint64).astype(np.uint32)
    out = rng.integers(0, 2**32, 64 * blocks, dtype=np.uint64).astype(np.uint32)
    interp.launch(m, "nb", blocks, 128, x, out)
    want = (x.reshape(blocks, 64)[:, ::-1].astype(np.uint64) * 5 + 1) % 2**32
    np.testing.assert_array_equal(out, want.reshape(-1).astype(np.uint32))


@pytest.mark.parametrize(
    ("bar", "count", "why"),
    [(0, 64, "out of range 1..15"), (16, 64, "out of range 1..15"), (1, 40, "multiple of 32")],
)
def test_named_barrier_bad_immediates(bar: int, count: int, why: str) -> None:
    m = hir.Module("nb", targets=["sm_70"])
    with m.kernel("k", []) as b:
        b.named_barrier_sync(bar, count)
        b.ret()
    with pytest.raises(zyntax.VerifyError, match=why):
        m.verify()


def test_named_barrier_id_range_is_checked_at_the_boundary() -> None:
    m = hir.Module("nb", targets=["sm_70"])
    with m.kernel("k", []) as b, pytest.raises(zyntax.ArgumentError, match="id"):
        b.named_barrier_arrive(-1, 64)


def cvt_module() -> hir.Module:
    m = hir.Module("cvt", targets=["sm_89", "sm_90"], ptx_version="8.1")
    f32p, u32p = hir.ptr("global", hir.f32), hir.ptr("global", hir.u32)
    with m.kernel("cvt", [f32p, f32p, u32p, hir.u32]) as b:
        a, c, out, n = b.params
        i = b.add(b.mul(b.block_idx(), b.block_dim()), b.thread_idx())
        with b.if_(b.lt(i, n)):
            lo, hi = b.load(b.ptr_add(a, i)), b.load(b.ptr_add(c, i))
            rows = [
                b.bitcast(b.cvt_pack("f16x2", lo, hi), hir.u32),
                b.bitcast(b.cvt_pack("bf16x2", lo, hi), hir.u32),
                b.cast(b.cvt_pack("e4m3x2", lo, hi), hir.u32),
                b.cast(b.cvt_pack("e5m2x2", lo, hi), hir.u32),
                b.bitcast(b.cvt_unpack("e4m3x2", b.cvt_pack("e4m3x2", lo, hi)), hir.u32),
            ]
            for k, r in enumerate(rows):
                b.store(b.ptr_add(out, b.add(b.mul(n, k), i)), r)
        b.ret()
    m.verify()
    return m


def test_cvt_pack_matches_numpy_and_ptx_rounding() -> None:
    m = cvt_module()
    n = 1000
    a, c = random_f32(n), random_f32(n)
    a[:4] = [1.0625, 1.0 + 2.0**-11, 1e6, -5e4]  # ties and saturation
    out = rng.integers(0, 2**32, 5 * n, dtype=np.uint64).astype(np.uint32)
    interp.launch(m, "cvt", 8, 128, a, c, out, np.uint32(n))
    got = out.reshape(5, n)
    h = f16_bits
    np.testing.assert_array_equal(got[0], h(a) | h(c) << 16)
    np.testing.assert_array_equal(got[1], bf16_bits(a) | bf16_bits(c) << 16)
    for row, e5 in ((2, False), (3, True)):
        np.testing.assert_array_equal(got[row], fp8_ref(a, e5) | fp8_ref(c, e5) << 8)
    assert got[2][0] & 0xFF == 0x38 and got[2][2] & 0xFF == 0x7E and got[3][2] & 0xFF == 0x7B
    # Widening back is exact: e4m3 values are f16 values.
    lo = (got[4] & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
    codes = got[2] & 0xFF
    mag = codes & 0x7F
    e, mm = mag >> 3, (mag & 7).astype(np.float64)
    val = np.where(e == 0, mm * 2.0**-9, (1 + mm / 8) * 2.0 ** (e.astype(np.int64) - 7))
    np.testing.assert_array_equal(lo, np.where(codes & 0x80, -val, val))


def test_cvt_pack_needs_sm_89_for_fp8() -> None:
    m = hir.Module("cvt", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.u16), hir.f32]) as b:
        out, x = b.params
        b.store(out, b.cvt_pack("e4m3x2", x, x))
        b.ret()
    with pytest.raises(zyntax.VerifyError, match="fp8 pair conversions needs sm_89"):
        m.verify()


def test_shared_alignment_in_zir_and_ptx_text() -> None:
    m = hir.Module("al", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.f32)]) as b:
        (out,) = b.params
        s = b.shared_alloc(hir.f32, 64, align=1024)
        d = b.dyn_shared(hir.f32, align=128)
        t = b.thread_idx()
        b.store(b.ptr_add(s, t), b.cast(t, hir.f32))
        b.store(b.ptr_add(d, t), b.cast(t, hir.f32))
        b.barrier()
        v = b.add(b.load(b.ptr_add(s, t)), b.load(b.ptr_add(d, t)))
        b.store(b.ptr_add(out, t), v)
        b.ret()
    m.verify()
    text = m.to_zir()
    assert "shared_alloc f32, 64 align 1024" in text and "dyn_shared f32 align 128" in text
    out = np.full(64, np.nan, np.float32)
    interp.launch(m, "k", 1, 64, out, shared_bytes=256)
    np.testing.assert_array_equal(out, 2 * np.arange(64, dtype=np.float32))
    bad = hir.Module("al", targets=["sm_80"])
    with bad.kernel("k", []) as b:
        b.shared_alloc(hir.f32, 4, align=96)
        b.ret()
    with pytest.raises(zyntax.VerifyError, match="power of two up to 1024"):
        bad.verify()


# ----------------------------------------------------------------- zyntax.lang


@zyntax.kernel(device="cpu")
def lang_bits(a: Any, b: Any, c: Any, out: Any) -> None:
    i = lang.grid(1)
    if i < len(a):
        x, y, s = a[i], b[i], c[i]
        out[i, 0] = lang.bfe(x, s & 31, 9)
        out[i, 1] = lang.bfi(x, y, s & 31, 7)
        out[i, 2] = lang.prmt(x, y, s)
        out[i, 3] = lang.shf_l_wrap(x, y, s)
        out[i, 4] = lang.shf_r_clamp(x, y, s & 63)


def test_lang_bit_ops_match_ptx_definitions() -> None:
    n = 300
    a, b, c = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    out = rng.integers(0, 2**32, (n, 5), dtype=np.uint64).astype(np.uint32)
    lang_bits[3, 128](a, b, c, out)
    au, bu = a.astype(np.uint64), b.astype(np.uint64)
    pos = (c & 31).astype(np.uint64)
    ln = np.minimum(9, 32 - pos)
    np.testing.assert_array_equal(out[:, 0], (au >> pos) & ((1 << ln) - 1))
    mask = (((1 << np.minimum(7, 32 - pos)) - 1) << pos) & 0xFFFFFFFF
    np.testing.assert_array_equal(out[:, 1], (bu & ~mask & 0xFFFFFFFF) | ((au << pos) & mask))
    both = au | (bu << 32)
    prmt = np.zeros(n, np.uint64)
    for k in range(4):
        sel = (c.astype(np.uint64) >> (4 * k)) & 0xF
        byte = (both >> (8 * (sel & 7))) & 0xFF
        byte = np.where(sel & 8, np.where(byte & 0x80, 0xFF, 0), byte).astype(np.uint64)
        prmt |= byte << np.uint64(8 * k)
    np.testing.assert_array_equal(out[:, 2], prmt)
    sh = c.astype(np.uint64) & 31
    np.testing.assert_array_equal(out[:, 3], (((bu << 32 | au) << sh) >> 32) & 0xFFFFFFFF)
    sr = np.minimum(c.astype(np.uint64) & 63, 32)
    np.testing.assert_array_equal(out[:, 4], ((bu << 32 | au) >> sr) & 0xFFFFFFFF)


@zyntax.kernel(device="cpu", exact_threads=128)
def lang_sync(x: Any, total: Any, out: Any) -> None:
    buf = lang.shared.array(64, lang.u32)
    t = lang.thread_idx.x
    if t < 64:
        buf[t] = x[t] * 3
        lang.named_barrier_arrive(1, 128)
    else:
        lang.named_barrier_sync(1, 128)
        v = buf[127 - t]
        s = lang.reduce_add_sync(0xFFFFFFFF, v)
        out[t - 64] = s
        lang.red.add(total, 0, v)


def test_lang_named_barrier_reduce_and_red() -> None:
    x = rng.integers(0, 2**20, 64, dtype=np.uint32)
    total = np.zeros(1, np.uint32)
    out = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    lang_sync[1, 128](x, total, out)
    v = (x[::-1] * 3).astype(np.uint64)
    warp_sums = np.repeat(v.reshape(2, 32).sum(axis=1) % 2**32, 32)
    np.testing.assert_array_equal(out, warp_sums.astype(np.uint32))
    assert int(total[0]) == int(v.sum() % 2**32)
    sig = (lang.Array[lang.u32, 1], lang.Array[lang.u32, 1], lang.Array[lang.u32, 1])
    text = lang_sync.hir(sig)
    assert "exact_threads(128, 1, 1)" in text and "bar.arrive 1, 128" in text
    assert "redux.add" in text and "red.add.device" in text
    with pytest.raises(zyntax.ZyntaxError, match="exact_threads"):
        lang_sync[1, 64](x, total, out)


@zyntax.kernel(device="cpu")
def lang_vec(a: Any, out: Any, flag: Any, got: Any) -> None:
    i = lang.grid(1)
    if i * 4 < len(a):
        p, q, r, s = lang.load_vec(a, i * 4, 4)
        lang.store_vec(out, i * 4, (s, r, q, p), cache="cs")
        u, v = lang.load_vec(a, i * 4, 2, cache="cg")
        out[len(a) + i] = lang.fma(u, v, lang.tanh_approx(u) + lang.ex2_approx(v))
        out[len(a) + len(a) // 4 + i] = lang.load_cached(a, i * 4 + 3, cache="lu")
    if i == 0:
        lang.store_release(flag, 0, 7, scope="system")
        lang.fence_acq_rel()
        lang.compiler_fence()
        got[0] = lang.load_acquire(flag, 0, scope="block")
        got[1] = lang.bitcast(lang.rcp_approx(lang.f32(4.0)), lang.u32)


def test_lang_vector_access_cache_ops_and_ordering() -> None:
    n = 256
    a = rng.uniform(-2, 2, n).astype(np.float32)
    out = np.full(n + n // 2, np.nan, np.float32)
    flag, got = np.zeros(1, np.uint32), np.zeros(2, np.uint32)
    lang_vec[1, 64](a, out, flag, got)
    np.testing.assert_array_equal(out[:n], a.reshape(-1, 4)[:, ::-1].reshape(-1))
    u, v = a[0::4].astype(np.float64), a[1::4].astype(np.float64)
    # Absolute slack for sums that cancel to near zero (the approximations
    # and the fma round differently from the float64 reference).
    np.testing.assert_allclose(out[n : n + n // 4], u * v + np.tanh(u) + 2**v, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out[n + n // 4 :], a[3::4])
    assert got[0] == 7 and got[1] == np.float32(0.25).view(np.uint32)
    sig = (lang.Array[lang.f32, 1, "C"],) * 2 + (lang.Array[lang.u32, 1],) * 2
    text = lang_vec.hir(sig)
    for needle in ("vec<f32, 4> = load", "store.cs", "vec<f32, 2> = load.cg", "load.lu"):
        assert needle in text, needle
    ptx = lang_vec.ptx(sig, arch="sm_80")
    assert "ld.global.v4.f32" in ptx and "st.global.cs.v4.f32" in ptx


@zyntax.kernel(device="cpu")
def lang_vec_strided(a: Any, out: Any) -> None:
    x, y = lang.load_vec(a, 0, 2)
    out[0] = x + y


def test_lang_vector_access_needs_contiguous_rows() -> None:
    a = np.arange(8, dtype=np.float32)[::2]
    with pytest.raises(zyntax.ZyntaxError, match="contiguous"):
        lang_vec_strided[1, 1](a, np.zeros(1, np.float32))


@zyntax.kernel(device="cpu")
def lang_cvt(a: Any, b: Any, out: Any) -> None:
    i = lang.grid(1)
    if i < len(a):
        out[i, 0] = lang.cvt_pack("f16x2", a[i], b[i])
        out[i, 1] = lang.cvt_pack("bf16x2", a[i], b[i])
        out[i, 2] = lang.u32(lang.cvt_pack("e5m2x2", a[i], b[i]))


def test_lang_cvt_pack() -> None:
    n = 200
    a, b = random_f32(n), random_f32(n)
    out = rng.integers(0, 2**32, (n, 3), dtype=np.uint64).astype(np.uint32)
    lang_cvt[2, 128](a, b, out)
    h = f16_bits
    np.testing.assert_array_equal(out[:, 0], h(a) | h(b) << 16)
    np.testing.assert_array_equal(out[:, 1], bf16_bits(a) | bf16_bits(b) << 16)
    np.testing.assert_array_equal(out[:, 2], fp8_ref(a, True) | fp8_ref(b, True) << 8)


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_half_pair_arithmetic_rounds_each_lane(elem: str) -> None:
    """add/sub/mul/min/max/fma on vec<f16, 2> / vec<bf16, 2>: each lane is the
    exact result rounded once to nearest even (numpy float16 / bf16 bits)."""
    t = hir.vec(getattr(hir, elem), 2)
    m = hir.Module("pairs", targets=["sm_80", "sm_90"])
    p = hir.ptr("global", t)
    with m.kernel("pairs", [p, p, p]) as b:
        a, c, out = b.params
        i = b.thread_idx()
        x, y = b.load(b.ptr_add(a, i)), b.load(b.ptr_add(c, i))
        rows = [b.add(x, y), b.sub(x, y), b.mul(x, y), b.fma(x, y, x), b.min(x, y), b.max(x, y)]
        for k, r in enumerate(rows):
            b.store(b.ptr_add(out, b.add(b.mul(b.block_dim(), k), i)), r)
        b.ret()
    m.verify()
    n = 128  # pairs
    f = (rng.uniform(-4, 4, 4 * n) * np.exp2(rng.integers(-6, 6, 4 * n))).astype(np.float32)
    if elem == "f16":
        lanes = f.astype(np.float16)
        vals = lanes.astype(np.float64)

        def rnd(v: np.ndarray) -> np.ndarray:
            return v.astype(np.float16).view(np.uint16)

        bits = lanes.view(np.uint16)
    else:
        bits = bf16_bits(f).astype(np.uint16)
        vals = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)

        def rnd(v: np.ndarray) -> np.ndarray:
            # The exact f64 value rounded once to 8 significant bits (RNE).
            m, e = np.frexp(v)
            r = np.ldexp(np.rint(m * 256) / 256, e).astype(np.float32)
            return (r.view(np.uint32) >> 16).astype(np.uint16)

    # Pairs travel as arrays of their lanes (numpy has float16; bf16 as its bits).
    dt = np.float16 if elem == "f16" else np.uint16
    a, c = bits[: 2 * n].view(dt).copy(), bits[2 * n :].view(dt).copy()
    x, y = vals[: 2 * n], vals[2 * n :]
    out = rng.integers(0, 2**16, 12 * n, dtype=np.uint64).astype(np.uint16).view(dt)
    interp.launch(m, "pairs", 1, n, a, c, out)
    got = out.view(np.uint16).reshape(6, 2 * n)
    want = [rnd(x + y), rnd(x - y), rnd(x * y), rnd(x * y + x)]
    want += [rnd(np.minimum(x, y)), rnd(np.maximum(x, y))]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(got[k], w, err_msg=f"op {k}")


@zyntax.kernel(device="cpu", exact_threads=32)
def lang_mma_tile(a: Any, bt: Any, d: Any) -> None:
    # One warp: D (16 x 8, f32) = A (16 x 16, f16) @ Bt.T (Bt: 8 x 16, f16)
    # through ldmatrix fragments of unswizzled shared tiles and mma.sync.
    sa = lang.shared.array(256, lang.f16)
    sb = lang.shared.array(128, lang.f16)
    lane = lang.thread_idx.x
    for i in range(8):
        sa[lane * 8 + i] = a[lane * 8 + i]
    for i in range(4):
        sb[lane * 4 + i] = bt[lane * 4 + i]
    lang.syncthreads()
    # A: matrix lane / 8 holds rows 8 * (its bit 0) on, columns 8 * (its bit 1) on.
    fa = lang.ldmatrix(sa, ((lane & 7) + ((lane >> 3) & 1) * 8) * 16 + (lane >> 4) * 8, 4)
    fb = lang.ldmatrix(sb, (lane & 7) * 16 + ((lane >> 3) & 1) * 8, 2)
    acc = lang.mma_sync(fa, fb, lang.frag_zero(4), "f16")
    g, t = lane >> 2, lane & 3
    d[g * 8 + 2 * t] = lang.frag_get(acc, 0)
    d[g * 8 + 2 * t + 1] = lang.frag_get(acc, 1)
    d[(g + 8) * 8 + 2 * t] = lang.frag_get(acc, 2)
    d[(g + 8) * 8 + 2 * t + 1] = lang.frag_get(acc, 3)


def test_lang_ldmatrix_mma_sync_tile() -> None:
    a = rng.uniform(-2, 2, (16, 16)).astype(np.float16)
    bt = rng.uniform(-2, 2, (8, 16)).astype(np.float16)
    d = np.full(128, np.nan, np.float32)
    lang_mma_tile[1, 32](a.ravel(), bt.ravel(), d)
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    np.testing.assert_allclose(d.reshape(16, 8), want, rtol=1e-5, atol=1e-5)
    hir_text = lang_mma_tile.hir()
    assert "ldmatrix.x4" in hir_text and "mma.sync.m16n8k16.f16" in hir_text
    ptx = lang_mma_tile.ptx(arch="sm_80")
    assert "ldmatrix.sync.aligned" in ptx and "mma.sync.aligned.m16n8k16" in ptx


@zyntax.kernel(device="cpu", exact_threads=32)
def lang_ld_st_matrix(a: Any, out: Any) -> None:
    # ldmatrix.x4 of a 16 x 16 f16 tile, stmatrix.x4 of the same fragment to
    # another tile at the same row addresses: the tile comes back unchanged.
    sa = lang.shared.array(256, lang.f16)
    so = lang.shared.array(256, lang.f16)
    lane = lang.thread_idx.x
    for i in range(8):
        sa[lane * 8 + i] = a[lane * 8 + i]
    lang.syncthreads()
    row = ((lane & 7) + ((lane >> 3) & 1) * 8) * 16 + (lane >> 4) * 8
    lang.stmatrix(so, row, lang.ldmatrix(sa, row, 4))
    lang.syncthreads()
    for i in range(8):
        out[lane * 8 + i] = so[lane * 8 + i]


def test_lang_stmatrix_inverts_ldmatrix() -> None:
    a = rng.uniform(-4, 4, 256).astype(np.float16)
    out = np.full(256, np.nan, np.float16)
    lang_ld_st_matrix[1, 32](a, out)
    np.testing.assert_array_equal(out, a)
    assert "stmatrix.sync.aligned.m8n8.x4" in lang_ld_st_matrix.ptx(arch="sm_90")


@pytest.mark.parametrize("cache", [("cg", "cs"), ("evict_first", "evict_last")])
def test_cached_access_of_eight_half_lanes(cache: tuple[str, str]) -> None:
    """A 16-byte vector of eight f16 lanes moves as one `.v4.b32` access (PTX
    vectors have at most four elements; ptxas crashed on `.v8.b16`), with the
    bits unchanged, on the interpreter and through ptxas."""
    load_op, store_op = cache
    v8 = hir.vec(hir.f16, 8)
    # L2 eviction hints need PTX 7.4, above sm_80's default 7.0.
    m = hir.Module("v8_copy", targets=["sm_90"])
    with m.kernel("copy", [hir.ptr("global", v8), hir.ptr("global", v8)]) as b:
        src, dst = b.params
        i = b.thread_idx()
        x = b.load_cached(b.ptr_add(src, i), load_op)
        b.store_cached(b.ptr_add(dst, i), x, store_op)
    m.verify()
    bits = rng.integers(0, 2**16, 32 * 8, dtype=np.uint16)
    bits[(bits & 0x7C00) == 0x7C00] = 0x3C00  # no NaN/inf patterns: numpy may quiet NaNs
    src = bits.view(np.float16)
    out = np.full_like(src, np.nan)
    interp.launch(m, 1, 32, src, out)
    np.testing.assert_array_equal(out.view(np.uint16), bits)
    ptx = zyntax.compile(m, backend="nvptx", arch="sm_90")
    assert ".v4.b32" in ptx and ".v8" not in ptx
    zyntax.validate_ptx(ptx, "sm_90")
