"""LLVM optimization pipelines on the issue-26 nest kernels: compile time and speed.

The same nest kernels (``benches/tiling.py``'s bf16 and f32 4096^3 matmuls and
the odd 3001x2999x1001 f32 one, ``benches/fusion.py``'s fused
``matmul + bias + gelu + residual``) compiled with each pipeline of
``PIPELINES`` (the extension's ``compile_ptx(..., passes=)``, the text of
LLVM's ``opt -passes=``; ``None`` is the default for the kernels' level),
timed on the GPU against cuBLAS (eager PyTorch for the fused program) in
the same run, with the compile time of
each stage and ptxas' registers per kernel. Without a GPU only the compile
side runs (a CPU-only check of a pipeline's PTX and compile time).

    python benches/llvm_pipelines.py [--quick] [--device N] [--out-dir DIR]

``PIPELINE_CASES=a,b`` runs only those cases; ``LLVM_PIPELINES="name=passes;..."``
adds pipelines (``name=-`` drops one).
"""

from __future__ import annotations

import importlib
import os
import re
import struct
import sys
import time
from typing import Any

from _common import ROOT, Results, best_of, event_median_ms, optional, parse_args
from fusion import fused_nest_spec
from tiling import matmul_spec

from zyntax import _native, compiler, cuda, ptxinfo
from zyntax.tiling import nest_to_tile

#: name -> pass pipeline (None: the module's own level, first: it pays the
#: process's first compile; "level:O3": the module compiled at O3, whatever
#: its functions ask, what every nest compiled as before session 13).
PIPELINES: dict[str, str | None] = {
    "own_level": None,
    "default_O3": "level:O3",
    "O1": "default<O1>",
    "level_O1": "level:O1",
    # what a tile program needs after the tile layer: the thread and block
    # index ranges (nvvm-intr-range, which the default pipelines get from the
    # NVPTX target; without it the wide bf16 softmax spilled 108 bytes),
    # scalar replacement, CSE, one instcombine, CFG cleanup, loop invariants
    # hoisted (without licm ptxas spilled on the f32 FFMA nest; without
    # instcombine on the bf16 one) and alignment inferred (without it the
    # code generator's load/store vectorizer left two thirds of the 16-byte
    # accesses scalar)
    "kernel": "function(nvvm-intr-range,sroa,early-cse,instcombine<no-verify-fixpoint>,"
    "simplifycfg,loop-mssa(licm),infer-alignment)",
}

#: case -> (spec, operand dtype, M, N, K)
CASES: dict[str, tuple[dict[str, Any], str, int, int, int]] = {
    "nest_matmul_bf16_4096": (matmul_spec("bf16", 4096, 4096, 4096), "bf16", 4096, 4096, 4096),
    "nest_matmul_f32_4096": (matmul_spec("f32", 4096, 4096, 4096), "f32", 4096, 4096, 4096),
    "nest_matmul_odd_3001x2999x1001": (
        matmul_spec("f32", 3001, 2999, 1001),
        "f32",
        3001,
        2999,
        1001,
    ),
    "nest_matmul_bias_gelu_residual_bf16_4096": (
        fused_nest_spec(4096, 4096, 4096),
        "bf16",
        4096,
        4096,
        4096,
    ),
}


def compile_module(module: Any, arch: str, passes: str | None) -> dict[str, Any]:
    """The extension's compile with a pipeline text, or with ``"level:O1"``
    the module at that level (its pipeline and its code generator's level)."""
    if passes and passes.startswith("level:"):
        out: dict[str, Any] = _native.compile_ptx(module, arch, opt_level=passes[6:])
    else:
        out = _native.compile_ptx(module, arch, passes=passes)
    return out


