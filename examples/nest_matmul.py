"""C = A @ B written as a parallel loop nest with a reduction, tiled through
shared memory automatically by zyntax.tiling (compare the hand-tiled
examples/kernels/sgemm.py). Launch with ``zyntax.nest.launch_grid((M, N),
workgroup)`` and arguments ``(a, b, c, M, N, K)``."""

from __future__ import annotations

import sys

from zyntax import hir
from zyntax.nest import parallel_for
from zyntax.tiling import tiled_parallel_for

F32P = hir.ptr("global", hir.f32)
PARAMS = [F32P, F32P, F32P, hir.u32, hir.u32, hir.u32]


def build_with_report(
    workgroup: tuple[int, int] = (16, 16), tiled: bool = True, tile_k: int = 16
) -> tuple[hir.Module, list[str]]:
    """The module (kernel ``mm``) and the tiler's report (empty when untiled)."""
    m = hir.Module("nest_matmul")
    with m.kernel("mm", PARAMS, max_threads=(workgroup[1], workgroup[0])) as b:
        a, bm, c, mm, nn, kk = b.params
        if not tiled:  # the same nest, one global load per term
            with parallel_for(b, (mm, nn), workgroup=workgroup) as (i, j):
                with b.loop(0, kk, carry=[b.const(0.0, hir.f32)]) as lp:
                    x = b.load(b.ptr_add(a, i * kk + lp.index))
                    y = b.load(b.ptr_add(bm, lp.index * nn + j))
                    lp.next(b.fma(x, y, lp.carried[0]))
                b.store(b.ptr_add(c, i * nn + j), lp.results[0])
            return m, []
        with tiled_parallel_for(b, (mm, nn), workgroup=workgroup, writes=[c]) as nest:
            si, sj = nest.indices
            acc = nest.reduce(
                kk,
                init=0.0,
                loads=lambda k: [(a, si * kk + k), (bm, k * nn + sj)],
                combine=lambda acc, x, y: b.fma(x, y, acc),
                tile_k=tile_k,
            )
            with nest.inside():
                vi, vj = nest.values
                b.store(b.ptr_add(c, vi * nn + vj), acc)
    return m, nest.report


def build() -> hir.Module:
    return build_with_report()[0]


if __name__ == "__main__":
    module, report = build_with_report()
    print("\n".join(report), file=sys.stderr)  # stdout is the .zir
    print(module.to_zir())
