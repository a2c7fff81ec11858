"""The example kernels run on the reference interpreter and agree with numpy
on random inputs; program faults and bad launches raise clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp

RNG_SEED = 20261126


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def nonzero(rng: np.random.Generator, n: int, dtype: type = np.float32) -> np.ndarray:
    """Random values in ±[0.5, 2): never zero, so a dropped term shows."""
    mag = rng.uniform(0.5, 2.0, n)
    return (mag * rng.choice([-1.0, 1.0], n)).astype(dtype)


def test_saxpy(rng: np.random.Generator) -> None:
    import saxpy

    m = saxpy.build()
    n = 1000  # not a multiple of the block: the tail threads must do nothing
    x, y = nonzero(rng, n), nonzero(rng, n + 8)
    y0 = y.copy()
    a = np.float32(rng.uniform(0.5, 3.0))
    stats = interp.launch(m, "saxpy", (n + 255) // 256, 256, n, a, x, y)
    assert stats["instructions"] > 0
    # fma rounds once: compute exactly in float64, then round to float32.
    want = (np.float64(a) * x.astype(np.float64) + y0[:n].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(y[:n], want)
    np.testing.assert_array_equal(y[n:], y0[n:])  # past n: untouched


def test_block_sum(rng: np.random.Generator) -> None:
    import reduce_sum

    m = reduce_sum.build()
    n = 3000
    x = nonzero(rng, n)
    out = np.zeros(1, np.float32)
    interp.launch(m, "block_sum", (n + 255) // 256, 256, x, out, n)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)


def test_histogram(rng: np.random.Generator) -> None:
    import histogram

    m = histogram.build()
    n = 5000
    data = rng.integers(0, 256, n, dtype=np.uint8)
    hist = np.zeros(256, np.uint32)
    interp.launch(m, "histogram", 3, 128, data, n, hist)
    np.testing.assert_array_equal(hist, np.bincount(data, minlength=256))


def test_mma_tile(rng: np.random.Generator) -> None:
    import mma_tile

    m = mma_tile.build()
    a = nonzero(rng, 256, np.float16).reshape(16, 16)
    b = nonzero(rng, 256, np.float16).reshape(16, 16)
    c = nonzero(rng, 256).reshape(16, 16)
    d = np.zeros((16, 16), np.float32)
    b_col_major = np.ascontiguousarray(b.T)  # B is loaded column-major
    interp.launch(m, "mma_16x16x16", 1, 32, a, b_col_major, c, d)
    want = a.astype(np.float32) @ b.astype(np.float32) + c
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-4)


def test_cp_async_double_buffer(rng: np.random.Generator) -> None:
    import cp_async_double_buffer as ex

    m = ex.build()
    blocks, tiles = 2, 3
    n4 = blocks * tiles * ex.TILE
    src = nonzero(rng, 4 * n4)
    out = np.zeros(4 * n4, np.float32)
    scale = np.float32(1.75)
    interp.launch(m, "scale_tiles", blocks, ex.TILE, src, out, tiles, scale)
    np.testing.assert_array_equal(out, src * scale)


def test_host_functions(rng: np.random.Generator) -> None:
    import host_latency

    m = host_latency.build()
    n = 257
    x, y = nonzero(rng, n, np.float64), nonzero(rng, n, np.float64)
    got = interp.call(m, "dot", x, y, n)
    assert isinstance(got, float)
    np.testing.assert_allclose(got, np.dot(x, y), rtol=1e-12)
    lo, hi = -1.0, 1.0
    clamped = interp.call(m, "clamp_score", x, y, n, lo, hi)
    assert clamped == min(max(got, lo), hi)


def test_out_of_bounds_is_a_trap() -> None:
    import saxpy

    m = saxpy.build()
    x = np.ones(10, np.float32)
    y = np.ones(10, np.float32)
    with pytest.raises(zyntax.TrapError, match="out-of-bounds") as info:
        interp.launch(m, "saxpy", 1, 32, 20, 1.0, x, y)  # n = 20 > len
    err = info.value
    assert err.kind == "out-of-bounds access"  # type: ignore[attr-defined]
    assert err.function == "saxpy"  # type: ignore[attr-defined]
    assert err.block == (0, 0, 0) or list(err.block) == [0, 0, 0]  # type: ignore[attr-defined]
    # The warp runs in lockstep, so the faulting loads come before any store:
    # y is handed back unchanged.
    np.testing.assert_array_equal(y, np.ones(10, np.float32))


def test_shared_memory_race_is_detected() -> None:
    m = hir.Module("race", targets=["sm_80"])
    with m.kernel("racy", [hir.ptr("global", hir.u32)]) as b:
        s = b.shared_alloc(hir.u32, 1)
        b.store(s, b.thread_idx())  # every thread writes the same word: a race
        b.barrier()
        b.store(b.params[0], b.load(s))
    out = np.zeros(1, np.uint32)
    with pytest.raises(zyntax.TrapError, match="race"):
        interp.launch(m, "racy", 1, 64, out)
    # With checks off the launch completes (one writer wins).
    interp.launch(m, "racy", 1, 64, out, checks=False)
    assert out[0] < 64


def test_fuel_limit() -> None:
    m = hir.Module("spin")
    with m.host_function("spin", [hir.u64], [hir.u64]) as b:
        with b.loop(0, b.params[0], carry=[b.params[0]]) as lp:
            lp.next(lp.carried[0] + 1)
        b.ret(*lp.results)
    assert interp.call(m, "spin", 10) == 20
    with pytest.raises(zyntax.TrapError, match="fuel"):
        interp.call(m, "spin", 10**9, fuel=10_000)


def test_bad_launches() -> None:
    import saxpy

    m = saxpy.build()
    x = np.ones(4, np.float32)
    with pytest.raises(zyntax.LaunchError, match="max_threads"):
        interp.launch(m, "saxpy", 1, 512, 4, 1.0, x, x)
    with pytest.raises(zyntax.LaunchError, match="takes 4 arguments"):
        interp.launch(m, "saxpy", 1, 32, 4, x, x)
    with pytest.raises(zyntax.ArgumentError, match="points to f32; got an array of float64"):
        interp.launch(m, "saxpy", 1, 32, 4, 1.0, x, np.ones(4))
    with pytest.raises(zyntax.LaunchError, match="out of range"):
        interp.launch(m, "saxpy", 1, 32, -1, 1.0, x, x)
    with pytest.raises(zyntax.BuildError, match="no function @nope"):
        interp.launch(m, "nope", 1, 1)
    bad = hir.Module("bad")
    with bad.kernel("k", [hir.ptr("global", hir.f32)]) as b:
        b.add(b.params[0], b.params[0])
    with pytest.raises(zyntax.VerifyError):
        interp.launch(bad, "k", 1, 1, x)
