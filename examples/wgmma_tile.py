"""One warpgroup's wgmma tile product fed by TMA through an mbarrier ring (sm_90a).

D = A * B with A (M x K, row-major bf16), B given as Bt (N x K, row-major
bf16, i.e. B column-major) and D (M x N, row-major f32). A block of 128
threads (one warpgroup) computes a 64 x 128 tile of D, stepping through K in
tiles of 64 (one 128-byte swizzled row of bf16):

- a ring of two stages in dynamic shared memory, each an A tile (64 x 64) and
  a Bt tile (128 x 64) written by TMA with the 128B swizzle; stage s has a
  `full` barrier (1 arrival + the TMA transaction bytes) and an `empty`
  barrier (128 arrivals, one per thread, once the wgmmas reading it are done);
- thread 0 is also the producer: it fills both stages up front, then refills
  stage s with K tile t + 2 as soon as `empty[s]` completes its phase;
- each K tile is four `wgmma.m64n128k16` reading both operands through
  shared-memory matrix descriptors (K-major, 128B swizzle: rows 128 bytes
  apart, 8-row groups 1024 bytes apart; the k-th 16-wide slice starts 32 bytes
  further on), accumulating into 64 f32 registers per thread.

M % 64 == 0, N % 128 == 0, K % 64 == 0 (TMA fills anything further with
zeros, but this example keeps the shapes exact); grid (N / 128, M / 64),
128 threads, `SHARED_BYTES` of dynamic shared memory.
Run it to print the .zir.
"""

from zyntax import hir

BM, BN, BK = 64, 128, 64
STAGES = 2
A_BYTES = BM * BK * 2
B_BYTES = BN * BK * 2
SHARED_BYTES = STAGES * (A_BYTES + B_BYTES) + 16 * STAGES


def build() -> hir.Module:
    m = hir.Module("wgmma_tile", targets=["sm_90a"])
    su64 = hir.ptr("shared", hir.u64)
    with m.kernel(
        "wgmma_tile",
        [hir.tensormap, hir.tensormap, hir.ptr("global", hir.f32), hir.u32, hir.u32],
        max_threads=128,
    ) as b:
        tmap_a, tmap_b, d, n, k = b.params
        smem = b.dyn_shared(hir.u8)
        bars = b.ptr_cast(b.ptr_add(smem, STAGES * (A_BYTES + B_BYTES)), su64)
        tid = b.thread_idx()
        row0 = b.block_idx("y") * BM
        col0 = b.block_idx("x") * BN
        tiles = k // BK

        def a_tile(s: hir.Value) -> hir.Value:
            return b.ptr_add(smem, s * A_BYTES)

        def b_tile(s: hir.Value) -> hir.Value:
            return b.ptr_add(smem, STAGES * A_BYTES + s * B_BYTES)

        def load(t: hir.Value, s: hir.Value) -> None:
            """Thread 0: K tile t into stage s, completing full[s]."""
            full = b.ptr_add(bars, s)
            b.mbarrier_arrive_expect_tx(full, A_BYTES + B_BYTES)
            k0 = b.cast(t * BK, hir.i32)
            b.tma_load(a_tile(s), tmap_a, [k0, b.cast(row0, hir.i32)], full)
            b.tma_load(b_tile(s), tmap_b, [k0, b.cast(col0, hir.i32)], full)

        def wait(bar: hir.Value, parity: hir.Value) -> None:
            spin = b.block()
            done = b.block()
            b.jump(spin)
            b.switch_to(spin)
            b.br(b.mbarrier_try_wait_parity(bar, parity), done, spin)
            b.switch_to(done)

        with b.if_(b.eq(tid, 0)):
            for s in range(STAGES):
                b.mbarrier_init(b.ptr_add(bars, s), 1)
                b.mbarrier_init(b.ptr_add(bars, STAGES + s), 128)
            b.fence_mbarrier_init()
            for s in range(STAGES):
                with b.if_(b.lt(s, tiles)):
                    load(b.const(s, hir.u32), b.const(s, hir.u32))
        b.barrier()

        def desc(tile: hir.Value, kk: int) -> hir.Value:
            return b.wgmma_desc(
                b.ptr_add(tile, kk * 32),
                leading_byte_offset=16,
                stride_byte_offset=1024,
                swizzle="128B",
            )

        zero = b.wgmma_zero(BN)
        with b.loop(0, tiles, carry=[zero], type=hir.u32) as lp:
            t = lp.index
            (acc,) = lp.carried
            s = t & 1
            parity = (t >> 1) & 1
            wait(b.ptr_add(bars, s), parity)
            b.wgmma_fence()
            for kk in range(BK // 16):
                acc = b.wgmma(acc, desc(a_tile(s), kk), desc(b_tile(s), kk), n=BN, a_type="bf16")
            b.wgmma_commit_group()
            b.wgmma_wait_group(0)
            empty = b.ptr_add(bars, STAGES + s)
            b.mbarrier_arrive(empty)
            with b.if_(b.and_(b.eq(tid, 0), b.lt(t + STAGES, tiles))):
                wait(empty, parity)  # every thread is done with stage s
                load(t + STAGES, s)
            lp.next(acc)
        (acc,) = lp.results

        # Accumulator value 4j + 2h + e of thread (warp w, lane 4g + q) is
        # row 16w + g + 8h, column 8j + 2q + e of the tile.
        lane = tid & 31
        row = row0 + (tid >> 5) * 16 + (lane >> 2)
        col = col0 + (lane & 3) * 2
        for j in range(BN // 8):
            for h in range(2):
                for e in range(2):
                    at = (row + 8 * h) * n + col + 8 * j + e
                    b.store(b.ptr_add(d, at), b.extract(acc, 4 * j + 2 * h + e))
        b.ret()
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
