"""Vectorised copy: 16-byte loads and stores (``ld.global.nc.v4.f32`` /
``st.global.v4.f32``) in a grid-stride loop.

The source is a ``constant`` pointer, zyntax's read-only global memory: its
loads take the non-coherent read-only path (``.nc``). Each thread moves one
``vec<f32, 4>`` per iteration, so a warp moves 512 contiguous bytes per
instruction pair. ``n4`` counts float4 elements. Run it to print the .zir.
"""

from zyntax import hir


def build() -> hir.Module:
    m = hir.Module("vector_copy", targets=["sm_70", "sm_80", "sm_90"])
    f4 = hir.vec(hir.f32, 4)
    with m.kernel(
        "copy_v4", [hir.ptr("constant", f4), hir.ptr("global", f4), hir.u32], max_threads=256
    ) as b:
        src, dst, n4 = b.params
        start = b.block_idx() * b.block_dim() + b.thread_idx()
        stride = b.grid_dim() * b.block_dim()
        with b.loop(start, n4, stride, type=hir.u32) as lp:
            i = lp.index
            b.store(b.ptr_add(dst, i), b.load(b.ptr_add(src, i)))
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
