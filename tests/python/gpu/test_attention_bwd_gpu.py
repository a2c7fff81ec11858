"""Attention backward (zyntax.kernels.attention_backward: on sm_90 the wgmma
kernel of attention_bwd_sm90.py for head dims 64/96/128, the tile programs of
attention_bwd.py elsewhere) on the GPU, through torch autograd (``torch_ops.attention``
with tensors that require grad) against autograd of a float64 reference on
fresh random inputs: bf16 and f16, head dims 64/96/128/256, grouped-query
(32/8) and multi-query heads, causal masks aligned bottom-right for Sq < Sk
and Sq > Sk, tails, strided (B, S, H, D) storage, the LSE output's
gradient, dQ by atomics (the default) and by its own pass (bit-identical
across runs, also under torch.use_deterministic_algorithms), and
``torch.compile`` through the forward and backward ops; test_sm90_kernel
checks that the sm_90a kernel ran. The interpreter versions:
tests/python/test_attention_bwd.py, test_attention_bwd_sm90.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zyntax import kernels
from zyntax.kernels import torch_ops as zt

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
DEV = torch.device("cuda")
BF16 = torch.bfloat16


def reference(q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """float64 (output, LSE) with a bottom-right causal mask; rows that see
    no key: output 0 (their LSE is -inf and gets no gradient)."""
    group = q.shape[1] // k.shape[1]
    k64 = k.double().repeat_interleave(group, 1)
    v64 = v.double().repeat_interleave(group, 1)
    s = (q.double() @ k64.transpose(-1, -2)) * scale
    sq, sk = s.shape[-2:]
    if causal:
        i = torch.arange(sq, device=DEV)[:, None] + sk - sq
        j = torch.arange(sk, device=DEV)[None, :]
        s = s.masked_fill(j > i, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v64, lse


def grads(
    b: int, h: int, hk: int, sq: int, sk: int, d: int, causal: bool, dtype: Any, use_lse: bool
) -> None:
    """zyntax's gradients against float64 autograd of the same loss."""
    q = torch.randn(b, h, sq, d, device=DEV, dtype=dtype)
    k = torch.randn(b, hk, sk, d, device=DEV, dtype=dtype)
    v = torch.randn(b, hk, sk, d, device=DEV, dtype=dtype)
    up = torch.randn(b, h, sq, d, device=DEV, dtype=dtype)
    up_lse = torch.randn(b, h, sq, device=DEV)
    scale = 0.8 / math.sqrt(d)

    def loss(out: Any, lse: Any) -> Any:
        total = (out.double() * up.double()).sum()
        if use_lse:
            finite = torch.isfinite(lse)
            total = total + (lse.double().where(finite, 0.0) * up_lse.double()).sum()
        return total

    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, lse = zt.attention(*leaves, causal=causal, scale=scale, return_lse=True)
    loss(out, lse).backward()
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    loss(*reference(*ref, scale, causal)).backward()
    for name, x, r in zip("qkv", leaves, ref, strict=True):
        assert x.grad is not None and x.grad.dtype == dtype and x.grad.shape == r.shape
        g = x.grad.double()
        assert not torch.isnan(g).any(), f"NaN in d{name}"
        err = float((g - r.grad).norm() / r.grad.norm().clamp_min(1e-30))
        assert err < 2e-2, (f"d{name}", err)


