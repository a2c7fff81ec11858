"""GEMM throughput: zyntax.kernels.matmul against cuBLAS (torch) and Triton, same run.

Usage on a GPU machine (see docs/gpu-runs.md):

    python benches/gemm.py [--quick] [--cases bf16_8192,fp32_8192] [--sweep] [--sm90-clusters 1,2]

Bench ``gemm``, metric ``TFLOP_per_s`` (2·M·N·K per call), impls ``zyntax``,
``cublas`` (``torch.matmul``; ``torch._scaled_mm`` for fp8) and ``triton``
(Triton at its best: the fastest of Triton's tutorial matmuls, the grouped
one and the persistent TMA one, each autotuned per shape over its published
Hopper configs, and a persistent pointer kernel over a few configs; the row's
``config`` names the winner: ``benches/_gemm_programs.py``). Each value is the
best of three medians of per-call CUDA-event timings after a warm-up (every
impl alike), the inputs rotated
over enough copies that L2 holds none of them between calls. The events
time device work only (``DEVICE_TIME``: the calls are queued behind a spin
kernel, so no host time is inside); ``--host-bound`` times each call with
an idle GPU instead (its host time counts when longer than its kernels). A case whose
zyntax variant does not exist (or rejects it) gets no zyntax row; its peer
rows stay. ``--sweep`` adds ``sweep_bf16_<n>`` cases (square sizes) for the
plot (``benches/plot_gemm.py`` renders docs/gemm.png from the JSON).
``--sm90-clusters 1,2`` also times the sm90 variant with each cluster size
(``gemm_sm90.CLUSTER_M``) on every case it runs: zyntax-only rows in
``notes.sm90_cluster``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _gemm_programs as gemm_programs
from _common import ROOT, Results, best_of, event_median_ms, optional

#: case -> (dtype, M, N, K, zyntax variant or None for the registry's choice)
CASES: dict[str, tuple[str, int, int, int, str | None]] = {
    "bf16_8192": ("bf16", 8192, 8192, 8192, None),
    "fp16_8192": ("f16", 8192, 8192, 8192, None),
    "bf16_4096": ("bf16", 4096, 4096, 4096, None),
    "fp8_8192": ("e4m3", 8192, 8192, 8192, None),
    "fp8_4096": ("e4m3", 4096, 4096, 4096, None),
    "tf32_8192": ("tf32", 8192, 8192, 8192, None),
    "tf32_4096": ("tf32", 4096, 4096, 4096, None),
    "fp32_8192": ("f32", 8192, 8192, 8192, "simt"),
    "bf16_mma_sync_8192": ("bf16", 8192, 8192, 8192, "mma_sync"),
    "bf16_m16_n4096_k4096": ("bf16", 16, 4096, 4096, None),
    "bf16_m128_n4096_k4096": ("bf16", 128, 4096, 4096, None),
    "bf16_m16_n14336_k4096": ("bf16", 16, 14336, 4096, None),
}
SWEEP = (512, 1024, 2048, 3072, 4096, 6144, 8192)
#: --model-sweep (issue 30): M (tokens) x the (N, K) of model layers: LLaMA-3-8B,
#: LLaMA-3-70B with 8-way tensor parallelism, the GPT-2 LM head.
MODEL_M = (1, 16, 64, 256, 1024, 4096, 16384)
MODEL_NK = (
    (4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096),  # LLaMA-3-8B
    (1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584),  # LLaMA-3-70B / TP8
    (50304, 768),  # GPT-2 LM head
)  # fmt: skip
#: Operand layouts beside row-major: ``at`` times ``A.T @ B`` (A stored K x M),
#: ``slice`` a column slice of a wider A (row stride 2K).
LAYOUT_CASES: dict[str, tuple[str, int, int, int, str]] = {
    "bf16_at_b_4096": ("bf16", 4096, 4096, 4096, "at"),
    "bf16_slice_4096": ("bf16", 4096, 4096, 4096, "slice"),
}
#: The GPT-2-small training step's backward GEMMs (2048 tokens, d = 768, MLP
#: 3072; ``y = x @ w`` with ``w`` d_in x d_out): weight gradients ``x.T @ dy``
#: (``at``: K = the tokens) and input gradients ``dy @ w.T`` (``bt``: B the
#: transpose of a stored N x K weight). ``--train-shapes`` runs them.
TRAIN_CASES: dict[str, tuple[str, int, int, int, str]] = {
    "bf16_dw_768x2304_k2048": ("bf16", 768, 2304, 2048, "at"),  # QKV
    "bf16_dw_768x3072_k2048": ("bf16", 768, 3072, 2048, "at"),  # MLP up
    "bf16_dw_3072x768_k2048": ("bf16", 3072, 768, 2048, "at"),  # MLP down
    "bf16_dx_2048x768_k2304": ("bf16", 2048, 768, 2304, "bt"),  # QKV
    "bf16_dx_2048x768_k3072": ("bf16", 2048, 768, 3072, "bt"),  # MLP up
    "bf16_dx_2048x3072_k768": ("bf16", 2048, 3072, 768, "bt"),  # MLP down
}
L2_FLUSH_BYTES = 256 << 20  # rotate over copies until they exceed this (H100 L2: 50 MB)


#: How a call is timed (``--host-bound`` switches it off): True, device time
#: only. A spin kernel (``torch.cuda._sleep``) holds the stream while the host
#: queues all the timed calls behind it, so each call's events measure the
#: GPU's work from its first kernel to its last, for every impl alike, and
#: never a GPU waiting for the host. Without it a decode-shape call's events
#: also hold its host time when that is longer than its kernels: the
#: session-11 sweep timed cuBLAS's 1x4096x4096 at 38 us (0.88 TFLOP/s) for
#: 32 MB of weights an H200 streams in about 7 us (torch.matmul's host time
#: there: 17.6 us a call).
DEVICE_TIME = True
#: Calls whose GPU caught up with the host while they were queued (the spin
#: was too short): reported in ``notes.device_time_starved``, 0 when fair.
STARVED: list[str] = []


def median_ms(fn: Callable[[int], Any], copies: int, warmup: int, iters: int) -> float:
    """Median of per-call CUDA-event times; call i uses input copy i % copies."""
    if DEVICE_TIME:
        return device_median_ms(fn, copies, warmup, iters)
    return event_median_ms(fn, copies, iters, warmup)


def device_median_ms(fn: Callable[[int], Any], sets: int, warmup: int, iters: int) -> float:
    """Median device time (ms) of one call `fn(i)` (input set ``i % sets``):
    every call is queued behind a spin kernel that outlasts the host's queueing
    of them all, so the events around a call see only its kernels (and the
    gaps between them on the device)."""
    import statistics

    import torch

    for i in range(max(warmup, sets)):
        fn(i % sets)
    torch.cuda.synchronize()
    t0 = time.perf_counter()  # the host's queueing time per call (no sync inside)
    for i in range(sets):
        fn(i % sets)
    host_us = (time.perf_counter() - t0) / sets * 1e6
    torch.cuda.synchronize()
    # ~2000 cycles a microsecond (H100/H200 boost clocks: a lower clock spins longer)
    # (3x the measured queueing: B1 of session 12 found 12 of ~250 spins short at 1.5x)
    torch.cuda._sleep(int((iters * host_us * 3 + 500) * 2000))
    pairs = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i % sets)
        end.record()
        pairs.append((start, end))
    if pairs[-1][0].query():  # the GPU reached the last call before the host queued it
        STARVED.append(f"{host_us:.1f} us/call")
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)


# ---------------------------------------------------------------- Triton peer


def triton_matmul(triton: Any, tl: Any) -> Callable[..., Any]:
    """A persistent matmul: one program per SM walks output tiles in grouped
    order (the structure of Triton's persistent-matmul tutorial)."""

    @triton.jit
    def kernel(
        a_ptr, b_ptr, c_ptr, M, N, K,
        sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
        SMS: tl.constexpr, PREC: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        ksteps = tl.cdiv(K, BK)
        per_group = GROUP * tiles_n
        for tile in tl.range(pid, tiles_m * tiles_n, SMS, flatten=True):
            group = tile // per_group
            first = group * GROUP
            size = min(tiles_m - first, GROUP)
            pm = first + (tile % size)
            pn = (tile % per_group) // size
            rm = pm * BM + tl.arange(0, BM)
            rn = pn * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for ks in range(0, ksteps):
                kk = ks * BK + rk
                a = tl.load(
                    a_ptr + rm[:, None] * sam + kk[None, :] * sak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K),
                    other=0.0,
                )
                b = tl.load(
                    b_ptr + kk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N),
                    other=0.0,
                )
                acc = tl.dot(a, b, acc, input_precision=PREC)
            c = acc.to(c_ptr.dtype.element_ty)
            tl.store(
                c_ptr + rm[:, None] * scm + rn[None, :] * scn,
                c,
                mask=(rm[:, None] < M) & (rn[None, :] < N),
            )

    def run(
        a: Any, b: Any, c: Any, sms: int, prec: str, cfg: tuple[int, int, int, int, int]
    ) -> None:
        bm, bn, bk, stages, warps = cfg
        m, k = a.shape
        n = b.shape[1]
        tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
        kernel[(min(sms, tiles),)](
            a, b, c, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=bm, BN=bn, BK=bk, GROUP=8, SMS=min(sms, tiles), PREC=prec,
            num_stages=stages, num_warps=warps,
        )  # fmt: skip

    return run


