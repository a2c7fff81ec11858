"""Clusters, distributed shared memory, programmatic dependent launch and
grid sync (issue 13 items 4-5, issue 12 item 6) on the interpreter: the
cluster examples against numpy on fresh random data, the special registers,
DSMEM atomics and remote mbarrier arrivals, the grid-synchronised reduction;
each misuse is a typed error; the PTX passes ptxas. The device twin is
tests/python/gpu/test_cluster_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp, lang
from zyntax.frontend.errors import KernelTypeError

rng = np.random.default_rng()
G32 = hir.ptr("global", hir.u32)


def test_cluster_exchange_swaps_neighbouring_tiles() -> None:
    import cluster_exchange

    m = cluster_exchange.build()
    block = int(rng.choice([32, 64, 128, 256]))
    blocks = 2 * int(rng.integers(1, 5))
    x = rng.standard_normal(blocks * block).astype(np.float32)
    out = np.full_like(x, np.nan)
    interp.launch(m, "exchange", blocks, block, x, out)
    want = x.reshape(blocks // 2, 2, block)[:, ::-1, :].reshape(-1)
    np.testing.assert_array_equal(out, want)


def registers_module(declared: tuple[int, int, int] | None) -> hir.Module:
    """`regs(out)`: thread 0 of each block writes its cluster registers to out[block * 10 ...]."""
    m = hir.Module("regs", targets=["sm_90"])
    with m.kernel("regs", [G32], cluster=declared) as b:
        (out,) = b.params
        bid = b.block_idx("x") + b.grid_dim("x") * b.block_idx("y")
        vals = [
            b.cluster_ctarank(),
            b.cluster_nctarank(),
            b.cluster_idx("x"),
            b.cluster_idx("y"),
            b.cluster_dim("x"),
            b.cluster_dim("y"),
            b.cluster_block_idx("x"),
            b.cluster_block_idx("y"),
            b.cluster_grid_dim("x"),
            b.cast(b.is_explicit_cluster(), hir.u32),
        ]
        with b.if_(b.eq(b.thread_idx(), 0)):
            for k, v in enumerate(vals):
                b.store(b.ptr_add(out, bid * 10 + k), v)
        b.ret()
    return m


def expected_registers(grid: tuple[int, int], c: tuple[int, int], explicit: bool) -> np.ndarray:
    rows = []
    for by in range(grid[1]):
        for bx in range(grid[0]):
            cx, cy = bx % c[0], by % c[1]
            rows.append(
                [
                    cx + c[0] * cy,
                    c[0] * c[1],
                    bx // c[0],
                    by // c[1],
                    c[0],
                    c[1],
                    cx,
                    cy,
                    grid[0] // c[0],
                    int(explicit),
                ]
            )
    return np.array(rows, np.uint32).reshape(-1)


@pytest.mark.parametrize("how", ["declared", "launch", "none"])
def test_cluster_special_registers(how: str) -> None:
    c = (int(rng.choice([1, 2, 4])), int(rng.choice([1, 2])))
    grid = (c[0] * int(rng.integers(1, 3)), c[1] * int(rng.integers(1, 3)))
    m = registers_module((c[0], c[1], 1) if how == "declared" else None)
    out = np.full(grid[0] * grid[1] * 10, 0xDEADBEEF, np.uint32)
    cluster = (c[0], c[1], 1) if how == "launch" else None
    interp.launch(m, "regs", (grid[0], grid[1]), 32, out, cluster=cluster)
    if how == "none":
        c = (1, 1)
    np.testing.assert_array_equal(out, expected_registers(grid, c, how != "none"))


def dsmem_atomic_module() -> hir.Module:
    """`count(x, out)`: every thread of the cluster adds x[i] into a counter in
    the shared memory of the cluster's block 0 (DSMEM atomics); block 0 writes it."""
    m = hir.Module("dsmem", targets=["sm_90"])
    with m.kernel("count", [G32, G32]) as b:
        x, out = b.params
        counter = b.shared_alloc(hir.u32, 1)
        tid = b.thread_idx()
        with b.if_(b.eq(tid, 0)):
            b.store(counter, 0)
        b.cluster_sync()
        i = b.block_idx() * b.block_dim() + tid
        b.atomic_add(b.mapa(counter, 0), b.load(b.ptr_add(x, i)))
        b.cluster_sync()
        with b.if_(b.eq(tid, 0) & b.eq(b.cluster_ctarank(), 0)):
            b.store(b.ptr_add(out, b.cluster_idx()), b.load(counter))
        b.ret()
    return m


