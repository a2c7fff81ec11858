"""The decode-shape matmul path on the GPU: per-call host time of
``zyntax.kernels.matmul`` and a sweep of mma_sync tile configs x split-K.

Usage on a GPU machine (see docs/gpu-runs.md):

    python benches/gemm_decode.py [--out-dir DIR] [--quick]

Host time: ``time.perf_counter_ns`` around each of 300 repeated calls with
the same operands (the plan cache's hit path), median, for each decode
shape, plus the first call of a new signature. Sweep: for each shape, each
tile config and ``SPLIT_K_WAVES`` value (0: no split), the median of
per-call CUDA-event timings over inputs rotated past L2 (as benches/gemm.py
times its cases), checked against float64. Writes
``gemm_decode-<device>-<date>.json`` in the results format of
docs/performance.md (case ``MxNxK``, impls ``cublas`` and
``zyntax_<config>_waves<w>``, metric ``us``; the host times in ``notes``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import Results
from gemm import L2_FLUSH_BYTES, median_ms

SHAPES = [(16, 4096, 4096), (128, 4096, 4096), (16, 14336, 4096)]
#: (bm, bn, bk, wm, wn, stages) for M = 16 and M = 128.
CONFIGS = {
    16: [
        (16, 32, 64, 16, 32, 4),
        (16, 64, 64, 16, 32, 4),
        (16, 128, 64, 16, 32, 4),
        (16, 256, 64, 16, 64, 4),
    ],
    128: [
        (64, 64, 32, 32, 32, 4),
        (64, 128, 64, 32, 64, 3),
        (128, 128, 32, 64, 64, 4),
        (32, 128, 64, 32, 32, 4),
        (16, 128, 64, 16, 32, 4),
        (32, 64, 64, 32, 32, 4),
        (32, 256, 64, 32, 64, 3),
        (64, 128, 64, 32, 32, 4),
    ],
}
#: SPLIT_K_WAVES values per M group (0: no split).
WAVES = {16: [0, 2, 4, 8], 128: [0, 1, 2, 4]}


def host_us(torch: Any, zk: Any, m: int, n: int, k: int) -> dict[str, float]:
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    zk.matmul(a, b, c)
    first = (time.perf_counter_ns() - t0) / 1e3
    for _ in range(20):
        zk.matmul(a, b, c)
    torch.cuda.synchronize()
    per = []
    for _ in range(300):
        t0 = time.perf_counter_ns()
        zk.matmul(a, b, c)
        per.append(time.perf_counter_ns() - t0)
        if len(per) % 50 == 0:
            torch.cuda.synchronize()  # never let the launch queue fill up
    torch.cuda.synchronize()
    return {"first_call_us": first, "repeat_call_us": statistics.median(per) / 1e3}


def sweep(torch: Any, zk: Any, m: int, n: int, k: int, quick: bool) -> list[dict[str, Any]]:
    copies = max(1, min(32, -(-L2_FLUSH_BYTES // ((m * k + k * n) * 2))))
    As = [torch.randn(m, k, device="cuda").bfloat16() for _ in range(copies)]
    Bs = [torch.randn(k, n, device="cuda").bfloat16() for _ in range(copies)]
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = As[0].double() @ Bs[0].double()
    rows = []
    cublas = median_ms(lambda i: torch.matmul(As[i], Bs[i], out=c), copies, 5, 20 if quick else 50)
    rows.append({"m": m, "n": n, "k": k, "impl": "cublas", "us": cublas * 1e3})
    print(f"  {m}x{n}x{k} cublas {cublas * 1e3:8.1f} us")
    attr = "MMA_SYNC_SMALL_M_CONFIG" if m <= 32 else "MMA_SYNC_MID_M_CONFIG"
    default_cfg, default_waves = getattr(zk, attr), zk.SPLIT_K_WAVES
    zk.SPLIT_K_ON_GPU = True  # the sweep measures split-K (waves 0: none)
    for bm, bn, bk, wm, wn, st in CONFIGS[16 if m <= 32 else 128]:
        for waves in WAVES[16 if m <= 32 else 128]:
            cfg = zk.gemm_mma_sync.Config(bm, bn, bk, wm, wn, st, frag_pipeline=True)
            setattr(zk, attr, cfg)
            zk.SPLIT_K_WAVES = waves
            zk._plans.clear()
            name = f"{bm}x{bn}x{bk}_w{wm}x{wn}_s{st}_waves{waves}"
            try:
                c.fill_(float("nan"))
                zk.matmul(As[0], Bs[0], c)
                err = ((c.double() - ref).norm() / ref.norm()).item()
                ms = median_ms(lambda i: zk.matmul(As[i], Bs[i], c), copies, 3, 20 if quick else 50)
            except Exception as e:
                print(f"  {name}: failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            splits = zk._splits(zk.normalise(As[0], Bs[0], c), cfg) if waves else 1
            rows.append(
                {"m": m, "n": n, "k": k, "impl": "zyntax", "config": name, "splits": splits,
                 "us": ms * 1e3, "rel_err": err}
            )  # fmt: skip
            print(f"  {m}x{n}x{k} {name:<36} splits {splits:3d} {ms * 1e3:8.1f} us  err {err:.1e}")
    setattr(zk, attr, default_cfg)
    zk.SPLIT_K_WAVES = default_waves
    zk.SPLIT_K_ON_GPU = False
    zk._plans.clear()
    return rows


def python_us_without_gpu(calls: int = 3000) -> float:
    """Median Python time of a repeated 16 x 4096 x 4096 bf16 call on a
    machine without a GPU: operands are stand-ins with
    ``__cuda_array_interface__`` and launches are no-ops, so this is the
    library's own per-call cost (run it against an older checkout's
    ``python/`` on PYTHONPATH for a before/after)."""
    import zyntax.kernels.gemm as zk

    class Dev:
        def __init__(self, shape: tuple[int, int], ptr: int) -> None:
            self.shape, self.ptr, self.typestr, self.device = shape, ptr, "<V2", 0
            self.strides = (shape[1] * 2, 2)
            self.__cuda_array_interface__ = {
                "shape": shape, "typestr": "<V2", "strides": self.strides,
                "data": (ptr, False), "version": 3,
            }  # fmt: skip

    class Kern:
        def launch(self, *a: Any, **k: Any) -> None:
            pass

        def prepare(self, *a: Any, **k: Any) -> Any:
            return lambda *args: None

    z: Any = zk  # older checkouts lack some of these names: set them all
    z._arch_of = lambda p: "sm_90"
    z._sm90_module = lambda: None
    z._compiled = lambda *a: Kern()
    z._DeviceArray = Dev
    z._sm_count = lambda p: 132
    z._workspace = lambda *a: Dev((1, 1), 1 << 40)
    m, n, k = 16, 4096, 4096
    a, b, out = Dev((m, k), 1 << 30), Dev((k, n), 1 << 32), Dev((m, n), 1 << 34)
    for _ in range(100):
        zk.matmul(a, b, out)
    per = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        zk.matmul(a, b, out)
        per.append(time.perf_counter_ns() - t0)
    return statistics.median(per) / 1e3


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--out-dir", type=Path, default=Path("."), help="gemm_decode-<device>-<date>.json goes here"
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-sweep", action="store_true")
    p.add_argument(
        "--no-gpu", action="store_true", help="only the Python per-call time, launches faked"
    )
    args = p.parse_args()
    if args.no_gpu:
        print(f"  python per call (launches faked): {python_us_without_gpu():.2f} us")
        return 0
    import torch

    import zyntax.kernels.gemm as zk

    res = Results("gemm_decode", torch.cuda.get_device_name(0))
    res.notes["host"] = {}
    for m, n, k in SHAPES:
        h = host_us(torch, zk, m, n, k)
        res.notes["host"][f"{m}x{n}x{k}"] = h
        print(f"  host {m}x{n}x{k}: first {h['first_call_us']:.0f} us, repeat "
              f"{h['repeat_call_us']:.2f} us")  # fmt: skip
    if not args.no_sweep:
        for m, n, k in SHAPES:
            for row in sweep(torch, zk, m, n, k, args.quick):
                impl = "cublas" if row["impl"] == "cublas" else f"zyntax_{row['config']}"
                more = {key: row[key] for key in ("splits", "rel_err") if key in row}
                res.add(f"{m}x{n}x{k}", impl, "us", row["us"], True, **more)
    res.write(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
