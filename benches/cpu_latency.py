#!/usr/bin/env python3
"""Per-call latency of latency-critical host functions: zyntax CPU backend vs C vs Numba.

The functions (``benches/zir/trading.zir``): ``orderbook_update``,
``risk_check``, ``ma_signal`` (moving-average crossover over a ring buffer) and
``position_update``, compiled by zyntax's CPU backend with ``critical_path
no_alloc no_bounds_check``; the same algorithms in C (``benches/c/trading.c``,
``-O3 -march=native``) and as Numba ``@njit`` functions (exposed as
``@cfunc``).

Native latency: every implementation is called through a function pointer
from the same C loop (``benches/c/latency.c``): arguments re-read through
volatile loads, each call bracketed by ``rdtsc``, the median cost of an empty
bracket subtracted, ticks converted to ns with a TSC calibration. zyntax's own
Rust harness (``CpuFunction.time``, calling the JIT'd slot entry) is reported
too (impl ``zyntax_rust_harness``). Python call overhead: the mean cost of
calling each implementation from Python (zyntax ``CpuFunction``, ctypes for
C, the Numba dispatcher).

Writes ``benches/results/cpu_latency-cpu-<yyyymmdd>.json`` (format:
docs/performance.md, "Results JSON") and prints a table.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import git_commit

ROOT = Path(__file__).resolve().parents[1]
ZIR = ROOT / "benches" / "zir" / "trading.zir"


def build_c(cc: str) -> tuple[ctypes.CDLL, str]:
    """Compile the C peers and the timing loop into one shared library."""
    out = Path(tempfile.mkdtemp(prefix="zyntax-cpu-bench-")) / "libtrading.so"
    cmd = [
        cc,
        "-O3",
        "-march=native",
        "-shared",
        "-fPIC",
        "-o",
        str(out),
        str(ROOT / "benches/c/trading.c"),
        str(ROOT / "benches/c/latency.c"),
        "-lm",
    ]
    subprocess.run(cmd, check=True)
    ver = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    lib = ctypes.CDLL(str(out))
    lib.zx_rdtsc.restype = ctypes.c_uint64
    return lib, ver


def tsc_per_ns(lib: ctypes.CDLL) -> float:
    t0, c0 = time.perf_counter_ns(), lib.zx_rdtsc()
    time.sleep(0.3)
    t1, c1 = time.perf_counter_ns(), lib.zx_rdtsc()
    return float(c1 - c0) / float(t1 - t0)


P = ctypes.c_void_p
I64 = ctypes.c_int64
F64 = ctypes.c_double


def ptr(a: np.ndarray) -> int:
    return a.ctypes.data


class Case:
    """One function: fresh inputs per implementation, a timing call, a Python call."""

    def __init__(self, name: str, make: Callable[[], tuple[Any, ...]]) -> None:
        self.name = name
        self.make = make


def cases() -> list[Case]:
    rng = np.random.default_rng(12345)
    depth, cap = 64, 128
    prices = np.zeros(cap)
    prices[:depth] = 100.0 + np.arange(depth) * 0.01
    sizes = np.zeros(cap)
    sizes[:depth] = rng.uniform(1, 10, depth)
    ring = rng.normal(100.0, 1.0, 64)

    return [
        Case(
            "orderbook_update",
            lambda: (prices.copy(), sizes.copy(), depth, cap, float(prices[32]), 5.0),
        ),
        Case("risk_check", lambda: (100, 25, 101.5, 101.0, 1000, 1.0e6, 0.01)),
        Case(
            "ma_signal",
            lambda: (ring.copy(), np.array([10, 64], dtype=np.int64), 64, 100.25, 8, 32),
        ),
        Case("position_update", lambda: (np.array([10.0, 100.0, 0.0]), 1.0, 100.5)),
    ]


def time_native(
    lib: ctypes.CDLL,
    name: str,
    kind: int,
    fn: int,
    args: tuple[Any, ...],
    n: int,
    warm: int,
    batch: int,
) -> np.ndarray:
    out = np.zeros(n, dtype=np.uint64)
    o = P(ptr(out))
    if name == "orderbook_update":
        pr, sz, d, c, p, s = args
        lib.time_orderbook(
            ctypes.c_int(kind),
            P(fn),
            P(ptr(pr)),
            P(ptr(sz)),
            I64(d),
            I64(c),
            F64(p),
            F64(s),
            I64(len(pr)),
            I64(n),
            I64(warm),
            I64(batch),
            o,
        )
    elif name == "risk_check":
        a = args
        lib.time_risk(
            ctypes.c_int(kind),
            P(fn),
            I64(a[0]),
            I64(a[1]),
            F64(a[2]),
            F64(a[3]),
            I64(a[4]),
            F64(a[5]),
            F64(a[6]),
            I64(n),
            I64(warm),
            I64(batch),
            o,
        )
    elif name == "ma_signal":
        ring, st, c, p, fa, sl = args
        lib.time_ma(
            ctypes.c_int(kind),
            P(fn),
            P(ptr(ring)),
            P(ptr(st)),
            I64(c),
            F64(p),
            I64(fa),
            I64(sl),
            I64(n),
            I64(warm),
            I64(batch),
            o,
        )
    else:
        pos, q, p = args
        lib.time_position(
            ctypes.c_int(kind), P(fn), P(ptr(pos)), F64(q), F64(p), I64(n), I64(warm), I64(batch), o
        )
    return out


def c_functions(lib: ctypes.CDLL) -> dict[str, Any]:
    lib.orderbook_update.argtypes = [P, P, I64, I64, F64, F64]
    lib.orderbook_update.restype = I64
    lib.risk_check.argtypes = [I64, I64, F64, F64, I64, F64, F64]
    lib.risk_check.restype = ctypes.c_bool
    lib.ma_signal.argtypes = [P, P, I64, F64, I64, I64]
    lib.ma_signal.restype = ctypes.c_int32
    lib.position_update.argtypes = [P, F64, F64]
    lib.position_update.restype = F64
    return {
        n: getattr(lib, n)
        for n in ("orderbook_update", "risk_check", "ma_signal", "position_update")
    }


def c_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(ptr(a) if isinstance(a, np.ndarray) else a for a in args)


def numba_impls() -> dict[str, tuple[Callable[..., Any], int]] | None:
    """Numba @njit versions and @cfunc wrappers (address) with the C signatures."""
    try:
        import numba  # type: ignore[import-not-found,import-untyped,unused-ignore]
        from numba import cfunc, njit, types  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None

    @njit(cache=False, fastmath=False)
    def orderbook_update(prices, sizes, depth, cap, price, size):  # type: ignore[no-untyped-def]
        pos = 0
        for k in range(depth):
            pos += 1 if prices[k] < price else 0
        if pos < depth and prices[pos] == price:
            if size != 0.0:
                sizes[pos] = size
                return depth
            nd = depth - 1
            for j in range(pos, nd):
                prices[j] = prices[j + 1]
                sizes[j] = sizes[j + 1]
            return nd
        if size == 0.0 or depth >= cap:
            return depth
        for j in range(depth, pos, -1):
            prices[j] = prices[j - 1]
            sizes[j] = sizes[j - 1]
        prices[pos] = price
        sizes[pos] = size
        return depth + 1

    @njit
    def risk_check(position, qty, price, ref, max_pos, max_notional, band):  # type: ignore[no-untyped-def]
        return (
            (abs(position + qty) <= max_pos)
            & (abs(qty * price) <= max_notional)
            & (abs(price - ref) <= band * ref)
        )

    @njit
    def ma_signal(ring, state, cap, price, fast, slow):  # type: ignore[no-untyped-def]
        head = state[0]
        count = state[1]
        ring[head] = price
        h2 = head + 1
        state[0] = 0 if h2 == cap else h2
        c2 = min(count + 1, cap)
        state[1] = c2
        nf = min(fast, c2)
        ns = min(slow, c2)
        ss = 0.0
        sf = 0.0
        for k in range(ns):
            i = head - k
            if i < 0:
                i += cap
            x = ring[i]
            ss += x
            sf += x if k < nf else 0.0
        f = sf / nf
        s = ss / ns
        return 1 if f > s else (-1 if f < s else 0)

    @njit
    def position_update(pos, fill_qty, fill_price):  # type: ignore[no-untyped-def]
        q = pos[0]
        avg = pos[1]
        realized = pos[2]
        nq = q + fill_qty
        same = q * fill_qty >= 0.0
        add_avg = (q * avg + fill_qty * fill_price) / nq if nq != 0.0 else 0.0
        aq = abs(q)
        af = abs(fill_qty)
        closed = min(af, aq) * (1.0 if q > 0.0 else -1.0)
        pnl_red = closed * (fill_price - avg)
        red_avg = fill_price if af > aq else avg
        avg2 = add_avg if same else red_avg
        pnl = 0.0 if same else pnl_red
        pos[0] = nq
        pos[1] = 0.0 if nq == 0.0 else avg2
        pos[2] = realized + pnl
        return pnl

    f64p = types.CPointer(types.float64)
    i64p = types.CPointer(types.int64)
    from numba import carray  # type: ignore[import-not-found,import-untyped,unused-ignore]

    @cfunc(types.int64(f64p, f64p, types.int64, types.int64, types.float64, types.float64))
    def ob_c(p, s, depth, cap, price, size):  # type: ignore[no-untyped-def]
        return orderbook_update(carray(p, (cap,)), carray(s, (cap,)), depth, cap, price, size)

    @cfunc(
        types.boolean(
            types.int64,
            types.int64,
            types.float64,
            types.float64,
            types.int64,
            types.float64,
            types.float64,
        )
    )
    def rc_c(a, b, c, d, e, f, g):  # type: ignore[no-untyped-def]
        return risk_check(a, b, c, d, e, f, g)

    @cfunc(types.int32(f64p, i64p, types.int64, types.float64, types.int64, types.int64))
    def ma_c(r, st, cap, price, fast, slow):  # type: ignore[no-untyped-def]
        return ma_signal(carray(r, (cap,)), carray(st, (2,)), cap, price, fast, slow)

    @cfunc(types.float64(f64p, types.float64, types.float64))
    def pu_c(p, q, price):  # type: ignore[no-untyped-def]
        return position_update(carray(p, (3,)), q, price)

    print(f"numba {numba.__version__}", file=sys.stderr)
    return {
        "orderbook_update": (orderbook_update, ob_c.address),
        "risk_check": (risk_check, rc_c.address),
        "ma_signal": (ma_signal, ma_c.address),
        "position_update": (position_update, pu_c.address),
    }


def stats(ticks: np.ndarray, overhead: float, per_ns: float, batch: int) -> tuple[float, float]:
    ns = np.maximum(ticks.astype(np.float64) - overhead, 0.0) / per_ns / batch
    return float(np.median(ns)), float(np.percentile(ns, 99))


def py_call_ns(f: Callable[..., Any], args: tuple[Any, ...], n: int) -> float:
    for _ in range(1000):
        f(*args)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f(*args)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def check_agreement(cm: Any, cfn: dict[str, Any], nb: dict[str, Any] | None) -> None:
    """Every implementation gives the same results on the benchmark inputs."""
    for case in cases():
        outs = []
        a = case.make()
        outs.append(("zyntax", cm[case.name](*a), a))
        a = case.make()
        outs.append(("c", cfn[case.name](*c_args(a)), a))
        if nb is not None:
            a = case.make()
            outs.append(("numba", nb[case.name][0](*a), a))
        ref = outs[0]
        for name, r, args in outs[1:]:
            if not np.isclose(float(r), float(ref[1])):
                raise SystemExit(f"{case.name}: {name} returned {r}, zyntax {ref[1]}")
            for x, y in zip(args, ref[2], strict=True):
                if isinstance(x, np.ndarray) and not np.allclose(x, y):
                    raise SystemExit(f"{case.name}: {name} left different state than zyntax")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("-n", type=int, default=50_000, help="timed samples per implementation")
    ap.add_argument(
        "--batch",
        type=int,
        default=16,
        help="calls per timed sample (the TSC step is ~10 ns on AMD Zen)",
    )
    ap.add_argument("--cc", default=os.environ.get("CC", "gcc"))
    ap.add_argument("--out", type=Path, default=None)
    opts = ap.parse_args()

    from zyntax import _native as native
    from zyntax import hir

    module = hir.parse_zir(ZIR.read_text(), str(ZIR))
    cm = native.cpu_compile(module)
    lib, cc_version = build_c(opts.cc)
    cfn = c_functions(lib)
    nb = numba_impls()
    check_agreement(cm, cfn, nb)

    per_ns = tsc_per_ns(lib)
    empty = np.zeros(100_000, dtype=np.uint64)
    lib.empty_ticks(I64(len(empty)), P(ptr(empty)))
    overhead = float(np.median(empty))
    cc_impl = "c_clang_O3" if "clang" in cc_version else "c_gcc_O3"

    rows: list[dict[str, Any]] = []

    def row(case: str, impl: str, metric: str, value: float) -> None:
        rows.append(
            {
                "case": case,
                "impl": impl,
                "metric": metric,
                "value": round(value, 3),
                "lower_is_better": True,
            }
        )

    n, warm, batch = opts.n, 5_000, opts.batch
    for case in cases():
        impls: list[tuple[str, int, int]] = [
            ("zyntax", 1, cm[case.name].address),
            (cc_impl, 0, ctypes.cast(cfn[case.name], P).value or 0),
        ]
        if nb is not None:
            impls.append(("numba", 0, nb[case.name][1]))
        for impl, kind, fn in impls:
            ticks = time_native(lib, case.name, kind, fn, case.make(), n, warm, batch)
            med, p99 = stats(ticks, overhead, per_ns, batch)
            row(case.name, impl, "ns_per_call", med)
            row(case.name, impl, "ns_p99", p99)
        t = cm[case.name].time(*case.make(), n=n, batch=batch)
        row(case.name, "zyntax_rust_harness", "ns_per_call", t["median_ns"])
        row(case.name, "zyntax_rust_harness", "ns_p99", t["p99_ns"])

        py_case = f"python_call:{case.name}"
        row(py_case, "zyntax", "ns_per_call", py_call_ns(cm[case.name], case.make(), 20_000))
        row(
            py_case,
            cc_impl + "_ctypes",
            "ns_per_call",
            py_call_ns(cfn[case.name], c_args(case.make()), 20_000),
        )
        if nb is not None:
            row(py_case, "numba", "ns_per_call", py_call_ns(nb[case.name][0], case.make(), 20_000))

    cpu_model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = git_commit()
    today = datetime.datetime.now(datetime.timezone.utc)
    doc = {
        "bench": "cpu_latency",
        "device": f"{cpu_model} (LLVM cpu {cm.target['cpu']})",
        "commit": commit,
        "date": today.strftime("%Y-%m-%d"),
        "notes": {
            "method": (
                "same C loop for every impl, calling through a function pointer with "
                "arguments re-read by volatile loads; one sample = `batch` calls between "
                "two rdtsc reads (the TSC advances in ~25-tick steps here); empty-bracket "
                "median subtracted; median and p99 over samples, per call"
            ),
            "batch": batch,
            "tsc_ticks_per_ns": round(per_ns, 4),
            "empty_bracket_ticks": overhead,
            "samples_per_impl": n,
            "c_compiler": cc_version + " -O3 -march=native",
            "numba": "not installed" if nb is None else "njit via cfunc",
            "zyntax_constraints": "critical_path no_alloc no_bounds_check (Olatency)",
            "machine_load": os.getloadavg(),
        },
        "results": rows,
    }
    out = (
        opts.out
        or ROOT / "benches" / "results" / f"cpu_latency-cpu-{today.strftime('%Y%m%d')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")
    cases_seen: list[str] = []
    for r in rows:
        if r["case"] not in cases_seen:
            cases_seen.append(r["case"])
    for case_name in cases_seen:
        cells = [f"{case_name:32}"]
        for r in rows:
            if r["case"] == case_name:
                cells.append(f"{r['impl']}:{r['metric']}={r['value']:.1f}")
        print("  ".join(cells))


if __name__ == "__main__":
    main()
