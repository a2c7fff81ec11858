"""Front-end kernels run natively on the CPU by default (issue 27): every
``@zyntax.kernel`` of the examples and of the front-end tests, launched with
``run_cpu(mode="native")`` (which refuses to fall back to the interpreter),
gives the interpreter's (``mode="interp"``) outputs bit for bit on the same
fresh random inputs with poisoned outputs — barriers, shared memory, warp
shuffles in device functions, atomics and strided views included. Float
kernels run the same operations in the same order per thread, so they are
bit-exact too; where float atomics from many threads meet in one word (their
order differs between the two), the inputs are small integers, whose sums
are exact in any order. Then: the modes, the fallback, errors, and
``zyntax.cpu.launch`` on a HIR module."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernel_defs as kd
import zyntax
from conftest import ROOT
from zyntax import _native, cpu, hir, lang
from zyntax.frontend import pipeline

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="this build has no interpreter binding"
)

rng = np.random.default_rng()
F32 = np.float32


def example(name: str) -> Any:
    key = f"zk_{name}"
    if key not in sys.modules:
        path = ROOT / "examples" / "kernels" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


def poisoned(shape: Any, dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    fill = np.nan if dt.kind == "f" else (-12345 if dt.kind == "i" else 0xBEEF)
    return np.full(shape, fill, dt)


def nonzero_ints(n: int, lo: int, hi: int) -> np.ndarray:
    x = rng.integers(lo, hi, n).astype(np.int32)
    x[x == 0] = 7
    return x


def small_int_floats(n: int) -> np.ndarray:
    return rng.integers(0, 64, n).astype(F32)


# name -> (kernel, argument maker, grid, block, shared bytes)
Case = tuple[Any, Callable[[], tuple[Any, ...]], Any, Any, int]


def cases() -> dict[str, Case]:
    ex = example
    n = 300
    return {
        "arith": (
            kd.arith,
            lambda: (
                nonzero_ints(70, -50, 50),
                nonzero_ints(70, -9, 9),
                poisoned(70, F32),
                poisoned(70, np.int32),
                poisoned(70, np.int32),
            ),
            3,
            32,
            0,
        ),
        "control": (
            kd.control,
            lambda: (rng.integers(0, 100, 45).astype(np.int32), poisoned((50, 5), np.int32), 45),
            2,
            32,
            0,
        ),
        "widen": (kd.widen, lambda: (rng.random(37).astype(F32), poisoned(1, F32)), 1, 1, 0),
        "strided2d": (
            kd.strided2d,
            lambda: (rng.random((9, 13)).astype(F32).T, poisoned((13, 9), F32)),
            (1, 1),
            (16, 16),
            0,
        ),
        "vector_add": (
            ex("vector_add").vector_add,
            lambda: (rng.random(n).astype(F32), rng.random(n).astype(F32), poisoned(n, F32)),
            3,
            128,
            0,
        ),
        "saxpy": (
            ex("vector_add").saxpy,
            lambda: (F32(rng.random() + 0.5), rng.random(n).astype(F32), rng.random(n).astype(F32)),
            3,
            128,
            0,
        ),
        "transpose": (
            ex("transpose").transpose,
            lambda: (rng.random((37, 45)).astype(F32), poisoned((45, 37), F32)),
            (2, 2),
            (32, 8),
            0,
        ),
        "sgemm": (
            ex("sgemm").sgemm,
            lambda: (
                rng.random((20, 19)).astype(F32),
                rng.random((19, 23)).astype(F32),
                poisoned((20, 23), F32),
            ),
            (2, 2),
            (16, 16),
            0,
        ),
        "block_sum": (
            ex("reduction").block_sum,
            lambda: (rng.random(600).astype(F32), poisoned(3, F32)),
            3,
            256,
            0,
        ),
        "warp_shuffle_sum": (
            ex("reduction").warp_shuffle_sum,
            lambda: (small_int_floats(600), np.zeros(1, F32)),
            5,
            128,
            0,
        ),
        "block_scan": (
            ex("scan").block_scan,
            lambda: (rng.random(200).astype(F32), poisoned(200, F32)),
            1,
            256,
            0,
        ),
        "histogram": (
            ex("histogram").histogram,
            lambda: (rng.integers(-500, 1000, 900).astype(np.int32), np.zeros(64, np.uint32)),
            3,
            64,
            0,
        ),
        "softmax": (
            ex("softmax").softmax,
            lambda: (rng.standard_normal((3, 150)).astype(F32), poisoned((3, 150), F32)),
            3,
            128,
            0,
        ),
        "prange_matmul": (
            ex("prange_matmul").mm,
            lambda: (
                rng.random((33, 20)).astype(F32),
                rng.random((20, 40)).astype(F32),
                poisoned((33, 40), F32),
            ),
            ex("prange_matmul").mm.launch_grid(33, 40)[0],
            ex("prange_matmul").mm.launch_grid(33, 40)[1],
            0,
        ),
    }


@pytest.mark.parametrize("name", sorted(cases()))
def test_native_equals_interpreter(name: str) -> None:
    kern, make, grid, block, shared = cases()[name]
    args = make()
    native = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interp = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    kern.run_cpu(*native, grid=grid, block=block, shared_mem=shared, mode="native")
    kern.run_cpu(*interp, grid=grid, block=block, shared_mem=shared, mode="interp")
    for k, (a, b) in enumerate(zip(native, interp, strict=True)):
        if isinstance(a, np.ndarray) and name == "softmax":
            # exp: libm against the interpreter's own (docs/cpu.md: within 2 ulp,
            # then a division by their sum)
            assert ulps(a, b).max() <= 4, f"{name}: argument {k}"
        elif isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{name}: argument {k}"
            if a.dtype.kind == "f":
                assert not np.isnan(a).all(), f"{name}: argument {k} was never written"


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between f32 arrays of one sign."""
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_math_functions_within_documented_ulps() -> None:
    """Transcendentals come from LLVM's libm natively and from the interpreter's
    own routines: rsqrt, exp, log, tanh within 2 ulp; sin + cos within 4e-7
    absolute (two 2-ulp errors, then a sum that may cancel); sqrt, floor, ceil,
    fma, min, max, abs bit-exact (docs/cpu.md)."""
    x = (rng.random(4000) * 3 + 0.1).astype(F32)
    got, want = poisoned((9, 4000), F32), poisoned((9, 4000), F32)
    kd.mathk.run_cpu(x, got, grid=125, block=32, mode="native")
    kd.mathk.run_cpu(x, want, grid=125, block=32, mode="interp")
    for row in (0, 6, 7, 8):
        assert np.array_equal(got[row], want[row]), f"row {row}"
    for row in (1, 2, 3, 5):
        assert ulps(got[row], want[row]).max() <= 2, f"row {row}"
    assert np.abs(got[4] - want[4]).max() <= 4e-7


