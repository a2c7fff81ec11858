"""zyntax.kernels inside PyTorch on the GPU: CUDA-graph capture (PyTorch's
``torch.cuda.graph`` and ``zyntax.cuda.capture``) replayed against eager
results, the ``torch.library`` ops under ``torch.compile`` (no graph break)
and fake tensors, and gradients against float64 references where a backward
exists (``zyntax.kernels.torch_ops``). Skipped without a GPU or torch."""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
import zyntax.kernels as zk
from zyntax import cuda
from zyntax.kernels import gemm
from zyntax.kernels import torch_ops as zt

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)

DEV = "cuda"


def _rand(*shape: int, dtype: Any = None, scale: float = 1.0) -> Any:
    return (torch.randn(*shape, device=DEV) * scale).to(dtype or torch.float32)


# ------------------------------------------------------------------ a small model


class Block:
    """A pre-norm transformer block from zyntax.kernels: layer norm, QKV
    matmul with bias, causal attention, output projection, residual, layer
    norm, MLP with GELU, residual; and a loss head (rms_norm, matmul,
    softmax, cross-entropy)."""

    def __init__(self, d: int, heads: int, vocab: int, dtype: Any) -> None:
        self.d, self.heads, self.dtype = d, heads, dtype

        def w(*s: int) -> Any:
            return _rand(*s, dtype=dtype, scale=1.0 / math.sqrt(s[0]))

        self.ln1_w, self.ln1_b = _rand(d, dtype=dtype), _rand(d, dtype=dtype, scale=0.1)
        self.ln2_w, self.ln2_b = _rand(d, dtype=dtype), _rand(d, dtype=dtype, scale=0.1)
        self.w_qkv, self.b_qkv = w(d, 3 * d), _rand(3 * d, dtype=dtype, scale=0.1)
        self.w_o, self.b_o = w(d, d), _rand(d, dtype=dtype, scale=0.1)
        self.w_1, self.b_1 = w(d, 4 * d), _rand(4 * d, dtype=dtype, scale=0.1)
        self.w_2, self.b_2 = w(4 * d, d), _rand(d, dtype=dtype, scale=0.1)
        self.rms_w, self.w_head = _rand(d, dtype=dtype), w(d, vocab)

    def zyntax(self, x: Any, targets: Any) -> tuple[Any, ...]:
        b, s, d = x.shape
        h, hd = self.heads, d // self.heads
        flat = x.reshape(b * s, d)
        qkv = zk.matmul(zk.layer_norm(flat, self.ln1_w, self.ln1_b), self.w_qkv, bias=self.b_qkv)
        q, k, v = qkv.view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
        att = zk.attention(q, k, v, causal=True)
        att = att.transpose(1, 2).reshape(b * s, d)
        x1 = flat + zk.matmul(att, self.w_o, bias=self.b_o)
        normed = zk.layer_norm(x1, self.ln2_w, self.ln2_b)
        hid = zk.matmul(normed, self.w_1, bias=self.b_1, activation="gelu")
        x2 = x1 + zk.matmul(hid, self.w_2, bias=self.b_2)
        logits = zk.matmul(zk.rms_norm(x2, self.rms_w), self.w_head, out_dtype="f32")
        probs = zk.softmax(logits)
        loss = zk.cross_entropy(logits, targets, reduction="mean")
        return x2.view(b, s, d), probs, loss

    def reference(self, x: Any, targets: Any) -> tuple[Any, ...]:
        """The same block in float64 PyTorch (weights rounded as the model's)."""
        f = torch.nn.functional
        p = {k: v.double() for k, v in vars(self).items() if torch.is_tensor(v)}
        b, s, d = x.shape
        h, hd = self.heads, d // self.heads
        flat = x.double().reshape(b * s, d)
        qkv = f.layer_norm(flat, (d,), p["ln1_w"], p["ln1_b"]) @ p["w_qkv"] + p["b_qkv"]
        q, k, v = qkv.view(b, s, 3, h, hd).permute(2, 0, 3, 1, 4)
        att = f.scaled_dot_product_attention(q, k, v, is_causal=True)
        x1 = flat + att.transpose(1, 2).reshape(b * s, d) @ p["w_o"] + p["b_o"]
        hid = f.gelu(
            f.layer_norm(x1, (d,), p["ln2_w"], p["ln2_b"]) @ p["w_1"] + p["b_1"], approximate="tanh"
        )
        x2 = x1 + hid @ p["w_2"] + p["b_2"]
        normed = x2 * torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + 1e-6) * p["rms_w"]
        logits = normed @ p["w_head"]
        return x2.view(b, s, d), torch.softmax(logits, -1), f.cross_entropy(logits, targets)


