"""Warpgroup MMA from the Python builder (issue 13 item 1): a 64 x N x K tile
product through shared-memory descriptors for each swizzle mode and input
type, on the interpreter against numpy float64 (random data, output
poisoned); A from registers; bad input raises typed errors.

The shared-memory images are laid out here from the PTX ISA's pictures of the
canonical layouts (rows of 16-byte chunks, the chunk index XORed with the row
within each 8-row group). ``tests/python/gpu/test_wgmma_gpu.py`` reuses
``build``/``inputs``/``expected`` to compare the hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp
from zyntax import lang as zl

rng = np.random.default_rng()

B_AT = 8192  # byte offset of B's image in shared memory (A's is at 0)
IMAGE = B_AT + 32768
SMEM = IMAGE + 1024  # room to align the images to 1024 bytes
WIDTH = {"none": 16, "32B": 32, "64B": 64, "128B": 128}
BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
ACC = {"f32": (hir.f32, np.float32), "f16": (hir.f16, np.float16), "i32": (hir.i32, np.int32)}


@dataclass(frozen=True)
class Form:
    a_type: str
    acc: str
    n: int
    swizzle: str = "128B"
    trans: bool = False  # MN-major A (from shared memory) and B
    a_regs: bool = False
    b_type: str | None = None

    @property
    def k(self) -> int:
        return 32 // BYTES[self.a_type]

    @property
    def b(self) -> str:
        return self.b_type or self.a_type


def lbo_sbo(f: Form) -> tuple[int, int]:
    """Leading/stride byte offsets of the images `offsets` lays out."""
    w = WIDTH[f.swizzle]
    t = 16 // BYTES[f.a_type]
    if not f.trans:
        # K-major: no swizzle, 8x16-byte core matrices (K neighbour 128 B, next
        # 8 rows 256 B); swizzled, rows of w bytes, 8-row groups 8w apart.
        return (128, 256) if w == 16 else (16, 8 * w)
    if w == 16:
        # MN-major core matrices: 8 K-rows x 16 B of MN; the next 8 K-rows after all of MN.
        return (128 * max(64, f.n) // t, 128)
    return (16 * w, 8 * w)


def offsets(f: Form, rows: int) -> np.ndarray:
    """Byte offset of element (mn, k) of a rows x K operand, shape (rows, K)."""
    e = BYTES[f.a_type]
    w = WIDTH[f.swizzle]
    t = 16 // e
    lbo, sbo = lbo_sbo(f)
    mn = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(f.k, dtype=np.int64)[None, :]
    if w == 16:
        if not f.trans:
            return (mn // 8) * sbo + (k // t) * lbo + (mn % 8) * 16 + (k % t) * e
        return (mn // t) * sbo + (k // 8) * lbo + (k % 8) * 16 + (mn % t) * e
    if not f.trans:
        row, within, base = mn % 8, k * e, (mn // 8) * sbo
    else:
        per_row = w // e
        row, within, base = k % 8, (mn % per_row) * e, (k // 8) * sbo + (mn // per_row) * lbo
    chunk = (within // 16) ^ (row // (8 // (w // 16)))
    return base + row * w + chunk * 16 + within % 16


def random_bits(elem: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random finite inputs of `elem` as unsigned bits."""
    if elem in ("f16", "bf16", "tf32"):
        v = rng.uniform(-2, 2, shape).astype(np.float32)
        if elem == "f16":
            return v.astype(np.float16).view(np.uint16)
        if elem == "bf16":
            return (v.view(np.uint32) >> 16).astype(np.uint16)
        return v.view(np.uint32) & np.uint32(0xFFFFE000)
    b = rng.integers(0, 256, shape, dtype=np.uint8)
    if elem in ("e4m3", "e5m2"):
        b &= 0xBF  # top exponent bit clear: no NaN or infinity
    return b


def values(elem: str, bits: np.ndarray) -> np.ndarray:
    """The float64 value of each input."""
    if elem == "f16":
        return bits.view(np.float16).astype(np.float64)
    if elem == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if elem == "tf32":
        return bits.view(np.float32).astype(np.float64)
    if elem == "s8":
        return bits.view(np.int8).astype(np.float64)
    if elem == "u8":
        return bits.astype(np.float64)
    eb, mb, bias = (4, 3, 7) if elem == "e4m3" else (5, 2, 15)
    b = bits.astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> mb) & ((1 << eb) - 1)
    man = (b & ((1 << mb) - 1)).astype(np.float64)
    normal = (1 + man / (1 << mb)) * np.exp2(exp - bias)
    sub = man * 2.0 ** (1 - bias - mb)
    return sign * np.where(exp == 0, sub, normal)


