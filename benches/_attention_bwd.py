"""The backward cases of ``benches/attention.py --backward`` (a module the
bench imports): ``zyntax.kernels.attention_backward`` (dq, dk, dv from the
saved output and LSE; row ``zyntax`` the default: on sm_90 the wgmma kernel
of attention_bwd_sm90.py where it applies, dQ added atomically; row
``zyntax_tile`` the tile programs of attention_bwd.py with atomic dQ; row
``zyntax_deterministic`` the tile programs with a dQ pass of their own;
``ZYNTAX_BENCH_BWD_TILE=0`` leaves both tile rows out
(``ZYNTAX_BENCH_PARTIAL_DIR``: the results so far written there after each
case); rows
``zyntax[<form>]`` at head dim 128 time the sm_90a kernel's forms named in
``ZYNTAX_BENCH_BWD_FORMS``, FORMS) against
PyTorch SDPA's backward (each backend that runs, the fastest kept as
``torch_sdpa``; the backward alone: ``torch.autograd.grad`` of a saved
forward graph) and the backward of Triton's fused-attention tutorial
(``06-fused-attention``: preprocess, a dk/dv program over key blocks and a
dq program over query blocks, the scaled K made inside the call), where it
applies (no GQA, D 64/128, S a multiple of 128). Metric ``TFLOP_per_s``
with backward FLOPs = 2.5x the forward's (4·B·H·S²·D, halved when causal).
Each row's gradients are checked against SDPA's before timing."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _attention_rows import Row, time_rows

from zyntax import kernels
from zyntax.kernels import attention_bwd

#: (case, batch, query heads, KV heads, tokens, head dim, causal).
CASES = [
    ("bwd_bf16_b4_h32_s2048_hd128", 4, 32, 32, 2048, 128, False),
    ("bwd_bf16_b4_h32_s2048_hd128_causal", 4, 32, 32, 2048, 128, True),
    ("bwd_bf16_b2_h32kv8_s4096_hd128_causal", 2, 32, 8, 4096, 128, True),
    ("bwd_bf16_b16_h12_s1024_hd64_causal", 16, 12, 12, 1024, 64, True),
    ("bwd_bf16_b2_h16_s2048_hd256_causal", 2, 16, 16, 2048, 256, True),
]


#: Issue 24's model sweep, causal prefill of 16384 tokens in all (batch =
#: 16384 / S): LLaMA-3-8B's heads (32 query, 8 KV, hd 128), GPT-2's (12,
#: hd 64) and a hd-256 model's (16, as Gemma-7B) at 512 to 8192 tokens. Run
#: with ``ZYNTAX_BENCH_BWD_SWEEP=1`` or by name in ``ZYNTAX_BENCH_ONLY``.
def _sweep_case(h: int, hk: int, s: int, d: int) -> tuple[str, int, int, int, int, int, bool]:
    kv = f"kv{hk}" if hk != h else ""
    return (f"bwd_bf16_b{16384 // s}_h{h}{kv}_s{s}_hd{d}_causal", 16384 // s, h, hk, s, d, True)


SWEEP = [
    _sweep_case(h, hk, s, d)
    for h, hk, d in ((32, 8, 128), (12, 12, 64), (16, 16, 256))
    for s in (512, 1024, 2048, 4096, 8192)
    if _sweep_case(h, hk, s, d) not in CASES  # GPT-2 at 1024 tokens is a case already
]


def triton_backward() -> Callable[..., Any] | None:
    """The tutorial's backward as ``run(q, k, v, o, do, lse, causal, scale)``
    -> (dq, dk, dv), `lse` natural-log (zyntax's); None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def _pre(Out, DO, Delta, N_CTX, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr):
        off_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        off_hz = tl.program_id(1)
        off_n = tl.arange(0, HEAD_DIM)
        base = off_hz * HEAD_DIM * N_CTX + off_m[:, None] * HEAD_DIM + off_n[None, :]
        o = tl.load(Out + base)
        do = tl.load(DO + base).to(tl.float32)
        tl.store(Delta + off_hz * N_CTX + off_m, tl.sum(o * do, axis=1))

    @triton.jit
    def _dkdv(
        dk, dv, Q, k, v, DO, M, D, stride_tok, stride_d,
        BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, HEAD_DIM: tl.constexpr,
        start_n, start_m, num_steps, MASK: tl.constexpr,
    ):  # fmt: skip
        offs_m = start_m + tl.arange(0, BLOCK_M1)
        offs_n = start_n + tl.arange(0, BLOCK_N1)
        offs_k = tl.arange(0, HEAD_DIM)
        qT_ptrs = Q + offs_m[None, :] * stride_tok + offs_k[:, None] * stride_d
        do_ptrs = DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d
        curr_m = start_m
        for _ in range(num_steps):
            qT = tl.load(qT_ptrs)
            offs_m = curr_m + tl.arange(0, BLOCK_M1)
            m = tl.load(M + offs_m)
            pT = tl.math.exp2(tl.dot(k, qT) - m[None, :])
            if MASK:
                pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
            do = tl.load(do_ptrs)
            dv += tl.dot(pT.to(do.dtype), do)
            Di = tl.load(D + offs_m)
            dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
            dsT = (pT * (dpT - Di[None, :])).to(do.dtype)
            dk += tl.dot(dsT, tl.trans(qT))
            curr_m += BLOCK_M1
            qT_ptrs += BLOCK_M1 * stride_tok
            do_ptrs += BLOCK_M1 * stride_tok
        return dk, dv

    @triton.jit
    def _dq(
        dq, q, K, V, do, m, D, stride_tok, stride_d,
        BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, HEAD_DIM: tl.constexpr,
        start_m, start_n, num_steps, MASK: tl.constexpr,
    ):  # fmt: skip
        offs_m = start_m + tl.arange(0, BLOCK_M2)
        offs_n = start_n + tl.arange(0, BLOCK_N2)
        offs_k = tl.arange(0, HEAD_DIM)
        kT_ptrs = K + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
        vT_ptrs = V + offs_n[None, :] * stride_tok + offs_k[:, None] * stride_d
        Di = tl.load(D + offs_m)
        curr_n = start_n
        for _ in range(num_steps):
            kT = tl.load(kT_ptrs)
            vT = tl.load(vT_ptrs)
            p = tl.math.exp2(tl.dot(q, kT) - m)
            if MASK:
                offs_n = curr_n + tl.arange(0, BLOCK_N2)
                p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
            dp = tl.dot(do, vT).to(tl.float32)
            ds = (p * (dp - Di[:, None])).to(kT.dtype)
            dq += tl.dot(ds, tl.trans(kT))
            curr_n += BLOCK_N2
            kT_ptrs += BLOCK_N2 * stride_tok
            vT_ptrs += BLOCK_N2 * stride_tok
        return dq

    @triton.jit
    def _bwd(
        Q, K, V, sm_scale, DO, DQ, DK, DV, M, D, stride_z, stride_h, stride_tok, stride_d,
        H, N_CTX, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, BLOCK_M2: tl.constexpr,
        BLOCK_N2: tl.constexpr, BLK_SLICE_FACTOR: tl.constexpr, HEAD_DIM: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):  # fmt: skip
        LN2: tl.constexpr = 0.6931471824645996
        bhid = tl.program_id(2)
        off_chz = (bhid * N_CTX).to(tl.int64)
        adj = (stride_h * (bhid % H) + stride_z * (bhid // H)).to(tl.int64)
        pid = tl.program_id(0)
        Q += adj
        K += adj
        V += adj
        DO += adj
        DQ += adj
        DK += adj
        DV += adj
        M += off_chz
        D += off_chz
        offs_k = tl.arange(0, HEAD_DIM)
        start_n = pid * BLOCK_N1
        offs_n = start_n + tl.arange(0, BLOCK_N1)
        dv = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        dk = tl.zeros([BLOCK_N1, HEAD_DIM], dtype=tl.float32)
        k = tl.load(K + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d)
        v = tl.load(V + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d)
        if CAUSAL:
            # The diagonal block in slices with the mask, then the rest.
            start_m = start_n
            MASK_BLOCK_M1: tl.constexpr = BLOCK_M1 // BLK_SLICE_FACTOR
            num_steps = BLOCK_N1 // MASK_BLOCK_M1
            dk, dv = _dkdv(
                dk, dv, Q, k, v, DO, M, D, stride_tok, stride_d, MASK_BLOCK_M1, BLOCK_N1,
                HEAD_DIM, start_n, start_m, num_steps, MASK=True,
            )  # fmt: skip
            start_m += num_steps * MASK_BLOCK_M1
        else:
            start_m = 0
        num_steps = (N_CTX - start_m) // BLOCK_M1
        dk, dv = _dkdv(
            dk, dv, Q, k, v, DO, M, D, stride_tok, stride_d, BLOCK_M1, BLOCK_N1, HEAD_DIM,
            start_n, start_m, num_steps, MASK=False,
        )  # fmt: skip
        tl.store(DV + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d, dv)
        dk *= sm_scale
        tl.store(DK + offs_n[:, None] * stride_tok + offs_k[None, :] * stride_d, dk)

        start_m = pid * BLOCK_M2
        offs_m = start_m + tl.arange(0, BLOCK_M2)
        q = tl.load(Q + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d)
        do = tl.load(DO + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d)
        dq = tl.zeros([BLOCK_M2, HEAD_DIM], dtype=tl.float32)
        m = tl.load(M + offs_m)[:, None]
        if CAUSAL:
            end_n = start_m + BLOCK_M2
            MASK_BLOCK_N2: tl.constexpr = BLOCK_N2 // BLK_SLICE_FACTOR
            num_steps = BLOCK_M2 // MASK_BLOCK_N2
            dq = _dq(
                dq, q, K, V, do, m, D, stride_tok, stride_d, BLOCK_M2, MASK_BLOCK_N2, HEAD_DIM,
                start_m, end_n - num_steps * MASK_BLOCK_N2, num_steps, MASK=True,
            )  # fmt: skip
            end_n -= num_steps * MASK_BLOCK_N2
        else:
            end_n = N_CTX
        num_steps = end_n // BLOCK_N2
        dq = _dq(
            dq, q, K, V, do, m, D, stride_tok, stride_d, BLOCK_M2, BLOCK_N2, HEAD_DIM,
            start_m, end_n - num_steps * BLOCK_N2, num_steps, MASK=False,
        )  # fmt: skip
        dq *= LN2
        tl.store(DQ + offs_m[:, None] * stride_tok + offs_k[None, :] * stride_d, dq)

    def run(q: Any, k: Any, v: Any, o: Any, do: Any, lse: Any, causal: bool, scale: float) -> Any:
        import torch

        b, h, s, d = q.shape
        rcp_ln2 = 1.4426950408889634
        arg_k = k * (scale * rcp_ln2)
        m = lse * rcp_ln2  # the tutorial's M: the LSE in the exp2 domain
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        delta = torch.empty_like(m)
        _pre[(s // 128, b * h)](o, do, delta, s, BLOCK_M=128, HEAD_DIM=d)
        _bwd[(s // 128, 1, b * h)](
            q, arg_k, v, scale, do, dq, dk, dv, m, delta, *q.stride(), h, s,
            BLOCK_M1=32, BLOCK_N1=128, BLOCK_M2=128, BLOCK_N2=32, BLK_SLICE_FACTOR=2,
            HEAD_DIM=d, CAUSAL=causal, num_warps=4, num_stages=5,
        )  # fmt: skip
        return dq, dk, dv

    return run


#: Forms of the sm_90a kernel (attention_bwd_sm90's knobs) the bench can time
#: against its default (``ZYNTAX_BENCH_BWD_FORMS=s3,latedk``): dQ split by keys
#: between the consumers, a Q/dO ring of three (two) stages, dK issued after
#: dQ (LATE_DK), the consumers taking turns issuing wgmmas (PINGPONG), the
#: longest (causal) blocks launched first (LONGEST_FIRST), K and V as register
#: A operands at head dim 64 (KV_REGS); session 13: the key descriptors
#: re-derived each step (UNIFORM: no spills), swizzled dQ tiles (DQ_SWIZZLE: no
#: bank conflicts), the dQ tile stored under the next step's products
#: (DEFER_DQ); ``s12``: session 12's kernel (those off, 64 query rows per step
#: at head dim 64, dK and dV stored from the accumulators); ``m128``: 128
#: query rows per step at head dim 64 (BM_HD64); ``direct``: dK and dV stored
#: from the accumulators, not through shared memory (SMEM_EPILOGUE); session
#: 14: ``grp<n>``: blocks launched in groups of n (batch, KV head) pairs
#: (GROUP_BH), ``rows``: the LSE and D rows made in the kernel (FUSE_ROWS),
#: ``ungrouped``: GROUP_BH 0, ``nohint``: mbarrier waits without a suspend-time
#: hint (WAIT_HINT); ``s13``: session 13's default (those four as they were);
#: ``rf``: the LSE read before Sᵀ is issued
#: (ROWS_FIRST).
FORMS = {
    "uni": {"UNIFORM": True},
    "dqsw": {"DQ_SWIZZLE": True},
    "defer": {"DEFER_DQ": True},
    "new": {"UNIFORM": True, "DQ_SWIZZLE": True},
    "new_defer": {"UNIFORM": True, "DQ_SWIZZLE": True, "DEFER_DQ": True},
    "s12": {
        "UNIFORM": False,
        "DQ_SWIZZLE": False,
        "DEFER_DQ": False,
        "BM_HD64": 64,
        "SMEM_EPILOGUE": False,
    },
    "direct": {"SMEM_EPILOGUE": False},
    "m128": {"UNIFORM": True, "DQ_SWIZZLE": True, "BM_HD64": 128},
    "keys": {"SPLIT_KEYS": True},
    "s3": {"STAGES": 3},
    "s2": {"STAGES": 2},
    "latedk": {"LATE_DK": True},
    "latedk_s3": {"LATE_DK": True, "STAGES": 3},
    "s4": {"STAGES": 4},
    "lpt": {"LONGEST_FIRST": True},
    "kvregs": {"KV_REGS": True},
    "lpt_s3": {"LONGEST_FIRST": True, "STAGES": 3},
    "pp": {"PINGPONG": True},
    "pp_latedk": {"PINGPONG": True, "LATE_DK": True},
    "grp4": {"GROUP_BH": 4},
    "grp8": {"GROUP_BH": 8},
    "grp16": {"GROUP_BH": 16},
    "ungrouped": {"GROUP_BH": 0},
    "rows": {"FUSE_ROWS": True},
    "norows": {"FUSE_ROWS": False},
    "rows_grp8": {"FUSE_ROWS": True, "GROUP_BH": 8},
    "nohint": {"WAIT_HINT": None},
    "s13": {"GROUP_BH": 0, "FUSE_ROWS": False, "LATE_DK": False, "WAIT_HINT": 1000},
    "rf": {"ROWS_FIRST": True},
    "latedk_rf": {"ROWS_FIRST": True, "LATE_DK": True},
}


#: Head dims a form applies to (others: 64 and 128).
FORM_DIMS = {"kvregs": (64,), "s4": (64,), "m128": (64,)}


#: The knob setting whose launches attention_backward's plans hold.
_planned_as: list[str | None] = [None]


def as_row(row: str, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` (which sets row `row`'s knobs around attention_backward) with
    the plans forgotten first when the last call was another row's:
    attention_backward replays the launches it recorded for the same
    argument key (``T.planned``) whatever a knob says now (until session 13
    the form rows replayed the default's kernel)."""

    def run() -> Any:
        if _planned_as[0] != row:
            kernels.attention_backward.plans.clear()  # type: ignore[attr-defined]
            _planned_as[0] = row
        return call()

    return run


def sm90_form(form: str, *args: Any) -> Callable[[], Any]:
    """attention_backward(*args) with the sm_90a kernel's knobs set to `form`."""
    from zyntax.kernels import attention_bwd_sm90

    q, k, v, o, lse, do, causal = args

    def run() -> Any:
        saved = {n: getattr(attention_bwd_sm90, n) for n in FORMS[form]}
        for n, val in FORMS[form].items():
            setattr(attention_bwd_sm90, n, val)
        try:
            return kernels.attention_backward(q, k, v, o, lse, do, causal=causal)
        finally:
            for n, val in saved.items():
                setattr(attention_bwd_sm90, n, val)

    return as_row(form, run)


def run_backward(
    res: Any,
    torch: Any,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    iters: int,
    rounds: int,
    only: list[str] | None,
) -> None:
    """Every case of CASES (or those named in `only`)."""
    tri = triton_backward()
    sweep = os.environ.get("ZYNTAX_BENCH_BWD_SWEEP") == "1"
    partial = os.environ.get("ZYNTAX_BENCH_PARTIAL_DIR")  # results so far, after each case
    for case in CASES + SWEEP:
        if (case[0] in only) if only else (case in CASES or sweep):
            run_case(res, torch, tri, backends, sdpa_kernel, case, iters, rounds)
            torch.cuda.empty_cache()
            if partial:  # a time limit that stops the bench keeps the cases done
                res.write(Path(partial))


def run_case(
    res: Any,
    torch: Any,
    tri: Callable[..., Any] | None,
    backends: dict[str, Any],
    sdpa_kernel: Any,
    case: tuple[str, int, int, int, int, int, bool],
    iters: int,
    rounds: int,
) -> None:
    """One case: rows checked against SDPA's gradients, then timed in
    `rounds` interleaved rounds (each row keeps its best)."""
    name, b, h, hk, s, d, causal = case
    F = torch.nn.functional
    dev = torch.device("cuda")
    flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
    scale = 1 / math.sqrt(d)
    q = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, s, d, device=dev, dtype=torch.bfloat16) for _ in range(2))
    do = torch.randn_like(q)
    group = h // hk
    ke, ve = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    o, lse = kernels.attention(q, k, v, causal=causal, return_lse=True)

    def tile_programs() -> Any:
        """The default's call with the sm_90a kernel switched off."""
        attention_bwd.SM90 = False
        try:
            return kernels.attention_backward(q, k, v, o, lse, do, causal=causal)
        finally:
            attention_bwd.SM90 = None

    calls: list[tuple[str, Callable[[], Any]]] = [
        (
            "zyntax",
            as_row("", lambda: kernels.attention_backward(q, k, v, o, lse, do, causal=causal)),
        ),
    ]
    for form in filter(None, os.environ.get("ZYNTAX_BENCH_BWD_FORMS", "").split(",")):
        if d in FORM_DIMS.get(form, (64, 128)):  # the sm_90a kernel's forms: zyntax[<form>]
            calls.append((f"zyntax[{form}]", sm90_form(form, q, k, v, o, lse, do, causal)))
    if os.environ.get("ZYNTAX_BENCH_BWD_TILE", "1") != "0":  # 0: the default row alone
        calls.append(("zyntax_tile", as_row("tile", tile_programs)))
        calls.append(
            (
                "zyntax_deterministic",
                lambda: kernels.attention_backward(
                    q, k, v, o, lse, do, causal=causal, deterministic=True
                ),
            )
        )
    if tri is not None and h == hk and d in (64, 128) and s % 128 == 0:
        calls.append(("triton", lambda: tri(q, k, v, o, do, lse, causal, scale)))
    named = 0
    for bname, backend in [*backends.items(), ("default", None)]:
        if backend is None and named:
            break  # SDPA's own choice only where no backend could be named
        leaves = [t.detach().clone().requires_grad_() for t in (q, ke, ve)]
        try:
            if backend is None:
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
            else:
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(*leaves, is_causal=causal)
        except Exception as e:
            print(f"  (SDPA backend {bname} unavailable: {type(e).__name__})")
            continue
        named += 1

        def sdpa(out: Any = out, leaves: Any = leaves) -> Any:
            return torch.autograd.grad(out, leaves, do, retain_graph=True)

        calls.append((f"torch_sdpa[{bname}]", sdpa))

    def grads(call: Callable[[], Any]) -> list[Any]:
        """dq, dk, dv in f64; SDPA's dk, dv of the expanded K, V summed per group."""
        dq, dk, dv = call()
        if dk.shape[1] != hk:
            dk, dv = (x.unflatten(1, (hk, group)).sum(2) for x in (dk, dv))
        return [x.double() for x in (dq, dk, dv)]

    ref = None
    for impl, call in calls:  # the first SDPA backend that runs is the reference
        if impl.startswith("torch_sdpa") and ref is None:
            ref = grads(call)
    good: list[Row] = []
    for impl, call in calls:
        try:
            got = grads(call)
        except Exception as e:
            print(f"  ({impl} failed: {type(e).__name__}: {e})")
            continue
        if ref is not None:
            errs = [
                float((x - r).norm() / r.norm().clamp_min(1e-30))
                for x, r in zip(got, ref, strict=True)
            ]
            shown = " ".join(f"{e:.1e}" for e in errs)
            print(f"  {name} {impl}: relative error of dq, dk, dv vs SDPA {shown}")
            if not max(errs) < 3e-2:
                continue
        good.append((impl, call, {}))
    del ref
    time_rows(res, name, good, flops, iters, rounds)
