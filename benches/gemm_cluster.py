"""The sm_90a GEMM's 2-block cluster variant against the 1-block kernel
(issue 14): bf16 8192^3 (or --size), B column- and row-major, the
persistent grid as launched and capped, and kernel variations. Prints the
grid each variant launches (clusters resident per
``CudaKernel.max_active_clusters``) and TFLOP/s: median of CUDA-event
timings of 10 back-to-back calls, inputs rotated over 4 sets; the relative
error of each variant against a float64 product (first 512 rows).

Usage on an H100: ``python benches/gemm_cluster.py [--size 8192] [--json out.json]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--json", default=None)
    p.add_argument("--variants", default=None, help="comma-separated names (default: all)")
    args = p.parse_args()

    import _common  # noqa: F401  (a kernel cache of this run, not the user's)
    import torch

    from zyntax import cuda
    from zyntax.kernels import gemm_sm90

    n = args.size
    dev = cuda.Device(0)
    sms = dev.sm_count
    base = gemm_sm90.Config()
    cl = dataclasses.replace(base, cluster_m=2)
    fit = gemm_sm90._kernel(cl, 0).max_active_clusters(cl.threads, (2, 1, 1), cl.shared_bytes)
    print(f"{dev.name}: {sms} SMs; max_active_clusters(2 blocks) = {fit}", flush=True)
    balanced = gemm_sm90.launch_shape

    def full_grid(cfg: Any, m: int, n_: int, sms: int) -> tuple[int, int, int]:
        """The grid before balancing: every resident block (or cluster)."""
        cm = cfg.cluster_m
        units = -(-m // (cfg.bm * cm)) * -(-n_ // cfg.bn)
        return max(1, min(units, sms // cm)) * cm, cfg.threads, cfg.shared_bytes

    # (config, SM cap or None: as launched by matmul_sm90, grid rule)
    variants: dict[str, tuple[Any, int | None, Any]] = {
        "c1": (base, None, balanced),
        "c1_full": (base, None, full_grid),
        "c1_sms120": (base, 120, balanced),
        "c2": (cl, None, balanced),
        "c2_full": (cl, None, full_grid),
        "c2_overlap": (dataclasses.replace(cl, overlap=True), None, balanced),
        "c2_group16": (dataclasses.replace(cl, group_m=16), None, balanced),
        "c2_group4": (dataclasses.replace(cl, group_m=4), None, balanced),
        "c1_again": (base, None, balanced),
        "c2_again": (cl, None, balanced),
    }
    if args.variants:
        keep = args.variants.split(",")
        variants = {k: v for k, v in variants.items() if k in keep}

    sets = 4
    gen = torch.Generator(device="cuda").manual_seed(14)
    a_sets = [torch.randn(n, n, device="cuda", generator=gen).bfloat16() for _ in range(sets)]
    bt_sets = [torch.randn(n, n, device="cuda", generator=gen).bfloat16() for _ in range(sets)]
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ref = a_sets[0][:512].double() @ bt_sets[0].t().double()
    flop = 2.0 * n**3

    def timed(fn: Any) -> float:
        for i in range(sets):
            fn(i)
        torch.cuda.synchronize()
        times = []
        for r in range(args.reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for j in range(10):
                fn((r * 10 + j) % sets)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 10)
        return float(statistics.median(times))

    rows = []
    ms = timed(lambda i: torch.matmul(a_sets[i], bt_sets[i].t(), out=out))
    print(f"  cublas (B col)          {flop / ms / 1e9:8.1f} TFLOP/s", flush=True)
    rows.append({"variant": "cublas", "b": "col", "TFLOP_per_s": flop / ms / 1e9})
    for layout in ("col", "row"):
        bs = bt_sets if layout == "col" else [bt.t().contiguous() for bt in bt_sets]
        for name, (cfg, cap, shape) in variants.items():
            cfg = dataclasses.replace(cfg, b_layout=layout)
            gemm_sm90.launch_shape = shape  # read by matmul_sm90 at each call

            def run(
                i: int, cfg: Any = cfg, cap: int | None = cap, bs: Any = bs, lay: str = layout
            ) -> None:
                b = bs[i].t() if lay == "col" else bs[i]
                gemm_sm90.matmul_sm90(a_sets[i], b, out, b_layout=lay, config=cfg, sms=cap)

            try:
                out.fill_(float("nan"))
                run(0)
                torch.cuda.synchronize()
                err = float(torch.linalg.norm(out[:512].double() - ref) / torch.linalg.norm(ref))
                ms = timed(run)
            except Exception as e:  # a failing variant is reported, not fatal
                print(f"  {name} B {layout}: failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            grid = shape(cfg, n, n, cap or gemm_sm90._resident_blocks(cfg, 0))[0]
            tf = flop / ms / 1e9
            print(
                f"  {name:<14} B {layout}  grid {grid:4d}  {tf:8.1f} TFLOP/s  "
                f"{ms * 1e3:8.1f} us  rel. error {err:.2e}",
                flush=True,
            )
            rows.append(
                {"variant": name, "b": layout, "grid": grid, "TFLOP_per_s": tf, "rel_err": err}
            )
        gemm_sm90.launch_shape = balanced
        bs = []
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.name, "sms": sms, "max_active_clusters": fit, "rows": rows}, f)


if __name__ == "__main__":
    main()
