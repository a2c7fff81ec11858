"""Benchmark of the ``@zyntax.kernel`` front-end on a GPU.

Cases (each with peer rows from the same run):

- ``first_call_cold``: a fresh process with an empty cache defines a vector-add
  kernel and launches it once (AST -> HIR -> LLVM -> PTX -> driver load ->
  launch, synchronized). Peers: Triton (``@triton.jit``, empty
  ``TRITON_CACHE_DIR``) and CuPy ``RawKernel`` (NVRTC, empty ``CUPY_CACHE_DIR``).
- ``first_call_warm_cache``: the same in a new process whose disk cache holds the
  kernel (zyntax compiles nothing: HIR translation + cache hit + load).
- ``notes.translate_cold_ms`` (``--translate`` runs only this, no GPU needed):
  milliseconds to take each example ``@zyntax.kernel`` from its Python source
  to a verified HIR module (AST walk, the native builder, verification; no
  LLVM), median of fresh translations (``notes.translate_cold_min_ms``: the
  fastest). A note, not a result row: it has no peer (the front-ends of Triton
  and CuPy do not stop at an IR one can time alike; ``first_call_cold``
  compares them whole).
- ``notes.compile_cold_ms`` / ``notes.compile_warm_ms`` (also with
  ``--translate``, CPU only): milliseconds of ``k.ptx(args, arch="sm_90a")`` for
  each example kernel in a fresh process (imports excluded), with an empty disk
  cache (translation, LLVM, the cache's store) and then in a new process over
  that cache (translation and a cache hit), median of ``--repeat`` (at least 3)
  pairs. Notes for the same reason as ``translate_cold``.
- ``launch_overhead``: microseconds per asynchronous launch of a small kernel
  in a loop (after warm-up), through ``kern[grid, block](...)`` with device
  arrays. ``zyntax-raw`` is the runtime's own ``CudaKernel`` launch without the
  decorator's dispatch, as the floor of our Python path.

Writes ``benches/results/frontend-<device>-<yyyymmdd>.json`` (format in
docs/performance.md) and prints it.

    python benches/frontend.py [--out DIR] [--launches N]
    python benches/frontend.py --translate [--out DIR]    # CPU only: translate_cold
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

ZYNTAX_CHILD = """
import time
t0 = time.perf_counter()
import numpy as np
import zyntax
from zyntax import cuda, lang

@zyntax.kernel
def vadd(a, b, out):
    i = lang.grid(1)
    if i < len(out):
        out[i] = a[i] + b[i]

