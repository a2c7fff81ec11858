"""Resource report of the zyntax.kernels matmul variants (no GPU needed):
registers, shared memory, stack and spills from ``ptxas -v`` for each tile
config, with the whole-tile (check-free) and the tail-checked kernels.

Usage: ``python benches/gemm_resources.py [--arch sm_90]`` prints a Markdown table
(the one in docs/performance.md, "GEMM").
"""

from __future__ import annotations

import argparse

import zyntax
from zyntax import ptxinfo
from zyntax.compiler import compile as compile_hir
from zyntax.kernels import gemm_mma_sync, gemm_simt, gemm_sm90
from zyntax.kernels.gemm import (
    MMA_SYNC_CONFIG,
    MMA_SYNC_MID_M_CONFIG,
    MMA_SYNC_SMALL_M_CONFIG,
    MMA_SYNC_TF32_CONFIG,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", default="sm_90")
    arch = ap.parse_args().arch
    rows = []
    for label, cfg in [
        ("large M", MMA_SYNC_CONFIG),
        ("M <= 256", MMA_SYNC_MID_M_CONFIG),
        ("M <= 32", MMA_SYNC_SMALL_M_CONFIG),
    ]:
        for even in (True, False):
            spec = gemm_mma_sync.Spec("bf16", "row", "row", True, True, "bf16", None, None, even)
            rows.append(
                ("mma_sync", label, cfg, even, gemm_mma_sync.build(cfg, spec), cfg.shared_bytes)
            )
    # Split-K (M <= 128): the same tiles with the partial-sum epilogue.
    for label, cfg in [("M <= 128", MMA_SYNC_MID_M_CONFIG), ("M <= 32", MMA_SYNC_SMALL_M_CONFIG)]:
        for even in (True, False):
            spec = gemm_mma_sync.Spec(
                "bf16", "row", "row", True, True, "bf16", None, None, even, split_k=True
            )
            module = gemm_mma_sync.build(cfg, spec)
            rows.append(("mma_sync split-K", label, cfg, even, module, cfg.shared_bytes))
    for even in (True, False):
        spec = gemm_mma_sync.Spec("tf32", "row", "row", True, True, "f32", None, None, even)
        module = gemm_mma_sync.build(MMA_SYNC_TF32_CONFIG, spec)
        cfg = MMA_SYNC_TF32_CONFIG
        rows.append(("mma_sync tf32", "all", cfg, even, module, cfg.shared_bytes))
    sspec = gemm_simt.Spec("row", "row", True, True, "f32", None, None)
    rows.append(
        ("simt", "all", gemm_simt.Config(), False, gemm_simt.build(gemm_simt.Config(), sspec), 0)
    )
    # The sm90 kernel has no tail-checked twin: TMA clips the edge tiles.
    for label, cfg90 in [
        ("bf16, B column-major", gemm_sm90.Config()),
        ("bf16, B row-major", gemm_sm90.Config(b_layout="row")),
        ("bf16, B column-major, 2-block cluster", gemm_sm90.Config(cluster_m=2)),
        ("bf16, B row-major, 2-block cluster", gemm_sm90.Config(b_layout="row", cluster_m=2)),
        ("tf32", gemm_sm90.Config(dtype="tf32", out_dtype="f32")),
        ("fp8 e4m3, scaled", gemm_sm90.Config(dtype="e4m3", scaled=True)),
    ]:
        rows.append((f"sm90 {label}", "all", cfg90, True, gemm_sm90.module(cfg90), 0))
    print(
        "| variant | M | tile (bm x bn x bk, warp tile, stages) | whole tiles | threads "
        "| registers | shared bytes | stack | spills |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for variant, label, cfg, even, module, dyn in rows:
        target = "sm_90a" if variant.startswith("sm90") else arch
        ptx = compile_hir(module, backend="nvptx", arch=target)
        res = ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, target).log)[module.kernels[0]]
        if variant.startswith("sm90"):
            producer, consumer = cfg.registers
            tile = (
                f"{cfg.bm}x{cfg.bn}x{cfg.bk}, {cfg.consumers} consumer warpgroups, "
                f"{cfg.stages} stages; setmaxnreg {producer}/{consumer}"
            )
            dyn = cfg.shared_bytes
        elif variant.startswith("mma_sync"):
            tile = f"{cfg.bm}x{cfg.bn}x{cfg.bk}, {cfg.wm}x{cfg.wn}, {cfg.stages}"
            tile += " + fragment pipeline" if cfg.frag_pipeline else ""
        else:
            tile = f"{cfg.bm}x{cfg.bn}x{cfg.bk}, 8x8 per thread, 2 buffers"
        whole = "TMA clips edges" if variant.startswith("sm90") else ("yes" if even else "no")
        shared = res["shared_bytes"] + dyn
        spills = res["spill_store_bytes"] + res["spill_load_bytes"]
        print(
            f"| {variant} | {label} | {tile} | {whole} | {cfg.threads} | "
            f"{res['registers']} | {shared} | {res['stack_bytes']} | {spills} |"
        )


if __name__ == "__main__":
    main()
