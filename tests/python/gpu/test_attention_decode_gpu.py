"""Split-KV decode, paged KV caches and varlen batches
(zyntax.kernels.attention_decode through kernels.attention) on the GPU
against float64 on fresh random inputs, outputs and scratch poisoned first:
1/4/16 queries over long caches with tails, GQA 32/8 and MQA, every head
dim, causal bottom-right, paged caches with shuffled block tables and
per-sequence lengths, varlen with ragged lengths including 1 and 0. The
interpreter version: tests/python/test_attention_decode.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from zyntax import kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
from attention_ref import BF16, DEV, check, poison_outputs, reference  # noqa: E402

dec_mod = __import__("zyntax.kernels.attention_decode", fromlist=["forward"])


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    poison_outputs(monkeypatch)


def test_decode_is_the_default_route(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = dec_mod.forward

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(dec_mod, "forward", spy)
    q = torch.randn(2, 32, 1, 128, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 8, 4099, 128, device=DEV, dtype=BF16) for _ in range(2))
    out, lse = kernels.attention(q, k, v, return_lse=True)
    assert calls == [1]
    check(out, lse, *reference(q, k, v, 1 / math.sqrt(128), False))


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize(("h", "hk"), [(32, 8), (8, 1), (4, 4)])
@pytest.mark.parametrize("sq", [1, 4, 16])
@pytest.mark.parametrize("causal", [False, True])
def test_decode_contiguous(dtype: Any, h: int, hk: int, sq: int, causal: bool) -> None:
    """Strided (B, S, Hk, D) cache storage, a tail of keys (5001)."""
    q = torch.randn(3, h, sq, 128, device=DEV, dtype=dtype)
    k = torch.randn(3, 5001, hk, 128, device=DEV, dtype=dtype).transpose(1, 2)
    v = torch.randn(3, 5001, hk, 128, device=DEV, dtype=dtype).transpose(1, 2)
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="decode")
    check(out, lse, *reference(q, k, v, 1 / math.sqrt(128), causal))


@pytest.mark.parametrize("d", [64, 96, 256])
@pytest.mark.parametrize("splits", [None, 1, 7])
def test_decode_head_dims_and_splits(d: int, splits: Any) -> None:
    q = torch.randn(2, 8, 3, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 2, 2000, d, device=DEV, dtype=BF16) for _ in range(2))
    tq, tk, tv = (dec_mod.T.tensor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    scale = 1 / math.sqrt(d)
    out, lse = dec_mod.forward(
        tq,
        tk,
        tv,
        causal=True,
        scale_log2=scale * 1.4426950408889634,
        window=(100, 0),
        stream=None,
        splits=splits,
    )
    check(out, lse, *reference(q, k, v, scale, True, (100, 0)))


def paged_case(
    b: int, h: int, hk: int, sq: int, d: int, page: int, lens: list[int], causal: bool
) -> None:
    pages = max(-(-n // page) for n in lens) + 1
    nblocks = b * pages + 5
    kc = torch.randn(nblocks, page, hk, d, device=DEV, dtype=BF16)
    vc = torch.randn(nblocks, page, hk, d, device=DEV, dtype=BF16)
    table = torch.randperm(nblocks, device=DEV)[: b * pages].view(b, pages).to(torch.int32)
    q = torch.randn(b, h, sq, d, device=DEV, dtype=BF16)
    seqlens = torch.tensor(lens, device=DEV, dtype=torch.int32)
    out, lse = kernels.attention(
        q, kc, vc, causal=causal, block_table=table, cache_seqlens=seqlens, return_lse=True
    )
    for i, n in enumerate(lens):
        rows = table[i].long()
        k = kc[rows].reshape(-1, hk, d)[:n].transpose(0, 1)[None]
        v = vc[rows].reshape(-1, hk, d)[:n].transpose(0, 1)[None]
        check(out[i : i + 1], lse[i : i + 1], *reference(q[i : i + 1], k, v, d**-0.5, causal))


@pytest.mark.parametrize(("page", "lens"), [(256, [4097, 300, 1]), (16, [1000, 17, 513])])
@pytest.mark.parametrize(("h", "hk", "sq"), [(32, 8, 1), (8, 1, 4), (32, 8, 16)])
def test_paged(page: int, lens: list[int], h: int, hk: int, sq: int) -> None:
    paged_case(len(lens), h, hk, sq, 128, page, lens, causal=sq > 1)


def test_cache_seqlens_contiguous() -> None:
    q = torch.randn(3, 32, 2, 64, device=DEV, dtype=BF16)
    k, v = (torch.randn(3, 8, 3000, 64, device=DEV, dtype=BF16) for _ in range(2))
    lens = [3000, 1, 1234]
    out, lse = kernels.attention(
        q, k, v, causal=True, return_lse=True, cache_seqlens=torch.tensor(lens, device=DEV).int()
    )
    for i, n in enumerate(lens):
        ref = reference(q[i : i + 1], k[i : i + 1, :, :n], v[i : i + 1, :, :n], 1 / 8, True)
        check(out[i : i + 1], lse[i : i + 1], *ref)


@pytest.mark.parametrize(("h", "hk", "d"), [(32, 8, 128), (8, 1, 64), (6, 6, 96), (4, 2, 256)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen(h: int, hk: int, d: int, causal: bool) -> None:
    lq = [700, 1, 0, 333, 64, 1025]
    lk = [700, 40, 5, 333, 0, 1500]
    cq = torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], device=DEV, dtype=torch.int32)
    ck = torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], device=DEV, dtype=torch.int32)
    q = torch.randn(sum(lq), h, d, device=DEV, dtype=BF16)
    k, v = (torch.randn(sum(lk), hk, d, device=DEV, dtype=BF16) for _ in range(2))
    out, lse = kernels.attention(
        q,
        k,
        v,
        causal=causal,
        return_lse=True,
        cu_seqlens_q=cq,
        cu_seqlens_k=ck,
        max_seqlen_q=max(lq),
        max_seqlen_k=max(lk),
    )
    assert out.shape == q.shape and lse.shape == (h, sum(lq))
    for i in range(len(lq)):
        a, b_ = int(cq[i]), int(cq[i + 1])
        if a == b_:
            continue
        qi = q[a:b_].transpose(0, 1)[None]
        ki = k[int(ck[i]) : int(ck[i + 1])].transpose(0, 1)[None]
        vi = v[int(ck[i]) : int(ck[i + 1])].transpose(0, 1)[None]
        oi, li = out[a:b_].transpose(0, 1)[None], lse[:, a:b_][None]
        if ki.shape[2] == 0:  # no keys: 0 and an LSE of -inf
            assert torch.equal(oi, torch.zeros_like(oi)) and torch.isneginf(li).all()
            continue
        check(oi, li, *reference(qi, ki, vi, d**-0.5, causal))


def test_errors() -> None:
    from zyntax import ArgumentError

    q = torch.randn(2, 4, 1, 64, device=DEV, dtype=BF16)
    kc = torch.randn(10, 16, 2, 64, device=DEV, dtype=BF16)
    with pytest.raises(ArgumentError, match="block_table"):
        kernels.attention(q, kc, kc, block_table=torch.zeros(2, 3, device=DEV))  # float
    with pytest.raises(ArgumentError, match="block_table"):
        kernels.attention(q, kc, kc, block_table=torch.zeros(3, 3, device=DEV).int())
    with pytest.raises(ArgumentError, match="cu_seqlens_q"):
        kernels.attention(q[0], kc[0], kc[0], cu_seqlens_k=torch.zeros(3, device=DEV).int())


@pytest.mark.parametrize("variant", ["decode_s2k32", "decode_s1k32"])
def test_forms(variant: str) -> None:
    """The split kernel's other forms (the two-stage ring, 32-key tiles)."""
    q = torch.randn(2, 32, 1, 128, device=DEV, dtype=BF16)
    k, v = (torch.randn(2, 8, 3000, 128, device=DEV, dtype=BF16) for _ in range(2))
    out, lse = kernels.attention(q, k, v, return_lse=True, variant=variant)
    check(out, lse, *reference(q, k, v, 128**-0.5, False))
