"""Cold compile time of each example kernel, in-process: zyntax vs NVRTC, CuPy, Triton.

zyntax: ``examples/<name>.zir`` text -> parsed, verified HIR -> PTX through
``zyntax.compile_ptx`` (what ``zyntax.compile(m, backend="nvptx", arch=...)``
calls), timed from the text with nothing cached; the Python import and the
process's first compile (LLVM's one-time target set-up, reported as the
``first_compile_in_process`` case) are outside the per-kernel median.

Peers compile an equivalent CUDA C (or Triton) kernel in the same process:

- ``nvrtc``: NVRTC through ctypes, CUDA C -> PTX for ``compute_XX`` -- the same
  job as ours (no cache exists to defeat). Found via ``$ZYNTAX_NVRTC``, the
  ``nvidia-cuda-nvrtc-cu12`` wheel, the loader path or ``/usr/local/cuda``.
- ``cupy`` (GPU only): ``cupy.RawModule(code=...).compile()``; a unique comment
  per repeat defeats CuPy's memory and disk caches. CuPy compiles to a cubin
  (NVRTC + SASS) and loads it, so it does more work than PTX emission.
- ``triton`` (GPU only; saxpy and reduce_sum): first compile of a fresh
  ``triton.jit`` function with an empty ``TRITON_CACHE_DIR`` per repeat
  (``warmup``: Python front-end through cubin, no launch).

Peers that fail to import are skipped. Results: medians of ``--repeat`` runs,
metric ``ms_per_kernel`` (wall time; zyntax and NVRTC alternate compile by
compile, and their rows also carry ``min``, ``cpu_ms`` -- the process CPU time,
which a loaded machine does not inflate -- and, for zyntax, ``stages_ms``),
written to ``benches/results/compile-<device-short>-<yyyymmdd>.json``
(format in docs/performance.md); device ``cpu-<model>`` without a GPU.

    python benches/compile.py [--arch sm_90] [--repeat 31] [--out-dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import itertools
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import ROOT, Results, optional

import zyntax
from zyntax import hir

EXAMPLES = ROOT / "examples"

_counter = itertools.count()


def unique_comment() -> str:
    """A comment no earlier compile has seen (defeats source-keyed caches)."""
    return f"// zyntax compile bench {os.getpid()} {next(_counter)} {time.perf_counter_ns()}\n"


# --------------------------------------------------------------------------- CUDA C peers

_CP_ASYNC = r"""
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
"""

#: The CUDA C twin of each example kernel (same parameters, same algorithm).
CUDA_SOURCES: dict[str, str] = {
    "saxpy": r"""
extern "C" __global__ void __launch_bounds__(256)
saxpy(unsigned n, float a, const float* x, float* y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaf(a, x[i], y[i]);
}
""",
    "reduce_sum": r"""
extern "C" __global__ void __launch_bounds__(1024)
block_sum(const float* x, float* out, unsigned n) {
    __shared__ float warp_sums[32];
    unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + tid;
    unsigned lane = tid & 31, warp = tid >> 5;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x + 31) / 32 ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) atomicAdd(out, v);
    }
}
""",
    "histogram": r"""
extern "C" __global__ void __launch_bounds__(256)
histogram(const unsigned char* data, unsigned n, unsigned* bins) {
    __shared__ unsigned local[256];
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd_block(&local[data[i]], 1u);
    __syncthreads();
    for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
        if (local[i] > 0) atomicAdd(&bins[i], local[i]);
}
""",
    # wmma through inline PTX: NVRTC has no <mma.h> without a CUDA toolkit's headers.
    "mma_tile": r"""
#define R8(p) "=r"(p[0]), "=r"(p[1]), "=r"(p[2]), "=r"(p[3]), \
              "=r"(p[4]), "=r"(p[5]), "=r"(p[6]), "=r"(p[7])
#define F8(p) "=f"(p[0]), "=f"(p[1]), "=f"(p[2]), "=f"(p[3]), \
              "=f"(p[4]), "=f"(p[5]), "=f"(p[6]), "=f"(p[7])
