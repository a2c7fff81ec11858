"""Automatic shared-memory tiling of nest reductions (zyntax.tiling): the
tiled nest on the interpreter against numpy/float64 and bit-for-bit against
the untiled nest on fresh random inputs with ragged sizes, the report of what
was not tiled and why, and the PTX through ptxas."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp
from zyntax.nest import launch_grid
from zyntax.tiling import tiled_parallel_for

F32P = hir.ptr("global", hir.f32)
U32P = hir.ptr("global", hir.u32)
MM_PARAMS = [F32P, F32P, F32P, hir.u32, hir.u32, hir.u32]


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def _nest_matmul() -> Any:
    """examples/nest_matmul.py, the one copy of the matmul nest (tiled and untiled)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "nest_matmul.py"
    spec = importlib.util.spec_from_file_location("nest_matmul_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tiled_matmul(workgroup: tuple[int, int], tile_k: int) -> tuple[hir.Module, list[str]]:
    m, report = _nest_matmul().build_with_report(workgroup, tiled=True, tile_k=tile_k)
    m.verify()
    return m, report


def untiled_matmul(workgroup: tuple[int, int]) -> hir.Module:
    m, _ = _nest_matmul().build_with_report(workgroup, tiled=False)
    m.verify()
    return m


def run_mm(m: hir.Module, wg: tuple[int, int], a: np.ndarray, bm: np.ndarray) -> np.ndarray:
    c = np.full((a.shape[0], bm.shape[1]), np.nan, np.float32)
    grid, block = launch_grid(c.shape, wg)
    interp.launch(m, "mm", grid, block, a, bm, c, a.shape[0], bm.shape[1], a.shape[1])
    return c


@pytest.mark.parametrize(
    ("wg", "tile_k", "shape"),
    [((16, 16), 16, (37, 45, 29)), ((8, 16), 8, (19, 33, 21)), ((4, 8), 5, (9, 13, 3))],
)
def test_tiled_matmul_matches_numpy_and_the_untiled_nest(
    wg: tuple[int, int], tile_k: int, shape: tuple[int, int, int]
) -> None:
    mm, nn, kk = shape  # none a multiple of the tile: ragged edges in every dimension
    r = rng()
    a = r.standard_normal((mm, kk)).astype(np.float32)
    bm = r.standard_normal((kk, nn)).astype(np.float32)
    tiled, report = tiled_matmul(wg, tile_k)
    assert "bar.sync" not in tiled.function_zir("mm")  # sanity: HIR, not PTX
    assert "barrier" in tiled.function_zir("mm")
    assert sum("tiled through shared memory" in line for line in report) == 2, report
    got = run_mm(tiled, wg, a, bm)
    np.testing.assert_allclose(got, a.astype(np.float64) @ bm, rtol=1e-5, atol=1e-5)
    # Same terms, same order, same fma: bit-identical to the untiled nest.
    np.testing.assert_array_equal(got, run_mm(untiled_matmul(wg), wg, a, bm))


def build_mixed(kind: str) -> tuple[hir.Module, list[str]]:
    """out[i, j] = sum_k a[i, k] * x(i, j, k) with one operand the tiler can
    stage (a) and one it cannot, for the reason `kind`."""
    m = hir.Module("mx")
    params = [F32P, F32P, U32P, F32P, hir.u32, hir.u32, hir.u32]
    with m.kernel("mx", params, max_threads=(8, 8)) as b:
        a, x, perm, out, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(8, 8), writes=[out]) as nest:
            i, j = nest.indices
            vi, vj = nest.values

            def loads(k: Any) -> list[tuple[Any, Any]]:
                if kind == "every_index":  # x[i, j, k]: no reuse across the workgroup
                    return [(a, i * kk + k), (x, (i * nn + j) * kk + k)]
                # x[perm[k], j]: a data-dependent index
                return [(a, i * kk + k), (x, lambda kv: b.load(b.ptr_add(perm, kv)) * nn + vj)]

            acc = nest.reduce(kk, init=0.0, loads=loads, combine=lambda acc, p, q: b.fma(p, q, acc))
            with nest.inside():
                b.store(b.ptr_add(out, vi * nn + vj), acc)
    m.verify()
    return m, nest.report


