"""@zyntax.kernel on the GPU: the CPU suite (tests/python/test_kernel_interp.py)
again, with every ``run_cpu`` launched on the device instead, plus device-only
paths (DeviceArray arguments, streams, tensor cores, cp.async). Skipped
without an NVIDIA GPU (conftest marks everything under tests/python/gpu)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import test_kernel_interp as cpu_suite
import zyntax
from zyntax import lang
from zyntax.frontend.kernel import Kernel

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
F32 = np.float32
F32C = zyntax.Array[zyntax.f32, 1, "C"]  # a contiguous f32 vector


def _on_gpu(self: Kernel, *args: Any, grid: Any, block: Any, shared_mem: int = 0) -> None:
    self.launch(*args, grid=grid, block=block, shared_mem=shared_mem, device="gpu")


CPU_TESTS: list[tuple[str, Callable[[], None]]] = [
    (name, fn)
    for name, fn in inspect.getmembers(cpu_suite, inspect.isfunction)
    if name.startswith("test_")
    and fn.__module__ == cpu_suite.__name__
    and not inspect.signature(fn).parameters  # parametrized ones are run below
]


@pytest.mark.parametrize("test", [fn for _, fn in CPU_TESTS], ids=[n for n, _ in CPU_TESTS])
def test_cpu_suite_on_device(test: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Kernel, "run_cpu", _on_gpu)
    test()


@pytest.mark.parametrize(
    "name", ["vector_add", "transpose", "sgemm", "reduction", "scan", "histogram", "softmax"]
)
def test_example_scripts_on_device(name: str) -> None:
    from zyntax.frontend import pipeline

    assert pipeline.gpu_available()  # so the scripts' kern[grid, block] runs on the GPU
    cpu_suite.test_example_scripts_run(name)


def test_device_arrays_and_launch_syntax() -> None:
    from zyntax import cuda

    m = cpu_suite.example("vector_add")
    n = 5000
    a, b = rng.random(n).astype(F32), rng.random(n).astype(F32)
    da, db, dout = cuda.to_device(a), cuda.to_device(b), cuda.zeros(n, F32)
    m.vector_add[(n + 255) // 256, 256](da, db, dout)
    assert np.array_equal(dout.to_host(), a + b)
    s = cuda.Stream()
    m.vector_add.launch(db, da, dout, grid=(n + 127) // 128, block=128, stream=s)
    s.synchronize()
    assert np.array_equal(dout.to_host(), a + b)


def test_tensor_core_tile() -> None:
    @zyntax.kernel
    def mma16(
        a: zyntax.Array[zyntax.f16, 1],
        b: zyntax.Array[zyntax.f16, 1],
        c: zyntax.Array[zyntax.f32, 1],
    ):
        fa = lang.mma.load_a(a, 16)
        fb = lang.mma.load_b(b, 16)
        acc = lang.mma.fill(0.0)
        acc = lang.mma.mma(fa, fb, acc)
        lang.mma.store(c, acc, 16)

    a = rng.random((16, 16)).astype(np.float16)
    b = rng.random((16, 16)).astype(np.float16)
    c = np.zeros(256, F32)
    mma16[1, 32](a.ravel(), b.ravel(), c)
    assert np.allclose(c.reshape(16, 16), a.astype(F32) @ b.astype(F32), rtol=1e-2, atol=1e-2)
    # The interpreter agrees with the tensor cores.
    c2 = np.zeros(256, F32)
    mma16.run_cpu(a.ravel(), b.ravel(), c2, grid=1, block=32)
    assert np.allclose(c, c2, rtol=1e-3, atol=1e-3)


def test_async_copy() -> None:
    from zyntax.frontend import pipeline

    if pipeline.resolve_arch(None) < "sm_80":
        pytest.skip("cp.async needs sm_80")

    @zyntax.kernel
    def stage(x: zyntax.Array[zyntax.f32, 1], y: zyntax.Array[zyntax.f32, 1]):
        buf = lang.shared.array(128, zyntax.f32)
        t = lang.thread_idx.x
        if t < 32:  # 32 copies of 16 bytes fill the 128 floats
            lang.async_copy(buf, t * 4, x, lang.block_idx.x * 128 + t * 4, 16, "cg")
        lang.async_commit()
        lang.async_wait(0)
        lang.syncthreads()
        y[lang.block_idx.x * 128 + t] = buf[127 - t] * 2.0

    x = rng.random(256).astype(F32)
    y = np.zeros_like(x)
    stage[2, 128](x, y)
    assert np.allclose(y.reshape(2, 128), x.reshape(2, 128)[:, ::-1] * 2)


def test_cache_entries_load_with_cuda_load_cached(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from zyntax import cuda
    from zyntax.frontend import cache

    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))

    @zyntax.kernel(max_threads=128)
    def twice(x: F32C, n: zyntax.i32):
        i = lang.grid(1)
        if i < n:
            x[i] = x[i] * 2.0

    twice.ptx()
    (entry,) = sorted(cache.cache_dir().glob("*.ptx"))
    k = cuda.load_cached(entry).kernel("twice")
    x = rng.random(300).astype(F32)
    d = cuda.to_device(x)
    k.launch(3, 128, d, 300, 1, 300)  # ptr, shape, stride (elements), n
    assert np.allclose(d.to_host(), 2 * x)