#define V8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
extern "C" __global__ void __launch_bounds__(32)
mma_16x16x16(const unsigned short* a, const unsigned short* b, const float* c, float* d) {
    unsigned fa[8], fb[8];
    float acc[8];
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.global.f16 " V8 ", [%8], %9;"
                 : R8(fa) : "l"(a), "r"(16));
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.global.f16 " V8 ", [%8], %9;"
                 : R8(fb) : "l"(b), "r"(16));
    asm volatile("wmma.load.c.sync.aligned.row.m16n16k16.global.f32 " V8 ", [%8], %9;"
                 : F8(acc) : "l"(c), "r"(16));
    asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 " V8 ", "
                 "{%8, %9, %10, %11, %12, %13, %14, %15}, "
                 "{%16, %17, %18, %19, %20, %21, %22, %23}, "
                 "{%0, %1, %2, %3, %4, %5, %6, %7};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]),
                   "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7])
                 : "r"(fa[0]), "r"(fa[1]), "r"(fa[2]), "r"(fa[3]),
                   "r"(fa[4]), "r"(fa[5]), "r"(fa[6]), "r"(fa[7]),
                   "r"(fb[0]), "r"(fb[1]), "r"(fb[2]), "r"(fb[3]),
                   "r"(fb[4]), "r"(fb[5]), "r"(fb[6]), "r"(fb[7]));
    asm volatile("wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%0], "
                 "{%1, %2, %3, %4, %5, %6, %7, %8}, %9;"
                 :: "l"(d), "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]),
                    "f"(acc[4]), "f"(acc[5]), "f"(acc[6]), "f"(acc[7]), "r"(16) : "memory");
}
""",
    "cp_async_copy": _CP_ASYNC
    + r"""
extern "C" __global__ void __launch_bounds__(256)
cp_async_copy(const float* src, float* dst, unsigned n) {
    __shared__ __align__(16) float buf[2048];
    unsigned tid = threadIdx.x, bd = blockDim.x, tile = bd * 4, tiles = n / tile, off = tid * 4;
    unsigned t = blockIdx.x, stage = 0;
    if (t < tiles) cp_async16(&buf[off], &src[t * tile + off]);
    cp_commit();
    for (; t < tiles; t += gridDim.x) {
        unsigned next = t + gridDim.x, ns = stage ^ 1;
        if (next < tiles) cp_async16(&buf[ns * tile + off], &src[next * tile + off]);
        cp_commit();
        cp_wait<1>();
        __syncthreads();
        unsigned g = t * tile + tid, s = stage * tile + tid;
        for (int k = 0; k < 4; ++k) dst[g + k * bd] = buf[s + k * bd];
        __syncthreads();
        stage = ns;
    }
    cp_wait<0>();
}
""",
    "cp_async_double_buffer": _CP_ASYNC
    + r"""
extern "C" __global__ void __launch_bounds__(128)
scale_tiles(const float4* src, float4* dst, unsigned tiles, float s) {
    __shared__ float4 buf[256];
    unsigned tid = threadIdx.x, base = blockIdx.x * tiles * 128;
    if (tiles > 0) { cp_async16(&buf[tid], &src[base + tid]); cp_commit(); }
    for (unsigned t = 0; t < tiles; ++t) {
        if (t + 1 < tiles) {
            cp_async16(&buf[((t + 1) & 1) * 128 + tid], &src[base + (t + 1) * 128 + tid]);
            cp_commit();
            cp_wait<1>();
        } else {
            cp_wait<0>();
        }
        __syncthreads();
        float4 v = buf[(t & 1) * 128 + tid];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        dst[base + t * 128 + tid] = v;
        __syncthreads();
    }
}
""",
}


class Nvrtc:
    """NVRTC through ctypes: CUDA C to PTX, in-process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
            msg = self.lib.nvrtcGetErrorString(rc)
            raise RuntimeError(f"{what}: {msg.decode() if msg else rc}")

    def compile_ptx(self, src: str, name: str, options: list[str]) -> str:
        prog = ctypes.c_void_p()
        self._check(
            self.lib.nvrtcCreateProgram(
                ctypes.byref(prog), src.encode(), f"{name}.cu".encode(), 0, None, None
            ),
            "nvrtcCreateProgram",
        )
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            if rc != 0:
                size = ctypes.c_size_t()
                self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(size.value)
                self.lib.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(f"NVRTC rejected {name}: {log.value.decode(errors='replace')}")
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            return buf.value.decode()
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def find_nvrtc() -> str | None:
    cands: list[str] = []
    if os.environ.get("ZYNTAX_NVRTC"):
        cands.append(os.environ["ZYNTAX_NVRTC"])
    with contextlib.suppress(Exception):
        import nvidia.cuda_nvrtc as m  # type: ignore[import-not-found]

        for d in m.__path__:
            cands += sorted(glob.glob(os.path.join(d, "lib", "libnvrtc.so*")))
    found = ctypes.util.find_library("nvrtc")
    if found:
        cands.append(found)
    for pattern in (
        "/usr/local/cuda*/lib64/libnvrtc.so*",
        "/usr/lib/x86_64-linux-gnu/libnvrtc.so*",
    ):
        cands += sorted(glob.glob(pattern), reverse=True)
    for c in cands:
        if "builtins" in c or ".alt." in c:
            continue
        try:
            ctypes.CDLL(c)
        except OSError:
            continue
        return c
    return None


