"""Clusters, DSMEM, programmatic dependent launch and grid sync on the device,
against the interpreter and numpy on fresh random data (the CPU twins are in
tests/python/test_cluster.py). Skipped without an NVIDIA GPU; the cluster
and PDL tests need sm_90 (H100/H200)."""

from __future__ import annotations

import numpy as np
import pytest

import test_cluster as cpu
import zyntax
from zyntax import cuda, interp

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def need_sm90() -> None:
    if cuda.device_arch() not in ("sm_90", "sm_90a"):
        pytest.skip("needs sm_90")


@pytest.mark.parametrize("rounds", range(3))
def test_cluster_exchange_on_device(rounds: int) -> None:
    import cluster_exchange

    need_sm90()
    m = cluster_exchange.build()
    block = int(rng.choice([64, 128, 256]))
    blocks = 2 * int(rng.integers(1, 64))
    x = rng.standard_normal(blocks * block).astype(np.float32)
    want = np.full_like(x, np.nan)
    interp.launch(m, "exchange", blocks, block, x, want)
    k = cuda.load_hir(m, arch="sm_90").kernel("exchange")
    out = cuda.to_device(np.full_like(x, np.nan))
    k.launch(blocks, block, cuda.to_device(x), out)
    np.testing.assert_array_equal(out.to_host(), want)
    np.testing.assert_array_equal(want, x.reshape(-1, 2, block)[:, ::-1, :].reshape(-1))


@pytest.mark.parametrize("how", ["declared", "launch"])
def test_cluster_ranks_on_device(how: str) -> None:
    need_sm90()
    c = (int(rng.choice([1, 2, 4])), int(rng.choice([1, 2])))
    grid = (c[0] * int(rng.integers(1, 4)), c[1] * int(rng.integers(1, 4)))
    m = cpu.registers_module((c[0], c[1], 1) if how == "declared" else None)
    k = cuda.load_hir(m, arch="sm_90").kernel("regs")
    out = cuda.to_device(np.full(grid[0] * grid[1] * 10, 0xDEADBEEF, np.uint32))
    cluster = (c[0], c[1], 1) if how == "launch" else None
    k.launch((grid[0], grid[1]), 32, out, cluster=cluster)
    np.testing.assert_array_equal(out.to_host(), cpu.expected_registers(grid, c, True))


def test_dsmem_atomics_and_remote_arrive_on_device() -> None:
    need_sm90()
    c, clusters, block = int(rng.choice([2, 4, 8])), int(rng.integers(1, 32)), 64
    x = rng.integers(0, 1000, c * clusters * block, dtype=np.uint32)
    k = cuda.load_hir(cpu.dsmem_atomic_module(), arch="sm_90").kernel("count")
    out = cuda.to_device(np.full(clusters, 0xDEADBEEF, np.uint32))
    k.launch(c * clusters, block, cuda.to_device(x), out, cluster=c)
    np.testing.assert_array_equal(
        out.to_host(), x.reshape(clusters, -1).sum(axis=1, dtype=np.uint32)
    )
    grid = c * clusters
    y = rng.integers(0, 2**32, grid, dtype=np.uint64).astype(np.uint32)
    want = np.full(grid, 0xDEADBEEF, np.uint32)
    m = cpu.remote_arrive_module()
    interp.launch(m, "gather", grid, 32, y, want, cluster=c)
    g = cuda.load_hir(m, arch="sm_90").kernel("gather")
    got = cuda.to_device(np.full(grid, 0xDEADBEEF, np.uint32))
    g.launch(grid, 32, cuda.to_device(y), got, cluster=c)
    np.testing.assert_array_equal(got.to_host(), want)


def test_pdl_launch_of_two_kernels() -> None:
    """The consumer is launched with `pdl=True` right behind the producer on
    one stream; `griddepcontrol.wait` makes it see every producer write."""
    need_sm90()
    from zyntax import hir

    m = hir.Module("pdl", targets=["sm_90"])
    g = hir.ptr("global", hir.u32)
    with m.kernel("produce", [g, g, hir.u32]) as b:
        x, a, n = b.params
        i = b.block_idx() * b.block_dim() + b.thread_idx()
        with b.if_(i < n):
            b.store(b.ptr_add(a, i), b.load(b.ptr_add(x, i)) * 3)
        b.griddep_launch_dependents()
        b.ret()
    with m.kernel("consume", [g, g, hir.u32]) as b:
        a, out, n = b.params
        b.griddep_wait()
        i = b.block_idx() * b.block_dim() + b.thread_idx()
        with b.if_(i < n):
            b.store(b.ptr_add(out, i), b.load(b.ptr_add(a, i)) + 1)
        b.ret()
    mod = cuda.load_hir(m, arch="sm_90")
    n = int(rng.integers(1 << 16, 1 << 20))
    x = rng.integers(0, 2**30, n, dtype=np.uint32)
    dx, a = cuda.to_device(x), cuda.to_device(np.full(n, 0xDEADBEEF, np.uint32))
    out = cuda.to_device(np.full(n, 0xDEADBEEF, np.uint32))
    s = cuda.Stream()
    grid = (n + 255) // 256
    for _ in range(3):
        mod.kernel("produce").launch(grid, 256, dx, a, n, stream=s)
        mod.kernel("consume").launch(grid, 256, a, out, n, stream=s, pdl=True)
    s.synchronize()
    np.testing.assert_array_equal(out.to_host(), x * np.uint32(3) + np.uint32(1))


