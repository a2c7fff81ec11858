"""The ``kern[grid, block](*args)`` hot path on the GPU: real DeviceArrays and
prepared native launches (tests/python/test_kernel_launch_fast.py checks the
same path against the slow one with the driver replaced)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import lang
from zyntax.frontend import errors

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def test_alternating_dtypes_and_scalars_on_the_hot_path() -> None:
    from zyntax import cuda

    @zyntax.kernel
    def axpb(a, out, s, n):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n:
            out[i] = a[i] * s + a[i]

    n = 1000
    launch = axpb[(n + 127) // 128, 128]
    for it in range(12):
        dt = [np.float32, np.float64, np.int32][it % 3]
        h = rng.uniform(1, 50, size=n).astype(dt)
        s = int(rng.integers(2, 9)) if dt is np.int32 else float(rng.uniform(0.5, 2))
        a, out = cuda.to_device(h), cuda.zeros(n, dt)
        m = int(rng.integers(n // 2, n))
        launch(a, out, s, m)
        got = out.to_host()
        want = np.zeros(n, dt)
        if dt is np.float64:
            want[:m] = h[:m] * np.float32(s) + h[:m]  # float s is an f32 argument
            np.testing.assert_allclose(got, want, rtol=1e-6)
        elif dt is np.float32:
            want[:m] = h[:m] * np.float32(s) + h[:m]
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:
            want[:m] = h[:m] * s + h[:m]
            np.testing.assert_array_equal(got, want)
    assert len(axpb.signatures) == 3
    # Wrong arguments after the hot path was installed: still the friendly error.
    with pytest.raises(errors.KernelArgumentError) as info:
        launch(a, out, 2)
    assert "takes 4 argument(s)" in str(info.value) and "^" in str(info.value)


# --------------------------------------------------------------------------- PyTorch tensors
# The hot path reads torch tensors natively (zyntax.cuda.ArgPlan) and launches on
# torch's current stream; zyntax.kernels functions replay call plans (_plans).


def _torch() -> Any:
    try:
        import torch
    except Exception:
        pytest.skip("torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


def _count_slow(k: Any) -> list[int]:
    """Counts the launches `k`'s launchers (made after this call) send down the slow path."""
    slow = [0]
    real = k._launch

    def spy(*a: Any, **kw: Any) -> None:
        slow[0] += 1
        real(*a, **kw)

    k._launch = spy
    return slow