@pytest.mark.parametrize("kind", ["every_index", "gather"])
def test_one_tileable_and_one_untileable_operand(kind: str) -> None:
    m, report = build_mixed(kind)
    text = "\n".join(report)
    assert "operand 0" in text and "operand 0 (" in report[1] and "tiled through" in report[1]
    why = {"every_index": "depends on every nest index", "gather": "not an affine form"}[kind]
    assert "not tiled" in report[2] and why in report[2], text
    r = rng()
    mm, nn, kk = 11, 13, 10
    a = r.standard_normal((mm, kk)).astype(np.float32)
    perm = r.permutation(kk).astype(np.uint32)
    if kind == "every_index":
        x = r.standard_normal(mm * nn * kk).astype(np.float32)
        want = np.einsum("ik,ijk->ij", a.astype(np.float64), x.reshape(mm, nn, kk))
    else:
        x = r.standard_normal(kk * nn).astype(np.float32)
        want = a.astype(np.float64) @ x.reshape(kk, nn)[perm]
    out = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (8, 8))
    interp.launch(m, "mx", grid, block, a, x, perm, out, mm, nn, kk)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_non_affine_index_compiles_untiled_and_is_reported() -> None:
    m = hir.Module("na")
    with m.kernel("na", MM_PARAMS, max_threads=(8, 8)) as b:
        _, x, out, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(8, 8), writes=[out]) as nest:
            i, j = nest.indices
            # x[(i * j) % ... ]: a product of two loop indices is not affine
            acc = nest.reduce(
                kk,
                init=0.0,
                loads=lambda k: [(x, i * j + k)],
                combine=lambda acc, v: acc + v,
            )
            with nest.inside():
                vi, vj = nest.values
                b.store(b.ptr_add(out, vi * nn + vj), acc)
    m.verify()
    assert "not affine" in nest.report[1] and "product of two loop-dependent" in nest.report[1]
    assert "barrier" not in m.function_zir("na")  # nothing staged, no barriers
    r = rng()
    mm, nn, kk = 7, 9, 6
    x = r.standard_normal((mm - 1) * (nn - 1) + kk).astype(np.float32)
    out = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (8, 8))
    interp.launch(m, "na", grid, block, np.zeros(1, np.float32), x, out, mm, nn, kk)
    ii, jj = np.meshgrid(np.arange(mm), np.arange(nn), indexing="ij")
    want = np.zeros((mm, nn), np.float32)
    for k in range(kk):  # the same left-to-right f32 sum the kernel does
        want = want + x[ii * jj + k]
    np.testing.assert_array_equal(out, want)


