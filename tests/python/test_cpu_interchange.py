"""Grid-stride loops interchanged with the block's thread loop on the CPU
(issue 27, docs/cpu.md "Loop interchange"): ``@zyntax.kernel`` sources in the
GPU style run natively (``mode="native"``) and give the interpreter's outputs
bit for bit on fresh random inputs with poisoned outputs — each thread's
accumulator keeps its own order — with trip counts that differ between
threads, a shared-memory tree and an atomic after the loop; the compiler's
report says it took the loops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import _native, cpu, hir, lang

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="this build has no interpreter binding"
)

rng = np.random.default_rng()
F32 = np.float32


@zyntax.kernel
def partials(x, out):
    """Per thread: the f32 sum of squares of its grid-stride walk."""
    acc = zyntax.f32(0)
    for i in range(lang.grid(1), len(x), lang.gridsize(1)):
        acc += x[i] * x[i]
    out[lang.grid(1)] = acc


@zyntax.kernel
def block_sum(x, out):
    """Grid-stride partial sums, a shared-memory tree, one atomic per block
    (the bench's reduce_sum on small integers: exact in any order)."""
    buf = lang.shared.array(128, zyntax.i32)
    tid = lang.thread_idx.x
    acc = zyntax.i32(0)
    for i in range(lang.grid(1), len(x), lang.gridsize(1)):
        acc += x[i]
    buf[tid] = acc
    lang.syncthreads()
    s = 64
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        lang.syncthreads()
        s //= 2
    if tid == 0:
        lang.atomic.add(out, 0, buf[0])


def report(k: Any, *args: object) -> str:
    m = hir.parse_zir(k.hir(args))
    return str(cpu.compiled(m).report_text)


def test_grid_stride_loops_against_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    # The default (compiled modules are kept per kernel: a test that turned
    # the interchange off would not recompile these).
    monkeypatch.delenv("ZYNTAX_CPU_INTERCHANGE", raising=False)
    blocks, threads = int(rng.integers(1, 6)), int(rng.integers(1, 200))
    n = int(rng.integers(1, 30 * blocks * threads))
    x = (rng.random(n) * 4 - 2).astype(F32)
    outs = [np.full(blocks * threads, np.nan, F32) for _ in range(2)]
    partials.run_cpu(x, outs[0], grid=blocks, block=threads, mode="native")
    partials.run_cpu(x, outs[1], grid=blocks, block=threads, mode="interp")
    assert np.array_equal(outs[0], outs[1])
    want = np.zeros(blocks * threads, np.float64)
    np.add.at(want, np.arange(n) % (blocks * threads), x.astype(np.float64) ** 2)
    assert np.allclose(outs[0], want, rtol=1e-5, atol=1e-5)
    assert "interchanged with the thread loop" in report(partials, x, outs[0])

    xi = rng.integers(-1000, 1000, int(rng.integers(1, 40_000))).astype(np.int32)
    sums = [np.full(1, 0, np.int32) for _ in range(2)]
    grid = int(rng.integers(1, 9))
    block_sum.run_cpu(xi, sums[0], grid=grid, block=128, mode="native")
    block_sum.run_cpu(xi, sums[1], grid=grid, block=128, mode="interp")
    assert sums[0][0] == sums[1][0] == int(xi.sum())
    assert "interchanged with the thread loop" in report(block_sum, xi, sums[0])


@zyntax.kernel
def rows2d(x, out):
    """A grid-stride walk over the linear thread index of a 2-D block: each
    row of threads (same y) has its own start, so rows rebuild their index
    from their own first thread (the SIMD-lane rows of docs/cpu.md)."""
    t = lang.thread_idx.y * lang.block_dim.x + lang.thread_idx.x
    nt = lang.block_dim.x * lang.block_dim.y
    g = lang.block_idx.x * nt + t
    acc = zyntax.f32(0)
    for i in range(g, len(x), nt * lang.grid_dim.x):
        acc += x[i] * zyntax.f32(1.5)
    out[g] = acc


@zyntax.kernel
def rounds(x, out):
    """The grid-stride loop inside an outer loop whose trip count differs
    between threads: threads of a row reach the loop's header from
    different outer rounds, where the row's index is not `u + x`; those
    iterations run thread by thread."""
    g = lang.grid(1)
    acc = zyntax.i32(0)
    for r in range(g % 3 + 1):
        for i in range(g + r, len(x), lang.gridsize(1)):
            acc += x[i] * (r + 1)
    out[g] = acc


def test_simd_rows_against_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZYNTAX_CPU_INTERCHANGE", raising=False)
    # SIMD-lane rows (off by default: threads run 8 iterations per stop);
    # read when these kernels compile, which is here.
    monkeypatch.setenv("ZYNTAX_CPU_AFFINE", "1")
    bx, by = int(rng.integers(1, 40)), int(rng.integers(1, 6))
    blocks = int(rng.integers(1, 5))
    total = bx * by * blocks
    x = (rng.random(int(rng.integers(1, 40 * total))) * 4 - 2).astype(F32)
    outs = [np.full(total, np.nan, F32) for _ in range(2)]
    rows2d.run_cpu(x, outs[0], grid=blocks, block=(bx, by), mode="native")
    rows2d.run_cpu(x, outs[1], grid=blocks, block=(bx, by), mode="interp")
    assert np.array_equal(outs[0], outs[1])
    want = np.zeros(total, np.float64)
    np.add.at(want, np.arange(len(x)) % total, x.astype(np.float64) * 1.5)
    assert np.allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    assert "interchanged with the thread loop" in report(rows2d, x, outs[0])

    threads, blocks = int(rng.integers(1, 100)), int(rng.integers(1, 4))
    total = threads * blocks
    xi = rng.integers(-1000, 1000, int(rng.integers(1, 30 * total))).astype(np.int32)
    iouts = [np.full(total, -7, np.int32) for _ in range(2)]
    rounds.run_cpu(xi, iouts[0], grid=blocks, block=threads, mode="native")
    rounds.run_cpu(xi, iouts[1], grid=blocks, block=threads, mode="interp")
    assert np.array_equal(iouts[0], iouts[1])
    iwant = np.zeros(total, np.int64)
    for g in range(total):
        for r in range(g % 3 + 1):
            iwant[g] += int(xi[g + r :: total].astype(np.int64).sum()) * (r + 1)
    assert np.array_equal(iouts[0], iwant.astype(np.int32))
    assert "interchanged with the thread loop" in report(rounds, xi, iouts[0])


@zyntax.kernel
def byte_hist(data, hist):
    """The bench's histogram: per-block shared bins counted by atomics whose
    old value nobody reads (interchanged: the same bins in any order)."""
    local = lang.shared.array(256, zyntax.u32)
    tid = lang.thread_idx.x
    local[tid] = 0
    lang.syncthreads()
    for i in range(lang.grid(1), len(data), lang.gridsize(1)):
        lang.atomic.add(local, zyntax.i32(data[i]), 1, scope="block")
    lang.syncthreads()
    lang.atomic.add(hist, tid, local[tid])


@pytest.mark.parametrize("affine", ["0", "1"])
@pytest.mark.parametrize("iters", ["1", "8"])
def test_histogram_loop_is_interchanged(
    monkeypatch: pytest.MonkeyPatch, affine: str, iters: str
) -> None:
    monkeypatch.delenv("ZYNTAX_CPU_INTERCHANGE", raising=False)
    monkeypatch.setenv("ZYNTAX_CPU_AFFINE", affine)
    # Iterations a thread runs before it stops at the loop's header (1: every one).
    monkeypatch.setenv("ZYNTAX_CPU_ITERS", iters)
    data = rng.integers(0, 256, int(rng.integers(1, 200_000))).astype(np.uint8)
    m = hir.parse_zir(byte_hist.hir([data, np.zeros(256, np.uint32)]))
    grid = int(rng.integers(1, 9))
    hists = [np.zeros(256, np.uint32) for _ in range(2)]
    # A module of its own, compiled here with these settings (the
    # kernel's cached module would keep the first test's); each array
    # parameter comes with its length and stride.
    args = (data, len(data), 1, hists[0], 256, 1)
    assert cpu.launch(m, "byte_hist", grid, 256, *args, mode="native") == "cpu"
    byte_hist.run_cpu(data, hists[1], grid=grid, block=256, mode="interp")
    assert np.array_equal(hists[0], hists[1])
    assert np.array_equal(hists[0], np.bincount(data, minlength=256))
    assert "interchanged with the thread loop" in str(cpu.compiled(m).report_text)