def _close(got: Any, want: Any, tol: float, what: str) -> None:
    g, w = got.double().cpu().numpy(), want.double().cpu().numpy()
    assert np.isfinite(g).all(), f"{what}: non-finite values"
    err = np.abs(g - w).max() / max(1.0, np.abs(w).max())
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def _same(got: Any, want: Any, what: str) -> None:
    """Replay against eager on the same inputs: the same kernels, so the same bits."""
    assert torch.equal(got, want), (
        f"{what}: replay differs from eager by {(got.double() - want.double()).abs().max()}"
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_block_matches_float64(dtype: Any) -> None:
    m = Block(256, 4, 512, dtype)
    x, t = _rand(2, 64, 256, dtype=dtype), torch.randint(0, 512, (128,), device=DEV)
    for got, want, what in zip(
        m.zyntax(x, t), m.reference(x, t), ("x2", "probs", "loss"), strict=True
    ):
        _close(got, want, 3e-2, what)


def test_block_torch_cuda_graph_replays_eager() -> None:
    """The block captured by torch.cuda.graph (global capture mode: any sync,
    allocation outside the graph's pool or legacy-stream launch would fail the
    capture), replayed on new inputs copied into the static ones."""
    m = Block(256, 4, 512, torch.bfloat16)
    sx, st = _rand(2, 64, 256, dtype=torch.bfloat16), torch.randint(0, 512, (128,), device=DEV)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compiles and loads every kernel
        for _ in range(2):
            m.zyntax(sx, st)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = m.zyntax(sx, st)
    for _ in range(3):
        x, t = _rand(2, 64, 256, dtype=torch.bfloat16), torch.randint(0, 512, (128,), device=DEV)
        sx.copy_(x)
        st.copy_(t)
        for o in outs:  # poisoned: a replay that skips a kernel leaves NaN
            o.fill_(float("nan"))
        g.replay()
        eager = m.zyntax(x, t)
        for got, want, what in zip(outs, eager, ("x2", "probs", "loss"), strict=True):
            _same(got, want, what)
        _close(outs[2], m.reference(x, t)[2], 3e-2, "loss")


@pytest.mark.parametrize(
    "case",
    [
        "matmul_split_k",
        "attention_hd128_persistent",
        "reduce_sum_all",
        "cross_entropy_mean",
        "bias_backward_gelu",
    ],
)
def test_workspace_kernels_capture_on_a_fresh_stream(case: str, monkeypatch: Any) -> None:
    """Kernels with a per-stream workspace (split-K partials and counters,
    the persistent attention's tile counter, the bias gradient's partials and
    counters) captured on a stream they never ran on: the workspace comes
    from the graph's pool, not cuMemAlloc."""
    monkeypatch.setattr(gemm, "SPLIT_K_ON_GPU", True)
    fns: dict[str, tuple[Callable[..., Any], list[Any], Callable[..., Any]]] = {
        "matmul_split_k": (
            lambda a, b: zk.matmul(a, b),
            [_rand(16, 8192, dtype=torch.bfloat16), _rand(8192, 256, dtype=torch.bfloat16)],
            lambda a, b: a.double() @ b.double(),
        ),
        "attention_hd128_persistent": (
            lambda q, k, v: zk.attention(q, k, v),
            [_rand(2, 4, 512, 128, dtype=torch.bfloat16) for _ in range(3)],
            lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                q.double(), k.double(), v.double()
            ),
        ),
        "reduce_sum_all": (
            lambda x: zk.reduce_sum(x),
            [_rand(300, 1000)],
            lambda x: x.double().sum(),
        ),
        "cross_entropy_mean": (
            lambda lg, t: zk.cross_entropy(lg, t, reduction="mean"),
            [_rand(64, 5000), torch.randint(0, 5000, (64,), device=DEV)],
            lambda lg, t: torch.nn.functional.cross_entropy(lg.double(), t),
        ),
        "bias_backward_gelu": (
            lambda g, pre: zt.bias_backward(g, pre, "gelu", "f32")[1],
            [_rand(2048, 768, dtype=torch.bfloat16), _rand(2048, 768, scale=3.0)],
            lambda g, pre: (g.double() * _dgelu(pre.double())).sum(0),
        ),
    }
    fn, args, ref = fns[case]
    fn(*args)  # compiled and loaded on the default stream; the capture stream is new
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*args)
    for _ in range(2):
        fresh = [
            torch.randint_like(a, 0, 5000) if not a.is_floating_point() else torch.randn_like(a)
            for a in args
        ]
        for a, f in zip(args, fresh, strict=True):
            a.copy_(f)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        if case == "matmul_split_k":  # the partials' sum order is the kernel's
            _close(out, fn(*fresh), 1e-2, case)
        else:
            _same(out, fn(*fresh), case)
        _close(out, ref(*fresh), 2e-2, case)


