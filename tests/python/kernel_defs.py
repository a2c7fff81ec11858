"""Kernels used by the front-end tests (a module of its own so that sources and
line numbers are stable and inspect.getsource works)."""

from __future__ import annotations

import math

import zyntax
from zyntax import lang


@zyntax.func
def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


@zyntax.func
def divmod_py(a, b):
    return a // b, a % b


@zyntax.kernel
def arith(a, b, out_f, out_q, out_r):
    i = lang.grid(1)
    if i < len(a):
        x = a[i]
        y = b[i]
        q, r = divmod_py(x, y)
        out_q[i] = q
        out_r[i] = r
        out_f[i] = clamp(zyntax.f32(x) / zyntax.f32(y), -0.5, 0.5) + (x * 2 - y) ** 2


@zyntax.kernel
def control(x, out, n):
    i = lang.grid(1)
    if i >= n:
        return
    v = x[i]
    acc = 0
    for k in range(10, 0, -3):  # negative step
        if k == 4:
            continue
        acc += k
    j = 0
    while True:
        j += 1
        if j * j > v or j > 50:
            break
    s = 0
    for k in range(i % 4, 9, i % 3 + 1):  # dynamic bounds and step
        s += k
    w = v if v > 10 and not v > 90 else -v
    out[i, 0] = acc
    out[i, 1] = j
    out[i, 2] = s
    out[i, 3] = w
    out[i, 4] = 1 if 3 < v <= 50 else 0


@zyntax.kernel
def mathk(x, out):
    i = lang.grid(1)
    if i < len(x):
        v = x[i]
        out[0, i] = math.sqrt(v)
        out[1, i] = lang.rsqrt(v)
        out[2, i] = math.exp(-v)
        out[3, i] = math.log(v)
        out[4, i] = math.sin(v) + math.cos(v)
        out[5, i] = math.tanh(v - 1.0)
        out[6, i] = math.floor(v * 3.0) + math.ceil(v * 2.0)
        out[7, i] = lang.fma(v, v, 1.0)
        out[8, i] = min(v, 0.5) + max(v, 0.25, 0.3) + abs(v - 1.0)


@zyntax.kernel
def widen(x: zyntax.Array[zyntax.f32, 1], out: zyntax.Array[zyntax.f32, 1]):
    acc = 0  # widened to f32 by the += below
    for k in range(len(x)):
        acc += x[k]
    out[0] = acc


@zyntax.kernel
def strided2d(a, out):
    r, c = lang.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[r, c] = a[r][c] * 2.0 + zyntax.f32(a.ndim)