def compile_with(res: Results, case: str, nt: Any, arch: str, name: str, passes: str | None) -> str:
    """Compiles the nest's module cold with `passes`; records the stages' ms
    and ptxas' registers; returns the PTX."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = compile_module(nt.kernel.module, arch, passes)
    llvm_ms = (time.perf_counter() - t0) * 1e3
    t = out["timings"]
    res.add(f"{case}_compile", name, "ms", llvm_ms, True)
    # CPU time: what the compile costs on a CPU shared with other work
    res.add(f"{case}_compile_cpu", name, "ms", (time.process_time() - c0) * 1e3, True)
    res.notes[f"{case}_{name}_timings_ms"] = {k: round(v * 1e3, 2) for k, v in t.items()}
    try:
        t0 = time.perf_counter()
        log = compiler.validate_ptx(out["ptx"], arch).log
        res.add(f"{case}_ptxas", name, "ms", (time.perf_counter() - t0) * 1e3, True)
        regs = re.findall(r"Used (\d+) registers", log)
        spills = re.findall(r"(\d+) bytes spill stores", log)
        res.notes[f"{case}_{name}_ptxas"] = {"registers": regs, "spill_stores": spills}
    except Exception as e:  # no ptxas here: the compile side still counts
        res.notes[f"{case}_{name}_ptxas"] = f"{type(e).__name__}: {str(e)[:200]}"
    ptx: str = out["ptx"]
    return ptx


def run_case(args: Any, res: Results, torch: Any, case: str, arch: str) -> None:
    spec, dt, m, n, k = CASES[case]
    t0 = time.perf_counter()
    nt = nest_to_tile(spec, arch=arch)
    # recognise + lower to the tile program's HIR (before LLVM)
    res.add(f"{case}_compile", "nest_to_tile", "ms", (time.perf_counter() - t0) * 1e3, True)
    res.notes[f"{case}_schedule"] = repr(nt.kernel.schedule)
    ptxs = {name: compile_with(res, case, nt, arch, name, p) for name, p in PIPELINES.items()}
    if torch is None:
        return
    dev = torch.device("cuda", args.device)
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}[dt]
    gen = torch.Generator(device=dev).manual_seed(m ^ n ^ k)
    copies = 2
    fused = "bias" in case
    scale = k**-0.25

    def rand(*shape: int, s: float = 1.0) -> Any:
        return (torch.randn(*shape, device=dev, generator=gen) * s).to(tdt)

    As = [rand(m, k, s=scale) for _ in range(copies)]
    Bs = [rand(k, n, s=scale) for _ in range(copies)]
    C = torch.empty(m, n, device=dev, dtype=tdt)
    extra = [rand(n), rand(m, n)] if fused else []
    acc = As[0].double() @ Bs[0].double()
    if fused:
        acc = acc + extra[0].double()
        g = 0.5 * acc * (1.0 + torch.tanh(0.7978845608028654 * (acc + 0.044715 * acc**3)))
        ref = g + extra[1].double()
    else:
        ref = acc
    iters = 5 if args.quick else 20
    flop = 2.0 * m * n * k

    def report(impl: str, fn: Any) -> None:
        C.fill_(float("nan"))
        out = fn(0)
        torch.cuda.synchronize()
        got = out if impl == "torch" else C
        err = ((got.double() - ref).norm() / ref.norm()).item()
        res.notes[f"{case}_{impl}_rel_err"] = err
        if not err < (2e-2 if dt == "bf16" else 1e-4):
            print(f"  {case} {impl} WRONG: relative error {err:.3e}")
            return
        ms = best_of(3, lambda: event_median_ms(fn, copies, iters))
        res.add(case, impl, "TFLOP_per_s", flop / ms / 1e9, False)

    for name, ptx in ptxs.items():
        nt.kernel._loaded[args.device] = cuda.load_module(
            ptx, args.device, hir=nt.kernel.module
        ).kernel(nt.kernel.name)
        calls = [nt.prepare(As[i], Bs[i], C, *extra, device=args.device) for i in range(copies)]
        report(f"zyntax_nest_{name}", lambda i, c=calls: c[i]())
    if fused:
        b, r = extra
        report(  # eager PyTorch: cuBLAS and the element-wise ops after it
            "torch",
            lambda i: torch.nn.functional.gelu(As[i] @ Bs[i] + b, approximate="tanh") + r,
        )
    else:
        report("cublas", lambda i: torch.matmul(As[i], Bs[i], out=C))


def sass_bytes(cubin: bytes) -> dict[str, int]:
    """Bytes of machine code per kernel: the ``.text.<kernel>`` sections of
    the ELF cubin (16 bytes an instruction on sm_70+)."""
    shoff, shentsize, shnum, shstrndx = struct.unpack_from("<Q10xHHH", cubin, 0x28)

    def section(i: int) -> tuple[int, int, int]:
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize)
        return name, off, size

    strtab = section(shstrndx)[1]
    out = {}
    for i in range(shnum):
        name_at, _, size = section(i)
        end = cubin.index(b"\0", strtab + name_at)
        name = cubin[strtab + name_at : end].decode()
        if name.startswith(".text."):
            out[name[6:]] = size
    return out


def library_corpus() -> dict[str, tuple[Any, str]]:
    """name -> (HIR module, arch): the nest kernels and the library modules
    tests/python/test_kernels_ptx.py assembles (row kernels, reductions,
    saxpy, attention on mma.sync), plus the library's bf16 WS matmul."""
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    kp = importlib.import_module("test_kernels_ptx")
    g = importlib.import_module("zyntax.kernels.gemm_tile")
    out = {
        case: (nest_to_tile(CASES[case][0], arch="sm_90a").kernel.module, "sm_90a")
        for case in CASES
    }
    for name, (build, key) in kp.MEMORY_BOUND.items():
        out[name] = (build(*key), "sm_90")
    for d, causal in sorted(kp.attention.SHAPES)[:2]:
        atoms, bn = kp.attention.SHAPES[d, causal]
        out[f"attention_d{d}_causal{int(causal)}"] = (
            kp.attention._build("bf16", d, causal, atoms, bn),
            "sm_90",
        )
    sched, ws = g.ws_schedule(4096, 4096, 4096, 132)
    spec = g.Spec(
        "bf16",
        "bf16",
        None,
        None,
        2,
        2,
        1,
        1,
        (True,) * 3,
        0,
        False,
        sched,
        ws=True,
        ws_opts=(ws[0], bool(ws[1]), ws[2], bool(ws[3])),
    )
    out["library_matmul_bf16_ws_4096"] = (g._module(spec), "sm_90a")
    return out


