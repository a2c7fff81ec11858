"""Warp MMA on the device (issue 12 items 1-2): ``mma.sync`` for every input
type, ``ldmatrix``/``stmatrix`` and the swizzled GEMM example, each run on the
GPU and in the interpreter on the same fresh random register contents and
compared. Skipped without an NVIDIA GPU (conftest marks tests/python/gpu)."""

from __future__ import annotations

import numpy as np
import pytest

from zyntax import cuda, hir, interp

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()

# (elem, accumulator, min sm) for every mma.sync form.
FORMS = [
    ("f16", "f32", 80),
    ("f16", "f16", 80),
    ("bf16", "f32", 80),
    ("tf32", "f32", 80),
    ("s8", "i32", 80),
    ("u8", "i32", 80),
    ("e4m3", "f32", 89),
    ("e5m2", "f32", 89),
    ("f64", "f64", 80),
]
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "f64": np.float64}


def sm() -> int:
    return int(cuda.device_arch()[3:5])


def frag_types(elem: str, acc: str) -> tuple[hir.Type, hir.Type, hir.Type]:
    if elem == "f64":
        return hir.f64, hir.f64, hir.vec(hir.f64, 2)
    return hir.vec(hir.u32, 4), hir.vec(hir.u32, 2), hir.vec(getattr(hir, acc), 4)


def mma_module(elem: str, acc: str) -> hir.Module:
    ta, tb, tc = frag_types(elem, acc)
    m = hir.Module(f"mma_{elem}_{acc}", ptx_version="8.4" if elem.startswith("e") else None)
    params = [hir.ptr("global", t) for t in (ta, tb, tc, tc)]
    with m.kernel("k", params, max_threads=32) as b:
        pa, pb, pc, pd = b.params
        lane = b.thread_idx()
        x, y, z = (b.load(b.ptr_add(p, lane)) for p in (pa, pb, pc))
        b.store(b.ptr_add(pd, lane), b.mma_sync(x, y, z, elem=elem))
    return m


def random_inputs(elem: str, n: int) -> np.ndarray:
    """n input elements' bits, finite and of moderate size."""
    if elem in ("f16", "bf16"):
        v = rng.standard_normal(n).astype(np.float32)
        bits = v.view(np.uint32)
        if elem == "f16":
            return v.astype(np.float16).view(np.uint16)
        return (bits >> 16).astype(np.uint16)  # bf16: the high half of f32
    if elem == "tf32":
        # Values exact in tf32 (the low 13 mantissa bits clear).
        return rng.standard_normal(n).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    if elem in ("s8", "u8"):
        return rng.integers(0, 256, n, dtype=np.uint8)
    if elem in ("e4m3", "e5m2"):
        b = rng.integers(0, 256, n, dtype=np.uint8)
        nan = (b & 0x7F) == 0x7F if elem == "e4m3" else ((b >> 2) & 31) == 31
        b[nan] = 0x38  # 1.0 in e4m3 (0.5 in e5m2): finite
        return b
    return rng.standard_normal(n).view(np.uint64)


def pack(bits: np.ndarray, nbytes: int) -> np.ndarray:
    """32 lanes' fragments of `nbytes` each as raw bytes."""
    raw = np.ascontiguousarray(bits).view(np.uint8)
    assert raw.size == 32 * nbytes
    return raw.copy()


