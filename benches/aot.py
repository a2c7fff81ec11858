"""Cold start of AOT bundles, and autotuning time and gain.

Cold start: a new process creates its CUDA context and arrays, then loads a
kernel and launches it once (synchronized); we time that load-to-first-launch
span (``load_launch_ms``, the issue's goal is under 1 ms with no JIT) and the
whole process (``process_ms``, interpreter start and imports included). Cases:

* ``zyntax`` fatbin bundle with SASS for this GPU (``zyntax.cuda.load_bundle``);
* ``zyntax-ptx``: the same kernel as PTX text, JIT-compiled by the driver
  (``CUDA_CACHE_DISABLE=1``; ``zyntax-ptx-driver-cache``: with the driver's
  JIT cache warm);
* ``zyntax-bundle-jit``: a bundle whose SASS is for another arch (PTX fallback,
  driver cache off);
* ``cupy`` RawKernel and ``triton`` @jit, each with a warm on-disk cache (the
  second process of two sharing a cache directory).

Autotuning: a ``@zyntax.autotune`` kernel (block size x elements per thread)
and a builder-level ``zyntax.tuning.Tuner`` (saxpy block sizes): seconds spent
tuning and the gain of the best config over the first (default) one.

    python benches/aot.py [--quick] [--out-dir DIR]

Writes ``benches/results/aot-<device>-<date>.json`` (format: docs/performance.md).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from _common import ROOT, Results, parse_args

import zyntax
from zyntax import Array, f32, i32, lang

BUNDLE_CHILD = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from zyntax import cuda
import zyntax.bundle  # importing is process start-up, as `import cupy` is for CuPy
n = 1 << 20
x = cuda.to_device(np.ones(n, np.float32)); y = cuda.to_device(np.ones(n, np.float32))
cuda.synchronize()
t1 = time.perf_counter()
b = cuda.load_bundle(sys.argv[1])
b.saxpy[(n + 255) // 256, 256](n, 2.0, x, y)
cuda.synchronize()
t2 = time.perf_counter()
assert float(y.to_host()[-1]) == 3.0
print("RESULT", (t2 - t1) * 1e3, b.loaded_from)
"""

PTX_CHILD = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from zyntax import cuda
n = 1 << 20
x = cuda.to_device(np.ones(n, np.float32)); y = cuda.to_device(np.ones(n, np.float32))
cuda.synchronize()
ptx = open(sys.argv[1]).read()
sig = {"saxpy": {"params": ["u32", "f32", "ptr<global, f32>", "ptr<global, f32>"],
                 "max_threads": [256, 1, 1], "shared_bytes": 0}}
