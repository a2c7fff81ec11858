"""Shared by the attention GPU tests (test_attention_tile_gpu,
test_attention_sm90_shapes_gpu, test_attention_decode_gpu): the float64
reference with bottom-right masks, the output check, NaN-poisoned outputs,
and the strided-storage and issue-shape cases each route runs. Imported
only after the test module has skipped without torch and CUDA."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from zyntax import kernels

DEV = torch.device("cuda")
BF16 = torch.bfloat16
att_mod = __import__("zyntax.kernels.attention", fromlist=["T"])


def poison_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs (and scratch buffers) allocated by zyntax.kernels start as NaN."""
    real = att_mod.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj.fill_(float("nan") if obj.dtype.is_floating_point else -(2**30))
        return obj, t

    monkeypatch.setattr(att_mod.T, "output", output)


def reference(
    q: Any, k: Any, v: Any, scale: float, causal: bool, window: Any = None
) -> tuple[Any, Any]:
    """float64, masks aligned bottom-right; rows that see no key: 0, LSE -inf."""
    group = q.shape[1] // k.shape[1]
    k64 = k.double().repeat_interleave(group, 1)
    v64 = v.double().repeat_interleave(group, 1)
    s = (q.double() @ k64.transpose(-1, -2)) * scale
    sq, sk = s.shape[-2:]
    i = torch.arange(sq, device=q.device)[:, None] + sk - sq
    j = torch.arange(sk, device=q.device)[None, :]
    left, right = (window, window) if isinstance(window, int) else (window or (None, None))
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left is not None:
        visible &= j >= i - left
    if right is not None:
        visible &= j <= i + right
    if causal:
        visible &= j <= i
    s = s.masked_fill(~visible, -math.inf)
    lse = torch.logsumexp(s, -1)
    p = torch.softmax(s, -1).nan_to_num(0.0)  # empty rows: 0
    return p @ v64, lse


def check(out: Any, lse: Any, ref: Any, ref_lse: Any) -> None:
    out64 = out.double()
    assert not torch.isnan(out64).any(), "NaN in the output (an element not written?)"
    assert float((out64 - ref).norm() / ref.norm().clamp_min(1e-30)) < 1e-2
    empty = torch.isneginf(ref_lse)
    assert torch.equal(torch.isneginf(lse), empty)
    assert torch.allclose(lse[~empty], ref_lse[~empty].float(), rtol=1e-4, atol=1e-4)


def strided_storage_case(variant: str | None) -> None:
    """(B, S, H, D) storage viewed as (B, H, S, D), as transformer code does,
    GQA, hd 96, Sq != Sk, large logits."""
    q = (torch.randn(2, 300, 8, 96, device=DEV, dtype=BF16) * 6).transpose(1, 2)
    k = (torch.randn(2, 280, 2, 96, device=DEV, dtype=BF16) * 6).transpose(1, 2)
    v = torch.randn(2, 280, 2, 96, device=DEV, dtype=BF16).transpose(1, 2)
    out, lse = kernels.attention(q, k, v, causal=True, scale=0.3, return_lse=True, variant=variant)
    check(out, lse, *reference(q, k, v, 0.3, True))


def issue_shapes_case(shapes: list[tuple[int, ...]], variant: str | None) -> None:
    """(batch, heads, kv heads, tokens, head dim, causal) shapes against
    SDPA in f32 (relative error < 1e-2)."""
    F = torch.nn.functional
    for b, h, hk, s, d, causal in shapes:
        q = torch.randn(b, h, s, d, device=DEV, dtype=BF16)
        k, v = (torch.randn(b, hk, s, d, device=DEV, dtype=BF16) for _ in range(2))
        out = kernels.attention(q, k, v, causal=bool(causal), variant=variant)
        g = h // hk
        ref = F.scaled_dot_product_attention(
            q.float(),
            k.float().repeat_interleave(g, 1),
            v.float().repeat_interleave(g, 1),
            is_causal=bool(causal),
        )
        err = float((out.double() - ref.double()).norm() / ref.double().norm())
        assert err < 1e-2, (b, h, hk, s, d, causal, err)