def static_compare(res: Results) -> None:
    """Each corpus module with each pipeline: CPU ms of the compile, and per
    kernel ptxas' registers, spilled bytes and SASS bytes (no GPU needed)."""
    for name, (module, arch) in library_corpus().items():
        for pname, passes in PIPELINES.items():
            c0 = time.process_time()
            out = compile_module(module, arch, passes)
            res.add(f"static_{name}", pname, "cpu_ms", (time.process_time() - c0) * 1e3, True)
            asm = compiler.validate_ptx(out["ptx"], arch)
            code = sass_bytes(asm.cubin)
            for kernel, r in ptxinfo.ptxas_resources(asm.log).items():
                res.notes[f"static_{name}_{pname}_{kernel}"] = row = {
                    "registers": r.get("registers"),
                    "spill_store_bytes": r.get("spill_store_bytes"),
                    "stack_bytes": r.get("stack_bytes"),
                    "sass_bytes": code.get(kernel),
                    "ptx_v4": out["ptx"].count(".v4."),
                }
                print(f"    {name} {pname} {kernel}: {row}")


def main() -> None:
    args = parse_args(
        __doc__.splitlines()[0],
        lambda p: p.add_argument(
            "--static",
            action="store_true",
            help="only compile the library corpus with each pipeline (registers, SASS bytes)",
        ),
    )
    torch = optional("torch")
    gpu = torch is not None and torch.cuda.is_available()
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False
        arch = cuda.device_arch(args.device)
        device = torch.cuda.get_device_name(args.device)
    else:
        torch, arch, device = None, "sm_90a", "cpu-only"
    res = Results("llvm_pipelines", device)
    # LLVM_PIPELINES="name=passes;name=passes": other pipelines (the default's
    # row stays as the reference)
    extra = os.environ.get("LLVM_PIPELINES")
    if extra:
        for item in extra.split(";"):
            name, _, passes = item.partition("=")
            if passes.strip() == "-":  # "name=-": not this one
                PIPELINES.pop(name.strip(), None)
            else:
                PIPELINES[name.strip()] = passes.strip() or None
    if args.static:
        static_compare(res)
        res.write(args.out_dir)
        return
    only = os.environ.get("PIPELINE_CASES")
    for case in only.split(",") if only else CASES:
        run_case(args, res, torch, case, arch)
        res.write(args.out_dir)


if __name__ == "__main__":
    main()
