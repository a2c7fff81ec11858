"""The example .zir kernels the CPU runs natively and no other test covers —
`examples/vector_copy.zir` (vec4 loads from constant space in a grid-stride
loop) and `examples/nest_matmul.zir` (the tiled nest: shared tiles and
barriers) — natively against the interpreter, bit-exact, and against numpy,
on fresh random inputs with poisoned outputs (issue 27 item 4; saxpy,
histogram and reduce_sum are in test_cpu.py)."""

from __future__ import annotations

import numpy as np

from conftest import ROOT
from zyntax import cpu, hir
from zyntax.nest import launch_grid

rng = np.random.default_rng()


def load(name: str) -> hir.Module:
    return hir.parse_zir((ROOT / "examples" / f"{name}.zir").read_text())


def both(m: hir.Module, kernel: str, grid: object, block: object, *args: object) -> list[object]:
    """Runs natively and on the interpreter on copies; returns both argument lists."""
    runs = []
    for mode in ("native", "interp"):
        a = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
        assert cpu.launch(m, kernel, grid, block, *a, mode=mode) == mode.replace("native", "cpu")
        runs.append(a)
    for x, y in zip(*runs, strict=True):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=True)
    return runs[0]


def test_vector_copy() -> None:
    m = load("vector_copy")
    n = 1000  # vec4s: a grid-stride loop over more than the grid's threads
    src = rng.standard_normal(4 * n).astype(np.float32)
    dst = np.full(4 * n, np.nan, np.float32)
    out = both(m, "copy_v4", 3, 128, src, dst, n)
    assert np.array_equal(out[1], src)


def test_nest_matmul() -> None:
    m = load("nest_matmul")
    mm, nn, kk = 37, 45, 29
    a = rng.standard_normal((mm, kk)).astype(np.float32)
    b = rng.standard_normal((kk, nn)).astype(np.float32)
    c = np.full((mm, nn), np.nan, np.float32)
    grid, block = launch_grid((mm, nn), (16, 16))
    out = both(m, "mm", grid, block, a, b, c, mm, nn, kk)
    np.testing.assert_allclose(out[2], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
