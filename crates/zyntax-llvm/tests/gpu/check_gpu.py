"""Run the PTX of `examples/gpu_kernels.rs` on a real GPU and compare with numpy.

A semantic check of the NVPTX lowering that ptxas cannot give: shuffle
operands, scoped atomics, votes and matches, WMMA fragment layouts, cp.async,
the integer / cast / math semantics documented in docs/lowering.md.

Usage (on a machine with an NVIDIA GPU and CuPy):
    python3 check_gpu.py gpu_check.ptx [results.json]
Exit status 0 iff every check passes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import cupy as cp
import numpy as np

RNG = np.random.default_rng(1234)
I32_MIN = -(2**31)


def shfl(mod: cp.RawModule) -> None:
    k = mod.get_function("shfl")
    n = 64
    v = RNG.integers(1, 2**32 - 1, n, dtype=np.uint32)
    d = RNG.standard_normal(n)
    outs = [cp.zeros(n, cp.uint32) for _ in range(4)]
    od = cp.zeros(n, cp.float64)
    k((1,), (n,), (cp.asarray(v), cp.asarray(d), *outs, od))
    lanes = np.arange(n)
    base = (lanes // 32) * 32
    ln = lanes % 32
    exp_idx = v[base + (ln & ~7) + 3]
    exp_up = np.where((ln & 15) < 1, v, v[np.maximum(lanes - 1, 0)])
    exp_down = np.where(ln + 2 >= 32, v, v[np.minimum(lanes + 2, n - 1)])
    exp_xor = v[base + (ln ^ 5)]
    exp_d = np.where(ln + 1 >= 32, d, d[np.minimum(lanes + 1, n - 1)])
    for name, got, exp in [
        ("idx/8", outs[0], exp_idx),
        ("up/16", outs[1], exp_up),
        ("down/32", outs[2], exp_down),
        ("xor/32", outs[3], exp_xor),
        ("down f64", od, exp_d),
    ]:
        np.testing.assert_array_equal(cp.asnumpy(got), exp, err_msg=name)


def atomics(mod: cp.RawModule) -> None:
    k = mod.get_function("atomics")
    blocks, threads = 4, 256
    n = blocks * threads
    cnt = cp.zeros(8, cp.uint32)
    fsum = cp.zeros(1, cp.float32)
    mx = cp.full(1, -(10**6), cp.int32)
    init = np.where(np.arange(n) % 2 == 0, np.arange(n), 0).astype(np.uint64)
    slots = cp.asarray(init)
    olds = cp.zeros(n, cp.uint64)
    shout = cp.zeros(1, cp.uint32)
    k((blocks,), (threads,), (cnt, fsum, mx, slots, olds, shout))
    c = cp.asnumpy(cnt)
    assert c[0] == n and c[1] == n and c[2] == n, c
    assert c[3] == n % 1001, ("inc wraps at 1000", c[3])
    assert c[4] == (-2 * n) % 2**32, ("sub", c[4])
    assert c[5] == 0xFFFFFFFF, ("or", hex(c[5]))
    assert float(fsum[0]) == 0.5 * n, fsum
    i = np.arange(n, dtype=np.int64)
    assert int(mx[0]) == int(((i * 37) % 1001 - 500).max()), mx
    expect_slots = np.where(init == np.arange(n), 2 * np.arange(n), init).astype(np.uint64)
    np.testing.assert_array_equal(cp.asnumpy(slots), expect_slots, err_msg="cas slots")
    np.testing.assert_array_equal(cp.asnumpy(olds), init, err_msg="cas old values")
    assert int(shout[0]) == n, shout


def vote(mod: cp.RawModule) -> None:
    k = mod.get_function("vote")
    n = 128
    v = RNG.integers(97, 104, n, dtype=np.uint32)
    v[32:64] = 150  # one warp where everything agrees
    outs = [cp.zeros(n, cp.uint32) for _ in range(6)]
    k((1,), (n,), (cp.asarray(v), *outs))
    got = [cp.asnumpy(o) for o in outs]
    for w in range(n // 32):
        seg = v[w * 32 : (w + 1) * 32]
        pred = seg > 100
        ballot = sum(1 << j for j in range(32) if pred[j])
        for j in range(32):
            t = w * 32 + j
            assert got[0][t] == ballot, ("ballot", w, j)
            assert got[1][t] == int(pred.any()), ("any", w, j)
            assert got[2][t] == int(pred.all()), ("all", w, j)
            m_any = sum(1 << q for q in range(32) if seg[q] == seg[j])
            assert got[3][t] == m_any, ("match.any", w, j)
            same = bool((seg == seg[0]).all())
            assert got[4][t] == (0xFFFFFFFF if same else 0), ("match.all mask", w, j)
            assert got[5][t] == int(same), ("match.all pred", w, j)


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round f32 to bf16 (nearest even); returns the 16-bit patterns."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    lsb = (b >> 16) & 1
    r = ((b + 0x7FFF + lsb) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def wmma_case(
    mod: cp.RawModule, name: str, m: int, n: int, kk: int, bf16: bool, acc16: bool
) -> None:
    k = mod.get_function(name)
    a = RNG.uniform(-1, 1, (m, kk)).astype(np.float32)
    b = RNG.uniform(-1, 1, (kk, n)).astype(np.float32)
    c = RNG.uniform(-1, 1, (m, n)).astype(np.float32)
    if bf16:
        a_bits, b_bits = to_bf16_bits(a), to_bf16_bits(np.ascontiguousarray(b.T))
        a_dev, b_dev = cp.asarray(a_bits), cp.asarray(b_bits)
        a_f, b_f = bf16_to_f32(a_bits), bf16_to_f32(b_bits).T
    else:
        a16, bt16 = a.astype(np.float16), np.ascontiguousarray(b.T).astype(np.float16)
        a_dev, b_dev = cp.asarray(a16), cp.asarray(bt16)
        a_f, b_f = a16.astype(np.float32), bt16.astype(np.float32).T
    cdt = np.float16 if acc16 else np.float32
    c_host = c.astype(cdt)
    d = cp.zeros((m, n), cdt)
    k((1,), (32,), (a_dev, b_dev, cp.asarray(c_host), d))
    expect = a_f @ b_f + c_host.astype(np.float32)
    tol = 2e-2 if acc16 else 1e-4
    np.testing.assert_allclose(
        cp.asnumpy(d).astype(np.float32), expect, rtol=tol, atol=tol, err_msg=name
    )


def wmma(mod: cp.RawModule) -> None:
    wmma_case(mod, "wmma_f16_f32", 16, 16, 16, False, False)
    wmma_case(mod, "wmma_f16_f16", 16, 16, 16, False, True)
    wmma_case(mod, "wmma_f16_m32n8k16", 32, 8, 16, False, False)
    wmma_case(mod, "wmma_bf16_f32", 16, 16, 16, True, False)
    wmma_case(mod, "wmma_bf16_m8n32k16", 8, 32, 16, True, False)


def cp_async(mod: cp.RawModule) -> None:
    k = mod.get_function("cp_async")
    src = cp.arange(1024, dtype=cp.uint32) * 3 + 7
    dst = cp.zeros(1024, cp.uint32)
    k((1,), (256,), (src, dst))
    np.testing.assert_array_equal(cp.asnumpy(dst), cp.asnumpy(src)[::-1])


def intops(mod: cp.RawModule) -> None:
    k = mod.get_function("intops")
    n = 512
    a = RNG.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    b = RNG.integers(-1000, 1000, n, dtype=np.int64).astype(np.int32)
    b[b == 0] = 7
    a[:4] = I32_MIN
    b[:4] = -1
    a[4:8] = [7, -7, 7, -7]
    b[4:8] = [2, 2, -2, -2]
    s = RNG.integers(0, 40, n, dtype=np.int64).astype(np.uint32)
    outs = (
        [cp.zeros(n, cp.int32) for _ in range(4)]
        + [cp.zeros(n, cp.uint32)]
        + [cp.zeros(n, cp.int32) for _ in range(2)]
    )
    k((n // 128,), (128,), (cp.asarray(a), cp.asarray(b), cp.asarray(s), *outs))
    got = [cp.asnumpy(o) for o in outs]

    def wrap32(x: int) -> int:
        return ((x + 2**31) % 2**32) - 2**31

    for i in range(n):
        x, y, sh = int(a[i]), int(b[i]), int(s[i])
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        r = x - q * y
        exp = [
            wrap32(q),
            wrap32(r),
            0 if sh >= 32 else wrap32(x << sh),
            (x >> 31) if sh >= 32 else (x >> sh),
            0 if sh >= 32 else ((x % 2**32) >> sh),
            min(x, y),
            max(x, y),
        ]
        for j, e in enumerate(exp):
            assert int(got[j][i]) == e, (
                ["div", "rem", "shl", "shr", "ushr", "min", "max"][j],
                x,
                y,
                sh,
                int(got[j][i]),
                e,
            )


def casts(mod: cp.RawModule) -> None:
    k = mod.get_function("casts")
    special = [
        np.nan,
        np.inf,
        -np.inf,
        3e9,
        -3e9,
        1.5,
        -1.5,
        255.7,
        300.0,
        -5.0,
        131008.0,
        1e-8,
        0.1,
        2.5,
    ]
    x = np.concatenate(
        [
            np.array(special, np.float32),
            RNG.uniform(-1e5, 1e5, 128 - len(special)).astype(np.float32),
        ]
    )
    n = len(x)
    o_i32, o_u8 = cp.zeros(n, cp.int32), cp.zeros(n, cp.uint8)
    o_f16, o_lf, o_bf = cp.zeros(n, cp.float16), cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
    k((1,), (n,), (cp.asarray(x), o_i32, o_u8, o_f16, o_lf, o_bf))
    with np.errstate(invalid="ignore", over="ignore"):
        t = np.trunc(x.astype(np.float64))
        e_i32 = np.where(np.isnan(x), 0, np.clip(t, -(2**31), 2**31 - 1)).astype(np.int64)
        e_u8 = np.where(np.isnan(x), 0, np.clip(t, 0, 255)).astype(np.int64)
        e_f16 = x.astype(np.float16)
    np.testing.assert_array_equal(
        cp.asnumpy(o_i32).astype(np.int64), e_i32, err_msg="f32->i32 saturating"
    )
    np.testing.assert_array_equal(
        cp.asnumpy(o_u8).astype(np.int64), e_u8, err_msg="f32->u8 saturating"
    )
    np.testing.assert_array_equal(cp.asnumpy(o_f16), e_f16, err_msg="f32->f16")
    np.testing.assert_array_equal(
        cp.asnumpy(o_lf), e_i32.astype(np.float32), err_msg="i32->i64->f32"
    )
    e_bf = bf16_to_f32(to_bf16_bits(e_f16.astype(np.float32)))
    np.testing.assert_array_equal(cp.asnumpy(o_bf), e_bf, err_msg="f16->bf16->f32")


def math(mod: cp.RawModule) -> None:
    k = mod.get_function("math")
    n = 256
    x = RNG.uniform(-5, 5, n).astype(np.float32)
    y = RNG.uniform(-3, 3, n)
    outs32 = [cp.zeros(n, cp.float32) for _ in range(7)]
    s64, e64, ab = cp.zeros(n, cp.float64), cp.zeros(n, cp.float64), cp.zeros(n, cp.float32)
    k((2,), (128,), (cp.asarray(x), cp.asarray(y), *outs32, s64, e64, ab))
    xd = x.astype(np.float64)
    pos = np.abs(xd) + 1
    checks = [
        ("exp", np.exp(xd), 2e-5, 0),
        ("log", np.log(pos), 1e-5, 1e-5),
        ("sin", np.sin(xd), 0, 2e-5),
        ("cos", np.cos(xd), 0, 2e-5),
        ("tanh", np.tanh(xd), 0, 2e-5),
        ("rsqrt", 1 / np.sqrt(pos), 2e-5, 0),
        ("sqrt", np.sqrt(pos.astype(np.float32)), 1e-7, 0),
    ]
    for (name, exp, rtol, atol), got in zip(checks, outs32, strict=True):
        np.testing.assert_allclose(cp.asnumpy(got), exp, rtol=rtol, atol=atol, err_msg=name)
    np.testing.assert_allclose(cp.asnumpy(s64), np.sqrt(np.abs(y)), rtol=1e-15, err_msg="sqrt f64")
    np.testing.assert_allclose(
        cp.asnumpy(e64), np.exp(y), rtol=2e-5, err_msg="exp f64 (f32 precision)"
    )
    np.testing.assert_array_equal(cp.asnumpy(ab), np.abs(x), err_msg="abs")


def saxpy(mod: cp.RawModule) -> None:
    k = mod.get_function("saxpy")
    n = 1000
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    out = cp.zeros(n + 24, cp.float32)
    k(
        ((n + 127) // 128,),
        (128,),
        (np.float32(2.5), cp.asarray(x), cp.asarray(y), out, np.uint32(n)),
    )
    got = cp.asnumpy(out)
    np.testing.assert_allclose(got[:n], 2.5 * x + y, rtol=1e-6, atol=1e-6)
    assert not got[n:].any(), "wrote past n"


def dyn_rev(mod: cp.RawModule) -> None:
    k = mod.get_function("dyn_rev")
    blocks, t = 4, 128
    src = RNG.standard_normal(blocks * t).astype(np.float32)
    dst, sums = cp.zeros_like(cp.asarray(src)), cp.zeros(blocks * t, cp.float32)
    k((blocks,), (t,), (cp.asarray(src), dst, sums), shared_mem=t * 4)
    s = src.reshape(blocks, t)
    np.testing.assert_array_equal(cp.asnumpy(dst).reshape(blocks, t), s[:, ::-1])
    np.testing.assert_allclose(
        cp.asnumpy(sums).reshape(blocks, t),
        np.cumsum(s, axis=1, dtype=np.float32),
        rtol=1e-5,
        atol=1e-5,
    )


CHECKS: list[tuple[str, Callable[[cp.RawModule], None]]] = [
    ("saxpy", saxpy),
    ("shfl", shfl),
    ("atomics", atomics),
    ("vote_match", vote),
    ("wmma", wmma),
    ("cp_async", cp_async),
    ("intops", intops),
    ("casts", casts),
    ("math", math),
    ("dyn_shared_loop", dyn_rev),
]


def main() -> int:
    ptx_path = sys.argv[1]
    mod = cp.RawModule(path=ptx_path)
    results = {}
    for name, fn in CHECKS:
        try:
            fn(mod)
            cp.cuda.Device().synchronize()
            results[name] = "ok"
        except Exception as e:  # report every failure, keep going
            results[name] = f"FAIL: {type(e).__name__}: {e}"
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {"device": dev, "ptx": ptx_path, "results": results}
    print(json.dumps(report, indent=2))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(report, f, indent=2)
    return 0 if all(v == "ok" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
