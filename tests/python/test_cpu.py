"""CPU backend (`zyntax._native.cpu_compile`): every host example and the CPU
kernels against numpy and the reference interpreter, on fresh random inputs;
argument and bounds errors; constraint errors; the optimizer report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zyntax import _native as native
from zyntax import hir
from zyntax.errors import ArgumentError, CompileError, TrapError, VerifyError

try:
    from zyntax import interp
except ImportError:  # a build without the interpreter: compare with numpy only
    interp = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
rng = np.random.default_rng()


def load(rel: str) -> hir.Module:
    path = ROOT / rel
    return hir.parse_zir(path.read_text(), str(path))


def interp_call(m: hir.Module, name: str, *args: Any) -> Any:
    return None if interp is None else interp.call(m, name, *args)


# ---------------------------------------------------------------- host examples


def test_host_latency_example_matches_numpy_and_interpreter() -> None:
    m = load("examples/host_latency.zir")
    cm = native.cpu_compile(m)
    for n in (1, 7, int(rng.integers(100, 3000))):
        x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
        got = cm["dot"](x, y, n)
        assert got == pytest.approx(float(x @ y), rel=1e-12, abs=1e-12)
        ref = interp_call(m, "dot", x, y, n)
        if ref is not None:
            assert got == ref  # same fma order: bit-identical
        lo, hi = sorted(rng.uniform(-5, 5, 2))
        assert cm["clamp_score"](x, y, n, lo, hi) == min(max(got, lo), hi)


def test_critical_host_example() -> None:
    m = load("examples/critical_host.zir")
    cm = native.cpu_compile(m)
    cap = int(rng.integers(4, 64))
    ring = rng.uniform(-10, 10, cap)
    for _ in range(50):
        head = int(rng.integers(0, 1000))
        k = int(rng.integers(1, cap + 1))
        v = float(rng.uniform(-10, 10))
        expect = ring.copy()
        expect[head % cap] = v
        want = np.mean([expect[(head + cap - i) % cap] for i in range(k)])
        got = cm["push_and_average"](ring, cap, head, v, k)
        np.testing.assert_array_equal(ring, expect)
        assert got == pytest.approx(want, rel=1e-12)
    for _ in range(200):
        pos, qty, lim = (int(v) for v in rng.integers(-1000, 1000, 3))
        px, notional = float(rng.uniform(1, 200)), float(rng.uniform(0, 1e5))
        want = abs(pos + qty) <= lim and abs(qty * px) <= notional
        got = cm["risk_check"](pos, qty, lim, px, notional)
        assert got is want
        ref = interp_call(m, "risk_check", pos, qty, lim, px, notional)
        if ref is not None:
            assert bool(ref) is got


# ---------------------------------------------------------------- trading functions (benches)


def book_ref(prices: list[float], sizes: list[float], cap: int, price: float, size: float) -> None:
    """Reference sorted-book update on Python lists."""
    pos = sum(1 for p in prices if p < price)
    if pos < len(prices) and prices[pos] == price:
        if size != 0.0:
            sizes[pos] = size
        else:
            del prices[pos], sizes[pos]
        return
    if size == 0.0 or len(prices) >= cap:
        return
    prices.insert(pos, price)
    sizes.insert(pos, size)


def test_trading_orderbook_random_updates() -> None:
    cm = native.cpu_compile(load("benches/zir/trading.zir"))
    cap = 32
    prices, sizes = np.zeros(cap), np.zeros(cap)
    ref_p: list[float] = []
    ref_s: list[float] = []
    depth = 0
    grid = np.round(100 + np.arange(48) * 0.25, 2)
    for _ in range(2000):
        price = float(rng.choice(grid))
        size = 0.0 if rng.random() < 0.35 else float(rng.integers(1, 100))
        depth = cm["orderbook_update"](prices, sizes, depth, cap, price, size)
        book_ref(ref_p, ref_s, cap, price, size)
        assert depth == len(ref_p)
        np.testing.assert_array_equal(prices[:depth], ref_p)
        np.testing.assert_array_equal(sizes[:depth], ref_s)


def test_trading_ma_signal_and_position_and_risk() -> None:
    cm = native.cpu_compile(load("benches/zir/trading.zir"))
    cap, fast, slow = 64, 8, 32
    ring = np.zeros(cap)
    state = np.zeros(2, dtype=np.int64)
    hist: list[float] = []
    for _ in range(500):
        p = float(100 + rng.normal())
        got = cm["ma_signal"](ring, state, cap, p, fast, slow)
        hist.append(p)
        last = hist[-cap:]
        f = np.sum(last[::-1][: min(fast, len(last))]) / min(fast, len(last))
        s = np.sum(last[::-1][: min(slow, len(last))]) / min(slow, len(last))
        want = 1 if f > s else (-1 if f < s else 0)
        # Sums in the same order as the loop, so ties are exact; compare robustly anyway.
        if abs(f - s) > 1e-9:
            assert got == want
    pos = np.array([0.0, 0.0, 0.0])
    q, avg, realized = 0.0, 0.0, 0.0
    for _ in range(500):
        fq = float(rng.integers(-20, 21))
        fp = float(np.round(rng.uniform(90, 110), 2))
        nq = q + fq
        if q * fq >= 0:
            navg = (q * avg + fq * fp) / nq if nq != 0 else 0.0
            pnl = 0.0
        else:
            closed = min(abs(fq), abs(q)) * (1.0 if q > 0 else -1.0)
            pnl = closed * (fp - avg)
            navg = fp if abs(fq) > abs(q) else avg
        navg = 0.0 if nq == 0 else navg
        got = cm["position_update"](pos, fq, fp)
        q, avg, realized = nq, navg, realized + pnl
        assert got == pytest.approx(pnl, rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(pos, [q, avg, realized], rtol=1e-9, atol=1e-9)
    for _ in range(300):
        a = (
            int(rng.integers(-500, 500)),
            int(rng.integers(-500, 500)),
            float(rng.uniform(90, 110)),
            100.0,
            int(rng.integers(0, 800)),
            float(rng.uniform(0, 6e4)),
            0.05,
        )
        want = (
            abs(a[0] + a[1]) <= a[4]
            and abs(a[1] * a[2]) <= a[5]
            and abs(a[2] - a[3]) <= a[6] * a[3]
        )
        assert cm["risk_check"](*a) is want


# ---------------------------------------------------------------- kernels


GRID_STRIDE_SUM = """
module "gsum" targets(sm_80)

