"""Shared helpers of the benchmarks: device naming, timing, the results JSON
(format in docs/performance.md, "Results JSON") and the printed table."""

from __future__ import annotations

import argparse
import atexit
import datetime as _dt
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# A bench compiles kernels as a user would, but into a kernel cache of its own run, removed
# at exit, not the user's ~/.cache/zyntax (a ZYNTAX_CACHE_DIR that is set is kept: the
# benches that time the cache set their own).
if not os.environ.get("ZYNTAX_CACHE_DIR"):
    os.environ["ZYNTAX_CACHE_DIR"] = tempfile.mkdtemp(prefix="zyntax-bench-cache-")
    atexit.register(shutil.rmtree, os.environ["ZYNTAX_CACHE_DIR"], True)
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

# The hand-written PTX kernels of the GPU tests (the same empty kernel for
# every peer that loads PTX); imported here, after the path is set.
ptx_kernels = importlib.import_module("ptx_kernels")


def parse_args(
    description: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The benches' common options (and a bench's own, added by `extra`)."""
    p = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(p)
    p.add_argument(
        "--out-dir",
        type=Path,
        default=ROOT / "benches" / "results",
        help="where the results JSON goes (default benches/results)",
    )
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    p.add_argument("--device", type=int, default=0)
    return p.parse_args()


def device_short(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100'."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name)
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def git_commit() -> str:
    env = os.environ.get("ZYNTAX_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if out.returncode == 0:
            return out.stdout.strip()
    except OSError:
        pass
    return "unknown"


def optional(name: str) -> Any:
    """Imports a peer (cupy, torch, triton, ...) or returns None, saying why."""
    try:
        return __import__(name, fromlist=["_"])
    except Exception as e:  # a peer that fails to import is skipped, never fatal
        print(f"  (skipping {name}: {type(e).__name__}: {e})", file=sys.stderr)
        return None


def per_call_us(fn: Callable[[], Any], iters: int, sync: Callable[[], Any]) -> float:
    """Microseconds per call of `fn` over `iters` calls, the final sync included."""
    for _ in range(min(iters // 10, 1000) or 1):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters * 1e6


def event_median_ms(fn: Callable[[int], Any], sets: int, iters: int, warmup: int = 3) -> float:
    """Median CUDA-event time (ms) of one call `fn(i)` after `warmup` calls;
    call i uses input set ``i % sets``, so that rotating over enough copies
    keeps L2 from flattering anyone. Each call is timed alone (an event before
    and after it), so the host time of a call counts when the GPU waits for it.
    The warm-up calls every set at least once: a library that caches per-tensor
    state (zyntax's tensor maps and launch plans) is timed warm on each set, as
    one that keeps none is."""
    import statistics

    import torch

    for i in range(max(warmup, sets)):
        fn(i % sets)
    torch.cuda.synchronize()
    pairs = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i % sets)
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


def best_of(runs: int, measure: Callable[[], float], lower_is_better: bool = True) -> float:
    """Best of several measurements (the least disturbed by the machine)."""
    vals = [measure() for _ in range(runs)]
    return min(vals) if lower_is_better else max(vals)


class Results:
    """Collects result rows and writes the JSON and a table."""

    def __init__(self, bench: str, device_name: str) -> None:
        self.bench = bench
        self.device = device_name
        self.rows: list[dict[str, Any]] = []
        self.notes: dict[str, Any] = {}

    def add(
        self,
        case: str,
        impl: str,
        metric: str,
        value: float | None,
        lower_is_better: bool,
        **extra: Any,
    ) -> None:
        if value is None:
            return
        row = {
            "case": case,
            "impl": impl,
            "metric": metric,
            "value": round(float(value), 4),
            "lower_is_better": lower_is_better,
        }
        row.update(extra)
        self.rows.append(row)
        print(f"  {case:<22} {impl:<18} {value:>12.3f} {metric}", flush=True)

    def write(self, out_dir: Path) -> Path:
        today = _dt.datetime.now(_dt.timezone.utc)
        doc = {
            "bench": self.bench,
            "device": self.device,
            "commit": git_commit(),
            "date": today.strftime("%Y-%m-%d"),
            "results": self.rows,
        }
        if self.notes:
            doc["notes"] = self.notes
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{self.bench}-{device_short(self.device)}-{today:%Y%m%d}.json"
        path.write_text(json.dumps(doc, indent=2) + "\n")
        self.table()
        print(f"\nwrote {path}")
        return path

    def table(self) -> None:
        print(f"\n{self.bench} on {self.device}")
        cases: dict[str, list[dict[str, Any]]] = {}
        for r in self.rows:
            cases.setdefault(r["case"], []).append(r)
        for case, rows in cases.items():
            ours = next((r["value"] for r in rows if r["impl"] == "zyntax"), None)
            better = "lower" if rows[0]["lower_is_better"] else "higher"
            print(f"\n  {case} ({rows[0]['metric']}, {better} is better)")
            order = not rows[0]["lower_is_better"]
            for r in sorted(rows, key=lambda row: row["value"], reverse=order):
                rel = f"   {r['value'] / ours:6.2f}x zyntax" if ours else ""
                print(f"    {r['impl']:<18} {r['value']:>12.3f}{rel}")
