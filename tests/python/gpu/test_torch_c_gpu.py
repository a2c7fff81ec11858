"""The native call plans' C path for torch tensors (``_plans.torch_c_enable``,
crates/zyntax-python/src/cuda/torch_c.rs): keys read and outputs made
through libtorch's C functions give the same results, the same plan keys
and the same capture behaviour as the tensors' Python methods."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.gpu


def _torch() -> Any:
    try:
        import torch
    except Exception:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    torch.empty(1, device="cuda")  # CUDA up: the check covers a CUDA tensor too
    return torch


@pytest.fixture(params=[True, False], ids=["c", "methods"])
def c_path(request: Any) -> Iterator[bool]:
    """Each test with the C path on and off; the plans are cleared both ways
    (a plan stored under one path's keys is never found by the other's)."""
    _torch()
    from zyntax import kernels
    from zyntax.kernels import _plans

    on = _plans.torch_c_enable(request.param)
    if request.param:
        assert on, "libtorch's C functions did not pass their check with this PyTorch"
    for f in (kernels.softmax, kernels.layer_norm, kernels.attention):
        f.plans.clear()
    yield on
    _plans.torch_c_enable(True)


def test_results_and_keys(c_path: bool) -> None:
    """Fresh inputs each call, outputs compared with float64: a transposed
    view, a view at an offset (another alignment) and another dtype at a
    freed tensor's address each get their own plan."""
    torch = _torch()
    from zyntax import kernels

    def check(x: Any, tol: float) -> None:
        want = torch.softmax(x.double(), -1)
        for _ in range(2):  # the recording, then the replay
            got = kernels.softmax(x)
            assert type(got) is torch.Tensor and got.device == x.device
            assert got.dtype == x.dtype and got.shape == x.shape and got.is_contiguous()
            assert not got.requires_grad
            torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
        out = torch.full_like(x, float("nan"))
        assert kernels.softmax(x, out=out) is out
        torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)

    x = torch.randn(64, 1024, device="cuda")
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        check(x, 1e-5)
    n = len(kernels.softmax.plans)
    check(x.t(), 1e-5)
    assert len(kernels.softmax.plans) > n
    n = len(kernels.softmax.plans)
    check(x[:, 1:], 1e-5)  # 4 bytes past a 16-byte boundary
    assert len(kernels.softmax.plans) > n
    del x  # its memory goes to the next tensor, of another dtype
    for _ in range(3):
        h = torch.randn(64, 1024, device="cuda", dtype=torch.float16)
        check(h, 1e-2)
    # A CPU tensor after the plans: the full path's typed error.
    from zyntax.errors import ZyntaxError

    with pytest.raises(ZyntaxError):
        kernels.softmax(torch.randn(4, 8))


def test_outputs_are_freed(c_path: bool) -> None:
    """A replayed output holds one reference (no leak: PyTorch frees its
    memory when the program drops it) and is an ordinary tensor."""
    torch = _torch()
    from zyntax import kernels

    x = torch.randn(256, 4096, device="cuda")
    for _ in range(2):
        kernels.softmax(x)
    torch.cuda.synchronize()
    gc.collect()
    base = torch.cuda.memory_allocated()
    y = kernels.softmax(x)
    assert torch.cuda.memory_allocated() == base + y.numel() * 4
    assert y.untyped_storage().nbytes() == y.numel() * 4
    ref = weakref.ref(y)
    y.add_(1.0)  # an ordinary tensor: in-place ops, views
    assert y[1:].data_ptr() == y.data_ptr() + 4 * 4096
    del y
    assert ref() is None
    assert torch.cuda.memory_allocated() == base


def test_layer_norm_and_attention(c_path: bool) -> None:
    """Outputs of several kinds (a C-order output, one in q's memory order)."""
    torch = _torch()
    from zyntax import kernels

    F = torch.nn.functional
    w, b = torch.randn(768, device="cuda"), torch.randn(768, device="cuda")
    for _ in range(3):
        x = torch.randn(128, 768, device="cuda")
        got = kernels.layer_norm(x, w, b)
        want = F.layer_norm(x.double(), (768,), w.double(), b.double())
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    for _ in range(3):
        # (b, s, h, d) memory viewed as (b, h, s, d): the output keeps that order.
        q, k, v = (
            torch.randn(1, 128, 4, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            for _ in range(3)
        )
        got = kernels.attention(q, k, v, causal=True)
        assert got.stride() == q.stride()
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)


