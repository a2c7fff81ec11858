"""Histogram with a per-block shared histogram merged into global memory by atomics."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang

BINS = 64


@zyntax.kernel
def histogram(data, hist):
    local = lang.shared.array(BINS, zyntax.u32)
    tid = lang.thread_idx.x
    for b in range(tid, BINS, lang.block_dim.x):
        local[b] = 0
    lang.syncthreads()
    stride = lang.gridsize(1)
    for i in range(lang.grid(1), len(data), stride):
        lang.atomic.add(local, data[i] % BINS, 1, scope="block")
    lang.syncthreads()
    for b in range(tid, BINS, lang.block_dim.x):
        lang.atomic.add(hist, b, local[b])


if __name__ == "__main__":
    data = np.random.default_rng(0).integers(0, 1000, 5000).astype(np.int32)
    hist = np.zeros(BINS, np.uint32)
    histogram[4, 128](data, hist)
    assert np.array_equal(hist, np.bincount(data % BINS, minlength=BINS))
    print("ok")
