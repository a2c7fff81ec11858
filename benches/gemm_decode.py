"""Small-M (decode, small batch) GEMM on the GPU: the tile program's
schedules x K splits against cuBLAS, device time, and the host time per call.

Usage on a GPU machine (see docs/gpu-runs.md):

    python benches/gemm_decode.py [--out-dir DIR] [--quick] [--shapes 1x4096x4096,...]
        [--entries gemv:32x128x4:4,...] [--no-host] [--defaults-only]

A shape ``MxNxK+bias`` (``+gelu``: bias and GELU) times the fused epilogue
against cuBLAS's ``addmm`` (and its GELU after it).

Ladder: for each shape (M x N x K, bf16, row-major), cuBLAS
(``torch.matmul``), ``zyntax.kernels.matmul`` with its own choice, and the
tile program (``kernels.gemm_tile``) forced to each LADDER schedule: a split
route (``gemm_tile.FORCE``: f32 partials per K split, then a finishing pass),
the persistent warp-specialised one (``gemm_tile.WS_FORCE``) or the FFMA
gemv program (``kernels/gemv_tile.py``); ``tile_tensorcore`` is the
library's choice with the gemv program off.
Each is checked against float64 first and timed as benches/gemm.py times
(device time: calls queued behind a spin kernel, the inputs rotated past L2,
best of three medians). Host: ``time.perf_counter_ns`` around each of 300
repeated calls (the plan cache's hit path), median. Writes
``gemm_decode-<device>-<date>-<commit>.json`` in the results format of
docs/performance.md (case ``MxNxK``, impls ``cublas``, ``zyntax`` and
``tile_<schedule>_s<splits>``, metric ``us``; host times in ``notes``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import Results, best_of
from gemm import L2_FLUSH_BYTES, STARVED, median_ms

SHAPES = [
    (1, 4096, 4096),
    (1, 4096, 14336),
    (4, 4096, 4096),
    (16, 14336, 4096),
    (64, 4096, 4096),
    (256, 4096, 14336),
    (256, 6144, 4096),
]
#: (route, schedule, n): route "split" forces the tensor-core K-split route
#: (``gemm_tile.FORCE``: schedule (bm, bn, bk, warps, stages), n K splits;
#: the warp-specialised kernel up to gemm_tile.WS_SPLIT_MAX_M, raised to 256
#: here), "ws" the persistent warp-specialised schedule (``WS_FORCE``, n 1),
#: "gemv" the FFMA program of ``kernels/gemv_tile.py`` (``GEMV_FORCE``:
#: schedule (bk, bn, warps), n instances per SM; for the rows the crate
#: gives that program), "gemvp" the same with ``GEMV_PREFETCH``, "swap" the
#: swapped form (``gemm_tile.SWAP_FORCE``: schedule (weight rows, tokens,
#: bk, warps, stages) of ``c^T = b^T a^T``, n K splits), "swapauto" the
#: swapped form on the crate's schedule (``gemm_tile.SWAP``) and "noswap" the
#: tile program's routes without it (the gemv program at one row).
Entry = tuple[str, tuple[int, ...], int]
GEMV: list[Entry] = [
    ("gemv", (16, 128, 4), 4),
    ("gemv", (16, 128, 4), 6),
    ("gemv", (16, 128, 4), 12),
    ("gemv", (8, 256, 4), 6),
    ("gemv", (16, 256, 4), 4),
    ("gemv", (32, 256, 8), 2),
    ("gemv", (32, 256, 8), 4),
    ("gemv", (16, 512, 8), 3),
]
LADDER: dict[str, list[Entry]] = {
    "small": [
        *GEMV,
        ("split", (64, 128, 64, 4, 4), 2),
        ("split", (64, 128, 64, 4, 4), 4),
        ("split", (64, 128, 64, 4, 4), 8),
        ("split", (64, 128, 64, 4, 4), 16),
        ("split", (64, 64, 64, 4, 4), 8),
        ("split", (64, 256, 64, 4, 4), 4),
        ("split", (64, 128, 64, 4, 8), 4),
        ("split", (64, 128, 64, 4, 8), 8),
    ],
    "mid": [
        ("ws", (64, 128, 64, 4, 6), 1),
        ("ws", (64, 256, 64, 4, 4), 1),
        ("ws", (128, 128, 64, 8, 4), 1),
        ("split", (64, 128, 64, 4, 6), 2),
        ("split", (64, 128, 64, 4, 4), 3),
        ("split", (64, 256, 64, 4, 4), 2),
        ("split", (128, 128, 64, 8, 4), 2),
        ("split", (128, 256, 64, 8, 4), 2),
    ],
}


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


def _forced(entry: Entry | None) -> None:
    """Sets (or with None restores) the small-M route and schedule."""
    from zyntax.kernels import gemm_tile as gt
    from zyntax.kernels import gemv_tile as gv

    gt.FORCE, gt.WS_FORCE, gt.WS_SPLIT_MAX_M = None, None, DEFAULTS["max_m"]
    gt.SWAP, gt.SWAP_FORCE = DEFAULTS["swap"], None
    gv.GEMV_ON, gv.GEMV_FORCE, gv.GEMV_PREFETCH = True, None, DEFAULTS["prefetch"]
    if entry is not None:
        route, sched, n = entry
        gv.GEMV_ON = route in ("gemv", "gemvp")
        if gv.GEMV_ON:
            gv.GEMV_FORCE = (sched, n)  # type: ignore[assignment]
            gv.GEMV_PREFETCH = route == "gemvp"
        elif route == "ws":
            bm, bn, _, warps, stages = sched
            gt.WS_FORCE = ((bm, bn, warps, stages), 0, False)
            gt.FORCE = (sched, 1)  # type: ignore[assignment]  # unsplit: the persistent kernel
        elif route == "split":
            gt.FORCE = (sched, n)  # type: ignore[assignment]
            gt.WS_SPLIT_MAX_M = 256
        elif route == "swap":
            gt.SWAP_FORCE = (sched, n)  # type: ignore[assignment]
        elif route == "swapauto":
            gt.SWAP = True
        elif route == "noswap":  # the routes before the swapped form
            gt.SWAP = False
            gv.GEMV_ON = True
        # "tensorcore": the library's own tensor-core choice (no gemv)
    gt.ws_schedule.cache_clear()
    gt.matmul.plans.clear()  # type: ignore[attr-defined]


DEFAULTS: dict[str, Any] = {}


def _entry(text: str) -> Entry:
    """``route:AxBxC:n`` (or ``tensorcore``) as a ladder entry."""
    route, *rest = text.split(":")
    if not rest:
        return (route, (), 0)
    return (route, tuple(int(x) for x in rest[0].split("x")), int(rest[1]))


def sweep(
    torch: Any, zk: Any, m: int, n: int, k: int, iters: int, epi: str = ""
) -> list[dict[str, Any]]:
    """The rows of one shape; `epi` "bias" or "gelu" (bias and GELU, tanh
    form) adds an epilogue: cuBLAS runs ``addmm`` (and
    ``gelu(approximate="tanh")`` after it), zyntax the fused epilogue."""
    from zyntax.kernels import gemm_tile as gt
    from zyntax.kernels import gemv_tile as gv

    copies = max(1, min(32, -(-L2_FLUSH_BYTES // ((m * k + k * n) * 2))))
    As = [torch.randn(m, k, device="cuda").bfloat16() / k**0.25 for _ in range(copies)]
    Bs = [torch.randn(k, n, device="cuda").bfloat16() / k**0.25 for _ in range(copies)]
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda").bfloat16() if epi else None
    act = "gelu" if epi == "gelu" else None
    ref = As[0].double() @ Bs[0].double()
    if bias is not None:
        ref = ref + bias.double()
    if act:
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    rows: list[dict[str, Any]] = []

    def cublas(i: int) -> None:
        if bias is None:
            torch.matmul(As[i], Bs[i], out=c)
            return
        torch.addmm(bias, As[i], Bs[i], out=c)
        if act:
            torch.nn.functional.gelu(c, approximate="tanh")  # a new tensor, as a model's

    def ours(mm: Any) -> Any:
        return lambda i: mm(As[i], Bs[i], c, bias=bias, activation=act)

    def timed(impl: str, fn: Any, **more: Any) -> None:
        try:
            c.fill_(float("nan"))
            fn(0)
            if act and impl == "cublas":  # its GELU's output is not c
                c.copy_(torch.nn.functional.gelu(c, approximate="tanh"))
            err = ((c.double() - ref).norm() / ref.norm()).item()
            # and element by element: one wrong column hides in a norm
            worst = ((c.double() - ref).abs().max() / ref.abs().max()).item()
            if not (err < 2e-2 and worst < 5e-2):
                print(f"  {m}x{n}x{k} {impl:<34} wrong: worst element {worst:.2e}")
                print(f"  {m}x{n}x{k} {impl:<34} wrong: rel. error {err:.2e}")
                return
            ms = best_of(3, lambda: median_ms(fn, copies, 3, iters))
        except Exception as e:
            print(f"  {m}x{n}x{k} {impl:<34} failed: {type(e).__name__}: {str(e)[:200]}")
            return
        gbs = (m * k + k * n + m * n) * 2 / ms / 1e6
        rows.append({"impl": impl, "us": ms * 1e3, "rel_err": err, "GB_per_s": gbs, **more})
        print(f"  {m}x{n}x{k} {impl:<34} {ms * 1e3:8.2f} us {gbs:7.0f} GB/s  err {err:.1e}")

    timed("cublas", cublas)
    variant = zk.choose_variant(As[0], Bs[0], bias=bias, activation=act)
    timed("zyntax", ours(zk.matmul), variant=variant)
    entries: list[Entry] = [("tensorcore", (), 0), *LADDER["small" if m <= 64 else "mid"]]
    if DEFAULTS.get("defaults_only"):  # the library's choice and the tensor-core route only
        entries = entries[:1]
    if DEFAULTS.get("entries") is not None:  # --entries replaces the ladder
        entries = [e for e in DEFAULTS["entries"] if e[0] != "tensorcore" or m <= 64]
    if not gv.applies(m, (1, 1, 1), None):  # rows the crate keeps off the gemv program
        entries = [e for e in entries if not e[0].startswith("gemv")]
    for entry in entries:
        route, cfg, n_ = entry
        _forced(entry)
        try:
            name = f"tile_{route}_{'x'.join(map(str, cfg))}_{n_}" if cfg else f"tile_{route}"
            timed(name, ours(gt.matmul))
        finally:
            _forced(None)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--out-dir", type=Path, default=Path("."), help="gemm_decode-<device>-<date>.json goes here"
    )
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--shapes",
        default="",
        help="comma-separated MxNxK, each optionally +bias or +gelu (bias and GELU) "
        "(default: SHAPES)",
    )
    p.add_argument("--no-host", action="store_true", help="skip the host time per call")
    p.add_argument(
        "--defaults-only", action="store_true", help="no ladder: cuBLAS, zyntax, tile_tensorcore"
    )
    p.add_argument(
        "--entries",
        default=None,
        help="comma-separated ladder entries route:schedule:n instead of LADDER "
        "(gemv:32x128x4:4, split:64x128x64x4x4:2, ws:64x128x64x4x6:1, swap:64x16x64x4x12:1, "
        "swapauto, noswap, tensorcore)",
    )
    args = p.parse_args()
    import torch

    import zyntax.kernels.gemm as zk
    from zyntax.kernels import gemm_tile as gt
    from zyntax.kernels import gemv_tile as gv

    DEFAULTS.update(
        max_m=gt.WS_SPLIT_MAX_M,
        defaults_only=args.defaults_only,
        prefetch=gv.GEMV_PREFETCH,
        swap=gt.SWAP,
    )
    if args.entries is not None:
        DEFAULTS["entries"] = [_entry(e) for e in args.entries.split(",") if e]

    shapes: list[tuple[int, int, int, str]] = [(*s, "") for s in SHAPES]
    if args.shapes:
        shapes = []
        for text in args.shapes.split(","):  # MxNxK[+bias|+gelu]
            dims, _, epi = text.partition("+")
            m_, n_, k_ = (int(x) for x in dims.split("x"))
            shapes.append((m_, n_, k_, epi))
    res = Results("gemm_decode", torch.cuda.get_device_name(0))
    res.notes["timing"] = "device"
    res.notes["host"] = {}
    iters = 10 if args.quick else 30
    for m, n, k, epi in shapes:
        case = f"{m}x{n}x{k}" + (f"+{epi}" if epi else "")
        if not args.no_host:
            h = host_us(torch, zk, m, n, k)
            res.notes["host"][f"{m}x{n}x{k}"] = h
            print(f"  host {m}x{n}x{k}: first {h['first_call_us']:.0f} us, repeat "
                  f"{h['repeat_call_us']:.2f} us")  # fmt: skip
        for row in sweep(torch, zk, m, n, k, iters, epi):
            more = {key: v for key, v in row.items() if key not in ("impl", "us")}
            res.add(case, row["impl"], "us", row["us"], True, m=m, n=n, k=k, **more)
        torch.cuda.empty_cache()
        res.write(args.out_dir)  # kept if a time limit stops the run
    res.notes["device_time_starved"] = len(STARVED)
    res.write(args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