# --------------------------------------------------------------------------- Triton peers

try:  # only the Triton peer's function bodies use `tl`, at compile time
    import triton.language as tl
except Exception:  # a missing or broken Triton only skips that peer
    tl = None


def _triton_saxpy(n, a, x_ptr, y_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a * x + y, mask=mask)


def _triton_block_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@contextlib.contextmanager
def fresh_triton_cache() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("TRITON_CACHE_DIR", "TRITON_ALWAYS_COMPILE")}
    with tempfile.TemporaryDirectory(prefix="zyntax-triton-") as d:
        os.environ["TRITON_CACHE_DIR"] = d
        os.environ["TRITON_ALWAYS_COMPILE"] = "1"
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# --------------------------------------------------------------------------- measuring


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times


def example_kernels() -> list[tuple[str, str]]:
    """(example name, .zir text) of every example with at least one kernel."""
    out = []
    for p in sorted(EXAMPLES.glob("*.zir")):
        text = p.read_text()
        if hir.parse_zir(text, p.name).kernels:
            out.append((p.stem, text))
    return out


def zyntax_compile(name: str, text: str, arch: str) -> tuple[Any, float]:
    """One cold compile from text; returns the result and the parse time in seconds."""
    t0 = time.perf_counter()
    m = hir.parse_zir(text, f"{name}.zir")
    parse = time.perf_counter() - t0
    return zyntax.compile_ptx(m, arch), parse


def bench_in_process(
    res: Results, kernels: list[tuple[str, str]], arch: str, repeat: int, nv: Nvrtc | None
) -> None:
    """zyntax and NVRTC, alternating compile by compile so both see the same machine load."""
    opts = [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}"]
    for name, text in kernels:
        stages: dict[str, list[float]] = {}
        ours: list[float] = []
        peer: list[float] = []
        # CPU time of the process per compile: what a loaded shared machine does not inflate.
        ours_cpu: list[float] = []
        peer_cpu: list[float] = []
        src = CUDA_SOURCES.get(name) if nv is not None else None
        if nv is not None and src is not None:
            try:
                nv.compile_ptx(src, name, opts)  # a peer that cannot compile is left out
            except Exception as e:
                print(f"  (nvrtc {name} failed: {e})", file=sys.stderr)
                src = None
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            r, parse = zyntax_compile(name, text, arch)
            ours.append((time.perf_counter() - t0) * 1e3)
            ours_cpu.append((time.process_time() - c0) * 1e3)
            stages.setdefault("parse", []).append(parse * 1e3)
            for k, v in r.timings.items():
                stages.setdefault(k, []).append(v * 1e3)
            if nv is not None and src is not None:
                code = unique_comment() + src
                c0, t0 = time.process_time(), time.perf_counter()
                nv.compile_ptx(code, name, opts)
                peer.append((time.perf_counter() - t0) * 1e3)
                peer_cpu.append((time.process_time() - c0) * 1e3)
        res.add(
            name,
            "zyntax",
            "ms_per_kernel",
            statistics.median(ours),
            True,
            arch=arch,
            min=round(min(ours), 4),
            cpu_ms=round(statistics.median(ours_cpu), 4),
            # Median milliseconds per stage: parse, verify, lower, llvm_verify, optimize, codegen.
            stages_ms={k: round(statistics.median(v), 4) for k, v in stages.items()},
        )
        if peer and nv is not None:
            res.add(
                name,
                "nvrtc",
                "ms_per_kernel",
                statistics.median(peer),
                True,
                min=round(min(peer), 4),
                cpu_ms=round(statistics.median(peer_cpu), 4),
                version=nv.version,
                output="ptx",
            )


