"""zyntax.cuda on a real GPU with hand-written PTX (independent of the
compiler): launches, validation errors, memory, streams, events, graphs and
interop. Skipped without a GPU."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import ptx_kernels
import pytest
from gpu_helpers import EXAMPLES, optional_import

import zyntax
from zyntax import cuda

pytestmark = pytest.mark.gpu
F32 = np.float32


def kernel(name: str, hir: str | None = None) -> cuda.Kernel:
    return cuda.load_module(ptx_kernels.ALL[name], hir=hir).kernel(name)


def saxpy_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    # Positive inputs: no cancellation, so fma vs. mul+add differ by an ulp at most.
    x = rng.random(n, dtype=F32) + F32(0.5)
    y = rng.random(n, dtype=F32) + F32(0.5)
    return x, y, float(rng.uniform(0.5, 2.0))


def saxpy_ref(x: np.ndarray, y: np.ndarray, a: float, times: int = 1) -> np.ndarray:
    out = y.copy()
    for _ in range(times):
        out = (F32(a) * x + out).astype(F32)
    return out


# ---------------------------------------------------------------- device


def test_device_properties(dev: Any) -> None:
    assert cuda.device_count() >= 1
    assert cuda.driver_version()[0] >= 12
    assert dev.name
    major, _minor = dev.compute_capability
    assert major >= 7
    assert dev.arch.startswith("sm_")
    p = dev.properties()
    assert p["sm_count"] == dev.sm_count > 0
    assert p["max_threads_per_block"] >= 1024
    assert p["warp_size"] == 32
    assert p["max_shared_per_block_optin"] >= p["max_shared_per_block"] >= 48 * 1024
    free, total = dev.mem_info()
    assert 0 < free <= total == dev.total_memory
    assert cuda.device_arch(0) in ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")


# ---------------------------------------------------------------- launches


def test_saxpy_ptx_matches_numpy(rng: np.random.Generator) -> None:
    k = kernel("saxpy")
    assert k.param_kinds == ["b32", "f32", "ptr", "ptr"]
    n = int(rng.integers(50_000, 200_000))
    x, y, a = saxpy_inputs(rng, n)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    k.launch((n + 255) // 256, 256, n, a, dx, dy)
    np.testing.assert_allclose(dy.to_host(), saxpy_ref(x, y, a), rtol=2e-7)


def test_launch_syntaxes_and_numpy_scalars(rng: np.random.Generator) -> None:
    k = kernel("saxpy")
    n = 4099
    x, y, a = saxpy_inputs(rng, n)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    grid = (n + 127) // 128
    k[grid, 128](np.uint32(n), np.float32(a), dx, dy)  # numpy scalars
    launcher = k.prepare((grid, 1, 1), [128, 1])
    assert launcher.grid == (grid, 1, 1) and launcher.block == (128, 1, 1)
    launcher(n, a, dx, dy)
    np.testing.assert_allclose(dy.to_host(), saxpy_ref(x, y, a, 2), rtol=1e-6)


def test_three_dimensional_grid_and_block(rng: np.random.Generator) -> None:
    k = kernel("iota3d")
    grid, block = (2, 3, 4), (4, 2, 8)
    total = 2 * 3 * 4 * 4 * 2 * 8
    out = cuda.zeros(total, np.uint64)
    step = int(rng.integers(1, 1 << 20))
    k.launch(grid, block, out, step)
    np.testing.assert_array_equal(out.to_host(), np.arange(total, dtype=np.uint64) * step)


@pytest.mark.parametrize("kib", [1, 47, 96])
def test_dynamic_shared_memory(dev: Any, kib: int) -> None:
    nbytes = kib * 1024
    if nbytes > dev.max_shared_per_block_optin:
        pytest.skip(f"device allows only {dev.max_shared_per_block_optin} bytes per block")
    k = kernel("reverse_smem")
    nwords = nbytes // 4
    out = cuda.zeros(nwords, np.uint32)
    # Above 48 KiB the runtime raises the kernel's dynamic shared memory limit itself.
    k.launch(1, 256, out, nwords, shared_mem=nbytes)
    expect = (np.arange(nwords, dtype=np.uint32) * 3 + 1)[::-1]
    np.testing.assert_array_equal(out.to_host(), expect)


def test_launch_bounds_from_ptx() -> None:
    k = kernel("bounded")
    assert k.max_threads_per_block == 128
    out = cuda.zeros(256, np.uint32)
    with pytest.raises(zyntax.LaunchError, match="128"):
        k.launch(1, 256, out)
    k.launch(1, 128, out)
    np.testing.assert_array_equal(out.to_host()[:128], np.arange(128, dtype=np.uint32))


def test_bad_launches_raise_launch_error_and_context_stays_usable(
    dev: Any, rng: np.random.Generator
) -> None:
    k = kernel("saxpy")
    n = 1000
    x, y, a = saxpy_inputs(rng, n)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    bad: list[tuple[str, Any]] = [
        ("expected 4 argument", lambda: k.launch(4, 256, n, a, dx)),
        ("argument #2", lambda: k.launch(4, 256, n, a, 1.5, dy)),
        ("host array", lambda: k.launch(4, 256, n, a, x, dy)),
        ("does not fit", lambda: k.launch(4, 256, 1 << 40, a, dx, dy)),
        ("argument #0", lambda: k.launch(4, 256, 2.5, a, dx, dy)),
        ("argument #1", lambda: k.launch(4, 256, n, "a", dx, dy)),
        ("block x", lambda: k.launch(1, 2048, n, a, dx, dy)),
        ("threads per block", lambda: k.launch(1, (32, 64), n, a, dx, dy)),
        ("block z", lambda: k.launch(1, (1, 1, 128), n, a, dx, dy)),
        ("grid x", lambda: k.launch(0, 256, n, a, dx, dy)),
        (
            "shared memory",
            lambda: k.launch(4, 256, n, a, dx, dy, shared_mem=dev.max_shared_per_block_optin + 1),
        ),
    ]
    for needle, call in bad:
        with pytest.raises(zyntax.LaunchError, match=needle):
            call()
    # Nothing reached the driver: y is untouched and the context still works.
    np.testing.assert_array_equal(dy.to_host(), y)
    k.launch(4, 256, n, a, dx, dy)
    cuda.synchronize()
    np.testing.assert_allclose(dy.to_host(), saxpy_ref(x, y, a), rtol=2e-7)


def test_hir_signature_checks_element_types_and_launch_bounds(rng: np.random.Generator) -> None:
    zir = (EXAMPLES / "saxpy.zir").read_text()
    k = kernel("saxpy", hir=zir)
    assert k.param_kinds == ["u32", "f32", "ptr<f32>", "ptr<f32>"]
    assert k.max_threads == (256, 1, 1)
    n = 512
    x, y, a = saxpy_inputs(rng, n)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    with pytest.raises(zyntax.LaunchError, match="f64"):
        k.launch(2, 256, n, a, cuda.to_device(x.astype(np.float64)), dy)
    with pytest.raises(zyntax.LaunchError, match="launch bounds"):
        k.launch(1, 512, n, a, dx, dy)
    with pytest.raises(zyntax.LaunchError, match="does not fit u32"):
        k.launch(2, 256, -1, a, dx, dy)
    k.launch(2, 256, n, a, dx, dy)
    np.testing.assert_allclose(dy.to_host(), saxpy_ref(x, y, a), rtol=2e-7)


def test_module_errors_are_cuda_errors() -> None:
    m = cuda.load_module(ptx_kernels.SAXPY)
    with pytest.raises(zyntax.CudaError, match="saxpy") as e:
        m.kernel("no_such_kernel")
    assert e.value.kind == "kernel_not_found"
    bad = ptx_kernels.HEADER + ".visible .entry broken() { this is not ptx; }\n"
    with pytest.raises(zyntax.CudaError) as e:
        cuda.load_module(bad)
    assert e.value.kind == "jit"
    assert e.value.driver_error.startswith("CUDA_ERROR_")
    assert "error" in e.value.log.lower()
    # A failed load leaves the runtime usable.
    assert cuda.load_module(ptx_kernels.EMPTY).kernel("empty").num_params == 0


def test_module_cache_is_keyed_by_content() -> None:
    src = ptx_kernels.EMPTY + f"// {uuid.uuid4()}\n"
    before = cuda.module_cache_len()
    a = cuda.load_module(src)
    b = cuda.load_module(src)
    assert cuda.module_cache_len() == before + 1
    assert a.kernel_names == b.kernel_names == ["empty"]


# ---------------------------------------------------------------- memory


def test_device_array_roundtrip_and_metadata(rng: np.random.Generator) -> None:
    h = rng.standard_normal((37, 129)).astype(np.float64)
    d = cuda.to_device(h)
    assert d.shape == (37, 129) and d.ndim == 2 and len(d) == 37
    assert d.dtype == np.float64 and d.itemsize == 8 and d.nbytes == h.nbytes
    assert d.strides == h.strides
    np.testing.assert_array_equal(d.to_host(), h)
    r = d.reshape((129, 37))
    np.testing.assert_array_equal(r.to_host(), h.reshape(129, 37))
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"] == (d.ptr, False) and cai["typestr"] == "<f8"
    assert d.__dlpack_device__() == (2, 0)
    z = cuda.zeros((5, 7), np.int16)
    np.testing.assert_array_equal(z.to_host(), np.zeros((5, 7), np.int16))
    out = np.empty_like(h)
    d.copy_to_host(out)
    np.testing.assert_array_equal(out, h)
    with pytest.raises(zyntax.ArgumentError, match="destination has"):
        d.copy_to_host(np.empty(3))


def test_dlpack_roundtrip_keeps_memory_alive(rng: np.random.Generator) -> None:
    h = rng.standard_normal((33, 17)).astype(F32)
    d = cuda.to_device(h)
    unconsumed = d.__dlpack__(stream=None)  # freed by the capsule's destructor
    del unconsumed
    d2 = cuda.from_dlpack(d)  # consumes our own capsule
    assert d2.ptr == d.ptr and d2.shape == (33, 17) and d2.dtype == F32
    assert d2.strides == d.strides
    del d  # d2 keeps the block alive through the exported tensor
    np.testing.assert_array_equal(d2.to_host(), h)
    d3 = cuda.from_cuda_array_interface(d2)
    np.testing.assert_array_equal(d3.to_host(), h)
    assert cuda.as_device_array(d3) is d3


def test_pool_reuses_blocks_counts_and_limits(dev: Any) -> None:
    cuda.synchronize()
    s0 = cuda.memory_stats()
    a = cuda.empty(1 << 20, F32)  # 4 MiB, a size class of its own
    s1 = cuda.memory_stats()
    assert s1["in_use_bytes"] - s0["in_use_bytes"] == 4 << 20
    del a
    s2 = cuda.memory_stats()
    assert s2["in_use_bytes"] == s0["in_use_bytes"]
    assert s2["cached_bytes"] >= 4 << 20
    b = cuda.empty(1 << 20, F32)
    s3 = cuda.memory_stats()
    assert s3["cache_hits"] == s2["cache_hits"] + 1
    assert s3["driver_allocs"] == s2["driver_allocs"]
    del b
    cuda.set_memory_limit(s3["in_use_bytes"] + (8 << 20))
    try:
        with pytest.raises(zyntax.CudaError) as e:
            cuda.empty(1 << 24, F32)  # 64 MiB
        assert e.value.kind == "out_of_memory"
        assert "limit" in str(e.value)
        ok = cuda.empty(1 << 20, F32)  # within the limit
        del ok
    finally:
        cuda.set_memory_limit(None)
    cuda.empty_cache()
    assert cuda.memory_stats()["cached_bytes"] == 0
    # Blocks cached for a stream go to the default stream when it is destroyed.
    s = cuda.Stream()
    c = cuda.empty(1 << 20, F32, stream=s)
    del c
    del s
    hits = cuda.memory_stats()["cache_hits"]
    d = cuda.empty(1 << 20, F32)
    assert cuda.memory_stats()["cache_hits"] == hits + 1
    del d


def test_pinned_memory_async_copies(rng: np.random.Generator) -> None:
    n = 1 << 18
    h = cuda.pinned_empty(n, F32)
    assert h.shape == (n,) and h.dtype == F32 and not h.any()
    h[:] = rng.random(n, dtype=F32)
    s = cuda.Stream()
    d = cuda.to_device(h, stream=s, sync=False)
    out = cuda.pinned_empty((n,), F32)
    d.copy_to_host(out, stream=s, sync=False)
    s.synchronize()
    np.testing.assert_array_equal(out, h)


# ---------------------------------------------------------------- streams, events


def test_streams_and_events_order_work(rng: np.random.Generator) -> None:
    k = kernel("saxpy")
    n = 1 << 20
    x, y, a = saxpy_inputs(rng, n)
    s1, s2 = cuda.Stream(), cuda.Stream(non_blocking=True)
    dx = cuda.to_device(x, stream=s1)
    dy = cuda.to_device(y, stream=s1)
    dz = cuda.empty(n, F32, stream=s2)
    start, end = cuda.Event(), cuda.Event()
    start.record(s1)
    launch = k.prepare((n + 255) // 256, 256, stream=s1)
    for _ in range(10):
        launch(n, a, dx, dy)
    end.record(s1)
    s2.wait(end)  # s2 (non-blocking) copies only after the ten launches
    dz.copy_from(dy, stream=s2)
    got = dz.to_host(stream=s2)
    np.testing.assert_allclose(got, saxpy_ref(x, y, a, 10), rtol=1e-5)
    end.synchronize()
    assert end.query() and s1.query()
    assert start.elapsed_ms(end) > 0.0
    e2 = s2.record()
    e2.synchronize()
    with pytest.raises(zyntax.CudaError):
        cuda.Event(timing=False).elapsed_ms(end)


# ---------------------------------------------------------------- graphs


def test_graph_capture_replay_and_update(rng: np.random.Generator) -> None:
    k = kernel("saxpy")
    n = 100_000
    grid = (n + 255) // 256
    x, y, a = saxpy_inputs(rng, n)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    s = cuda.Stream()
    with cuda.capture(s) as cap:
        k.launch(grid, 256, n, a, dx, dy, stream=s)
        k.launch(grid, 256, n, a, dx, dy, stream=s)
    g = cap.graph
    assert g.num_kernel_nodes == 2
    s.synchronize()
    np.testing.assert_array_equal(dy.to_host(), y)  # captured, not run
    ex = g.instantiate()
    for _ in range(3):
        ex.launch(s)
    s.synchronize()
    np.testing.assert_allclose(dy.to_host(), saxpy_ref(x, y, a, 6), rtol=1e-6)

    # Point both nodes at new arrays and a new scalar; the old arrays stay put.
    x2, y2, a2 = saxpy_inputs(rng, n)
    dx2, dy2 = cuda.to_device(x2), cuda.to_device(y2)
    before = dy.to_host()
    ex.set_kernel_args(0, k, n, a2, dx2, dy2)
    ex.set_kernel_args(1, k, n, a2, dx2, dy2)
    ex.launch(s)
    s.synchronize()
    np.testing.assert_allclose(dy2.to_host(), saxpy_ref(x2, y2, a2, 2), rtol=1e-6)
    np.testing.assert_array_equal(dy.to_host(), before)
    with pytest.raises(zyntax.LaunchError):
        ex.set_kernel_args(0, kernel("iota3d"), dy2, 1)
    with pytest.raises(zyntax.LaunchError):
        ex.set_kernel_args(0, k, n, a2, dx2)  # wrong count
    with pytest.raises(zyntax.CudaError):
        ex.set_kernel_args(2, k, n, a2, dx2, dy2)  # no such node


def test_graph_with_copies(rng: np.random.Generator) -> None:
    k = kernel("saxpy")
    n = 65_536
    h = cuda.pinned_empty(n, F32)
    h[:] = rng.random(n, dtype=F32)
    da, db = cuda.empty(n, F32), cuda.empty(n, F32)
    s = cuda.Stream()
    with cuda.capture(s) as cap:
        da.copy_from_host(h, stream=s, sync=False)
        db.copy_from(da, stream=s)
        k.launch(n // 256, 256, n, 2.0, da, db, stream=s)  # db = 2*h + h
    assert cap.graph.num_nodes == 3
    ex = cap.graph.instantiate()
    for _ in range(2):
        h[:] = rng.random(n, dtype=F32)
        ex.launch(s)
        s.synchronize()
        np.testing.assert_allclose(db.to_host(), F32(2.0) * h + h, rtol=2e-7)


# ---------------------------------------------------------------- interop


def test_cupy_interop(rng: np.random.Generator) -> None:
    cp = optional_import("cupy")
    if cp is None:
        pytest.skip("cupy not installed")
    k = kernel("saxpy")
    n = 10_000
    x, y, a = saxpy_inputs(rng, n)
    cx, cy = cp.asarray(x), cp.asarray(y)
    k.launch((n + 255) // 256, 256, n, a, cx, cy)  # __cuda_array_interface__ arguments
    np.testing.assert_allclose(cp.asnumpy(cy), saxpy_ref(x, y, a), rtol=2e-7)
    d = cuda.to_device(x)
    view = cp.asarray(d)  # CuPy reads our __cuda_array_interface__
    view *= 2
    np.testing.assert_allclose(d.to_host(), x * 2)
    via_dlpack = cp.from_dlpack(d)
    assert int(via_dlpack.data.ptr) == d.ptr
    back = cuda.from_dlpack(cx)
    assert back.ptr == cx.data.ptr and back.shape == (n,)
    back2 = cuda.from_cuda_array_interface(cy)
    np.testing.assert_array_equal(back2.to_host(), cp.asnumpy(cy))


def test_torch_interop(rng: np.random.Generator) -> None:
    torch = optional_import("torch")
    if torch is None or not torch.cuda.is_available():
        pytest.skip("torch with CUDA not installed")
    k = kernel("saxpy")
    n = 10_000
    x, y, a = saxpy_inputs(rng, n)
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    k.launch((n + 255) // 256, 256, n, a, tx, ty)
    np.testing.assert_allclose(ty.cpu().numpy(), saxpy_ref(x, y, a), rtol=2e-7)
    with pytest.raises(zyntax.LaunchError, match="host"):
        k.launch(1, 256, n, a, torch.from_numpy(x), ty)
    d = cuda.to_device(x)
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.is_cuda
    t.mul_(3)
    np.testing.assert_allclose(d.to_host(), x * 3)
    d2 = cuda.from_dlpack(ty)
    assert d2.ptr == ty.data_ptr()
    tv = torch.as_tensor(cuda.to_device(y), device="cuda")
    np.testing.assert_array_equal(tv.cpu().numpy(), y)