def test_kernels_inside_zyntax_capture() -> None:
    """zyntax.cuda.capture on a zyntax stream, outputs given (allocate before
    a capture, docs/runtime.md): replays match eager on new inputs."""
    s = cuda.Stream()
    x, w, b = _rand(64, 1024), _rand(1024), _rand(1024)
    y, p = torch.empty_like(x), torch.empty_like(x)
    zk.layer_norm(x, w, b, out=y, stream=s)  # warm-up on the capturing stream
    zk.softmax(y, out=p, stream=s)
    s.synchronize()
    with cuda.capture(s) as cap:
        zk.layer_norm(x, w, b, out=y, stream=s)
        zk.softmax(y, out=p, stream=s)
    ex = cap.graph.instantiate()
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        torch.cuda.synchronize()
        p.fill_(float("nan"))
        torch.cuda.synchronize()
        ex.launch(s)
        s.synchronize()
        want = torch.softmax(
            torch.nn.functional.layer_norm(x.double(), (1024,), w.double(), b.double()), -1
        )
        _close(p, want, 1e-4, "softmax(layer_norm(x))")


_DECORATED_CAPTURE = """
import torch, zyntax
from zyntax import lang

@zyntax.kernel
def axpb(x, y, out):
    i = lang.grid(1)
    if i < len(out):
        out[i] = 2.0 * x[i] + y[i]

n = 1000
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.empty(n, device="cuda")
launch = lambda: axpb[(n + 255) // 256, 256](x, y, out)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    launch()
torch.cuda.current_stream().wait_stream(side)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    launch()
for _ in range(2):
    x.copy_(torch.randn_like(x))
    out.fill_(float("nan"))
    g.replay()
    err = (out.double() - (2.0 * x.double() + y.double())).abs().max().item()
    assert err < 1e-5, err
print("ok")
"""


def test_decorated_kernel_in_torch_cuda_graph() -> None:
    """A ``@zyntax.kernel`` launch with torch tensors inside torch.cuda.graph
    must go to torch's (capturing) stream without touching the legacy one. In
    a process of its own: a failed capture leaves torch's RNG in capture
    state, which would fail every later test of the session."""
    with tempfile.TemporaryDirectory() as d:  # a file: the decorator reads the kernel's source
        script = Path(d) / "decorated_capture.py"
        script.write_text(_DECORATED_CAPTURE)
        r = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=300
        )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ------------------------------------------------------------------ torch.compile and fake tensors


def _model(x: Any, w: Any, b: Any, w1: Any, t: Any) -> tuple[Any, Any]:
    h = zt.layer_norm(x, w, b)
    h = zt.matmul(h, w1, None, "gelu")
    h = zt.rms_norm(h, torch.ones(h.shape[-1], device=h.device, dtype=h.dtype))
    return zt.softmax(h), zt.cross_entropy(h, t, "mean")


def _model_args() -> list[Any]:
    return [
        _rand(128, 256, dtype=torch.bfloat16),
        _rand(256, dtype=torch.bfloat16),
        _rand(256, dtype=torch.bfloat16),
        _rand(256, 512, dtype=torch.bfloat16, scale=1 / 16),
        torch.randint(0, 512, (128,), device=DEV),
    ]


