"""Decode and varlen cases of ``benches/attention.py --decode`` (bench
``attention``, cases ``fwd_decode_...`` and ``fwd_varlen_...``).

Decode: one query (or a few) over a KV cache with LLaMA-3-8B's heads (32
query / 8 KV heads, head dim 128), bf16, contiguous ``(B, Hk, S, D)`` or
paged (``[num_blocks, 256, Hk, D]`` pages in a shuffled block table): rows
``zyntax`` (attention()'s default, the split-KV kernel), ``zyntax_paged``
(the same cache paged), SDPA's fastest backend on the contiguous cache
(``enable_gqa``, no copy of K/V) and FlashAttention's
``flash_attn_with_kvcache`` (contiguous and paged) when it imports, and
``zyntax[s<stages>k<keys>]`` for other forms of the split kernel
(``ZYNTAX_BENCH_DECODE``). Two
metrics a row: TFLOP/s (4·B·H·Sq·Sk·D) and GB/s (the K and V bytes read
plus q and o). Inputs rotate over copies that together exceed L2.

Varlen: 8 sequences of ragged lengths (fixed seed), causal, packed
``(tokens, H, D)`` with ``cu_seqlens``: ``zyntax`` against SDPA on the
batch padded to the longest (is_causal; the padded rows' work counted for
nobody) and SDPA called once per sequence. Every row is checked against
SDPA (relative error < 2e-2) before timing; rows are timed in interleaved
rounds, each keeping its best.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from typing import Any

from _common import Results, event_median_ms

from zyntax import kernels

#: (case, batch, query heads, KV heads, queries, cache tokens, head dim)
DECODE_CASES = [
    ("fwd_decode_b8_h32kv8_q1_s32768_hd128", 8, 32, 8, 1, 32768, 128),
    ("fwd_decode_b1_h32kv8_q1_s32768_hd128", 1, 32, 8, 1, 32768, 128),
    ("fwd_decode_b8_h32kv8_q1_s4096_hd128", 8, 32, 8, 1, 4096, 128),
    ("fwd_decode_b1_h32kv8_q1_s4096_hd128", 1, 32, 8, 1, 4096, 128),
]
#: (case, query heads, KV heads, head dim, sequence lengths)
VARLEN_CASES = [
    ("fwd_varlen_b8_h32kv8_hd128_causal", 32, 8, 128, [3000, 517, 4096, 1, 2048, 1500, 64, 3333]),
]
PAGE = 256
#: Bytes the rotating input copies of a case should exceed (H200's L2: 60 MB).
ROTATE_BYTES = 256 << 20


def _sdpa(torch: Any, backends: dict[str, Any], sdpa_kernel: Any, fn: Callable[[], Any]) -> Any:
    """(name, call) of SDPA's fastest working backend for `fn` (run under
    each backend once; timing picks the best later), or [] if none runs."""
    out = []
    for name, backend in backends.items() or {"default": None}.items():

        def call(backend: Any = backend) -> Any:
            if backend is None:
                return fn()
            with sdpa_kernel([backend]):
                return fn()

        try:
            call()
            out.append((f"torch_sdpa[{name}]", call))
        except Exception as e:
            print(f"  (SDPA backend {name} unavailable: {type(e).__name__})")
    return out


def _time(
    res: Results,
    name: str,
    rows: list[tuple[str, Callable[[int], Any]]],
    sets: int,
    flops: float,
    nbytes: float,
    iters: int,
    rounds: int,
) -> None:
    best: dict[str, float] = {}
    for _ in range(rounds):
        for impl, call in rows:
            ms = event_median_ms(call, sets, iters)
            best[impl] = min(ms, best.get(impl, ms))
    sdpa = [(ms, impl) for impl, ms in best.items() if impl.startswith("torch_sdpa[")]
    for impl, ms in best.items():
        if impl.startswith("torch_sdpa["):
            continue
        _add(res, name, impl, ms, flops, nbytes, {})
    if sdpa:
        ms, impl = min(sdpa)
        _add(res, name, "torch_sdpa", ms, flops, nbytes, {"backend": impl[11:-1]})


def _add(
    res: Results, name: str, impl: str, ms: float, flops: float, nbytes: float, extra: Any
) -> None:
    res.add(name, impl, "TFLOP_per_s", flops / (ms * 1e-3) / 1e12, False, ms=round(ms, 4), **extra)
    res.add(name, impl, "GB_per_s", nbytes / (ms * 1e-3) / 1e9, False, ms=round(ms, 4), **extra)


def _configs() -> list[str]:
    """``ZYNTAX_BENCH_DECODE``: split-kernel forms timed beside the default on
    the contiguous cache, comma-separated ``s<stages>[k<keys>][w<waves>]``
    (attention()'s ``variant="decode_<form>"``: build's ring depth and keys
    per tile, plan's waves; default ``s2k32,s1k32``; empty: none)."""
    return [c for c in os.environ.get("ZYNTAX_BENCH_DECODE", "s2k32,s1k32").split(",") if c]


def _forced(qs: list[Any], ks: list[Any], vs: list[Any], cfg: str) -> Callable[[int], Any]:
    """attention() with ``variant="decode_<cfg>"`` (planned as the default)."""

    def call(i: int) -> Any:
        return kernels.attention(
            qs[i], ks[i].transpose(1, 2), vs[i].transpose(1, 2), variant=f"decode_{cfg}"
        )

    return call


def run_decode(
    res: Results,
    torch: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    iters: int,
    rounds: int,
    names: list[str] | None,
) -> None:
    try:
        from flash_attn import flash_attn_with_kvcache  # type: ignore[import-not-found]
    except ImportError:
        flash_attn_with_kvcache = None
        print("  (flash_attn not importable: no flash_attn_with_kvcache row)")
    for case in DECODE_CASES:
        if not names or case[0] in names:
            _decode_case(
                res, torch, backends, sdpa_kernel, iters, rounds, case, flash_attn_with_kvcache
            )
            torch.cuda.empty_cache()


def _decode_case(
    res: Results,
    torch: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    iters: int,
    rounds: int,
    case: tuple[Any, ...],
    flash_attn_with_kvcache: Any,
) -> None:
    F = torch.nn.functional
    dev = torch.device("cuda")
    name, b, h, hk, sq, sk, d = case
    kv_bytes = 2 * b * hk * sk * d * 2
    sets = max(1, min(8, -(-ROTATE_BYTES // kv_bytes)))
    flops = 4 * b * h * sq * sk * d
    nbytes = kv_bytes + 2 * b * h * sq * d * 2
    g = torch.Generator(device=dev).manual_seed(0)
    qs, ks, vs, kps, vps, tables = [], [], [], [], [], []
    pages = sk // PAGE
    for _ in range(sets):
        qs.append(torch.randn(b, h, sq, d, device=dev, dtype=torch.bfloat16, generator=g))
        # The cache in FlashAttention's (B, S, Hk, D) storage, seen as (B, Hk, S, D).
        kc = torch.randn(b, sk, hk, d, device=dev, dtype=torch.bfloat16, generator=g)
        vc = torch.randn(b, sk, hk, d, device=dev, dtype=torch.bfloat16, generator=g)
        ks.append(kc)
        vs.append(vc)
        perm = torch.randperm(b * pages, device=dev, generator=g).to(torch.int32)
        table = perm.view(b, pages)
        kp = torch.empty(b * pages, PAGE, hk, d, device=dev, dtype=torch.bfloat16)
        vp = torch.empty_like(kp)
        kp[table.long().flatten()] = kc.reshape(b * pages, PAGE, hk, d)
        vp[table.long().flatten()] = vc.reshape(b * pages, PAGE, hk, d)
        kps.append(kp)
        vps.append(vp)
        tables.append(table)
    lens = torch.full((b,), sk, device=dev, dtype=torch.int32)
    ref = F.scaled_dot_product_attention(
        qs[0].double(),
        ks[0].transpose(1, 2).double(),
        vs[0].transpose(1, 2).double(),
        enable_gqa=True,
    )

    def zy(i: int) -> Any:
        return kernels.attention(qs[i], ks[i].transpose(1, 2), vs[i].transpose(1, 2))

    def zy_paged(i: int) -> Any:
        return kernels.attention(qs[i], kps[i], vps[i], block_table=tables[i], cache_seqlens=lens)

    calls: list[tuple[str, Callable[[int], Any]]] = [("zyntax", zy), ("zyntax_paged", zy_paged)]
    for cfg in _configs():
        calls.append((f"zyntax[{cfg}]", _forced(qs, ks, vs, cfg)))
    if flash_attn_with_kvcache is not None:

        def fa(i: int) -> Any:  # (B, Sq, H, D) in and out
            return flash_attn_with_kvcache(qs[i].transpose(1, 2), ks[i], vs[i])

        def fa_paged(i: int) -> Any:
            return flash_attn_with_kvcache(
                qs[i].transpose(1, 2),
                kps[i],
                vps[i],
                cache_seqlens=lens,
                block_table=tables[i],
            )

        calls += [("flash_attn_kvcache", fa), ("flash_attn_kvcache_paged", fa_paged)]
    rows: list[tuple[str, Callable[[int], Any]]] = []
    for impl, call in calls:
        try:
            out = call(0)
            if impl.startswith("flash_attn"):
                out = out.transpose(1, 2)
            err = float((out.double() - ref).norm() / ref.norm())
            print(f"  {name} {impl}: relative error vs float64 SDPA {err:.2e}")
            if err < 2e-2:
                rows.append((impl, call))
        except Exception as e:
            print(f"  ({impl} failed: {type(e).__name__}: {e})")
    kt = [x.transpose(1, 2) for x in ks]
    vt = [x.transpose(1, 2) for x in vs]
    for impl, _ in _sdpa(
        torch,
        backends,
        sdpa_kernel,
        lambda: F.scaled_dot_product_attention(qs[0], kt[0], vt[0], enable_gqa=True),
    ):
        bname = impl[11:-1]

        def sd(i: int, bname: str = bname) -> Any:
            backend = backends.get(bname)
            if backend is None:
                return F.scaled_dot_product_attention(qs[i], kt[i], vt[i], enable_gqa=True)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qs[i], kt[i], vt[i], enable_gqa=True)

        rows.append((impl, sd))
    _time(res, name, rows, sets, flops, nbytes, iters, rounds)


def run_varlen(
    res: Results,
    torch: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    iters: int,
    rounds: int,
    names: list[str] | None,
) -> None:
    for case in VARLEN_CASES:
        if not names or case[0] in names:
            _varlen_case(res, torch, backends, sdpa_kernel, iters, rounds, case)


def _varlen_case(
    res: Results,
    torch: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    iters: int,
    rounds: int,
    case: tuple[Any, ...],
) -> None:
    F = torch.nn.functional
    dev = torch.device("cuda")
    name, h, hk, d, lens = case
    g = torch.Generator(device=dev).manual_seed(1)
    total, mx = sum(lens), max(lens)
    cu = torch.tensor([0, *itertools.accumulate(lens)], device=dev, dtype=torch.int32)
    q, k, v = (
        torch.randn(total, n, d, device=dev, dtype=torch.bfloat16, generator=g) for n in (h, hk, hk)
    )
    flops = sum(2 * n * n * d * h for n in lens)  # causal: half of 4·n²·D per head
    nbytes = (2 * q.numel() + 2 * k.numel()) * 2  # q, o, k, v once

    def seq(x: Any, i: int) -> Any:  # sequence i as (1, heads, n, D)
        return x[int(cu[i]) : int(cu[i + 1])].transpose(0, 1)[None]

    group = h // hk
    starts = [int(x) for x in cu.tolist()]
    ref = torch.cat(
        [
            F.scaled_dot_product_attention(
                seq(q, i).double(),
                seq(k, i).double().repeat_interleave(group, 1),
                seq(v, i).double().repeat_interleave(group, 1),
                is_causal=True,
            )[0].transpose(0, 1)
            for i in range(len(lens))
        ]
    )
    padded = [torch.zeros(len(lens), n, mx, d, device=dev, dtype=q.dtype) for n in (h, hk, hk)]
    for i, n in enumerate(lens):
        for p, x in zip(padded, (q, k, v), strict=True):
            p[i, :, :n] = x[starts[i] : starts[i] + n].transpose(0, 1)

    def zy(_i: int, variant: str | None = None) -> Any:
        return kernels.attention(
            q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=mx,
            max_seqlen_k=mx, variant=variant,
        )  # fmt: skip

    def pad_out(o: Any) -> Any:
        return torch.cat([o[i, :, :n].transpose(0, 1) for i, n in enumerate(lens)])

    rows: list[tuple[str, Callable[[int], Any]]] = []
    out = zy(0)
    err = float((out.double() - ref).norm() / ref.norm())
    print(f"  {name} zyntax: relative error vs float64 SDPA {err:.2e}")
    if err < 2e-2:
        rows.append(("zyntax", zy))
    for cfg in _configs():
        call = functools.partial(zy, variant=f"decode_{cfg}")
        err = float((call(0).double() - ref).norm() / ref.norm())
        print(f"  {name} zyntax[{cfg}]: relative error vs float64 SDPA {err:.2e}")
        if err < 2e-2:
            rows.append((f"zyntax[{cfg}]", call))
    qp, kp, vp = padded
    for impl, call in _sdpa(
        torch,
        backends,
        sdpa_kernel,
        lambda: F.scaled_dot_product_attention(qp, kp, vp, is_causal=True, enable_gqa=True),
    ):
        err = float((pad_out(call()).double() - ref).norm() / ref.norm())
        print(f"  {name} {impl} (padded): relative error {err:.2e}")
        if err < 2e-2:
            rows.append((f"{impl[:-1]},padded]", lambda _i, call=call: call()))
    seqs = [(seq(q, i), seq(k, i), seq(v, i)) for i in range(len(lens))]

    def looped(_i: int) -> Any:
        return [
            F.scaled_dot_product_attention(a, b_, c, is_causal=True, enable_gqa=True)
            for a, b_, c in seqs
        ]

    rows.append(("torch_sdpa_looped", looped))
    _time(res, name, rows, 1, flops, nbytes, iters, rounds)


__all__ = ["run_decode", "run_varlen"]
