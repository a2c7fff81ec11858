"""Parallel loop nests (zyntax.nest): lowered to thread/block indices with
bounds guards, run on the interpreter against numpy on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp
from zyntax.nest import launch_grid, parallel_for

F32P = hir.ptr("global", hir.f32)


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def test_2d_elementwise_guards_ragged_edges() -> None:
    m = hir.Module("ew")
    with m.kernel("ew", [F32P, F32P, F32P, hir.u32, hir.u32], max_threads=(16, 16)) as b:
        a, bias, out, rows, cols = b.params
        with parallel_for(b, (rows, cols), workgroup=(16, 16)) as (i, j):
            k = i * cols + j
            v = b.load(b.ptr_add(a, k)) * 2.0 + b.load(b.ptr_add(bias, j))
            b.store(b.ptr_add(out, k), v)
    m.verify()
    r = rng()
    rows, cols = 37, 45  # neither a multiple of 16: the guard matters
    a = r.standard_normal((rows, cols)).astype(np.float32)
    bias = r.standard_normal(cols).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    grid, block = launch_grid((rows, cols), (16, 16))
    assert grid == (3, 3, 1) and block == (16, 16, 1)
    interp.launch(m, "ew", grid, block, a, bias, out, rows, cols)
    np.testing.assert_array_equal(out, a * np.float32(2) + bias)


def test_matmul_nest_with_a_reduction() -> None:
    m = hir.Module("mm")
    params = [F32P, F32P, F32P, hir.u32, hir.u32, hir.u32]
    with m.kernel("mm", params, max_threads=(8, 8)) as b:
        a, bm, c, mm, nn, kk = b.params
        with parallel_for(b, (mm, nn), workgroup=(8, 8)) as (i, j):
            acc0 = b.const(0.0, hir.f32)
            with b.loop(0, kk, carry=[acc0]) as lp:
                k = lp.index
                x = b.load(b.ptr_add(a, i * kk + k))
                y = b.load(b.ptr_add(bm, k * nn + j))
                lp.next(b.fma(x, y, lp.carried[0]))
            b.store(b.ptr_add(c, i * nn + j), lp.results[0])
    m.verify()
    r = rng()
    mm, nn, kk = 19, 23, 17
    a = r.standard_normal((mm, kk)).astype(np.float32)
    bm = r.standard_normal((kk, nn)).astype(np.float32)
    c = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (8, 8))
    interp.launch(m, "mm", grid, block, a, bm, c, mm, nn, kk)
    want = a.astype(np.float64) @ bm.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims", [1, 3])
def test_1d_and_3d_nests_cover_every_point_once(dims: int) -> None:
    sizes = {1: (1000,), 3: (5, 7, 9)}[dims]
    workgroup = {1: (128,), 3: (2, 4, 8)}[dims]
    m = hir.Module("count")
    with m.kernel("count", [hir.ptr("global", hir.u32), *[hir.u32] * dims]) as b:
        out, *ns = b.params
        with parallel_for(b, ns, workgroup=workgroup) as idx:
            flat = idx[0]
            for k in range(1, dims):
                flat = flat * ns[k] + idx[k]
            b.atomic("add", b.ptr_add(out, flat), b.const(1, hir.u32))
    m.verify()
    total = int(np.prod(sizes))
    out = np.zeros(total + 7, np.uint32)  # the tail must stay untouched
    grid, block = launch_grid(sizes, workgroup)
    interp.launch(m, "count", grid, block, out, *sizes)
    np.testing.assert_array_equal(out[:total], 1)
    np.testing.assert_array_equal(out[total:], 0)


def test_launch_grid_follows_the_sizes() -> None:
    assert launch_grid((100, 1000), (16, 16)) == ((63, 7, 1), (16, 16, 1))
    assert launch_grid((0,), (256,)) == ((1, 1, 1), (256, 1, 1))
    assert launch_grid((3, 4, 5), (1, 2, 4)) == ((2, 2, 3), (4, 2, 1))


@pytest.mark.parametrize(
    ("workgroup", "message"),
    [
        ((64, 32), "2048 threads; devices allow at most 1024 per block"),
        ((128, 1, 1), "128 threads along z; devices allow at most 64"),
        ((2048,), "2048 threads along x"),
        ((0, 4), "extent below 1"),
        ((1, 1, 1, 1), "1 to 3 dimensions"),
    ],
)
def test_bad_workgroups_are_build_errors(workgroup: tuple[int, ...], message: str) -> None:
    with pytest.raises(zyntax.BuildError, match=message):
        launch_grid((8,) * len(workgroup), workgroup)
    m = hir.Module("bad")
    with m.kernel("bad", [hir.u32] * len(workgroup)) as b:
        with pytest.raises(zyntax.BuildError, match=message):
            with parallel_for(b, b.params, workgroup=workgroup):
                pass


def test_dimension_mismatch_is_a_build_error() -> None:
    with pytest.raises(zyntax.BuildError, match="2 dimensions but the workgroup"):
        launch_grid((8, 8), (64,))


@pytest.mark.parametrize(
    ("sizes", "workgroup", "message"),
    [
        ((8,), ("a",), "workgroup .* holds a str, not an int"),
        ((8,), (2.5,), "holds a float"),
        ((8,), (np.array([2, 3]),), "holds a ndarray"),
        ((8,), (True,), "holds a bool"),
        ((8,), 16, "workgroup must be a tuple of ints, got int"),
        (("a",), (4,), "iteration space .* holds a str"),
        ((None,), (4,), "holds a NoneType"),
        (8, (4,), "iteration space must be a tuple of ints, got int"),
        ((2**40, 4), (1, 4), "needs 1099511627776 blocks along y .*at most 65535"),
        ((2**33,), (1,), "needs 8589934592 blocks along x"),
    ],
)
def test_bad_launch_grid_arguments_are_build_errors(
    sizes: object, workgroup: object, message: str
) -> None:
    with pytest.raises(zyntax.BuildError, match=message):
        launch_grid(sizes, workgroup)  # type: ignore[arg-type]


def test_numpy_integers_are_ints() -> None:
    assert launch_grid((np.int64(100),), (np.int32(32),)) == ((4, 1, 1), (32, 1, 1))


@pytest.mark.parametrize(
    ("sizes", "message"),
    [(("a",), "nest size 'a' is a str"), ((None,), "NoneType"), ((2**32,), "outside")],
)
def test_bad_nest_sizes_are_build_errors(sizes: tuple[object, ...], message: str) -> None:
    m = hir.Module("bad")
    with m.kernel("bad", [hir.u32]) as b:
        with pytest.raises(zyntax.BuildError, match=message):
            with parallel_for(b, sizes, workgroup=(4,)):
                pass


# --------------------------------------------------------------------------- @zyntax.kernel


@zyntax.kernel(workgroup=(16, 16))
def scale_add(a, bias, out):
    for i, j in zyntax.lang.prange(a.shape[0], a.shape[1]):
        out[i, j] = a[i, j] * 3 + bias[j]


def test_prange_kernel_matches_numpy() -> None:
    r = rng()
    rows, cols = 29, 41
    a = r.standard_normal((rows, cols)).astype(np.float32)
    bias = r.standard_normal(cols).astype(np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    assert scale_add.max_threads == (16, 16, 1)
    grid, block = scale_add.launch_grid(rows, cols)
    assert grid == (3, 2, 1)
    interp.launch(scale_add, grid, block, a, bias, out)
    np.testing.assert_array_equal(out, a * np.float32(3) + bias)


def test_prange_matmul_kernel() -> None:
    @zyntax.kernel(workgroup=(8, 8))
    def mm(a, b, c):
        for i, j in zyntax.lang.prange(c.shape[0], c.shape[1]):
            acc = zyntax.f32(0)
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc

    r = rng()
    a = r.standard_normal((13, 11)).astype(np.float32)
    b = r.standard_normal((11, 17)).astype(np.float32)
    c = np.full((13, 17), np.nan, np.float32)
    grid, block = mm.launch_grid(13, 17)
    interp.launch(mm, grid, block, a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_prange_errors_point_at_the_source() -> None:
    @zyntax.kernel(workgroup=(64,))
    def nested(a):
        for k in range(2):
            for i in zyntax.lang.prange(a.shape[0]):
                a[i] = k

    x = np.zeros(4, np.float32)
    with pytest.raises(zyntax.KernelError, match="outermost statement"):
        interp.launch(nested, 1, 64, x)

    def too_wide(a):
        for i, j in zyntax.lang.prange(a.shape[0], a.shape[1]):
            a[i, j] = 0

    with pytest.raises(zyntax.BuildError, match="2048 threads"):
        zyntax.kernel(workgroup=(32, 64))(too_wide)