def test_dynamo_explain_reports_no_graph_break() -> None:
    torch._dynamo.reset()
    exp = torch._dynamo.explain(_model)(*_model_args())
    # Until the ops were registered at import, the model's first zt call
    # registered them inside the traced frame: a break (and 2 graphs) that
    # explain listed without a reason, the graph before it being empty.
    assert exp.graph_break_count == 0 and exp.graph_count == 1, exp


def test_torch_compile_matches_eager() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(_model, fullgraph=True)
    for _ in range(2):
        args = _model_args()
        got, want = compiled(*args), _model(*args)
        for g, w in zip(got, want, strict=True):
            _close(g, w, 1e-2, "compiled")


def test_torch_compile_reduce_overhead_replays() -> None:
    """mode="reduce-overhead": Inductor records the compiled model (zyntax ops
    included) into CUDA graphs and replays them; results match eager."""
    torch._dynamo.reset()
    compiled = torch.compile(_model, mode="reduce-overhead", fullgraph=True)
    args = _model_args()
    for _ in range(4):  # warm-up, recording, replays
        for a in args:
            a.copy_(torch.randint_like(a, 0, 512) if not a.is_floating_point() else a.uniform_())
        got = [t.clone() for t in compiled(*args)]
        want = _model(*args)
        for g, w in zip(got, want, strict=True):
            _close(g, w, 1e-2, "reduce-overhead")


def test_attention_op_compiles() -> None:
    torch._dynamo.reset()

    def f(q: Any, k: Any, v: Any) -> Any:
        return zt.attention(q, k, v, causal=True) * 2

    q, k, v = (_rand(1, 4, 128, 64, dtype=torch.float16) for _ in range(3))
    got = torch.compile(f, fullgraph=True)(q, k, v)
    ref = 2 * torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True
    )
    _close(got, ref, 2e-2, "compiled attention")


def test_fake_tensors_give_shapes_and_dtypes() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 5, 64, device=DEV, dtype=torch.bfloat16)
        w = torch.empty(64, device=DEV, dtype=torch.bfloat16)
        a = torch.empty(7, 64, device=DEV, dtype=torch.float16)
        b = torch.empty(64, 9, device=DEV, dtype=torch.float16)
        q = torch.empty(2, 3, 17, 64, device=DEV, dtype=torch.bfloat16)
        kv = torch.empty(2, 3, 40, 64, device=DEV, dtype=torch.bfloat16)
        t = torch.empty(3, 5, device=DEV, dtype=torch.int64)
        cases = [
            (zt.softmax(x), (3, 5, 64), torch.bfloat16),
            (zt.layer_norm(x, w, w), (3, 5, 64), torch.bfloat16),
            (zt.rms_norm(x, w), (3, 5, 64), torch.bfloat16),
            (zt.matmul(a, b), (7, 9), torch.float16),
            (zt.matmul(a, b, out_dtype="f32"), (7, 9), torch.float32),
            (zt.cross_entropy(x, t), (3, 5), torch.float32),
            (zt.cross_entropy(x, t, "mean"), (), torch.float32),
            (zt.reduce_sum(x, -1), (3, 5), torch.float32),
            (zt.reduce_max(x), (), torch.float32),
            (zt.attention(q, kv, kv), (2, 3, 17, 64), torch.bfloat16),
            (zt.attention(q, kv, kv, return_lse=True)[1], (2, 3, 17), torch.float32),
        ]
    for got, shape, dtype in cases:
        assert tuple(got.shape) == shape and got.dtype == dtype, (got.shape, got.dtype)
        assert got.device.type == "cuda"


def test_ops_values_against_float64() -> None:
    x, w, b = _rand(33, 1000), _rand(1000), _rand(1000)
    f = torch.nn.functional
    xd = x.double()
    _close(zt.softmax(x), torch.softmax(xd, -1), 1e-5, "softmax")
    _close(zt.layer_norm(x, w, b), f.layer_norm(xd, (1000,), w.double(), b.double()), 1e-4, "ln")
    _close(zt.reduce_sum(x, -1), xd.sum(-1), 1e-5, "reduce_sum")
    _close(zt.reduce_max(x), xd.max(), 0, "reduce_max")
    y, xx = _rand(4096), _rand(4096)
    want = y.double() + 0.5 * xx.double()
    assert zt.saxpy(0.5, xx, y) is y
    _close(y, want, 1e-6, "saxpy")