kernel @gsum {
block0(v0: ptr<global, f32>, v1: ptr<global, u32>, v2: ptr<global, f32>, v3: u32):
    v4: u32 = block_idx.x
    v5: u32 = block_dim.x
    v6: u32 = mul v4, v5
    v7: u32 = thread_idx.x
    v8: u32 = add v6, v7
    v9: u32 = grid_dim.x
    v10: u32 = mul v9, v5
    jump block1(v8)
block1(v11: u32):
    v12: bool = cmp.lt v11, v3
    br v12, block2, block3
block2:
    v13: ptr<global, f32> = ptr_add v0, v11
    v14: f32 = load v13
    v15: f32 = mul v14, v14
    v16: ptr<global, f32> = ptr_add v2, v11
    store v16, v15
    v17: u32 = const 1
    v18: u32 = atomic.add.device v1, v17
    v19: u32 = add v11, v10
    jump block1(v19)
block3:
    return
}
"""


def test_cpu_kernels_match_numpy_and_interpreter() -> None:
    m = load("examples/saxpy.zir")
    cm = native.cpu_compile(m)
    assert {f["name"]: f["kind"] for f in cm.functions}["saxpy"] == "cpu_kernel"
    n = int(rng.integers(1000, 5000))
    a = np.float32(rng.uniform(-2, 2))
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y = rng.uniform(-1, 1, n).astype(np.float32)
    want = (a * x + y).astype(np.float32)
    y_interp = y.copy()
    assert cm.launch("saxpy", (n + 255) // 256, 256, n, a, x, y) == "cpu"
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    if interp is not None:
        interp.launch(m, "saxpy", (n + 255) // 256, 256, n, a, x, y_interp)
        np.testing.assert_array_equal(y, y_interp)

    m2 = hir.parse_zir(GRID_STRIDE_SUM)
    cm2 = native.cpu_compile(m2)
    n = int(rng.integers(10_000, 50_000))
    x = rng.uniform(-3, 3, n).astype(np.float32)
    cnt = np.zeros(1, dtype=np.uint32)
    out = np.zeros(n, dtype=np.float32)
    assert cm2.launch("gsum", 7, 64, x, cnt, out, n) == "cpu"
    np.testing.assert_array_equal(out, x * x)
    assert int(cnt[0]) == n


def test_barrier_kernels_run_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/histogram.zir (barriers, shared memory, shared atomics) runs
    natively, region by region between barriers; against numpy and the
    interpreter. `interp_kernels` still forces the interpreter."""
    m = load("examples/histogram.zir")
    cm = native.cpu_compile(m)
    info = {f["name"]: f for f in cm.functions}["histogram"]
    assert info["kind"] == "cpu_kernel"
    data = rng.integers(0, 256, int(rng.integers(500, 30000))).astype(np.uint8)
    blocks = int(rng.integers(1, 9))
    bins = np.zeros(256, dtype=np.uint32)
    assert cm.launch("histogram", blocks, 64, data, len(data), bins) == "cpu"
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=256))
    monkeypatch.setenv("ZYNTAX_CPU_THREADS", "1")  # the whole grid on this thread
    one = np.zeros(256, dtype=np.uint32)
    assert cm.launch("histogram", blocks, 64, data, len(data), one) == "cpu"
    np.testing.assert_array_equal(one, bins)
    if interp is None:
        return
    ref = np.zeros(256, dtype=np.uint32)
    interp.launch(m, "histogram", blocks, 64, data, len(data), ref)
    np.testing.assert_array_equal(bins, ref)
    forced = native.cpu_compile(m, interp_kernels=["histogram"])
    info = {f["name"]: f for f in forced.functions}["histogram"]
    assert info["kind"] == "interp_kernel"
    bins2 = np.zeros(256, dtype=np.uint32)
    assert forced.launch("histogram", blocks, 64, data, len(data), bins2) == "interp"
    np.testing.assert_array_equal(bins2, ref)