@pytest.mark.parametrize("rounds", range(3))
def test_grid_reduce_on_device(rounds: int) -> None:
    import grid_reduce

    m = grid_reduce.build()
    k = cuda.load_hir(m).kernel("grid_reduce")
    block = int(rng.choice([128, 256, 512]))
    blocks = int(rng.integers(1, 2 * cuda.Device(0).sm_count))
    n = int(rng.integers(1, 1 << 22))
    x = rng.standard_normal(n).astype(np.float32)
    out = cuda.to_device(np.full(1, np.nan, np.float32))
    partial = cuda.to_device(np.full(blocks, np.nan, np.float32))
    for _ in range(2):  # the grid-sync counter is reused across launches
        k.launch(blocks, block, cuda.to_device(x), partial, out, n, cooperative=True)
        got = out.to_host()[0]
        np.testing.assert_allclose(got, x.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    small = rng.standard_normal(3000).astype(np.float32)
    want = np.full(1, np.nan, np.float32)
    interp.launch(m, "grid_reduce", 4, 128, small, np.zeros(4, np.float32), want, 3000)
    k.launch(4, 128, cuda.to_device(small), partial, out, 3000, cooperative=True)
    np.testing.assert_allclose(out.to_host()[0], want[0], rtol=1e-6, atol=1e-5)


def test_cooperative_grid_too_large_is_a_typed_error() -> None:
    import grid_reduce

    k = cuda.load_hir(grid_reduce.build()).kernel("grid_reduce")
    x = cuda.to_device(np.ones(1024, np.float32))
    p = cuda.to_device(np.zeros(1 << 20, np.float32))
    out = cuda.to_device(np.zeros(1, np.float32))
    too_large = r"cooperative grid of \d+ blocks is too large: at most \d+"
    with pytest.raises(zyntax.LaunchError, match=too_large):
        k.launch(1 << 20, 1024, x, p, out, 1024, cooperative=True)
    with pytest.raises(zyntax.LaunchError, match="grid_sync: launch it with cooperative=True"):
        k.launch(2, 128, x, p, out, 1024)


@pytest.mark.parametrize("c", [2, 4])
def test_tma_multicast_on_device(c: int) -> None:
    """Each block's box lands in every block of its cluster (the CPU twin:
    test_cluster.test_tma_multicast_fills_every_block_of_the_cluster)."""
    need_sm90()
    clusters = int(rng.integers(1, 9))
    x = rng.standard_normal((4 * c, 8)).astype(np.float32)
    out = cuda.to_device(np.full(clusters * c * 32 * c, np.nan, np.float32))
    tmap = cuda.TensorMap.tiled(cuda.to_device(x), (8, 4))
    k = cuda.load_hir(cpu.multicast_module(c), arch="sm_90a").kernel("gather")
    assert k.max_active_clusters(64, (c, 1, 1)) >= 1
    k.launch(clusters * c, 64, tmap, out)
    np.testing.assert_array_equal(out.to_host(), np.tile(x.ravel(), clusters * c))


def test_bad_cluster_launches_are_typed_errors() -> None:
    need_sm90()
    m = cpu.registers_module(None)
    k = cuda.load_hir(m, arch="sm_90").kernel("regs")
    out = cuda.to_device(np.zeros(4000, np.uint32))
    not_multiple = r"grid x = 3 is not a multiple of cluster x = 2"
    with pytest.raises(zyntax.LaunchError, match=not_multiple):
        k.launch(3, 32, out, cluster=2)
    with pytest.raises(
        zyntax.LaunchError, match=r"cluster of 32 blocks exceeds the largest cluster"
    ):
        k.launch(32, 32, out, cluster=32)
    d = cuda.load_hir(cpu.registers_module((2, 1, 1)), arch="sm_90").kernel("regs")
    with pytest.raises(zyntax.LaunchError, match=r"differs from the kernel's declared cluster"):
        d.launch(4, 32, out, cluster=4)


def test_lang_cluster_kernels_on_device() -> None:
    """The zyntax.lang twins: `@zyntax.kernel(cluster=2)` with DSMEM, and a
    `@zyntax.kernel(cooperative=True)` with grid_sync, launched on the GPU."""
    need_sm90()
    blocks, block = 2 * int(rng.integers(1, 32)), 128
    x = rng.standard_normal(blocks * block).astype(np.float32)
    out = cuda.to_device(np.full_like(x, np.nan))
    cpu.lang_exchange.launch(cuda.to_device(x), out, grid=blocks, block=block, device="gpu")
    np.testing.assert_array_equal(out.to_host(), x.reshape(-1, 2, block)[:, ::-1, :].reshape(-1))
    y = rng.integers(0, 1000, blocks * block, dtype=np.uint32)
    partial = cuda.to_device(np.zeros(blocks, np.uint32))
    total = cuda.to_device(np.full(1, 0xDEADBEEF, np.uint32))
    cpu.lang_grid_sum.launch(
        cuda.to_device(y), partial, total, grid=blocks, block=block, device="gpu"
    )
    assert total.to_host()[0] == y.sum(dtype=np.uint32)