# ------------------------------------------------------------------ autograd


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_gradients_against_float64(dtype: Any, with_bias: bool, activation: Any) -> None:
    a = _rand(96, 200, dtype=dtype).requires_grad_()
    b = _rand(200, 136, dtype=dtype, scale=0.1).requires_grad_()
    bias = _rand(136, dtype=dtype).requires_grad_() if with_bias else None
    up = _rand(96, 136)
    (zt.matmul(a, b, bias, activation).float() * up).sum().backward()
    ad, bd = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    biasd = bias.detach().double().requires_grad_() if with_bias else None
    out = ad @ bd + (biasd if with_bias else 0)
    if activation == "relu":
        out = torch.relu(out)
    elif activation == "gelu":
        out = torch.nn.functional.gelu(out, approximate="tanh")
    (out * up.double()).sum().backward()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    _close(a.grad, ad.grad, tol, "da")
    _close(b.grad, bd.grad, tol, "db")
    if with_bias:
        _close(bias.grad, biasd.grad, tol, "dbias")


@pytest.mark.parametrize("activation", [None, "gelu"])
@pytest.mark.parametrize("shape", [(2048, 768), (1000, 77), (3, 3072)])
def test_bias_backward_against_float64(shape: tuple[int, int], activation: Any) -> None:
    """matmul's bias gradient on the GPU (the training step's shapes and odd
    ones), outputs poisoned first through the caching allocator."""
    g = _rand(*shape, dtype=torch.bfloat16)
    pre = _rand(*shape, scale=3.0)
    torch.full((4 * shape[0] * shape[1],), float("nan"), device=DEV)  # poison the pool
    if activation is None:
        dbias = zt.bias_backward(g, None, None, "f32")
        want = g.double()
    else:
        dpre, dbias = zt.bias_backward(g, pre, activation, "f32")
        # The GELU's derivative in float64 (dbias sums unrounded dpre).
        want = g.double() * _dgelu(pre.double())
        _close(dpre, want, 1e-2, "dpre")
    _close(dbias, want.sum(0), 1e-4 * math.sqrt(shape[0]), "dbias")


def _dgelu(p: Any) -> Any:
    """The derivative of the tanh GELU at `p`."""
    t = torch.tanh(0.7978845608028654 * (p + 0.044715 * p**3))
    return 0.5 * (1 + t) + 0.5 * p * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * p * p)


def test_matmul_backward_compiles() -> None:
    """The matmul backward's ops (bias_backward included) trace under
    torch.compile and give eager's gradients."""
    torch._dynamo.reset()

    def f(a: Any, b: Any, bias: Any) -> Any:
        return zt.matmul(zt.matmul(a, b, bias, "gelu"), b.t(), bias[:200])

    a, b, bias = _rand(96, 200), _rand(200, 256, scale=0.1), _rand(256)
    up = _rand(96, 200)
    grads = []
    for fn in (f, torch.compile(f, fullgraph=True)):
        leaves = [t.detach().clone().requires_grad_() for t in (a, b, bias)]
        (fn(*leaves) * up).sum().backward()
        grads.append([t.grad for t in leaves])
    for got, want in zip(grads[1], grads[0], strict=True):
        _close(got, want, 1e-4, "compiled backward")


def test_attention_gradient_arrives_strided() -> None:
    """The block's head transpose: q, k, v are views of one (b, s, 3, h, d)
    projection and the output's gradient arrives as a (b, h, s, d) view of
    (b, s, h, d) memory, which the backward reads in place
    (torch_ops._attention_grad); gradients against float64 SDPA."""
    if zt.backward_kernel("attention") is None:
        pytest.skip("no attention backward in this tree")
    b, s, h, d = 2, 200, 4, 64
    qkv = _rand(b, s, 3, h, d, dtype=torch.bfloat16).requires_grad_()
    up = _rand(b * s, h * d)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    out = zt.attention(q, k, v, causal=True).transpose(1, 2).reshape(b * s, h * d)
    (out.float() * up).sum().backward()
    ref = qkv.detach().double().requires_grad_()
    rq, rk, rv = ref.permute(2, 0, 3, 1, 4)
    f = torch.nn.functional
    rout = f.scaled_dot_product_attention(rq, rk, rv, is_causal=True)
    (rout.transpose(1, 2).reshape(b * s, h * d) * up.double()).sum().backward()
    assert qkv.grad is not None
    err = float((qkv.grad.double() - ref.grad).norm() / ref.grad.norm())
    assert err < 2e-2, err


