"""A TMA copy of a 2-D f16 tensor in 64 x 8 tiles with the 128B swizzle (sm_90).

Each block's thread 0 loads its tile (box 64 x 8 elements, innermost first,
at element coordinates (64 * block_idx.x, 8 * block_idx.y)) through the
tensor map `src` into shared memory, the copy completing 1 KiB on an
mbarrier; every thread then writes the tile's raw, swizzled shared image to
`raw` (so a test can check the layout element by element), and thread 0
stores the tile through the tensor map `dst` at the same coordinates. The
result: dst == src, and raw holds each tile as docs/semantics.md says
(16-byte chunk c of row r at chunk c ^ (r % 8)). Run it to print the .zir.

On the GPU: ``cuda.TensorMap.tiled(x, (64, 8), swizzle="128B")`` for both
tensors, ``shared_mem=2048``; on the interpreter ``interp.TensorMap.tiled``
(tests/python/test_tma.py and tests/python/gpu/test_tma_gpu.py run it).
"""

from zyntax import hir

BOX = (64, 8)  # elements, innermost first: 64 f16 = 128 bytes, the 128B swizzle span
TILE = BOX[0] * BOX[1]
TILE_BYTES = 2 * TILE
#: The tile sits 1024 bytes into dynamic shared memory (the swizzle's repeat); the barrier at 0.
BOX_AT = 1024
SHARED_BYTES = BOX_AT + TILE_BYTES


def build() -> hir.Module:
    m = hir.Module("tma_copy", targets=["sm_90"])
    raw_t = hir.ptr("global", hir.f16)
    with m.kernel("tma_copy", [hir.tensormap, hir.tensormap, raw_t], max_threads=128) as b:
        src, dst, raw = b.params
        base = b.dyn_shared(hir.u8)
        bar = b.ptr_cast(base, hir.ptr("shared", hir.u64))
        tile = b.ptr_cast(b.ptr_add(base, BOX_AT), hir.ptr("shared", hir.f16))
        tid = b.thread_idx()
        x = b.cast(b.block_idx("x") * BOX[0], hir.i32)
        y = b.cast(b.block_idx("y") * BOX[1], hir.i32)
        first = b.eq(tid, 0)
        with b.if_(first):
            b.mbarrier_init(bar, 1)
            b.fence_mbarrier_init()
        b.barrier()
        with b.if_(first):
            b.mbarrier_arrive_expect_tx(bar, TILE_BYTES)
            b.tma_load(tile, src, [x, y], bar)
        # Every thread waits for phase 0 (the tile's bytes have landed).
        spin, done = b.block(), b.block()
        b.jump(spin)
        b.switch_to(spin)
        b.br(b.mbarrier_try_wait_parity(bar, 0, 1000), done, spin)
        b.switch_to(done)
        # The raw shared image of this block's tile.
        block = b.block_idx("y") * b.grid_dim("x") + b.block_idx("x")
        with b.for_range(tid, TILE, b.block_dim(), type=hir.u32) as i:
            b.store(b.ptr_add(raw, block * TILE + i), b.load(b.ptr_add(tile, i)))
        with b.if_(first):
            b.tma_store(dst, [x, y], tile)
            b.bulk_commit_group()
            b.bulk_wait_group(0)
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
