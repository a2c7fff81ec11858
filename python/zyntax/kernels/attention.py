"""Attention forward, FlashAttention-2 style on warp ``mma.sync`` (sm_80+):
``softmax(q @ k^T * scale [+ causal mask]) @ v`` for bf16/f16 tensors in
PyTorch SDPA's layout (batch, heads, sequence, head dim), head dims 64 and
128, any sequence lengths; optionally the row log-sum-exp a backward pass needs.

One block of four warps owns 128 query rows of one (batch, head); each warp
32 rows (two 16-row slabs), so each K and V fragment feeds four MMAs. Q stays
in shared memory and is read as ``ldmatrix`` fragments per key tile.
The block walks the keys in tiles of 64 (or 128): ``cp.async`` brings the V tile in
while the warps compute S = Q K^T, and the next K tile while they run the
softmax and O += P V. Shared tiles are XOR-swizzled by 16-byte chunk
(``chunk ^ (row % 8)``) so every ``ldmatrix`` is conflict-free. The online
softmax works in the exp2 domain with ``scale·log2 e`` folded into one FMA
per score; the accumulator layout of S is already the A-fragment layout of
P, so P never leaves registers. Causal masking is top-left aligned (key j is
seen by query i when j <= i, as SDPA's ``is_causal``); the key tiles past the
diagonal are skipped. A row whose keys are all masked gives 0 and an LSE of
-inf, never NaN.

On sm_90 devices ``attention()`` runs the sm_90a kernel of
``attention_sm90.py`` (wgmma, TMA, warp specialisation; every head dim,
grouped-query heads, bottom-right masks, windows) instead; ``_variant``
chooses. Elsewhere this kernel runs where it applies, the tile program of
``attention_tile.py`` for the rest.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from zyntax import cuda, hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from . import attention_tile
from ._rows import (
    LN2,
    LOG2E,
    NEG_INF,
    assign,
    p_fragment,
    pack_pair,
    quad,
    read,
    safe_max,
    tree,
    variables,
    vector,
)

__all__ = ["attention"]

WARPS = 4
THREADS = 32 * WARPS


def block_m(atoms: int) -> int:
    """Query rows per block: each warp owns `atoms` slabs of 16 rows."""
    return WARPS * 16 * atoms


def shared_bytes(d: int, atoms: int, bn: int) -> int:
    return (block_m(atoms) + 2 * bn) * d * 2


def _build(dtype: str, d: int, causal: bool, atoms: int = 2, bn: int = 64) -> hir.Module:
    """`atoms` = 16-row slabs per warp. With 2, every K and V fragment feeds
    four mma.sync (two slabs x two k-steps or two n-tiles), halving shared
    memory traffic per MMA; Q fragments are then re-read from shared memory
    each key tile (registers hold the 2 x D/8 accumulators instead). With 1,
    Q stays in registers. `bn`: keys per tile (64 or 128)."""
    elem = T.HIR_TYPE[dtype]
    chunk = hir.vec(elem, 8)  # 16 bytes
    cpr = d // 8  # chunks per row
    bm = block_m(atoms)
    f32x4 = hir.vec(hir.f32, 4)
    u32x2 = hir.vec(hir.u32, 2)
    name = f"attention_{dtype}_d{d}_a{atoms}{'_causal' if causal else ''}"
    m = hir.Module(name, targets=["sm_80", "sm_90"])
    gp = hir.ptr("global", elem)
    params = [gp, gp, gp, gp, hir.ptr("global", hir.f32), hir.u32, hir.u32, hir.u32]
    params += [hir.i64] * 12 + [hir.f32]
    with m.kernel("attention", params, max_threads=THREADS) as b:
        (q, k, v, o, lse, sq, sk, heads, *strides, scale_log2) = b.params
        qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os_ = strides
        tid = b.thread_idx()
        warp, lane = tid >> 5, tid & 31
        g, t = lane >> 2, lane & 3
        mb = b.grid_dim() - 1 - b.block_idx()  # the longest (causal) blocks first
        bh = b.block_idx("y")
        bi = b.cast(b.div(bh, heads), hir.i64)
        hi = b.cast(b.rem(bh, heads), hir.i64)
        m0 = mb * bm
        qbase = b.ptr_add(q, bi * qb + hi * qh)
        kbase = b.ptr_add(k, bi * kb + hi * kh)
        vbase = b.ptr_add(v, bi * vb + hi * vh)
        obase = b.ptr_add(o, bi * ob + hi * oh)
        s_q = b.dyn_shared(chunk)  # Q tile, then the K tile, then the V tile
        s_k = b.ptr_add(s_q, bm * cpr)
        s_v = b.ptr_add(s_k, bn * cpr)

        def swz(r: Any, c: Any) -> Any:
            return r * cpr + (c ^ (r & 7))

        def load_tile(
            dst: hir.Value, base: hir.Value, stride: hir.Value, row0: Any, rows: int, total: Any
        ) -> None:
            """cp.async of rows [row0, row0 + rows) into `dst`; rows past the end
            repeat the last row (their scores are masked, their P is 0)."""
            for i in range(rows * cpr // THREADS):
                idx = tid + i * THREADS
                r, c = idx >> (cpr.bit_length() - 1), idx & (cpr - 1)
                gr = b.min(row0 + r, total - 1)
                src = b.ptr_cast(
                    b.ptr_add(base, b.cast(gr, hir.i64) * stride), hir.ptr("global", chunk)
                )
                b.cp_async(b.ptr_add(dst, swz(r, c)), b.ptr_add(src, c), bytes=16, cache="cg")
            b.cp_async_commit()

        def vec2(x: hir.Value, y: hir.Value) -> hir.Value:
            return vector(b, u32x2, [x, y])

        bases: dict[tuple[str, int], hir.Value] = {}

        def frag_ptr(tile: str, row_const: int, chunk_const: int) -> hir.Value:
            """Address of this lane's ldmatrix row: row `row_const + R(lane)`,
            16-byte chunk `chunk_const + C(lane)` of `tile`, swizzled. Row
            constants are multiples of 8 and chunk constants never share bits
            with C(lane), so the swizzle splits into one lane-dependent base
            per (tile, chunk_const % 8) plus a constant offset that folds into
            the instruction: few live registers however many fragments."""
            k8 = chunk_const & 7
            if (tile, k8) not in bases:
                if tile == "k":  # 8 rows x 4 chunks per x4
                    start, r_lane, c_lane = s_k, lane & 7, lane >> 3
                else:  # 16 rows x 2 chunks per x4
                    r_lane, c_lane = lane & 15, lane >> 4
                    start = s_v
                    if tile == "q":
                        start = b.ptr_add(s_q, warp * (atoms * 16 * cpr))
                term = (c_lane ^ (r_lane & 7)) ^ k8
                bases[tile, k8] = b.ptr_add(start, r_lane * cpr + term)
            return b.ptr_add(bases[tile, k8], row_const * cpr + (chunk_const & ~7))

        def q_frag(a: int, kk: int) -> hir.Value:
            return b.ldmatrix(frag_ptr("q", a * 16, 2 * kk), 4)

        zero = b.const(0.0, hir.f32)
        zero_acc = vector(b, f32x4, [zero] * 4)
        load_tile(s_q, qbase, qs, m0, bm, sq)
        load_tile(s_k, kbase, ks, b.const(0, hir.u32), bn, sk)
        b.cp_async_wait(0)
        b.barrier()
        q_regs = [[q_frag(0, kk) for kk in range(d // 16)]] if atoms == 1 else None
        kv_end = b.min(m0 + bm, sk) if causal else sk
        nblocks = b.div(kv_end + (bn - 1), bn)
        # Rows of this thread: (slab a, half h) -> query index.
        rows = []
        for a in range(atoms):
            qg = m0 + (warp * atoms + a) * 16 + g
            rows += [qg, qg + 8]
        nr = 2 * atoms
        nacc = atoms * (d // 8) * 4  # O accumulators: [slab][n-tile][4]
        init = [b.const(NEG_INF, hir.f32)] * nr + [zero] * nr + [zero] * nacc
        state = variables(b, init, "state")
        with b.for_range(0, nblocks, type=hir.u32) as j:
            cur = read(b, state)
            m_old, l_old, acc = cur[0:nr], cur[nr : 2 * nr], cur[2 * nr :]
            b.barrier()  # every warp is done with the previous V tile
            load_tile(s_v, vbase, vs, j * bn, bn, sk)
            # S = Q K^T: c[a][nt] accumulates slab a, key n-tile nt.
            c = [[zero_acc] * (bn // 8) for _ in range(atoms)]
            for q4 in range(d // 32):
                qf = [
                    [q_regs[0][2 * q4 + e] if q_regs else q_frag(a, 2 * q4 + e) for e in range(2)]
                    for a in range(atoms)
                ]
                for nt in range(bn // 8):
                    kf = b.ldmatrix(frag_ptr("k", nt * 8, 4 * q4), 4)
                    kb0 = vec2(b.extract(kf, 0), b.extract(kf, 1))
                    kb1 = vec2(b.extract(kf, 2), b.extract(kf, 3))
                    for a in range(atoms):
                        c[a][nt] = b.mma_sync(qf[a][0], kb0, c[a][nt], elem=dtype)
                        c[a][nt] = b.mma_sync(qf[a][1], kb1, c[a][nt], elem=dtype)
            # scores[r][x]: row r of this thread (slab a = r // 2, half r % 2).
            scores = [
                [
                    b.extract(c[r >> 1][nt], 2 * (r & 1) + e)
                    for nt in range(bn // 8)
                    for e in range(2)
                ]
                for r in range(nr)
            ]
            b.cp_async_wait(0)
            b.barrier()  # V tile j landed; every warp is done with K tile j
            with b.if_(j + 1 < nblocks):
                load_tile(s_k, kbase, ks, (j + 1) * bn, bn, sk)
            # Mask keys past the end (and past the diagonal when causal); a
            # block-uniform branch, so full tiles pay nothing.
            tile_end = (j + 1) * bn
            partial = tile_end > sk
            if causal:
                partial = b.or_(partial, tile_end > m0 + 1)
            flat_s = [x for row in scores for x in row]
            sel = b.if_else(partial, results=[hir.f32] * len(flat_s))
            with sel as (yes, no):
                with yes:
                    masked = []
                    for r in range(nr):
                        for x, val in enumerate(scores[r]):
                            key = j * bn + (x >> 1) * 8 + (x & 1) + 2 * t
                            ok = key < sk
                            if causal:
                                ok = b.and_(ok, key <= rows[r])
                            masked.append(b.select(ok, val, NEG_INF))
                    yes.yield_(*masked)
                with no:
                    no.yield_(*flat_s)
            per = bn // 4
            scores = [list(sel.results[r * per : (r + 1) * per]) for r in range(nr)]
            # Online softmax in the exp2 domain, one row at a time.
            m_new, l_new, alpha, p = [], [], [], []
            for r in range(nr):
                mx = quad(b, tree(b.max, scores[r]), b.max)
                mn = b.max(m_old[r], mx * scale_log2)
                base = safe_max(b, mn)
                alpha.append(b.ex2_approx(m_old[r] - base))
                pr = [b.ex2_approx(b.fma(x, scale_log2, -base)) for x in scores[r]]
                p.append(pr)
                m_new.append(mn)
                l_new.append(b.fma(l_old[r], alpha[r], tree(b.add, pr)))
            # acc index: ((a * (d // 8)) + nd) * 4 + i; row = 2a + (i >> 1).
            acc = [x * alpha[2 * (n // ((d // 8) * 4)) + ((n % 4) >> 1)] for n, x in enumerate(acc)]
            accv = [
                [
                    vector(b, f32x4, acc[(a * (d // 8) + nd) * 4 : (a * (d // 8) + nd) * 4 + 4])
                    for nd in range(d // 8)
                ]
                for a in range(atoms)
            ]
            # O += P V; P's A fragment for keys 16kk.. is this thread's scores
            # x = 4kk..4kk+3 of rows (2a, 2a+1).
            for kk in range(bn // 16):
                pf = []
                for a in range(atoms):
                    pf.append(p_fragment(b, elem, p[2 * a], p[2 * a + 1], kk))
                for pp in range(d // 16):
                    vf = b.ldmatrix(frag_ptr("v", kk * 16, 2 * pp), 4, trans=True)
                    vb0 = vec2(b.extract(vf, 0), b.extract(vf, 1))
                    vb1 = vec2(b.extract(vf, 2), b.extract(vf, 3))
                    for a in range(atoms):
                        accv[a][2 * pp] = b.mma_sync(pf[a], vb0, accv[a][2 * pp], elem=dtype)
                        accv[a][2 * pp + 1] = b.mma_sync(
                            pf[a], vb1, accv[a][2 * pp + 1], elem=dtype
                        )
            b.cp_async_wait(0)  # K tile j + 1 (made visible by the next barrier)
            flat_acc = [b.extract(x, i) for row in accv for x in row for i in range(4)]
            assign(b, state, [*m_new, *l_new, *flat_acc])
        res = read(b, state)
        m_fin, l_part, acc = res[0:nr], res[nr : 2 * nr], res[2 * nr :]
        out2 = hir.ptr("global", hir.u32)
        for r in range(nr):
            a, h = r >> 1, r & 1
            total = quad(b, l_part[r], b.add)
            empty = b.eq(total, 0.0)
            inv = b.select(empty, 0.0, b.div(b.const(1.0, hir.f32), total))
            with b.if_(rows[r] < sq):
                orow = b.ptr_add(obase, b.cast(rows[r], hir.i64) * os_)
                for nd in range(d // 8):
                    base_i = (a * (d // 8) + nd) * 4 + 2 * h
                    ox, oy = acc[base_i] * inv, acc[base_i + 1] * inv
                    dst = b.ptr_cast(b.ptr_add(orow, nd * 8 + 2 * t), out2)
                    b.store(dst, pack_pair(b, elem, ox, oy))
                with b.if_(b.eq(t, 0)):
                    val = b.select(empty, NEG_INF, b.fma(m_fin[r], LN2, b.log(total)))
                    at = b.cast(bh, hir.i64) * b.cast(sq, hir.i64) + b.cast(rows[r], hir.i64)
                    b.store(b.ptr_add(lse, at), val)
    return m


#: Per (head dim, causal): (16-row slabs per warp, keys per tile), measured
#: on the H100 (docs/performance.md, "Attention"); the knob for sweeps.
SHAPES = {(64, False): (2, 64), (64, True): (2, 64), (128, False): (2, 64), (128, True): (1, 64)}


def _variant(tq: T.Tensor, d: int, variant: str | None) -> tuple[str, str | None]:
    """The kernel for `tq`'s device and its sm_90a consumer loop: ``"sm90"``
    (attention_sm90: wgmma, TMA, warp specialisation) on sm_90 GPUs, else
    ``"sm80"`` (this module's mma.sync kernel). `variant` names one
    explicitly: ``"sm80"``, ``"sm90"`` (the default loop for the shape) or
    ``"sm90_<loop>"`` (a key of attention_sm90.LOOPS); the sm90 ones also
    run on the interpreter."""
    from .attention_sm90 import LOOPS

    if variant is None:
        if tq.on_gpu and SM90_DEFAULT and _major(tq.device) == 9:
            return "sm90", None
        return "sm80", None
    if not isinstance(variant, str):
        raise ArgumentError(f"argument 'variant': expected a str or None, got {T.show(variant)}")
    if variant == "sm80":
        return variant, None
    loop = variant[5:] if isinstance(variant, str) and variant.startswith("sm90_") else None
    if variant != "sm90" and loop not in LOOPS:
        names = ", ".join(f"'sm90_{n}'" for n in LOOPS)
        raise ArgumentError(
            f"argument 'variant': expected 'sm80', 'sm90' or one of {names}, got {variant!r}"
        )
    if tq.on_gpu and _major(tq.device) != 9:
        raise ArgumentError(f"argument 'variant': {variant!r} needs an sm_90 (Hopper) device")
    return "sm90", loop


def _repeat_heads(t: T.Tensor, group: int) -> T.Tensor:
    """`t` (B, Hk, S, D) with each head repeated `group` times (B, Hk * group,
    S, D), by the caller's library (torch ``repeat_interleave``, numpy or
    CuPy ``repeat``, on torch's current stream); `t` itself where the
    library has neither."""
    obj = t.obj
    if hasattr(obj, "repeat_interleave"):
        new = obj.repeat_interleave(group, dim=1)
    elif hasattr(obj, "repeat") and hasattr(obj, "ndim"):
        new = obj.repeat(group, axis=1)
    else:
        return t
    return T.tensor(new, t.name)


#: Whether sm_90 devices get the sm_90a kernel by default.
SM90_DEFAULT = True


def _lse_workspace(tq: T.Tensor, shape: tuple[int, int, int], stream: Any) -> T.Tensor:
    """Where the kernels write the log-sum-exp a call does not return: the
    f32 workspace of the launch's (device, stream) (``gemm._workspace``,
    also the split-K partials': launches on a stream run in order, and what
    lands here is never read), a constant address to the call plans. Saves
    an output allocation per call (issue 25's attention_small)."""
    from .gemm import _workspace

    if stream is None and isinstance(tq.arr, int):
        stream = T._torch_stream(tq)  # launch_loaded's stream for torch tensors
    ws = _workspace(tq.device, stream, shape[0] * shape[1] * shape[2], "partials")
    return T.fixed(ws, int(ws.ptr), "lse", "f32", shape, tq.device)


@functools.cache
def _major(device: int) -> int:
    return int(cuda.Device(device).compute_capability[0])


@T.planned
def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    stream: Any = None,
    variant: str | None = None,
    window: Any = None,
    block_table: Any = None,
    cache_seqlens: Any = None,
    cu_seqlens_q: Any = None,
    cu_seqlens_k: Any = None,
    max_seqlen_q: Any = None,
    max_seqlen_k: Any = None,
) -> Any:
    """``softmax(q @ k^T * scale) @ v`` per (batch, head).

    `q` (B, H, Sq, D), `k` and `v` (B, Hk, Sk, D) with H a multiple of Hk
    (grouped-query / multi-query attention: query head h reads KV head
    h // (H / Hk)): bf16 or f16 GPU tensors (or numpy arrays: the
    interpreter), D 64, 96, 128 or 256, the last axis contiguous. `scale`
    defaults to 1/sqrt(D). Masks are aligned bottom-right (FlashAttention's
    convention; ``variant="sm80"``, when named, aligns `causal` top-left
    as before): query i sits at key position i + Sk - Sq; `causal` hides
    the keys after it, and ``window=(left, right)`` (either side None for
    unbounded; an int w is (w, w)) shows only the keys j with
    i + Sk - Sq - left <= j <= i + Sk - Sq + right. A row that sees no key
    gives 0 and an LSE of -inf. Returns the output (B, H, Sq, D) allocated
    like `q` (a torch output in q's memory order, as SDPA's: q split from a
    (B, Sq, 3, H, D) projection gives a (B, Sq, H, D) layout), and with
    ``return_lse=True`` also the f32 log-sum-exp of each
    row (B, H, Sq), natural log, of the scaled scores. `variant` forces a
    kernel: ``"tile"`` (the tile program of attention_tile.py), ``"sm80"``
    (mma.sync), ``"sm90"`` (wgmma + TMA; sm_90 devices or the interpreter;
    its default consumer loop for the head dim) or ``"sm90_<loop>"`` with
    one of attention_sm90.LOOPS (``"sm90_overlap"``, ``"sm90_plain_wg3"``,
    ...); by default the device's best that supports the arguments (on
    sm_90 the sm90 kernel, which takes everything; elsewhere sm80 for D
    64/128 without windows where Sq == Sk or the mask is not causal, and the
    tile program, which takes everything, for the rest).

    Few queries over long keys (Sq <= 16, Sk >= 512 on a GPU) or
    ``variant="decode"`` run the split-KV decode kernel (attention_decode.py).
    KV caches (FlashAttention's ``flash_attn_with_kvcache`` conventions):
    ``cache_seqlens`` (B,) int32 gives each sequence's keys (the first of
    `k`'s); with ``block_table`` (B, max pages) int32, `k` and `v` are paged
    caches [num_blocks, page_size, Hk, D] and sequence b's key j lives in
    page ``block_table[b, j // page_size]``, row ``j % page_size``.
    Varlen: ``cu_seqlens_q``/``cu_seqlens_k`` (B + 1,) int32 offsets of
    packed q (Tq, H, D) and k, v (Tk, Hk, D), with ``max_seqlen_q``/``_k``
    bounds of the lengths; the output is (Tq, H, D), the LSE (H, Tq).
    """
    causal = T.flag(causal, "causal")
    return_lse = T.flag(return_lse, "return_lse")
    T.stream_arg(stream)
    kv_args = (block_table, cache_seqlens, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    if any(x is not None for x in kv_args):
        from . import attention_decode

        res = attention_decode.attention_kv(
            q,
            k,
            v,
            causal=causal,
            scale=scale,
            window=window,
            stream=stream,
            variant=variant,
            block_table=block_table,
            cache_seqlens=cache_seqlens,
            cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_k=cu_seqlens_k,
            max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k,
        )
        return res if return_lse else res[0]
    tq, tk, tv = T.tensor(q, "q"), T.tensor(k, "k"), T.tensor(v, "v")
    T.same_place(tq, tk, tv)
    bsz, heads, sq, d, kv_heads, sk = attention_tile.qkv_shapes(tq, tk, tv)
    window = attention_tile.window_arg(window)
    # The kernels take scale * log2(e) as an f32: it must be finite and above 0 there.
    scale = 1.0 / math.sqrt(d) if scale is None else T.real(scale, "scale", high=T.F32_MAX / LOG2E)
    if not np.float32(scale * LOG2E) > 0:
        raise ArgumentError(f"argument 'scale': expected a positive number, got {scale!r}")
    for t in (tq, tk, tv):
        if t.strides[3] != 1 or any(s % 8 for s in t.strides[:3]) or t.ptr % 16:
            raise ArgumentError(
                f"argument '{t.name}': the head dim must be contiguous and the other strides "
                f"multiples of 8 elements, 16-byte aligned (strides {t.strides})"
            )
    from . import attention_decode
    from .attention_sm90 import MAX_SEQ

    # Few queries over many keys: the split-KV decode kernel.
    form = attention_decode.form(variant)  # "decode" or "decode_<form>"
    if form is not None or (variant is None and attention_decode.decode_default(tq.on_gpu, sq, sk)):
        if bsz * heads and sq and sk == 0:
            raise ArgumentError("argument 'k': an empty key sequence")
        res = attention_decode.forward(
            tq,
            tk,
            tv,
            causal=causal,
            scale_log2=float(scale) * LOG2E,
            window=window,
            stream=stream,
            stages=(form or {}).get("stages"),
            keys=(form or {}).get("keys"),
            waves=(form or {}).get("waves"),
        )
        return res if return_lse else res[0]
    # The sm_90a kernel takes every head dim, grouped-query heads, windows
    # and bottom-right causal masks; the sm80 one D 64/128 with as many KV
    # heads as query heads and no window, its causal mask top-left (SDPA's
    # is_causal): it runs by default only where both alignments agree.
    kind, loop = ("tile", None) if variant == "tile" else _variant(tq, d, variant)
    if kind == "sm90" and max(sq, sk) >= MAX_SEQ:
        if variant is not None:
            raise ArgumentError(
                f"argument 'variant': {variant!r} takes sequences below {MAX_SEQ} tokens "
                f"({sq} queries, {sk} keys); use 'tile' or None"
            )
        kind = "tile"
    if kind == "sm80":
        if d not in (64, 128) or window is not None:
            if variant is not None:
                raise ArgumentError(
                    f"argument 'variant': {variant!r} takes head dims 64/128 without windows; "
                    "use 'tile' or None"
                )
            kind = "tile"
        elif variant is None and causal and sq != sk:
            kind = "tile"
    if kind == "sm80" and kv_heads != heads and variant is None and stream is None:
        # Grouped-query heads on the sm80 kernel: K and V repeated to the
        # query heads by the caller's library (on torch's current stream),
        # measured 10-15x faster than the tile program (docs/performance.md)
        # for the cost of the copies.
        tk, tv = _repeat_heads(tk, heads // kv_heads), _repeat_heads(tv, heads // kv_heads)
    if kind == "sm80" and tk.shape[1] != heads:
        if variant is not None:
            raise ArgumentError(
                f"argument 'variant': {variant!r} takes as many KV heads as query heads; "
                "use 'tile', an sm90 variant or None"
            )
        kind = "tile"
    if bsz * heads and sq:  # checked before the outputs are allocated
        if sk == 0:
            raise ArgumentError("argument 'k': an empty key sequence")
        if bsz * heads >= 1 << 16 or sq >= 1 << 31:
            raise ArgumentError(f"argument 'q': shape {tq.shape} is too large")
        if sk >= 1 << 31:
            raise ArgumentError(f"argument 'k': shape {tk.shape} is too large")
    # In q's memory order (SDPA's): q, k, v split from one (b, s, 3, h, d) projection
    # give a (b, s, h, d) output, whose (b*s, h*d) view needs no copy.
    out_obj, o = T.output(None, tq, (bsz, heads, sq, d), tq.dtype, keep_order=True)
    if return_lse or not tq.on_gpu:
        lse_obj, lse = T.output(None, tq, (bsz, heads, sq), "f32")
    else:  # nobody reads it: a workspace, no allocation per call
        lse_obj, lse = None, _lse_workspace(tq, (bsz, heads, sq), stream)
    if bsz * heads and sq:
        strides = [*tq.strides[:3], *tk.strides[:3], *tv.strides[:3], *o.strides[:3]]
        if kind == "tile":
            attention_tile.launch(
                tq, tk, tv, o, lse, causal=causal, scale=scale, window=window, stream=stream
            )
        elif kind == "sm90":
            from . import attention_sm90

            attention_sm90.launch(
                tq, tk, tv, o, lse, bool(causal), float(scale) * LOG2E, stream, loop, window
            )
        else:
            args = [tq, tk, tv, o, lse, sq, sk, heads, *strides, float(scale) * LOG2E]
            atoms, bn = SHAPES[d, bool(causal)]
            grid = (-(-sq // block_m(atoms)), bsz * heads)
            key = (tq.dtype, d, bool(causal), atoms, bn)
            smem = shared_bytes(d, atoms, bn)
            T.launch(_build, key, "attention", grid, THREADS, args, tq, stream, shared=smem)
    return (out_obj, lse_obj) if return_lse else out_obj