def test_default_is_native_and_the_result_is_right() -> None:
    """``run_cpu`` without a mode compiles the variant for the CPU (kept on it)."""
    m = example("reduction")
    x = rng.random(1000).astype(F32)
    partial = poisoned(4, F32)
    m.block_sum.run_cpu(x, partial, grid=4, block=256)
    (v,) = m.block_sum._variants.values()
    # The variant's module went through the CPU backend, as a native kernel.
    module = pipeline.native_module(v)
    assert id(module) in cpu._COMPILED
    kinds = {f["name"]: f["kind"] for f in cpu.compiled(module).functions}
    assert kinds[v.kernel_name] == "cpu_kernel"
    for k in range(4):
        assert np.isclose(partial[k], x[k * 256 : (k + 1) * 256].sum(dtype=np.float64), rtol=1e-5)


def test_strided_output_is_written_back() -> None:
    base = poisoned((13, 9), F32)
    out = base.T  # a non-contiguous view: the kernel writes a copy, copied back
    a = rng.random((9, 13)).astype(F32)
    kd.strided2d.run_cpu(a, out, grid=(1, 1), block=(16, 16), mode="native")
    assert np.array_equal(base.T, a * 2 + 2)


def test_mma_kernel_native_mode_names_the_op_and_auto_uses_the_interpreter() -> None:
    @zyntax.kernel
    def mma_tile(a, b, c):
        fa = lang.mma.load_a(a, 16)
        fb = lang.mma.load_b(b, 16)
        acc = lang.mma.fill(0.0)
        acc = lang.mma.mma(fa, fb, acc)
        lang.mma.store(c, acc, 16)

    a = rng.random((16, 16)).astype(np.float16)
    b = rng.random((16, 16)).astype(np.float16)
    c = poisoned(256, F32)
    with pytest.raises(zyntax.CompileError, match="mma"):
        mma_tile.run_cpu(a.ravel(), b.ravel(), c, grid=1, block=32, mode="native")
    mma_tile.run_cpu(a.ravel(), b.ravel(), c, grid=1, block=32)  # auto: the interpreter
    assert np.allclose(c.reshape(16, 16), a.astype(F32) @ b.astype(F32), rtol=1e-3, atol=1e-3)


