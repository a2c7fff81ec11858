"""The bit ops added through the instruction table (`popc`, `clz`, `brev`,
`bfind`) and `zyntax.lang.bitcast`: the interpreter and the CPU backend agree
with numpy on fresh random inputs of every integer width, and the PTX passes
ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import _native as native
from zyntax import hir, interp, lang
from zyntax.frontend.errors import KernelTypeError

rng = np.random.default_rng()
OPS = ("popc", "clz", "brev", "bfind")
DTYPES = (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64)


def reference(op: str, x: np.ndarray) -> np.ndarray:
    """numpy's answer, computed on the unsigned bits and viewed as x's type."""
    w = x.dtype.itemsize * 8
    u = x.view(np.dtype(f"u{x.dtype.itemsize}"))
    bit_length = np.zeros(u.shape, np.int64)
    v = u.copy()
    for _ in range(w):
        bit_length += v != 0
        v = v >> 1
    if op == "popc":
        r = np.bitwise_count(u).astype(u.dtype)
    elif op == "clz":
        r = (w - bit_length).astype(u.dtype)
    elif op == "brev":
        r = np.zeros_like(u)
        for k in range(w):
            r |= ((u >> k) & 1) << (w - 1 - k)
    else:
        all_ones = np.iinfo(u.dtype).max
        r = np.where(u == 0, all_ones, bit_length - 1).astype(u.dtype)
    return r.view(x.dtype)


def random_ints(dtype: type, n: int) -> np.ndarray:
    """Random bit patterns with random leading zeros, plus 0 and all ones."""
    size = np.dtype(dtype).itemsize
    u = rng.integers(0, 256, (n, size), dtype=np.uint8).view(f"u{size}").reshape(n)
    u = u >> rng.integers(0, size * 8, n).astype(u.dtype)
    u[:2] = [0, np.iinfo(u.dtype).max]
    return u.view(dtype)


def bits_module(dtype: type) -> hir.Module:
    """Kernel `bits(x, out, n)`: out[4*i + k] = OPS[k](x[i])."""
    t = getattr(hir, zyntax.lang.dtype_of_numpy(dtype).name)  # type: ignore[union-attr]
    m = hir.Module("bits", targets=["sm_70"])
    with m.kernel("bits", [hir.ptr("global", t), hir.ptr("global", t), hir.u32]) as b:
        x, out, n = b.params
        i = b.add(b.mul(b.block_idx(), b.block_dim()), b.thread_idx())
        with b.if_(b.lt(i, n)):
            v = b.load(b.ptr_add(x, i))
            for k, op in enumerate(OPS):
                r = getattr(b, op)(v)
                b.store(b.ptr_add(out, b.add(b.mul(i, 4), k)), r)
        b.ret()
    m.verify()
    return m


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_bit_ops_match_numpy_on_interpreter_and_cpu(dtype: type) -> None:
    m = bits_module(dtype)
    n = int(rng.integers(200, 600))
    x = random_ints(dtype, n)
    want = np.stack([reference(op, x) for op in OPS], axis=1).reshape(-1)
    poison = np.full(4 * n, 0x5A, np.uint8).view(dtype) if np.dtype(dtype).itemsize == 1 else None
    for run in ("interp", "cpu"):
        out = np.empty(4 * n, dtype)
        out[:] = poison if poison is not None else np.array(0x5A5A5A5A, np.int64).astype(dtype)
        if run == "interp":
            interp.launch(m, "bits", (n + 127) // 128, 128, x, out, n)
        else:
            native.cpu_compile(m).launch("bits", (n + 127) // 128, 128, x, out, n)
        np.testing.assert_array_equal(out, want, err_msg=f"{run} {np.dtype(dtype).name}")


def test_bit_ops_reject_floats() -> None:
    m = hir.Module("bad", targets=["sm_70"])
    with m.kernel("k", [hir.f32]) as b:
        b.popc(b.params[0])
        b.ret()
    with pytest.raises(zyntax.VerifyError, match="`popc` takes an integer, got f32"):
        m.verify()


@zyntax.kernel
def lang_bits(x: zyntax.u32[1], f: zyntax.f32[1], out: zyntax.u32[1], fb: zyntax.i32[1]) -> None:
    i = lang.grid(1)
    if i < x.shape[0]:
        v = x[i]
        out[4 * i] = lang.popc(v)
        out[4 * i + 1] = lang.clz(v)
        out[4 * i + 2] = lang.brev(v)
        out[4 * i + 3] = lang.bfind(v)
        fb[i] = lang.bitcast(f[i], zyntax.i32)


def test_lang_bit_ops_and_bitcast_match_numpy() -> None:
    n = int(rng.integers(100, 400))
    x = random_ints(np.uint32, n)
    f = rng.standard_normal(n).astype(np.float32)
    out = np.full(4 * n, 0xDEADBEEF, np.uint32)
    fb = np.full(n, 0x5A5A5A5A, np.int32)
    lang_bits.run_cpu(x, f, out, fb, grid=(n + 63) // 64, block=64)
    want = np.stack([reference(op, x) for op in OPS], axis=1).reshape(-1)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(fb, f.view(np.int32))


def test_lang_bit_ops_type_errors() -> None:
    @zyntax.kernel
    def bad(f: zyntax.f32[1]) -> None:
        f[0] = lang.popc(f[0])

    with pytest.raises(KernelTypeError, match=r"popc.*takes an integer"):
        bad.run_cpu(np.zeros(1, np.float32), grid=1, block=1)

    @zyntax.kernel
    def bad_size(f: zyntax.f32[1], out: zyntax.i64[1]) -> None:
        out[0] = lang.bitcast(f[0], zyntax.i64)

    with pytest.raises(KernelTypeError, match="bitcast"):
        bad_size.run_cpu(np.zeros(1, np.float32), np.zeros(1, np.int64), grid=1, block=1)


@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
def test_lang_bit_ops_ptx_passes_ptxas(arch: str) -> None:
    sig = [zyntax.u32[1], zyntax.f32[1], zyntax.u32[1], zyntax.i32[1]]
    ptx = lang_bits.ptx(sig, arch=arch)
    for needle in ("popc.b32", "clz.b32", "brev.b32"):
        assert needle in ptx, needle
    out = zyntax.validate_ptx(ptx, arch)  # ptxas -Werror; a missing ptxas fails
    assert out.cubin[:4] == b"\x7fELF"