def straight_line_module(groups: int) -> Any:
    """``groups`` statements ``b[i + g] = a[i + g] + c`` with a run-time ``i``: the
    straight-line code whose compile time was quadratic (issue 10 item 17)."""
    m = hir.Module("straight", targets=["sm_80", "sm_90"])
    ptr = hir.ptr("global", hir.f32)
    with m.kernel("straight", [ptr, ptr, hir.u32, hir.f32], max_threads=32) as b:
        a, out, i, c = b.params
        for g in range(groups):
            at = i + g
            b.store(b.ptr_add(out, at), b.load(b.ptr_add(a, at)) + c)
    return m


def straight_line_cuda(groups: int) -> str:
    body = "".join(f"  b[i + {g}] = a[i + {g}] + c;\n" for g in range(groups))
    return (
        'extern "C" __global__ void straight(const float* a, float* b, unsigned i, float c) {\n'
        + body
        + "}\n"
    )


def bench_straight_line(res: Results, arch: str, sizes: list[int], nv: Nvrtc | None) -> None:
    """Compile time against code length, one compile per size (they take seconds)."""
    opts = [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}"]
    for n in sizes:
        m = straight_line_module(n)
        c0, t0 = time.process_time(), time.perf_counter()
        zyntax.compile_ptx(m, arch)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        res.add(
            f"straight_line_{n}",
            "zyntax",
            "ms_per_kernel",
            wall * 1e3,
            True,
            arch=arch,
            cpu_ms=round(cpu * 1e3, 2),
            groups=n,
        )
        if nv is not None:
            c0, t0 = time.process_time(), time.perf_counter()
            nv.compile_ptx(unique_comment() + straight_line_cuda(n), "straight", opts)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            res.add(
                f"straight_line_{n}",
                "nvrtc",
                "ms_per_kernel",
                wall * 1e3,
                True,
                cpu_ms=round(cpu * 1e3, 2),
                groups=n,
            )
        print(f"  straight_line {n} groups done", file=sys.stderr)


def bench_cupy(res: Results, kernels: list[tuple[str, str]], repeat: int) -> None:
    cupy = optional("cupy")
    if cupy is None:
        return
    for name, _ in kernels:
        src = CUDA_SOURCES.get(name)
        if src is None:
            continue

        def once(src: str = src) -> None:
            cupy.RawModule(code=unique_comment() + src).compile()

        try:
            once()
            med, _ = median_ms(once, repeat)
        except Exception as e:
            print(f"  (cupy {name} failed: {type(e).__name__}: {e})", file=sys.stderr)
            continue
        res.add(name, "cupy", "ms_per_kernel", med, True, output="cubin+load")


def bench_triton(res: Results, repeat: int) -> None:
    triton = optional("triton")
    torch = optional("torch")
    if triton is None or torch is None or tl is None or not torch.cuda.is_available():
        return
    x = torch.ones(4096, device="cuda", dtype=torch.float32)
    y = torch.ones(4096, device="cuda", dtype=torch.float32)
    out = torch.zeros(1, device="cuda", dtype=torch.float32)

    # warmup() compiles without launching; Triton builds without it launch once instead.
    def saxpy(k: Any, launch: bool) -> Any:
        if launch:
            return k[(4,)](4096, 2.0, x, y, BLOCK=1024)
        return k.warmup(4096, 2.0, x, y, BLOCK=1024, grid=(4,))

    def block_sum(k: Any, launch: bool) -> Any:
        if launch:
            return k[(4,)](x, out, 4096, BLOCK=1024)
        return k.warmup(x, out, 4096, BLOCK=1024, grid=(4,))

    cases: dict[str, tuple[Callable[..., Any], Callable[[Any, bool], Any]]] = {
        "saxpy": (_triton_saxpy, saxpy),
        "reduce_sum": (_triton_block_sum, block_sum),
    }

    def once(fn: Callable[..., Any], call: Callable[[Any, bool], Any], launch: bool) -> None:
        with fresh_triton_cache():
            call(triton.jit(fn), launch)  # a new JITFunction: an empty in-memory cache
            if launch:
                torch.cuda.synchronize()

    for name, (fn, call) in cases.items():
        launch = False
        try:
            try:
                once(fn, call, launch)
            except (AttributeError, TypeError) as e:
                print(
                    f"  (triton warmup unavailable ({e}); timing a first launch)", file=sys.stderr
                )
                launch = True
                once(fn, call, launch)
            med, _ = median_ms(functools.partial(once, fn, call, launch), repeat)
        except Exception as e:
            print(f"  (triton {name} failed: {type(e).__name__}: {e})", file=sys.stderr)
            continue
        res.add(
            name,
            "triton",
            "ms_per_kernel",
            med,
            True,
            version=triton.__version__,
            output="cubin+load+launch" if launch else "cubin",
        )