@pytest.mark.parametrize("dtype", [BF16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("d", [64, 96, 128, 256])
def test_head_dims_and_tails(dtype: Any, d: int) -> None:
    grads(2, 3, 3, 257, 300, d, causal=True, dtype=dtype, use_lse=False)


@pytest.mark.parametrize(("h", "hk"), [(32, 8), (8, 1)])
def test_grouped_and_multi_query(h: int, hk: int) -> None:
    grads(1, h, hk, 333, 333, 128, causal=True, dtype=BF16, use_lse=False)


@pytest.mark.parametrize(("sq", "sk"), [(300, 97), (97, 300), (1024, 1024)])
def test_causal_bottom_right_and_lse_gradient(sq: int, sk: int) -> None:
    grads(1, 4, 2, sq, sk, 64, causal=True, dtype=BF16, use_lse=True)


def test_strided_storage() -> None:
    """(B, S, H, D) storage viewed as (B, H, S, D), as transformer code does:
    the backward reads the saved strided views, its gradients come back in
    the views' shapes."""
    q = torch.randn(2, 300, 8, 96, device=DEV, dtype=BF16).transpose(1, 2)
    k = torch.randn(2, 280, 2, 96, device=DEV, dtype=BF16).transpose(1, 2)
    v = torch.randn(2, 280, 2, 96, device=DEV, dtype=BF16).transpose(1, 2)
    up = torch.randn(2, 8, 300, 96, device=DEV, dtype=BF16)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    (zt.attention(*leaves, causal=True, scale=0.3).double() * up.double()).sum().backward()
    ref = [t.detach().double().requires_grad_() for t in (q, k, v)]
    (reference(*ref, 0.3, True)[0] * up.double()).sum().backward()
    for name, x, r in zip("qkv", leaves, ref, strict=True):
        assert x.grad is not None and x.grad.shape == x.shape
        err = float((x.grad.double() - r.grad).norm() / r.grad.norm())
        assert err < 2e-2, (f"d{name}", err)


def test_deterministic() -> None:
    """deterministic=True: backward passes give bit-identical gradients, and
    autograd takes that pass under torch.use_deterministic_algorithms."""
    q = torch.randn(2, 16, 1000, 128, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 4, 1000, 128, device=DEV, dtype=BF16) for _ in range(2))
    do = torch.randn_like(q)
    out, lse = kernels.attention(q, k, v, causal=True, return_lse=True)
    first = kernels.attention_backward(q, k, v, out, lse, do, causal=True, deterministic=True)
    for _ in range(3):
        again = kernels.attention_backward(q, k, v, out, lse, do, causal=True, deterministic=True)
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a, b)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(2):
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
            zt.attention(*leaves, causal=True).backward(do)
            for x, want in zip(leaves, first, strict=True):
                assert torch.equal(x.grad, want)
    finally:
        torch.use_deterministic_algorithms(before)


def test_compiled_forward_and_backward() -> None:
    """torch.compile traces the attention op and its backward op."""
    q = torch.randn(2, 8, 200, 64, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 2, 200, 64, device=DEV, dtype=BF16) for _ in range(2))
    up = torch.randn_like(q)

    def f(q: Any, k: Any, v: Any) -> Any:
        return zt.attention(q, k, v, causal=True) * 2

    results = []
    for fn in (f, torch.compile(f, fullgraph=True)):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
        (fn(*leaves).float() * up.float()).sum().backward()
        results.append([t.grad for t in leaves])
    for got, want in zip(results[1], results[0], strict=True):  # dq by atomics: not bit-exact
        assert float((got.double() - want.double()).norm() / want.double().norm()) < 1e-2


@pytest.mark.parametrize(("h", "hk", "d"), [(16, 4, 128), (6, 6, 64), (4, 2, 256)])
def test_deterministic_dq_pass(h: int, hk: int, d: int) -> None:
    """deterministic=True (dQ by its own pass) against float64 autograd."""
    q = torch.randn(2, h, 517, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, hk, 600, d, device=DEV, dtype=BF16) for _ in range(2))
    do = torch.randn_like(q)
    out, lse = kernels.attention(q, k, v, causal=True, return_lse=True)
    got = kernels.attention_backward(q, k, v, out, lse, do, causal=True, deterministic=True)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    o64, _ = reference(*ref, 1 / math.sqrt(d), True)
    o64.backward(do.double())
    for name, g, r in zip("qkv", got, ref, strict=True):
        assert not torch.isnan(g).any(), f"NaN in d{name}"
        err = float((g.double() - r.grad).norm() / r.grad.norm())
        assert err < 2e-2, (f"d{name}", err)


