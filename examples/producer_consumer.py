"""Warp-specialised streaming through shared memory with named barriers
(``bar.sync`` / ``bar.arrive``, sm_70+).

Each block of 256 threads has 4 producer warps and 4 consumer warps and a
two-stage shared buffer of 128 floats per stage. For tile ``t`` (stage
``s = t % 2``) the producers wait until the consumers have freed the stage
(barrier ``3 + s``, skipped for the first two tiles), copy the tile in and
``bar.arrive`` on barrier ``1 + s``; the consumers ``bar.sync`` on it, write
``2 * x + 1`` of the tile reversed, and ``bar.arrive`` on ``3 + s`` (except
for the last two tiles). Barrier ids are immediates, so the tile loop walks
two tiles (both stages) per iteration. Block ``b`` streams tiles
``b * tiles .. (b + 1) * tiles`` of ``x`` (``tiles`` even). Run it to print
the .zir.
"""

from zyntax import hir

THREADS = 256
HALF = THREADS // 2


def build() -> hir.Module:
    m = hir.Module("producer_consumer", targets=["sm_70", "sm_80", "sm_90"])
    f32p = hir.ptr("global", hir.f32)
    with m.kernel("stream", [f32p, f32p, hir.u32], max_threads=THREADS) as b:
        x, out, tiles = b.params
        t = b.thread_idx()
        buf = b.shared_alloc(hir.f32, 2 * HALF, align=128)
        base = b.mul(b.block_idx(), tiles)
        producer = b.lt(t, HALF)
        lane = b.select(producer, t, b.sub(t, HALF))
        with b.loop(0, tiles, 2, type=hir.u32) as lp:
            for s in range(2):
                tile = b.add(b.add(base, lp.index), s)
                slot = b.ptr_add(buf, b.add(lane, s * HALF))
                with b.if_(producer):
                    with b.if_(b.ge(lp.index, 2)):
                        b.named_barrier_sync(3 + s, THREADS)
                    v = b.load(b.ptr_add(x, b.add(b.mul(tile, HALF), lane)))
                    b.store(slot, v)
                    b.named_barrier_arrive(1 + s, THREADS)
                with b.if_(b.ge(t, HALF)):
                    b.named_barrier_sync(1 + s, THREADS)
                    mirror = b.ptr_add(buf, b.add(b.sub(HALF - 1, lane), s * HALF))
                    y = b.fma(b.load(mirror), 2.0, 1.0)
                    b.store(b.ptr_add(out, b.add(b.mul(tile, HALF), lane)), y)
                    with b.if_(b.lt(b.add(lp.index, 2), tiles)):
                        b.named_barrier_arrive(3 + s, THREADS)
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