@pytest.mark.parametrize("elem,acc,min_sm", FORMS, ids=[f"{e}-{a}" for e, a, _ in FORMS])
def test_mma_sync_matches_interpreter(elem: str, acc: str, min_sm: int) -> None:
    if sm() < min_sm:
        pytest.skip(f"mma.sync on {elem} needs sm_{min_sm}")
    m = mma_module(elem, acc)
    k = cuda.load_hir(m).kernel("k")
    for _ in range(3):
        if elem == "f64":
            a, b = random_inputs(elem, 32), random_inputs(elem, 32)
            a_np, b_np = a.view(np.float64), b.view(np.float64)
        else:
            per_reg = {"f16": 2, "bf16": 2, "tf32": 1}.get(elem, 4)
            a = random_inputs(elem, 32 * 4 * per_reg)
            b = random_inputs(elem, 32 * 2 * per_reg)
            a_np = pack(a, 16).view(np.uint32)
            b_np = pack(b, 8).view(np.uint32)
        nc = 2 if elem == "f64" else 4
        if acc == "i32":
            c = rng.integers(-(2**31), 2**31, 32 * nc, dtype=np.int64).astype(np.int32)
        else:
            c = rng.standard_normal(32 * nc).astype(NP[acc])
        d_gpu = np.full_like(c, 7)
        d_cpu = np.full_like(c, 7)
        interp.launch(m, "k", 1, 32, a_np, b_np, c, d_cpu)
        da, db, dc, dd = (cuda.to_device(x) for x in (a_np, b_np, c, d_gpu))
        k.launch(1, 32, da, db, dc, dd)
        got = dd.to_host()
        if acc == "i32":
            np.testing.assert_array_equal(got, d_cpu)
            continue
        # Tensor cores accumulate with a little error of their own (the
        # interpreter rounds once); bound it by the result's scale.
        scale = float(np.max(np.abs(d_cpu.astype(np.float64)))) + 1.0
        tol = {"f32": 2e-6, "f16": 2e-3, "f64": 1e-14}[acc] * scale
        np.testing.assert_allclose(got.astype(np.float64), d_cpu.astype(np.float64), atol=tol)


def ldst_module(num: int, trans: bool, store: bool) -> hir.Module:
    regs = hir.u32 if num == 1 else hir.vec(hir.u32, num)
    m = hir.Module(f"ldmatrix_x{num}")
    with m.kernel(
        "k", [hir.ptr("global", hir.u16), hir.ptr("global", regs), hir.ptr("global", hir.u16)]
    ) as b:
        src, out, back = b.params
        sh = b.shared_alloc(hir.u16, 256)
        sh2 = b.shared_alloc(hir.u16, 256)
        lane = b.thread_idx()
        for j in range(8):
            e = lane * 8 + j
            b.store(b.ptr_add(sh, e), b.load(b.ptr_add(src, e)))
            b.store(b.ptr_add(sh2, e), b.const(0, hir.u16))
        b.barrier()
        v = b.ldmatrix(b.ptr_add(sh, lane * 8), num, trans=trans)
        b.store(b.ptr_add(out, lane), v)
        if store:
            b.stmatrix(b.ptr_add(sh2, lane * 8), v, trans=trans)
            b.barrier()
            for j in range(8):
                e = lane * 8 + j
                b.store(b.ptr_add(back, e), b.load(b.ptr_add(sh2, e)))
    return m


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_and_stmatrix_match_interpreter(num: int, trans: bool) -> None:
    store = sm() >= 90
    m = ldst_module(num, trans, store)
    k = cuda.load_hir(m).kernel("k")
    src = rng.integers(0, 1 << 16, 256, dtype=np.uint16)
    outs = []
    for run in ("cpu", "gpu"):
        out = np.full(32 * num, 0xDEADBEEF, np.uint32)
        back = np.full(256, 0xBEEF, np.uint16)
        if run == "cpu":
            interp.launch(m, "k", 1, 32, src, out, back)
        else:
            dout, dback = cuda.to_device(out), cuda.to_device(back)
            k.launch(1, 32, cuda.to_device(src), dout, dback)
            out, back = dout.to_host(), dback.to_host()
        outs.append((out, back))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    if store:
        np.testing.assert_array_equal(outs[1][1], outs[0][1])
        np.testing.assert_array_equal(outs[1][1][: num * 64], src[: num * 64])