def test_dsmem_atomics_sum_into_block_zero() -> None:
    c, clusters, block = int(rng.choice([2, 4, 8])), int(rng.integers(1, 4)), 64
    x = rng.integers(0, 1000, c * clusters * block, dtype=np.uint32)
    out = np.full(clusters, 0xDEADBEEF, np.uint32)
    interp.launch(dsmem_atomic_module(), "count", c * clusters, block, x, out, cluster=c)
    np.testing.assert_array_equal(out, x.reshape(clusters, -1).sum(axis=1, dtype=np.uint32))


def remote_arrive_module() -> hir.Module:
    """`gather(x, out)`: block 0 of the cluster waits on its mbarrier, which
    thread 0 of every other block arrives on remotely after writing its value
    into block 0's shared memory; block 0 then writes the gathered values."""
    m = hir.Module("remote", targets=["sm_90"])
    with m.kernel("gather", [G32, G32]) as b:
        x, out = b.params
        bar = b.shared_alloc(hir.u64, 1)
        slots = b.shared_alloc(hir.u32, 16)
        rank, n = b.cluster_ctarank(), b.cluster_nctarank()
        first = b.eq(b.thread_idx(), 0)
        with b.if_(first & b.eq(rank, 0)):
            b.mbarrier_init(bar, n - 1)
            b.fence_mbarrier_init()
        b.cluster_sync()  # the barrier is initialised before anyone arrives
        with b.if_(first & b.ne(rank, 0)):
            b.store(b.mapa(b.ptr_add(slots, rank), 0), b.load(b.ptr_add(x, b.block_idx())))
            b.mbarrier_arrive_cluster(b.mapa(bar, 0))
        with b.if_(first & b.eq(rank, 0)):
            spin, done = b.block(), b.block()
            b.jump(spin)
            b.switch_to(spin)
            b.br(b.mbarrier_try_wait_parity(bar, 0, 1000), done, spin)
            b.switch_to(done)
            with b.for_range(1, n, type=hir.u32) as k:
                b.store(b.ptr_add(out, b.block_idx() + k), b.load(b.ptr_add(slots, k)))
        b.cluster_sync()  # block 0's shared memory outlives the remote writes
        b.ret()
    return m


def test_remote_mbarrier_arrive_gathers_into_block_zero() -> None:
    c = int(rng.choice([2, 4, 8]))
    grid = c * int(rng.integers(1, 3))
    x = rng.integers(0, 2**32, grid, dtype=np.uint64).astype(np.uint32)
    out = np.full(grid, 0xDEADBEEF, np.uint32)
    interp.launch(remote_arrive_module(), "gather", grid, 32, x, out, cluster=c)
    want = x.copy()
    want[::c] = 0xDEADBEEF  # rank 0's own slot is never written
    np.testing.assert_array_equal(out, want)


def test_grid_reduce_on_interpreter() -> None:
    import grid_reduce

    m = grid_reduce.build()
    block = int(rng.choice([32, 64, 128]))
    blocks = int(rng.integers(1, 9))
    n = int(rng.integers(1, 5000))
    x = rng.standard_normal(n).astype(np.float32)
    partial = np.full(blocks, np.nan, np.float32)
    out = np.full(1, np.nan, np.float32)
    interp.launch(m, "grid_reduce", blocks, block, x, partial, out, n)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-4, atol=1e-3)