def test_reduce_sum_gradient() -> None:
    x = _rand(17, 300).requires_grad_()
    up = _rand(17)
    (zt.reduce_sum(x, -1) * up).sum().backward()
    _close(x.grad, up.double()[:, None].expand(17, 300), 0, "dx")


ROW_OPS = ["softmax", "layer_norm", "layer_norm_nobias", "rms_norm", "ce_none", "ce_mean"]


def _row_case(op: str, dtype: Any) -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    """(zyntax op, float64 torch reference, inputs) of a row op."""
    f = torch.nn.functional
    rows, n = 37, 1000
    x, w, b = _rand(rows, n, dtype=dtype), _rand(n, dtype=dtype), _rand(n, dtype=dtype)
    t = torch.randint(0, n, (rows,), device=DEV)
    cases: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[Any]]] = {
        "softmax": (zt.softmax, lambda x: torch.softmax(x, -1), [x]),
        "layer_norm": (zt.layer_norm, lambda x, w, b: f.layer_norm(x, (n,), w, b), [x, w, b]),
        "layer_norm_nobias": (zt.layer_norm, lambda x, w: f.layer_norm(x, (n,), w), [x, w]),
        "rms_norm": (
            zt.rms_norm,
            lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
            [x, w],
        ),
        "ce_none": (
            lambda x, t: zt.cross_entropy(x, t),
            lambda x, t: f.cross_entropy(x, t, reduction="none"),
            [x, t],
        ),
        "ce_mean": (
            lambda x, t: zt.cross_entropy(x, t, "mean"),
            lambda x, t: f.cross_entropy(x, t),
            [x, t],
        ),
    }
    return cases[op]


def _kernel_name(op: str) -> str:
    return "cross_entropy" if op.startswith("ce_") else op.removesuffix("_nobias")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ROW_OPS)
def test_row_gradients_against_float64(op: str, dtype: Any) -> None:
    if zt.backward_kernel(_kernel_name(op)) is None:
        pytest.skip(f"{op} has no backward kernel in this tree")
    fn, ref, inputs = _row_case(op, dtype)
    leaves = [t.requires_grad_() if t.is_floating_point() else t for t in inputs]
    out = fn(*leaves)
    up = torch.randn(out.shape, device=DEV, dtype=torch.float64)
    (out.double() * up).sum().backward()
    ref_leaves = [
        t.detach().double().requires_grad_() if t.is_floating_point() else t for t in inputs
    ]
    (ref(*ref_leaves) * up).sum().backward()
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    for i, (got, want) in enumerate(zip(leaves, ref_leaves, strict=True)):
        if got.is_floating_point():
            _close(got.grad, want.grad, tol, f"{op} grad of input {i}")


def test_row_backward_compiles() -> None:
    """The backward ops trace under torch.compile (AOTAutograd's joint graph)."""
    if zt.backward_kernel("layer_norm") is None or zt.backward_kernel("softmax") is None:
        pytest.skip("no row backward kernels in this tree")
    torch._dynamo.reset()

    def f(x: Any, w: Any, b: Any) -> Any:
        return zt.softmax(zt.layer_norm(x, w, b))

    x, w, b = _rand(64, 512), _rand(512), _rand(512)
    up = _rand(64, 512)
    grads = []
    for fn in (f, torch.compile(f, fullgraph=True)):
        leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        (fn(*leaves) * up).sum().backward()
        grads.append([t.grad for t in leaves])
    for got, want in zip(grads[1], grads[0], strict=True):
        _close(got, want, 1e-5, "compiled backward")


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm", "attention", "reduce_max"])
def test_backward_without_kernel_is_a_typed_error(op: str) -> None:
    if zt.backward_kernel(op) is not None:
        pytest.skip(f"{op} has a backward kernel")
    x = _rand(8, 64).requires_grad_()
    w = _rand(64)
    q = _rand(1, 2, 64, 64, dtype=torch.bfloat16).requires_grad_()
    runs = {
        "softmax": lambda: zt.softmax(x),
        "layer_norm": lambda: zt.layer_norm(x, w),
        "rms_norm": lambda: zt.rms_norm(x, w),
        "attention": lambda: zt.attention(q, q.detach(), q.detach()),
        "reduce_max": lambda: zt.reduce_max(x, -1),
    }
    out = runs[op]()
    with pytest.raises(zyntax.ArgumentError, match="requires grad"):
        out.float().sum().backward()


