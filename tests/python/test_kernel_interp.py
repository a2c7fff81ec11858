"""@zyntax.kernel on the CPU: every language feature and every example kernel runs
through the reference interpreter (zyntax.interp) and is compared with numpy on
fresh random inputs.

The tests skip only while this build has no interpreter binding; once it
exists they run (and fail loudly on any mismatch)."""

from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

import kernel_defs as kd
import zyntax
from conftest import ROOT
from zyntax import _native, lang

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="this build has no interpreter binding"
)

rng = np.random.default_rng()
F32 = np.float32


def example(name: str):  # type: ignore[no-untyped-def]
    key = f"zk_{name}"
    if key not in sys.modules:
        path = ROOT / "examples" / "kernels" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


def nonzero_ints(n: int, lo: int, hi: int) -> np.ndarray:
    x = rng.integers(lo, hi, n).astype(np.int32)
    x[x == 0] = 7
    return x


# --------------------------------------------------------------------------- language features


def test_arithmetic_division_and_device_functions() -> None:
    n = 70
    a = nonzero_ints(n, -50, 50)
    b = nonzero_ints(n, -9, 9)
    out_f = np.zeros(n, F32)
    q = np.zeros(n, np.int32)
    r = np.zeros(n, np.int32)
    kd.arith.run_cpu(a, b, out_f, q, r, grid=3, block=32)
    assert np.array_equal(q, a // b)  # Python floor division
    assert np.array_equal(r, a % b)  # sign of the divisor
    want = np.clip(a.astype(F32) / b.astype(F32), -0.5, 0.5) + (a * 2 - b).astype(F32) ** 2
    assert np.allclose(out_f, want, rtol=1e-6)


def _control_ref(v: int, i: int) -> list[int]:
    acc = sum(k for k in range(10, 0, -3) if k != 4)
    j = 0
    while True:
        j += 1
        if j * j > v or j > 50:
            break
    s = sum(range(i % 4, 9, i % 3 + 1))
    w = v if v > 10 and not v > 90 else -v
    return [acc, j, s, w, 1 if 3 < v <= 50 else 0]


def test_control_flow_loops_break_continue_ternary() -> None:
    n = 45
    x = rng.integers(0, 100, n).astype(np.int32)
    out = np.full((n + 5, 5), -999, np.int32)
    kd.control.run_cpu(x, out, n, grid=2, block=32)
    want = np.array([_control_ref(int(x[i]), i) for i in range(n)], np.int32)
    assert np.array_equal(out[:n], want)
    assert (out[n:] == -999).all()  # threads past n returned early


def test_math_functions() -> None:
    n = 40
    x = (rng.random(n) * 3 + 0.1).astype(F32)
    out = np.zeros((9, n), F32)
    kd.mathk.run_cpu(x, out, grid=2, block=32)
    want = [
        np.sqrt(x),
        1 / np.sqrt(x),
        np.exp(-x),
        np.log(x),
        np.sin(x) + np.cos(x),
        np.tanh(x - 1),
        np.floor(x * 3) + np.ceil(x * 2),
        x * x + 1,
        np.minimum(x, 0.5) + np.maximum(x, 0.3) + np.abs(x - 1),
    ]
    for row, w in zip(out, want, strict=True):
        assert np.allclose(row, w, rtol=2e-6, atol=1e-6)


def test_type_widened_accumulator() -> None:
    x = rng.random(37).astype(F32)
    out = np.zeros(1, F32)
    kd.widen.run_cpu(x, out, grid=1, block=1)
    assert np.isclose(out[0], x.sum(dtype=F32), rtol=1e-5)


def test_strided_and_2d_arrays() -> None:
    base = rng.random((9, 13)).astype(F32)
    a = base.T  # non-contiguous view
    out = np.zeros((13, 9), F32)
    kd.strided2d.run_cpu(a, out, grid=(1, 1), block=(16, 16))
    assert np.allclose(out, a * 2 + 2)


def test_short_circuit_prevents_out_of_bounds_loads() -> None:
    @zyntax.kernel
    def guarded(x, out, n):
        i = lang.grid(1)
        # x has n elements: x[i] must not be read for i >= n.
        if i < n and x[i] > 0.5:
            out[i] = 1
        elif i < n:
            out[i] = 2

    n = 20
    x = rng.random(n).astype(F32)
    out = np.zeros(32, np.int32)
    guarded.run_cpu(x, out, n, grid=1, block=32)
    assert np.array_equal(out[:n], np.where(x > 0.5, 1, 2))
    assert (out[n:] == 0).all()


def test_dynamic_shared_memory_and_3d_grid() -> None:
    @zyntax.kernel
    def rev(x, out):
        buf = lang.shared.dynamic(zyntax.f32)
        t = lang.thread_idx.x
        b = lang.block_idx.x + lang.block_idx.y * lang.grid_dim.x
        n = lang.block_dim.x
        buf[t] = x[b * n + t]
        lang.syncthreads()
        out[b * n + t] = buf[n - 1 - t]

    x = rng.random(4 * 16).astype(F32)
    out = np.zeros_like(x)
    rev.run_cpu(x, out, grid=(2, 2), block=16, shared_mem=16 * 4)
    assert np.array_equal(out, x.reshape(4, 16)[:, ::-1].ravel())


def test_scalar_argument_types_specialise() -> None:
    @zyntax.kernel
    def scale(x, out, s):
        i = lang.grid(1)
        if i < len(x):
            out[i] = x[i] * s

    x = rng.random(10).astype(np.float64)
    out = np.zeros_like(x)
    scale.run_cpu(x, out, 3, grid=1, block=16)
    assert np.allclose(out, x * 3)
    scale.run_cpu(x, out, 0.5, grid=1, block=16)
    assert np.allclose(out, x * np.float64(F32(0.5)))
    assert len(scale.signatures) == 2


# --------------------------------------------------------------------------- example kernels


def test_vector_add_and_saxpy() -> None:
    m = example("vector_add")
    n = 300
    a, b = rng.random(n).astype(F32), rng.random(n).astype(F32)
    out = np.zeros(n, F32)
    m.vector_add.run_cpu(a, b, out, grid=(n + 127) // 128, block=128)
    assert np.array_equal(out, a + b)
    y = b.copy()
    alpha = F32(rng.random() + 0.5)
    m.saxpy.run_cpu(alpha, a, y, grid=(n + 127) // 128, block=128)
    assert np.allclose(y, alpha * a + b, rtol=1e-6)


def test_transpose_shared_padded() -> None:
    m = example("transpose")
    src = rng.random((37, 45)).astype(F32)
    dst = np.zeros((45, 37), F32)
    grid = ((45 + 31) // 32, (37 + 31) // 32)
    m.transpose.run_cpu(src, dst, grid=grid, block=(32, 8))
    assert np.array_equal(dst, src.T)


def test_sgemm_tiled() -> None:
    m = example("sgemm")
    a, b = rng.random((20, 19)).astype(F32), rng.random((19, 23)).astype(F32)
    c = np.zeros((20, 23), F32)
    grid = ((23 + 15) // 16, (20 + 15) // 16)
    m.sgemm.run_cpu(a, b, c, grid=grid, block=(16, 16))
    assert np.allclose(c, a @ b, rtol=1e-5)


def test_block_and_warp_shuffle_reductions() -> None:
    m = example("reduction")
    x = rng.random(600).astype(F32)
    blocks = (len(x) + 255) // 256
    partial = np.zeros(blocks, F32)
    m.block_sum.run_cpu(x, partial, grid=blocks, block=256)
    for k in range(blocks):
        assert np.isclose(partial[k], x[k * 256 : (k + 1) * 256].sum(), rtol=1e-5)
    out = np.zeros(1, F32)
    m.warp_shuffle_sum.run_cpu(x, out, grid=(len(x) + 127) // 128, block=128)
    assert np.isclose(out[0], x.sum(), rtol=1e-5)


def test_prefix_scan() -> None:
    m = example("scan")
    x = rng.random(200).astype(F32)
    out = np.zeros_like(x)
    m.block_scan.run_cpu(x, out, grid=1, block=256)
    assert np.allclose(out, np.cumsum(x, dtype=F32), rtol=1e-5)


def test_histogram_atomics() -> None:
    m = example("histogram")
    data = rng.integers(-500, 1000, 900).astype(np.int32)
    hist = np.zeros(64, np.uint32)
    m.histogram.run_cpu(data, hist, grid=3, block=64)
    assert np.array_equal(hist, np.bincount(data % 64, minlength=64))


def test_row_softmax() -> None:
    m = example("softmax")
    x = rng.standard_normal((3, 150)).astype(F32)
    out = np.zeros_like(x)
    m.softmax.run_cpu(x, out, grid=3, block=128)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert math.isclose(float(out.sum()), 3.0, rel_tol=1e-5)


def test_mixed_width_types_and_local_arrays() -> None:
    @zyntax.kernel
    def mix(h, d, b, out):
        i = lang.grid(1)
        tmp = lang.local.array(3, zyntax.f64)
        if i < len(h):
            tmp[0] = zyntax.f64(h[i])
            tmp[1] = d[i]
            tmp[2] = b[i]
            out[i] = tmp[0] * tmp[1] + tmp[2] - zyntax.f64(zyntax.i8(b[i]))

    n = 50
    h = rng.random(n).astype(np.float16)
    d = rng.random(n)
    b = rng.integers(0, 256, n).astype(np.uint8)
    out = np.zeros(n)
    mix.run_cpu(h, d, b, out, grid=2, block=32)
    want = h.astype(np.float64) * d + b - b.astype(np.int8).astype(np.float64)
    assert np.allclose(out, want, rtol=1e-12)


def test_warp_vote_match_and_shuffle_xor() -> None:
    full = 0xFFFFFFFF

    @zyntax.kernel
    def warp(x, keys, ballots, matches, sums):
        i = lang.grid(1)
        lane = lang.lane_id()
        v = x[i]
        ballots[i] = lang.vote_ballot_sync(full, v > 0.5)
        matches[i] = lang.match_any_sync(full, keys[i])
        s = v
        for k in range(5):
            s += lang.shfl_xor_sync(full, s, 1 << k)
        sums[i] = s if lane >= 0 else 0.0

    n = 64
    x = rng.random(n).astype(F32)
    keys = rng.integers(0, 3, n).astype(np.int32)
    ballots = np.zeros(n, np.uint32)
    matches = np.zeros(n, np.uint32)
    sums = np.zeros(n, F32)
    warp.run_cpu(x, keys, ballots, matches, sums, grid=1, block=64)
    for w in range(2):
        lanes = slice(32 * w, 32 * w + 32)
        bits = sum(1 << k for k in range(32) if x[lanes][k] > 0.5)
        assert (ballots[lanes] == bits).all()
        for k in range(32):
            want = sum(1 << j for j in range(32) if keys[lanes][j] == keys[lanes][k])
            assert matches[lanes][k] == want
        assert np.allclose(sums[lanes], x[lanes].sum(), rtol=1e-5)


def test_three_dimensional_arrays_and_grid() -> None:
    @zyntax.kernel
    def add3(a, b, out):
        x, y, z = lang.grid(3)
        if x < a.shape[0] and y < a.shape[1] and z < a.shape[2]:
            out[x, y, z] = a[x, y, z] + b[x][y][z] * zyntax.f32(a.size)

    a = rng.random((5, 3, 4)).astype(F32)
    b = rng.random((4, 3, 5)).astype(F32).transpose(2, 1, 0)  # strided view
    out = np.zeros((5, 3, 4), F32)
    add3.run_cpu(a, b, out, grid=(1, 1, 1), block=(8, 4, 4))
    assert np.allclose(out, a + b * a.size)


def test_compare_and_swap_loop() -> None:
    @zyntax.kernel
    def cas_count(counter, hits):
        i = lang.grid(1)
        if i < len(hits):
            while True:
                old = counter[0]
                if lang.atomic.cas(counter, 0, old, old + 1) == old:
                    hits[i] = old
                    break

    hits = np.full(70, -1, np.int32)
    counter = np.zeros(1, np.int32)
    cas_count.run_cpu(counter, hits, grid=3, block=32)
    assert counter[0] == 70
    assert sorted(hits.tolist()) == list(range(70))  # every thread got a distinct ticket


def test_tensor_core_tile_and_async_copy_match_numpy() -> None:
    @zyntax.kernel
    def tile(a, b, c):
        sa = lang.shared.array(256, zyntax.f16)
        t = lang.thread_idx.x
        for k in range(t * 8, 256, 256):  # 32 lanes x 8 halves: one 16-byte copy each
            lang.async_copy(sa, k, a, k, 16, "cg")
        lang.async_commit()
        lang.async_wait(0)
        lang.syncthreads()
        fa = lang.mma.load_a(sa, 16)
        fb = lang.mma.load_b(b, 16, layout="col")
        acc = lang.mma.load_c(c, 16)
        acc = lang.mma.mma(fa, fb, acc)
        lang.mma.store(c, acc, 16)

    a = rng.random((16, 16)).astype(np.float16)
    b = rng.random((16, 16)).astype(np.float16)
    c0 = rng.random((16, 16)).astype(F32)
    c = c0.ravel().copy()
    # b is read column-major: pass its transpose's rows.
    tile.run_cpu(a.ravel(), np.ascontiguousarray(b.T).ravel(), c, grid=1, block=32)
    want = a.astype(F32) @ b.astype(F32) + c0
    assert np.allclose(c.reshape(16, 16), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "name", ["vector_add", "transpose", "sgemm", "reduction", "scan", "histogram", "softmax"]
)
def test_example_scripts_run(name: str) -> None:
    """Each example's __main__ block checks itself against numpy (GPU if present, else CPU)."""
    import runpy

    got = runpy.run_path(str(ROOT / "examples" / "kernels" / f"{name}.py"), run_name="__main__")
    assert any(isinstance(v, zyntax.frontend.Kernel) for v in got.values())


def test_mma_fragment_carried_through_a_k_loop() -> None:
    @zyntax.kernel
    def mma_k(a, b, c, k_dim):
        acc = lang.mma.fill(0.0)
        for k in range(0, k_dim, 16):
            fa = lang.mma.load_a(a, k_dim, offset=k)
            fb = lang.mma.load_b(b, 16, offset=k * 16)
            acc = lang.mma.mma(fa, fb, acc)
        lang.mma.store(c, acc, 16)

    k_dim = 48
    a = rng.random((16, k_dim)).astype(np.float16)
    b = rng.random((k_dim, 16)).astype(np.float16)
    c = np.zeros(256, F32)
    mma_k.run_cpu(a.ravel(), b.ravel(), c, k_dim, grid=1, block=32)
    assert np.allclose(c.reshape(16, 16), a.astype(F32) @ b.astype(F32), rtol=1e-3, atol=1e-3)