SPLIT_BARRIER = """module "split" version(2) targets(sm_80)

kernel @split {
block0(v0: ptr<global, u32>, v1: u32):
    v2: u32 = thread_idx.x
    v3: bool = cmp.lt v2, v1
    br v3, block1, block2
block1:
    barrier
    jump block3
block2:
    barrier
    jump block3
block3:
    v4: ptr<global, u32> = ptr_add v0, v2
    store v4, v2
    return
}
"""


def test_divergent_barrier_is_a_trap_error() -> None:
    """Threads of a block waiting at two different barriers: TrapError on the
    CPU (the interpreter traps too); when all threads take one side, it runs."""
    m = hir.parse_zir(SPLIT_BARRIER)
    cm = native.cpu_compile(m)
    out = np.zeros(64, dtype=np.uint32)
    k = int(rng.integers(1, 64))
    with pytest.raises(TrapError, match="divergent barrier") as e:
        cm.launch("split", 2, 64, out, k)
    assert e.value.kind == "divergent_barrier"
    assert cm.launch("split", 2, 64, out, 64) == "cpu"
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32))


def test_warp_shuffles_run_on_the_cpu() -> None:
    """examples/reduce_sum.zir (shfl.down warp sums, shared partials, a
    barrier, warp 0 reducing them, an atomic) runs natively; against numpy
    (small integers: every partial sum is exact in f32) and the interpreter."""
    m = load("examples/reduce_sum.zir")
    cm = native.cpu_compile(m)
    assert {f["name"]: f for f in cm.functions}["block_sum"]["kind"] == "cpu_kernel"
    n = int(rng.integers(1, 5000))
    x = rng.integers(0, 100, n).astype(np.float32)
    blocks = (n + 255) // 256
    out = np.zeros(1, dtype=np.float32)
    assert cm.launch("block_sum", blocks, 256, x, out, n) == "cpu"
    assert out[0] == x.sum(dtype=np.float64)
    if interp is not None:
        ref = np.zeros(1, dtype=np.float32)
        interp.launch(m, "block_sum", blocks, 256, x, ref, n)
        assert out[0] == ref[0]