def _sm90_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts launches of the sm_90a kernel (attention_bwd_sm90) and poisons
    every output and scratch buffer attention_backward allocates with NaN."""
    from zyntax.kernels import attention_bwd, attention_bwd_sm90

    ran: list[int] = []
    real_launch, real_output = attention_bwd_sm90.launch, attention_bwd.T.output

    def launch(*args: Any, **kw: Any) -> None:
        ran.append(1)
        real_launch(*args, **kw)

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real_output(out, like, shape, dtype, **kw)
        obj.fill_(math.nan)
        return obj, t

    monkeypatch.setattr(attention_bwd_sm90, "launch", launch)
    monkeypatch.setattr(attention_bwd.T, "output", output)
    return ran


@pytest.mark.parametrize(
    ("h", "hk", "sq", "sk", "d", "causal", "dtype"),
    [
        (4, 4, 1000, 1000, 128, False, BF16),
        (4, 4, 1001, 1001, 64, True, BF16),
        (4, 2, 1000, 1001, 128, True, torch.float16),
        (32, 8, 300, 300, 128, True, BF16),
        (12, 12, 1024, 1024, 64, True, BF16),
        (2, 1, 500, 97, 64, True, torch.float16),
        (4, 2, 777, 1000, 96, True, BF16),
    ],
)
def test_sm90_kernel(
    monkeypatch: pytest.MonkeyPatch,
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
    dtype: Any,
) -> None:
    """On sm_90 the wgmma kernel (attention_bwd_sm90) computes dK, dV and the
    atomic dQ for head dims 64/96/128: tails, GQA, causal Sq != Sk, against
    float64 autograd, with NaN-poisoned outputs."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm_90a backward needs an sm_90 device")
    ran = _sm90_kernel_runs(monkeypatch)
    q = torch.randn(2, h, sq, d, device=DEV, dtype=dtype)
    k, v = (torch.randn(2, hk, sk, d, device=DEV, dtype=dtype) for _ in range(2))
    do = torch.randn_like(q)
    scale = 0.9 / math.sqrt(d)
    out, lse = kernels.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    got = kernels.attention_backward(q, k, v, out, lse, do, causal=causal, scale=scale)
    assert ran, "the sm_90a kernel did not run"
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    o64, _ = reference(*ref, scale, causal)
    o64.backward(do.double())
    for name, g, r in zip("qkv", got, ref, strict=True):
        assert not torch.isnan(g).any(), f"NaN in d{name}"
        err = float((g.double() - r.grad).norm() / r.grad.norm())
        assert err < 2e-2, (f"d{name}", err)


@pytest.mark.parametrize(
    "knobs",
    [
        # session 12's kernel
        {"UNIFORM": False, "DQ_SWIZZLE": False, "BM_HD64": 64, "SMEM_EPILOGUE": False},
        {"UNIFORM": True, "DQ_SWIZZLE": True, "DEFER_DQ": True},
        {"UNIFORM": True, "DQ_SWIZZLE": True, "DEFER_DQ": True, "SPLIT_KEYS": True},
        {"GROUP_BH": 3, "FUSE_ROWS": True},
        {"GROUP_BH": 0, "FUSE_ROWS": False},
    ],
    ids=["s12", "new_defer", "new_defer_keys", "grp3_rows", "plain"],
)
@pytest.mark.parametrize(
    ("h", "hk", "sq", "sk", "d", "causal"),
    [(4, 2, 1001, 1001, 96, True), (4, 4, 1000, 1000, 128, False), (4, 1, 1001, 777, 64, True)],
)
def test_sm90_forms(
    monkeypatch: pytest.MonkeyPatch,
    knobs: dict[str, bool],
    h: int,
    hk: int,
    sq: int,
    sk: int,
    d: int,
    causal: bool,
) -> None:
    """The sm_90a kernel's forms (attention_bwd_sm90's knobs: session 12's
    kernel, the dQ tile stored a step late, dQ split by keys, blocks grouped
    by (batch, KV head) pairs with the rows made in the kernel, neither of
    those two; the defaults:
    test_sm90_kernel) against float64 autograd, tails, GQA/MQA, Sq != Sk,
    NaN-poisoned outputs. The call plans are forgotten around the call: they
    replay the launches recorded for the same arguments whatever a knob says."""
    from zyntax.kernels import attention_bwd_sm90

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm_90a backward needs an sm_90 device")
    ran = _sm90_kernel_runs(monkeypatch)
    for name, value in knobs.items():
        monkeypatch.setattr(attention_bwd_sm90, name, value)
    q = torch.randn(2, h, sq, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, hk, sk, d, device=DEV, dtype=BF16) for _ in range(2))
    do = torch.randn_like(q)
    scale = 0.9 / math.sqrt(d)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    o64, lse64 = reference(*ref, scale, causal)
    o64.backward(do.double())
    out, lse = o64.detach().to(BF16), lse64.detach().float()
    kernels.attention_backward.plans.clear()  # type: ignore[attr-defined]
    try:
        got = kernels.attention_backward(q, k, v, out, lse, do, causal=causal, scale=scale)
    finally:
        kernels.attention_backward.plans.clear()  # type: ignore[attr-defined]
    assert ran, "the sm_90a kernel did not run"
    for name, g, r in zip("qkv", got, ref, strict=True):
        assert not torch.isnan(g).any(), f"NaN in d{name}"
        err = float((g.double() - r.grad).norm() / r.grad.norm())
        assert err < 2e-2, (f"d{name}", err)
