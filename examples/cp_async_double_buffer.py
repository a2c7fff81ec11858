"""Double-buffered ``cp.async`` copy from global to shared memory (sm_80+).

Each block streams ``tiles`` tiles of TILE float4s: while it works on tile t
from one shared buffer, the copy of tile t+1 into the other buffer is in
flight. The work here is a scaled copy to ``out``, which makes the pipeline
easy to check. Run it to print the .zir.
"""

from zyntax import hir

TILE = 128  # float4 elements per tile = threads per block


def build() -> hir.Module:
    m = hir.Module("cp_async_double_buffer", targets=["sm_80", "sm_90"])
    f4 = hir.vec(hir.f32, 4)
    gptr = hir.ptr("global", f4)
    with m.kernel("scale_tiles", [gptr, gptr, hir.u32, hir.f32], max_threads=TILE) as b:
        src, out, tiles, scale = b.params
        buf = b.shared_alloc(f4, 2 * TILE)  # two buffers back to back
        tid = b.thread_idx()
        base = b.block_idx() * tiles * TILE  # first element of this block

        def issue(t: hir.Value) -> None:
            """Start copying tile t into buffer t % 2 (each thread one float4)."""
            dst = b.ptr_add(buf, (t & 1) * TILE + tid)
            b.cp_async(dst, b.ptr_add(src, base + t * TILE + tid), bytes=16, cache="cg")
            b.cp_async_commit()

        with b.if_(tiles > 0):
            issue(b.const(0, hir.u32))
        with b.for_range(0, tiles, 1, type=hir.u32) as t:
            nxt = t + 1
            with b.if_else(nxt < tiles) as (more, last):
                with more:
                    issue(nxt)
                    b.cp_async_wait(1)  # tile t has landed; t+1 may still fly
                with last:
                    b.cp_async_wait(0)
            b.barrier()  # every thread's part of tile t is visible
            v = b.load(b.ptr_add(buf, (t & 1) * TILE + tid))
            scaled = v
            for lane in range(4):
                scaled = b.insert(scaled, b.extract(v, lane) * scale, lane)
            b.store(b.ptr_add(out, base + t * TILE + tid), scaled)
            b.barrier()  # buffer t % 2 is free before tile t+2 is copied into it
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
