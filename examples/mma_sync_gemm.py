"""A GEMM on warp-level ``mma.sync`` fed by ``ldmatrix`` from XOR-swizzled shared memory (sm_80+).

D = A * B + C with A (M x K, row-major f16), B given as Bt (N x K, row-major
f16, i.e. B column-major), C and D (M x N, row-major f32). One warp per block
computes one 16 x 8 tile of D, stepping through K in tiles of 32: the warp
copies the A tile (16 x 32) and Bt tile (8 x 32) to shared memory in 16-byte
chunks, then runs two ``mma.sync.m16n8k16.f16`` whose fragments come straight
from ``ldmatrix.x4`` (A) and ``ldmatrix.x2`` (B).

Shared rows are 64 bytes (4 chunks). ``ldmatrix`` reads the same chunk of 8
consecutive rows, which without a swizzle fall on 4 x the same banks; storing
chunk ``c`` of row ``r`` at chunk ``c ^ ((r >> 1) & 3)`` spreads them over
all 32 banks (the XOR swizzle CUTLASS uses). The swizzle is plain integer
arithmetic on the address every lane hands to ``ldmatrix``.

M % 16 == 0, N % 8 == 0, K % 32 == 0; grid (N / 8, M / 16), 32 threads.
Run it to print the .zir.
"""

from zyntax import hir

KT = 32  # K per shared tile: 4 chunks of 8 f16 per row


def build() -> hir.Module:
    m = hir.Module("mma_sync_gemm", targets=["sm_80", "sm_90"])
    f16x8 = hir.vec(hir.f16, 8)
    f32x2 = hir.vec(hir.f32, 2)
    f32x4 = hir.vec(hir.f32, 4)
    with m.kernel(
        "mma_sync_gemm",
        [
            hir.ptr("global", hir.f16),
            hir.ptr("global", hir.f16),
            hir.ptr("global", hir.f32),
            hir.ptr("global", hir.f32),
            hir.u32,
            hir.u32,
        ],
        max_threads=32,
    ) as b:
        a, bt, c, d, n, k = b.params
        ga = b.ptr_cast(a, hir.ptr("global", f16x8))
        gb = b.ptr_cast(bt, hir.ptr("global", f16x8))
        sa = b.shared_alloc(f16x8, 16 * 4)
        sb = b.shared_alloc(f16x8, 8 * 4)
        lane = b.thread_idx()
        row0 = b.block_idx("y") * 16
        col0 = b.block_idx("x") * 8
        chunks = k >> 3  # 16-byte chunks per row of A and Bt
        g, t = lane >> 2, lane & 3

        def swizzled(row: hir.Value, chunk: hir.Value) -> hir.Value:
            """Chunk index of (row, chunk) in a tile of 4-chunk rows."""
            return row * 4 + (chunk ^ ((row >> 1) & 3))

        # The accumulator fragment starts as this lane's part of C:
        # (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
        scratch = b.alloca(f32x4)
        halves = b.ptr_cast(scratch, hir.ptr("local", f32x2))
        for h in range(2):
            src = b.ptr_add(c, (row0 + g + 8 * h) * n + col0 + 2 * t)
            b.store(b.ptr_add(halves, h), b.load(b.ptr_cast(src, hir.ptr("global", f32x2))))
        acc0 = b.load(scratch)

        with b.loop(0, k >> 5, carry=[acc0], type=hir.u32) as lp:
            kt = lp.index
            (acc,) = lp.carried
            # Copy the tiles: A has 64 chunks (2 per lane), Bt 32 (1 per lane).
            for j in range(2):
                q = lane + 32 * j
                r, ch = q >> 2, q & 3
                v = b.load(b.ptr_add(ga, (row0 + r) * chunks + kt * 4 + ch))
                b.store(b.ptr_add(sa, swizzled(r, ch)), v)
            r, ch = lane >> 2, lane & 3
            v = b.load(b.ptr_add(gb, (col0 + r) * chunks + kt * 4 + ch))
            b.store(b.ptr_add(sb, swizzled(r, ch)), v)
            b.barrier()
            for s in range(KT // 16):
                # A: matrix i = lane / 8 holds rows 8*(i & 1).., chunk 2s + (i >> 1).
                ar = (lane & 7) + ((lane >> 3) & 1) * 8
                fa = b.ldmatrix(b.ptr_add(sa, swizzled(ar, (lane >> 4) + 2 * s)), 4)
                # B: matrix i = lane / 8 (i < 2) holds Bt rows 0..7, chunk 2s + i.
                br = lane & 7
                fb = b.ldmatrix(b.ptr_add(sb, swizzled(br, ((lane >> 3) & 1) + 2 * s)), 2)
                acc = b.mma_sync(fa, fb, acc, elem="f16")
            b.barrier()  # the tiles are free before the next copy
            lp.next(acc)
        (acc,) = lp.results
        for i in range(4):
            at = (row0 + g + 8 * (i >> 1)) * n + col0 + 2 * t + (i & 1)
            b.store(b.ptr_add(d, at), b.extract(acc, i))
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
