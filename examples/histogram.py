"""256-bin histogram of bytes: per-block bins in shared memory with block-scope
atomics, merged into the global histogram with device-scope atomics.

Grid-stride loop over ``data``; any grid shape works. Run it to print the .zir.
"""

from zyntax import hir

BINS = 256


def build() -> hir.Module:
    m = hir.Module("histogram", targets=["sm_70", "sm_80", "sm_90"])
    with m.kernel(
        "histogram",
        [hir.ptr("global", hir.u8), hir.u32, hir.ptr("global", hir.u32)],
        max_threads=256,
    ) as b:
        data, n, hist = b.params
        bins = b.shared_alloc(hir.u32, BINS)
        tid = b.thread_idx()
        threads = b.block_dim()

        with b.for_range(tid, BINS, threads) as j:
            b.store(b.ptr_add(bins, j), 0)
        b.barrier()

        start = b.block_idx() * threads + tid
        stride = b.grid_dim() * threads
        with b.for_range(start, n, stride) as k:
            byte = b.load(b.ptr_add(data, k))
            b.atomic_add(b.ptr_add(bins, b.cast(byte, hir.u32)), 1, scope="block")
        b.barrier()

        with b.for_range(tid, BINS, threads) as j:
            count = b.load(b.ptr_add(bins, j))
            with b.if_(count > 0):  # skip the global atomic for empty bins
                b.atomic_add(b.ptr_add(hist, j), count, scope="device")
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