def test_griddepcontrol_is_ordered_after_earlier_launches() -> None:
    """Launches run one after another on the interpreter: `griddepcontrol.wait`
    has nothing to wait for and the dependent sees the producer's writes."""
    m = hir.Module("pdl", targets=["sm_90"])
    with m.kernel("produce", [G32]) as b:
        b.store(b.ptr_add(b.params[0], b.thread_idx()), b.thread_idx() * 3)
        b.griddep_launch_dependents()
        b.ret()
    with m.kernel("consume", [G32, G32]) as b:
        src, dst = b.params
        b.griddep_wait()
        t = b.thread_idx()
        b.store(b.ptr_add(dst, t), b.load(b.ptr_add(src, t)) + 1)
        b.ret()
    a = np.full(64, 0xDEADBEEF, np.uint32)
    out = np.full(64, 0xDEADBEEF, np.uint32)
    interp.launch(m, "produce", 1, 64, a)
    interp.launch(m, "consume", 1, 64, a, out)
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.uint32) * 3 + 1)


def multicast_module(c: int, declared: bool = True) -> hir.Module:
    """`gather(tmap, out)`: block r of a cluster of `c` loads rows 4r..4r+3
    of the tensor (an 8-column f32 box) with TMA multicast into the same
    offset of every block's shared memory; each block waits for all c boxes
    on its own barrier and writes its shared copy to its slice of out."""
    m = hir.Module("multicast", targets=["sm_90a"])
    params = [hir.tensormap, hir.ptr("global", hir.f32)]
    with m.kernel("gather", params, cluster=(c, 1, 1) if declared else None) as b:
        tmap, out = b.params
        smem = b.shared_alloc(hir.f32, 32 * c, align=128)
        bar = b.shared_alloc(hir.u64, 1)
        rank, tid = b.cluster_ctarank(), b.thread_idx()
        with b.if_(b.eq(tid, 0)):
            b.mbarrier_init(bar, 1)
            b.fence_mbarrier_init()
        b.cluster_sync()  # every block's barrier is initialised before the copies land
        with b.if_(b.eq(tid, 0)):
            b.mbarrier_arrive_expect_tx(bar, 128 * c)
            dst = b.ptr_add(smem, rank * 32)
            mask = b.const((1 << c) - 1, hir.u16)
            b.tma_load(dst, tmap, [0, b.cast(rank * 4, hir.i32)], bar, multicast=mask)
        spin, done = b.block(), b.block()
        b.jump(spin)
        b.switch_to(spin)
        b.br(b.mbarrier_try_wait_parity(bar, 0), done, spin)
        b.switch_to(done)
        with b.for_range(tid, 32 * c, b.block_dim(), type=hir.u32) as i:
            b.store(b.ptr_add(out, b.block_idx() * (32 * c) + i), b.load(b.ptr_add(smem, i)))
        b.cluster_sync()
        b.ret()
    return m


@pytest.mark.parametrize("c", [1, 2, 4])
def test_tma_multicast_fills_every_block_of_the_cluster(c: int) -> None:
    clusters = int(rng.integers(1, 3))
    x = rng.standard_normal((4 * c, 8)).astype(np.float32)
    out = np.full(clusters * c * 32 * c, np.nan, np.float32)
    tmap = interp.TensorMap.tiled(x, (8, 4))
    interp.launch(multicast_module(c), "gather", clusters * c, 64, tmap, out)
    np.testing.assert_array_equal(out, np.tile(x.ravel(), clusters * c))


def test_tma_multicast_mask_outside_the_cluster_traps() -> None:
    x = rng.standard_normal((8, 8)).astype(np.float32)
    out = np.zeros(64 * 4, np.float32)
    tmap = interp.TensorMap.tiled(x, (8, 4))
    # the mask names 2 blocks, but the launch has no clusters
    m = multicast_module(2, declared=False)
    with pytest.raises(zyntax.TrapError, match="rank 1 is outside the cluster of 1 blocks"):
        interp.launch(m, "gather", 4, 32, tmap, out)


