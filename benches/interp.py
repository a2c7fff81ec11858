"""CPU benchmark of the reference interpreter (``zyntax.interp``).

Runs the CI workloads -- a 1M-element saxpy and a 64x64x64 MMA-tiled product
(one warp per 16x16 tile of C, f16 inputs, f32 accumulation) -- checks them
against numpy, and writes ``benches/results/interp-cpu-<yyyymmdd>.json`` in
the format of docs/performance.md (device "cpu"), with numpy doing the same
computation as the peer row.

    python benches/interp.py [--out DIR] [--repeat N]

Build the extension optimized first (``scripts/build-python.sh``): a debug
build is an order of magnitude slower.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import git_commit

import zyntax
from zyntax import hir, interp

ROOT = Path(__file__).resolve().parents[1]

# The tiled MMA GEMM kernel the interpreter tests also run.
GEMM_ZIR_PATH = ROOT / "tests" / "data" / "mma_gemm.zir"


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    """Best wall time of `repeat` runs, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return "cpu: " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu: " + (platform.processor() or platform.machine())


def row(case: str, impl: str, metric: str, value: float) -> dict[str, Any]:
    return {
        "case": case,
        "impl": impl,
        "metric": metric,
        "value": round(value, 3),
        "lower_is_better": True,
    }


def bench_saxpy(repeat: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    m = hir.parse_zir((ROOT / "examples" / "saxpy.zir").read_text(), "saxpy.zir")
    n = 1_000_000
    a = np.float32(rng.uniform(0.5, 2.0))
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y0 = rng.uniform(-1, 1, n).astype(np.float32)
    y = y0.copy()

    def run() -> None:
        y[...] = y0
        interp.launch(m, "saxpy", (n + 255) // 256, 256, n, a, x, y)

    ms = best_ms(run, repeat)
    want = (np.float64(a) * x + y0.astype(np.float64)).astype(np.float32)  # fma: one rounding
    np.testing.assert_array_equal(y, want)
    peer = best_ms(lambda: a * x + y0, repeat)
    return [row("saxpy_1m", "zyntax", "ms", ms), row("saxpy_1m", "numpy", "ms", peer)]


def bench_gemm(repeat: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    m = hir.parse_zir(GEMM_ZIR_PATH.read_text(), str(GEMM_ZIR_PATH))
    n = 64
    a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    c = np.zeros((n, n), np.float32)
    ms = best_ms(lambda: interp.launch(m, "gemm", (n // 16, n // 16), 32, a, b, c, n), repeat)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    peer = best_ms(lambda: a.astype(np.float32) @ b.astype(np.float32), repeat)
    return [row("mma_gemm_64", "zyntax", "ms", ms), row("mma_gemm_64", "numpy", "ms", peer)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benches" / "results")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(20261126)
    results = bench_saxpy(args.repeat, rng) + bench_gemm(args.repeat, rng)
    today = datetime.date.today()
    doc = {
        "bench": "interp",
        "device": cpu_name(),
        "commit": git_commit(),
        "date": today.isoformat(),
        "zyntax_build": zyntax.build_info().get("profile", "unknown"),
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"interp-cpu-{today:%Y%m%d}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    for r in results:
        print(f"{r['case']:<14} {r['impl']:<8} {r['value']:>10.3f} {r['metric']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