PARTIAL_SHFL = """module "p" version(2) targets(sm_80)

kernel @partial {
block0(v0: ptr<global, u32>, v1: u32):
    v2: u32 = thread_idx.x
    v3: bool = cmp.lt v2, v1
    br v3, block1, block2
block1:
    v4: u32 = const 4294967295
    v5: u32 = const 1
    v6: u32 = shfl.xor v4, v2, v5 width 32
    v7: ptr<global, u32> = ptr_add v0, v2
    store v7, v6
    jump block2
block2:
    return
}
"""


def test_collective_naming_a_returned_lane_is_a_trap_error() -> None:
    """A full-mask shuffle reached by only some lanes of a warp (the others
    returned) never completes: TrapError on the CPU; with every lane it runs."""
    cm = native.cpu_compile(hir.parse_zir(PARTIAL_SHFL))
    out = np.zeros(32, dtype=np.uint32)
    with pytest.raises(TrapError, match="divergent warp collective") as e:
        cm.launch("partial", 1, 32, out, int(rng.integers(1, 32)))
    assert e.value.kind == "divergent_collective"
    assert cm.launch("partial", 1, 32, out, 32) == "cpu"
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.uint32) ^ 1)


# ---------------------------------------------------------------- errors and report


def test_wrong_arguments_raise_argument_error_with_signature() -> None:
    cm = native.cpu_compile(load("examples/host_latency.zir"))
    x = rng.uniform(size=8)
    sig = "@dot(ptr<generic, f64>, ptr<generic, f64>, u64) -> f64"
    with pytest.raises(ArgumentError, match=r"@dot\(ptr<generic, f64>.*float32"):
        cm["dot"](x, x.astype(np.float32), 8)
    with pytest.raises(ArgumentError, match="takes 3 argument"):
        cm["dot"](x, x)
    with pytest.raises(ArgumentError, match="expected an integer"):
        cm["dot"](x, x, 8.0)
    with pytest.raises(ArgumentError, match="does not fit u64"):
        cm["dot"](x, x, -1)
    with pytest.raises(ArgumentError, match="C-contiguous"):
        cm["dot"](x[::2], x[::2], 4)
    # @dot only reads its arrays: read-only ones are accepted (test_boundary.py
    # checks that a written one is refused).
    ro = x.copy()
    ro.flags.writeable = False
    assert cm["dot"](ro, x, 8) == pytest.approx(float(x @ x))
    with pytest.raises(ArgumentError, match="numpy array"):
        cm["dot"]([1.0] * 8, x, 8)
    assert cm["dot"].signature == sig


def test_out_of_bounds_raises_trap_error_naming_function_and_index() -> None:
    cm = native.cpu_compile(load("examples/host_latency.zir"))
    n = int(rng.integers(5, 50))
    x, y = rng.uniform(size=n), rng.uniform(size=n - 2)
    with pytest.raises(TrapError, match=rf"@dot: index {n - 2} out of bounds for parameter 1") as e:
        cm["dot"](x, y, n)
    info = {a: getattr(e.value, a) for a in ("index", "length", "function")}
    assert info == {"index": n - 2, "length": n - 2, "function": "dot"}


