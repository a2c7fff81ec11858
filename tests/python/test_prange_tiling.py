"""Tiling of ``lang.prange`` reductions under ``@zyntax.kernel(workgroup=...)``
(zyntax.frontend.nest_tiling driving zyntax.tiling's tiler), on the
interpreter: results against numpy/float64 and bit-exactly against the same
kernel untiled, on fresh random inputs with ragged sizes, and the report for
tiled and untiled operands and nests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import interp, lang

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kernels" / "prange_matmul.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("prange_matmul", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


example_mm = load_example().mm

F32 = np.float32
F32C = zyntax.Array[zyntax.f32, 2, "C"]
F32C3 = zyntax.Array[zyntax.f32, 3, "C"]
F32V = zyntax.Array[zyntax.f32, 1, "C"]


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def run(k: Any, shape: tuple[int, ...], *arrays: np.ndarray) -> np.ndarray:
    """Launches the prange kernel `k` over `shape`; the output (last array) poisoned first."""
    out = arrays[-1]
    out[...] = np.nan
    grid, block = k.launch_grid(*shape)
    interp.launch(k, grid, block, *arrays)
    return out


def untiled(fn: Any, workgroup: tuple[int, ...]) -> Any:
    """The same kernel without workgroup= (never tiled), launched with the same block."""
    k = zyntax.kernel(fn)
    k.launch_grid = zyntax.kernel(workgroup=workgroup)(fn).launch_grid
    return k


def mm_fn(a: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(c.shape[0], c.shape[1]):
        acc = zyntax.f32(0)
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


@pytest.mark.parametrize("workgroup", [(16, 16), (8, 32), (4, 8)])
def test_prange_matmul_is_tiled_and_exact(workgroup: tuple[int, int]) -> None:
    tiled = zyntax.kernel(workgroup=workgroup)(mm_fn)
    rep = tiled.tiling_report()
    assert rep[0].endswith(f"tiled, workgroup {workgroup}"), rep
    assert "operand 0 (a[a.strides[0]*i + 1*k]): tiled through shared memory" in rep[2], rep
    assert "operand 1 (b[b.strides[0]*k + 1*j]): tiled through shared memory" in rep[3], rep
    assert "barrier" in tiled.hir() and "shared_alloc" in tiled.hir()
    r = rng()
    m, n, kk = 37, 29, 45  # ragged against every workgroup and tile_k
    a = r.standard_normal((m, kk)).astype(F32)
    b = r.standard_normal((kk, n)).astype(F32)
    got = run(tiled, (m, n), a, b, np.empty((m, n), F32)).copy()
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    ref = run(untiled(mm_fn, workgroup), (m, n), a, b, np.empty((m, n), F32))
    np.testing.assert_array_equal(got, ref)  # the same terms in the same k order


def test_the_example_and_a_transposed_operand() -> None:
    rep = example_mm.tiling_report()
    assert sum("tiled through shared memory" in line for line in rep) == 2, rep

    @zyntax.kernel(workgroup=(8, 8))
    def mm_t(at: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
        for i, j in lang.prange(c.shape[0], c.shape[1]):
            acc = zyntax.f32(0)
            for k in range(at.shape[0]):
                acc = lang.fma(at[k, i], b[k, j], acc)  # A transposed: k is the slow index
            c[i, j] = acc

    rep = mm_t.tiling_report()
    assert "rows padded by 1 against bank conflicts" in rep[2], rep
    r = rng()
    m, n, kk = 19, 23, 21
    at = r.standard_normal((kk, m)).astype(F32)
    b = r.standard_normal((kk, n)).astype(F32)
    got = run(mm_t, (m, n), at, b, np.empty((m, n), F32))
    np.testing.assert_allclose(got, at.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    c = run(example_mm, (m, n), np.ascontiguousarray(at.T), b, np.empty((m, n), F32))
    np.testing.assert_allclose(c, at.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_untileable_operands_are_reported_and_loaded_directly() -> None:
    @zyntax.kernel(workgroup=(4, 8))
    def mixed(a: F32C, b: F32C, w: F32C3, c: F32C):  # type: ignore[no-untyped-def]
        for i, j in lang.prange(c.shape[0], c.shape[1]):
            acc = zyntax.f32(0)
            n_k = a.shape[1]
            for k in range(n_k):
                # b: a permuted row (k * 7 % K) is not affine; w depends on i, j and k
                # (no reuse); c is written by the nest (aliasing).
                acc += a[i, k] * b[k * 7 % n_k, j] + w[i, j, k] + c[0, 0] * 0
            c[i, j] = acc

    rep = mixed.tiling_report()
    text = "\n".join(rep)
    assert "operand 0 (a[" in rep[2] and "tiled through shared memory" in rep[2], text
    assert "operand 1 (b[" in rep[3] and "not tiled: index is not affine" in rep[3], text
    assert "no reuse across the workgroup" in rep[4], text
    assert "the nest writes this buffer (aliasing)" in rep[5], text
    r = rng()
    m, n, kk = 9, 13, 14  # 7 and 14 share a factor: the permutation repeats rows
    a = r.standard_normal((m, kk)).astype(F32)
    b = r.standard_normal((kk, n)).astype(F32)
    w = r.standard_normal((m, n, kk)).astype(F32)
    c = np.zeros((m, n), F32)  # read by the kernel (c[0, 0] * 0): finite, not poisoned
    grid, block = mixed.launch_grid(m, n)
    interp.launch(mixed, grid, block, a, b, w, c)
    perm = (np.arange(kk) * 7) % kk
    want = a.astype(np.float64) @ b[perm] + w.sum(axis=2)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_nests_the_tiler_rejects_compile_untiled_with_the_reason() -> None:
    @zyntax.kernel(workgroup=(8, 8))
    def loads_first(a: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
        for i, j in lang.prange(c.shape[0], c.shape[1]):
            acc = a[i, 0] * 0  # a load before the reduction: not every thread may run it
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc

    @zyntax.kernel
    def no_workgroup(a: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
        for i, j in lang.prange(c.shape[0], c.shape[1]):
            acc = zyntax.f32(0)
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc

    rep = loads_first.tiling_report()
    assert len(rep) == 1 and "not tiled: line" in rep[0] and "memory-free" in rep[0], rep
    assert "barrier" not in loads_first.hir()
    assert (
        no_workgroup.tiling_report() == [no_workgroup.tiling_report()[0]]
        and "the kernel has no workgroup=" in no_workgroup.tiling_report()[0]
    )
    r = rng()
    m, n, kk = 11, 7, 5
    a = r.standard_normal((m, kk)).astype(F32)
    b = r.standard_normal((kk, n)).astype(F32)
    got = run(loads_first, (m, n), a, b, np.empty((m, n), F32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_compile_report_prints_the_tiling_of_a_python_file(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "zyntax.cli",
            "compile",
            str(EXAMPLE),
            "--report",
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "tiling of mm:" in out.stdout, out.stdout
    assert "operand 1 (b[b.strides[0]*k + 1*j]): tiled through shared memory" in out.stdout
    assert (tmp_path / "mm.ptx").is_file()


def test_a_1d_nest_stages_the_shared_vector_and_a_bound_inside_the_nest_tiles_nothing() -> None:
    @zyntax.kernel(workgroup=(64,))
    def matvec(a: F32C, x: F32V, y: F32V):  # type: ignore[no-untyped-def]
        for i in lang.prange(y.shape[0]):
            acc = zyntax.f32(0)
            for k in range(a.shape[1]):
                acc += a[i, k] * x[k]
            y[i] = acc

    @zyntax.kernel(workgroup=(4, 4))
    def lower(a: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
        for i, j in lang.prange(c.shape[0], c.shape[1]):
            acc = zyntax.f32(0)
            for k in range(i + 1):  # triangular: the bound depends on the nest index
                acc += a[i, k] * b[k, j]
            c[i, j] = acc

    rep = matvec.tiling_report()
    assert "operand 0 (a[" in rep[2] and "no reuse across the workgroup" in rep[2], rep
    assert "operand 1 (x[1*k]): tiled through shared memory, 1x16, reused across i" in rep[3], rep
    rep = lower.tiling_report()
    assert all("the reduction bound is not loop-invariant" in line for line in rep[2:]), rep
    assert "barrier" not in lower.hir()
    r = rng()
    m, kk = 100, 37
    a = r.standard_normal((m, kk)).astype(F32)
    x = r.standard_normal(kk).astype(F32)
    got = run(matvec, (m,), a, x, np.empty(m, F32))
    np.testing.assert_allclose(got, a.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)
    n = 11
    a = r.standard_normal((n, n)).astype(F32)
    b = r.standard_normal((n, n)).astype(F32)
    got = run(lower, (n, n), a, b, np.empty((n, n), F32))
    np.testing.assert_allclose(got, np.tril(a).astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


F64C = zyntax.Array[zyntax.f64, 2, "C"]


def mm64_fn(a: F64C, b: F64C, c: F64C):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(c.shape[0], c.shape[1]):
        acc = zyntax.f64(0)
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        c[i, j] = acc


def test_prange_tiles_shrink_to_the_shared_memory_of_a_block() -> None:
    """Workgroup (2, 512) of f64: b's 512 x 16 tile alone is 64 KiB, more
    than a block's 48 KiB (it built, and ptxas refused it); tile_k halves to
    8 (32 KiB) and the results stay exact."""
    tiled = zyntax.kernel(workgroup=(2, 512))(mm64_fn)
    rep = tiled.tiling_report()
    assert "tiled through shared memory, 512x8, reused across i" in rep[3], rep
    r = rng()
    m, n, kk = 3, 21, 19
    a, b = r.standard_normal((m, kk)), r.standard_normal((kk, n))
    got = run(tiled, (m, n), a, b, np.empty((m, n)))
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-12)
    want = run(untiled(mm64_fn, (2, 512)), (m, n), a, b, np.empty((m, n)))
    np.testing.assert_array_equal(got, want)
