"""zyntax.kernels.torch_ops without a GPU: the module imports without torch,
registration without torch is a typed error; with torch (skipped where it is
not installed, as in CI), the ops exist under ``torch.ops.zyntax``, their fake
implementations give shapes and dtypes on meta tensors, ``torch._dynamo``
traces a model of them in one graph, backward passes without a kernel raise
ArgumentError, and CPU tensors are refused by name. Values, capture and
gradients are checked on the GPU (gpu/test_torch_integration_gpu.py)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import zyntax


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_module_imports_without_torch_and_register_needs_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "import zyntax\n"
        "from zyntax.kernels import torch_ops\n"
        "try:\n"
        "    torch_ops.register()\n"
        "except zyntax.ArgumentError as e:\n"
        "    print('refused:', e)\n"
    )
    r = _python(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: zyntax.kernels.torch_ops needs PyTorch" in r.stdout


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_activation_backward_on_the_interpreter(activation: str, dtype: Any) -> None:
    """matmul's activation derivative (numpy: the interpreter) against central
    differences of the activation in float64."""
    from zyntax.kernels import torch_ops as zt

    rng = np.random.default_rng()
    pre = (rng.standard_normal((5, 37)) * 3).astype(np.float32)
    pre[np.abs(pre) < 1e-3] = 0.5  # relu's kink: no difference quotient there
    dout = rng.standard_normal((5, 37)).astype(dtype)

    def act(v: Any) -> Any:
        if activation == "relu":
            return np.maximum(v, 0.0)
        return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))

    h = 1e-6
    p = pre.astype(np.float64)
    want = dout.astype(np.float64) * (act(p + h) - act(p - h)) / (2 * h)
    got = zt.activation_backward(pre, dout, activation)
    assert got.dtype == dtype and got.shape == pre.shape
    tol = 1e-5 if dtype == np.float32 else 2e-3
    assert np.abs(got.astype(np.float64) - want).max() <= tol * max(1.0, np.abs(want).max())


def test_activation_backward_refuses_bad_input() -> None:
    from zyntax.kernels import torch_ops as zt

    pre, d = np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)
    with pytest.raises(zyntax.ArgumentError, match="argument 'activation'"):
        zt.activation_backward(pre, d, "tanh")
    with pytest.raises(zyntax.ArgumentError, match="argument 'pre'"):
        zt.activation_backward(pre.astype(np.float16), d, "gelu")
    with pytest.raises(zyntax.ArgumentError, match="argument 'dout'"):
        zt.activation_backward(pre, d[:, :4], "gelu")


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(5, 37), (70, 300), (1, 1), (0, 3)])
def test_bias_backward_on_the_interpreter(
    shape: tuple[int, int], dtype: Any, activation: Any
) -> None:
    """matmul's bias gradient (column sums, several row slabs and a partial
    column block) and, with an activation, dpre = g * act'(pre) of the same
    pass, against float64 on fresh random inputs."""
    from zyntax.kernels import torch_ops as zt

    rng = np.random.default_rng()
    g = rng.standard_normal(shape).astype(dtype)
    pre = (rng.standard_normal(shape) * 3).astype(np.float32)
    gd = g.astype(np.float64)
    if activation is None:
        dbias = zt.bias_backward(g)
    else:
        dpre, dbias = zt.bias_backward(g, pre, activation, "f32")
        p = pre.astype(np.float64)
        if activation == "relu":
            gd = gd * (p > 0)
        else:  # d/dp of the tanh GELU
            c, k = 0.7978845608028654, 0.044715
            t = np.tanh(c * (p + k * p**3))
            gd = gd * (0.5 * (1 + t) + 0.5 * p * (1 - t * t) * c * (1 + 3 * k * p * p))
        assert dpre.dtype == dtype and dpre.shape == shape
        rounding = 1e-5 if dtype == np.float32 else 2e-3
        assert np.abs(dpre.astype(np.float64) - gd).max(initial=0) <= rounding * max(
            1.0, np.abs(gd).max(initial=0)
        )
    want_bias = gd.sum(0)
    assert dbias.shape == (shape[1],)
    assert dbias.dtype == (dtype if activation is None else np.float32)
    tol = 1e-5 if dbias.dtype == np.float32 else 2e-3
    err = np.abs(dbias.astype(np.float64) - want_bias).max()
    assert err <= tol * max(1.0, np.abs(want_bias).max()), err


def test_bias_backward_refuses_bad_input() -> None:
    from zyntax.kernels import torch_ops as zt

    g, pre = np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)
    with pytest.raises(zyntax.ArgumentError, match="argument 'activation'"):
        zt.bias_backward(g, pre, "tanh")
    with pytest.raises(zyntax.ArgumentError, match="argument 'g'"):
        zt.bias_backward(np.ones(8, np.float32))
    with pytest.raises(zyntax.ArgumentError, match="argument 'pre'"):
        zt.bias_backward(g, pre[:, :4], "gelu")
    with pytest.raises(zyntax.ArgumentError, match="argument 'pre'"):
        zt.bias_backward(g, pre)  # a pre-activation without an activation
    with pytest.raises(zyntax.ArgumentError, match="argument 'out_dtype'"):
        zt.bias_backward(g, None, None, "f64")


def test_importing_the_module_does_not_import_torch() -> None:
    r = _python("import sys\nfrom zyntax.kernels import torch_ops\nprint('torch' in sys.modules)")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "False"


# ------------------------------------------------------------------ with torch


@pytest.fixture(scope="module")
def torch() -> Any:
    mod = pytest.importorskip("torch")
    from zyntax.kernels import torch_ops

    torch_ops.register()
    return mod


def _meta(torch: Any, *shape: int, dtype: Any = None, grad: bool = False) -> Any:
    return torch.empty(*shape, device="meta", dtype=dtype or torch.float32, requires_grad=grad)


def test_every_op_is_registered(torch: Any) -> None:
    from zyntax.kernels import torch_ops

    for name in torch_ops.SCHEMAS:
        assert hasattr(torch.ops.zyntax, name), name
    assert torch_ops.register() is torch.ops.zyntax  # registered once


def test_fake_shapes_and_dtypes(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    bf = torch.bfloat16
    x, w = _meta(torch, 3, 5, 64, dtype=bf), _meta(torch, 64, dtype=bf)
    a, b = _meta(torch, 7, 64, dtype=torch.float16), _meta(torch, 64, 9, dtype=torch.float16)
    q, kv = _meta(torch, 2, 3, 17, 64, dtype=bf), _meta(torch, 2, 3, 40, 64, dtype=bf)
    t = _meta(torch, 3, 5, dtype=torch.int64)
    cases = [
        (zt.softmax(x), (3, 5, 64), bf),
        (zt.layer_norm(x, w, w, 1e-5), (3, 5, 64), bf),
        (zt.rms_norm(x, w), (3, 5, 64), bf),
        (zt.matmul(a, b), (7, 9), torch.float16),
        (zt.matmul(a, b, out_dtype="f32"), (7, 9), torch.float32),
        (zt.cross_entropy(x, t), (3, 5), torch.float32),
        (zt.cross_entropy(x, t, "mean"), (), torch.float32),
        (zt.reduce_sum(x, -1), (3, 5), torch.float32),
        (zt.reduce_max(x), (), torch.float32),
        (zt.attention(q, kv, kv, causal=True), (2, 3, 17, 64), bf),
        (zt.attention(q, kv, kv, return_lse=True)[1], (2, 3, 17), torch.float32),
    ]
    for got, shape, dtype in cases:
        assert tuple(got.shape) == shape and got.dtype == dtype, (got.shape, got.dtype, shape)


def test_fake_matmul_refuses_mismatched_shapes(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    with pytest.raises(zyntax.ArgumentError, match="argument 'b'"):
        zt.matmul(_meta(torch, 7, 64), _meta(torch, 63, 9))
    with pytest.raises(zyntax.ArgumentError, match="argument 'out_dtype'"):
        zt.matmul(_meta(torch, 7, 64), _meta(torch, 64, 9), out_dtype="f64")


def test_dynamo_traces_a_model_in_one_graph(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    def model(x: Any, w: Any, b: Any, w1: Any, t: Any) -> Any:
        h = zt.layer_norm(x, w, b)
        h = zt.matmul(h, w1, None, "gelu")
        return zt.softmax(h), zt.cross_entropy(h, t, "mean"), zt.reduce_sum(h, -1)

    torch._dynamo.reset()
    bf = torch.bfloat16
    args = [
        _meta(torch, 15, 64, dtype=bf),
        _meta(torch, 64, dtype=bf),
        _meta(torch, 64, dtype=bf),
        _meta(torch, 64, 32, dtype=bf),
        _meta(torch, 15, dtype=torch.int64),
    ]
    exp = torch._dynamo.explain(model)(*args)
    assert exp.graph_break_count == 0, exp.break_reasons
    assert exp.graph_count == 1


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "cross_entropy", "attention"])
def test_backward_without_kernel_is_a_typed_error(torch: Any, op: str) -> None:
    from zyntax.kernels import torch_ops as zt

    if zt.backward_kernel(op) is not None:
        pytest.skip(f"{op} has a backward kernel")
    x, w = _meta(torch, 8, 64, grad=True), _meta(torch, 64)
    q = _meta(torch, 1, 2, 64, 64, dtype=torch.bfloat16, grad=True)
    runs = {
        "softmax": lambda: zt.softmax(x),
        "layer_norm": lambda: zt.layer_norm(x, w),
        "rms_norm": lambda: zt.rms_norm(x, w),
        "cross_entropy": lambda: zt.cross_entropy(x, _meta(torch, 8, dtype=torch.int64)),
        "attention": lambda: zt.attention(q, q.detach(), q.detach()),
    }
    name = "q" if op == "attention" else ("logits" if op == "cross_entropy" else "x")
    with pytest.raises(zyntax.ArgumentError, match=f"argument '{name}': requires grad"):
        runs[op]().float().sum().backward()


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "cross_entropy"])
def test_row_backward_shapes(torch: Any, op: str) -> None:
    """Where a backward kernel exists, its op's fake gives the gradients' shapes."""
    from zyntax.kernels import torch_ops as zt

    if zt.backward_kernel(op) is None:
        pytest.skip(f"{op} has no backward kernel")
    x, w, b = _meta(torch, 8, 64, grad=True), _meta(torch, 64, grad=True), _meta(torch, 64)
    b.requires_grad_()
    runs = {
        "softmax": lambda: zt.softmax(x),
        "layer_norm": lambda: zt.layer_norm(x, w, b),
        "rms_norm": lambda: zt.rms_norm(x, w),
        "cross_entropy": lambda: zt.cross_entropy(x, _meta(torch, 8, dtype=torch.int64), "mean"),
    }
    runs[op]().sum().backward()
    assert x.grad.shape == (8, 64)
    if op in ("layer_norm", "rms_norm"):
        assert w.grad.shape == (64,)
    assert (b.grad is not None) == (op == "layer_norm")
    assert hasattr(torch.ops.zyntax, f"{op}_backward")


@pytest.mark.parametrize("activation", [None, "gelu"])
def test_matmul_backward_shapes(torch: Any, activation: str | None) -> None:
    from zyntax.kernels import torch_ops as zt

    a, b, bias = _meta(torch, 7, 64, grad=True), _meta(torch, 64, 9, grad=True), _meta(torch, 9)
    bias.requires_grad_()
    zt.matmul(a, b, bias, activation).sum().backward()
    assert a.grad.shape == (7, 64) and b.grad.shape == (64, 9) and bias.grad.shape == (9,)


def test_reduce_max_backward_is_a_typed_error(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    with pytest.raises(zyntax.ArgumentError, match="argument 'x': requires grad"):
        zt.reduce_max(_meta(torch, 8, 64, grad=True), -1).sum().backward()


def test_saxpy_refuses_tensors_that_require_grad(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    with pytest.raises(zyntax.ArgumentError, match="argument 'x': requires grad"):
        zt.saxpy(2.0, _meta(torch, 16, grad=True), _meta(torch, 16))


def test_cpu_tensors_are_refused_by_name(torch: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    with pytest.raises(zyntax.ArgumentError, match="argument 'x': a CPU tensor"):
        zt.softmax(torch.randn(4, 8))