@pytest.mark.parametrize("mnk", [(16, 8, 32), (64, 64, 128), (256, 128, 512)])
def test_mma_sync_gemm_example(mnk: tuple[int, int, int]) -> None:
    import mma_sync_gemm  # examples/mma_sync_gemm.py

    mm, nn, kk = mnk
    m = mma_sync_gemm.build()
    k = cuda.load_hir(m).kernel("mma_sync_gemm")
    a = rng.uniform(-1, 1, (mm, kk)).astype(np.float16)
    bt = rng.uniform(-1, 1, (nn, kk)).astype(np.float16)
    c = rng.standard_normal((mm, nn)).astype(np.float32)
    d = cuda.to_device(np.full((mm, nn), np.nan, np.float32))
    k.launch(
        (nn // 8, mm // 16), 32, cuda.to_device(a), cuda.to_device(bt), cuda.to_device(c), d, nn, kk
    )
    ref = a.astype(np.float64) @ bt.astype(np.float64).T + c
    got = d.to_host()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.sqrt(kk))
    if mm * nn * kk <= 64 * 64 * 128:
        d_cpu = np.full((mm, nn), np.nan, np.float32)
        interp.launch(m, "mma_sync_gemm", (nn // 8, mm // 16), 32, a, bt, c, d_cpu, nn, kk)
        np.testing.assert_allclose(got, d_cpu, rtol=1e-5, atol=1e-5 * np.sqrt(kk))


@pytest.mark.parametrize("op", ["ex2", "rcp", "tanh"])
def test_approx_math_within_ptx_bounds(op: str) -> None:
    m = hir.Module(f"approx_{op}")
    with m.kernel("k", [hir.ptr("global", hir.f32)]) as b:
        (p,) = b.params
        q = b.ptr_add(p, b.block_idx() * 256 + b.thread_idx())
        b.store(q, getattr(b, f"{op}_approx")(b.load(q)))
    n = 1 << 16
    x = rng.uniform(-30, 30, n).astype(np.float32)
    cpu = x.copy()
    interp.launch(m, "k", n // 256, 256, cpu)
    dx = cuda.to_device(x)
    cuda.load_hir(m).kernel("k").launch(n // 256, 256, dx)
    got = dx.to_host().astype(np.float64)
    ref = cpu.astype(np.float64)
    rel = {"ex2": 2.0**-21, "rcp": 2.0**-22, "tanh": 2.0**-10.5}[op]
    np.testing.assert_allclose(got, ref, rtol=rel, atol=1e-30 if op != "tanh" else 2.0**-10.5)


@pytest.mark.parametrize(
    "elem,lanes", [("f32", 4), ("f16", 2), ("u32", 2), ("f64", 2), ("f32", 1), ("i64", 1)]
)
@pytest.mark.parametrize("cops", [("cs", "cs"), ("lu", "wt"), ("cg", "cg"), ("cv", "wb")])
def test_cache_operator_copies_match_interpreter(
    elem: str, lanes: int, cops: tuple[str, str]
) -> None:
    st = getattr(hir, elem)
    t = st if lanes == 1 else hir.vec(st, lanes)
    m = hir.Module("cached")
    with m.kernel("k", [hir.ptr("global", t), hir.ptr("global", t)]) as b:
        src, dst = b.params
        i = b.block_idx() * 128 + b.thread_idx()
        v = b.load_cached(b.ptr_add(src, i), cops[0])
        b.store_cached(b.ptr_add(dst, i), v, cops[1])
    n = 128 * 8 * lanes
    dt = {"f32": np.float32, "f16": np.float16, "u32": np.uint32, "f64": np.float64}.get(
        elem, np.int64
    )
    x = rng.integers(0, 1 << 15, n).astype(dt)
    cpu = np.zeros_like(x)
    interp.launch(m, "k", 8, 128, x, cpu)
    dout = cuda.to_device(np.zeros_like(x))
    cuda.load_hir(m).kernel("k").launch(8, 128, cuda.to_device(x), dout)
    np.testing.assert_array_equal(dout.to_host(), cpu)
    np.testing.assert_array_equal(cpu, x)


def test_vector_copy_copies_everything() -> None:
    # Its bandwidth is measured by benches/bandwidth.py (case copy_kernel_f32x4).
    import vector_copy  # examples/vector_copy.py

    n4 = (1 << 20) + 3  # a ragged grid-stride tail
    k = cuda.load_hir(vector_copy.build()).kernel("copy_v4")
    x = rng.standard_normal(4 * n4).astype(np.float32)
    src = cuda.to_device(x)
    dst = cuda.to_device(np.full(4 * n4, np.nan, np.float32))
    k.launch(cuda.Device(0).sm_count * 8, 256, src, dst, n4)
    np.testing.assert_array_equal(dst.to_host(), x)
