"""Vector add and SAXPY: one thread per element."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang


@zyntax.kernel
def vector_add(a, b, out):
    i = lang.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@zyntax.kernel
def saxpy(alpha: zyntax.f32, x: zyntax.Array[zyntax.f32, 1], y: zyntax.Array[zyntax.f32, 1]):
    i = lang.grid(1)
    if i < len(x):
        y[i] = alpha * x[i] + y[i]


if __name__ == "__main__":
    n = 1000
    rng = np.random.default_rng(0)
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    out = np.zeros_like(a)
    vector_add[(n + 127) // 128, 128](a, b, out)
    assert np.allclose(out, a + b)
    y = b.copy()
    saxpy[(n + 127) // 128, 128](np.float32(2.0), a, y)
    assert np.allclose(y, 2 * a + b)
    print("ok")