TRITON_CONFIGS = {
    "bf16": [(128, 256, 64, 3, 8), (128, 128, 64, 4, 8), (64, 128, 64, 4, 4)],
    "f16": [(128, 256, 64, 3, 8), (128, 128, 64, 4, 8), (64, 128, 64, 4, 4)],
    "e4m3": [(128, 256, 128, 3, 8), (128, 128, 128, 4, 8)],
    "tf32": [(128, 128, 32, 3, 8), (128, 64, 32, 4, 4)],
    "f32": [(128, 128, 32, 3, 8), (64, 64, 32, 4, 4)],
    "decode": [(16, 128, 128, 4, 4), (64, 64, 128, 4, 4), (128, 64, 64, 4, 4)],
}


def bench_case(
    ctx: dict[str, Any],
    case: str,
    dt: str,
    m: int,
    n: int,
    k: int,
    variant: str | None,
    layout: str = "row",
) -> None:
    """Times cuBLAS, Triton and zyntax on one case and checks zyntax's result.
    `layout`: ``row`` (row-major A), ``at`` (A is the transpose of a K x M
    tensor), ``slice`` (A is a column slice of an M x 2K tensor) or ``bt``
    (row-major A, B the transpose of an N x K tensor)."""
    torch, zk, res, trun = ctx["torch"], ctx["zk"], ctx["res"], ctx["trun"]
    dev, sms, tdt, warmup, iters = ctx["dev"], ctx["sms"], ctx["tdt"], ctx["warmup"], ctx["iters"]
    from zyntax.errors import ZyntaxError

    flop = 2.0 * m * n * k
    per_copy = (m * k + k * n) * (1 if dt == "e4m3" else torch.finfo(tdt[dt]).bits // 8)
    copies = max(1, min(32, -(-L2_FLUSH_BYTES // per_copy)))
    gen = torch.Generator(device=dev).manual_seed(hash(case) & 0xFFFF)

    def rand(r: int, c: int, _dt: str = dt, _g: Any = gen) -> Any:
        x = torch.randn(r, c, device=dev, generator=_g) / (k**0.25)
        return x.to(tdt[_dt]) if _dt != "e4m3" else x.to(tdt["e4m3"])

    if layout == "at":
        As = [rand(k, m).t() for _ in range(copies)]
    elif layout == "slice":
        As = [rand(m, 2 * k)[:, :k] for _ in range(copies)]
    else:
        As = [rand(m, k) for _ in range(copies)]
    # B row-major K x N for zyntax and Triton (``bt``: K-major); cuBLAS takes any layout.
    Bs = [rand(n, k).t() if layout == "bt" else rand(k, n) for _ in range(copies)]
    out_dt = torch.bfloat16 if dt == "e4m3" else tdt[dt]
    C = torch.empty(m, n, device=dev, dtype=out_dt)
    extra: dict[str, Any] = {"m": m, "n": n, "k": k, "layout": layout}
    torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"

    def report(impl: str, fn: Callable[[int], Any], **more: Any) -> None:
        try:
            # Best of three medians, for every impl alike: one median of a
            # few-microsecond call (decode shapes) moved by 30 % from run to run.
            ms = best_of(3, lambda: median_ms(fn, copies, warmup, iters))
        except Exception as e:  # a peer or variant that fails is reported, not fatal
            print(f"  {case:<22} {impl:<18} failed: {type(e).__name__}: {str(e)[:200]}")
            return
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False, **extra, **more)

    # fp8 and tf32 tensor-core operands are read K-major: B goes column-major to
    # cuBLAS (``_scaled_mm`` requires it) and zyntax alike; Triton keeps row-major B.
    Bz = [b.t().contiguous().t() for b in Bs] if dt in ("e4m3", "tf32") else Bs
    if dt == "e4m3":
        one = torch.tensor(1.0, device=dev)
        report(
            "cublas",
            lambda i: torch._scaled_mm(As[i], Bz[i], scale_a=one, scale_b=one, out_dtype=out_dt),
        )
        # zyntax's fp8 kernels accumulate in the tensor cores only (no
        # periodic promotion to f32): cuBLAS with the same shortcut beside them.
        report(
            "cublas_fast_accum",
            lambda i: torch._scaled_mm(
                As[i], Bz[i], scale_a=one, scale_b=one, out_dtype=out_dt, use_fast_accum=True
            ),
        )
    else:
        report("cublas", lambda i: torch.matmul(As[i], Bz[i], out=C))
    if trun is not None or ctx.get("ttut") is not None or ctx.get("ttma") is not None:
        prec = "ieee" if dt == "f32" else "tf32"
        key = "decode" if m <= 128 else dt
        best: tuple[float, Any] | None = None
        # The sweep uses the first config (compiled once); the named cases pick the best.
        configs = TRITON_CONFIGS[key][:1] if case.startswith("sweep") else TRITON_CONFIGS[key]
        configs = configs if trun is not None else []
        for cfg in configs:
            try:
                ms = median_ms(lambda i, c=cfg: trun(As[i], Bs[i], C, sms, prec, c), copies, 2, 5)
            except Exception as e:
                print(f"  triton config {cfg} failed: {type(e).__name__}: {str(e)[:160]}")
                return
            if best is None or ms < best[0]:
                best = (ms, cfg)
        tut = ctx.get("ttut")
        if tut is not None and dt in ("bf16", "f16"):
            # The tutorial kernel autotunes on its first call (the warm-up).
            try:
                ms = median_ms(lambda i: tut(As[i], Bs[i], C), copies, 2, 5)
                if best is None or ms < best[0]:
                    best = (ms, "tutorial")
            except Exception as e:
                print(f"  triton tutorial failed: {type(e).__name__}: {str(e)[:160]}")
        tma = ctx.get("ttma")
        # The persistent TMA tutorial kernel reads B as the other peers do
        # (K-major for fp8 and tf32, as wgmma needs; row-major otherwise).
        Bt = Bz if dt in ("e4m3", "tf32") else Bs
        for ws in ctx.get("triton_ws", (False,)) if tma is not None and dt != "f32" else ():
            try:
                ms = median_ms(lambda i, w=ws: tma(As[i], Bt[i], C, w), copies, 2, 5)
                if best is None or ms < best[0]:
                    best = (ms, ("tma", ws))
            except Exception as e:
                print(f"  triton tma ws={ws} failed: {type(e).__name__}: {str(e)[:160]}")
        tfn: Callable[[int], Any] | None = None
        if best is not None and best[1] == "tutorial":
            cfg_s = str(getattr(tut.kernel, "best_config", "autotuned"))  # type: ignore[union-attr]
            tfn, tcfg = (lambda i: tut(As[i], Bs[i], C)), f"tutorial {cfg_s}"  # type: ignore[misc]
        elif best is not None and isinstance(best[1], tuple):
            ws = best[1][1]
            cfg_s = str(getattr(tma.kernel, "best_config", "autotuned"))  # type: ignore[union-attr]
            tfn = lambda i, w=ws: tma(As[i], Bt[i], C, w)  # type: ignore[misc]  # noqa: E731
            tcfg = f"tma_persistent ws={ws} {cfg_s}"
        elif best is not None:
            cfg = best[1]
            tfn = lambda i, c=cfg: trun(As[i], Bs[i], C, sms, prec, c)  # noqa: E731
            tcfg = str(list(cfg))
        if tfn is not None:
            report("triton", tfn, config=tcfg)
            # The peer's result too, against float64 (a wrong kernel would flatter it).
            C.fill_(float("nan"))
            tfn(0)
            ref64 = As[0].double() @ Bs[0].double()
            err = ((C.double() - ref64).norm() / ref64.norm()).item()
            res.notes[f"{case}_triton_rel_err"] = err
            print(f"  {case:<22} triton rel. error {err:.2e} ({tcfg[:60]})")
    if ctx.get("tile_search") and dt in ("bf16", "f16"):
        tile_case(ctx, case, dt, As, Bs, C, copies, report)
    elif ctx.get("tile") is not None and dt in ("bf16", "f16", "f32"):
        tile_lib_case(ctx, case, As, Bs, C, copies, report)
    if dt in ("e4m3", "tf32") and ctx["arch"] == "sm_90a":
        tc_tile_case(ctx, case, dt, As, Bz, C, copies, report)
    zvariant = variant
    try:
        chosen = zk.choose_variant(As[0], Bz[0], variant=zvariant, allow_tf32=dt == "tf32")
    except ZyntaxError as e:
        print(f"  {case:<22} zyntax             (no variant: {str(e)[:160]})")
        return
    Z = torch.empty_like(C)
    scales: dict[str, Any] = {"scale_a": 1.0, "scale_b": 1.0} if dt == "e4m3" else {}
    if dt == "tf32":
        scales["allow_tf32"] = True
    report(
        "zyntax", lambda i: zk.matmul(As[i], Bz[i], Z, variant=zvariant, **scales), variant=chosen
    )
    # Correctness of what was timed, against the float64 product of copy 0.
    Z.fill_(float("nan"))
    zk.matmul(As[0], Bz[0], Z, variant=zvariant, **scales)
    ref = As[0].double() @ Bs[0].double()
    err = ((Z.double() - ref).norm() / ref.norm()).item()
    res.notes[f"{case}_zyntax_rel_err"] = err
    print(f"  {case:<22} zyntax rel. error {err:.2e}")
    if ctx["sm90_clusters"] and chosen == "sm90":
        sm90_clusters(ctx, case, As, Bz, Z, ref, flop, copies)


def tc_tile_case(
    ctx: dict[str, Any], case: str, dt: str, As: Any, Bz: Any, C: Any, copies: int, report: Any
) -> None:
    """Row ``zyntax_tile``: the tile program on fp8 (scales 1.0) or tf32
    (``matmul(variant="tile")``: wgmma .e4m3 / .tf32, B column-major), checked
    against float64 of the values the tensor cores read first."""
    torch, zk = ctx["torch"], ctx["zk"]
    kw: dict[str, Any] = {"scale_a": 1.0, "scale_b": 1.0} if dt == "e4m3" else {"allow_tf32": True}
    try:
        C.fill_(float("nan"))
        zk.matmul(As[0], Bz[0], C, variant="tile", **kw)
        a, b = As[0], Bz[0]
        if dt == "tf32":  # the low 13 mantissa bits dropped
            a, b = ((x.view(torch.int32) & ~0x1FFF).view(torch.float32) for x in (a, b))
        ref = a.double() @ b.double()
        err = ((C.double() - ref).norm() / ref.norm()).item()
    except Exception as e:
        print(f"  {case:<22} zyntax_tile failed: {type(e).__name__}: {str(e)[:200]}")
        return
    ctx["res"].notes[f"{case}_zyntax_tile_rel_err"] = err
    print(f"  {case:<22} zyntax_tile rel. error {err:.2e}")
    if err < 2e-2:
        report("zyntax_tile", lambda i: zk.matmul(As[i], Bz[i], C, variant="tile", **kw))
    if not ctx.get("tc_ladder"):
        return
    from zyntax.kernels import gemm_tile

    for force in TC_LADDER:  # rows zyntax_tile_<config>, each checked first
        gemm_tile.WS_FORCE = force
        gemm_tile.ws_schedule.cache_clear()
        name = "zyntax_tile_" + "_".join(str(x) for x in (*force[0], *force[1:]))
        try:
            C.fill_(float("nan"))
            zk.matmul(As[0], Bz[0], C, variant="tile", **kw)
            e = ((C.double() - ref).norm() / ref.norm()).item()
            if e < 2e-2:
                report(name, lambda i: zk.matmul(As[i], Bz[i], C, variant="tile", **kw))
            else:
                print(f"  {case:<22} {name} rel. error {e:.2e}")
        except Exception as ex:
            print(f"  {case:<22} {name} failed: {type(ex).__name__}: {str(ex)[:160]}")
    gemm_tile.WS_FORCE = None
    gemm_tile.ws_schedule.cache_clear()
    # The crate's schedule with the epilogue stored through shared memory and TMA.
    gemm_tile.TMA_STORE, was = True, gemm_tile.TMA_STORE
    try:
        C.fill_(float("nan"))
        zk.matmul(As[0], Bz[0], C, variant="tile", **kw)
        e = ((C.double() - ref).norm() / ref.norm()).item()
        if e < 2e-2:
            report(
                "zyntax_tile_tma_store", lambda i: zk.matmul(As[i], Bz[i], C, variant="tile", **kw)
            )
        else:
            print(f"  {case:<22} zyntax_tile_tma_store rel. error {e:.2e}")
    except Exception as ex:
        print(f"  {case:<22} zyntax_tile_tma_store failed: {type(ex).__name__}: {str(ex)[:160]}")
    finally:
        gemm_tile.TMA_STORE = was


#: --tc-ladder: warp-specialised schedules (gemm_tile.WS_FORCE: (bm, bn, warps,
#: stages), wgmma groups in flight, ping-pong[, CTAs per cluster, along N])
#: timed for the fp8 and tf32 cases beside the crate's choice. Session 12 timed
#: 128x256 over 3 stages, ping-pong 128x128 and clusters along M (none gained);
#: session 13: cuBLAS's 256x128 over two consumer warpgroups, alone and in
#: clusters of 2 along N (sharing `a`) or M.
TC_LADDER: list[tuple[Any, ...]] = [
    ((256, 128, 8, 4), 1, False),
    ((256, 128, 8, 4), 1, False, 2, True),
    ((256, 128, 8, 4), 1, False, 2, False),
]


def tile_case(
    ctx: dict[str, Any],
    case: str,
    dt: str,
    As: Any,
    Bs: Any,
    C: Any,
    copies: int,
    report: Callable[..., None],
) -> None:
    """Times the zyntax tile GEMM (benches/_gemm_programs.py) over its schedules:
    row ``zyntax_tile`` with the best schedule, after checking its result."""
    torch, tile = ctx["torch"], ctx["tile"]
    from zyntax.errors import ZyntaxError

    m, n = C.shape
    ref = As[0].double() @ Bs[0].double()
    best: tuple[float, Any, Any] | None = None
    for bm, bn, bk, warps, stages in gemm_programs.TILE_CONFIGS:
        try:
            a_unit = 0 if As[0].stride(0) == 1 else 1
            kern = gemm_programs.tile_gemm(
                tile, dt, (bm, bn), bk, warps, stages, ctx["arch"], a_unit
            )
            grid = kern.grid(m, n)
            C.fill_(float("nan"))
            kern.launch(As[0], Bs[0], C, grid=grid)
            err = ((C.double() - ref).norm() / ref.norm()).item()
            if not err < 2e-2:
                print(f"  {case:<22} tile {bm}x{bn}x{bk} w{warps} s{stages}: rel. error {err:.2e}")
                continue
            ms = median_ms(lambda i, kn=kern, g=grid: kn.launch(As[i], Bs[i], C, grid=g),
                           copies, 2, 5)  # fmt: skip
        except (ZyntaxError, RuntimeError) as e:
            print(f"  {case:<22} tile {bm}x{bn}x{bk} w{warps} s{stages}: {str(e)[:160]}")
            continue
        if best is None or ms < best[0]:
            best = (ms, (bm, bn, bk, warps, stages), kern)
    torch.cuda.synchronize()
    if best is not None:
        _, cfg, kern = best
        grid = kern.grid(m, n)
        report("zyntax_tile", lambda i: kern.launch(As[i], Bs[i], C, grid=grid), config=list(cfg))


def tile_lib_case(
    ctx: dict[str, Any], case: str, As: Any, Bs: Any, C: Any, copies: int, report: Any
) -> None:
    """Row ``zyntax_tile``: the library's tile program (``kernels.gemm_tile.matmul``,
    its own schedule table and split-K), checked against float64 first."""
    from zyntax.kernels import gemm_tile

    try:
        C.fill_(float("nan"))
        gemm_tile.matmul(As[0], Bs[0], C)
        ref = As[0].double() @ Bs[0].double()
        err = ((C.double() - ref).norm() / ref.norm()).item()
    except Exception as e:
        print(f"  {case:<22} zyntax_tile failed: {type(e).__name__}: {str(e)[:200]}")
        return
    print(f"  {case:<22} zyntax_tile rel. error {err:.2e}")
    if not err < 2e-2:
        return
    m, k = As[0].shape[-2:]
    sched = gemm_tile.schedule(_zdt(C), m, C.shape[-1], k, 1, ctx["arch"], ctx["sms"])
    ws = gemm_tile.ws_schedule(m, C.shape[-1], k, ctx["sms"]) if ctx["arch"] == "sm_90a" else None
    report(
        "zyntax_tile",
        lambda i: gemm_tile.matmul(As[i], Bs[i], C),
        schedule=str(sched),
        ws_schedule=str(ws),
    )
    if not ctx.get("tile_ws_compare") or ctx["arch"] != "sm_90a":
        return
    # The same program with the warp-specialised pipeline switched the other
    # way (for a K-split product: its split route, gemm_tile.WS_SPLIT).
    flag = "WS_SPLIT" if sched[1] > 1 else "WARP_SPECIALIZE"
    ws = getattr(gemm_tile, flag)
    setattr(gemm_tile, flag, not ws)
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    name = "zyntax_tile_cp_async" if ws else "zyntax_tile_ws"
    try:
        C.fill_(float("nan"))
        gemm_tile.matmul(As[0], Bs[0], C)
        err = ((C.double() - ref).norm() / ref.norm()).item()
        print(f"  {case:<22} {name} rel. error {err:.2e}")
        if err < 2e-2:
            report(name, lambda i: gemm_tile.matmul(As[i], Bs[i], C))
    except Exception as e:
        print(f"  {case:<22} {name} failed: {type(e).__name__}: {str(e)[:200]}")
    finally:
        setattr(gemm_tile, flag, ws)
        gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]


def _zdt(t: Any) -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "f16"}.get(str(t.dtype), "f32")


def batched_case(ctx: dict[str, Any], nb: int = 8, s: int = 512) -> None:
    """``bf16_batched_<nb>x<s>``: (nb, s, s) @ (nb, s, s); cuBLAS's batched
    matmul against the tile program's batch axis (Triton's tutorial has none)."""
    torch, res = ctx["torch"], ctx["res"]
    from zyntax.kernels import gemm_tile

    case, dev, flop = f"bf16_batched_{nb}x{s}", ctx["dev"], 2.0 * nb * s**3
    copies = max(1, min(32, -(-L2_FLUSH_BYTES // (2 * nb * s * s * 2))))
    As = [torch.randn(nb, s, s, device=dev).bfloat16() for _ in range(copies)]
    Bs = [torch.randn(nb, s, s, device=dev).bfloat16() for _ in range(copies)]
    C = torch.empty(nb, s, s, device=dev, dtype=torch.bfloat16)
    C.fill_(float("nan"))
    gemm_tile.matmul(As[0], Bs[0], C)
    ref = As[0].double() @ Bs[0].double()
    err = ((C.double() - ref).norm() / ref.norm()).item()
    print(f"  {case:<22} zyntax_tile rel. error {err:.2e}")
    res.notes[f"{case}_zyntax_rel_err"] = err
    for impl, fn in (
        ("cublas", lambda i: torch.matmul(As[i], Bs[i], out=C)),
        ("zyntax", lambda i: gemm_tile.matmul(As[i], Bs[i], C)),
    ):
        ms = best_of(3, lambda f=fn: median_ms(f, copies, ctx["warmup"], ctx["iters"]))
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False, nb=nb, m=s, n=s, k=s)


#: MoE rows per expert (8 experts, ragged; 4096 tokens routed), and (K, N).
MOE_SIZES = (700, 312, 1024, 95, 513, 640, 800, 12)
MOE_KN = (4096, 1792)


def grouped_case(ctx: dict[str, Any]) -> None:
    """``bf16_moe_e8``: 8 experts' (rows_e, K) @ (K, N) in one grouped launch,
    against cuBLAS one matmul per expert and ``torch._grouped_mm`` (where it exists)."""
    torch, res = ctx["torch"], ctx["res"]
    import zyntax.kernels as zk

    case, dev = "bf16_moe_e8", ctx["dev"]
    (k, n), rows = MOE_KN, sum(MOE_SIZES)
    flop = 2.0 * rows * n * k
    copies = max(1, min(16, -(-L2_FLUSH_BYTES // ((rows * k + 8 * k * n) * 2))))
    As = [torch.randn(rows, k, device=dev).bfloat16() / k**0.25 for _ in range(copies)]
    Bs = [torch.randn(8, k, n, device=dev).bfloat16() / k**0.25 for _ in range(copies)]
    C = torch.empty(rows, n, device=dev, dtype=torch.bfloat16)
    starts = [sum(MOE_SIZES[:i]) for i in range(8)]
    C.fill_(float("nan"))
    zk.grouped_matmul(As[0], Bs[0], MOE_SIZES, C)
    ref = torch.cat(
        [
            As[0][s : s + g].double() @ Bs[0][e].double()
            for e, (s, g) in enumerate(zip(starts, MOE_SIZES, strict=True))
        ]
    )
    err = ((C.double() - ref).norm() / ref.norm()).item()
    print(f"  {case:<22} zyntax rel. error {err:.2e}")
    res.notes[f"{case}_zyntax_rel_err"] = err

    def per_expert(i: int) -> None:
        for e, (s, g) in enumerate(zip(starts, MOE_SIZES, strict=True)):
            torch.matmul(As[i][s : s + g], Bs[i][e], out=C[s : s + g])

    impls: list[tuple[str, Any]] = [
        ("cublas", per_expert),
        ("zyntax", lambda i: zk.grouped_matmul(As[i], Bs[i], MOE_SIZES, C)),
    ]
    gmm = getattr(torch, "_grouped_mm", None)
    if gmm is not None:
        offs = torch.tensor([s + g for s, g in zip(starts, MOE_SIZES, strict=True)], device=dev,
                            dtype=torch.int32)  # fmt: skip
        impls.append(("torch_grouped_mm", lambda i: gmm(As[i], Bs[i], offs=offs)))
    for impl, fn in impls:
        try:
            ms = best_of(3, lambda f=fn: median_ms(f, copies, ctx["warmup"], ctx["iters"]))
        except Exception as e:
            print(f"  {case:<22} {impl} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False, experts=8, k=k, n=n)


def sm90_clusters(
    ctx: dict[str, Any], case: str, As: Any, Bz: Any, Z: Any, ref: Any, flop: float, copies: int
) -> None:
    """Times the sm90 variant with each cluster size (``gemm_sm90.CLUSTER_M``):
    zyntax-only rows in ``notes.sm90_cluster`` beside the case's zyntax row."""
    from zyntax.kernels import gemm_sm90

    zk, res = ctx["zk"], ctx["res"]
    for cm in ctx["sm90_clusters"]:
        gemm_sm90.CLUSTER_M = cm
        try:
            Z.fill_(float("nan"))
            zk.matmul(As[0], Bz[0], Z, variant="sm90")
            err = ((Z.double() - ref).norm() / ref.norm()).item()
            ms = median_ms(
                lambda i: zk.matmul(As[i], Bz[i], Z, variant="sm90"),
                copies,
                ctx["warmup"],
                ctx["iters"],
            )
        except Exception as e:
            print(f"  {case:<22} sm90 cluster_m={cm} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        finally:
            gemm_sm90.CLUSTER_M = None
        tf = flop / ms / 1e9
        row = {"case": case, "cluster_m": cm, "TFLOP_per_s": round(tf, 4), "rel_err": err}
        res.notes.setdefault("sm90_cluster", []).append(row)
        print(f"  {case:<22} sm90 cluster_m={cm:<6} {tf:10.3f} TFLOP/s (rel. error {err:.2e})")


#: mma_sync tile configs the ladder compares (bm, bn, bk, wm, wn, stages, fragment pipeline).
LADDER = [
    (128, 128, 32, 64, 64, 4, False),
    (128, 128, 32, 64, 64, 4, True),
    (128, 128, 32, 64, 64, 3, True),
    (128, 128, 64, 64, 64, 3, False),
    (128, 128, 64, 64, 64, 3, True),
    (128, 256, 32, 64, 64, 3, True),
    (256, 128, 32, 64, 64, 3, True),
    (128, 256, 64, 64, 64, 3, True),
    (128, 128, 32, 64, 32, 4, True),
    (128, 256, 32, 64, 64, 4, True),
]


def call_overhead_us(torch: Any, zk: Any, fn: Any = None) -> float:
    """Host time of one small matmul call (normalise, choose, launch): by
    default ``zk.matmul``; `fn(a, b, c)` times another entry (the same shape)."""
    import time

    call = fn or (lambda a, b, c: zk.matmul(a, b, c))
    a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(16, 64, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):
        call(a, b, c)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(500):
        call(a, b, c)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / 500 * 1e6


#: --tile-ladder: small-M shapes and the schedules timed for them:
#: (code path, (bm, bn, bk, warps, stages), K splits); "mma": the sm_80 code.
TILE_LADDER_SHAPES = ((1, 4096, 4096), (16, 14336, 4096))
TILE_LADDER = (
    ("wgmma", (64, 64, 64, 4, 4), 1),
    ("wgmma", (64, 64, 64, 4, 4), 8),
    ("wgmma", (64, 128, 64, 4, 4), 4),
    ("mma", (16, 64, 32, 4, 1), 4),
)


def tile_ladder(ctx: dict[str, Any]) -> None:
    """Times kernels.gemm_tile.matmul with its default schedule and each
    TILE_LADDER schedule (``gemm_tile.FORCE``) at the TILE_LADDER_SHAPES,
    cuBLAS beside it (``notes.tile_ladder``)."""
    torch, res = ctx["torch"], ctx["res"]
    from zyntax.kernels import gemm_tile

    dev = torch.cuda.current_device()
    for m, n, k in TILE_LADDER_SHAPES:
        copies = max(1, min(32, -(-L2_FLUSH_BYTES // ((m * k + k * n) * 2))))
        As = [torch.randn(m, k, device="cuda").bfloat16() for _ in range(copies)]
        Bs = [torch.randn(k, n, device="cuda").bfloat16() for _ in range(copies)]
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = As[0].double() @ Bs[0].double()
        flop = 2.0 * m * n * k
        ms = median_ms(lambda i, A=As, B=Bs, C=c: torch.matmul(A[i], B[i], out=C), copies, 3, 20)
        tf = round(flop / ms / 1e9, 4)
        rows = [{"m": m, "n": n, "k": k, "impl": "cublas", "TFLOP_per_s": tf}]
        arch = gemm_tile._arch(dev)
        for kind, cfg, splits in (("default", None, 0), *TILE_LADDER):
            gemm_tile.FORCE = None if cfg is None else (cfg, splits)
            gemm_tile._archs[dev] = "sm_80" if kind == "mma" else arch
            gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
            try:
                c.fill_(float("nan"))
                gemm_tile.matmul(As[0], Bs[0], c)
                err = ((c.double() - ref).norm() / ref.norm()).item()
                ms = median_ms(
                    lambda i, A=As, B=Bs, C=c: gemm_tile.matmul(A[i], B[i], C), copies, 3, 20
                )
            except Exception as e:
                print(f"  tile ladder {m}x{n}x{k} {kind} {cfg} failed: {str(e)[:160]}")
                continue
            finally:
                gemm_tile.FORCE = None
                gemm_tile._archs[dev] = arch
                gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
            tf = round(flop / ms / 1e9, 4)
            impl = f"{kind} {cfg} splits {splits}" if cfg else "default"
            rows.append({"m": m, "n": n, "k": k, "impl": impl, "TFLOP_per_s": tf, "rel_err": err})
        for r in rows:
            print(f"  tile ladder {m}x{n}x{k} {r['impl']:<40} {r['TFLOP_per_s']:10.3f} TFLOP/s")
        res.notes.setdefault("tile_ladder", []).extend(rows)


#: Decode-shape ladders: (case tag, (M, N, K), the zyntax.kernels attribute, configs).
SMALL_LADDERS = [
    (
        "m16",
        (16, 4096, 4096),
        "MMA_SYNC_SMALL_M_CONFIG",
        [
            (16, 64, 64, 16, 32, 4, True),
            (16, 32, 64, 16, 32, 4, True),
            (16, 32, 64, 16, 32, 6, True),
            (16, 64, 64, 16, 16, 4, True),
            (16, 128, 64, 16, 32, 4, True),
        ],
    ),
    (
        "m128",
        (128, 4096, 4096),
        "MMA_SYNC_MID_M_CONFIG",
        [
            (64, 64, 64, 32, 32, 4, True),
            (64, 64, 32, 32, 32, 4, True),
            (32, 64, 64, 32, 32, 4, True),
            (64, 128, 64, 32, 64, 3, True),
            (128, 64, 64, 64, 32, 3, True),
        ],
    ),
]


def ladder(ctx: dict[str, Any]) -> None:
    """TFLOP/s of each mma_sync config (JSON ``notes.ladder``) at bf16 8192^3
    (``ladder_<config>``, plus the default config with the tail checks kept:
    ``ladder_checked``) and
    at the decode shapes (``ladder_m16_<config>``, ``ladder_m128_<config>``);
    the fastest config of each becomes the one the cases use."""
    ladders = [("", (8192, 8192, 8192), "MMA_SYNC_CONFIG", LADDER), *SMALL_LADDERS]
    for tag, shape, attr, configs in ladders:
        one_ladder(ctx, tag, shape, attr, configs)


def one_ladder(
    ctx: dict[str, Any], tag: str, shape: tuple[int, int, int], attr: str, configs: list[Any]
) -> None:
    torch, zk, res = ctx["torch"], ctx["zk"], ctx["res"]
    m, n, k = shape
    copies = max(1, min(16, -(-L2_FLUSH_BYTES // ((m * k + k * n) * 2))))
    As = [torch.randn(m, k, device="cuda").bfloat16() for _ in range(copies)]
    Bs = [torch.randn(k, n, device="cuda").bfloat16() for _ in range(copies)]
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = As[0].double() @ Bs[0].double()
    best: tuple[float, Any] | None = None
    default = getattr(zk, attr)
    prefix = f"ladder_{tag}_" if tag else "ladder_"
    runs: list[tuple[str, Any, bool]] = []
    if not tag:
        runs.append(("ladder_checked", default, False))
    for bm, bn, bk, wm, wn, st, fp in configs:
        cfg = zk.gemm_mma_sync.Config(bm, bn, bk, wm, wn, st, frag_pipeline=fp)
        runs.append((f"{prefix}{bm}x{bn}x{bk}_w{wm}x{wn}_s{st}{'_fp' if fp else ''}", cfg, True))
    even = zk._even
    for name, cfg, keep_even in runs:
        setattr(zk, attr, cfg)
        zk._even = even if keep_even else (lambda *a: False)
        zk._plans.clear()  # prepared calls hold the previous config's kernel
        try:
            c.fill_(float("nan"))
            zk.matmul(As[0], Bs[0], c, variant="mma_sync")
            err = ((c.double() - ref).norm() / ref.norm()).item()
            ms = median_ms(lambda i: zk.matmul(As[i], Bs[i], c, variant="mma_sync"), copies, 3, 20)
        except Exception as e:
            print(f"  {name}: failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        finally:
            zk._even = even
            zk._plans.clear()
        tf = 2.0 * m * n * k / ms / 1e9
        # Zyntax-only rows: notes, not results (a results case needs a peer row).
        row = {"case": name, "metric": "TFLOP_per_s", "value": round(tf, 4), "rel_err": err}
        res.notes.setdefault("ladder", []).append(dict(row, m=m, n=n, k=k))
        print(f"  {name:<40} {tf:10.3f} TFLOP/s")
        if keep_even and err < 2e-2 and (best is None or tf > best[0]):
            best = (tf, cfg)
    setattr(zk, attr, best[1] if best else default)
    res.notes[f"mma_sync_{attr}"] = str(getattr(zk, attr))
    print(f"  {attr} for the cases: {getattr(zk, attr)}")
    torch.cuda.empty_cache()


def main() -> int:
    p = argparse.ArgumentParser(description="GEMM TFLOP/s: zyntax vs cuBLAS vs Triton")
    p.add_argument("--out-dir", type=Path, default=ROOT / "benches" / "results")
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    p.add_argument("--sweep", action="store_true", help="add the square bf16 size sweep")
    p.add_argument(
        "--model-sweep",
        action="store_true",
        help="add the model-layer sweep (bf16_m<M>_n<N>_k<K>) and the A.T @ B / slice cases",
    )
    p.add_argument("--no-tile", action="store_true", help="skip the zyntax tile-program rows")
    p.add_argument(
        "--train-shapes",
        action="store_true",
        help="add the GPT-2-small training step's backward GEMMs (TRAIN_CASES)",
    )
    p.add_argument(
        "--tile-search",
        action="store_true",
        help="time benches/_gemm_programs.py's tile GEMM over its schedules (the best as "
        "zyntax_tile) instead of the library's tile program",
    )
    p.add_argument("--tile-ladder", action="store_true", help="time TILE_LADDER (notes)")
    p.add_argument(
        "--tc-ladder", action="store_true", help="time TC_LADDER for the fp8 and tf32 cases"
    )
    p.add_argument(
        "--tile-ws-compare",
        action="store_true",
        help="also time the tile program with gemm_tile.WARP_SPECIALIZE switched",
    )
    p.add_argument("--no-triton", action="store_true", help="no Triton rows")
    p.add_argument(
        "--no-triton-tutorial",
        action="store_true",
        help="no Triton tutorial rows (its autotuning of ten configs per shape; the "
        "persistent kernel's decode configs stay)",
    )
    p.add_argument(
        "--no-triton-tma",
        action="store_true",
        help="no rows of Triton's persistent TMA tutorial kernel (autotuned over its Hopper "
        "configs that fit shared memory)",
    )
    p.add_argument(
        "--triton-ws",
        action="store_true",
        help="also autotune the persistent TMA kernel with Triton's warp specialisation",
    )
    p.add_argument(
        "--host-bound",
        action="store_true",
        help="time each call with an idle GPU (host time counts) instead of device time",
    )
    p.add_argument(
        "--no-persistent-triton",
        action="store_true",
        help="Triton's tutorial matmul only (skip the persistent kernel's configs)",
    )
    p.add_argument("--iters", type=int, default=50, help="timed calls per impl and case")
    p.add_argument(
        "--ladder",
        action="store_true",
        help="time the mma_sync tile configs (and the tail-checked kernel) at 8192^3 "
        "first; the best config then runs the cases",
    )
    p.add_argument(
        "--sm90-clusters",
        default="",
        help="comma-separated cluster sizes (1,2) to time the sm90 variant with "
        "as well (notes.sm90_cluster)",
    )
    args = p.parse_args()
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        print("gemm: needs torch with CUDA", file=sys.stderr)
        return 1
    import zyntax.kernels.gemm as zk

    triton = optional("triton")
    tl = optional("triton.language") if triton else None
    trun = triton_matmul(triton, tl) if triton and tl else None
    if args.no_persistent_triton or args.no_triton:
        trun = None
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    res = Results("gemm", torch.cuda.get_device_name(dev))
    warmup, iters = (2, 5) if args.quick else (10, args.iters)

    cases = {c: CASES[c] for c in args.cases.split(",") if c in CASES}
    for c in args.cases.split(","):  # any sweep-style name: bf16_m<M>_n<N>_k<K>
        if mt := re.fullmatch(r"(bf16|f16)_m(\d+)_n(\d+)_k(\d+)", c):
            dt_ = mt.group(1)
            cases[c] = (dt_, int(mt.group(2)), int(mt.group(3)), int(mt.group(4)), None)
    if args.sweep:
        for s in SWEEP:
            cases[f"sweep_bf16_{s}"] = ("bf16", s, s, s, None)
    named = {**LAYOUT_CASES, **TRAIN_CASES}
    layouts = {c: named[c] for c in args.cases.split(",") if c in named}
    if args.train_shapes:
        layouts.update(TRAIN_CASES)
    if args.model_sweep:
        for mm in MODEL_M:
            for nn, kk in MODEL_NK:
                cases[f"bf16_m{mm}_n{nn}_k{kk}"] = ("bf16", mm, nn, kk, None)
        layouts.update(LAYOUT_CASES)
    tdt = {
        "bf16": torch.bfloat16,
        "f16": torch.float16,
        "tf32": torch.float32,
        "f32": torch.float32,
        "e4m3": getattr(torch, "float8_e4m3fn", None),
    }
    ctx = {"torch": torch, "zk": zk, "res": res, "trun": trun, "dev": dev, "sms": sms}
    ctx["ttut"] = gemm_programs.triton_tutorial_matmul(triton, tl) if triton and tl else None
    if args.no_triton or args.no_triton_tutorial:
        ctx["ttut"] = None
    ttma = gemm_programs.triton_tma_persistent_matmul
    use_tma = triton and tl and not (args.no_triton or args.no_triton_tma)
    ctx["ttma"] = ttma(triton, tl) if use_tma else None
    ctx["triton_ws"] = (False, True) if args.triton_ws else (False,)
    global DEVICE_TIME
    DEVICE_TIME = not args.host_bound
    res.notes["timing"] = "device" if DEVICE_TIME else "host_bound"
    if not args.no_tile:
        from zyntax import tile

        ctx["tile"] = tile
    cc = torch.cuda.get_device_capability(dev)
    # sm_90a: the arch-specific features (wgmma) the tile layer uses on Hopper.
    ctx["arch"] = "sm_90a" if cc == (9, 0) else f"sm_{cc[0]}{cc[1]}"
    ctx.update(tdt=tdt, warmup=warmup, iters=iters)
    ctx["sm90_clusters"] = [int(c) for c in args.sm90_clusters.split(",") if c]
    ctx["tile_search"] = args.tile_search
    ctx["tc_ladder"] = args.tc_ladder
    ctx["tile_ws_compare"] = args.tile_ws_compare
    res.notes["zyntax_matmul_call_us"] = call_overhead_us(torch, zk)
    from zyntax.kernels import gemm_tile

    res.notes["zyntax_tile_call_us"] = call_overhead_us(torch, zk, gemm_tile.matmul)
    res.notes["torch_matmul_call_us"] = call_overhead_us(
        torch, zk, lambda a, b, c: torch.matmul(a, b, out=c)
    )
    print(f"  tile program call overhead: {res.notes['zyntax_tile_call_us']:.1f} us, "
          f"torch.matmul {res.notes['torch_matmul_call_us']:.1f} us")  # fmt: skip
    print(f"  zyntax.kernels.matmul call overhead: {res.notes['zyntax_matmul_call_us']:.1f} us")
    if args.ladder:
        ladder(ctx)
    if args.tile_ladder:
        tile_ladder(ctx)
    names = args.cases.split(",")
    if args.model_sweep or "bf16_batched_8x512" in names:
        batched_case(ctx)
    if args.model_sweep or "bf16_moe_e8" in names:
        grouped_case(ctx)
    todo: list[tuple[str, tuple[Any, ...]]] = [*cases.items(), *layouts.items()]
    for case, spec in todo:
        t_case = time.perf_counter()
        if case in layouts:
            dt_, m_, n_, k_, layout = layouts[case]
            bench_case(ctx, case, dt_, m_, n_, k_, None, layout)
        else:
            bench_case(ctx, case, *spec)
        torch.cuda.empty_cache()
        # Wall time per case (Triton's autotuning on a new shape is most of it).
        res.notes[f"{case}_wall_s"] = round(time.perf_counter() - t_case, 1)
        print(f"  {case:<22} wall {res.notes[f'{case}_wall_s']} s")
        partial = args.out_dir / "gemm-partial.json"  # kept if a time limit stops the run
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(
            json.dumps({"device": res.device, "results": res.rows, "notes": res.notes}, indent=1)
        )
    res.notes["device_time_starved"] = len(STARVED)
    res.write(args.out_dir)
    (args.out_dir / "gemm-partial.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
