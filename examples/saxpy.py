"""SAXPY: y[i] = a * x[i] + y[i], one thread per element.

Run it to print the module as .zir: ``python examples/saxpy.py``.
"""

from zyntax import hir


def build() -> hir.Module:
    m = hir.Module("saxpy", targets=["sm_70", "sm_80", "sm_90"])
    gptr = hir.ptr("global", hir.f32)
    with m.kernel("saxpy", [hir.u32, hir.f32, gptr, gptr], max_threads=256) as b:
        n, a, x, y = b.params
        i = b.block_idx("x") * b.block_dim("x") + b.thread_idx("x")
        with b.if_(i < n):
            yi = b.ptr_add(y, i)
            b.store(yi, b.fma(a, b.load(b.ptr_add(x, i)), b.load(yi)))
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
