"""Two blocks of a cluster swap their tiles through distributed shared memory.

Kernel ``exchange(x, out)`` is declared with clusters of 2 blocks (sm_90).
Each block copies its ``block_dim`` elements of ``x`` into its own shared
memory; after a cluster barrier it reads the *other* block's shared copy
through ``mapa`` (DSMEM) and writes it to its own slice of ``out``, so
``out`` is ``x`` with each pair of neighbouring tiles swapped. A second
cluster barrier keeps each block's shared memory alive until its partner
has read it. Run it to print the .zir.
"""

from zyntax import hir

TILE = 256  # most threads per block (one element each)


def build() -> hir.Module:
    m = hir.Module("cluster_exchange", targets=["sm_90"])
    gptr = hir.ptr("global", hir.f32)
    with m.kernel("exchange", [gptr, gptr], max_threads=TILE, cluster=(2, 1, 1)) as b:
        x, out = b.params
        tile = b.shared_alloc(hir.f32, TILE)
        tid = b.thread_idx()
        i = b.block_idx() * b.block_dim() + tid
        mine = b.ptr_add(tile, tid)
        b.store(mine, b.load(b.ptr_add(x, i)))
        b.cluster_sync()  # both tiles are written
        partner = b.cluster_ctarank() ^ 1
        theirs = b.mapa(mine, partner)  # ptr<shared_cluster, f32>
        b.store(b.ptr_add(out, i), b.load(theirs))
        b.cluster_sync()  # the partner has read our tile: our shared memory may go
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