def test_zir_round_trip_and_ptxas() -> None:
    import cluster_exchange

    for m in (cluster_exchange.build(), remote_arrive_module(), dsmem_atomic_module()):
        text = m.to_zir()
        assert hir.parse_zir(text) == m
        ptx = zyntax.compile(m, backend="nvptx", arch="sm_90")
        zyntax.validate_ptx(ptx, arch="sm_90")
    text = cluster_exchange.build().to_zir()
    for s in ("cluster(2, 1, 1)", "cluster_barrier.arrive", "cluster_barrier.wait", "mapa"):
        assert s in text
    ptx = zyntax.compile(cluster_exchange.build(), backend="nvptx", arch="sm_90")
    assert ".reqnctapercluster 2, 1, 1" in ptx and "mapa.u64" in ptx
    mc = multicast_module(2)
    assert hir.parse_zir(mc.to_zir()) == mc
    ptx = zyntax.compile(mc, backend="nvptx", arch="sm_90a")
    assert ".multicast::cluster" in ptx
    zyntax.validate_ptx(ptx, arch="sm_90a")


# ---------------------------------------------------------------- bad input


def test_grid_not_a_whole_number_of_clusters() -> None:
    m = registers_module(None)
    out = np.zeros(30, np.uint32)
    with pytest.raises(zyntax.LaunchError, match=r"not a whole number of clusters"):
        interp.launch(m, "regs", 3, 32, out, cluster=2)


def test_cluster_too_large_and_mismatched() -> None:
    out = np.zeros(400, np.uint32)
    with pytest.raises(zyntax.LaunchError, match=r"a cluster has 1..=16"):
        interp.launch(registers_module(None), "regs", 32, 32, out, cluster=32)
    with pytest.raises(zyntax.LaunchError, match=r"differs from the kernel's declared cluster"):
        interp.launch(registers_module((2, 1, 1)), "regs", 4, 32, out, cluster=4)
    with pytest.raises(zyntax.ArgumentError, match="cluster"):
        interp.launch(registers_module(None), "regs", 4, 32, out, cluster=0)


def test_cluster_metadata_is_checked_by_the_verifier() -> None:
    m = hir.Module("big", targets=["sm_90"])
    with m.kernel("k", [], cluster=(4, 4, 2)) as b:
        b.ret()
    with pytest.raises(zyntax.VerifyError, match=r"at most 16 blocks per cluster"):
        m.verify()
    old = hir.Module("old", targets=["sm_80"])
    with old.kernel("k", [], cluster=2) as b:
        b.ret()
    with pytest.raises(zyntax.VerifyError, match=r"cluster\(2, 1, 1\) needs sm_90"):
        old.verify()


def test_cluster_ops_are_gated_by_name() -> None:
    m = hir.Module("old", targets=["sm_80"])
    with m.kernel("k", [G32]) as b:
        b.store(b.params[0], b.cluster_ctarank())
        b.ret()
    with pytest.raises(zyntax.VerifyError, match="thread block clusters needs sm_90"):
        m.verify()
    m = hir.Module("old", targets=["sm_80"])
    with m.kernel("k", []) as b:
        b.griddep_wait()
        b.ret()
    with pytest.raises(zyntax.VerifyError, match="griddepcontrol needs sm_90"):
        m.verify()


def test_mapa_needs_a_shared_pointer() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", [G32]) as b:
        b.mapa(b.params[0], 1)
        b.ret()
    with pytest.raises(zyntax.VerifyError, match=r"`mapa` maps a pointer to shared memory"):
        m.verify()


def test_mapa_rank_outside_the_cluster_traps() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", [G32]) as b:
        buf = b.shared_alloc(hir.u32, 1)
        b.store(b.mapa(buf, 2), 1)
        b.ret()
    with pytest.raises(zyntax.TrapError, match=r"rank 2 is outside the cluster of 2 blocks"):
        interp.launch(m, "k", 2, 1, np.zeros(1, np.uint32), cluster=2)


def test_cluster_wait_without_arrive_traps() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", []) as b:
        b.cluster_wait()
        b.ret()
    with pytest.raises(
        zyntax.TrapError, match=r"cluster_barrier\.wait without a cluster_barrier\.arrive"
    ):
        interp.launch(m, "k", 2, 32, cluster=2)