def test_aliasing_and_a_varying_bound_are_reported() -> None:
    m = hir.Module("al")
    with m.kernel("al", MM_PARAMS, max_threads=(4, 4)) as b:
        a, bm, c, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(4, 4), writes=[c, bm]) as nest:
            i, j = nest.indices
            acc = nest.reduce(
                kk,
                init=0.0,
                loads=lambda k: [(a, i * kk + k), (bm, k * nn + j)],
                combine=lambda acc, x, y: b.fma(x, y, acc),
            )
            vi, vj = nest.values
            shorter = b.min(kk, vi + 1)  # defined inside the nest: not loop-invariant
            acc2 = nest.reduce(
                shorter,
                init=acc,
                loads=lambda k: [(a, i * kk + k)],
                combine=lambda acc, x: acc + x,
            )
            with nest.inside():
                b.store(b.ptr_add(c, vi * nn + vj), acc2)
    m.verify()
    text = "\n".join(nest.report)
    assert "operand 0" in text and "the nest writes this buffer" in nest.report[2], text
    assert "not loop-invariant" in nest.report[4], text
    r = rng()
    mm, nn, kk = 6, 7, 5
    a = r.standard_normal((mm, kk)).astype(np.float32)
    bm = r.standard_normal((kk, nn)).astype(np.float32)
    c = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (4, 4))
    interp.launch(m, "al", grid, block, a, bm, c, mm, nn, kk)
    a64 = a.astype(np.float64)
    extra = np.array([a64[i, : min(kk, i + 1)].sum() for i in range(mm)])
    np.testing.assert_allclose(c, a64 @ bm + extra[:, None], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
def test_tiled_matmul_ptx_passes_ptxas(arch: str) -> None:
    m, _ = tiled_matmul((16, 16), 16)
    ptx = zyntax.compile_ptx(m, arch).ptx
    assert "bar.sync" in ptx and ".shared" in ptx and "ld.shared" in ptx
    out = zyntax.validate_ptx(ptx, arch)  # ptxas -Werror; a missing ptxas fails
    assert out.cubin[:4] == b"\x7fELF"
    # Two unpadded 16x16 f32 tiles, as in the hand-tiled examples/kernels/sgemm.py.
    assert "2048 bytes smem" in out.log, out.log


def test_bad_tile_k_is_a_build_error() -> None:
    m = hir.Module("bad")
    with m.kernel("bad", MM_PARAMS) as b:
        a, _, _, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(4, 4)) as nest:
            i, _ = nest.indices
            with pytest.raises(zyntax.BuildError, match="tile_k"):
                nest.reduce(
                    kk,
                    init=0.0,
                    loads=lambda k: [(a, i * kk + k)],
                    combine=lambda acc, x: acc + x,
                    tile_k=0,
                )


def test_transposed_operands_get_padded_tiles() -> None:
    """C = At.T @ Bt.T with At (K, M) and Bt (N, K): the unit-stride
    coordinate of each operand is not the one the inner loop reads along, so
    the staging writes would conflict without the padding; results are exact."""
    m = hir.Module("tt")
    with m.kernel("tt", MM_PARAMS, max_threads=(16, 8)) as b:
        at, bt, c, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(8, 16), writes=[c]) as nest:
            i, j = nest.indices
            acc = nest.reduce(
                kk,
                init=0.0,
                loads=lambda k: [(at, k * mm + i), (bt, j * kk + k)],
                combine=lambda acc, x, y: b.fma(x, y, acc),
                tile_k=8,
            )
            with nest.inside():
                vi, vj = nest.values
                b.store(b.ptr_add(c, vi * nn + vj), acc)
    m.verify()
    assert all("rows padded by 1" in line for line in nest.report[1:]), nest.report
    r = rng()
    mm, nn, kk = 21, 35, 19
    at = r.standard_normal((kk, mm)).astype(np.float32)
    bt = r.standard_normal((nn, kk)).astype(np.float32)
    c = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (8, 16))
    interp.launch(m, "tt", grid, block, at, bt, c, mm, nn, kk)
    np.testing.assert_allclose(c, at.T.astype(np.float64) @ bt.T, rtol=1e-5, atol=1e-5)


def test_1d_matvec_stages_the_shared_vector_only() -> None:
    """y[i] = sum_k a[i, k] * x[k] in a 1-D nest: x is read by every thread
    (tiled), a row by one thread only (no reuse: loaded directly)."""
    m = hir.Module("mv")
    with m.kernel("mv", [F32P, F32P, F32P, hir.u32, hir.u32], max_threads=(32, 1, 1)) as b:
        a, x, y, mm, kk = b.params
        with tiled_parallel_for(b, (mm,), workgroup=(32,), writes=[y]) as nest:
            (i,) = nest.indices
            acc = nest.reduce(
                kk,
                init=0.0,
                loads=lambda k: [(a, i * kk + k), (x, k)],
                combine=lambda acc, p, q: b.fma(p, q, acc),
                tile_k=12,
            )
            with nest.inside():
                b.store(b.ptr_add(y, nest.values[0]), acc)
    m.verify()
    assert "depends on every nest index" in nest.report[1], nest.report
    assert "tiled through shared memory, 1x12, reused across i0" in nest.report[2], nest.report
    r = rng()
    mm, kk = 45, 31
    a = r.standard_normal((mm, kk)).astype(np.float32)
    x = r.standard_normal(kk).astype(np.float32)
    y = np.full(mm, np.nan, np.float32)
    grid, block = launch_grid((mm,), (32,))
    interp.launch(m, "mv", grid, block, a, x, y, mm, kk)
    np.testing.assert_allclose(y, a.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("sizes", "workgroup", "message"),
    [(2, (64, 32), "2048 threads"), (2, (16,), "2 dimensions but the workgroup")],
)
def test_bad_tiled_nests_are_build_errors(
    sizes: int, workgroup: tuple[int, ...], message: str
) -> None:
    m = hir.Module("bad")
    with m.kernel("bad", [hir.u32] * sizes) as b:
        with pytest.raises(zyntax.BuildError, match=message):
            with tiled_parallel_for(b, b.params, workgroup=workgroup):
                pass