def device_name() -> str:
    """The GPU's name (zyntax.cuda, else CuPy or PyTorch), or ``cpu-<model>`` without one."""
    with contextlib.suppress(Exception):
        from zyntax import cuda

        if cuda.is_available():
            return str(cuda.Device(0).name)
    if importlib.util.find_spec("cupy") is not None:
        with contextlib.suppress(Exception):
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            return str(props["name"].decode())
    if importlib.util.find_spec("torch") is not None:
        with contextlib.suppress(Exception):
            import torch

            if torch.cuda.is_available():
                return str(torch.cuda.get_device_name(0))
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"cpu-{model}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--repeat", type=int, default=31, help="compiles per median (zyntax, nvrtc)")
    ap.add_argument("--slow-repeat", type=int, default=7, help="compiles per median (cupy, triton)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "benches" / "results")
    ap.add_argument("--quick", action="store_true", help="3 repeats (smoke test)")
    ap.add_argument(
        "--straight-line",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[1000, 2000, 4000, 8000],
        help="code lengths (groups) of the straight-line scaling cases; '0' skips them",
    )
    a = ap.parse_args()
    if a.quick:
        a.repeat = a.slow_repeat = 3
    kernels = example_kernels()
    res = Results("compile", device_name())
    load_before = os.getloadavg()
    nvrtc_path = find_nvrtc()
    nv = Nvrtc(nvrtc_path) if nvrtc_path else None
    if nv is None:
        print("  (skipping nvrtc: libnvrtc not found; set ZYNTAX_NVRTC)", file=sys.stderr)

    # The process's first compile of each impl, before any other (one-time set-up included).
    name, text = next((k for k in kernels if k[0] == "saxpy"), kernels[0])
    t0 = time.perf_counter()
    zyntax_compile(name, text, a.arch)
    res.add("first_compile_in_process", "zyntax", "ms", (time.perf_counter() - t0) * 1e3, True)
    if nv is not None and name in CUDA_SOURCES:
        t0 = time.perf_counter()
        nv.compile_ptx(CUDA_SOURCES[name], name, [f"--gpu-architecture=compute_{a.arch[3:]}"])
        res.add("first_compile_in_process", "nvrtc", "ms", (time.perf_counter() - t0) * 1e3, True)

    bench_in_process(res, kernels, a.arch, a.repeat, nv)
    bench_cupy(res, kernels, a.slow_repeat)
    bench_triton(res, a.slow_repeat)
    bench_straight_line(res, a.arch, [n for n in a.straight_line if n > 0], nv)

    per = [r["value"] for r in res.rows if r["impl"] == "zyntax" and r["metric"] == "ms_per_kernel"]
    res.notes = {
        "arch": a.arch,
        "repeat": a.repeat,
        "slow_repeat": a.slow_repeat,
        "zyntax_version": zyntax.__version__,
        "zyntax_build": zyntax.build_info().get("profile"),
        "python": platform.python_version(),
        "nvrtc": nv.version if nv else None,
        "zyntax_max_ms_per_kernel": round(max(per), 4) if per else None,
        # 1/5/15-minute load averages before and after: a shared machine inflates medians.
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "what": "median wall time of one in-process compile from source text to PTX "
        "(cupy: to a loaded cubin; triton: to cubin), nothing cached; cpu_ms: median "
        "process CPU time of the same compiles",
    }
    res.write(a.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