def test_unmeetable_constraints_are_compile_errors() -> None:
    # Recursion reachable from a no_alloc function means unbounded stack: the
    # verifier rejects it (and the optimizer's proof would too).
    rec = """
module "bad"

host @fact -> i64 {
block0(v0: i64):
    v1: i64 = const 1
    v2: bool = cmp.le v0, v1
    br v2, block1, block2
block1:
    return v1
block2:
    v3: i64 = sub v0, v1
    v4: i64 = call @fact v3
    v5: i64 = mul v0, v4
    return v5
}

host @top -> i64 no_alloc {
block0(v0: i64):
    v1: i64 = call @fact v0
    return v1
}
"""
    with pytest.raises(
        VerifyError, match=r"in @top: no_alloc function reaches recursion[\s\S]*@fact -> @fact"
    ):
        native.cpu_compile(hir.parse_zir(rec))
    # Without the constraint the same module compiles and runs.
    ok = native.cpu_compile(hir.parse_zir(rec.replace(" no_alloc", "")))
    assert ok["top"](10) == 3628800
    cp0 = """
module "cp0"

host @f -> i64 critical_path opt(O0) {
block0(v0: i64):
    return v0
}
"""
    with pytest.raises(
        CompileError, match=r"@f: constraint `critical_path` cannot be met: opt_level O0"
    ):
        native.cpu_compile(hir.parse_zir(cp0))


def test_report_lists_what_the_optimizer_did() -> None:
    cm = native.cpu_compile(load("benches/zir/trading.zir"))
    rep = json.loads(cm.report_json)
    fns = {f["name"]: f for f in rep["functions"]}
    assert set(fns) == {"orderbook_update", "risk_check", "ma_signal", "position_update"}
    for f in fns.values():
        passes = {a["pass"] for a in f["actions"]}
        assert {"no_alloc", "pipeline", "attributes", "bounds", "target"} <= passes, passes
        assert f["opt_level"] == "O3"
    assert "hot" in cm.llvm_ir and "@orderbook_update" in cm.llvm_ir
    assert "opt_level O3 raised to Olatency" in cm.report_text
    t = native.cpu_target()
    assert cm.target["cpu"] == t["cpu"] and t["cpu"]
    generic = native.cpu_compile(load("benches/zir/trading.zir"), cpu="x86-64", features="")
    assert generic.target["cpu"] == "x86-64"
    assert generic["risk_check"](1, 2, 100.0, 100.0, 10, 1e6, 0.1) is True


# ---------------------------------------------------------------- semantics vs the interpreter

SEMANTICS = """
module "sem"

host @sem -> i32, u32, i32, f64, f64, i8, u64 {
block0(v0: f64, v1: u32, v2: i32, v3: f64, v4: i8, v5: i8):
    v6: i32 = cast v0
    v7: u32 = shl v1, v1
    v8: i32 = cast v1
    v9: i32 = shr v2, v8
    v10: f64 = min v0, v3
    v11: f64 = max v0, v3
    v12: i8 = add v4, v5
    v13: u64 = cast v0
    return v6, v7, v9, v10, v11, v12, v13
}

host @h16 {
block0(v0: ptr<generic, f16>, v1: ptr<generic, f16>, v2: u64):
    v3: u64 = const 0
    v4: u64 = const 1
    v5: f16 = const 1.5
    jump block1(v3)
block1(v6: u64):
    v7: bool = cmp.lt v6, v2
    br v7, block2, block3
block2:
    v8: ptr<generic, f16> = ptr_add v0, v6
    v9: f16 = load v8
    v10: f16 = mul v9, v9
    v11: f16 = add v10, v5
    v12: ptr<generic, f16> = ptr_add v1, v6
    store v12, v11
    v13: u64 = add v6, v4
    jump block1(v13)
block3:
    return
}
"""


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return bool(a == b)