# ---------------------------------------------------------------- tile-size limits (issue 29)


def _two_products(tile_k: tuple[int | None, int | None]) -> tuple[hir.Module, list[str]]:
    """c = a @ b and d = a @ b as two reductions of one 16x16 nest, with the
    given tile_k each (None: automatic)."""
    m = hir.Module("two")
    with m.kernel("two", [F32P, F32P, F32P, F32P, hir.u32, hir.u32, hir.u32]) as b:
        a, bm, c, d, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(16, 16), writes=[c, d]) as nest:
            i, j = nest.indices
            accs = [
                nest.reduce(
                    kk,
                    init=0.0,
                    loads=lambda k: [(a, i * kk + k), (bm, k * nn + j)],
                    combine=lambda acc, x, y: b.fma(x, y, acc),
                    tile_k=tk,
                )
                for tk in tile_k
            ]
            with nest.inside():
                vi, vj = nest.values
                for out, acc in zip((c, d), accs, strict=True):
                    b.store(b.ptr_add(out, vi * nn + vj), acc)
    m.verify()
    return m, nest.report


def test_absurd_tile_k_is_refused_before_building() -> None:
    """tile_k = 2**20 unrolled 65536 staging copies per thread and built for
    minutes; it is refused at once, naming the bound it breaks."""
    start = time.perf_counter()
    with pytest.raises(zyntax.BuildError, match=r"tile_k=1048576: each of the 256 threads"):
        tiled_matmul((16, 16), 2**20)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("tile_k", [True, 16.0, "16", np.array([16]), None])
def test_tile_k_must_be_an_int(tile_k: object) -> None:
    m = hir.Module("bad")
    with m.kernel("bad", MM_PARAMS) as b:
        a, _, _, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(4, 4)) as nest:
            i, _ = nest.indices
            with pytest.raises(zyntax.BuildError, match="tile_k must be an int"):
                nest.reduce(
                    kk,
                    init=0.0,
                    loads=lambda k: [(a, i * kk + k)],
                    combine=lambda acc, x: acc + x,
                    tile_k="auto" if tile_k is None else tile_k,  # type: ignore[arg-type]
                )


def test_tiles_past_the_shared_memory_of_a_block_are_refused() -> None:
    # 2 tiles of 16 x 256 f32 = 32 KiB fit; a second reduction's 32 KiB do not.
    _, report = _two_products((256, None))
    assert "16x256, reused across i1" in report[1], report
    with pytest.raises(zyntax.BuildError, match="besides 32768 for earlier reductions"):
        _two_products((256, 256))
    with pytest.raises(zyntax.BuildError, match="need 65536 bytes of shared memory"):
        tiled_matmul((16, 16), 512)


