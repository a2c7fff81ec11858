"""A grid-synchronised two-phase sum: ``out[0] = sum(x)`` in one launch.

Phase 1: each block sums a grid-strided share of ``x`` (warp shuffles, then
shared memory across warps) and writes its sum to ``partial[block]``.
``grid_sync`` waits for every block; phase 2: block 0 sums ``partial`` the
same way and writes ``out[0]``. The kernel must be launched cooperatively
(``cooperative=True``) with a grid that fits on the device at once. Run it
to print the .zir.
"""

from zyntax import hir

WARP = 32


def block_sum(b: hir.FunctionBuilder, v: hir.Value, scratch: hir.Value) -> hir.Value:
    """The sum of `v` over the block, valid in thread 0; `scratch` holds 32 f32."""
    tid = b.thread_idx()
    lane, warp = tid & (WARP - 1), tid >> 5
    for off in (16, 8, 4, 2, 1):
        v = v + b.shfl_down(v, off)
    with b.if_(b.eq(lane, 0)):
        b.store(b.ptr_add(scratch, warp), v)
    b.barrier()
    n_warps = (b.block_dim() + (WARP - 1)) >> 5
    first = b.if_else(tid < n_warps, results=[hir.f32])
    with first as (has, none):
        with has:
            has.yield_(b.load(b.ptr_add(scratch, tid)))
        with none:
            none.yield_(0.0)
    (s,) = first.results
    for off in (16, 8, 4, 2, 1):
        s = s + b.shfl_down(s, off)
    b.barrier()  # scratch may be reused after this
    return s


def build() -> hir.Module:
    m = hir.Module("grid_reduce", targets=["sm_70", "sm_80", "sm_90"])
    gptr = hir.ptr("global", hir.f32)
    with m.kernel("grid_reduce", [gptr, gptr, gptr, hir.u32], max_threads=1024) as b:
        x, partial, out, n = b.params
        scratch = b.shared_alloc(hir.f32, WARP)
        tid, bid = b.thread_idx(), b.block_idx()
        threads = b.grid_dim() * b.block_dim()
        with b.loop(bid * b.block_dim() + tid, n, threads, carry=[b.const(0.0, hir.f32)]) as lp:
            (acc,) = lp.carried
            lp.next(acc + b.load(b.ptr_add(x, lp.index)))
        s = block_sum(b, lp.results[0], scratch)
        with b.if_(b.eq(tid, 0)):
            b.store(b.ptr_add(partial, bid), s)
        b.grid_sync()  # every block's partial sum is written and visible
        with b.if_(b.eq(bid, 0)):
            with b.loop(tid, b.grid_dim(), b.block_dim(), carry=[b.const(0.0, hir.f32)]) as lp2:
                (acc2,) = lp2.carried
                lp2.next(acc2 + b.load(b.ptr_add(partial, lp2.index)))
            total = block_sum(b, lp2.results[0], scratch)
            with b.if_(b.eq(tid, 0)):
                b.store(out, total)
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