def test_unknown_mode_is_an_argument_error(monkeypatch: pytest.MonkeyPatch) -> None:
    x = rng.random(8).astype(F32)
    with pytest.raises(zyntax.ArgumentError, match="mode"):
        kd.widen.run_cpu(x, np.zeros(1, F32), grid=1, block=1, mode="fast")
    monkeypatch.setenv("ZYNTAX_CPU_MODE", "gpu")
    with pytest.raises(zyntax.ArgumentError, match="ZYNTAX_CPU_MODE"):
        kd.widen.run_cpu(x, np.zeros(1, F32), grid=1, block=1)


def test_environment_selects_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ZYNTAX_CPU_MODE=interp`` is the checking mode: a shared-memory race the
    native code cannot see is the interpreter's TrapError."""

    @zyntax.kernel
    def racy(out):
        buf = lang.shared.array(32, zyntax.i32)
        t = lang.thread_idx.x
        buf[0] = t  # every thread writes one word, no barrier
        lang.syncthreads()
        out[t] = buf[0]

    out = np.zeros(32, np.int32)
    racy.run_cpu(out, grid=1, block=32)  # native: runs (the last writer wins)
    assert out.min() >= 0 and out.max() < 32
    monkeypatch.setenv("ZYNTAX_CPU_MODE", "interp")
    with pytest.raises(zyntax.TrapError):
        racy.run_cpu(out, grid=1, block=32)


def test_out_of_bounds_is_a_trap_natively() -> None:
    @zyntax.kernel
    def over(x, out):
        i = lang.grid(1)
        out[i] = x[i + 1]  # no guard: the last thread reads past x

    x = rng.random(32).astype(F32)
    with pytest.raises(zyntax.TrapError, match="out of bounds"):
        over.run_cpu(x, poisoned(32, F32), grid=1, block=32, mode="native")


def test_cpu_launch_of_a_hir_module_against_the_interpreter() -> None:
    m = hir.parse_zir((ROOT / "examples" / "saxpy.zir").read_text())
    n = 1000
    a = F32(rng.random() * 4 - 2)
    x = rng.random(n).astype(F32)
    y = rng.random(n).astype(F32)
    ys = [y.copy(), y.copy()]
    assert cpu.launch(m, "saxpy", 4, 256, n, a, x, ys[0], mode="native") == "cpu"
    assert cpu.launch(m, "saxpy", 4, 256, n, a, x, ys[1], mode="interp") == "interp"
    assert np.array_equal(ys[0], ys[1])
    assert np.allclose(ys[0], np.float64(a) * x + y, rtol=1e-6, atol=1e-6)
    assert cpu.compiled(m) is cpu.compiled(m)  # compiled once per module


# --------------------------------------------------------------------------- other front-ends


