"""Issue 12 (warp-sync) builder methods: bfe/bfi/prmt/shf, red_*, ordered
accesses and fences from the Python builder, run on the interpreter against
numpy references from the PTX definitions; bad types raise VerifyError."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp

G_U32 = hir.ptr("global", hir.u32)
U32 = np.uint32


def _bfe_u32(a: int, pos: int, length: int) -> int:
    pos, length = pos & 0xFF, length & 0xFF
    if length == 0 or pos >= 32:
        return 0
    e = min(length, 32 - pos)
    return (a >> pos) & ((1 << e) - 1)


def _shf_l_wrap(lo: int, hi: int, n: int) -> int:
    n &= 31
    return ((((hi << 32) | lo) << n) >> 32) & 0xFFFFFFFF


def _prmt(a: int, b: int, sel: int) -> int:
    src = (a | (b << 32)).to_bytes(8, "little")
    out = 0
    for k in range(4):
        s = (sel >> (4 * k)) & 0xF
        byte = src[s & 7]
        if s & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * k)
    return out


def _build() -> hir.Module:
    m = hir.Module("ws", targets=["sm_80"])
    with m.kernel("k", [G_U32, G_U32, G_U32, G_U32, G_U32]) as b:
        a_p, b_p, c_p, out, cnt = b.params
        t = b.thread_idx()
        n = b.block_dim()
        a = b.load(b.ptr_add(a_p, t))
        bb = b.load(b.ptr_add(b_p, t))
        c = b.load(b.ptr_add(c_p, t))
        res = [b.bfe(a, c, 9), b.prmt(a, bb, c), b.shf_l_wrap(a, bb, c), b.bfi(a, bb, 4, c)]
        for k, v in enumerate(res):
            b.store(b.ptr_add(out, b.add(b.mul(n, k), t)), v)
        b.red_add(cnt, 1)
        b.red_max(b.ptr_add(cnt, 1), t, scope="block")
        b.fence_acq_rel("system")
        b.compiler_fence()
        p = b.ptr_add(cnt, b.add(t, 2))
        b.store_release(p, b.add(b.load_acquire(p, scope="block"), 5), scope="device")
    return m


def test_builder_ops_on_the_interpreter() -> None:
    rng = np.random.default_rng()
    m = _build()
    text = m.to_zir()
    for mn in (
        "bfe",
        "prmt",
        "shf.l.wrap",
        "bfi",
        "red.add.device",
        "red.max.block",
        "fence.acq_rel.system",
        "compiler_fence",
        "load.acquire.block",
        "store.release.device",
    ):
        assert mn in text
    assert hir.parse_zir(text) == m
    n = 128
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(U32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(U32)
    c = rng.integers(0, 40, n).astype(U32)
    out = rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(U32)
    cnt0 = rng.integers(0, 1000, n + 2).astype(U32)
    cnt = cnt0.copy()
    interp.launch(m, "k", 1, n, a, b, c, out, cnt)
    for t in range(n):
        x, y, z = int(a[t]), int(b[t]), int(c[t])
        assert out[t] == _bfe_u32(x, z, 9)
        assert out[n + t] == _prmt(x, y, z)
        assert out[2 * n + t] == _shf_l_wrap(x, y, z)
        e = min(z, 28)
        m_ = ((1 << e) - 1) << 4
        assert out[3 * n + t] == (y & ~m_ & 0xFFFFFFFF) | ((x << 4) & m_)
    assert cnt[0] == cnt0[0] + n
    assert cnt[1] == max(cnt0[1], n - 1)
    np.testing.assert_array_equal(cnt[2:], cnt0[2:] + 5)


def test_bad_types_are_verify_errors() -> None:
    m = hir.Module("bad", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.f32), hir.u32]) as b:
        x = b.load(b.params[0])
        b.bfe(x, b.params[1], 3)
    with pytest.raises(zyntax.VerifyError, match=r"`bfe` works on i32, u32, i64 or u64, got f32"):
        m.verify()
    m2 = hir.Module("bad2", targets=["sm_80"])
    with m2.kernel("k", [hir.ptr("global", hir.vec(hir.bf16, 2)), hir.vec(hir.bf16, 2)]) as b:
        b.red_add(b.params[0], b.params[1])
    with pytest.raises(zyntax.VerifyError, match=r"vec<bf16, 2> needs sm_90"):
        m2.verify()
