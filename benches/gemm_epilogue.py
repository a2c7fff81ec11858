"""GEMM with bias / activation epilogues (issues 30 and 25): the tile program
(its warp-specialised pipeline applies the epilogue in the consumers'
registers), the hand-written ``gemm_sm90`` variant, and cuBLAS in the same
run: ``torch.addmm`` followed by PyTorch's GELU (tanh), and cuBLASLt's fused
epilogue (``torch._addmm_activation``, its GELU only). Cases are transformer
layers: the QKV projection with bias, the MLP up projection with bias and
GELU, 4096^3 with bias and GELU; ``--plain`` adds products without an
epilogue (the route between the tile program and ``gemm_sm90``). ``--ws``
adds rows of the tile program under forced warp-specialised schedules
(``gemm_tile.WS_FORCE``, names in :data:`WS_VARIANTS`), to compare tile
shapes and ping-pong per shape in one run.

Device time of each call (CUDA events), inputs rotated over copies that
exceed L2, best of three medians; each zyntax row is checked against the
float64 result of copy 0 (relative Frobenius error in the notes). JSON:
bench ``gemm_epilogue``, metric ``TFLOP_per_s``.

    python benches/gemm_epilogue.py [--quick] [--cases qkv_bias,...] [--plain]
        [--ws pp128_s6,coop256_s4] [--profile]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, Results, best_of, event_median_ms, optional

#: case -> (M, N, K, bias, activation)
CASES: dict[str, tuple[int, int, int, bool, str | None]] = {
    "qkv_bias_8192x3072x1024": (8192, 3072, 1024, True, None),
    "mlp_up_bias_gelu_8192x4096x1024": (8192, 4096, 1024, True, "gelu"),
    "bias_gelu_4096": (4096, 4096, 4096, True, "gelu"),
    # the medium transformer block's other projections (benches/blocks.py)
    "o_bias_8192x1024x1024": (8192, 1024, 1024, True, None),
    "down_bias_8192x1024x4096": (8192, 1024, 4096, True, None),
}
PLAIN: dict[str, tuple[int, int, int, bool, str | None]] = {
    "plain_8192": (8192, 8192, 8192, False, None),
    "plain_4096": (4096, 4096, 4096, False, None),
    # the QKV shape without its bias: what the epilogue's bias costs
    "plain_qkv_8192x3072x1024": (8192, 3072, 1024, False, None),
}
L2_FLUSH_BYTES = 256 << 20
#: name -> the ``gemm_tile`` knobs its rows set: ``WS_FORCE`` ((bm, bn, warps,
#: stages), wgmma groups in flight, ping-pong), ``TMA_STORE`` (the output
#: through shared memory and TMA), ``GELU_APPROX`` (GELU on tanh.approx)
PP6, PP5, PP4 = (
    ((128, 128, 4, 6), 1, True),
    ((128, 128, 4, 5), 1, True),
    ((128, 128, 4, 4), 1, True),
)
CO4, CO3 = ((128, 256, 8, 4), 1, False), ((128, 256, 8, 3), 1, False)
#: 256x128 over two consumer warpgroups of 128x128 (two m64 wgmmas each),
#: cuBLAS's tile on the layer GEMMs; ``_cn`` / ``_cm``: clusters of two
#: along N (sharing the 256-row ``a`` tile) / along M (sharing ``b``).
T4 = ((256, 128, 8, 4), 1, False)
#: 3 stages leave shared memory for two 256-row box buffers: no store waits
#: within a tile (4 stages: one buffer for the tile's two boxes)
T3 = ((256, 128, 8, 3), 1, False)
#: the same tile over four consumer warpgroups (64 accumulators a thread):
#: half the epilogue per thread, 4 warps per scheduler to hide its latency
T4W16 = ((256, 128, 16, 4), 1, False)
T4CN, T4CM = (*T4, 2, 1), (*T4, 2, 0)
CO4CN, CO4CM = (*CO4, 2, 1), (*CO4, 2, 0)
WS_VARIANTS: dict[str, dict[str, Any]] = {
    "pp128_s6": {"WS_FORCE": PP6},
    "pp128_s5": {"WS_FORCE": PP5},
    "coop256_s4": {"WS_FORCE": CO4},
    "coop128_s6": {"WS_FORCE": ((128, 128, 8, 6), 1, False)},
    "pp128_s6_tma": {"WS_FORCE": PP6, "TMA_STORE": True},
    "pp128_s5_tma": {"WS_FORCE": PP5, "TMA_STORE": True},
    "pp128_s4_tma": {"WS_FORCE": PP4, "TMA_STORE": True},
    "coop256_s4_tma": {"WS_FORCE": CO4, "TMA_STORE": True},
    "coop256_s3_tma": {"WS_FORCE": CO3, "TMA_STORE": True},
    "pp128_s6_tanh": {"WS_FORCE": PP6, "GELU_APPROX": True},
    "pp128_s5_tma_tanh": {"WS_FORCE": PP5, "TMA_STORE": True, "GELU_APPROX": True},
    "coop256_s4_tma_tanh": {"WS_FORCE": CO4, "TMA_STORE": True, "GELU_APPROX": True},
    "coop256_s4_tma_cn": {"WS_FORCE": CO4CN, "TMA_STORE": True},
    "coop256_s4_tma_cm": {"WS_FORCE": CO4CM, "TMA_STORE": True},
    "t256x128_s4_tma": {"WS_FORCE": T4, "TMA_STORE": True},
    "t256x128_s3_tma": {"WS_FORCE": T3, "TMA_STORE": True},
    "t256x128w16_s4_tma": {"WS_FORCE": T4W16, "TMA_STORE": True},
    "t256x128_s4_tma_cn": {"WS_FORCE": T4CN, "TMA_STORE": True},
    "t256x128_s4_tma_cm": {"WS_FORCE": T4CM, "TMA_STORE": True},
    "t256x128_s4_tma_tanh": {"WS_FORCE": T4, "TMA_STORE": True, "GELU_APPROX": True},
    "t256x128_s4_tma_cn_tanh": {"WS_FORCE": T4CN, "TMA_STORE": True, "GELU_APPROX": True},
    "t256x128_s4_tma_cm_tanh": {"WS_FORCE": T4CM, "TMA_STORE": True, "GELU_APPROX": True},
    "coop256_s4_tma_cn_tanh": {"WS_FORCE": CO4CN, "TMA_STORE": True, "GELU_APPROX": True},
    "coop256_s4_tma_cm_tanh": {"WS_FORCE": CO4CM, "TMA_STORE": True, "GELU_APPROX": True},
}


def bench_case(
    ctx: dict[str, Any], case: str, m: int, n: int, k: int, bias: bool, act: Any
) -> None:
    torch, zk, res = ctx["torch"], ctx["zk"], ctx["res"]
    dev, warmup, iters = ctx["dev"], ctx["warmup"], ctx["iters"]
    fn = torch.nn.functional
    flop = 2.0 * m * n * k
    copies = max(1, min(16, -(-L2_FLUSH_BYTES // ((m * k + k * n) * 2))))
    gen = torch.Generator(device=dev).manual_seed(hash(case) & 0xFFFF)

    def rand(*shape: int) -> Any:
        x = torch.randn(*shape, device=dev, generator=gen) / (k**0.25)
        return x.to(torch.bfloat16)

    As = [rand(m, k) for _ in range(copies)]
    Bs = [rand(k, n) for _ in range(copies)]
    bs = rand(n) if bias else None
    C = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    extra = {"m": m, "n": n, "k": k, "bias": bias, "activation": act}

    def report(impl: str, f: Any, **more: Any) -> None:
        if ctx["profile"]:
            # one launch of each kernel for Nsight Compute: the zyntax rows
            # launched theirs when their result was checked
            if impl.startswith("cublas"):
                f(0)
                torch.cuda.synchronize()
            return
        try:
            ms = best_of(3, lambda: event_median_ms(f, copies, iters, warmup))
        except Exception as e:  # a failing impl is reported, not fatal
            print(f"  {case:<34} {impl:<16} failed: {type(e).__name__}: {str(e)[:200]}")
            return
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False, **extra, **more)

    def torch_ref(i: int) -> Any:
        if bs is None:
            return torch.matmul(As[i], Bs[i], out=C)
        y = torch.addmm(bs, As[i], Bs[i], out=C)
        return fn.gelu(y, approximate="tanh") if act == "gelu" else y

    report("cublas", torch_ref, note="addmm + torch GELU" if act else "matmul")
    if bs is not None and act == "gelu":
        # cuBLASLt's fused bias + GELU epilogue (its GELU form)
        report("cublaslt_fused", lambda i: torch._addmm_activation(bs, As[i], Bs[i], use_gelu=True))
    # f64 reference of copy 0
    ref = As[0].double() @ Bs[0].double()
    if bs is not None:
        ref += bs.double()
    if act == "gelu":
        ref = fn.gelu(ref, approximate="tanh")
    Z = torch.empty_like(C)
    impls = (("zyntax_tile", "tile"), ("zyntax_sm90", "sm90"), ("zyntax", None))
    if ctx["profile"] or ctx["tile_only"]:
        impls = impls[:1]
    for impl, variant in impls:
        try:
            chosen = zk.choose_variant(As[0], Bs[0], bias=bs, activation=act, variant=variant)
        except Exception as e:
            print(f"  {case:<34} {impl:<16} (no variant: {str(e)[:160]})")
            continue

        def call(i: int, v: Any = variant) -> Any:
            return zk.matmul(As[i], Bs[i], Z, bias=bs, activation=act, variant=v)

        t0 = time.perf_counter()
        try:
            Z.fill_(float("nan"))
            call(0)
            torch.cuda.synchronize()
        except Exception as e:
            print(f"  {case:<34} {impl:<16} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        err = ((Z.double() - ref).norm() / ref.norm()).item()
        res.notes[f"{case}_{impl}_rel_err"] = err
        res.notes[f"{case}_{impl}_first_call_s"] = round(time.perf_counter() - t0, 2)
        report(impl, call, variant=chosen)
        print(f"  {case:<34} {impl:<16} rel. error {err:.2e}")
    for name in ctx["ws"]:
        # a GELU case runs a variant's ``_tanh`` twin instead of it when both are asked
        twin = act == "gelu" and f"{name}_tanh" in ctx["ws"]
        if (act == "gelu" or "GELU_APPROX" not in WS_VARIANTS[name]) and not twin:
            forced_row(ctx, case, name, As, Bs, bs, act, ref, Z, report)


def forced_row(
    ctx: dict[str, Any], case: str, name: str, As: Any, Bs: Any, bs: Any, act: Any,
    ref: Any, Z: Any, report: Any,
) -> None:  # fmt: skip
    """A row of the tile program under the forced WS schedule `name`."""
    from zyntax.kernels import gemm_tile as gt

    knobs = {"WS_FORCE": None, "TMA_STORE": False, "GELU_APPROX": False}
    defaults = {k: getattr(gt, k) for k in knobs}
    for k, v in {**knobs, **WS_VARIANTS[name]}.items():
        setattr(gt, k, v)
    gt.ws_schedule.cache_clear()
    gt.matmul.plans.clear()
    impl = f"zyntax_tile_{name}"

    def call(i: int) -> Any:
        return gt.matmul(As[i], Bs[i], Z, bias=bs, activation=act)

    try:
        Z.fill_(float("nan"))
        call(0)
        ctx["torch"].cuda.synchronize()
        err = ((Z.double() - ref).norm() / ref.norm()).item()
        ctx["res"].notes[f"{case}_{impl}_rel_err"] = err
        if err < 2e-2:
            report(impl, call, ws=name)
        print(f"  {case:<34} {impl:<16} rel. error {err:.2e}")
    except Exception as e:
        print(f"  {case:<34} {impl:<16} failed: {type(e).__name__}: {str(e)[:200]}")
    finally:
        for k, v in defaults.items():
            setattr(gt, k, v)
        gt.ws_schedule.cache_clear()
        gt.matmul.plans.clear()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", type=Path, default=ROOT / "benches" / "results")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--plain", action="store_true", help="add the products without epilogue")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--ws", default="", help="forced WS schedules to add (WS_VARIANTS)")
    p.add_argument(
        "--tile-only",
        action="store_true",
        help="of zyntax's rows only the tile program's (no sm90, no registry row)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="one launch per kernel, untimed, no JSON (run under Nsight Compute: "
        "cuBLAS, the tile program's default and the --ws rows; sm90 is left out)",
    )
    args = p.parse_args()
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        print("gemm_epilogue: needs torch with CUDA", file=sys.stderr)
        return 1
    import zyntax.kernels.gemm as zk

    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    res = Results("gemm_epilogue", torch.cuda.get_device_name(dev))
    ws = [w for w in args.ws.split(",") if w]
    bad = [w for w in ws if w not in WS_VARIANTS]
    if bad:
        p.error(f"--ws: unknown {bad}; known: {list(WS_VARIANTS)}")
    ctx = {"torch": torch, "zk": zk, "res": res, "dev": dev, "ws": ws, "profile": args.profile}
    ctx["tile_only"] = args.tile_only
    ctx.update(warmup=2 if args.quick else 5, iters=5 if args.quick else args.iters)
    todo = {c: CASES[c] for c in args.cases.split(",") if c in CASES}
    todo.update({c: PLAIN[c] for c in args.cases.split(",") if c in PLAIN})
    if args.plain:
        todo.update(PLAIN)
    partial = args.out_dir / "gemm_epilogue-partial.json"
    for case, spec in todo.items():
        t0 = time.perf_counter()
        bench_case(ctx, case, *spec)
        torch.cuda.empty_cache()
        res.notes[f"{case}_wall_s"] = round(time.perf_counter() - t0, 1)
        partial.parent.mkdir(parents=True, exist_ok=True)  # kept if a time limit stops the run
        partial.write_text(
            json.dumps({"device": res.device, "results": res.rows, "notes": res.notes}, indent=1)
        )
    if not args.profile:
        res.write(args.out_dir)
    partial.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