def a_fragments(f: Form, a: np.ndarray) -> np.ndarray:
    """The per-thread A registers (128 x 4 u32) of the mma.sync-style A layout
    repeated per warp: registers 0/2 rows g, 1/3 rows g+8; 2/3 the upper K half."""
    e = BYTES[f.a_type]
    per = 4 // e
    out = np.zeros((128, 4), np.uint32)
    for tid in range(128):
        w, lane = divmod(tid, 32)
        g, t = divmod(lane, 4)
        for r in range(4):
            row = 16 * w + g + 8 * (r % 2)
            for j in range(per):
                col = (f.k // 2) * (r // 2) + t * per + j
                out[tid, r] |= np.uint32(int(a[row, col]) << (8 * e * j))
    return out


def d_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of D for accumulator element i of thread tid, shape (128, n/2)."""
    tid = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    row = 16 * w + g + 8 * ((i % 4) // 2)
    col = 8 * (i // 4) + 2 * t + i % 2
    return row, col


def build(f: Form) -> hir.Module:
    """One warpgroup: copy the image into shared memory (1024-aligned), then
    D = A.B (scale_d 0) and D = D + A.B when the runtime flag `again` is set;
    every accumulator lane stored to out[tid, i]."""
    acc_t, _ = ACC[f.acc]
    mixed = f.b != f.a_type and f.a_type in ("s8", "u8")
    m = hir.Module(
        f"wgmma_{f.a_type}_{f.n}", targets=["sm_90a"], ptx_version="8.4" if mixed else None
    )
    params = [
        hir.ptr("global", hir.u32),
        hir.ptr("global", hir.vec(hir.u32, 4)),
        hir.ptr("global", acc_t),
        hir.bool_,
    ]
    with m.kernel("k", params, max_threads=128, shared_bytes=SMEM) as b:
        img, afrag, out, again = b.params
        raw = b.dyn_shared(hir.u8)
        # Align to 1024 bytes (the 128B swizzle repeats every 1024): the
        # descriptor's address field is the shared address / 16.
        here = b.cast(b.wgmma_desc(raw, leading_byte_offset=0, stride_byte_offset=0), hir.u32)
        pad = b.mul(b.and_(b.sub(64, b.and_(here, 63)), 63), 16)
        base = b.ptr_cast(b.ptr_add(raw, pad), hir.ptr("shared", hir.u32))
        tid = b.thread_idx()
        with b.for_range(tid, IMAGE // 4, 128) as i:
            b.store(b.ptr_add(base, i), b.load(b.ptr_add(img, i)))
        b.fence_proxy_async()
        b.barrier()
        lbo, sbo = lbo_sbo(f)
        sa = b.ptr_cast(base, hir.ptr("shared", hir.u8))
        da = b.wgmma_desc(sa, leading_byte_offset=lbo, stride_byte_offset=sbo, swizzle=f.swizzle)
        db = b.wgmma_desc(
            b.ptr_add(sa, B_AT),
            leading_byte_offset=lbo,
            stride_byte_offset=sbo,
            swizzle=f.swizzle,
        )
        a = b.load(b.ptr_add(afrag, tid)) if f.a_regs else da
        kw = dict(n=f.n, a_type=f.a_type, b_type=f.b_type, trans_a=f.trans and not f.a_regs)
        b.wgmma_fence()
        d = b.wgmma(b.wgmma_zero(f.n, dtype=acc_t), a, db, scale_d=0, trans_b=f.trans, **kw)
        d = b.wgmma(d, a, db, scale_d=again, trans_b=f.trans, **kw)
        b.wgmma_commit_group()
        b.wgmma_wait_group(0)
        row = b.mul(tid, f.n // 2)
        for i in range(f.n // 2):
            b.store(b.ptr_add(out, b.add(row, i)), b.extract(d, i))
    return m


def inputs(f: Form) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A bits, B bits, the shared-memory image as u32 words, A fragments)."""
    a = random_bits(f.a_type, (64, f.k))
    bb = random_bits(f.b, (f.n, f.k))
    img = np.zeros(IMAGE, np.uint8)
    e = BYTES[f.a_type]
    for start, mat in ((0, a), (B_AT, bb)):
        at = start + offsets(f, mat.shape[0])
        raw = np.ascontiguousarray(mat).view(np.uint8).reshape(mat.shape[0], f.k, e)
        for j in range(e):
            img[at + j] = raw[:, :, j]
    return a, bb, img.view(np.uint32), a_fragments(f, a)


def expected(f: Form, a: np.ndarray, bb: np.ndarray, again: bool) -> np.ndarray:
    """D per thread and element as docs/semantics.md defines it: c + the
    products summed in float64 in k order, rounded once per wgmma."""
    row, col = d_index(f.n)
    av, bv = values(f.a_type, a)[row], values(f.b, bb)[col]  # (128, n/2, K)

    def ksum(c: np.ndarray) -> np.ndarray:
        s = c.astype(np.float64)
        for k in range(f.k):
            s = s + av[..., k] * bv[..., k]
        return s

    _, np_t = ACC[f.acc]
    zero = np.zeros(row.shape, np.float64)
    if f.acc == "i32":
        s = ksum(zero).astype(np.int64) * (2 if again else 1)
        return (s & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    d = ksum(zero).astype(np_t)
    if again:
        d = ksum(d).astype(np_t)
    return d


def run_interp(f: Form, again: bool) -> tuple[np.ndarray, np.ndarray]:
    a, bb, img, frag = inputs(f)
    _, np_t = ACC[f.acc]
    out = np.full((128, f.n // 2), 77, np_t)
    interp.launch(build(f), "k", 1, 128, img, frag, out, again, shared_bytes=SMEM)
    return out, expected(f, a, bb, again)


@pytest.mark.parametrize("swizzle", ["128B", "64B", "32B", "none"])
def test_tile_product_through_each_swizzle(swizzle: str) -> None:
    f = Form("bf16", "f32", 64, swizzle)
    for again in (False, True):
        got, want = run_interp(f, again)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "form",
    [
        Form("f16", "f32", 256),
        Form("f16", "f16", 40, "64B"),
        Form("bf16", "f32", 128, "none", trans=True),
        Form("f16", "f32", 64, "128B", trans=True),
        Form("f16", "f32", 32, "32B", trans=True),
        Form("tf32", "f32", 24),
        Form("e4m3", "f32", 64),
        Form("e4m3", "f16", 16, b_type="e5m2"),
        Form("s8", "i32", 48),
        Form("u8", "i32", 32, "none", b_type="s8"),
        Form("bf16", "f32", 64, a_regs=True),
        Form("tf32", "f32", 32, "none", a_regs=True),
        Form("s8", "i32", 16, a_regs=True),
    ],
    ids=str,
)
def test_every_family_on_the_interpreter(form: Form) -> None:
    got, want = run_interp(form, True)
    np.testing.assert_array_equal(got, want)


def test_wrong_descriptor_gives_wrong_numbers() -> None:
    """An image laid out for 128B read through a 64B descriptor: other bytes."""
    f = Form("bf16", "f32", 64, "128B")
    a, bb, img, frag = inputs(f)
    out = np.full((128, 32), 77, np.float32)
    interp.launch(build(replace(f, swizzle="64B")), "k", 1, 128, img, frag, out, False,
                  shared_bytes=SMEM)  # fmt: skip
    assert np.mean(out != expected(f, a, bb, False)) > 0.5


def _kernel(build_body: object, targets: list[str] | None = None) -> hir.Module:
    m = hir.Module("bad", targets=targets or ["sm_90a"])
    with m.kernel("k", [hir.ptr("global", hir.u32)], max_threads=128) as b:
        build_body(b)  # type: ignore[operator]
    return m


def _mma(b: hir.FunctionBuilder, n: int = 64, acc_lanes: int | None = None, **kw: object) -> None:
    sm = b.shared_alloc(hir.u8, 4096)
    d = b.wgmma_desc(sm, leading_byte_offset=16, stride_byte_offset=1024)
    acc = b.wgmma_zero(acc_lanes or n, dtype=kw.pop("dtype", hir.f32))
    b.wgmma(acc, kw.pop("a", d), kw.pop("b_desc", d), n=n, **kw)  # type: ignore[arg-type]


def test_bad_input_is_typed() -> None:
    with pytest.raises(zyntax.VerifyError, match=r"wgmma needs sm_90a"):
        _kernel(_mma, ["sm_90"]).verify()
    with pytest.raises(zyntax.VerifyError, match=r"the accumulator must be vec<f32, 32>"):
        _kernel(lambda b: _mma(b, 64, acc_lanes=32)).verify()
    with pytest.raises(zyntax.VerifyError, match=r"accumulator must be vec<f32, 32>, got vec<i32"):
        _kernel(lambda b: _mma(b, 64, dtype=hir.i32)).verify()
    with pytest.raises(zyntax.VerifyError, match=r"N = 36 is not a wgmma shape"):
        _kernel(lambda b: _mma(b, 36, acc_lanes=40)).verify()
    with pytest.raises(zyntax.VerifyError, match=r"N = 40 is not a wgmma shape for s8"):
        _kernel(lambda b: _mma(b, 40, a_type="s8", dtype=hir.i32)).verify()

    def non_u64(b: hir.FunctionBuilder) -> None:
        _mma(b, 64, b_desc=b.const(0, hir.u32))

    with pytest.raises(zyntax.VerifyError, match=r"B must be a u64 shared-memory descriptor"):
        _kernel(non_u64).verify()
    with pytest.raises(zyntax.VerifyError, match=r"transposed .* f16/bf16 only"):
        _kernel(lambda b: _mma(b, 64, a_type="tf32", trans_b=True)).verify()
    with pytest.raises(zyntax.BuildError, match=r"scale_a must be 1 or -1"):
        _kernel(lambda b: _mma(b, 64, scale_a=2))
    with pytest.raises(zyntax.BuildError, match=r"unknown swizzle '16B'"):
        _kernel(lambda b: b.wgmma_desc(b.shared_alloc(hir.u8, 16), leading_byte_offset=0,
                                        stride_byte_offset=0, swizzle="16B"))  # fmt: skip
    with pytest.raises(zyntax.VerifyError, match=r"wgmma.desc.128B needs a pointer to shared"):
        _kernel(lambda b: b.wgmma_desc(b.params[0], leading_byte_offset=0,
                                        stride_byte_offset=0)).verify()  # fmt: skip
    for count in (20, 100, 264):
        with pytest.raises(zyntax.VerifyError, match=r"multiple of 8 in 24..256, got"):
            _kernel(lambda b, c=count: b.setmaxnreg(c, increase=True)).verify()
    with pytest.raises(zyntax.ArgumentError):
        _kernel(lambda b: b.setmaxnreg(-8, increase=False))
    with pytest.raises(zyntax.VerifyError, match=r"setmaxnreg needs sm_90a"):
        _kernel(lambda b: b.setmaxnreg(232, increase=True), ["sm_90"]).verify()
    with pytest.raises(zyntax.VerifyError, match=r"elect.sync needs sm_90"):
        _kernel(lambda b: b.elect_sync(), ["sm_80"]).verify()


def test_zir_round_trip_and_elect() -> None:
    f = Form("bf16", "f32", 64, trans=True)
    m = build(f)
    text = m.to_zir()
    for mn in ("wgmma.desc.128B", "wgmma.m64n64.bf16.bf16.trans_a.trans_b", "wgmma.zero",
               "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group.0"):  # fmt: skip
        assert mn in text, mn
    assert hir.parse_zir(text) == m
    e = hir.Module("elect", targets=["sm_90a"])
    with e.kernel("k", [hir.ptr("global", hir.u32)], max_threads=96) as b:
        t = b.thread_idx()
        b.setmaxnreg(232, increase=True)
        with b.if_(b.lt(t, 64)):
            one = b.elect_sync()
            b.store(b.ptr_add(b.params[0], t), b.cast(one, hir.u32))
    out = np.full(96, 9, np.uint32)
    interp.launch(e, "k", 1, 96, out)
    want = np.zeros(96, np.uint32)
    want[[0, 32]] = 1
    want[64:] = 9
    np.testing.assert_array_equal(out, want)


def test_lang_primitives_on_the_interpreter() -> None:
    """The same primitives from ``@zyntax.kernel`` (zyntax.lang): an N = 8 bf16
    tile through 128B-swizzled descriptors, then elect_sync."""

    @zyntax.kernel(max_threads=128)
    def tile(img: zl.Array[zl.u32], out: zl.Array[zl.f32], who: zl.Array[zl.u32]) -> None:
        sm = zl.shared.array(IMAGE // 4, zl.u32)
        t = zl.thread_idx.x
        for i in range(t, IMAGE // 4, 128):
            sm[i] = img[i]
        zl.fence_proxy_async()
        zl.syncthreads()
        da = zl.wgmma_desc(sm, 0, leading_byte_offset=16, stride_byte_offset=1024)
        db = zl.wgmma_desc(sm, B_AT // 4, leading_byte_offset=16, stride_byte_offset=1024)
        acc = zl.wgmma_zero(8)
        zl.wgmma_fence()
        acc = zl.wgmma(acc, da, db, n=8, a_type="bf16", scale_d=False)
        zl.wgmma_commit_group()
        zl.wgmma_wait_group(0)
        out[t * 4] = zl.wgmma_acc(acc, 0)
        out[t * 4 + 1] = zl.wgmma_acc(acc, 1)
        out[t * 4 + 2] = zl.wgmma_acc(acc, 2)
        out[t * 4 + 3] = zl.wgmma_acc(acc, 3)
        if zl.elect_sync():
            who[t // 32] = t

    f = Form("bf16", "f32", 8)
    a, bb, img, _ = inputs(f)
    out = np.full(128 * 4, 77, np.float32)
    who = np.full(4, 9, np.uint32)
    interp.launch(tile, 1, 128, img, out, who)
    np.testing.assert_array_equal(out.reshape(128, 4), expected(f, a, bb, False))
    np.testing.assert_array_equal(who, [0, 32, 64, 96])