def test_cluster_barrier_some_threads_never_arrive_deadlocks() -> None:
    """Half the threads wait at the cluster barrier, the others at a block
    barrier: neither completes (threads that exit would not count)."""
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", []) as b:
        with b.if_(b.thread_idx() < 16):
            b.cluster_sync()
        b.barrier()
        b.ret()
    with pytest.raises(zyntax.TrapError, match=r"cluster_barrier\.wait"):
        interp.launch(m, "k", 2, 32, cluster=2)


def test_grid_sync_with_an_exited_thread_traps() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", []) as b:
        with b.if_(b.ne(b.block_idx(), 1)):
            b.grid_sync()
        b.ret()
    with pytest.raises(zyntax.TrapError, match="every thread of the grid must reach grid_sync"):
        interp.launch(m, "k", 3, 32)


# ---------------------------------------------------------------- zyntax.lang


@zyntax.kernel(cluster=2)
def lang_exchange(x: zyntax.f32[1], out: zyntax.f32[1]) -> None:
    """`cluster_exchange` written in zyntax.lang."""
    tid = lang.thread_idx.x
    i = lang.block_idx.x * lang.block_dim.x + tid
    tile = lang.shared.array(256, zyntax.f32)
    tile[tid] = x[i]
    lang.cluster_sync()
    out[i] = lang.dsmem_load(tile, tid, lang.cluster_ctarank() ^ 1)
    lang.cluster_sync()


@zyntax.kernel(cooperative=True)
def lang_grid_sum(x: zyntax.u32[1], partial: zyntax.u32[1], out: zyntax.u32[1]) -> None:
    """Every block adds its slice into partial[block]; after grid_sync block 0 sums them."""
    tid = lang.thread_idx.x
    b = lang.block_idx.x
    lang.atomic.add(partial, b, x[b * lang.block_dim.x + tid])
    lang.grid_sync()
    if b == 0 and tid == 0:
        s = zyntax.u32(0)
        for k in range(lang.grid_dim.x):
            s += partial[k]
        out[0] = s
    lang.griddepcontrol_launch_dependents()


def test_lang_cluster_exchange_and_grid_sync_on_interpreter() -> None:
    blocks, block = 2 * int(rng.integers(1, 4)), 64
    x = rng.standard_normal(blocks * block).astype(np.float32)
    out = np.full_like(x, np.nan)
    lang_exchange.run_cpu(x, out, grid=blocks, block=block)
    np.testing.assert_array_equal(out, x.reshape(-1, 2, block)[:, ::-1, :].reshape(-1))
    y = rng.integers(0, 1000, blocks * block, dtype=np.uint32)
    partial = np.zeros(blocks, np.uint32)
    total = np.full(1, 0xDEADBEEF, np.uint32)
    lang_grid_sum.run_cpu(y, partial, total, grid=blocks, block=block)
    assert total[0] == y.sum(dtype=np.uint32)


def test_lang_dsmem_needs_a_shared_array() -> None:
    @zyntax.kernel
    def bad(x: zyntax.f32[1]) -> None:
        x[0] = lang.dsmem_load(x, 0, 1)

    with pytest.raises(KernelTypeError, match=r"dsmem_load needs a shared array"):
        bad.run_cpu(np.zeros(1, np.float32), grid=2, block=1)


def test_aot_manifest_records_cluster_and_grid_sync(tmp_path: object) -> None:
    """An AOT bundle's manifest carries the declared cluster and whether the
    kernel needs a cooperative launch, so a bundle loader checks launches too."""
    import json
    from pathlib import Path

    import cluster_exchange
    import grid_reduce
    from zyntax import aot

    assert isinstance(tmp_path, Path)
    r = aot.build_bundle(cluster_exchange.build(), ["sm_90"], tmp_path / "c.cubin", emit="cubin")
    k = json.loads(r.manifest.read_text())["kernels"]["exchange"]
    assert k["cluster_dims"] == [2, 1, 1] and k["grid_sync"] is False
    r = aot.build_bundle(grid_reduce.build(), ["sm_80"], tmp_path / "g.cubin", emit="cubin")
    k = json.loads(r.manifest.read_text())["kernels"]["grid_reduce"]
    assert k["cluster_dims"] is None and k["grid_sync"] is True