def both_modes(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> tuple[Any, Any]:
    """`run()` natively (``ZYNTAX_CPU_MODE=native``: no silent fallback) and
    on the interpreter."""
    monkeypatch.setenv("ZYNTAX_CPU_MODE", "native")
    got = run()
    monkeypatch.setenv("ZYNTAX_CPU_MODE", "interp")
    want = run()
    monkeypatch.delenv("ZYNTAX_CPU_MODE")
    return got, want


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "saxpy", "reduce_max"])
def test_kernel_library_with_numpy_inputs(monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    from zyntax import kernels

    x = (rng.standard_normal((5, 301)) * 3).astype(F32)
    w = rng.standard_normal(301).astype(F32)
    b = rng.standard_normal(301).astype(F32)
    y = rng.standard_normal(301).astype(F32)
    runs: dict[str, Callable[[], Any]] = {
        "softmax": lambda: kernels.softmax(x),
        "layer_norm": lambda: kernels.layer_norm(x, w, b, 1e-5),
        "rms_norm": lambda: kernels.rms_norm(x, w, 1e-6),
        "saxpy": lambda: kernels.saxpy(1.5, w, y.copy()),
        "reduce_max": lambda: kernels.reduce_max(x, axis=-1),
    }
    got, want = both_modes(monkeypatch, runs[op])
    assert not np.isnan(got).any()
    if op in ("saxpy", "reduce_max"):
        assert np.array_equal(got, want)
    else:  # exp and rsqrt: libm against the interpreter's routines (docs/cpu.md)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_kernel_library_reduce_sum_of_small_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Float atomics meet in one word: small integers sum exactly in any order."""
    from zyntax import kernels

    x = small_int_floats(5000)
    got, want = both_modes(monkeypatch, lambda: kernels.reduce_sum(x))
    assert float(got) == float(want) == float(x.sum(dtype=np.float64))


@pytest.mark.parametrize("prog", ["gemm", "gemm_transposed_a", "softmax", "reduce_sum"])
def test_tile_program_natively(prog: str) -> None:
    """Tile programs (zyntax.tile: shared tiles, barriers, warp reductions)
    natively give the interpreter's results; ``run_cpu`` says where it ran."""
    import test_tile as tt
    from zyntax import tile

    m, n, kk = 37, 45, 29
    if prog.startswith("gemm"):
        k = tt.gemm(tile.Schedule((16, 16), k=8, warps=2))
        a = rng.standard_normal((kk, m) if prog.endswith("_a") else (m, kk)).astype(F32)
        a = a.T if prog.endswith("_a") else a  # a transposed (strided) view
        args: tuple[Any, ...] = (a, rng.standard_normal((kk, n)).astype(F32))
        out, grid = (m, n), k.grid(m, n)
    elif prog == "softmax":
        k = tt.softmax(tile.Schedule((4, 64), warps=4))
        args, out, grid = ((rng.standard_normal((m, 50)) * 8).astype(F32),), (m, 50), k.grid(m, 1)
    else:
        k = tt.reduce(tile.Schedule((32, 64), warps=4), "sum", 1)
        args, out, grid = (rng.standard_normal((29, 45)).astype(F32),), (29, 1), 1
    c1, c2 = poisoned(out, F32), poisoned(out, F32)
    assert k.run_cpu(*args, c1, grid=grid, mode="native") == "cpu"
    k.run_interp(*args, c2, grid=grid)
    assert not np.isnan(c1).any()
    if prog == "softmax":  # exp: libm against the interpreter's (docs/cpu.md)
        assert ulps(c1, c2).max() <= 4
    else:
        assert np.array_equal(c1, c2)


def test_nest_natively() -> None:
    from test_nest_tile import map_spec
    from zyntax.tiling import nest_to_tile

    m, n = 37, 45
    nt = nest_to_tile(map_spec(m, n))
    x = rng.uniform(-1, 1, (m, n)).astype(F32)
    bias = rng.uniform(-1, 1, n).astype(F32)
    y1, y2 = poisoned((m, n), F32), poisoned((m, n), F32)
    assert nt.run_cpu(x, bias, y1, mode="native") == "cpu"
    nt.run_interp(x, bias, y2)
    # exp: libm against the interpreter's, within 2 ulp of exp (docs/cpu.md);
    # counted in the result's ulps that was flaky: where exp(x) * 0.5 + bias
    # nearly cancels, 1 ulp of exp is many of the result.
    e = np.exp(x.astype(np.float64)).astype(F32)
    tol = 2 * np.spacing(e * F32(0.5)) + np.spacing(np.abs(y2))
    assert np.all(np.abs(y1 - y2) <= tol)
    np.testing.assert_allclose(y1, np.exp(x.astype(np.float64)) * 0.5 + bias, rtol=1e-5, atol=1e-6)


def test_fusion_sequence_natively() -> None:
    from test_fusion import chain, chain_ref

    n, length = 1000, 6
    x = rng.standard_normal(n).astype(F32)
    for f in (chain(n, length).fuse(), chain(n, length).fuse(enabled=False)):
        y1, y2 = poisoned(n, F32), poisoned(n, F32)
        f.run_cpu({"x": x, "y": y1}, mode="native")
        f.run_interp({"x": x, "y": y2})
        assert np.array_equal(y1, y2)
        np.testing.assert_allclose(y1, chain_ref(x, length), rtol=1e-5, atol=1e-5)


def test_dsl_example_natively() -> None:
    pytest.importorskip("lark", reason="lark is a test dependency (scripts/deps.sh)")
    sys.path.insert(0, str(ROOT / "examples" / "dsl"))
    import zdsl

    p = zdsl.compile_dsl((ROOT / "examples" / "dsl" / "matmul.zk").read_text(), "matmul.zk")
    m, n, k = 21, 35, 9
    a = rng.standard_normal((m, k)).astype(F32)
    b = rng.standard_normal((k, n)).astype(F32)
    got = p.run_cpu({"A": a, "B": b, "out": poisoned((m, n), F32)}, mode="native")
    want = p.run_cpu({"A": a, "B": b, "out": poisoned((m, n), F32)}, mode="interp")
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_warp_collectives_of_the_language_run_natively() -> None:
    """ballot, match.any, redux, elect and a shfl.xor butterfly written with
    ``lang`` run natively (``mode="native"``) and equal the interpreter."""
    full = 0xFFFFFFFF

    @zyntax.kernel
    def warp(x, keys, ballots, matches, sums, reds, leads):
        i = lang.grid(1)
        v = x[i]
        ballots[i] = lang.vote_ballot_sync(full, v > 0.5)
        matches[i] = lang.match_any_sync(full, keys[i])
        s = v
        for k in range(5):
            s += lang.shfl_xor_sync(full, s, 1 << k)
        sums[i] = s
        reds[i] = lang.reduce_add_sync(full, keys[i])
        leads[i] = 1 if lang.elect_sync() else 0

    n = 96
    x = small_int_floats(n) / F32(64)
    keys = rng.integers(0, 3, n).astype(np.uint32)
    outs = [
        poisoned(n, np.uint32),
        poisoned(n, np.uint32),
        poisoned(n, F32),
        poisoned(n, np.uint32),
        poisoned(n, np.int32),
    ]
    native = [o.copy() for o in outs]
    warp.run_cpu(x, keys, *native, grid=1, block=n, mode="native")
    warp.run_cpu(x, keys, *outs, grid=1, block=n, mode="interp")
    for a, b in zip(native, outs, strict=True):
        assert np.array_equal(a, b)
    assert (native[4] == (np.arange(n) % 32 == 0)).all()


def test_simd_lane_option_against_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ZYNTAX_CPU_VECTOR=1`` (read when a module is compiled) runs the threads
    of a block as SIMD lanes (docs/cpu.md): a barrier-free kernel and one with
    barriers and shared atomics give the interpreter's results, and an
    out-of-bounds access still names its index (the block re-runs checked)."""
    monkeypatch.setenv("ZYNTAX_CPU_VECTOR", "1")
    m = hir.parse_zir((ROOT / "examples" / "saxpy.zir").read_text())
    assert "saxpy.zx_fast" in cpu.compiled(m).llvm_ir
    n = int(rng.integers(300, 2000))
    a = F32(rng.random() * 4 - 2)
    x = rng.random(n).astype(F32)
    y = rng.random(n).astype(F32)
    ys = [y.copy(), y.copy()]
    blocks = -(-n // 256)
    assert cpu.launch(m, "saxpy", blocks, 256, n, a, x, ys[0], mode="native") == "cpu"
    cpu.launch(m, "saxpy", blocks, 256, n, a, x, ys[1], mode="interp")
    assert np.array_equal(ys[0], ys[1])
    short = rng.random(n - 5).astype(F32)
    with pytest.raises(zyntax.TrapError, match=f"index {n - 5} out of bounds"):
        cpu.launch(m, "saxpy", blocks, 256, n, a, x, short, mode="native")
    h = hir.parse_zir((ROOT / "examples" / "histogram.zir").read_text())
    assert "histogram.zx_fast" in cpu.compiled(h).llvm_ir
    data = rng.integers(0, 256, int(rng.integers(1000, 5000))).astype(np.uint8)
    bins = [np.zeros(256, np.uint32), np.zeros(256, np.uint32)]
    cpu.launch(h, "histogram", 5, 64, data, len(data), bins[0], mode="native")
    cpu.launch(h, "histogram", 5, 64, data, len(data), bins[1], mode="interp")
    assert np.array_equal(bins[0], bins[1])
    assert np.array_equal(bins[0], np.bincount(data, minlength=256))
