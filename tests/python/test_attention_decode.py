"""Split-KV decode, paged KV caches and varlen batches
(zyntax.kernels.attention_decode through kernels.attention) on the
interpreter against float64 on fresh random inputs, outputs and scratch
poisoned first: 1/4/16 queries, tails, GQA and MQA, head dims 64/96/256,
causal bottom-right (rows that see no key), windows, several splits merged
by the combine tile program, paged caches with shuffled block tables (pages
smaller than, equal to and larger than a key tile), varlen with ragged
lengths including 1 and 0, typed errors. The device version:
tests/python/gpu/test_attention_decode_gpu.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import zyntax
from test_attention_tile import reference
from zyntax import ArgumentError, kernels, ptxinfo
from zyntax.kernels import _tensors as T
from zyntax.kernels import attention_decode as dec

rng = np.random.default_rng()


@pytest.fixture(autouse=True)
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    real = T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj.fill(np.nan if obj.dtype.kind == "f" else -(2**30))
        return obj, t

    monkeypatch.setattr(T, "output", output)


def randn(*shape: int) -> Any:
    return rng.standard_normal(shape).astype(np.float16)


def check(out: Any, lse: Any, ref: Any, ref_lse: Any) -> None:
    o = out.astype(np.float64)
    assert not np.isnan(o).any(), "NaN in the output (an element not written?)"
    assert np.linalg.norm(o - ref) / max(np.linalg.norm(ref), 1e-30) < 5e-3
    empty = np.isneginf(ref_lse)
    assert np.array_equal(np.isneginf(lse), empty)
    assert np.allclose(lse[~empty], ref_lse[~empty], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("b", "h", "hk", "sq", "sk", "d", "causal", "window"),
    [
        (1, 4, 1, 1, 700, 64, False, None),  # MQA, 1 query, splits with a tail
        (2, 8, 2, 4, 333, 128, True, None),  # GQA, 4 queries
        (1, 4, 1, 16, 700, 96, True, None),  # 64 packed rows over 4 warps, hd 96
        (1, 2, 2, 3, 600, 256, False, None),  # hd 256 (32-key tiles)
        (1, 8, 1, 16, 300, 64, False, None),  # 128 packed rows: two row blocks
        (1, 8, 1, 5, 3, 64, True, None),  # Sq > Sk: rows that see no key
        (1, 4, 2, 2, 900, 128, False, (100, 0)),  # sliding window
        (1, 2, 1, 2, 257, 64, False, (None, 10)),  # a window's right side only
    ],
)
def test_decode(
    b: int, h: int, hk: int, sq: int, sk: int, d: int, causal: bool, window: Any
) -> None:
    q, k, v = randn(b, h, sq, d), randn(b, hk, sk, d), randn(b, hk, sk, d)
    out, lse = kernels.attention(
        q, k, v, causal=causal, window=window, return_lse=True, variant="decode"
    )
    check(out, lse, *reference(q, k, v, 1 / math.sqrt(d), causal, window))


@pytest.mark.parametrize(
    ("splits", "stages", "keys"),
    [(1, 1, 0), (3, 1, 0), (40, 1, 0), (1, 2, 0), (3, 2, 32), (2, 2, 128), (5, 1, 32)],
)
def test_split_counts_and_rings(splits: int, stages: int, keys: int) -> None:
    """One split writes the output itself; several go through the combine
    program, including more splits than key tiles (empty splits: LSE -inf);
    the two-stage K/V ring and other tile sizes (build's stages, keys)."""
    q, k, v = randn(1, 4, 2, 64), randn(1, 2, 500, 64), randn(1, 2, 500, 64)
    tq, tk, tv = (T.tensor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    out, lse = dec.forward(
        tq, tk, tv, causal=True, scale_log2=1 / 8 * 1.4426950408889634, window=None, stream=None,
        splits=splits, stages=stages, keys=keys,
    )  # fmt: skip
    check(out, lse, *reference(q, k, v, 1 / 8, True, None))


@pytest.mark.parametrize("variant", ["decode_s2k32", "decode_s1k32w2", "decode_s2"])
def test_forms_by_variant(variant: str) -> None:
    """variant="decode_<form>" picks the split kernel's ring depth, tile keys
    and waves, through attention() (and with a paged cache)."""
    q, k, v = randn(1, 4, 2, 64), randn(1, 2, 333, 64), randn(1, 2, 333, 64)
    out, lse = kernels.attention(q, k, v, causal=True, return_lse=True, variant=variant)
    check(out, lse, *reference(q, k, v, 1 / 8, True, None))
    kc = k[0].transpose(1, 0, 2)[:320].reshape(5, 64, 2, 64)
    vc = v[0].transpose(1, 0, 2)[:320].reshape(5, 64, 2, 64)
    table = np.array([[3, 1, 4, 0, 2]], np.int32)
    out, lse = kernels.attention(
        q, kc[table[0].argsort()], vc[table[0].argsort()], block_table=table, return_lse=True,
        variant=variant,
    )  # fmt: skip
    check(out, lse, *reference(q, k[:, :, :320], v[:, :, :320], 1 / 8, False, None))


def test_plan() -> None:
    """Splits are whole tiles, at least 4 of them, at most MAX_SPLITS."""
    for sk in (1, 100, 4096, 32768, 1 << 22):
        chunk, n = dec.plan(None, 8, 1, sk, 128, 1)
        assert chunk % 64 == 0 and chunk >= 256 and n * chunk >= sk > (n - 1) * chunk
        assert 1 <= n <= dec.MAX_SPLITS


def paged(
    b: int,
    h: int,
    hk: int,
    sq: int,
    d: int,
    page: int,
    lens: list[int],
    causal: bool,
    stages: int | None = None,
) -> None:
    pages = max(-(-n // page) for n in lens) + 1
    nblocks = b * pages + 3
    kc, vc = randn(nblocks, page, hk, d), randn(nblocks, page, hk, d)
    table = rng.permutation(nblocks)[: b * pages].reshape(b, pages).astype(np.int32)
    q = randn(b, h, sq, d)
    seqlens = np.array(lens, np.int32)
    if stages is None:
        out, lse = kernels.attention(
            q, kc, vc, causal=causal, block_table=table, cache_seqlens=seqlens, return_lse=True
        )
    else:  # the split kernel's forward with a given ring depth
        args = [T.tensor(x, n) for x, n in ((q, "q"), (kc, "k"), (vc, "v"))]
        out, lse = dec.forward(
            *args, causal=causal, scale_log2=d**-0.5 * 1.4426950408889634, window=None,
            stream=None, block_table=T.tensor(table, "block_table"),
            cache_seqlens=T.tensor(seqlens, "cache_seqlens"), stages=stages,
        )  # fmt: skip
    for i, n in enumerate(lens):
        k = kc[table[i]].reshape(-1, hk, d)[:n].transpose(1, 0, 2)[None]
        v = vc[table[i]].reshape(-1, hk, d)[:n].transpose(1, 0, 2)[None]
        ref = reference(q[i : i + 1], k, v, d**-0.5, causal, None)
        check(out[i : i + 1], lse[i : i + 1], *ref)


@pytest.mark.parametrize(
    ("page", "lens", "sq", "causal", "stages"),
    [
        (16, [300, 41], 1, False, None),  # pages smaller than a tile: a table read per row
        (64, [500, 130], 4, True, None),  # a tile per page
        (128, [257, 1, 129], 2, True, None),  # pages of two tiles; a 1-key cache
        (64, [700, 65], 1, False, 2),  # the two-stage ring
        (16, [300, 3], 3, True, 2),
    ],
)
def test_paged(page: int, lens: list[int], sq: int, causal: bool, stages: Any) -> None:
    paged(len(lens), 8, 2, sq, 64, page, lens, causal, stages)


def test_cache_seqlens_contiguous() -> None:
    q, k, v = randn(2, 4, 3, 64), randn(2, 1, 400, 64), randn(2, 1, 400, 64)
    lens = [400, 2]
    out, lse = kernels.attention(
        q, k, v, causal=True, cache_seqlens=np.array(lens, np.int32), return_lse=True
    )
    for i, n in enumerate(lens):
        ref = reference(q[i : i + 1], k[i : i + 1, :, :n], v[i : i + 1, :, :n], 1 / 8, True, None)
        check(out[i : i + 1], lse[i : i + 1], *ref)


@pytest.mark.parametrize(
    ("lq", "lk", "h", "hk", "causal"),
    [
        ([70, 1, 0, 33], [70, 5, 3, 100], 4, 2, True),
        ([5, 130, 2], [9, 130, 0], 2, 2, False),
        ([17, 1], [1, 17], 4, 1, True),
    ],
)
def test_varlen(
    lq: list[int], lk: list[int], h: int, hk: int, causal: bool, variant: Any = None
) -> None:
    d = 64
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q, k, v = randn(int(cq[-1]), h, d), randn(int(ck[-1]), hk, d), randn(int(ck[-1]), hk, d)
    out, lse = kernels.attention(
        q, k, v, causal=causal, return_lse=True, cu_seqlens_q=cq, cu_seqlens_k=ck,
        max_seqlen_q=max(lq), max_seqlen_k=max(lk), variant=variant,
    )  # fmt: skip
    assert out.shape == q.shape and lse.shape == (h, cq[-1])
    for i in range(len(lq)):
        qs, ks = slice(cq[i], cq[i + 1]), slice(ck[i], ck[i + 1])
        if lq[i] == 0:
            continue
        oi, li = out[qs].transpose(1, 0, 2)[None], lse[:, qs][None]
        if lk[i] == 0:
            assert not oi.any() and np.isneginf(li).all()
            continue
        qi, ki, vi = (x.transpose(1, 0, 2)[None] for x in (q[qs], k[ks], v[ks]))
        check(oi, li, *reference(qi, ki, vi, d**-0.5, causal, None))


@pytest.mark.parametrize("variant", ["decode_s2", "decode_s1k32", "decode_s2k128"])
def test_varlen_forms(variant: str) -> None:
    test_varlen([70, 1, 0, 130], [70, 5, 3, 200], 4, 2, True, variant)


def test_errors() -> None:
    q, kc = randn(2, 4, 1, 64), randn(10, 16, 2, 64)
    table = np.zeros((2, 3), np.int32)
    with pytest.raises(ArgumentError, match=r"'block_table'.*i32"):
        kernels.attention(q, kc, kc, block_table=table.astype(np.int64))
    with pytest.raises(ArgumentError, match="'block_table'"):
        kernels.attention(q, kc, kc, block_table=np.zeros((3, 3), np.int32))
    with pytest.raises(ArgumentError, match="'block_table': values"):
        kernels.attention(q, kc, kc, block_table=table + 10)
    with pytest.raises(ArgumentError, match="'cache_seqlens': values"):
        kernels.attention(q, kc, kc, block_table=table, cache_seqlens=np.array([49, 1], np.int32))
    with pytest.raises(ArgumentError, match="'k'"):
        kernels.attention(q, kc[:, :, :, :32], kc[:, :, :, :32], block_table=table)
    with pytest.raises(ArgumentError, match="'variant'"):
        kernels.attention(q, kc, kc, block_table=table, variant="sm90")
    with pytest.raises(ArgumentError, match=r"'variant'.*decode_s3"):
        kernels.attention(q, kc, kc, block_table=table, variant="decode_s3")
    cu = np.array([0, 1, 2], np.int32)
    q3, kv3 = randn(2, 4, 64), randn(2, 2, 64)  # packed (tokens, heads, head dim)
    with pytest.raises(ArgumentError, match="'cu_seqlens_q'"):
        kernels.attention(q3, kv3, kv3, cu_seqlens_k=cu)
    with pytest.raises(ArgumentError, match="'max_seqlen_q'"):
        kernels.attention(q3, kv3, kv3, cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(ArgumentError, match="'cu_seqlens_k': values"):
        kernels.attention(
            q3, kv3, kv3, cu_seqlens_q=cu, cu_seqlens_k=cu * 20, max_seqlen_q=1, max_seqlen_k=20
        )
    with pytest.raises(ArgumentError, match="'max_seqlen_q'"):
        kernels.attention(
            q3, kv3, kv3, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=0, max_seqlen_k=1
        )
    with pytest.raises(ArgumentError, match="'max_seqlen_k'"):
        kernels.attention(q, kc, kc, max_seqlen_k=3)


@pytest.mark.parametrize(
    "key",
    [
        ("bf16", 128, 1, False, False, False, "fixed", 0, False, 1, 0),  # decode, 32/8 heads
        ("bf16", 128, 4, True, True, False, "lens", 16, False, 1, 0),  # paged, row table reads
        ("f16", 64, 2, True, False, False, "lens", 256, False, 1, 0),
        ("bf16", 96, 4, True, False, True, "cu", 0, True, 1, 0),  # varlen
        ("bf16", 256, 1, True, False, False, "fixed", 0, False, 1, 0),  # Q re-read per tile
        ("bf16", 128, 1, False, False, False, "fixed", 0, False, 2, 32),  # the ring
    ],
)
def test_assembles_without_spills(key: tuple[Any, ...]) -> None:
    """ptxas for sm_90a: the split kernel's forms keep everything in registers."""
    ptx = zyntax.compile(dec.build(*key), backend="nvptx", arch="sm_90a")
    r = ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, "sm_90a").log)["attention_split"]
    assert r["spill_store_bytes"] == 0 and r["stack_bytes"] == 0, r
