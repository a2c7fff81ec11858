"""GPU kernels on the CPU (issue 27): ``@zyntax.kernel`` sources run natively
on this machine's cores (``run_cpu(mode="native")``), against the same
algorithms in C (``gcc -O3 -march=native -fopenmp``, written below), numpy,
Numba ``@njit(parallel=True)`` where it is installed, and the reference
interpreter, each at 1 core and at all cores, in one run.

Cases: saxpy_16Mi, reduce_sum_16Mi, histogram_u8_16Mi, transpose_f32_4096,
scan_16Mi, layernorm_4096x1024, softmax_4096x1024, matmul_f32_1024 (the
``lang.prange`` nest of examples/kernels/prange_matmul.py), nbody_16k,
stencil_2d_4096. Inputs rotate between two sets; each timing is the median
of ``--reps`` runs after a warm-up; every implementation's output is checked
against numpy first. The interpreter is timed on a smaller input of the
same case (``--interp-scale``, default 1/256 of the elements) and its time
scaled up linearly (marked ``interp_scaled`` in the JSON); it is single
threaded. zyntax's worker count is ``ZYNTAX_CPU_THREADS``, C's
``omp_set_num_threads``, Numba's ``numba.set_num_threads``.

Writes ``benches/results/cpu_kernels-cpu-<yyyymmdd>.json`` (bench
``cpu_kernels``, metric ``ms``, lower is better; the device names the CPU
model and core count). ``--quick``: 1/16 of the sizes, fewer reps.

    python3 benches/cpu_kernels.py [--quick] [--cases saxpy_16Mi,scan_16Mi]
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# zyntax itself comes from the environment (the editable install, or a wheel
# on PYTHONPATH), never from python/ ahead of it: that tree has no _native.
sys.path.insert(0, str(ROOT / "examples" / "kernels"))

from _common import git_commit  # noqa: E402

import zyntax  # noqa: E402
from zyntax import lang  # noqa: E402

F32 = np.float32
BLOCK = 256

# --------------------------------------------------------------------------- zyntax kernels


@zyntax.kernel
def saxpy(a, x, y):
    i = lang.grid(1)
    if i < len(x):
        y[i] = a * x[i] + y[i]


@zyntax.kernel
def reduce_sum(x, out):
    """Grid-stride partial sums, a shared-memory tree, one atomic per block."""
    buf = lang.shared.array(BLOCK, zyntax.f32)
    tid = lang.thread_idx.x
    acc = zyntax.f32(0)
    for i in range(lang.grid(1), len(x), lang.gridsize(1)):
        acc += x[i]
    buf[tid] = acc
    lang.syncthreads()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        lang.syncthreads()
        s //= 2
    if tid == 0:
        lang.atomic.add(out, 0, buf[0])


@zyntax.kernel
def histogram(data, hist):
    """A per-block shared histogram of bytes, merged by global atomics."""
    local = lang.shared.array(256, zyntax.u32)
    tid = lang.thread_idx.x
    local[tid] = 0
    lang.syncthreads()
    for i in range(lang.grid(1), len(data), lang.gridsize(1)):
        lang.atomic.add(local, zyntax.i32(data[i]), 1, scope="block")
    lang.syncthreads()
    lang.atomic.add(hist, tid, local[tid])


@zyntax.kernel
def transpose(src, dst):
    tile = lang.shared.array((32, 33), zyntax.f32)
    bx = lang.block_idx.x * 32
    by = lang.block_idx.y * 32
    tx = lang.thread_idx.x
    ty = lang.thread_idx.y
    for k in range(0, 32, 8):
        tile[ty + k, tx] = src[by + ty + k, bx + tx]
    lang.syncthreads()
    for k in range(0, 32, 8):
        dst[bx + ty + k, by + tx] = tile[tx, ty + k]


@zyntax.kernel
def scan_chunks(x, sums, chunk):
    """Pass 1: each thread sums its contiguous chunk."""
    t = lang.grid(1)
    if t < len(sums):
        acc = zyntax.f32(0)
        for i in range(t * chunk, min((t + 1) * chunk, len(x))):
            acc += x[i]
        sums[t] = acc


@zyntax.kernel
def scan_offsets(sums):
    """Pass 2: one thread turns the chunk sums into exclusive offsets."""
    if lang.grid(1) == 0:
        run = zyntax.f32(0)
        for t in range(len(sums)):
            v = sums[t]
            sums[t] = run
            run += v


@zyntax.kernel
def scan_apply(x, out, sums, chunk):
    """Pass 3: each thread scans its chunk from its offset (inclusive scan)."""
    t = lang.grid(1)
    if t < len(sums):
        run = sums[t]
        for i in range(t * chunk, min((t + 1) * chunk, len(x))):
            run += x[i]
            out[i] = run


@zyntax.kernel
def layernorm(x, w, b, out, eps):
    buf = lang.shared.array(BLOCK, zyntax.f32)
    buf2 = lang.shared.array(BLOCK, zyntax.f32)
    row = lang.block_idx.x
    tid = lang.thread_idx.x
    n = x.shape[1]
    s = zyntax.f32(0)
    q = zyntax.f32(0)
    for j in range(tid, n, BLOCK):
        v = x[row, j]
        s += v
        q += v * v
    buf[tid] = s
    buf2[tid] = q
    lang.syncthreads()
    h = BLOCK // 2
    while h > 0:
        if tid < h:
            buf[tid] += buf[tid + h]
            buf2[tid] += buf2[tid + h]
        lang.syncthreads()
        h //= 2
    mean = buf[0] / zyntax.f32(n)
    var = buf2[0] / zyntax.f32(n) - mean * mean
    r = lang.rsqrt(var + eps)
    for j in range(tid, n, BLOCK):
        out[row, j] = (x[row, j] - mean) * r * w[j] + b[j]


@zyntax.kernel
def softmax(x, out):
    buf = lang.shared.array(BLOCK, zyntax.f32)
    row = lang.block_idx.x
    tid = lang.thread_idx.x
    n = x.shape[1]
    m = -math.inf
    for j in range(tid, n, BLOCK):
        m = max(m, x[row, j])
    buf[tid] = m
    lang.syncthreads()
    h = BLOCK // 2
    while h > 0:
        if tid < h:
            buf[tid] = max(buf[tid], buf[tid + h])
        lang.syncthreads()
        h //= 2
    m = buf[0]
    lang.syncthreads()
    total = zyntax.f32(0)
    for j in range(tid, n, BLOCK):
        e = math.exp(x[row, j] - m)
        out[row, j] = e  # exp once, as the C peer does: rescaled below
        total += e
    buf[tid] = total
    lang.syncthreads()
    h = BLOCK // 2
    while h > 0:
        if tid < h:
            buf[tid] += buf[tid + h]
        lang.syncthreads()
        h //= 2
    inv = 1.0 / buf[0]
    for j in range(tid, n, BLOCK):
        out[row, j] = out[row, j] * inv


@zyntax.kernel
def nbody(pos, acc, soft):
    """pos: [n, 4] (x, y, z, mass); acc[i] = sum_j m_j d / (|d|^2 + soft)^1.5."""
    i = lang.grid(1)
    if i < pos.shape[0]:
        px = pos[i, 0]
        py = pos[i, 1]
        pz = pos[i, 2]
        ax = zyntax.f32(0)
        ay = zyntax.f32(0)
        az = zyntax.f32(0)
        for j in range(pos.shape[0]):
            dx = pos[j, 0] - px
            dy = pos[j, 1] - py
            dz = pos[j, 2] - pz
            d2 = dx * dx + dy * dy + dz * dz + soft
            inv = lang.rsqrt(d2)
            f = pos[j, 3] * inv * inv * inv
            ax += f * dx
            ay += f * dy
            az += f * dz
        acc[i, 0] = ax
        acc[i, 1] = ay
        acc[i, 2] = az


@zyntax.kernel
def stencil(u, v):
    c, r = lang.grid(2)
    n = u.shape[0]
    m = u.shape[1]
    if r > 0 and r < n - 1 and c > 0 and c < m - 1:
        v[r, c] = 0.25 * (u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1])


# --------------------------------------------------------------------------- C peers

C_SOURCE = r"""
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
void set_threads(int n) { omp_set_num_threads(n); }
void saxpy(long n, float a, const float *x, float *y) {
  #pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
float reduce_sum(long n, const float *x) {
  float s = 0;
  #pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (long i = 0; i < n; i++) s += x[i];
  return s;
}
void histogram(long n, const uint8_t *d, uint32_t *h) {
  memset(h, 0, 256 * 4);
  #pragma omp parallel
  {
    uint32_t l[256] = {0};
    #pragma omp for schedule(static)
    for (long i = 0; i < n; i++) l[d[i]]++;
    for (int b = 0; b < 256; b++) {
      #pragma omp atomic
      h[b] += l[b];
    }
  }
}
void transpose(long n, const float *s, float *d) {
  #pragma omp parallel for collapse(2) schedule(static)
  for (long bi = 0; bi < n; bi += 32)
    for (long bj = 0; bj < n; bj += 32)
      for (long i = bi; i < bi + 32; i++)
        for (long j = bj; j < bj + 32; j++) d[j * n + i] = s[i * n + j];
}
void scan(long n, const float *x, float *out) {
  int nt = omp_get_max_threads();
  float part[1024];
  #pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    long lo = n * t / T, hi = n * (t + 1) / T;
    float s = 0;
    for (long i = lo; i < hi; i++) s += x[i];
    part[t] = s;
    #pragma omp barrier
    float run = 0;
    for (int k = 0; k < t; k++) run += part[k];
    for (long i = lo; i < hi; i++) { run += x[i]; out[i] = run; }
  }
}
void layernorm(long rows, long n, const float *x, const float *w, const float *b, float *o,
               float eps) {
  #pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float s = 0, q = 0;
    #pragma omp simd reduction(+ : s, q)
    for (long j = 0; j < n; j++) { s += xr[j]; q += xr[j] * xr[j]; }
    float mean = s / n, var = q / n - mean * mean, rs = 1.0f / sqrtf(var + eps);
    #pragma omp simd
    for (long j = 0; j < n; j++) o[r * n + j] = (xr[j] - mean) * rs * w[j] + b[j];
  }
}
void softmax(long rows, long n, const float *x, float *o) {
  #pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; r++) {
    const float *xr = x + r * n;
    float m = -INFINITY, s = 0;
    #pragma omp simd reduction(max : m)
    for (long j = 0; j < n; j++) m = xr[j] > m ? xr[j] : m;
    #pragma omp simd reduction(+ : s)
    for (long j = 0; j < n; j++) { float e = expf(xr[j] - m); o[r * n + j] = e; s += e; }
    float inv = 1.0f / s;
    #pragma omp simd
    for (long j = 0; j < n; j++) o[r * n + j] *= inv;
  }
}
void matmul(long n, const float *a, const float *b, float *c) {
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) {
    float *ci = c + i * n;
    for (long j = 0; j < n; j++) ci[j] = 0;
    for (long k = 0; k < n; k++) {
      float aik = a[i * n + k];
      const float *bk = b + k * n;
      #pragma omp simd
      for (long j = 0; j < n; j++) ci[j] += aik * bk[j];
    }
  }
}
void nbody(long n, const float *p, float *acc, float soft) {
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) {
    float px = p[4 * i], py = p[4 * i + 1], pz = p[4 * i + 2], ax = 0, ay = 0, az = 0;
    #pragma omp simd reduction(+ : ax, ay, az)
    for (long j = 0; j < n; j++) {
      float dx = p[4 * j] - px, dy = p[4 * j + 1] - py, dz = p[4 * j + 2] - pz;
      float d2 = dx * dx + dy * dy + dz * dz + soft, inv = 1.0f / sqrtf(d2);
      float f = p[4 * j + 3] * inv * inv * inv;
      ax += f * dx; ay += f * dy; az += f * dz;
    }
    acc[3 * i] = ax; acc[3 * i + 1] = ay; acc[3 * i + 2] = az;
  }
}
void stencil(long n, long m, const float *u, float *v) {
  #pragma omp parallel for schedule(static)
  for (long r = 1; r < n - 1; r++)
    #pragma omp simd
    for (long c = 1; c < m - 1; c++)
      v[r * m + c] = 0.25f * (u[(r - 1) * m + c] + u[(r + 1) * m + c] + u[r * m + c - 1] +
                              u[r * m + c + 1]);
}
"""


def build_c(cc: str) -> tuple[ctypes.CDLL | None, str]:
    """The C peers as a shared library, or None (and why) where `cc` is missing
    or cannot build OpenMP code: the bench then runs without the C column."""
    d = Path(tempfile.mkdtemp(prefix="zyntax-cpu-kernels-"))
    src, lib = d / "k.c", d / "k.so"
    src.write_text(C_SOURCE)
    flags = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
    try:
        subprocess.run([cc, *flags, str(src), "-o", str(lib), "-lm"], check=True)
        ver = subprocess.run([cc, "--version"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"  (skipping the C peers: {cc} failed: {e})", file=sys.stderr)
        return None, f"none ({cc}: {e})"
    ver = ver.stdout.splitlines()[0]
    c = ctypes.CDLL(str(lib))
    c.reduce_sum.restype = ctypes.c_float
    return c, f"{ver} {' '.join(flags[:3])}"


def P(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


L, Fl = ctypes.c_long, ctypes.c_float

# --------------------------------------------------------------------------- cases


class Case:
    """One case: inputs of `size`, and per implementation a callable that runs it
    once on those inputs and returns the output to check."""

    def __init__(
        self,
        name: str,
        make: Callable[[np.random.Generator, int], dict[str, Any]],
        size: int,
        zyntax_run: Callable[[dict[str, Any]], Any],
        c_run: Callable[[Any, dict[str, Any]], Any],
        numpy_run: Callable[[dict[str, Any]], Any] | None,
        tol: float,
        power: int = 1,
    ) -> None:
        self.name, self.make, self.size = name, make, size
        self.zyntax_run, self.c_run, self.numpy_run = zyntax_run, c_run, numpy_run
        #: the work grows as size ** power (the interpreter's time is scaled so)
        self.tol, self.power = tol, power


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _saxpy(d: dict[str, Any]) -> Any:
    y = d["y"].copy()
    saxpy.run_cpu(F32(2.5), d["x"], y, grid=cdiv(len(y), BLOCK), block=BLOCK, mode=MODE)
    return y


def _reduce(d: dict[str, Any]) -> Any:
    out = np.zeros(1, F32)
    reduce_sum.run_cpu(d["x"], out, grid=blocks(len(d["x"])), block=BLOCK, mode=MODE)
    return out[0]


def _hist(d: dict[str, Any]) -> Any:
    h = np.zeros(256, np.uint32)
    histogram.run_cpu(d["x"], h, grid=blocks(len(d["x"])), block=BLOCK, mode=MODE)
    return h


def _transpose(d: dict[str, Any]) -> Any:
    n = d["x"].shape[0]
    out = np.empty_like(d["x"])
    transpose.run_cpu(d["x"], out, grid=(n // 32, n // 32), block=(32, 8), mode=MODE)
    return out


def _scan(d: dict[str, Any]) -> Any:
    x = d["x"]
    parts = 4096
    chunk = cdiv(len(x), parts)
    sums = np.empty(parts, F32)
    out = np.empty_like(x)
    scan_chunks.run_cpu(x, sums, chunk, grid=cdiv(parts, 64), block=64, mode=MODE)
    scan_offsets.run_cpu(sums, grid=1, block=1, mode=MODE)
    scan_apply.run_cpu(x, out, sums, chunk, grid=cdiv(parts, 64), block=64, mode=MODE)
    return out


def _layernorm(d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    rows = d["x"].shape[0]
    layernorm.run_cpu(d["x"], d["w"], d["b"], out, F32(1e-5), grid=rows, block=BLOCK, mode=MODE)
    return out


def _softmax(d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    softmax.run_cpu(d["x"], out, grid=d["x"].shape[0], block=BLOCK, mode=MODE)
    return out


def _matmul(d: dict[str, Any]) -> Any:
    import prange_matmul

    n = d["a"].shape[0]
    c = np.empty((n, n), F32)
    grid, block = prange_matmul.mm.launch_grid(n, n)
    prange_matmul.mm.run_cpu(d["a"], d["b"], c, grid=grid, block=block, mode=MODE)
    return c


def _nbody(d: dict[str, Any]) -> Any:
    n = d["p"].shape[0]
    acc = np.empty((n, 3), F32)
    nbody.run_cpu(d["p"], acc, F32(0.01), grid=cdiv(n, 128), block=128, mode=MODE)
    return acc


def _stencil(d: dict[str, Any]) -> Any:
    n = d["x"].shape[0]
    v = d["x"].copy()
    stencil.run_cpu(d["x"], v, grid=(n // 16, n // 16), block=(16, 16), mode=MODE)
    return v


def np_nbody(d: dict[str, Any]) -> Any:
    p = d["p"]
    out = np.empty((len(p), 3), F32)
    for lo in range(0, len(p), 512):  # blocks of rows: n x n would not fit
        dd = p[None, :, :3] - p[lo : lo + 512, None, :3]
        d2 = (dd * dd).sum(-1) + F32(0.01)
        f = p[None, :, 3] / (d2 * np.sqrt(d2))
        out[lo : lo + 512] = (f[..., None] * dd).sum(1)
    return out


def np_layernorm(d: dict[str, Any]) -> Any:
    x = d["x"]
    mu = x.mean(-1, keepdims=True)
    var = (x * x).mean(-1, keepdims=True) - mu * mu
    return (x - mu) / np.sqrt(var + F32(1e-5)) * d["w"] + d["b"]


def np_softmax(d: dict[str, Any]) -> Any:
    e = np.exp(d["x"] - d["x"].max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_stencil(d: dict[str, Any]) -> Any:
    u = d["x"]
    v = u.copy()
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return v


def c_scan(c: Any, d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    c.scan(L(len(d["x"])), P(d["x"]), P(out))
    return out


def c_stencil(c: Any, d: dict[str, Any]) -> Any:
    v = d["x"].copy()
    n, m = d["x"].shape
    c.stencil(L(n), L(m), P(d["x"]), P(v))
    return v


def c_saxpy(c: Any, d: dict[str, Any]) -> Any:
    y = d["y"].copy()
    c.saxpy(L(len(y)), Fl(2.5), P(d["x"]), P(y))
    return y


def c_hist(c: Any, d: dict[str, Any]) -> Any:
    h = np.zeros(256, np.uint32)
    c.histogram(L(len(d["x"])), P(d["x"]), P(h))
    return h


def c_transpose(c: Any, d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    c.transpose(L(d["x"].shape[0]), P(d["x"]), P(out))
    return out


def c_layernorm(c: Any, d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    r, n = d["x"].shape
    c.layernorm(L(r), L(n), P(d["x"]), P(d["w"]), P(d["b"]), P(out), Fl(1e-5))
    return out


def c_softmax(c: Any, d: dict[str, Any]) -> Any:
    out = np.empty_like(d["x"])
    r, n = d["x"].shape
    c.softmax(L(r), L(n), P(d["x"]), P(out))
    return out


def c_matmul(c: Any, d: dict[str, Any]) -> Any:
    n = d["a"].shape[0]
    out = np.empty((n, n), F32)
    c.matmul(L(n), P(d["a"]), P(d["b"]), P(out))
    return out


def c_nbody(c: Any, d: dict[str, Any]) -> Any:
    n = d["p"].shape[0]
    acc = np.empty((n, 3), F32)
    c.nbody(L(n), P(d["p"]), P(acc), Fl(0.01))
    return acc


def vec(r: np.random.Generator, n: int) -> dict[str, Any]:
    return {"x": r.standard_normal(n).astype(F32), "y": r.standard_normal(n).astype(F32)}


def square(r: np.random.Generator, n: int) -> dict[str, Any]:
    return {"x": r.standard_normal((n, n)).astype(F32)}


def rows(r: np.random.Generator, n: int) -> dict[str, Any]:
    return {
        "x": (r.standard_normal((n, 1024)) * 2 + 1).astype(F32),
        "w": r.standard_normal(1024).astype(F32),
        "b": r.standard_normal(1024).astype(F32),
    }


def cases(scale: int) -> list[Case]:
    mi = (1 << 24) // scale
    return [
        Case("saxpy_16Mi", vec, mi, _saxpy, c_saxpy, lambda d: F32(2.5) * d["x"] + d["y"], 1e-6),
        Case(
            "reduce_sum_16Mi",
            lambda r, n: {"x": r.random(n).astype(F32)},
            mi,
            _reduce,
            lambda c, d: c.reduce_sum(L(len(d["x"])), P(d["x"])),
            lambda d: d["x"].sum(),
            1e-4,
        ),
        Case(
            "histogram_u8_16Mi",
            lambda r, n: {"x": r.integers(0, 256, n).astype(np.uint8)},
            mi,
            _hist,
            c_hist,
            lambda d: np.bincount(d["x"], minlength=256).astype(np.uint32),
            0,
        ),
        Case(
            "transpose_f32_4096",
            square,
            max(64, 4096 // int(math.sqrt(scale))),
            _transpose,
            c_transpose,
            lambda d: np.ascontiguousarray(d["x"].T),
            0,
            power=2,
        ),
        Case(
            "scan_16Mi",
            lambda r, n: {"x": r.random(n).astype(F32)},
            mi,
            _scan,
            c_scan,
            lambda d: np.cumsum(d["x"], dtype=np.float64).astype(F32),
            2e-3,
        ),
        Case(
            "layernorm_4096x1024", rows, 4096 // scale, _layernorm, c_layernorm, np_layernorm, 1e-3
        ),
        Case("softmax_4096x1024", rows, 4096 // scale, _softmax, c_softmax, np_softmax, 1e-4),
        Case(
            "matmul_f32_1024",
            lambda r, n: {
                "a": r.standard_normal((n, n)).astype(F32),
                "b": r.standard_normal((n, n)).astype(F32),
            },
            max(64, 1024 // round(scale ** (1 / 3))),
            _matmul,
            c_matmul,
            lambda d: d["a"] @ d["b"],
            1e-3,
            power=3,
        ),
        Case(
            "nbody_16k",
            lambda r, n: {
                "p": np.concatenate(
                    [r.standard_normal((n, 3)), r.random((n, 1)) + 0.5], axis=1
                ).astype(F32)
            },
            max(256, 16384 // int(math.sqrt(scale))),
            _nbody,
            c_nbody,
            np_nbody,
            1e-3,
            power=2,
        ),
        Case(
            "stencil_2d_4096",
            square,
            max(64, 4096 // int(math.sqrt(scale))),
            _stencil,
            c_stencil,
            np_stencil,
            1e-6,
            power=2,
        ),
    ]


# --------------------------------------------------------------------------- timing

#: zyntax's row name: by default kernels with barriers are split into region
#: loops and per-thread strided loops interchanged with the thread loop; the
#: compiler's ZYNTAX_CPU_BARRIERS=coro keeps the coroutine lowering,
#: ZYNTAX_CPU_INTERCHANGE=0 keeps every loop per thread (=all interchanges
#: every loop it may), ZYNTAX_CPU_AFFINE=1|0 runs interchanged rows as SIMD
#: lanes one iteration per pass or threads ZYNTAX_CPU_ITERS=K iterations per
#: stop, and ZYNTAX_CPU_VECTOR=1|0 runs the threads of a block as SIMD lanes
#: or not, in every kernel (by default the compiler chooses per kernel, with
#: AVX-512 only: crates/zyntax-llvm/src/host/mode.rs), ZYNTAX_CPU_HOIST=0 saves
#: context-only values at barriers rather than recomputing them,
#: ZYNTAX_CPU_LOOPEXIT=1 makes a barrier loop's exit a region of its own,
#: ZYNTAX_CPU_VF=N forces the vectorization factor of
#: the region and row loops, ZYNTAX_CPU_WALKS=1|0 interchanges row walks (a
#: constant step of 32 or more) as rows or not, for comparisons in one session
ZYNTAX = (
    "zyntax"
    + ("_coro" if os.environ.get("ZYNTAX_CPU_BARRIERS") == "coro" else "")
    + ("_nointerchange" if os.environ.get("ZYNTAX_CPU_INTERCHANGE") == "0" else "")
    + ("_interchangeall" if os.environ.get("ZYNTAX_CPU_INTERCHANGE") == "all" else "")
    + ("_noaffine" if os.environ.get("ZYNTAX_CPU_AFFINE") == "0" else "")
    + ("_affine" if os.environ.get("ZYNTAX_CPU_AFFINE") == "1" else "")
    + (f"_iters{os.environ['ZYNTAX_CPU_ITERS']}" if os.environ.get("ZYNTAX_CPU_ITERS") else "")
    + ("_vec" if os.environ.get("ZYNTAX_CPU_VECTOR") == "1" else "")
    + ("_nohoist" if os.environ.get("ZYNTAX_CPU_HOIST") == "0" else "")
    + ("_loopexit" if os.environ.get("ZYNTAX_CPU_LOOPEXIT") == "1" else "")
    + ("_novec" if os.environ.get("ZYNTAX_CPU_VECTOR") == "0" else "")
    + (f"_vf{os.environ['ZYNTAX_CPU_VF']}" if os.environ.get("ZYNTAX_CPU_VF") else "")
    + ("_walks" if os.environ.get("ZYNTAX_CPU_WALKS") == "1" else "")
    + ("_nowalks" if os.environ.get("ZYNTAX_CPU_WALKS") == "0" else "")
)

MODE = "native"  # zyntax's mode: "native" (refuses a silent fallback) or "interp"


#: The fastest run of each `median_ms` (the machine may be shared: the JSON
#: carries both).
MINS: list[float] = []

TODAY = datetime.datetime.now(datetime.timezone.utc)


def blocks(n: int) -> int:
    """Blocks of the grid-stride kernels: 256 (many per core) at 16Mi, fewer for
    small inputs so that each thread still strides over >= 256 elements."""
    return max(1, min(256, n // (BLOCK * 256)))


def close(got: Any, want: Any, tol: float) -> bool:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if tol == 0:
        return bool(np.array_equal(g, w))
    scale = max(1.0, float(np.abs(w).max()))
    return bool(np.abs(g - w).max() <= tol * scale)


def median_ms(
    run: Callable[[dict[str, Any]], Any], inputs: list[dict[str, Any]], reps: int
) -> float:
    t0 = time.perf_counter()
    run(inputs[0])  # warm-up (compilation, page faults)
    first = (time.perf_counter() - t0) * 1e3
    if first > 3000.0:
        # A slow peer (numpy's n-body, the interpreter): its one run is the
        # measurement (compilation is a negligible part of it).
        MINS.append(first)
        return first
    ts = []
    for k in range(reps):
        d = inputs[k % len(inputs)]
        t0 = time.perf_counter()
        run(d)
        ts.append((time.perf_counter() - t0) * 1e3)
    MINS.append(min(ts))
    return float(np.median(ts))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    global MODE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--interp-scale", type=int, default=256)
    ap.add_argument("--cases", default="")
    ap.add_argument("--cc", default=os.environ.get("CC", "gcc"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-interp", action="store_true", help="skip the interpreter")
    opts = ap.parse_args()
    scale = 16 if opts.quick else 1
    reps = 3 if opts.quick else opts.reps
    cores = os.cpu_count() or 1
    c, cc_version = build_c(opts.cc)
    numba = None
    try:
        import numba  # type: ignore[import-not-found,no-redef]
    except ImportError:
        print("  (skipping numba: not installed)", file=sys.stderr)
    rng = np.random.default_rng()
    rows_out: list[dict[str, Any]] = []
    want = [s for s in opts.cases.split(",") if s]
    out = opts.out or ROOT / "benches" / "results" / f"cpu_kernels-cpu-{TODAY:%Y%m%d}.json"

    def save() -> None:
        """The JSON so far (after every case: a run cut short by a time limit
        still leaves its finished cases)."""
        commit = git_commit()
        doc = {
            "bench": "cpu_kernels",
            "device": f"{cpu_model()}, {cores} cores",
            "commit": commit,
            "date": TODAY.strftime("%Y-%m-%d"),
            "notes": {
                "metric": (
                    "ms per run (median; min_ms the fastest), lower is better; threads 0 = "
                    "numpy's own; interp_scaled: the interpreter's time on a smaller input "
                    "times the work ratio"
                ),
                "c_compiler": cc_version,
                "numba": "not installed" if numba is None else numba.__version__,
                "zyntax": "@zyntax.kernel run_cpu(mode='native'), ZYNTAX_CPU_THREADS workers; "
                + (
                    "barrier kernels as coroutines (ZYNTAX_CPU_BARRIERS=coro)"
                    if "_coro" in ZYNTAX
                    else "barrier kernels as region loops"
                )
                + (
                    ", no loop interchange (ZYNTAX_CPU_INTERCHANGE=0)"
                    if "_nointerchange" in ZYNTAX
                    else ", strided per-thread loops interchanged with the thread loop"
                )
                + (
                    ", threads of a block as SIMD lanes (ZYNTAX_CPU_VECTOR=1)"
                    if "_vec" in ZYNTAX
                    else ", threads of a block one after another (ZYNTAX_CPU_VECTOR=0)"
                    if "_novec" in ZYNTAX
                    else ", threads of a block as SIMD lanes or not per kernel (host/mode.rs)"
                )
                + (
                    ", interchanged rows as SIMD lanes (ZYNTAX_CPU_AFFINE=1)"
                    if "_affine" in ZYNTAX
                    else ", threads run interchanged loops K iterations per stop"
                    + f" (K = {os.environ.get('ZYNTAX_CPU_ITERS', '8')})"
                    if "_noaffine" in ZYNTAX
                    else ", interchanged rows as SIMD lanes or K iterations per stop per kernel"
                ),
                "interp": f"reference interpreter on 1/{opts.interp_scale} of the work, scaled",
                "quick": opts.quick,
                "machine_load": os.getloadavg(),
            },
            "results": rows_out,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")

    for case in cases(scale):
        if want and case.name not in want:
            continue
        inputs = [case.make(rng, case.size) for _ in range(2)]
        ref = case.numpy_run(inputs[0]) if case.numpy_run else None
        MODE = "native"
        impls: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [(ZYNTAX, case.zyntax_run)]
        if c is not None:
            impls.append(("c_gcc_O3_openmp", lambda d, case=case: case.c_run(c, d)))
        for impl, run in impls:
            got = run(inputs[0])
            if ref is not None and not close(got, ref, case.tol):
                raise SystemExit(f"{case.name}: {impl} disagrees with numpy")
        for threads in sorted({1, cores}):
            os.environ["ZYNTAX_CPU_THREADS"] = str(threads)
            if c is not None:
                c.set_threads(threads)
            for impl, run in impls:
                ms = median_ms(run, inputs, reps)
                rows_out.append(row(case.name, impl, threads, ms))
                print(f"{case.name:22s} {impl:18s} {threads:2d} cores {ms:10.3f} ms", flush=True)
        if case.numpy_run is not None:
            ms = median_ms(case.numpy_run, inputs, reps)
            rows_out.append(row(case.name, "numpy", 0, ms))
            print(f"{case.name:22s} {'numpy':18s}          {ms:10.3f} ms", flush=True)
        if opts.no_interp:
            save()
            continue
        # The interpreter: 1/interp_scale of the work, scaled up (single threaded).
        small_size = max(16, round(case.size / opts.interp_scale ** (1 / case.power)))
        if case.power > 1:
            small_size = max(64, small_size // 32 * 32)  # whole 32x32 tiles
        work = (case.size / small_size) ** case.power
        small = [case.make(rng, small_size)]
        MODE = "interp"
        ms = median_ms(case.zyntax_run, small, 1) * work
        MODE = "native"
        rows_out.append(
            row(case.name, "interp_scaled", 1, ms, note=f"size {small_size}, x{work:.0f}")
        )
        print(f"{case.name:22s} {'interp (scaled)':18s}  1 cores {ms:10.1f} ms", flush=True)
        save()
    os.environ.pop("ZYNTAX_CPU_THREADS", None)
    save()
    print(f"wrote {out}")


def row(case: str, impl: str, threads: int, ms: float, note: str = "") -> dict[str, Any]:
    r: dict[str, Any] = {
        "case": case,
        "impl": impl,
        "threads": threads,
        "metric": "ms",
        "value": round(ms, 4),
        "min_ms": round(MINS[-1], 4) if MINS else None,
        "lower_is_better": True,
    }
    if note:
        r["note"] = note
    return r


if __name__ == "__main__":
    main()