def test_edge_semantics_match_interpreter() -> None:
    """Saturating casts, NaN, shifts past the width, wrapping, f16 rounding."""
    m = hir.parse_zir(SEMANTICS)
    cm = native.cpu_compile(m)
    specials = [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, -0.0, 2.5, -2.5]
    for k in range(300):
        x = specials[k] if k < len(specials) else float(rng.normal() * 10.0 ** rng.integers(0, 12))
        y = float("nan") if k % 7 == 0 else float(rng.normal() * 100)
        sh = int(rng.integers(0, 70))
        a = int(rng.integers(-(2**31), 2**31))
        p, q = (int(v) for v in rng.integers(-128, 128, 2))
        got = cm["sem"](x, sh, a, y, p, q)
        # numpy-level expectations for what numpy can state directly.
        assert got[1] == (0 if sh >= 32 else (sh << sh) & 0xFFFFFFFF)
        assert got[5] == ((p + q + 128) % 256) - 128
        if x != x:
            assert got[0] == 0 and got[6] == 0
        assert same(got[3], y if x != x else (x if y != y else min(x, y))) or (x == 0 and y == 0)
        if interp is not None:
            ref = interp.call(m, "sem", x, sh, a, y, p, q)
            assert all(same(g, r) for g, r in zip(got, ref, strict=True)), (
                x,
                sh,
                a,
                y,
                p,
                q,
                got,
                ref,
            )
    n = int(rng.integers(10, 500))
    xs = rng.uniform(-20, 20, n).astype(np.float16)
    out = np.zeros(n, dtype=np.float16)
    cm["h16"](xs, out, n)
    want = (xs * xs) + np.float16(1.5)
    np.testing.assert_array_equal(out, want)
    if interp is not None:
        ref = np.zeros(n, dtype=np.float16)
        interp.call(m, "h16", xs, ref, n)
        np.testing.assert_array_equal(out, ref)


INTEGER_OPS = """
module "ints"

host @ints -> u32, i32, u32, u32, u32, i32, i32, i32, i32, u8, i16, u32, i32, i32, i32 {
block0(v0: u32, v1: i32, v2: i32, v3: f32, v4: i32):
    v5: u32 = clz v0
    v6: i32 = abs v1
    v7: u32 = bfind v0
    v8: u32 = popc v0
    v9: u32 = brev v0
    v10: i32 = brev v1
    v11: i32 = shr v1, v2
    v12: i32 = not v1
    v13: i32 = neg v1
    v14: u8 = cast v3
    v15: i16 = cast v3
    v16: u32 = shr v0, v0
    v17: i32 = div v1, v4
    v18: i32 = rem v1, v4
    v19: i32 = shl v1, v2
    return v8, v6, v5, v7, v9, v10, v11, v12, v13, v14, v15, v16, v17, v18, v19
}
"""


def test_integer_ops_match_interpreter() -> None:
    """Bit ops at 0 and all ones, abs/neg/div at MIN, signed shifts past the
    width, saturating casts: the CPU backend and the interpreter agree (both
    backends take these semantics from one table, crates/zyntax-llvm/src/scalar.rs)."""
    m = hir.parse_zir(INTEGER_OPS)
    cm = native.cpu_compile(m)
    u_special = [0, 1, 0x80000000, 0xFFFFFFFF, 0x7FFFFFFF]
    i_special = [0, 1, -1, -(2**31), 2**31 - 1]
    f_special = [float("nan"), 1e10, -1e10, 255.9, -0.5, 32767.5, -32768.9]
    for k in range(300):
        u = u_special[k] if k < len(u_special) else int(rng.integers(0, 2**32))
        i = i_special[k] if k < len(i_special) else int(rng.integers(-(2**31), 2**31))
        sh = int(rng.integers(-5, 70))
        f = f_special[k] if k < len(f_special) else float(rng.normal() * 10.0 ** rng.integers(0, 6))
        d = [-1, 1, -(2**31), 7][k % 4] if k < 8 else int(rng.integers(-(2**31), 2**31)) or 3
        got = cm["ints"](u, i, sh, f, d)
        assert got[0] == bin(u).count("1")
        if interp is not None:
            ref = interp.call(m, "ints", u, i, sh, f, d)
            assert tuple(got) == tuple(ref), (u, i, sh, f, d, got, ref)
    with pytest.raises(TrapError, match="zero"):
        cm["ints"](1, 1, 1, 1.0, 0)