def test_capture_allocates_in_the_graph_pool(c_path: bool) -> None:
    """Replayed calls inside ``torch.cuda.graph`` (outputs made on the
    capturing stream come from the graph's pool): a replay on new input
    values gives the new results, the second call reading the first's output."""
    torch = _torch()
    from zyntax import kernels

    x = torch.randn(64, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # record and replay before the capture
            kernels.softmax(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = kernels.softmax(x)
        z = kernels.softmax(y)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        y.fill_(float("nan"))
        z.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        want = torch.softmax(x.double(), -1)
        torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(z.double(), torch.softmax(want, -1), rtol=1e-5, atol=1e-5)


def test_decorated_kernel_launch_reads(c_path: bool) -> None:
    """``@zyntax.kernel`` launches read torch tensors through the same C
    functions (abi.rs): views at an offset, 2-D strides, another dtype
    and a CPU tensor (the slow path's typed error) on fresh inputs."""
    torch = _torch()
    import zyntax
    from zyntax import lang
    from zyntax.frontend import errors

    @zyntax.kernel
    def axpy(a, b, out, s, n):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n:
            out[i] = a[i] * s + b[i]

    @zyntax.kernel
    def col(m, out, j):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < out.shape[0]:
            out[i] = m[i, j]

    n = 1000
    for dt in (torch.float32, torch.float16, torch.float32):
        for off in (0, 3):
            a = torch.randn(n + off, device="cuda", dtype=dt)[off:]
            b = torch.randn(n, device="cuda", dtype=dt)
            out = torch.full((n,), float("nan"), device="cuda", dtype=dt)
            axpy[(n + 127) // 128, 128](a, b, out, 2.0, n)
            want = a.double() * 2.0 + b.double()
            tol = 1e-2 if dt is torch.float16 else 1e-6
            torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)
    m = torch.randn(64, 48, device="cuda")
    for view in (m, m.t()):
        out = torch.full((view.shape[0],), float("nan"), device="cuda")
        col[1, 128](view, out, 5)
        torch.testing.assert_close(out, view[:, 5])
    with pytest.raises(errors.KernelArgumentError, match="argument 'a'"):
        axpy[8, 128](torch.randn(n), b, out, 1.0, n)


def test_current_stream_read_in_c(c_path: bool) -> None:
    """With the C path on, launches read PyTorch's current stream through
    libtorch's C function (checked against torch._C._cuda_getCurrentRawStream
    on a side stream); either way a decorated launch and a plan replay go to
    the current stream: inside ``torch.cuda.graph`` capture (its side
    stream; a launch elsewhere would break the capture) and replayed on
    fresh inputs."""
    torch = _torch()
    import zyntax
    from zyntax import _native, _torch_c, lang
    from zyntax import kernels as zk

    if c_path and hasattr(_native, "cuda_torch_c_stream"):
        assert _torch_c.torch_c_stream == [True]
        dev = torch.cuda.current_device()
        side = torch.cuda.Stream()
        assert _native.cuda_torch_c_stream(dev) == torch._C._cuda_getCurrentRawStream(dev)
        with torch.cuda.stream(side):
            assert _native.cuda_torch_c_stream(dev) == side.cuda_stream

    @zyntax.kernel
    def twice(x, out):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < len(x):
            out[i] = x[i] * 2.0

    n = 1000
    x, y = torch.randn(n, device="cuda"), torch.randn(8, 300, device="cuda")
    out, sm = torch.empty_like(x), torch.empty_like(y)
    zk.softmax.plans.clear()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compile, guards, plans
        for _ in range(2):
            twice[(n + 127) // 128, 128](x, out)
            zk.softmax(y, out=sm)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        twice[(n + 127) // 128, 128](x, out)
        zk.softmax(y, out=sm)
    x.copy_(torch.randn(n, device="cuda"))
    y.copy_(torch.randn(8, 300, device="cuda"))
    out.fill_(float("nan"))
    sm.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x * 2.0)
    torch.testing.assert_close(sm.double(), torch.softmax(y.double(), -1), rtol=1e-5, atol=1e-6)
