"""Row softmax: one block per row; max and sum reduced through shared memory."""

from __future__ import annotations

import math

import numpy as np

import zyntax
from zyntax import lang

BLOCK = 128


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
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            buf[tid] = max(buf[tid], buf[tid + s])
        lang.syncthreads()
        s //= 2
    m = buf[0]
    lang.syncthreads()
    total = 0.0
    for j in range(tid, n, BLOCK):
        total += math.exp(x[row, j] - m)
    buf[tid] = total
    lang.syncthreads()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        lang.syncthreads()
        s //= 2
    total = buf[0]
    for j in range(tid, n, BLOCK):
        out[row, j] = math.exp(x[row, j] - m) / total


if __name__ == "__main__":
    x = np.random.default_rng(0).standard_normal((7, 300)).astype(np.float32)
    out = np.zeros_like(x)
    softmax[x.shape[0], BLOCK](x, out)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    print("ok")