def test_automatic_tile_k_shrinks_to_fit_or_loads_directly() -> None:
    """The default tile_k halves until the tiles fit in what earlier
    reductions left; with nothing left the operands are loaded directly.
    Either way the results are exact (bit-identical: same fma order)."""
    _, report = _two_products((256, None))  # 16 KiB left: 2 x 16x16 f32 tiles fit
    assert "16x16, reused" in report[4], report
    _, report = _two_products((376, None))  # 1 KiB left: tile_k 8 (2 x 512 B) fits
    assert "16x8, reused" in report[4], report
    m, report = _two_products((384, None))  # exactly 48 KiB used: nothing left
    assert all("its tile does not fit" in line for line in report[4:]), report
    r = rng()
    mm, nn, kk = 21, 19, 400  # two steps of the first reduction, the second ragged
    a = r.standard_normal((mm, kk)).astype(np.float32)
    bm = r.standard_normal((kk, nn)).astype(np.float32)
    c, d = (np.full((mm, nn), np.nan, np.float32) for _ in range(2))
    grid, block = launch_grid((mm, nn), (16, 16))
    interp.launch(m, "two", grid, block, a, bm, c, d, mm, nn, kk)
    np.testing.assert_allclose(c, a.astype(np.float64) @ bm, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(c, d)


def test_a_constant_bound_shortens_tile_k() -> None:
    m = hir.Module("short")
    with m.kernel("short", MM_PARAMS) as b:
        a, bm, c, mm, nn, _ = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(8, 8), writes=[c]) as nest:
            i, j = nest.indices
            acc = nest.reduce(
                5,
                init=0.0,
                loads=lambda k: [(a, i * 5 + k), (bm, k * nn + j)],
                combine=lambda acc, x, y: b.fma(x, y, acc),
                tile_k=4096,
            )
            with nest.inside():
                b.store(b.ptr_add(c, nest.values[0] * nn + nest.values[1]), acc)
    assert "8x5, reused" in nest.report[1], nest.report


@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
def test_tiles_at_the_shared_memory_limit_pass_ptxas(arch: str) -> None:
    """The bound is the hardware's: 48 KiB of tiles (two reductions, 32 + 16
    KiB) assemble; that is what MAX_SHARED_BYTES allows."""
    from zyntax.tiling import MAX_SHARED_BYTES

    m, _ = _two_products((256, 128))
    out = zyntax.validate_ptx(zyntax.compile_ptx(m, arch).ptx, arch)
    assert f"{MAX_SHARED_BYTES} bytes smem" in out.log, out.log


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: tiled_parallel_for(b, (4, "8"), workgroup=(4, 4)), "nest size '8' is a str"),
        (lambda b: tiled_parallel_for(b, (4, 2**32), workgroup=(4, 4)), r"outside \[0, 2\*\*32\)"),
        (lambda b: tiled_parallel_for(b, (4, 4), workgroup=(4, 4.0)), "holds a float"),
        (lambda b: tiled_parallel_for(b, (4, 4), workgroup=np.array([4, 4])), "tuple of ints"),
        (lambda b: tiled_parallel_for(b, 4, workgroup=(4,)), "must be a tuple"),
    ],
)
def test_bad_nest_arguments_are_build_errors(call: Any, message: str) -> None:
    m = hir.Module("bad")
    with m.kernel("bad", MM_PARAMS) as b:
        with pytest.raises(zyntax.BuildError, match=message):
            with call(b):
                pass


def test_a_failing_combine_surfaces_as_itself_and_the_builder_stays_usable() -> None:
    """`combine` is called back from the Rust emitter (zyntax_opt::nest_stage)
    with the builder lent back to `b`: its exception surfaces unchanged, a
    literal result is a typed error naming it, and `b` still builds after."""
    m = hir.Module("cb")
    with m.kernel("mm", MM_PARAMS, max_threads=(8, 8)) as b:
        a, bm, c, mm, nn, kk = b.params
        with tiled_parallel_for(b, (mm, nn), workgroup=(8, 8), writes=[c]) as nest:
            i, j = nest.indices

            def loads(k: Any) -> list[tuple[Any, Any]]:
                return [(a, i * kk + k), (bm, k * nn + j)]

            with pytest.raises(ZeroDivisionError):
                nest.reduce(kk, init=0.0, loads=loads, combine=lambda acc, x, y: 1 / 0)
            with pytest.raises(zyntax.ZyntaxError, match="combine's result"):
                nest.reduce(kk, init=0.0, loads=loads, combine=lambda acc, x, y: 3)
            assert b.add(mm, 1).type == hir.u32
