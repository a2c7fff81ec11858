"""Block sum reduction: warp shuffles, then shared memory across warps.

Each block (up to 1024 threads) reduces its slice of ``x`` and adds the block's
sum to ``out[0]`` with one device-scope atomic. Run it to print the .zir.
"""

from zyntax import hir

WARP = 32


def warp_sum(b: hir.FunctionBuilder, v: hir.Value) -> hir.Value:
    """Tree reduction inside a warp (unrolled at build time); lane 0 gets the sum."""
    offset = WARP // 2
    while offset > 0:
        v = v + b.shfl_down(v, offset)
        offset //= 2
    return v


def build() -> hir.Module:
    m = hir.Module("reduce_sum", targets=["sm_70", "sm_80", "sm_90"])
    gptr = hir.ptr("global", hir.f32)
    with m.kernel("block_sum", [gptr, gptr, hir.u32], max_threads=1024) as b:
        x, out, n = b.params
        partial = b.shared_alloc(hir.f32, WARP)  # one slot per warp
        tid = b.thread_idx()
        i = b.block_idx() * b.block_dim() + tid
        lane = tid & (WARP - 1)
        warp = tid >> 5

        # Out-of-range threads contribute 0 (the load must not happen for them).
        guarded = b.if_else(i < n, results=[hir.f32])
        with guarded as (in_range, past_end):
            with in_range:
                in_range.yield_(b.load(b.ptr_add(x, i)))
            with past_end:
                past_end.yield_(0.0)
        (v,) = guarded.results

        v = warp_sum(b, v)
        with b.if_(b.eq(lane, 0)):
            b.store(b.ptr_add(partial, warp), v)
        b.barrier()

        # The first warp reduces the per-warp partial sums.
        with b.if_(b.eq(warp, 0)):
            n_warps = (b.block_dim() + (WARP - 1)) >> 5
            first = b.if_else(lane < n_warps, results=[hir.f32])
            with first as (has_partial, no_partial):
                with has_partial:
                    has_partial.yield_(b.load(b.ptr_add(partial, lane)))
                with no_partial:
                    no_partial.yield_(0.0)
            (s,) = first.results
            s = warp_sum(b, s)
            with b.if_(b.eq(lane, 0)):
                b.atomic_add(out, s, scope="device")
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