n = 1 << 20
a = cuda.to_device(np.ones(n, np.float32))
b = cuda.to_device(np.ones(n, np.float32))
out = cuda.zeros(n, np.float32)
cuda.synchronize()
t1 = time.perf_counter()
vadd[(n + 255) // 256, 256](a, b, out)
cuda.synchronize()
t2 = time.perf_counter()
assert float(out.to_host()[-1]) == 2.0
print("RESULT", t2 - t1)
"""

TRITON_CHILD = """
import time
import torch, triton
import triton.language as tl

@triton.jit
def vadd(a, b, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(a + i, mask=m) + tl.load(b + i, mask=m), mask=m)

n = 1 << 20
a = torch.ones(n, device="cuda"); b = torch.ones(n, device="cuda"); out = torch.empty_like(a)
torch.cuda.synchronize()
t1 = time.perf_counter()
vadd[(triton.cdiv(n, 256),)](a, b, out, n, BLOCK=256)
torch.cuda.synchronize()
t2 = time.perf_counter()
assert float(out[-1]) == 2.0
print("RESULT", t2 - t1)
"""

CUPY_CHILD = """
import time
import cupy as cp
src = r'''extern "C" __global__ void vadd(const float* a, const float* b, float* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + b[i]; }'''
n = 1 << 20
a = cp.ones(n, cp.float32); b = cp.ones(n, cp.float32); out = cp.empty_like(a)
cp.cuda.Device().synchronize()
t1 = time.perf_counter()
k = cp.RawKernel(src, "vadd")
k(((n + 255) // 256,), (256,), (a, b, out, cp.int32(n)))
cp.cuda.Device().synchronize()
t2 = time.perf_counter()
assert float(out[-1]) == 2.0
print("RESULT", t2 - t1)
"""


def child(code: str, env: dict[str, str]) -> float | None:
    # A file, not `python -c`: both front-ends read their kernels' source.
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "child.py"
        script.write_text(textwrap.dedent(code))
        r = subprocess.run(
            [sys.executable, str(script)],
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            timeout=600,
        )
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return float(line.split()[1])
    print(f"child failed:\n{r.stderr[-2000:]}", file=sys.stderr)
    return None


def first_calls(rows: list[dict[str, Any]], repeat: int) -> None:
    py = os.environ.get("PYTHONPATH", "")
    if importlib.util.find_spec("zyntax._native") is None:
        # No installed zyntax: the children use the source tree (with a built extension).
        py = str(ROOT / "python") + os.pathsep + py
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as zc, tempfile.TemporaryDirectory() as tc:
            env = {"PYTHONPATH": py, "ZYNTAX_CACHE_DIR": zc}
            cold = child(ZYNTAX_CHILD, env)
            warm = child(ZYNTAX_CHILD, env)
            tcold = child(TRITON_CHILD, {"TRITON_CACHE_DIR": tc})
            twarm = child(TRITON_CHILD, {"TRITON_CACHE_DIR": tc})
            ccold = child(CUPY_CHILD, {"CUPY_CACHE_DIR": tc + "/cupy"})
            cwarm = child(CUPY_CHILD, {"CUPY_CACHE_DIR": tc + "/cupy"})
        for case, impl, v in [
            ("first_call_cold", "zyntax", cold),
            ("first_call_warm_cache", "zyntax", warm),
            ("first_call_cold", "triton", tcold),
            ("first_call_warm_cache", "triton", twarm),
            ("first_call_cold", "cupy", ccold),
            ("first_call_warm_cache", "cupy", cwarm),
        ]:
            if v is not None:
                rows.append(
                    {
                        "case": case,
                        "impl": impl,
                        "metric": "ms",
                        "value": round(v * 1e3, 3),
                        "lower_is_better": True,
                    }
                )


def launch_overhead(rows: list[dict[str, Any]], launches: int) -> None:
    import time

    import numpy as np

    import zyntax
    from zyntax import cuda, lang

    @zyntax.kernel
    def tiny(a, out):
        i = lang.grid(1)
        if i < len(out):
            out[i] = a[i] + 1.0

    n = 256
    a = cuda.to_device(np.ones(n, np.float32))
    out = cuda.zeros(n, np.float32)

    def timeit(fn: Any) -> float:
        for _ in range(50):
            fn()
        cuda.synchronize()
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(launches):
                fn()
            dt = time.perf_counter() - t
            cuda.synchronize()
            best = min(best, dt)
        return best / launches * 1e6

    launch = tiny[1, 256]
    results = {"zyntax": timeit(lambda: launch(a, out))}
    v = next(iter(tiny._variants.values()))
    raw = v.native["gpu"]
    flat = v.binder([a, out])  # type: ignore[misc]
    results["zyntax-raw"] = timeit(lambda: raw.launch(1, 256, *flat))
    try:
        import cupy as cp

        k = cp.RawKernel(
            r"""extern "C" __global__ void tiny(const float* a, float* o, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] + 1.0f; }""",
            "tiny",
        )
        ca, co = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
        nn = cp.int32(n)
        results["cupy"] = timeit(lambda: k((1,), (256,), (ca, co, nn)))
    except Exception as e:
        print(f"cupy peer skipped: {e}", file=sys.stderr)
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def ttiny(a, o, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = i < n
            tl.store(o + i, tl.load(a + i, mask=m) + 1.0, mask=m)

        ta, to = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
        results["triton"] = timeit(lambda: ttiny[(1,)](ta, to, n, BLOCK=256))
    except Exception as e:
        print(f"triton peer skipped: {e}", file=sys.stderr)
    assert float(out.to_host()[0]) == 2.0
    for impl, us in results.items():
        rows.append(
            {
                "case": "launch_overhead",
                "impl": impl,
                "metric": "us_per_launch",
                "value": round(us, 3),
                "lower_is_better": True,
            }
        )


#: Example kernels and the arguments they are specialised for (translate_cold).
TRANSLATE_CASES = [
    ("vector_add", "vector_add", "f1 f1 f1"),
    ("vector_add", "saxpy", None),
    ("softmax", "softmax", "f2 f2"),
    ("transpose", "transpose", "f2 f2"),
    ("sgemm", "sgemm", "f2 f2 f2"),
    ("scan", "block_scan", "f1 f1"),
    ("prange_matmul", "mm", None),
]


def translate_cold(notes: dict[str, Any], repeat: int) -> None:
    import statistics
    import time

    import numpy as np

    from zyntax.frontend import pipeline

    arrays = {"f1": np.zeros(8, np.float32), "f2": np.zeros((4, 4), np.float32)}
    for module, name, sig in TRANSLATE_CASES:
        spec = importlib.util.spec_from_file_location(
            f"bench_{module}", ROOT / "examples" / "kernels" / f"{module}.py"
        )
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        k = getattr(mod, name)
        specs = k._sig_specs(None if sig is None else [arrays[a] for a in sig.split()])
        times = []
        for _ in range(repeat):
            k._variants.clear()  # a fresh translation each time (the disk cache is not involved)
            t0 = time.perf_counter()
            pipeline.native_module(k.variant(specs))
            times.append(time.perf_counter() - t0)
        notes.setdefault("translate_cold_ms", {})[name] = round(statistics.median(times) * 1e3, 3)
        notes.setdefault("translate_cold_min_ms", {})[name] = round(min(times) * 1e3, 3)


#: A fresh process compiling one example kernel to PTX (compile_cold_ms / compile_warm_ms).
COMPILE_CHILD = """
import importlib.util, sys, time
import numpy as np
import zyntax
path, name, sig, arch = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("bench_kernel", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
k = getattr(mod, name)
arrays = {"f1": np.zeros(8, np.float32), "f2": np.zeros((4, 4), np.float32)}
args = None if sig == "-" else tuple(arrays[a] for a in sig.split())
t0 = time.perf_counter()
ptx = k.ptx(args, arch=arch)
t1 = time.perf_counter()
assert ".entry " + name in ptx
print("RESULT", t1 - t0)
"""


def compile_cold_warm(notes: dict[str, Any], repeat: int, arch: str = "sm_90a") -> None:
    """Per example kernel, milliseconds of ``k.ptx(args, arch=...)`` in a fresh
    process (imports excluded): with an empty disk cache (translation, LLVM,
    the cache's store: the CPU part of a first call) and again in a new process
    over that cache (translation and a cache hit); medians over `repeat` pairs."""
    import statistics

    cold: dict[str, list[float]] = {}
    warm: dict[str, list[float]] = {}
    for _ in range(repeat):
        for module, name, sig in TRANSLATE_CASES:
            path = str(ROOT / "examples" / "kernels" / f"{module}.py")
            with tempfile.TemporaryDirectory() as zc:
                env = {"ZYNTAX_CACHE_DIR": zc}
                code = COMPILE_CHILD.replace("sys.argv[1:5]", repr([path, name, sig or "-", arch]))
                c, w = child(code, env), child(code, env)
            if c is not None and w is not None:
                cold.setdefault(name, []).append(c)
                warm.setdefault(name, []).append(w)
    for key, got in (("compile_cold_ms", cold), ("compile_warm_ms", warm)):
        notes[key] = {k: round(statistics.median(v) * 1e3, 3) for k, v in got.items()}
    notes["compile_arch"] = arch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benches" / "results"))
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--translate", action="store_true", help="only translate_cold (CPU, no GPU needed)"
    )
    args = ap.parse_args()
    try:
        import zyntax._native  # noqa: F401  (an installed zyntax wins over the source tree)
    except ImportError:
        sys.path.insert(0, str(ROOT / "python"))
    from zyntax import cuda

    rows: list[dict[str, Any]] = []
    notes: dict[str, Any] = {}
    if args.translate:
        import platform

        dev = f"cpu {platform.machine()} ({os.cpu_count()} threads)"
        translate_cold(notes, max(args.repeat, 30))
        compile_cold_warm(notes, max(args.repeat, 3))
    else:
        if not cuda.is_available():
            sys.exit("benches/frontend.py needs an NVIDIA GPU (or --translate)")
        dev = cuda.Device(0).name
        first_calls(rows, args.repeat)
        translate_cold(notes, 30)
        launch_overhead(rows, args.launches)
    commit = os.environ.get("ZYNTAX_COMMIT", "")
    if not commit:
        try:
            r = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
            )
            commit = r.stdout.strip() if r.returncode == 0 else ""
        except OSError:
            commit = ""
    today = datetime.date.today()
    doc = {
        "bench": "frontend",
        "device": dev,
        "commit": commit,
        "date": today.isoformat(),
        "results": rows,
    }
    if notes:
        doc["notes"] = notes
    short = "h200" if "H200" in dev else "h100" if "H100" in dev else "gpu"
    if args.translate:
        short = "cpu"
    out = Path(args.out) / f"frontend-{short}-{today:%Y%m%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