t1 = time.perf_counter()
m = cuda.load_module(ptx, signatures=sig)
m.kernel("saxpy")[(n + 255) // 256, 256](n, 2.0, x, y)
cuda.synchronize()
t2 = time.perf_counter()
assert float(y.to_host()[-1]) == 3.0
print("RESULT", (t2 - t1) * 1e3, "ptx")
"""

CUPY_CHILD = """
import time
import cupy as cp
src = r'''extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }'''
n = 1 << 20
x = cp.ones(n, cp.float32); y = cp.ones(n, cp.float32)
cp.cuda.Device().synchronize()
t1 = time.perf_counter()
k = cp.RawKernel(src, "saxpy")
k(((n + 255) // 256,), (256,), (cp.uint32(n), cp.float32(2.0), x, y))
cp.cuda.Device().synchronize()
t2 = time.perf_counter()
assert float(y[-1]) == 3.0
print("RESULT", (t2 - t1) * 1e3, "cache")
"""

TRITON_CHILD = """
import time
import torch, triton
import triton.language as tl

@triton.jit
def saxpy(x, y, n, a, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, a * tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

n = 1 << 20
x = torch.ones(n, device="cuda"); y = torch.ones(n, device="cuda")
torch.cuda.synchronize()
t1 = time.perf_counter()
saxpy[(triton.cdiv(n, 256),)](x, y, n, 2.0, BLOCK=256)
torch.cuda.synchronize()
t2 = time.perf_counter()
assert float(y[-1]) == 3.0
print("RESULT", (t2 - t1) * 1e3, "cache")
"""


def child(code: str, args: list[str], env: dict[str, str]) -> tuple[float, float, str] | None:
    """(load-to-first-launch ms, whole process ms, how it loaded) of one fresh process."""
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "child.py"
        script.write_text(textwrap.dedent(code))
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, str(script), *args],
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            timeout=600,
        )
        wall = (time.perf_counter() - t0) * 1e3
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            _, ms, how = line.split()
            return float(ms), wall, how
    print(f"child failed:\n{r.stderr[-2000:]}", file=sys.stderr)
    return None


def cold_start(res: Results, repeat: int) -> None:
    import zyntax
    from zyntax import aot, cuda, hir

    saxpy = hir.parse_zir((ROOT / "examples" / "saxpy.zir").read_text(), "saxpy.zir")
    arch = cuda.device_arch(0)
    cc = cuda.Device(0).compute_capability
    other = "sm_80" if cc[0] != 8 else "sm_70"
    work = Path(tempfile.mkdtemp(prefix="zyntax-aot-bench-"))
    env = {"ZYNTAX_CACHE_DIR": str(work / "zcache")}
    bundle = aot.build_bundle(saxpy, [arch], work / "sass" / "saxpy.fatbin").image
    jit_bundle = aot.build_bundle(saxpy, [other], work / "jit" / "saxpy.fatbin").image
    ptx = work / "saxpy.ptx"
    ptx.write_text(zyntax.compile(saxpy, arch=arch))
    # The JIT cases with the driver's JIT cache off (a first load on a machine);
    # "zyntax-ptx-driver-cache" is PTX whose JIT result the driver cached earlier.
    nocache = dict(env, CUDA_CACHE_DISABLE="1")
    peers: dict[str, list[tuple[float, float, str]]] = {}
    for _ in range(repeat):
        for name, code, args, cenv in (
            ("zyntax", BUNDLE_CHILD, [str(bundle)], env),
            ("zyntax-bundle-jit", BUNDLE_CHILD, [str(jit_bundle)], nocache),
            ("zyntax-ptx", PTX_CHILD, [str(ptx)], nocache),
            ("zyntax-ptx-driver-cache", PTX_CHILD, [str(ptx)], env),
        ):
            got = child(code, args, cenv)
            if got is not None:
                peers.setdefault(name, []).append(got)
        with tempfile.TemporaryDirectory() as tc:
            for name, code, penv in (
                ("cupy", CUPY_CHILD, {"CUPY_CACHE_DIR": tc + "/cupy"}),
                ("triton", TRITON_CHILD, {"TRITON_CACHE_DIR": tc + "/triton"}),
            ):
                if child(code, [], penv) is None:  # fills the cache
                    continue
                got = child(code, [], penv)
                if got is not None:
                    peers.setdefault(name, []).append(got)
    for name, runs in peers.items():
        how = runs[0][2]
        res.add(
            "cold_load_launch",
            name,
            "ms",
            statistics.median(r[0] for r in runs),
            True,
            loaded_from=how,
            runs=len(runs),
        )
        res.add("cold_process", name, "ms", statistics.median(r[1] for r in runs), True)


def _tuned_kernel() -> Any:
    # The kernel's annotations are resolved in this module's globals.
    from zyntax import tuning

    @zyntax.kernel
    def scale_pt(x: Array[f32, 1], y: Array[f32, 1], n: i32, per_thread: i32) -> None:
        base = lang.grid(1) * per_thread
        for j in range(per_thread):
            i = base + j
            if i < n:
                y[i] = x[i] * 3.0 + 1.0

    def grid(a: dict[str, Any], cfg: tuning.Config) -> int:
        per = cfg.block * int(cfg.args["per_thread"])
        return (int(a["n"]) + per - 1) // per

    configs = [
        tuning.Config(block=b, args={"per_thread": p}) for b in (64, 128, 256, 512) for p in (1, 4)
    ]
    return zyntax.autotune(configs=configs, key=["n"], grid=grid)(scale_pt)


def autotuning(res: Results, n: int) -> None:
    import numpy as np

    from zyntax import cuda, hir, tuning

    x = cuda.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    y = cuda.zeros(n, np.float32)
    k = _tuned_kernel()
    t0 = time.perf_counter()
    k(x, y, n)
    cuda.synchronize()
    secs = time.perf_counter() - t0
    rep = k.last_report
    assert rep is not None
    res.add("autotune_time", "scale_pt", "s", secs, True, configs=8, pruned=len(rep.pruned))
    res.add("autotune_gain", "scale_pt", "x", rep.gain, False, best=rep.best)

    text = (ROOT / "examples" / "saxpy.zir").read_text()

    def build(cfg: tuning.Config) -> Any:
        return hir.parse_zir(
            text.replace("max_threads(256, 1, 1)", f"max_threads({cfg.block}, 1, 1)"), "s.zir"
        )

    # The default first: the gain is over block=256, the example's own choice.
    cfgs = [tuning.Config(block=b) for b in (256, 32, 64, 128, 512, 1024)]
    t = tuning.Tuner(
        "saxpy_block",
        cfgs,
        kernel="saxpy",
        build=build,
        grid=lambda kv, cfg: (kv["n"] + cfg.block - 1) // cfg.block,
        key=["n"],
    )
    t0 = time.perf_counter()
    t.best([n, 2.0, x, y], {"n": n})
    secs = time.perf_counter() - t0
    rep = t.last_report
    assert rep is not None
    res.add("autotune_time", "saxpy (builder)", "s", secs, True, configs=len(cfgs))
    res.add("autotune_gain", "saxpy (builder)", "x", rep.gain, False, best=rep.best)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    from zyntax import cuda

    if not cuda.is_available():
        sys.exit("benches/aot.py needs an NVIDIA GPU")
    dev = cuda.Device(args.device).name
    with tempfile.TemporaryDirectory() as zc:
        os.environ["ZYNTAX_CACHE_DIR"] = zc
        res = Results("aot", dev)
        cold_start(res, 3 if args.quick else 7)
        autotuning(res, 1 << 22 if args.quick else 1 << 24)
        res.notes["cold_load_launch"] = (
            "new process, context and arrays created first; then load the kernel, launch "
            "once and synchronize (median of runs)"
        )
    res.write(args.out_dir)


if __name__ == "__main__":
    main()
