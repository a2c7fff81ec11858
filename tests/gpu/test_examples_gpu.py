"""Every example kernel (examples/*.zir) compiled by zyntax for this GPU,
loaded with its HIR signature, launched through zyntax.cuda and compared with
numpy on fresh random inputs; plus saxpy end to end from the Python builder."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpu_helpers import EXAMPLES

import zyntax
from zyntax import cuda, hir

pytestmark = pytest.mark.gpu
F32 = np.float32


def load_example(name: str) -> cuda.Module:
    path = EXAMPLES / f"{name}.zir"
    module = hir.parse_zir(path.read_text(), filename=str(path))
    return cuda.load_hir(module)


def test_saxpy_from_python_builder(rng: np.random.Generator) -> None:
    import saxpy  # examples/saxpy.py

    module = saxpy.build()
    ptx = zyntax.compile(module, backend="nvptx", arch=cuda.device_arch())
    k = cuda.load_module(ptx, hir=module).kernel("saxpy")
    n = int(rng.integers(100_000, 1_000_000))
    x = rng.standard_normal(n).astype(F32)
    y = rng.standard_normal(n).astype(F32)
    a = float(rng.uniform(-3, 3))
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    k[(n + 255) // 256, 256](n, a, dx, dy)
    # fma on the GPU vs. two roundings in numpy: compare in float64 with an ulp-scale bound.
    ref = a * x.astype(np.float64) + y.astype(np.float64)
    np.testing.assert_allclose(dy.to_host(), ref, rtol=1e-6, atol=1e-6)


def test_saxpy_zir(rng: np.random.Generator) -> None:
    k = load_example("saxpy").kernel("saxpy")
    n = int(rng.integers(1, 300_000))
    x = rng.standard_normal(n).astype(F32)
    y = rng.standard_normal(n).astype(F32)
    a = float(rng.uniform(-3, 3))
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    k.launch((n + 255) // 256, 256, n, a, dx, dy)
    ref = a * x.astype(np.float64) + y.astype(np.float64)
    np.testing.assert_allclose(dy.to_host(), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("block", [32, 256, 1024])
def test_reduce_sum(rng: np.random.Generator, block: int) -> None:
    k = load_example("reduce_sum").kernel("block_sum")
    n = int(rng.integers(1 << 18, 1 << 21))
    x = rng.random(n, dtype=F32)
    out = cuda.zeros(1, F32)
    k.launch((n + block - 1) // block, block, cuda.to_device(x), out, n)
    ref = x.astype(np.float64).sum()
    # f32 block sums and f32 atomics: relative error grows with the number of blocks.
    np.testing.assert_allclose(out.to_host()[0], ref, rtol=2e-4)


@pytest.mark.parametrize("grid", [1, 7, None])
def test_histogram(dev: Any, rng: np.random.Generator, grid: int | None) -> None:
    k = load_example("histogram").kernel("histogram")
    n = int(rng.integers(1, 3_000_000))
    data = rng.integers(0, 256, n, dtype=np.uint8)
    hist = cuda.zeros(256, np.uint32)
    k.launch(grid or 2 * dev.sm_count, 256, cuda.to_device(data), n, hist)
    np.testing.assert_array_equal(hist.to_host(), np.bincount(data, minlength=256))


def test_mma_tile(rng: np.random.Generator) -> None:
    k = load_example("mma_tile").kernel("mma_16x16x16")
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    c = rng.uniform(-1, 1, (16, 16)).astype(F32)
    d = cuda.zeros((16, 16), F32)
    # B is read column-major: element (k, n) at n * 16 + k.
    b_col = np.ascontiguousarray(b.T)
    k.launch(1, 32, cuda.to_device(a), cuda.to_device(b_col), cuda.to_device(c), d)
    ref = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    # f16 inputs are exact in f32; the f32 accumulation order differs from numpy's.
    np.testing.assert_allclose(d.to_host(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("block", [64, 256])
def test_cp_async_copy(dev: Any, rng: np.random.Generator, block: int) -> None:
    if dev.compute_capability < (8, 0):
        pytest.skip("cp.async needs sm_80")
    k = load_example("cp_async_copy").kernel("cp_async_copy")
    tiles = int(rng.integers(1, 3000))
    n = tiles * block * 4
    src = rng.standard_normal(n).astype(F32)
    dst = cuda.zeros(n, F32)
    grid = min(tiles, 2 * dev.sm_count)
    k.launch(grid, block, cuda.to_device(src), dst, n)
    np.testing.assert_array_equal(dst.to_host(), src)


def test_example_launch_bounds_are_enforced() -> None:
    k = load_example("histogram").kernel("histogram")
    assert k.max_threads == (256, 1, 1)
    with pytest.raises(zyntax.LaunchError, match="launch bounds"):
        k.launch(1, 512, cuda.zeros(4, np.uint8), 4, cuda.zeros(256, np.uint32))
    with pytest.raises(zyntax.LaunchError, match="u8"):
        k.launch(1, 256, cuda.zeros(4, np.uint16), 4, cuda.zeros(256, np.uint32))


def test_ptx_cache_entries_load_with_their_signatures(dev: Any, rng: np.random.Generator) -> None:
    import json

    entries = sorted((EXAMPLES.parent / "ptx_cache").glob("*.json"))
    assert entries, "ptx_cache/ has no entries"
    loaded = 0
    for meta_path in entries:
        meta = json.loads(meta_path.read_text())
        arch = meta["arch"]
        if int(arch[3:5]) > dev.compute_capability[0] * 10 + dev.compute_capability[1]:
            continue
        mod = cuda.load_cached(meta_path)
        for name, launch in meta["launch"].items():
            k = mod.kernel(name)
            assert k.num_params == len(launch["params"])
            if launch.get("max_threads"):
                assert k.max_threads == tuple(launch["max_threads"])
            loaded += 1
        if "histogram" in meta["kernels"]:
            k = mod.kernel("histogram")
            n = int(rng.integers(1, 1_000_000))
            data = rng.integers(0, 256, n, dtype=np.uint8)
            hist = cuda.zeros(256, np.uint32)
            k.launch(dev.sm_count, 256, cuda.to_device(data), n, hist)
            np.testing.assert_array_equal(hist.to_host(), np.bincount(data, minlength=256))
    assert loaded > 0