SHARED_NO_BARRIER = """
module "shm" targets(sm_80)

kernel @scale_lane {
block0(v0: ptr<global, f32>, v1: ptr<global, f32>, v2: ptr<global, u32>, v3: u32):
    v4: ptr<shared, f32> = shared_alloc f32, 128
    v5: u32 = thread_idx.x
    v6: u32 = block_idx.x
    v7: u32 = block_dim.x
    v8: u32 = mul v6, v7
    v9: u32 = add v8, v5
    v10: bool = cmp.lt v9, v3
    br v10, block1, block2
block1:
    v11: ptr<global, f32> = ptr_add v0, v9
    v12: f32 = load v11
    v13: f32 = const 2.0
    v14: f32 = mul v12, v13
    v15: ptr<shared, f32> = ptr_add v4, v5
    store v15, v14
    v16: f32 = load v15
    v17: ptr<global, f32> = ptr_add v1, v9
    store v17, v16
    v18: u32 = lane_id
    v19: ptr<global, u32> = ptr_add v2, v9
    store v19, v18
    jump block2
block2:
    return
}
"""


def test_cpu_kernel_with_shared_memory_and_lane_id() -> None:
    m = hir.parse_zir(SHARED_NO_BARRIER)
    cm = native.cpu_compile(m)
    n = int(rng.integers(500, 3000))
    x = rng.uniform(-5, 5, n).astype(np.float32)
    out, lane = np.zeros(n, dtype=np.float32), np.zeros(n, dtype=np.uint32)
    blocks = (n + 127) // 128
    assert cm.launch("scale_lane", blocks, 128, x, out, lane, n) == "cpu"
    np.testing.assert_array_equal(out, x * np.float32(2.0))
    np.testing.assert_array_equal(lane, np.arange(n, dtype=np.uint32) % 128 % 32)
    if interp is not None:
        out2, lane2 = np.zeros_like(out), np.zeros_like(lane)
        interp.launch(m, "scale_lane", blocks, 128, x, out2, lane2, n)
        np.testing.assert_array_equal(out, out2)
        np.testing.assert_array_equal(lane, lane2)
    # A block larger than the shared array: the bounds check reports it.
    with pytest.raises(TrapError, match="out of bounds"):
        cm.launch("scale_lane", 1, 256, x, out, lane, n)


def test_aot_shared_library_runs_through_ctypes(tmp_path: Path) -> None:
    """`cpu_emit(..., "so")` gives a library whose exported functions follow the
    documented ABI: parameters, one length per array, then the error record."""
    import ctypes

    m = load("examples/host_latency.zir")
    so, report, symbols = native.cpu_emit(m, "so", cpu="x86-64", features="")
    assert "dot" in symbols and "dot.zx_slots" in symbols
    assert "@dot (host, Olatency" in report
    path = tmp_path / "libhost_latency.so"
    path.write_bytes(so)
    lib = ctypes.CDLL(str(path))
    dot = lib.dot
    dot.restype = ctypes.c_double
    u64 = ctypes.c_uint64
    dot.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        u64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    ]
    n = int(rng.integers(10, 2000))
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    err = np.zeros(6, dtype=np.int64)
    got = dot(x.ctypes.data, y.ctypes.data, n, n, n, err.ctypes.data)
    assert err[0] == 0
    assert got == pytest.approx(float(x @ y), rel=1e-12, abs=1e-12)
    # The same library reports an out-of-bounds read through the error record.
    got = dot(x.ctypes.data, y.ctypes.data, n, n, n - 1, err.ctypes.data)
    assert err[0] == 1 and err[1] == 1 and err[2] == n - 1 and err[3] == n - 1
    obj, _, _ = native.cpu_emit(m, "obj")
    assert obj[:4] == b"\x7fELF"
    asm, _, _ = native.cpu_emit(m, "asm")
    assert b"dot:" in asm
    with pytest.raises(ArgumentError, match="unknown output kind"):
        native.cpu_emit(m, "exe")


def test_public_cpu_module_matches_native() -> None:
    """``zyntax.cpu`` is the documented entry point of the CPU backend."""
    import saxpy  # examples/saxpy.py
    import zyntax

    cm = zyntax.cpu.compile(saxpy.build())
    n = 300
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.uniform(-2, 2))
    want = a * x + y
    cm.launch("saxpy", (n + 63) // 64, 64, np.uint32(n), a, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert zyntax.cpu.target()["triple"].startswith(("x86_64", "aarch64"))
