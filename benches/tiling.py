"""Automatic tiling: the loop-nest matmul (examples/nest_matmul.py, tiled by
zyntax.tiling) against the hand-tiled examples/kernels/sgemm.py and
``torch.matmul`` (TF32 off, so every impl does f32 FMA), C = A @ B in f32.

Cases ``sgemm_f32_<M>x<N>x<K>`` (a square one and a ragged one, sizes not
multiples of the 16x16 tile); metric ``GFLOP_per_s`` (2*M*N*K per call,
higher is better); impls ``zyntax_nest_tiled``, ``zyntax_prange_tiled`` (the
same matmul as a ``lang.prange`` kernel, examples/kernels/prange_matmul.py, tiled by
the kernel front-end), ``zyntax_sgemm_example``,
``zyntax_nest_untiled`` (the same nest without tiling, for reference) and
``torch``. Every zyntax result is checked against torch before timing.
The goal (issue 16): ``zyntax_nest_tiled`` >= 0.9x ``zyntax_sgemm_example``.

Run on a GPU machine: ``python benches/tiling.py [--out-dir DIR] [--quick]``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import ROOT, Results, best_of, optional, parse_args, per_call_us

from nest_matmul import build_with_report
from zyntax import cuda
from zyntax.nest import launch_grid

WG = (16, 16)


def example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / f"examples/kernels/{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sgemm_example() -> Any:
    return example("sgemm")


prange_mm = example("prange_matmul").mm


def launches(
    kernels: dict[str, Any], ex: Any, bufs: tuple[Any, Any, Any], mnk: tuple[int, int, int]
) -> dict[str, Callable[[], None]]:
    """One call per zyntax impl computing C = A @ B into ``bufs[2]``."""
    mm, nn, kk = mnk
    grid, block = launch_grid((mm, nn), WG)
    calls: dict[str, Callable[[], None]] = {}
    for impl, k in kernels.items():
        calls[impl] = functools.partial(k.launch, grid, block, *bufs, mm, nn, kk)
    eg = ((nn + ex.TILE - 1) // ex.TILE, (mm + ex.TILE - 1) // ex.TILE)
    calls["zyntax_sgemm_example"] = functools.partial(ex.sgemm[eg, (ex.TILE, ex.TILE)], *bufs)
    calls["zyntax_prange_tiled"] = functools.partial(
        prange_mm[prange_mm.launch_grid(mm, nn)], *bufs
    )
    return calls


def main() -> None:
    args = parse_args(__doc__ or "tiling bench")
    dev = cuda.Device(args.device)
    res = Results("tiling", dev.name)
    reps = 3 if args.quick else 20
    shapes = [(1024, 1024, 1024)] if args.quick else [(4096, 4096, 4096), (3001, 2999, 1001)]
    torch = optional("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
    ex = sgemm_example()
    tiled_mod, report = build_with_report(WG, tiled=True)
    res.notes["tiling_report"] = report
    res.notes["prange_tiling_report"] = prange_mm.tiling_report()
    kernels = {
        "zyntax_nest_tiled": cuda.load_hir(tiled_mod, args.device).kernel("mm"),
        "zyntax_nest_untiled": cuda.load_hir(
            build_with_report(WG, tiled=False)[0], args.device
        ).kernel("mm"),
    }
    rng = np.random.default_rng(0)
    for mm, nn, kk in shapes:
        case = f"sgemm_f32_{mm}x{nn}x{kk}"
        flops = 2.0 * mm * nn * kk
        a = rng.standard_normal((mm, kk)).astype(np.float32)
        bm = rng.standard_normal((kk, nn)).astype(np.float32)
        want = a.astype(np.float64) @ bm
        da, db = cuda.to_device(a), cuda.to_device(bm)
        dc = cuda.to_device(np.full((mm, nn), np.nan, np.float32))
        calls = launches(kernels, ex, (da, db, dc), (mm, nn, kk))
        for impl, fn in calls.items():
            dc.copy_from_host(np.full((mm, nn), np.nan, np.float32))
            fn()
            cuda.synchronize()
            err = float(np.max(np.abs(dc.to_host() - want)))
            if not err < 1e-2 * np.sqrt(kk):
                raise SystemExit(f"{impl} {case}: max error {err}")
            us = best_of(3, lambda fn=fn: per_call_us(fn, reps, cuda.synchronize))
            res.add(case, impl, "GFLOP_per_s", flops / (us * 1e-6) / 1e9, False)
        if torch is not None:
            ta = torch.from_numpy(a).cuda(args.device)
            tb = torch.from_numpy(bm).cuda(args.device)
            out = torch.empty((mm, nn), dtype=torch.float32, device=ta.device)

            def step(ta: Any = ta, tb: Any = tb, out: Any = out) -> None:
                torch.matmul(ta, tb, out=out)

            us = best_of(3, lambda: per_call_us(step, reps, torch.cuda.synchronize))
            res.add(case, "torch", "GFLOP_per_s", flops / (us * 1e-6) / 1e9, False)
        ratio = [
            r["value"]
            for r in res.rows
            if r["case"] == case and r["impl"] in ("zyntax_nest_tiled", "zyntax_sgemm_example")
        ]
        if len(ratio) == 2:
            res.notes[f"{case}_tiled_over_example"] = round(ratio[0] / ratio[1], 3)
    res.write(args.out_dir)


if __name__ == "__main__":
    main()
