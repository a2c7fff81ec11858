"""One warp computes a 16x16x16 tile on tensor cores: D = A * B + C.

A is row-major f16, B column-major f16, C and D row-major f32; one warp per
launch (32 threads). Run it to print the .zir.
"""

from zyntax import hir

M = N = K = 16


def build() -> hir.Module:
    m = hir.Module("mma_tile", targets=["sm_70", "sm_80", "sm_90"])
    frag_a = hir.frag("a", "m16n16k16", hir.f16, "row")
    frag_b = hir.frag("b", "m16n16k16", hir.f16, "col")
    frag_acc = hir.frag("acc", "m16n16k16", hir.f32)
    with m.kernel(
        "mma_16x16x16",
        [
            hir.ptr("global", hir.f16),
            hir.ptr("global", hir.f16),
            hir.ptr("global", hir.f32),
            hir.ptr("global", hir.f32),
        ],
        max_threads=32,
    ) as b:
        a, bm, c, d = b.params
        fa = b.mma_load(frag_a, a, K)  # leading dimension of row-major A: K
        fb = b.mma_load(frag_b, bm, K)  # leading dimension of column-major B: K
        fc = b.mma_load(frag_acc, c, N, layout="row")
        fd = b.mma(fa, fb, fc)
        b.mma_store(d, fd, N, layout="row")
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
