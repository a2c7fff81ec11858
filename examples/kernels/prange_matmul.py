"""C = A @ B written as a ``lang.prange`` nest with a reduction: the kernel
front-end stages both operands through shared memory (docs/tiling.md), like
the builder nest of examples/nest_matmul.py and the hand-tiled
examples/kernels/sgemm.py. ``mm.tiling_report()`` says what the tiler did.
Launch with ``mm[mm.launch_grid(M, N)](a, b, c)``."""

from __future__ import annotations

import sys

import zyntax
from zyntax import lang

WORKGROUP = (16, 16)
F32C = zyntax.Array[zyntax.f32, 2, "C"]


@zyntax.kernel(workgroup=WORKGROUP)
def mm(a: F32C, b: F32C, c: F32C):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(c.shape[0], c.shape[1]):
        acc = zyntax.f32(0)
        for k in range(a.shape[1]):
            acc = lang.fma(a[i, k], b[k, j], acc)
        c[i, j] = acc


if __name__ == "__main__":
    print("\n".join(mm.tiling_report()), file=sys.stderr)
    print(mm.hir())