def test_torch_tensors_on_the_hot_path_across_dtypes_and_addresses() -> None:
    torch = _torch()

    @zyntax.kernel
    def axpb(a, out, s, n):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n:
            out[i] = a[i] * s + a[i]

    slow = _count_slow(axpb)
    n = 1000
    launch = axpb[(n + 127) // 128, 128]
    dtypes = [torch.float32, torch.float64, torch.int32]
    before = -1
    for it in range(15):
        if it == 6:
            before = slow[0]  # every signature has its native guard by now
        dt = dtypes[it % 3]
        if dt is torch.int32:
            a = torch.randint(-50, 50, (n,), device="cuda", dtype=dt)
            out = torch.full((n,), -(2**31), device="cuda", dtype=dt)
            s = int(rng.integers(2, 9))
        else:
            a = torch.rand(n, device="cuda", dtype=dt) * 50
            out = torch.full((n,), float("nan"), device="cuda", dtype=dt)
            s = float(rng.uniform(0.5, 2))
        m = int(rng.integers(n // 2, n))
        launch(a, out, s, m)
        h = a.cpu().numpy()
        want = out.cpu().numpy().copy()
        if dt is torch.int32:
            want[:m] = h[:m] * s + h[:m]
            np.testing.assert_array_equal(out.cpu().numpy(), want)
        else:
            want[:m] = h[:m] * np.float32(s) + h[:m]
            np.testing.assert_allclose(out.cpu().numpy()[:m], want[:m], rtol=1e-6)
            assert np.isnan(out.cpu().numpy()[m:]).all()
    # Three signatures, and after their first launches only the hot path.
    assert len(axpb.signatures) == 3 and 3 <= before == slow[0]
    # A CPU tensor after the hot path: the slow path's typed error, by name.
    with pytest.raises(errors.KernelArgumentError, match="argument 'a'"):
        launch(torch.rand(n), out, 1.0, n)


def test_torch_layout_change_and_reused_address() -> None:
    torch = _torch()

    @zyntax.kernel
    def double2d(x, out):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < len(out):
            out[i] = x[i, 0] * 2.0

    rows = 300
    launch = double2d[(rows + 127) // 128, 128]
    for _ in range(3):
        x = torch.rand(rows, 5, device="cuda")
        out = torch.full((rows,), float("nan"), device="cuda")
        launch(x, out)
        torch.testing.assert_close(out, x[:, 0] * 2)
    # The same dtype and rank, another layout (column 0 of a transposed view).
    base = torch.rand(7, rows, device="cuda")
    xt = base.t()
    assert xt.stride() == (1, rows)
    out = torch.full((rows,), float("nan"), device="cuda")
    launch(xt, out)
    torch.testing.assert_close(out, base[0] * 2)
    # A freed tensor's address given to another tensor of the same signature
    # but another shape: the hot path reads the new tensor's extents and strides.
    x = torch.rand(rows, 5, device="cuda")
    del x
    y = torch.rand(rows, 9, device="cuda")
    y2 = y[:, 1:]  # another row stride, still contiguous along the last axis
    out = torch.full((rows,), float("nan"), device="cuda")
    launch(y2, out)
    torch.testing.assert_close(out, y[:, 1] * 2)


def test_torch_launch_is_ordered_on_torchs_current_stream() -> None:
    torch = _torch()

    @zyntax.kernel
    def inc(a):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < len(a):
            a[i] = a[i] + 1.0

    n = 1 << 22
    launch = inc[(n + 255) // 256, 256]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(4):  # the slow paths, then the hot one, all on s
            x = torch.rand(n, device="cuda")
            x0 = x.clone()
            launch(x)
            y = x * 2  # torch work on s after the launch
            s.synchronize()
            torch.testing.assert_close(y, (x0 + 1) * 2)


def test_torch_graph_capture_of_a_hot_launch() -> None:
    torch = _torch()

    @zyntax.kernel
    def scale(a, out, s):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < len(out):
            out[i] = a[i] * s

    n = 4096
    a = torch.rand(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    launch = scale[n // 256, 256]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # installs the hot path (the slow path may not run in a capture)
            launch(a, out, 3.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        launch(a, out, 3.0)
    for _ in range(3):
        a.copy_(torch.rand(n, device="cuda"))
        out.fill_(float("nan"))
        g.replay()
        torch.testing.assert_close(out, a * 3.0)


def test_kernel_library_call_plans_with_torch() -> None:
    torch = _torch()
    from zyntax import kernels

    rows, n = 64, 1024
    for dt in (torch.float32, torch.float16, torch.float32):
        tol = {"rtol": 1e-5, "atol": 1e-5} if dt is torch.float32 else {"rtol": 1e-2, "atol": 1e-2}
        for _ in range(3):
            x = torch.randn(rows, n, device="cuda", dtype=dt)
            w = torch.randn(n, device="cuda", dtype=dt)
            b = torch.randn(n, device="cuda", dtype=dt)
            ref = torch.nn.functional
            got = kernels.softmax(x)
            torch.testing.assert_close(got, torch.softmax(x.float(), -1).to(dt), **tol)
            got = kernels.layer_norm(x, w, b)
            want = ref.layer_norm(x.float(), (n,), w.float(), b.float()).to(dt)
            torch.testing.assert_close(got, want, **tol)
            got = kernels.rms_norm(x, w)
            xf = x.float()
            want = (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).to(dt)
            torch.testing.assert_close(got, want, **tol)
            out = torch.full_like(x, float("nan"))
            assert kernels.softmax(x, out=out) is out
            torch.testing.assert_close(out, torch.softmax(x.float(), -1).to(dt), **tol)
    assert kernels.softmax.plans and kernels.layer_norm.plans and kernels.rms_norm.plans
    # A planned call whose out overlaps its input: refused by name, on the plan too.
    x = torch.randn(rows, n, device="cuda")
    for _ in range(2):
        with pytest.raises(zyntax.ArgumentError, match="overlaps argument 'x'"):
            kernels.softmax(x, out=x)
    # A CPU tensor of a planned signature: the full path's typed error.
    with pytest.raises(zyntax.ArgumentError, match="argument 'x'"):
        kernels.softmax(torch.randn(rows, n))


def test_attention_call_plan_with_torch() -> None:
    torch = _torch()
    from zyntax import kernels

    for causal in (False, True, False):
        for _ in range(3):
            q, k, v = (
                torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3)
            )
            got = kernels.attention(q, k, v, causal=causal)
            want = torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), is_causal=causal
            )
            torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    assert kernels.attention.plans


def test_native_call_plans_see_layout_dtype_stream_and_reused_addresses() -> None:
    """The native replay (``_native.CudaCallPlans``) keys a call by what
    changes the kernel: a transposed view, another dtype at a freed tensor's
    address and another current stream each take the full path (a new plan),
    and every result matches PyTorch on fresh inputs, outputs poisoned."""
    torch = _torch()
    from zyntax import kernels

    def check(x: Any, tol: float) -> None:
        want = torch.softmax(x.double(), -1)
        got = kernels.softmax(x)
        torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol)
        out = torch.full_like(x, float("nan"))
        assert kernels.softmax(x, out=out) is out
        torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol)

    kernels.softmax.plans.clear()
    x = torch.randn(64, 1024, device="cuda")
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        check(x, 1e-5)
    plans = len(kernels.softmax.plans)
    assert plans >= 2  # with and without out=
    for _ in range(2):  # a transposed view of the same memory: its own plan
        check(x.t(), 1e-5)
    assert len(kernels.softmax.plans) > plans
    # A freed tensor's address reused by a tensor of another dtype.
    ptr = x.data_ptr()
    del x
    reused = False
    for _ in range(3):
        h = torch.randn(64, 1024, device="cuda", dtype=torch.float16)
        reused |= h.data_ptr() == ptr
        check(h, 1e-2)
    # Another current stream: launches go there (ordered after its own work).
    side = torch.cuda.Stream()
    y = torch.randn(64, 1024, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            y.mul_(2.0)  # on the side stream, before the softmax that reads it
            got = kernels.softmax(y)
            want = torch.softmax(y.double(), -1)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    print("freed address reused:", reused)


def test_matmul_replays_every_route_in_one_lookup() -> None:
    """``kernels.matmul`` answers a repeated signature from its native table
    on the tile route (small M) and on a hand-written route (M past
    gemm.TILE_MAX_M: sm90 on an sm_90 device, else mma_sync): fresh
    operands each call, results against float64 (outputs poisoned when
    given), a given `out` overlapping `a` refused by the plan, and another
    dtype at a freed operand's address taking the full path."""
    torch = _torch()
    from zyntax import kernels
    from zyntax.kernels import gemm

    bf = torch.bfloat16

    def want(a: Any, w: Any, b: Any, act: Any) -> Any:
        y = a.double() @ w.double() + b.double()
        return torch.nn.functional.gelu(y, approximate="tanh") if act else y

    gemm._plans.clear()  # clears the native table too
    for m in (64, gemm.TILE_MAX_M + 64):
        k, n = 256, 192
        for act in (None, "gelu"):
            for _ in range(3):
                a = torch.randn(m, k, device="cuda", dtype=bf)
                w = (torch.randn(k, n, device="cuda") / k**0.5).to(bf)
                b = torch.randn(n, device="cuda", dtype=bf)
                got = kernels.matmul(a, w, bias=b, activation=act)
                torch.testing.assert_close(got.double(), want(a, w, b, act), rtol=2e-2, atol=3e-2)
                out = torch.full((m, n), float("nan"), device="cuda", dtype=bf)
                assert kernels.matmul(a, w, out, bias=b, activation=act) is out
                torch.testing.assert_close(out.double(), want(a, w, b, act), rtol=2e-2, atol=3e-2)
    # Two shapes x two epilogues x (allocated, given out): one plan each.
    assert len(kernels.matmul.plans) == 8
    # A given out overlapping a: the plan refuses it by name, before launching.
    big = torch.randn(2 * 64 * 256, device="cuda", dtype=bf)
    a = big[: 64 * 256].view(64, 256)
    w, b = torch.randn(256, 192, device="cuda", dtype=bf), torch.randn(192, device="cuda", dtype=bf)
    kernels.matmul(a, w, big[64 * 256 : 64 * 256 + 64 * 192].view(64, 192), bias=b)
    for _ in range(2):
        with pytest.raises(zyntax.ArgumentError, match="overlaps argument 'a'"):
            kernels.matmul(a, w, big[64 * 192 : 2 * 64 * 192].view(64, 192), bias=b)
    # Another dtype at a freed operand's address: the full path, correct.
    ptr = a.data_ptr()
    del a, big
    for _ in range(2):
        h = torch.randn(64, 256, device="cuda", dtype=torch.float16)
        wh, bh = w.to(torch.float16), b.to(torch.float16)
        got = kernels.matmul(h, wh, bias=bh)
        assert got.dtype == torch.float16
        torch.testing.assert_close(got.double(), want(h, wh, bh, None), rtol=2e-2, atol=3e-2)
    print("freed address reused:", h.data_ptr() == ptr)


def test_attention_output_in_qs_memory_order() -> None:
    """q, k, v split from one (b, s, 3, h, d) projection (as a transformer
    block does): the output is laid out (b, s, h, d) like SDPA's, so its
    (b*s, h*d) view needs no copy, on the full path and on the plan's
    replays; a contiguous q still gives a contiguous output. Values against
    float64 on fresh inputs."""
    torch = _torch()
    from zyntax import kernels

    b, s, h, d = 2, 256, 4, 64
    for causal in (True, False):
        for _ in range(3):
            qkv = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.bfloat16)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            got = kernels.attention(q, k, v, causal=causal)
            assert got.shape == (b, h, s, d) and got.transpose(1, 2).is_contiguous()
            want = torch.nn.functional.scaled_dot_product_attention(
                q.double(), k.double(), v.double(), is_causal=causal
            )
            torch.testing.assert_close(got.double(), want, rtol=2e-2, atol=2e-2)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(2):
        assert kernels.attention(q, k, v).is_contiguous()


def test_a_knob_flip_runs_the_other_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """A knob set between calls (rows_tile.PER_THREAD: a [1, 2048] softmax
    row over 4 warps at 16 elements a thread, 8 warps at 8) is not answered
    by the plan recorded under the old value: the next call runs the other
    kernel (the plan-key bug of session 13), and its result is right."""
    torch = _torch()
    from zyntax import kernels
    from zyntax.kernels import rows_tile

    seen: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> Any:
        seen.append(key[0].warps)
        return real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    monkeypatch.setattr(rows_tile, "PER_THREAD", 16)
    x = torch.randn(96, 2048, device="cuda")
    want = torch.softmax(x.double(), -1)
    for i, (per_thread, warps) in enumerate(((16, 4), (8, 8), (16, 4))):
        monkeypatch.setattr(rows_tile, "PER_THREAD", per_thread)
        for _ in range(2):  # the second call: the plan recorded by the first
            out = torch.full_like(x, float("nan"))
            assert kernels.softmax(x, out=out) is out
            torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)
        assert len(seen) == i + 1 and seen[-1] == warps, seen
