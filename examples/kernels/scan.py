"""Inclusive prefix sum of one block (Hillis-Steele, double-buffered in shared memory)."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang

BLOCK = 256


@zyntax.kernel
def block_scan(x, out):
    buf = lang.shared.array((2, BLOCK), zyntax.f32)
    tid = lang.thread_idx.x
    n = len(x)
    buf[0, tid] = x[tid] if tid < n else 0.0
    lang.syncthreads()
    src = 0
    offset = 1
    while offset < BLOCK:
        dst = 1 - src
        if tid >= offset:
            buf[dst, tid] = buf[src, tid] + buf[src, tid - offset]
        else:
            buf[dst, tid] = buf[src, tid]
        lang.syncthreads()
        src = dst
        offset *= 2
    if tid < n:
        out[tid] = buf[src, tid]


if __name__ == "__main__":
    x = np.random.default_rng(0).random(200, np.float32)
    out = np.zeros_like(x)
    block_scan[1, BLOCK](x, out)
    assert np.allclose(out, np.cumsum(x), rtol=1e-5)
    print("ok")
