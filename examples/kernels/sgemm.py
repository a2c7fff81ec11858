"""Tiled SGEMM: C = A @ B with TILE x TILE blocks staged through shared memory."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang

TILE = 16


@zyntax.kernel
def sgemm(a, b, c):
    sa = lang.shared.array((TILE, TILE), zyntax.f32)
    sb = lang.shared.array((TILE, TILE), zyntax.f32)
    tx = lang.thread_idx.x
    ty = lang.thread_idx.y
    row = lang.block_idx.y * TILE + ty
    col = lang.block_idx.x * TILE + tx
    m = a.shape[0]
    k_dim = a.shape[1]
    n = b.shape[1]
    acc = 0.0
    for t in range(0, k_dim, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k_dim else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < k_dim and col < n else 0.0
        lang.syncthreads()
        for kk in range(TILE):
            acc = lang.fma(sa[ty, kk], sb[kk, tx], acc)
        lang.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


def launch(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    grid = ((b.shape[1] + TILE - 1) // TILE, (a.shape[0] + TILE - 1) // TILE)
    sgemm[grid, (TILE, TILE)](a, b, c)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a, b = rng.random((40, 33), np.float32), rng.random((33, 21), np.float32)
    c = np.zeros((40, 21), np.float32)
    launch(a, b, c)
    assert np.allclose(c, a @ b, rtol=1e-5)
    print("ok")
