"""Sum reductions: a shared-memory tree per block, and a warp-shuffle version."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang

BLOCK = 256
FULL = 0xFFFFFFFF


@zyntax.kernel
def block_sum(x, partial):
    buf = lang.shared.array(BLOCK, zyntax.f32)
    tid = lang.thread_idx.x
    i = lang.grid(1)
    buf[tid] = x[i] if i < len(x) else 0.0
    lang.syncthreads()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            buf[tid] += buf[tid + s]
        lang.syncthreads()
        s //= 2
    if tid == 0:
        partial[lang.block_idx.x] = buf[0]


@zyntax.func
def warp_sum(v):
    off = 16
    while off > 0:
        v += lang.shfl_down_sync(FULL, v, off)
        off //= 2
    return v


@zyntax.kernel
def warp_shuffle_sum(x, out):
    """One atomic per warp: the lanes' values are combined by shuffles first."""
    i = lang.grid(1)
    v = x[i] if i < len(x) else 0.0
    v = warp_sum(v)
    if lang.lane_id() == 0:
        lang.atomic.add(out, 0, v)


def block_sums(x: np.ndarray) -> np.ndarray:
    blocks = (len(x) + BLOCK - 1) // BLOCK
    partial = np.zeros(blocks, np.float32)
    block_sum[blocks, BLOCK](x, partial)
    return partial


if __name__ == "__main__":
    x = np.random.default_rng(0).random(1000, np.float32)
    assert np.isclose(block_sums(x).sum(), x.sum(), rtol=1e-4)
    out = np.zeros(1, np.float32)
    warp_shuffle_sum[(len(x) + 127) // 128, 128](x, out)
    assert np.isclose(out[0], x.sum(), rtol=1e-4)
    print("ok")
