"""Attention forward of ``zyntax.kernels.attention`` (row ``zyntax``: its
default, the sm_90a wgmma/TMA path on Hopper with the loop of
``attention_sm90.DEFAULT_LOOP`` for the case; ``zyntax_sm80``: the mma.sync
path; on Hopper also ``zyntax_sm90_<loop>`` for each sm_90a consumer loop of
``attention_sm90.LOOPS``, run by ``variant="sm90_<loop>"``) against PyTorch's
``scaled_dot_product_attention`` and Triton's
fused-attention tutorial kernel (bench ``attention``, metric ``TFLOP_per_s``:
4·B·H·S²·D forward FLOPs, halved when causal, over the best of three
interleaved rounds of median CUDA-event times).

Cases (bf16, 16k tokens per batch, 2048 / D heads): ``fwd_bf16_hd128_s4096``,
``fwd_bf16_hd128_s16384``, ``fwd_bf16_hd128_s16384_causal``,
``fwd_bf16_hd64_s16384``, ``fwd_bf16_hd64_s16384_causal``
(``ZYNTAX_BENCH_ONLY=case,case`` runs only those cases,
``ZYNTAX_BENCH_LOOPS=loop,loop`` only those sm_90a loops). PyTorch's row
is its fastest available SDPA backend on the card (flash, cuDNN,
memory-efficient), named in the row.
Issue 24's shapes (``SHAPE_CASES``: batch, query heads, KV heads, tokens,
head dim, causal in the name, e.g. ``fwd_bf16_b1_h32kv8_s2048_hd128_causal``)
run rows ``zyntax`` (the default dispatch) and ``zyntax_tile`` (the tile
program, ``variant="tile"``), ``zyntax_tile[<shape>]`` for each tile shape
of ``ZYNTAX_BENCH_TILES`` (tile_configs), and Triton's kernel where it
applies (no GQA, D 64/128, S a multiple of 128) against SDPA's fastest
backend (grouped-query K/V expanded to the query heads for SDPA and Triton).
The Triton kernel follows the tutorial (``06-fused-attention``): a 128-row
query block, exp2 softmax with the scale folded in, the causal diagonal
blocks masked in a second stage. Every output is checked against PyTorch
before timing. ``python benches/attention.py [--quick]``.

``--decode`` runs only the decode and varlen cases (``fwd_decode_...``,
``fwd_varlen_...``, benches/_attention_decode.py: TFLOP/s and GB/s against
SDPA and FlashAttention's ``flash_attn_with_kvcache`` where installed).

``--backward`` runs only the backward cases instead (``bwd_...``, bench
``attention_bwd``; benches/_attention_bwd.py): ``kernels.attention_backward``
against SDPA's backward and the backward of Triton's tutorial.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from _attention_rows import Row, time_rows
from _common import Results, optional, parse_args

from zyntax import kernels
from zyntax.kernels import attention_sm90 as sm90

#: Interleaved timing rounds per row (run_case).
ROUNDS = 3


def triton_attention() -> Callable[..., Any] | None:
    triton = optional("triton")
    if triton is None:
        return None
    import triton.language as tl

    @triton.jit
    def _inner(
        acc,
        l_i,
        m_i,
        q,
        k_ptrs,
        v_ptrs,
        stride_kn,
        stride_vn,
        start_m,
        qk_scale,
        lo,
        hi,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        MASK: tl.constexpr,
    ):
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        k_ptrs += lo * stride_kn
        v_ptrs += lo * stride_vn
        for start_n in range(lo, hi, BLOCK_N):
            k = tl.load(k_ptrs)
            qk = tl.dot(q, k)
            if MASK:
                keep = offs_m[:, None] >= (start_n + offs_n[None, :])
                qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
                m_ij = tl.maximum(m_i, tl.max(qk, 1))
                qk -= m_ij[:, None]
            else:
                m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                qk = qk * qk_scale - m_ij[:, None]
            p = tl.math.exp2(qk)
            alpha = tl.math.exp2(m_i - m_ij)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = tl.load(v_ptrs)
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_ij
            k_ptrs += BLOCK_N * stride_kn
            v_ptrs += BLOCK_N * stride_vn
        return acc, l_i, m_i

    @triton.jit
    def _fwd(
        Q,
        K,
        V,
        Out,
        sm_scale,
        sqz,
        sqh,
        sqm,
        skz,
        skh,
        skn,
        svz,
        svh,
        svn,
        soz,
        soh,
        som,
        H,
        N_CTX,
        HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):
        start_m = tl.program_id(0)
        off_hz = tl.program_id(1)
        z, h = off_hz // H, off_hz % H
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + z * sqz + h * sqh + offs_m[:, None] * sqm + offs_d[None, :])
        k_ptrs = K + z * skz + h * skh + offs_n[None, :] * skn + offs_d[:, None]
        v_ptrs = V + z * svz + h * svh + offs_n[:, None] * svn + offs_d[None, :]
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.44269504
        if CAUSAL:
            acc, l_i, m_i = _inner(
                acc,
                l_i,
                m_i,
                q,
                k_ptrs,
                v_ptrs,
                skn,
                svn,
                start_m,
                qk_scale,
                0,
                start_m * BLOCK_M,
                BLOCK_M,
                BLOCK_N,
                False,
            )
            acc, l_i, m_i = _inner(
                acc,
                l_i,
                m_i,
                q,
                k_ptrs,
                v_ptrs,
                skn,
                svn,
                start_m,
                qk_scale,
                start_m * BLOCK_M,
                (start_m + 1) * BLOCK_M,
                BLOCK_M,
                BLOCK_N,
                True,
            )
        else:
            acc, l_i, m_i = _inner(
                acc,
                l_i,
                m_i,
                q,
                k_ptrs,
                v_ptrs,
                skn,
                svn,
                start_m,
                qk_scale,
                0,
                N_CTX,
                BLOCK_M,
                BLOCK_N,
                False,
            )
        acc = acc / l_i[:, None]
        tl.store(
            Out + z * soz + h * soh + offs_m[:, None] * som + offs_d[None, :],
            acc.to(Out.dtype.element_ty),
        )

    def run(q: Any, k: Any, v: Any, o: Any, causal: bool) -> None:
        b, h, s, d = q.shape
        block_m, block_n = 128, 64
        grid = (triton.cdiv(s, block_m), b * h)
        _fwd[grid](
            q,
            k,
            v,
            o,
            1 / math.sqrt(d),
            *q.stride()[:3],
            *k.stride()[:3],
            *v.stride()[:3],
            *o.stride()[:3],
            h,
            s,
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            num_warps=8 if d == 128 else 4,
            num_stages=3,
        )

    return run


def run_case(
    res: Results,
    torch: Any,
    tri: Callable[..., Any] | None,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    name: str,
    d: int,
    s: int,
    causal: bool,
    iters: int,
    variants: bool,
) -> None:
    """The default rows and the peers, or (`variants`) the sm_90a rows that
    are off by default. Every row is checked against SDPA first, then the
    rows are timed in ROUNDS interleaved rounds (each a median of `iters`
    calls; the row keeps its best round), so a clock or temperature drift
    during the run falls on every row alike."""
    F = torch.nn.functional
    dev = torch.device("cuda")
    batch, heads = max(1, 16384 // s), 2048 // d
    flops = 4 * batch * heads * s * s * d / (2 if causal else 1)
    q, k, v = (torch.randn(batch, heads, s, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def check(impl: str, out: Any) -> bool:
        err = float((out.double() - ref.double()).norm() / ref.double().norm())
        print(f"  {name} {impl}: relative error vs SDPA {err:.2e}")
        return err < 2e-2

    hopper = torch.cuda.get_device_capability()[0] == 9
    # (row, the `variant` argument of kernels.attention)
    ours: list[tuple[str, str | None]] = []
    if not variants:
        ours += [("zyntax", None), ("zyntax_sm80", "sm80"), ("zyntax_tile", "tile")]
    elif hopper:
        only = os.environ.get("ZYNTAX_BENCH_LOOPS")
        ours += [
            (f"zyntax_sm90_{loop}", f"sm90_{loop}")
            for loop, lp in sm90.LOOPS.items()
            # Three consumers at head dim 128 spill (160 registers): not timed.
            if sm90.fits(d, lp)
            and (lp.consumers == 2 or d == 64)
            and (not only or loop in only.split(","))
        ]
    # (row, call, extra fields of the row)
    rows: list[Row] = []
    for impl, variant in ours:

        def call(variant: str | None = variant) -> Any:
            return kernels.attention(q, k, v, causal=causal, variant=variant)

        path = variant or ("sm90" if hopper else "sm80")
        if variant is None and hopper:
            path = f"sm90_{sm90.DEFAULT_LOOP[d, causal]}"
        try:
            if check(impl, call()):
                rows.append((impl, call, {"path": path}))
        except Exception as e:
            print(f"  ({impl} failed: {type(e).__name__}: {e})")
    if not variants:
        for cfg in tile_configs(d):
            call = tile_call(torch, q, k, v, causal, cfg[:-1])
            try:
                if check(f"zyntax_tile[{cfg[-1]}]", call()):
                    rows.append((f"zyntax_tile[{cfg[-1]}]", call, {"path": "tile"}))
            except Exception as e:
                print(f"  (zyntax_tile[{cfg[-1]}] failed: {type(e).__name__}: {e})")
        rows += sdpa_rows(torch, F, backends, sdpa_kernel, q, k, v, causal)
        if tri is not None:
            o = torch.empty_like(q)
            try:
                tri(q, k, v, o, causal)
                if check("triton", o):
                    rows.append(("triton", lambda: tri(q, k, v, o, causal), {}))
            except Exception as e:
                print(f"  (triton failed: {type(e).__name__}: {e})")
    time_rows(res, name, rows, flops, iters, ROUNDS)


def sdpa_rows(
    torch: Any,
    F: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    q: Any,
    k: Any,
    v: Any,
    causal: bool,
    mask: Any = None,
) -> list[Row]:
    """One row per SDPA backend that runs here (``torch_sdpa[<backend>]``;
    the fastest becomes the ``torch_sdpa`` row), or SDPA's own choice. With
    a `mask` (boolean, True: seen; or a torch attention bias), SDPA gets it
    instead of `causal`."""
    rows: list[Row] = []
    kw = {"is_causal": causal} if mask is None else {"attn_mask": mask}
    for bname, backend in backends.items():

        def call(backend: Any = backend) -> Any:
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, **kw)

        try:
            call()
        except Exception as e:
            print(f"  (SDPA backend {bname} unavailable: {type(e).__name__})")
            continue
        rows.append((f"torch_sdpa[{bname}]", call, {}))
    if not rows:
        rows.append(
            (
                "torch_sdpa[default]",
                lambda: F.scaled_dot_product_attention(q, k, v, **kw),
                {},
            )
        )
    return rows


#: (case, batch, query heads, KV heads, tokens, head dim, causal[, extras]):
#: issue 24's shapes. Extras: ``sq`` (queries, when fewer than the keys; the
#: causal mask aligned bottom-right) and ``window`` (attention()'s): SDPA
#: then takes the mask as a boolean tensor (a bottom-right causal one as
#: torch's ``causal_lower_right`` bias), and the FLOPs count the (query, key)
#: pairs the mask shows.
SHAPE_CASES: list[tuple[Any, ...]] = [
    ("fwd_bf16_b1_h32_s1000_hd128", 1, 32, 32, 1000, 128, False),
    ("fwd_bf16_b16_h16_s512_hd64_causal", 16, 16, 16, 512, 64, True),
    ("fwd_bf16_b1_h32_s2048_hd128_causal", 1, 32, 32, 2048, 128, True),
    ("fwd_bf16_b1_h32kv8_s2048_hd128_causal", 1, 32, 8, 2048, 128, True),
    ("fwd_bf16_b4_h16_s2048_hd256_causal", 4, 16, 16, 2048, 256, True),
    ("fwd_bf16_b2_h16_s4096_hd128", 2, 16, 16, 4096, 128, False),
    ("fwd_bf16_b2_h16_s4096_hd96", 2, 16, 16, 4096, 96, False),
    ("fwd_bf16_b2_h16_s4096_hd96_causal", 2, 16, 16, 4096, 96, True),
    ("fwd_bf16_b4_h16_s2048_hd256", 4, 16, 16, 2048, 256, False),
    # Mistral-style sliding window (4096 tokens, 1024 back) with LLaMA-3's heads.
    ("fwd_bf16_b2_h32kv8_s4096_hd128_causal_w1024", 2, 32, 8, 4096, 128, True, {"window": 1024}),
    # Chunked prefill: 512 new queries over a 4096-token cache.
    ("fwd_bf16_b8_h32kv8_q512_s4096_hd128_causal", 8, 32, 8, 4096, 128, True, {"sq": 512}),
    # Decode: one query over a 32k cache (the split-KV route since session 11;
    # --decode has the decode cases against flash_attn_with_kvcache).
    ("fwd_bf16_b8_h32kv8_q1_s32768_hd128", 8, 32, 8, 32768, 128, False, {"sq": 1}),
]


def tile_configs(d: int) -> list[tuple[int, int, int, bool, bool, str, int, bool, bool, str]]:
    """``ZYNTAX_BENCH_TILES``: comma-separated tile-program shapes to time
    beside the default, each ``<rows>x<keys>w<warps>`` with a ``pf`` suffix
    for the prefetching program and then an ``s`` for the one whose whole
    key blocks skip the mask, or ``r<stages>`` for the key loop on a TMA
    ring of that many stages, ``r<stages>o`` with P V in flight across the
    next block's softmax, ``r<stages>ot`` with the warpgroups taking turns
    (attention_tile.build), e.g. ``128x64w8pfs``,
    ``128x64w8r3o``,
    optionally for one head dim only (``128:128x32w8pf``) and for one arch
    (``128x64w8pf@sm_80``: the mma.sync program on Hopper; default: the
    device's, attention_tile.arch_for)."""
    out = []
    for item in filter(None, os.environ.get("ZYNTAX_BENCH_TILES", "").split(",")):
        dim, _, full = item.rpartition(":")
        if dim and int(dim) != d:
            continue
        name, _, arch = full.partition("@")
        name, _, ring = name.partition("r")
        split = name.endswith("s")
        shape = name.removesuffix("s") if split else name
        pf = shape.endswith("pf")
        rows, rest = shape.removesuffix("pf").split("x")
        keys, warps = rest.split("w")
        turns = ring.endswith("ot")
        overlap = ring.removesuffix("t").endswith("o")
        stages = int(ring.removesuffix("t").removesuffix("o") or 0)
        cfg = (int(rows), int(keys), int(warps), pf, split, arch, stages, overlap, turns)
        out.append((*cfg, full))
    return out


def tile_call(
    torch: Any, q: Any, k: Any, v: Any, causal: bool, tiles: tuple[Any, ...]
) -> Callable[[], Any]:
    """The tile program at `tiles` (attention_tile.launch's override),
    launched without attention()'s per-call plan (which keys on the
    arguments, not on the tile shapes)."""
    from zyntax.kernels import _tensors as T
    from zyntax.kernels import attention_tile

    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    args = [T.tensor(x, n) for x, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "lse"))]
    scale = 1 / math.sqrt(q.shape[-1])

    def call() -> Any:
        attention_tile.launch(
            *args, causal=causal, scale=scale, window=None, stream=None, tiles=tiles
        )
        return o

    return call


