"""Matrix transpose through shared memory; the tile has one column of padding so that
the column reads of the second phase hit 32 different banks."""

from __future__ import annotations

import numpy as np

import zyntax
from zyntax import lang

TILE = 32
ROWS = 8  # each thread copies TILE / ROWS elements


@zyntax.kernel
def transpose(src, dst):
    tile = lang.shared.array((TILE, TILE + 1), zyntax.f32)
    bx = lang.block_idx.x * TILE
    by = lang.block_idx.y * TILE
    tx = lang.thread_idx.x
    ty = lang.thread_idx.y
    n_rows = src.shape[0]
    n_cols = src.shape[1]
    for k in range(0, TILE, ROWS):
        r = by + ty + k
        c = bx + tx
        if r < n_rows and c < n_cols:
            tile[ty + k, tx] = src[r, c]
    lang.syncthreads()
    for k in range(0, TILE, ROWS):
        r = bx + ty + k
        c = by + tx
        if r < n_cols and c < n_rows:
            dst[r, c] = tile[tx, ty + k]


def launch(src: np.ndarray, dst: np.ndarray) -> None:
    grid = ((src.shape[1] + TILE - 1) // TILE, (src.shape[0] + TILE - 1) // TILE)
    transpose[grid, (TILE, ROWS)](src, dst)


if __name__ == "__main__":
    a = np.random.default_rng(0).random((70, 45), np.float32)
    out = np.zeros((45, 70), np.float32)
    launch(a, out)
    assert np.array_equal(out, a.T)
    print("ok")
