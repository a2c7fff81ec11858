"""The Hopper GEMM ladder (issue 14 item 1): what each feature of the sm_90a
kernel buys at 8192^3 (and 4096^3) bf16, against torch.matmul (cuBLAS) in the
same run. Median of CUDA-event timings (10 back-to-back calls each) after
warm-up, inputs rotated over several sets so that L2 does not flatter anyone. Writes
benches/results/gemm_ladder-<device>-<date>.json (bench ``gemm_ladder``, metric
``TFLOP_per_s``; impl ``zyntax`` is the full kernel, ``zyntax_<step>`` the
ladder's steps, ``cublas`` torch.matmul).

Steps:
- ``wgmma_tma``: examples/wgmma_tile.py, one warpgroup per 64 x 128 tile, a
  2-stage TMA ring, thread 0 producing between its own wgmmas;
- ``ws``: producer/consumer warp specialisation (1 TMA warpgroup, 2 wgmma
  warpgroups, 128 x 256 tiles, 4 stages), one block per tile, no setmaxnreg;
- ``ws_setmaxnreg``: the same with registers moved to the consumers;
- ``persistent``: one block per SM walking the tiles in grouped order (the
  full kernel, also reported as ``zyntax``).

- ``cluster``: 2-block clusters, each block loading its own A and half of
  the shared B tile with TMA multicast (``Config(cluster_m=2)``), as many
  clusters as fit resident.

Variations of the full kernel, reported beside the steps: ``persistent_overlap``
(one wgmma group kept in flight, stages released a step late),
``persistent_group16`` (16 tile rows per group), ``persistent_no_setmaxnreg``,
``persistent_again`` (the full kernel once more: the run's spread), and of the
cluster kernel: ``cluster_group16``, ``cluster_group4``, ``cluster_overlap``,
``cluster_b_row`` (B row-major: N-major 64-column boxes, as benches/gemm.py
passes it) beside ``persistent_b_row``, and ``cluster_again``.

``--ncu`` runs only the full kernel once at 8192^3, then the cluster kernel
(for Nsight Compute: ``--launch-count 2``).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benches"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out-dir", type=Path, default=ROOT / "benches" / "results")
    p.add_argument("--sizes", default="8192,4096")
    p.add_argument("--dtypes", default="bf16")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--ncu", action="store_true")
    p.add_argument(
        "--steps",
        default="wgmma_tma,ws,ws_setmaxnreg,persistent,"
        "persistent_overlap,persistent_group16,persistent_no_setmaxnreg,persistent_again,"
        "cluster,cluster_group16,cluster_group4,cluster_overlap,persistent_b_row,cluster_b_row,"
        "cluster_again",
    )
    args = p.parse_args()

    import torch
    from _common import Results

    from zyntax import cuda
    from zyntax.kernels import gemm_sm90

    dev = cuda.Device(0)
    sms = dev.sm_count

    def timed(fn: Any, sets: int, reps: int, batch: int = 10) -> float:
        """Median milliseconds per call of fn(i), i rotating over the input
        sets, from events around `batch` back-to-back calls (so the host time
        of a call overlaps the previous kernel, as in a real workload)."""
        for i in range(3):
            fn(i % sets)
        torch.cuda.synchronize()
        times = []
        for r in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for j in range(batch):
                fn((r * batch + j) % sets)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / batch)
        return statistics.median(times)

    def example_step(a: Any, bt: Any, out32: Any) -> Any:
        import wgmma_tile

        m_, k_ = a.shape
        n_ = bt.shape[0]
        kern = cuda.load_hir(wgmma_tile.build(), arch="sm_90a").kernel("wgmma_tile")
        kern.set_max_dynamic_shared(wgmma_tile.SHARED_BYTES)
        ta = cuda.TensorMap.tiled(a, (wgmma_tile.BK, wgmma_tile.BM), swizzle="128B", dtype="bf16")
        tb = cuda.TensorMap.tiled(bt, (wgmma_tile.BK, wgmma_tile.BN), swizzle="128B", dtype="bf16")

        def run() -> None:
            kern.launch(
                (n_ // wgmma_tile.BN, m_ // wgmma_tile.BM),
                128,
                ta,
                tb,
                out32,
                n_,
                k_,
                shared_mem=wgmma_tile.SHARED_BYTES,
            )

        return run

    if args.ncu:
        n = 8192
        a = torch.randn(n, n, device="cuda").bfloat16()
        bt = torch.randn(n, n, device="cuda").bfloat16()
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        gemm_sm90.matmul_sm90(a, bt.t(), out, b_layout="col", config=gemm_sm90.Config())
        cluster = gemm_sm90.Config(cluster_m=2)
        gemm_sm90.matmul_sm90(a, bt.t(), out, b_layout="col", config=cluster)
        torch.cuda.synchronize()
        return

    res = Results("gemm_ladder", dev.name)
    steps = args.steps.split(",")
    for dtype in args.dtypes.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            if dtype in ("tf32", "e4m3"):
                bench_other(res, dtype, n, args.reps, timed)
            else:
                bench_case(res, dtype, n, steps, args.reps, sms, timed, example_step)
            torch.cuda.empty_cache()
    res.write(args.out_dir)


def bench_other(res: Any, dtype: str, n: int, reps: int, timed: Any) -> None:
    """tf32 (f32 operands; peer torch.matmul with TF32 on) or e4m3 (bf16 out,
    per-tensor scales; peer torch._scaled_mm), B column-major, full kernel."""
    import torch

    from zyntax.kernels import gemm_sm90

    case, sets, flops = f"{dtype}_{n}", 3, 2.0 * n**3
    a_sets = [torch.randn(n, n, device="cuda") for _ in range(sets)]
    bt_sets = [torch.randn(n, n, device="cuda") for _ in range(sets)]
    if dtype == "tf32":
        out = torch.empty(n, n, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
        ms = timed(lambda i: torch.matmul(a_sets[i], bt_sets[i].t(), out=out), sets, reps)
        res.add(case, "cublas", "TFLOP_per_s", flops / ms / 1e9, False)

        def ours(i: int) -> None:
            gemm_sm90.matmul_sm90(a_sets[i], bt_sets[i].t(), out, b_layout="col")
    else:
        f8 = torch.float8_e4m3fn
        a_sets = [x.to(f8) for x in a_sets]
        bt_sets = [x.to(f8) for x in bt_sets]
        one = torch.ones((), device="cuda")
        out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)

        def peer(i: int) -> None:
            torch._scaled_mm(
                a_sets[i], bt_sets[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
            )

        ms = timed(peer, sets, reps)
        res.add(case, "torch_scaled_mm", "TFLOP_per_s", flops / ms / 1e9, False)
        a8 = [x.view(torch.uint8) for x in a_sets]
        b8 = [x.view(torch.uint8).t() for x in bt_sets]

        def ours(i: int) -> None:
            gemm_sm90.matmul_sm90(
                a8[i], b8[i], out, b_layout="col", scale_a=one, scale_b=one, dtype="e4m3"
            )

    ms = timed(ours, sets, reps)
    res.add(case, "zyntax", "TFLOP_per_s", flops / ms / 1e9, False)


def bench_case(
    res: Any, dtype: str, n: int, steps: list[str], reps: int, sms: int, timed: Any, example: Any
) -> None:
    """One n^3 case: cuBLAS (both B layouts), then each ladder step."""
    import torch

    from zyntax.kernels import gemm_sm90

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    case = f"{dtype}_{n}"
    flops = 2.0 * n**3
    sets = 3 if n >= 8192 else 6
    a_sets = [torch.randn(n, n, device="cuda").to(tdt) for _ in range(sets)]
    bt_sets = [torch.randn(n, n, device="cuda").to(tdt) for _ in range(sets)]
    out = torch.empty(n, n, device="cuda", dtype=tdt)

    def tflops(ms: float) -> float:
        return flops / ms / 1e9

    ms = timed(lambda i: torch.matmul(a_sets[i], bt_sets[i].t(), out=out), sets, reps)
    res.add(case, "cublas", "TFLOP_per_s", tflops(ms), False, b="col")
    b_sets = [bt.t().contiguous() for bt in bt_sets]
    ms = timed(lambda i: torch.matmul(a_sets[i], b_sets[i], out=out), sets, reps)
    res.add(case, "cublas_b_row", "TFLOP_per_s", tflops(ms), False, b="row")
    b_sets.clear()

    # correctness of the timed kernel on the first set (relative error norm)
    ref = a_sets[0][:512].double() @ bt_sets[0].t().double()
    out.fill_(float("nan"))
    gemm_sm90.matmul_sm90(a_sets[0], bt_sets[0].t(), out, b_layout="col")
    torch.cuda.synchronize()
    err = float(torch.linalg.norm(out[:512].double() - ref) / torch.linalg.norm(ref))
    print(f"  {case}: zyntax relative error {err:.2e}", flush=True)

    if "wgmma_tma" in steps and dtype == "bf16":
        out32 = torch.empty(n, n, device="cuda", dtype=torch.float32)
        runs = [example(a_sets[i], bt_sets[i], out32) for i in range(sets)]
        ms = timed(lambda i: runs[i](), sets, reps)
        res.add(case, "zyntax_wgmma_tma", "TFLOP_per_s", tflops(ms), False)
    base = gemm_sm90.Config(dtype=dtype, out_dtype=dtype)
    cluster = dataclasses.replace(base, cluster_m=2)
    # (config, SM cap or None for as many clusters as fit, B layout)
    variants: dict[str, tuple[Any, int | None]] = {
        "ws": (dataclasses.replace(base, setmaxnreg=False), 1 << 30),
        "ws_setmaxnreg": (base, 1 << 30),
        "persistent": (base, sms),
        # variations of the full kernel (not ladder steps)
        "persistent_overlap": (dataclasses.replace(base, overlap=True), sms),
        "persistent_group16": (dataclasses.replace(base, group_m=16), sms),
        "persistent_no_setmaxnreg": (dataclasses.replace(base, setmaxnreg=False), sms),
        "persistent_again": (base, sms),  # the full kernel timed twice: the spread
        "cluster": (cluster, None),
        "cluster_group16": (dataclasses.replace(cluster, group_m=16), None),
        "cluster_group4": (dataclasses.replace(cluster, group_m=4), None),
        "cluster_overlap": (dataclasses.replace(cluster, overlap=True), None),
        "persistent_b_row": (dataclasses.replace(base, b_layout="row"), sms),
        "cluster_b_row": (dataclasses.replace(cluster, b_layout="row"), None),
        "cluster_again": (cluster, None),
    }
    b_rows = None
    if any(s.endswith("b_row") for s in steps):
        b_rows = [bt.t().contiguous() for bt in bt_sets]
    for step, (cfg, cap) in variants.items():
        if step not in steps:
            continue

        def run(i: int, cfg: Any = cfg, cap: int | None = cap) -> None:
            if cfg.b_layout == "row":
                assert b_rows is not None
                b = b_rows[i]
            else:
                b = bt_sets[i].t()
            gemm_sm90.matmul_sm90(a_sets[i], b, out, b_layout=cfg.b_layout, config=cfg, sms=cap)

        try:
            out.fill_(float("nan"))
            run(0)
            torch.cuda.synchronize()
            got = out[:512].double()
            step_err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
            ms = timed(run, sets, reps)
        except Exception as e:  # a failing variant is reported, not fatal
            print(f"  {case} {step}: failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        print(f"  {case} {step}: {tflops(ms):.1f} TFLOP/s, rel. error {step_err:.2e}", flush=True)
        res.add(case, f"zyntax_{step}", "TFLOP_per_s", tflops(ms), False, rel_err=step_err)
        if step == "persistent":
            res.add(case, "zyntax", "TFLOP_per_s", tflops(ms), False, rel_err=err)


if __name__ == "__main__":
    main()