def run_shape_case(
    res: Results,
    torch: Any,
    tri: Callable[..., Any] | None,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    case: tuple[Any, ...],
    iters: int,
) -> None:
    """One of SHAPE_CASES: rows checked against SDPA, then timed in ROUNDS
    interleaved rounds as run_case does. ``ZYNTAX_BENCH_SHAPE_VARIANTS``
    (comma-separated attention() variants, e.g. ``sm90_plain``, optionally
    for one head dim only: ``256:sm90_plain``) adds a row ``zyntax_<variant>``
    for each."""
    name, b, h, hk, s, d, causal = case[:7]
    extras = case[7] if len(case) > 7 else {}
    sq, window = extras.get("sq", s), extras.get("window")
    F = torch.nn.functional
    dev = torch.device("cuda")
    flops = 4 * b * h * sq * s * d / (2 if causal else 1)
    mask = None
    if extras and (causal or window is not None):  # bottom-right: query i at key i + s - sq
        i = torch.arange(sq, device=dev)[:, None] + (s - sq)
        j = torch.arange(s, device=dev)[None, :]
        mask = j <= i if causal else torch.ones(sq, s, dtype=torch.bool, device=dev)
        if window is not None:
            mask &= (j >= i - window) & (j <= i + window)
        flops = 4 * b * h * d * int(mask.sum())
    q = torch.randn(b, h, sq, d, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, s, d, device=dev, dtype=torch.bfloat16) for _ in range(2))
    ke, ve = k.repeat_interleave(h // hk, 1), v.repeat_interleave(h // hk, 1)
    kw = {"is_causal": causal} if mask is None else {"attn_mask": mask}
    ref = F.scaled_dot_product_attention(q, ke, ve, **kw).double()
    sdpa_mask = mask
    if causal and sq != s and window is None:
        # SDPA's own bottom-right causal mask (flash and memory-efficient
        # backends run it without a mask tensor), where this PyTorch has it.
        try:
            from torch.nn.attention.bias import causal_lower_right

            sdpa_mask = causal_lower_right(sq, s)
        except ImportError:
            pass
    rows: list[Row] = []
    calls: list[tuple[str, Callable[[], Any]]] = []
    picked = []
    for item in filter(None, os.environ.get("ZYNTAX_BENCH_SHAPE_VARIANTS", "").split(",")):
        dim, _, variant = item.rpartition(":")
        if not dim or int(dim) == d:
            picked.append((f"zyntax_{variant}", variant))
    for impl, variant in [("zyntax", None), ("zyntax_tile", "tile"), *picked]:

        def call(variant: str | None = variant) -> Any:
            return kernels.attention(q, k, v, causal=causal, window=window, variant=variant)

        calls.append((impl, call))
    for cfg in tile_configs(d) if not extras else []:
        calls.append((f"zyntax_tile[{cfg[-1]}]", tile_call(torch, q, k, v, causal, cfg[:-1])))
    if tri is not None and h == hk and d in (64, 128) and s % 128 == 0 and not extras:
        o_tri = torch.empty_like(q)

        def run_tri() -> Any:
            assert tri is not None
            tri(q, k, v, o_tri, causal)
            return o_tri

        calls.append(("triton", run_tri))
    for impl, call in calls:
        try:
            err = float((call().double() - ref).norm() / ref.norm())
            print(f"  {name} {impl}: relative error vs SDPA {err:.2e}")
            if err < 2e-2:
                rows.append((impl, call, {}))
        except Exception as e:
            print(f"  ({impl} failed: {type(e).__name__}: {e})")
    rows += sdpa_rows(torch, F, backends, sdpa_kernel, q, ke, ve, causal, sdpa_mask)
    time_rows(res, name, rows, flops, iters, ROUNDS)


def main() -> None:
    backward = "--backward" in sys.argv  # the backward cases (_attention_bwd.py) only
    if backward:
        sys.argv.remove("--backward")
    decode = "--decode" in sys.argv  # the decode / varlen cases (_attention_decode.py) only
    if decode:
        sys.argv.remove("--decode")
    args = parse_args(__doc__ or "attention bench")
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("attention bench: needs PyTorch with CUDA")
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    res = Results("attention", torch.cuda.get_device_name(dev))
    iters = 5 if args.quick else 20
    tri = triton_attention()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = {
            "flash": SDPBackend.FLASH_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION,
        }
    except ImportError:  # older PyTorch: its default choice only
        backends, sdpa_kernel = {}, None
    if decode:
        from _attention_decode import run_decode, run_varlen

        picked = os.environ.get("ZYNTAX_BENCH_ONLY")
        names = picked.split(",") if picked else None
        run_decode(res, torch, backends, sdpa_kernel, iters, ROUNDS, names)
        run_varlen(res, torch, backends, sdpa_kernel, iters, ROUNDS, names)
        res.write(args.out_dir)
        return
    if backward:
        from _attention_bwd import run_backward

        res = Results("attention_bwd", res.device)
        picked = os.environ.get("ZYNTAX_BENCH_ONLY")
        names = picked.split(",") if picked else None
        run_backward(res, torch, backends, sdpa_kernel, iters, ROUNDS, names)
        res.write(args.out_dir)
        return
    cases = [
        ("fwd_bf16_hd128_s4096", 128, 4096, False),
        ("fwd_bf16_hd128_s16384", 128, 16384, False),
        ("fwd_bf16_hd128_s16384_causal", 128, 16384, True),
        ("fwd_bf16_hd64_s16384", 64, 16384, False),
        ("fwd_bf16_hd64_s16384_causal", 64, 16384, True),
    ]
    only = os.environ.get("ZYNTAX_BENCH_ONLY")
    shape_cases = SHAPE_CASES
    if only:
        cases = [c for c in cases if c[0] in only.split(",")]
        shape_cases = [c for c in shape_cases if c[0] in only.split(",")]
    res.notes["shapes"] = "batch = 16384 / S, heads = 2048 / D, bf16, (B, H, S, D) contiguous"
    # Defaults and peers for every case first, then the variants (never run on
    # a device before some of them: a hang there loses no default row), with
    # the rows so far kept in attention-partial.json if a time limit stops it.
    partial = args.out_dir / "attention-partial.json"
    for case in shape_cases:
        run_shape_case(res, torch, tri, backends, sdpa_kernel, case, iters)
        torch.cuda.empty_cache()
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps({"device": res.device, "results": res.rows}, indent=1))
    for variants in (False, True):
        for name, d, s, causal in cases:
            scaled = s // (4 if args.quick else 1)
            run_case(
                res, torch, tri, backends, sdpa_kernel, name, d, scaled, causal, iters, variants
            )
            torch.cuda.empty_cache()
            partial.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps({"device": res.device, "results": res.rows}, indent=1))
    res.write(args.out_dir)
    partial.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