# ------------------------------------------------------------------ the eager routes


def _passthrough() -> Any:
    """A dispatch mode that changes nothing but makes the ops take the custom
    op's generic autograd path (:func:`zt._route` says ``_OP`` under a mode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            return func(*args, **(kwargs or {}))

    return Passthrough()


def test_eager_grad_calls_take_the_function_and_match_the_op() -> None:
    """An eager call that needs a gradient runs the op's autograd.Function
    (zyntax.kernels without the dispatcher), one that needs none the kernel
    itself; both give what the custom op's generic path gives, gradients
    included. ``torch.ops.zyntax.*`` called directly takes the same routes
    (its AutogradCUDA kernel, zt._install_fast)."""
    ops = zt.register()
    x, w, b = _rand(33, 1000), _rand(1000), _rand(1000)
    up = _rand(33, 1000)
    grads = []
    for path in ("function", "op", "generic"):
        leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        if path == "function":
            y = zt.softmax(zt.layer_norm(*leaves))
            assert type(y.grad_fn).__name__ == "ZyntaxSoftmaxFunctionBackward"
        elif path == "op":
            y = ops.softmax(ops.layer_norm(*leaves, 1e-5))
            if zt._fast_libs:
                assert type(y.grad_fn).__name__ == "ZyntaxSoftmaxFunctionBackward"
        else:
            with _passthrough():
                y = ops.softmax(ops.layer_norm(*leaves, 1e-5))
            assert "ZyntaxSoftmaxFunction" not in type(y.grad_fn).__name__
        (y * up).sum().backward()
        grads.append([t.grad for t in leaves])
    for i, (got, want) in enumerate(zip(grads[0], grads[2], strict=True)):
        assert got is not None and torch.equal(got, want), f"grad of input {i}"
    for i, (got, want) in enumerate(zip(grads[1], grads[2], strict=True)):
        assert got is not None and torch.equal(got, want), f"grad of input {i} (op)"
    # Nothing needs a gradient: the op's fast kernel runs the kernel itself.
    with torch.no_grad():
        got = ops.softmax(x)
    assert got.grad_fn is None
    torch.testing.assert_close(got.double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-5)
    y = zt.softmax(x)  # nothing needs a gradient: the kernel's own output
    assert y.grad_fn is None and not y.requires_grad
    with torch.no_grad():
        assert zt.softmax(x.detach().clone().requires_grad_()).grad_fn is None
    assert zt._route(_rand(4)) == zt._DIRECT
    assert zt._route(_rand(4).requires_grad_()) == zt._FUNCTION


def test_eager_attention_function_gives_no_lse_gradient_work() -> None:
    """The attention Function leaves an unused LSE's gradient None (no zero
    tensor is added) and its gradients match the op's."""
    if zt.backward_kernel("attention") is None:
        pytest.skip("no attention backward in this tree")
    ops = zt.register()
    q, k, v = (_rand(1, 2, 70, 64, dtype=torch.bfloat16) for _ in range(3))
    do = _rand(1, 2, 70, 64, dtype=torch.bfloat16)
    grads = []
    for path in ("function", "op"):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        if path == "function":
            out = zt.attention(*leaves, causal=True)
            assert type(out.grad_fn).__name__ == "ZyntaxAttentionFunctionBackward"
        else:
            out = ops.attention(*leaves, True, None, None)[0]
        out.backward(do)
        grads.append([t.grad.float() for t in leaves])
    for i, (got, want) in enumerate(zip(*grads, strict=True)):
        # dQ is added atomically: the order of the adds may differ run to run.
        assert (got - want).abs().max().item() <= 1e-2 * want.abs().max().item(), f"input {i}"
