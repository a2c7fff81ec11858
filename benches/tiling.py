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

Nest cases (issue 26): the same matmul written as a loop nest and lowered
to a tile program by the Rust core (``zyntax.tiling.nest_to_tile``), metric
``TFLOP_per_s``: ``nest_matmul_bf16_4096``, ``nest_matmul_bf16_8192``,
``nest_matmul_f32_4096`` and ``nest_matmul_odd_3001x2999x1001`` (f32), impls
``zyntax_nest`` (the nest's tile program, the core's heuristic schedule),
``cublas`` (``torch.matmul``, TF32 off), ``zyntax_kernels_matmul`` (the
hand-written library GEMM) and, for f32, ``zyntax_nest_tiled`` (the
threads + shared-memory tiler above), ``zyntax_prange_nest`` (the
``lang.prange`` kernel of examples/kernels/prange_matmul.py read by
``zyntax.tiling.kernel_nest`` and lowered by the core) and
``zyntax_prange_tiled`` (the same kernel through the front-end's tiler).
Median CUDA-event time per call, inputs rotated over copies that overflow
L2, best of three. ``notes.schedules`` times the nest under other tile
schedules (the autotuner's search space),
``rust_dsl_matmul_bf16_4096`` the kernel the Rust tiny-DSL example wrote
(``cargo run -p zyntax-opt --example nest_dsl --
crates/zyntax-opt/examples/nests/matmul.nest --arch sm_90a --out DIR``, then
``ZYNTAX_RUST_NEST_DIR=DIR``; skipped without it) against the Python
front-end's nest and cuBLAS in the same run,
``nest_compile_*`` cases the compile time per stage (``ms``, cold: the first
call in the process; recognise+lower, LLVM to PTX, ptxas).

Run on a GPU machine: ``python benches/tiling.py [--out-dir DIR] [--quick]``
(environment: ``TILING_NEST_CASES=case,...`` runs only those nest cases,
``TILING_LADDER=0`` skips the schedule ladder, ``TILING_LADDER=f32`` runs only
f32's, ``TILING_NEST_ONLY=1`` skips the older sgemm cases,
``TILING_F32_PEERS=0`` the older f32 front-ends in the nest cases).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import ROOT, Results, best_of, event_median_ms, optional, parse_args, per_call_us

from nest_matmul import build_with_report
from zyntax import compiler, cuda, hir, tile
from zyntax.nest import launch_grid
from zyntax.nest_tile import NestTile, NestViewArg
from zyntax.tiling import kernel_nest, load, nest_tiling_report, nest_to_tile

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
    if torch is not None:  # the issue-26 cases first, written before the older ones run
        nest_cases(args, res, torch, kernels["zyntax_nest_tiled"])
        res.write(args.out_dir)
    if os.environ.get("TILING_NEST_ONLY"):
        return
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


# ------------------------------------------------------------ nests lowered to tile programs

#: case -> (dtype, M, N, K)
NEST_CASES = {
    "nest_matmul_bf16_4096": ("bf16", 4096, 4096, 4096),
    "nest_matmul_bf16_8192": ("bf16", 8192, 8192, 8192),
    "nest_matmul_f32_4096": ("f32", 4096, 4096, 4096),
    "nest_matmul_odd_3001x2999x1001": ("f32", 3001, 2999, 1001),
}
#: Other schedules timed on the first case of each dtype: (block M, block N, K
#: step, warps, stages, warp-specialised options). bf16 with K steps of 64 on
#: sm_90a: the warp-specialised persistent TMA pipeline (options: wgmma groups
#: in flight, ping-pong, the output stored through TMA), or the cp.async wgmma
#: pipeline (None). f32: FFMA
#: tiles (B1 of session 10: 64x64x8 27.9, 128x64x8 over 8 warps 28.5,
#: 128x128x8 over 8 23.0, 32x64x16 over 2 29.2 against the default 64x64x16's
#: 33.9 TFLOP/s at 4096^3).
WsOptions = tuple[int, bool, bool] | None
SCHEDULES: dict[str, list[tuple[int, int, int, int, int, WsOptions]]] = {
    "bf16": [
        (128, 256, 64, 8, 4, (1, False, False)),  # plain stores
        (128, 256, 64, 8, 4, (1, False, True)),  # stored through TMA
        (128, 128, 64, 4, 6, (1, True, False)),
    ],
    # session 14: the FFMA accumulator register-blocked (4x4 runs a thread,
    # 16-byte shared loads), so larger tiles hold 8x8 a thread
    "f32": [
        (128, 128, 8, 8, 1, None),  # 8x8 a thread, as zyntax.kernels' SIMT kernel
        (128, 128, 16, 8, 1, None),
        (64, 128, 16, 4, 1, None),
        (128, 64, 16, 4, 1, None),
        (64, 64, 16, 4, 2, None),  # with the register prefetch
    ],
}
#: Rungs compiled with a launch bound, (bm, bn, bk, warps, stages, HIR
#: `min_blocks`): ptxas keeps the registers under 65536 / (threads x blocks).
#: 128x128x8 over 8 warps takes 155 registers (one block per SM) on its own,
#: 128 without spills under 2 blocks (ptxas, session 14).
BOUNDED: dict[str, list[tuple[int, int, int, int, int, int]]] = {
    "f32": [(128, 128, 8, 8, 1, 2)],
}
L2_FLUSH_BYTES = 256 << 20


def matmul_spec(dtype: str, m: int, n: int, k: int) -> dict[str, Any]:
    """``C[i,j] = Σ_k A[i,k]·B[k,j]`` as the nest description (C in `dtype`)."""

    def buf(name: str, *shape: int) -> dict[str, Any]:
        return {"name": name, "dtype": dtype, "shape": list(shape)}

    return {
        "name": f"nest_matmul_{dtype}",
        "loops": [
            {"name": "i", "extent": m, "kind": "parallel"},
            {"name": "j", "extent": n, "kind": "parallel"},
            {"name": "k", "extent": k, "kind": "reduction"},
        ],
        "buffers": [buf("A", m, k), buf("B", k, n), buf("C", m, n)],
        "output": (2, [("affine", [(0, 1)], 0), ("affine", [(1, 1)], 0)]),
        "value": ("binary", "mul", load(0, 0, 2), load(1, 2, 1)),
    }


def compile_stages(res: Results, case: str, spec: dict[str, Any], arch: str) -> Any:
    """Times each compile stage of `spec` cold (first call) and returns the nest."""
    t0 = time.perf_counter()
    nest_tiling_report(spec)
    t1 = time.perf_counter()
    nt = nest_to_tile(spec, arch=arch)
    t2 = time.perf_counter()
    # what the kernel cache pays: the PTX, without the LLVM IR printed
    out = compiler.compile_ptx(nt.kernel.module, arch, llvm_ir=False)
    t3 = time.perf_counter()
    ptxas = compiler.validate_ptx(out.ptx, arch)
    t4 = time.perf_counter()
    llvm = out.timings or {}
    stages = {
        "recognise": t1 - t0,
        "recognise_lower": t2 - t1,
        "llvm_ptx": t3 - t2,
        # inside llvm_ptx, each stage of the compiler (zyntax_llvm::Timings):
        # verify, HIR to LLVM IR, LLVM's verifier, its pass pipeline, the IR
        # printed into llvm_ir, NVPTX codegen
        **{f"llvm_{stage}": sec for stage, sec in llvm.items()},
        "ptxas": t4 - t3,
        # the goal's compile: the nest to PTX (ptxas, or the driver's JIT, is
        # the same for any front-end's PTX and is reported on its own)
        "to_ptx": t3 - t1,
        "total": t4 - t1,
    }
    for stage, sec in stages.items():
        res.add(case, stage, "ms", sec * 1e3, True)
    res.notes[f"{case}_llvm_timings"] = out.timings
    res.notes[f"{case}_ptxas"] = ptxas.log.strip()[-400:]
    return nt


def nest_cases(args: Any, res: Results, torch: Any, old_tiled: Any) -> None:
    """The issue-26 nest cases (module docstring), peers in the same run."""
    torch.backends.cuda.matmul.allow_tf32 = False
    cases = dict(list(NEST_CASES.items())[:1]) if args.quick else NEST_CASES
    # TILING_NEST_CASES=a,b: only these cases (a short device slot);
    # TILING_LADDER=0: no schedule ladder.
    only = os.environ.get("TILING_NEST_CASES")
    if only:
        cases = {c: NEST_CASES[c] for c in only.split(",") if c in NEST_CASES}
    # TILING_LADDER=f32 (or bf16): only that dtype's ladder.
    ladder_env = os.environ.get("TILING_LADDER", "1")
    laddered = {"bf16", "f32"} - ({"bf16", "f32"} if ladder_env == "1" else {ladder_env})
    rust_dir = os.environ.get("ZYNTAX_RUST_NEST_DIR")
    rust = bool(rust_dir) and (not only or "rust_dsl_matmul_bf16_4096" in only)
    if not rust_dir:
        res.notes["rust_dsl_matmul_bf16_4096"] = "skipped: ZYNTAX_RUST_NEST_DIR not set"
    for case, (dt, m, n, k) in cases.items():
        if dt == "f32" and rust:  # the bf16 Rust case before the slower f32 ones
            rust_dsl_case(args, res, torch, Path(str(rust_dir)))
            res.write(args.out_dir)
            rust = False
        nest_case(args, res, torch, old_tiled, case, dt, (m, n, k), dt not in laddered)
        laddered.add(dt)
        res.write(args.out_dir)  # progressively: a time limit keeps what ran
    if rust:
        rust_dsl_case(args, res, torch, Path(str(rust_dir)))


def nest_case(
    args: Any,
    res: Results,
    torch: Any,
    old_tiled: Any,
    case: str,
    dt: str,
    mnk: tuple[int, int, int],
    ladder: bool,
) -> None:
    import zyntax.kernels as zk

    m, n, k = mnk
    arch = cuda.device_arch(args.device)
    dev = torch.device("cuda", args.device)
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    iters = 5 if args.quick else 20
    flop = 2.0 * m * n * k
    spec = matmul_spec(dt, m, n, k)
    nt = compile_stages(res, f"nest_compile_{dt}_{m}x{n}x{k}", spec, arch)
    res.notes[f"{case}_report"] = nt.report
    res.notes[f"{case}_pipeline"] = nt.pipeline
    res.notes[f"{case}_schedule"] = repr(nt.kernel.schedule)
    item = 2 if dt == "bf16" else 4
    copies = max(1, min(8, -(-L2_FLUSH_BYTES // ((m * k + k * n) * item))))
    gen = torch.Generator(device=dev).manual_seed(m ^ n ^ k)

    def rand(r: int, c: int) -> Any:
        return (torch.randn(r, c, device=dev, generator=gen) / k**0.25).to(tdt)

    As = [rand(m, k) for _ in range(copies)]
    Bs = [rand(k, n) for _ in range(copies)]
    C = torch.empty(m, n, device=dev, dtype=tdt)
    ref = As[0].double() @ Bs[0].double()

    def report(impl: str, fn: Any, **extra: Any) -> None:
        try:
            C.fill_(float("nan"))
            fn(0)
            torch.cuda.synchronize()
            err = ((C.double() - ref).norm() / ref.norm()).item()
            res.notes[f"{case}_{impl}_rel_err"] = err
            if not err < (2e-2 if dt == "bf16" else 1e-4):
                print(f"  {case:<22} {impl:<18} WRONG: relative error {err:.3e}")
                return
            ms = best_of(3, lambda: event_median_ms(fn, copies, iters))
        except Exception as e:  # a failing impl is reported, the others still run
            print(f"  {case:<22} {impl:<18} failed: {type(e).__name__}: {str(e)[:300]}")
            return
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False, m=m, n=n, k=k, **extra)

    def nest_calls(nest: Any) -> list[Any]:
        return [nest.prepare(As[i], Bs[i], C, device=args.device) for i in range(copies)]

    calls = nest_calls(nt)
    report("zyntax_nest", lambda i: calls[i](), schedule=repr(nt.kernel.schedule))
    report("cublas", lambda i: torch.matmul(As[i], Bs[i], out=C))
    report("zyntax_kernels_matmul", lambda i: zk.matmul(As[i], Bs[i], C))
    # TILING_F32_PEERS=0: not the older f32 front-ends (a short device slot)
    if dt == "f32" and os.environ.get("TILING_F32_PEERS", "1") != "0":
        grid, block = launch_grid((m, n), WG)
        report(
            "zyntax_nest_tiled", lambda i: old_tiled.launch(grid, block, As[i], Bs[i], C, m, n, k)
        )
        # The lang.prange kernel of examples/kernels/prange_matmul.py through
        # the core (kernel_nest) and through the kernel front-end's own tiler.
        kn = kernel_nest(prange_mm, As[0], Bs[0], C, arch=arch)
        res.notes[f"{case}_prange_report"] = kn.report
        if kn.tile.kernel is not None:
            # The same nest under the kernel's names (mm; a, b, c).
            named = {**spec, "name": "mm"}
            named["buffers"] = [
                {**b, "name": x} for b, x in zip(spec["buffers"], "abc", strict=True)
            ]
            same = nest_to_tile(named, arch=arch).kernel.module.to_zir()
            res.notes[f"{case}_prange_same_hir"] = kn.tile.kernel.module.to_zir() == same
            pcalls = [kn.tile.prepare(As[i], Bs[i], C, device=args.device) for i in range(copies)]
            report("zyntax_prange_nest", lambda i: pcalls[i]())
        pgrid = prange_mm.launch_grid(m, n)
        report("zyntax_prange_tiled", lambda i: prange_mm[pgrid](As[i], Bs[i], C))
    if not ladder:
        return

    def rung(name: str, sched: Any, min_blocks: int | None = None) -> None:
        try:
            other = nest_to_tile(spec, arch=arch, schedule=sched)
            if min_blocks is not None:  # a launch bound: ptxas keeps registers under it
                t = sched.warps * 32
                zir = other.kernel.module.to_zir().replace(
                    f"max_threads({t}, 1, 1)", f"max_threads({t}, 1, 1) min_blocks({min_blocks})", 1
                )
                other.kernel.module = hir.parse_zir(zir)
            # each rung's compile stages (warm process: the case compiled first)
            timings = compiler.compile_ptx(other.kernel.module, arch).timings or {}
            res.notes[f"{case}_{name}_llvm_ms"] = {k: round(v * 1e3, 2) for k, v in timings.items()}
            ocalls = nest_calls(other)
        except Exception as e:
            res.notes.setdefault("schedules", {})[f"{case}_{name}"] = f"{type(e).__name__}: {e}"
            return
        report(f"zyntax_nest_{name}", lambda i, oc=ocalls: oc[i](), schedule=name)

    for bm, bn, bk, w, st, ws in SCHEDULES[dt]:
        name = f"{bm}x{bn}x{bk}_w{w}_s{st}"
        extra: dict[str, Any] = {}
        if ws is not None:
            name += f"_ws{ws[0]}" + ("_pp" if ws[1] else "") + ("_tma" if ws[2] else "")
            extra = {"warp_specialize": True, "persistent": True, "wgmma_in_flight": ws[0]}
            extra.update({"pingpong": True} if ws[1] else {})
            extra.update({"tma_store": True} if ws[2] else {})
        rung(name, tile.Schedule((bm, bn), k=bk, warps=w, stages=st, arch=arch, **extra))
    for bm, bn, bk, w, st, mb in BOUNDED.get(dt, []):
        sched = tile.Schedule((bm, bn), k=bk, warps=w, stages=st, arch=arch)
        rung(f"{bm}x{bn}x{bk}_w{w}_s{st}_min{mb}", sched, mb)


def rust_dsl_case(args: Any, res: Results, torch: Any, rust_dir: Path) -> None:
    """``rust_dsl_matmul_bf16_4096``: the Rust example's kernel (its .zir and
    launch JSON), the Python front-end's nest and cuBLAS, same inputs."""
    case, m = "rust_dsl_matmul_bf16_4096", 4096
    zir = (rust_dir / "matmul.zir").read_text()
    launch = json.loads((rust_dir / "matmul.launch.json").read_text())
    spec = matmul_spec("bf16", m, m, m)
    spec["name"] = "matmul"  # the Rust program's name, so that the HIR may match
    nt = nest_to_tile(spec, arch=cuda.device_arch(args.device))
    res.notes[f"{case}_same_hir_as_python"] = nt.kernel.module.to_zir() == zir
    res.notes[f"{case}_pipeline"] = launch.get("pipeline", "")
    rust = rust_nest(zir, launch, spec)
    dev = torch.device("cuda", args.device)
    copies = 4
    As = [(torch.randn(m, m, device=dev) / m**0.25).bfloat16() for _ in range(copies)]
    Bs = [(torch.randn(m, m, device=dev) / m**0.25).bfloat16() for _ in range(copies)]
    C = torch.empty(m, m, device=dev, dtype=torch.bfloat16)
    ref = As[0].double() @ Bs[0].double()
    rust_calls = [rust.prepare(As[i], Bs[i], C, device=args.device) for i in range(copies)]
    py_calls = [nt.prepare(As[i], Bs[i], C, device=args.device) for i in range(copies)]
    impls = {
        "zyntax_rust_dsl": lambda i: rust_calls[i](),
        "zyntax_nest": lambda i: py_calls[i](),
        "cublas": lambda i: torch.matmul(As[i], Bs[i], out=C),
    }
    for impl, fn in impls.items():
        C.fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        err = ((C.double() - ref).norm() / ref.norm()).item()
        res.notes[f"{case}_{impl}_rel_err"] = err
        if not err < 2e-2:
            print(f"  {case} {impl} WRONG: relative error {err:.3e}")
            continue
        ms = best_of(3, lambda f=fn: event_median_ms(f, copies, 20))
        res.add(case, impl, "TFLOP_per_s", 2.0 * m**3 / ms / 1e9, False)


def rust_nest(zir: str, launch: dict[str, Any], spec: dict[str, Any]) -> NestTile:
    """The Rust example's kernel (its .zir module and launch JSON: views,
    TMA tensor maps, persistent grid) as a :class:`NestTile`, so that it
    launches through the same launcher as the Python front-end's nest."""
    views = launch["views"]
    kernel = tile.Kernel(
        module=hir.parse_zir(zir),
        name=launch["kernel"],
        schedule=None,
        block=tuple(launch["block"]),
        shared_bytes=0,
        params=tuple(
            tile.Param("view", f"{v['name']}{i}", v["dtype"], len(v["extents"]))
            for i, v in enumerate(views)
        ),
        tensor_maps=tuple(
            tile.TensorMapParam(
                f"{views[t['view']]['name']}{t['view']}",
                t["view"],  # every parameter of a nest kernel is a view
                t["inner_dim"],
                t["outer_dim"],
                tuple(t["box"]),
            )
            for t in launch.get("tensor_maps", ())
        ),
        persistent=bool(launch.get("persistent", False)),
    )
    args = tuple(
        NestViewArg(v["buffer"], v["offset"], tuple(v["extents"]), tuple(v["strides"]), v["align"])
        for v in views
    )
    buffers = tuple((b["name"], b["dtype"], tuple(b["shape"])) for b in spec["buffers"])
    return NestTile(
        report="the Rust nest_dsl example's kernel",
        kind="contraction",
        kernel=kernel,
        grid=tuple(launch["grid"]),
        args=args,
        buffers=buffers,
        pipeline=launch.get("pipeline", ""),
    )


if __name__ == "__main__":
    main()
