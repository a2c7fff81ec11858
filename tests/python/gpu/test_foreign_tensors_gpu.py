"""@zyntax.kernel launches take other libraries' GPU tensors zero-copy
(``__cuda_array_interface__`` or DLPack): dtype, shape and strides come from
the object, its stream is respected, and host tensors are refused by name.
Skipped without an NVIDIA GPU; the torch/cupy cases skip when those are missing."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import lang

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
F32 = zyntax.f32


def _peer(name: str) -> Any:
    try:
        mod = importlib.import_module(name)
    except Exception:
        pytest.skip(f"{name} is not installed")
    if name == "torch" and not mod.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return mod


@zyntax.kernel
def axpy2d(a: F32, x: zyntax.Array[F32, 2], y: zyntax.Array[F32, 2], out: zyntax.Array[F32, 2]):
    i = lang.block_idx.y * lang.block_dim.y + lang.thread_idx.y
    j = lang.block_idx.x * lang.block_dim.x + lang.thread_idx.x
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a * x[i, j] + y[i, j]


def _launch(x: Any, y: Any, out: Any, rows: int, cols: int, a: float) -> None:
    axpy2d[((cols + 15) // 16, (rows + 15) // 16), (16, 16)](a, x, y, out)


class _DlpackOnly:
    """Exposes a tensor through DLPack alone (as JAX arrays do)."""

    def __init__(self, t: Any) -> None:
        self._t = t

    def __dlpack__(self, **kw: Any) -> Any:
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._t.__dlpack_device__()


def test_torch_tensors_cuda_array_interface() -> None:
    torch = _peer("torch")
    rows, cols = 300, 517
    x = torch.rand(rows, cols, device="cuda")
    y = torch.rand(rows, cols, device="cuda")
    out = torch.full((rows, cols), float("nan"), device="cuda")
    a = float(rng.random())
    _launch(x, y, out, rows, cols, a)
    torch.cuda.synchronize()
    ref = a * x.double().cpu().numpy() + y.double().cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_torch_non_contiguous_views_use_their_strides() -> None:
    torch = _peer("torch")
    rows, cols = 257, 130
    base = torch.rand(cols, rows, device="cuda")
    x = base.t()  # a transposed view: strides (1, rows)
    y = torch.rand(rows, cols, device="cuda")
    out = torch.full((rows, cols), float("nan"), device="cuda")
    _launch(x, y, out, rows, cols, 2.0)
    torch.cuda.synchronize()
    ref = 2.0 * x.double().cpu().numpy() + y.double().cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_dlpack_only_objects() -> None:
    torch = _peer("torch")
    rows, cols = 64, 1000
    x, y = torch.rand(rows, cols, device="cuda"), torch.rand(rows, cols, device="cuda")
    out = torch.full((rows, cols), float("nan"), device="cuda")
    _launch(_DlpackOnly(x), _DlpackOnly(y), _DlpackOnly(out), rows, cols, -1.5)
    torch.cuda.synchronize()
    ref = -1.5 * x.double().cpu().numpy() + y.double().cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_producer_stream_is_respected() -> None:
    # The inputs are written on a side stream by a long chain of work; the
    # launch must see the final values, not what was there before.
    torch = _peer("torch")
    rows, cols = 1024, 1024
    side = torch.cuda.Stream()
    x = torch.zeros(rows, cols, device="cuda")
    y = torch.rand(rows, cols, device="cuda")
    out = torch.full((rows, cols), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        big = torch.rand(4096, 4096, device="cuda")
        for _ in range(20):
            big = big @ big / 4096.0
        x.copy_(torch.rand(rows, cols, device="cuda") + big[:rows, :cols] * 0)
        _launch(x, y, out, rows, cols, 3.0)
    torch.cuda.synchronize()
    ref = 3.0 * x.double().cpu().numpy() + y.double().cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_cupy_arrays() -> None:
    cp = _peer("cupy")
    rows, cols = 200, 333
    x = cp.asarray(rng.random((rows, cols), dtype=np.float32))
    y = cp.asarray(rng.random((rows, cols), dtype=np.float32))
    out = cp.full((rows, cols), cp.nan, dtype=cp.float32)
    _launch(x, y, out, rows, cols, 0.5)
    cp.cuda.runtime.deviceSynchronize()
    ref = 0.5 * cp.asnumpy(x).astype(np.float64) + cp.asnumpy(y)
    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-6, atol=1e-6)


def test_wrong_dtype_tensor_is_a_typed_error() -> None:
    torch = _peer("torch")
    x = torch.rand(8, 8, device="cuda", dtype=torch.float64)
    y = torch.rand(8, 8, device="cuda")
    with pytest.raises(zyntax.ZyntaxError, match="'x'"):
        _launch(x, y, y, 8, 8, 1.0)


def test_host_torch_tensor_is_refused_by_name() -> None:
    torch = _peer("torch")
    x = torch.rand(8, 8)  # host memory
    y = torch.rand(8, 8, device="cuda")
    with pytest.raises(zyntax.ZyntaxError, match="argument 'x'"):
        _launch(x, y, y, 8, 8, 1.0)
