"""Split-KV attention for few queries over long caches (flash-decoding), over
contiguous or paged KV caches, and the variable-length (``cu_seqlens``)
forward: the kernels behind ``attention(..., block_table=, cache_seqlens=,
cu_seqlens_q=, cu_seqlens_k=)`` and the decode route (docs/attention.md,
"Decode, paged KV caches and varlen batches").

**The split kernel** (builder-written, ``mma.sync``: the tile layer has no
load of a scalar from memory, which addressing a tile through the block
table or ``cu_seqlens`` needs): a block of ``W``
warps owns ``16 W`` *packed rows* of one (batch, KV head) and one *split*
(a chunk of the keys). A packed row is (query head of the KV head's group,
query): row ``r`` is query head ``hk * G + r // Sq`` and query ``r % Sq``,
so the ``G`` query heads that read one KV head share every K and V tile
(grouped-query packing: decode at 32/8 heads puts 4 rows in a warp's 16
instead of one block of 128 rows per head). Each warp runs
FlashAttention-2's loop on its 16 rows over the split's key tiles, ``cp.async``
bringing V while ``S = Q Kᵀ`` runs and the next K while the softmax and
``O += P V`` run (the sm_80 kernel's structure, attention.py). A key row's
address comes from the cache's layout: contiguous ``(B, Hk, Sk, D)`` (any
strides), paged ``[num_blocks, page_size, Hk, D]`` through the block table
(one table read per tile when the page size is a multiple of the tile's
keys, else per row), or packed varlen ``[total, Hk, D]`` from
``cu_seqlens_k``. Masks are bottom-right per sequence (query ``i`` at key
position ``i + Sk_b - Sq_b``), with ``Sk_b`` from ``cache_seqlens`` /
``cu_seqlens_k`` where given.

With several splits each block writes its normalised partial output and
log-sum-exp (f32) and **the combine tile program** merges them:
``o = sum_s exp(lse_s - M) o_s / sum_s exp(lse_s - M)``, ``lse = M + log(...)``.
With one split (the varlen forward) the kernel writes the output and LSE
itself.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

import numpy as np

from zyntax import hir, tile
from zyntax.errors import ArgumentError

from . import _tensors as T
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

#: Sq at or below which attention() takes the split route on a GPU by
#: default (few queries: one 128-row block per head would idle the GPU).
DECODE_MAX_Q = 16
#: Keys at or above which the decode route pays off (below, the regular
#: kernels' one pass over the keys is short anyway).
DECODE_MIN_K = 512
#: Most splits of one row (the combine program's split loop reads them all).
MAX_SPLITS = 256
#: Splits the combine program reads per step.
COMBINE_STEP = 16
#: The split kernel's K/V ring depth and keys per tile (0: tile_keys(d))
#: by default (build's `stages`, `keys`).
STAGES = 1
KEYS = 0
#: Waves of split blocks plan() aims for (the blocks are small; more waves
#: shorten the last one's tail, fewer splits shorten the combine).
WAVES = 4


def tile_keys(d: int) -> int:
    """Keys per K/V tile: 64, 32 at head dim 256 (its accumulators take 128
    registers a thread)."""
    return 32 if d > 128 else 64


def _chunks(d: int) -> tuple[int, int]:
    """(16-byte chunks of a row in shared memory (a power of two, >= 8 for
    the swizzle), chunks of real data): head dim 96 lives in rows of 128."""
    return 1 << (d // 8 - 1).bit_length(), d // 8


def shared_bytes(d: int, warps: int, stages: int = 1, bn: int | None = None) -> int:
    cpr, _ = _chunks(d)
    return (16 * warps + 2 * stages * (bn or tile_keys(d))) * cpr * 16


@functools.cache
def build(
    dtype: str,
    d: int,
    warps: int,
    causal: bool,
    has_left: bool,
    q_cu: bool,
    kv_len: str,
    page: int,
    final: bool,
    stages: int = 1,
    keys: int = 0,
) -> hir.Module:
    """The split kernel. `kv_len`: ``"fixed"`` (every sequence has the
    ``sk`` parameter's keys), ``"lens"`` (``cache_seqlens[b]``) or ``"cu"``
    (``cu_seqlens_k``); `page` > 0: a paged cache of that page size; `q_cu`:
    packed queries with ``cu_seqlens_q``; `final`: write the output (q's
    dtype) and LSE, else the f32 partials of split ``blockIdx.y``. `causal`
    stands for any right bound (a causal mask or a window's right side).

    `stages` 1: one K and one V tile in shared memory, V's copy overlapping
    S = QKᵀ and the next K's the softmax and PV (attention.py's loop);
    2: a ring of two (K, V) tile pairs, the pair two tiles ahead copied
    while a tile is computed (twice the bytes in flight per warp, twice the
    shared memory). `keys`: keys per tile instead of tile_keys(d)."""
    elem = T.HIR_TYPE[dtype]
    chunk = hir.vec(elem, 8)
    cpr, creal = _chunks(d)
    bn = keys or tile_keys(d)
    bm = 16 * warps
    threads = 32 * warps
    f32x4 = hir.vec(hir.f32, 4)
    u32x2 = hir.vec(hir.u32, 2)
    u32p = hir.ptr("global", hir.u32)
    i32, i64 = hir.i32, hir.i64
    name = (
        f"attn_split_{dtype}_d{d}_w{warps}{'_c' if causal else ''}{'_l' if has_left else ''}"
        f"{'_qcu' if q_cu else ''}_{kv_len}{f'_p{page}' if page else ''}{'_fin' if final else ''}"
        f"_s{stages}k{bn}"
    )
    m = hir.Module(name, targets=["sm_80", "sm_90"])
    gp = hir.ptr("global", elem)
    ip = hir.ptr("global", hir.i32)
    params: list[Any] = [gp, gp, gp, gp if final else hir.ptr("global", hir.f32)]
    params += [hir.ptr("global", hir.f32), ip, ip, ip]  # lse; cu_q, k lengths, table
    params += [i32] * 7  # heads, kv heads, sq, sk, chunk, splits, left/right below
    params += [i64] * 16 + [i32, i32, hir.f32]
    with m.kernel("attention_split", params, max_threads=threads) as b:
        (q, k, v, o, lse, cu_q, klens, table, heads, kv_heads, sq, sk, chunk_keys, splits) = (
            b.params[:14]
        )
        (qb, qs, qh, kb, ks, kh, vb, vs, vh, ob, os_, oh, lb, ls, lh, ts) = b.params[15:31]
        left, right, scale_log2 = b.params[31:34]
        group = b.div(heads, kv_heads)
        tid = b.thread_idx()
        warp, lane = tid >> 5, tid & 31
        g, t = lane >> 2, lane & 3
        bx = b.cast(b.block_idx(), i32)
        split = b.cast(b.block_idx("y"), i32)
        rb = b.cast(b.block_idx("z"), i32)
        if q_cu:  # the last row blocks (the longest under a causal mask) start first
            rb = b.cast(b.grid_dim("z") - 1, i32) - rb
        bi, hk = b.div(bx, kv_heads), b.rem(bx, kv_heads)
        bi64, hk64 = b.cast(bi, i64), b.cast(hk, i64)

        def at(p: hir.Value, i: Any) -> hir.Value:
            return b.load(b.ptr_add(p, b.cast(i, i64)))

        # This sequence's queries and keys.
        zero_i = b.const(0, i32)
        qoff, sq_b = zero_i, sq
        if q_cu:
            qoff = at(cu_q, bi)
            sq_b = at(cu_q, bi + 1) - qoff
        koff, sk_b = zero_i, sk
        if kv_len == "lens":
            sk_b = at(klens, bi)
        elif kv_len == "cu":
            koff = at(klens, bi)
            sk_b = at(klens, bi + 1) - koff
        shift = sk_b - sq_b
        rows_total = group * sq
        r0 = rb * bm
        r_last = b.min(r0 + (bm - 1), rows_total - 1)
        one_head = b.eq(b.div(r0, sq), b.div(r_last, sq))
        i_first = b.select(one_head, b.rem(r0, sq), zero_i)
        i_last = b.min(b.select(one_head, b.rem(r_last, sq), sq - 1), sq_b - 1)
        valid = i_first < sq_b  # i_first is 0 when the block spans heads
        # The keys of this split any row of the block sees: [lo, hi).
        s0 = split * chunk_keys
        hi = b.min(s0 + chunk_keys, sk_b)
        if causal:
            hi = b.min(hi, i_last + shift + right + 1)
        lo = s0
        if has_left:
            first = b.max(i_first + shift - left, zero_i)
            lo = b.max(lo, b.div(first, bn) * bn)
        nblocks = b.select(b.and_(valid, hi > lo), b.div(hi - lo + (bn - 1), bn), zero_i)

        q_base = b.ptr_add(q, bi64 * qb + b.cast(qoff, i64) * qs)
        kvh = [b.ptr_add(k, hk64 * kh), b.ptr_add(v, hk64 * vh)]
        if not page:
            kvh = [
                b.ptr_add(kvh[0], bi64 * kb + b.cast(koff, i64) * ks),
                b.ptr_add(kvh[1], bi64 * vb + b.cast(koff, i64) * vs),
            ]
        s_q = b.dyn_shared(chunk)
        s_k = b.ptr_add(s_q, bm * cpr)
        s_v = b.ptr_add(s_k, bn * cpr)

        def swz(r: Any, c: Any) -> Any:
            return r * cpr + (c ^ (r & 7))

        def copy_rows(dst: hir.Value, rows: int, src_of: Any, commit: bool = True) -> None:
            """cp.async of `rows` rows of real chunks into `dst`; `src_of(r)`
            is row r's global address (a ptr to 16-byte chunks)."""
            for i in range(rows * creal // threads):
                idx = tid + i * threads
                r, c = b.div(idx, creal), b.rem(idx, creal)
                src = src_of(r)
                b.cp_async(b.ptr_add(dst, swz(r, c)), b.ptr_add(src, c), bytes=16, cache="cg")
            if commit:
                b.cp_async_commit()

        def as_chunks(p: hir.Value) -> hir.Value:
            return b.ptr_cast(p, hir.ptr("global", chunk))

        def load_kv(which: int, j0: hir.Value, slot: Any = 0, commit: bool = True) -> None:
            """K (0) or V (1) tile of keys [j0, j0 + bn); keys past `hi`
            repeat the last one (masked)."""
            base, row_stride = kvh[which], (ks, vs)[which]
            page_stride = (kb, vb)[which]
            tile_page = None
            if page and page % bn == 0:  # the tile lies in one page: one table read
                tile_page = b.cast(at(table, b.div(j0, page)), i64)

            def src_of(r: hir.Value) -> hir.Value:
                key = b.min(j0 + b.cast(r, i32), hi - 1)
                if not page:
                    return as_chunks(b.ptr_add(base, b.cast(key, i64) * row_stride))
                pg = tile_page
                if pg is None:
                    pg = b.cast(at(table, b.div(key, page)), i64)
                off = pg * page_stride + b.cast(b.rem(key, page), i64) * row_stride
                return as_chunks(b.ptr_add(base, off))

            copy_rows(b.ptr_add((s_k, s_v)[which], slot), bn, src_of, commit)

        if page:
            table = b.ptr_add(table, bi64 * ts)

        def q_row(r: Any) -> tuple[hir.Value, hir.Value, hir.Value]:
            """(query head, query index, valid) of packed row r of the block."""
            rg = r0 + b.cast(r, i32)
            head = hk * group + b.div(rg, sq)
            i = b.rem(rg, sq)
            return head, i, b.and_(rg < rows_total, i < sq_b)

        def q_src(r: hir.Value) -> hir.Value:
            head, i, _ = q_row(r)
            rg = r0 + b.cast(r, i32)
            head = b.select(rg < rows_total, head, hk * group + group - 1)
            i = b.max(b.min(i, sq_b - 1), zero_i)
            off = b.cast(head, i64) * qh + b.cast(i, i64) * qs
            return as_chunks(b.ptr_add(q_base, off))

        def vec2(x: hir.Value, y: hir.Value) -> hir.Value:
            return vector(b, u32x2, [x, y])

        bases: dict[tuple[str, int], hir.Value] = {}

        def frag_ptr(which: str, row_const: int, chunk_const: int, slot: Any = 0) -> hir.Value:
            """As attention.py's: this lane's ldmatrix row address, swizzled."""
            k8 = chunk_const & 7
            if (which, k8) not in bases:
                if which == "k":
                    start, r_lane, c_lane = s_k, lane & 7, lane >> 3
                else:
                    r_lane, c_lane = lane & 15, lane >> 4
                    start = s_v if which == "v" else b.ptr_add(s_q, warp * (16 * cpr))
                term = (c_lane ^ (r_lane & 7)) ^ k8
                bases[which, k8] = b.ptr_add(start, r_lane * cpr + term)
            base = bases[which, k8] if isinstance(slot, int) else b.ptr_add(bases[which, k8], slot)
            return b.ptr_add(base, row_const * cpr + (chunk_const & ~7))

        zero = b.const(0.0, hir.f32)
        zero_acc = vector(b, f32x4, [zero] * 4)
        # A block with no valid row (an empty varlen sequence) does nothing.
        with b.if_(valid):
            copy_rows(s_q, bm, q_src, commit=stages == 1)
            pair = 2 * bn * cpr  # a (K, V) slot of the ring
            with b.if_(nblocks > 0):
                load_kv(0, lo, commit=stages == 1)
                if stages == 2:
                    load_kv(1, lo, commit=False)
            if stages == 2:
                b.cp_async_commit()
                with b.if_(nblocks > 1):
                    load_kv(0, lo + bn, pair, commit=False)
                    load_kv(1, lo + bn, pair, commit=False)
                b.cp_async_commit()
            b.cp_async_wait(stages - 1)
            b.barrier()
            # Q's fragments stay in registers up to hd 128; at hd 256 (64
            # registers, beside 128 of accumulators) they are re-read from
            # shared memory for each key tile.
            hold_q = d <= 128
            q_regs = [
                b.ldmatrix(frag_ptr("q", 0, 2 * kk), 4) for kk in range(d // 16 if hold_q else 0)
            ]

            def q_frag(kk: int) -> hir.Value:
                return q_regs[kk] if hold_q else b.ldmatrix(frag_ptr("q", 0, 2 * kk), 4)

            my_rows = [warp * 16 + g, warp * 16 + g + 8]
            row_i = [b.rem(r0 + b.cast(r, i32), sq) for r in my_rows]
            nacc = (d // 8) * 4
            init = [b.const(NEG_INF, hir.f32)] * 2 + [zero] * 2 + [zero] * nacc
            state = variables(b, init, "state")
            with b.for_range(0, nblocks, type=i32) as j:
                j0 = lo + j * bn
                cur = read(b, state)
                m_old, l_old, acc = cur[0:2], cur[2:4], cur[4:]
                slot: Any = 0
                if stages == 1:
                    b.barrier()  # every warp is done with the previous V tile
                    load_kv(1, j0)
                else:
                    slot = b.cast(j & 1, hir.u32) * pair
                    b.cp_async_wait(1)  # this tile's pair landed (the next may not have)
                    b.barrier()
                c = [zero_acc] * (bn // 8)
                for q4 in range(d // 32):
                    qa, qb_ = q_frag(2 * q4), q_frag(2 * q4 + 1)
                    for nt in range(bn // 8):
                        kf = b.ldmatrix(frag_ptr("k", nt * 8, 4 * q4, slot), 4)
                        kb0 = vec2(b.extract(kf, 0), b.extract(kf, 1))
                        kb1 = vec2(b.extract(kf, 2), b.extract(kf, 3))
                        c[nt] = b.mma_sync(qa, kb0, c[nt], elem=dtype)
                        c[nt] = b.mma_sync(qb_, kb1, c[nt], elem=dtype)
                scores = [
                    [b.extract(c[nt], 2 * r + e) for nt in range(bn // 8) for e in range(2)]
                    for r in range(2)
                ]
                if stages == 1:
                    b.cp_async_wait(0)
                    b.barrier()  # V tile landed; every warp is done with this K tile
                    with b.if_(j + 1 < nblocks):
                        load_kv(0, j0 + bn)
                # Masked tiles: past the split's / sequence's keys, or crossing the
                # band of the block's rows (a block-uniform branch).
                partial = j0 + bn > hi
                if causal:
                    partial = b.or_(partial, j0 + (bn - 1) > i_first + shift + right)
                if has_left:
                    partial = b.or_(partial, j0 < i_last + shift - left)
                flat_s = [x for row in scores for x in row]
                sel = b.if_else(partial, results=[hir.f32] * len(flat_s))
                with sel as (yes, no):
                    with yes:
                        masked = []
                        for r in range(2):
                            pos = row_i[r] + shift
                            for x, val in enumerate(scores[r]):
                                key = j0 + ((x >> 1) * 8 + (x & 1)) + 2 * b.cast(t, i32)
                                ok = key < hi
                                if causal:
                                    ok = b.and_(ok, key <= pos + right)
                                if has_left:
                                    ok = b.and_(ok, key >= pos - left)
                                masked.append(b.select(ok, val, NEG_INF))
                        yes.yield_(*masked)
                    with no:
                        no.yield_(*flat_s)
                per = bn // 4
                scores = [list(sel.results[r * per : (r + 1) * per]) for r in range(2)]
                m_new, l_new, alpha, p = [], [], [], []
                for r in range(2):
                    mx = quad(b, tree(b.max, scores[r]), b.max)
                    mn = b.max(m_old[r], mx * scale_log2)
                    base = safe_max(b, mn)
                    alpha.append(b.ex2_approx(m_old[r] - base))
                    pr = [b.ex2_approx(b.fma(x, scale_log2, -base)) for x in scores[r]]
                    p.append(pr)
                    m_new.append(mn)
                    l_new.append(b.fma(l_old[r], alpha[r], tree(b.add, pr)))
                acc = [x * alpha[(n % 4) >> 1] for n, x in enumerate(acc)]
                accv = [vector(b, f32x4, acc[nd * 4 : nd * 4 + 4]) for nd in range(d // 8)]
                for kk in range(bn // 16):
                    pf = p_fragment(b, elem, p[0], p[1], kk)
                    for pp in range(d // 16):
                        vf = b.ldmatrix(frag_ptr("v", kk * 16, 2 * pp, slot), 4, trans=True)
                        vb0 = vec2(b.extract(vf, 0), b.extract(vf, 1))
                        vb1 = vec2(b.extract(vf, 2), b.extract(vf, 3))
                        accv[2 * pp] = b.mma_sync(pf, vb0, accv[2 * pp], elem=dtype)
                        accv[2 * pp + 1] = b.mma_sync(pf, vb1, accv[2 * pp + 1], elem=dtype)
                if stages == 1:
                    b.cp_async_wait(0)  # K tile j + 1
                else:
                    b.barrier()  # every warp is done with this slot: refill it
                    with b.if_(j + 2 < nblocks):
                        load_kv(0, j0 + 2 * bn, slot, commit=False)
                        load_kv(1, j0 + 2 * bn, slot, commit=False)
                    b.cp_async_commit()
                flat_acc = [b.extract(x, i) for x in accv for i in range(4)]
                assign(b, state, [*m_new, *l_new, *flat_acc])
            res = read(b, state)
            m_fin, l_part, acc = res[0:2], res[2:4], res[4:]
            for r in range(2):
                head, i, ok = q_row(my_rows[r])
                total = quad(b, l_part[r], b.add)
                empty = b.eq(total, 0.0)
                inv = b.select(empty, 0.0, b.div(b.const(1.0, hir.f32), total))
                lse_val = b.select(empty, NEG_INF, b.fma(m_fin[r], LN2, b.log(total)))
                head64, i64_ = b.cast(head, i64), b.cast(i, i64)
                with b.if_(ok):
                    if final:
                        orow = b.ptr_add(
                            o, bi64 * ob + head64 * oh + (b.cast(qoff, i64) + i64_) * os_
                        )
                        for nd in range(d // 8):
                            ox, oy = acc[nd * 4 + 2 * r] * inv, acc[nd * 4 + 2 * r + 1] * inv
                            dst = b.ptr_cast(b.ptr_add(orow, nd * 8 + 2 * t), u32p)
                            b.store(dst, pack_pair(b, elem, ox, oy))
                        lat = bi64 * lb + head64 * lh + (b.cast(qoff, i64) + i64_) * ls
                    else:
                        # partials [B*H, Sq, splits, D] and [B*H, Sq, splits]
                        lat = (
                            (bi64 * b.cast(heads, i64) + head64) * b.cast(sq, i64) + i64_
                        ) * b.cast(splits, i64) + b.cast(split, i64)
                        prow = b.ptr_add(o, lat * d)
                        for nd in range(d // 8):
                            col = nd * 8 + 2 * t
                            b.store(b.ptr_add(prow, col), acc[nd * 4 + 2 * r] * inv)
                            b.store(b.ptr_add(prow, col + 1), acc[nd * 4 + 2 * r + 1] * inv)
                    with b.if_(b.eq(t, 0)):
                        b.store(b.ptr_add(lse, lat), lse_val)
    return m


@functools.cache
def combine(dtype: str, d: int) -> tile.Kernel:
    """The combine tile program: one program instance per (batch * head,
    query) merges the row's splits. Views ``po [B*H, Sq, S, D]`` and ``pl
    [B*H, Sq, S, 1]`` (f32 partials), ``o [B, H, Sq, D]`` (q's dtype), ``lse
    [B, H, Sq, 1]`` (f32); scalar ``heads``."""
    dt = 1 << (d - 1).bit_length()
    step = COMBINE_STEP
    t = tile.Builder(f"attn_combine_{dtype}_d{d}", tile.Schedule((16, 16), k=16, warps=4))
    po = t.view("po", "f32", 4, unit_stride_dim=3, align_bytes=16)
    pl = t.view("pl", "f32", 4)
    o = t.view("o", dtype, 4, unit_stride_dim=3, align_bytes=16)
    lse = t.view("lse", "f32", 4)
    heads = t.scalar_param("heads", "u32")
    bh, i = t.program_id(0), t.program_id(1)
    bi = t.scalar_binary("div", bh, heads)
    h = t.scalar_binary("rem", bh, heads)
    splits = pl.dim(2)
    ninf = float("-inf")
    whole = t.load(pl, (bh, i, 0, 0), (MAX_SPLITS, 1), other=ninf)
    mx = whole.max(0)  # [1, 1]
    m = t.where(t.cmp("eq", mx, t.full((1, 1), "f32", ninf)), t.zeros((1, 1)), mx)
    den = (whole - m.broadcast((MAX_SPLITS, 1))).exp().sum(0)

    def body(t: tile.Builder, s0: tile.Scalar, carried: list[Any]) -> list[Any]:
        (acc,) = carried
        w = (t.load(pl, (bh, i, s0, 0), (step, 1), other=ninf) - m.broadcast((step, 1))).exp()
        part = t.load(po, (bh, i, s0, 0), (step, dt))
        return [acc + (part * w.broadcast((step, dt))).sum(0)]

    (acc,) = t.for_range(0, splits, step, [t.zeros((1, dt))], body)
    assert isinstance(acc, tile.Tile)
    inv = 1.0 / t.maximum(den, t.full((1, 1), "f32", 1.0))
    t.store(o, (bi, h, i, 0), (acc * inv.broadcast((1, dt))).cast(dtype))
    t.store(lse, (bi, h, i, 0), m + t.unary("log", den))
    return t.finish()


def _combine_module(dtype: str, d: int) -> hir.Module:
    return combine(dtype, d).module


def plan(
    device: int | None,
    groups: int,
    row_blocks: int,
    sk: int,
    d: int,
    warps: int,
    stages: int = 1,
    keys: int = 0,
    waves: int = WAVES,
) -> tuple[int, int]:
    """(keys per split, splits): enough blocks for about `waves` waves of the
    device's SMs (the split blocks are small and the data is read once),
    splits of at least 4 tiles (whole tiles), at most MAX_SPLITS."""
    bn = max(keys or tile_keys(d), 64)
    sms = T.sm_count(device) if device is not None else 8
    per_sm = max(1, min(16 // warps, (200 * 1024) // shared_bytes(d, warps, stages, keys)))
    want = -(-waves * sms * per_sm // max(1, groups * row_blocks))
    chunk = max(4 * bn, -(-sk // max(1, want)))
    chunk = -(-chunk // bn) * bn
    chunk = max(chunk, -(-sk // MAX_SPLITS))
    chunk = -(-chunk // bn) * bn
    return chunk, max(1, -(-sk // chunk))


def _warps(rows: int) -> int:
    """Warps of a split block (a power of two: the copies split evenly)."""
    return 1 if rows <= 16 else 2 if rows <= 32 else 4


def _i32(t: T.Tensor | None, name: str, shape: tuple[int, ...], what: str) -> None:
    if t is None:
        return
    if t.dtype != "i32":
        raise ArgumentError(f"argument '{name}': dtype {t.dtype}, expected i32")
    T.want_shape(t, shape, what)
    if t.strides[-1] != 1:
        raise ArgumentError(f"argument '{name}': its last axis must be contiguous")


def _check_host(t: T.Tensor | None, name: str, low: int, high: int, rising: bool = False) -> None:
    """On the interpreter (numpy arrays) the index arrays' values are checked;
    on a GPU they are not (reading them would synchronise), as FlashAttention."""
    if t is None or t.on_gpu:
        return
    a = np.asarray(t.arr)
    if a.size and (a.min() < low or a.max() > high):
        raise ArgumentError(f"argument '{name}': values outside [{low}, {high}]")
    if rising and (a[0] != 0 or np.any(np.diff(a) < 0)):
        raise ArgumentError(f"argument '{name}': expected 0 first and no decrease")


def _strides3(t: T.Tensor) -> tuple[int, int, int]:
    """(batch, sequence, head) strides of a (B, H, S, D) tensor."""
    return t.strides[0], t.strides[2], t.strides[1]


def forward(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    *,
    causal: bool,
    scale_log2: float,
    window: tuple[int | None, int | None] | None,
    stream: Any,
    block_table: T.Tensor | None = None,
    cache_seqlens: T.Tensor | None = None,
    splits: int | None = None,
    stages: int | None = None,
    keys: int | None = None,
    waves: int | None = None,
) -> tuple[Any, Any]:
    """The decode / kv-cache forward over checked q (B, H, Sq, D) and k, v
    (B, Hk, Sk, D), or with `block_table` k, v as paged caches [num_blocks,
    page_size, Hk, D]. Returns (out, lse) objects. `splits`, `stages`,
    `keys`, `waves` replace plan()'s split count and STAGES / KEYS / WAVES
    (benches)."""
    stages = STAGES if stages is None else stages
    keys = KEYS if keys is None else keys
    from .attention_tile import window_bounds

    bsz, heads, sq, d = tq.shape
    if block_table is not None:
        _, page, hk, _ = tk.shape
        sk = block_table.shape[1] * page
    else:
        hk, sk, page = tk.shape[1], tk.shape[2], 0
    group = heads // hk
    rows = group * sq
    warps = _warps(rows)
    row_blocks = -(-rows // (16 * warps))
    if splits is None:
        device = tq.device if tq.on_gpu else None
        waves = WAVES if waves is None else waves
        chunk, nsplit = plan(device, bsz * hk, row_blocks, sk, d, warps, stages, keys, waves)
    else:
        if not isinstance(splits, int) or isinstance(splits, bool) or not 1 <= splits:
            raise ArgumentError(f"argument 'splits': expected an int >= 1, got {T.show(splits)}")
        bn = max(keys or tile_keys(d), 64)
        per_split = -(-sk // splits)
        chunk = -(-per_split // bn) * bn
        nsplit = max(1, -(-sk // chunk))
        if nsplit > MAX_SPLITS:
            raise ArgumentError(f"argument 'splits': at most {MAX_SPLITS}, got {splits}")
    out_obj, o = T.output(None, tq, (bsz, heads, sq, d), tq.dtype, keep_order=True)
    lse_obj, lse = T.output(None, tq, (bsz, heads, sq), "f32")
    if not (bsz * heads and sq):
        return out_obj, lse_obj
    final = nsplit == 1
    if row_blocks >= 1 << 16 or (not final and sq >= 1 << 16):  # grid y / z extents
        raise ArgumentError(f"argument 'q': {sq} queries are too many for the decode kernel")
    if final:
        po, pl = o, lse
    else:
        _, po = T.output(None, tq, (bsz * heads, sq, nsplit, d), "f32")
        _, pl = T.output(None, tq, (bsz * heads, sq, nsplit), "f32")
    left, right = window_bounds(causal, window)
    kv_len = "lens" if cache_seqlens is not None else "fixed"
    has_right = right < (1 << 30)
    has_left = left < (1 << 30)
    # absent index arrays: a stand-in the kernel does not read
    # Absent index arrays: a stand-in the kernel never reads (on a GPU any
    # pointer; the interpreter wants an int32 array).
    stand_in = lse if tq.on_gpu else T.tensor(np.zeros(1, np.int32), "stand_in")
    lens = cache_seqlens if cache_seqlens is not None else stand_in
    pages = block_table if block_table is not None else stand_in
    if block_table is not None:
        kst = (tk.strides[0], tk.strides[1], tk.strides[2])  # page, row, head
        vst = (tv.strides[0], tv.strides[1], tv.strides[2])
    else:
        kst, vst = _strides3(tk), _strides3(tv)
    ost = _strides3(o)
    args = [
        tq,
        tk,
        tv,
        po,
        pl,
        lens,
        lens,
        pages,
        heads,
        hk,
        sq,
        sk,
        chunk,
        nsplit,
        0,
        *_strides3(tq),
        *kst,
        *vst,
        *ost,
        lse.strides[0],
        lse.strides[2],
        lse.strides[1],
        block_table.strides[0] if block_table is not None else 0,
        min(left, 1 << 30),
        min(right, 1 << 30),
        float(scale_log2),
    ]
    key = (tq.dtype, d, warps, has_right, has_left, False, kv_len, page, final, stages, keys)
    grid = (bsz * hk, nsplit, row_blocks)
    smem = shared_bytes(d, warps, stages, keys)
    T.launch(build, key, "attention_split", grid, 32 * warps, args, tq, stream, shared=smem)
    if not final:
        kern = combine(tq.dtype, d)
        cargs = [
            po,
            *po.shape,
            *po.strides,
            pl,
            *pl.shape,
            1,
            *pl.strides,
            1,
            o,
            *o.shape,
            *o.strides,
            lse,
            *lse.shape,
            1,
            *lse.strides,
            1,
            heads,
        ]
        T.launch(
            _combine_module, (tq.dtype, d), kern.name, (bsz * heads, sq, 1), 128, cargs, tq, stream
        )
    return out_obj, lse_obj


def forward_varlen(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    cu_q: T.Tensor,
    cu_k: T.Tensor,
    max_q: int,
    max_k: int,
    *,
    causal: bool,
    scale_log2: float,
    window: tuple[int | None, int | None] | None,
    stream: Any,
    stages: int | None = None,
    keys: int | None = None,
) -> tuple[Any, Any]:
    """The varlen forward over checked packed q (Tq, H, D), k, v (Tk, Hk, D):
    one split per row block, the output (Tq, H, D) and the LSE (H, Tq).
    `stages`, `keys`: the split kernel's form (build's; STAGES, KEYS)."""
    stages = STAGES if stages is None else stages
    keys = KEYS if keys is None else keys
    from .attention_tile import window_bounds

    total, heads, d = tq.shape
    hk = tk.shape[1]
    bsz = cu_q.shape[0] - 1
    group = heads // hk
    rows = group * max_q
    warps = 4
    row_blocks = -(-rows // (16 * warps))
    out_obj, o = T.output(None, tq, (total, heads, d), tq.dtype)
    lse_obj, lse = T.output(None, tq, (heads, total), "f32")
    if not (bsz and total and rows):
        return out_obj, lse_obj
    if row_blocks >= 1 << 16:
        raise ArgumentError(f"argument 'max_seqlen_q': {max_q} queries are too many")
    left, right = window_bounds(causal, window)
    has_right = right < (1 << 30)
    has_left = left < (1 << 30)
    chunk = -(-max(max_k, 1) // 128) * 128  # whole tiles of any size
    args = [
        tq,
        tk,
        tv,
        o,
        lse,
        cu_q,
        cu_k,
        cu_k,
        heads,
        hk,
        max_q,
        max_k,
        chunk,
        1,
        0,
        0,
        tq.strides[0],
        tq.strides[1],
        0,
        tk.strides[0],
        tk.strides[1],
        0,
        tv.strides[0],
        tv.strides[1],
        0,
        o.strides[0],
        o.strides[1],
        0,
        lse.strides[1],
        lse.strides[0],
        0,
        min(left, 1 << 30),
        min(right, 1 << 30),
        float(scale_log2),
    ]
    key = (tq.dtype, d, warps, has_right, has_left, True, "cu", 0, True, stages, keys)
    grid = (bsz * hk, 1, row_blocks)
    smem = shared_bytes(d, warps, stages, keys)
    T.launch(build, key, "attention_split", grid, 32 * warps, args, tq, stream, shared=smem)
    return out_obj, lse_obj


def attention_kv(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool,
    scale: float | None,
    window: Any,
    stream: Any,
    variant: str | None,
    block_table: Any,
    cache_seqlens: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: Any,
    max_seqlen_k: Any,
) -> tuple[Any, Any]:
    """attention() with a paged cache (`block_table`), per-sequence cache
    lengths (`cache_seqlens`) or packed varlen sequences (`cu_seqlens_q/k`):
    arguments checked (ArgumentError naming the argument), (out, lse)."""
    from .attention_tile import window_arg

    forced = form(variant) if variant is not None else {}
    if forced is None:
        raise ArgumentError(
            f"argument 'variant': {variant!r} does not take paged or varlen inputs; use None "
            "or 'decode'"
        )
    tq, tk, tv = T.tensor(q, "q"), T.tensor(k, "k"), T.tensor(v, "v")
    T.same_place(tq, tk, tv)
    T.want_dtype(tq, ("bf16", "f16"))
    for t in (tk, tv):
        if t.dtype != tq.dtype:
            raise ArgumentError(f"argument '{t.name}': dtype {t.dtype}, expected {tq.dtype} (q's)")
    window = window_arg(window)
    idx = {}
    for obj, name in (
        (block_table, "block_table"),
        (cache_seqlens, "cache_seqlens"),
        (cu_seqlens_q, "cu_seqlens_q"),
        (cu_seqlens_k, "cu_seqlens_k"),
    ):
        if obj is not None:
            idx[name] = T.tensor(obj, name)
            T.same_place(tq, idx[name])
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    rank = 3 if varlen else 4
    for t in (tq, tk, tv):
        if len(t.shape) != rank:
            want = (
                "(total tokens, heads, head dim)"
                if varlen
                else "(num_blocks, page_size, kv heads, head dim)"
                if t is not tq and block_table is not None
                else "(batch, heads, sequence, head dim)"
            )
            raise ArgumentError(f"argument '{t.name}': shape {t.shape}; expected {want}")
        if t.strides[-1] != 1 or any(st % 8 for st in t.strides[:-1]) or t.ptr % 16:
            raise ArgumentError(
                f"argument '{t.name}': the head dim must be contiguous and the other strides "
                f"multiples of 8 elements, 16-byte aligned (strides {t.strides})"
            )
    d = tq.shape[-1]
    if d not in (64, 96, 128, 256):
        raise ArgumentError(f"argument 'q': head dim {d} is not supported (64, 96, 128 or 256)")
    heads = tq.shape[-2] if varlen else tq.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else T.real(scale, "scale", high=T.F32_MAX / LOG2E)
    if not np.float32(scale * LOG2E) > 0:
        raise ArgumentError(f"argument 'scale': expected a positive number, got {scale!r}")
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ArgumentError(
                "argument 'cu_seqlens_q': varlen attention takes both cu_seqlens_q and cu_seqlens_k"
            )
        for name in ("block_table", "cache_seqlens"):
            if name in idx:
                raise ArgumentError(f"argument '{name}': not supported with cu_seqlens (varlen)")
        cq, ck = idx["cu_seqlens_q"], idx["cu_seqlens_k"]
        if len(cq.shape) != 1 or cq.shape[0] < 1:
            raise ArgumentError(f"argument 'cu_seqlens_q': shape {cq.shape}; expected (batch + 1,)")
        _i32(cq, "cu_seqlens_q", cq.shape, "")
        _i32(ck, "cu_seqlens_k", cq.shape, "cu_seqlens_q's shape")
        hk = tk.shape[1]
        if hk < 1 or heads % hk:
            raise ArgumentError(f"argument 'k': {hk} heads; expected a divisor of q's {heads}")
        T.want_shape(tk, (tk.shape[0], hk, d), "q's head dim")
        T.want_shape(tv, tk.shape, "k's shape")
        mq = _count(max_seqlen_q, "max_seqlen_q")
        mk = _count(max_seqlen_k, "max_seqlen_k")
        _check_host(cq, "cu_seqlens_q", 0, tq.shape[0], rising=True)
        _check_host(ck, "cu_seqlens_k", 0, tk.shape[0], rising=True)
        if not tq.on_gpu:
            for c, mx, name in ((cq, mq, "max_seqlen_q"), (ck, mk, "max_seqlen_k")):
                if np.diff(np.asarray(c.arr)).max(initial=0) > mx:
                    raise ArgumentError(f"argument '{name}': below a sequence's length")
        return forward_varlen(
            tq,
            tk,
            tv,
            cq,
            ck,
            mq,
            mk,
            causal=causal,
            scale_log2=float(scale) * LOG2E,
            window=window,
            stream=stream,
            stages=forced.get("stages"),
            keys=forced.get("keys"),
        )
    for name, val in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if val is not None:
            raise ArgumentError(f"argument '{name}': only with cu_seqlens_q/k (varlen)")
    bsz, _, sq, _ = tq.shape
    bt = idx.get("block_table")
    if bt is not None:
        nblocks, page, hk = tk.shape[0], tk.shape[1], tk.shape[2]
        if len(bt.shape) != 2:
            raise ArgumentError(
                f"argument 'block_table': shape {bt.shape}; expected (batch, pages)"
            )
        _i32(bt, "block_table", (bsz, bt.shape[1]), "(batch, max pages) with q's batch")
        if page < 1 or bt.shape[1] < 1:
            raise ArgumentError(f"argument 'k': page size {page} with {bt.shape[1]} pages a row")
        _check_host(bt, "block_table", 0, nblocks - 1)
        capacity = bt.shape[1] * page
    else:
        hk, capacity = tk.shape[1], tk.shape[2]
    if hk < 1 or heads % hk:
        raise ArgumentError(f"argument 'k': {hk} heads; expected a divisor of q's {heads} heads")
    if bt is not None:
        T.want_shape(tk, (tk.shape[0], tk.shape[1], hk, d), "q's head dim")
    else:
        T.want_shape(tk, (bsz, hk, capacity, d), "q's batch and head dim")
    T.want_shape(tv, tk.shape, "k's shape")
    lens = idx.get("cache_seqlens")
    if lens is not None:
        _i32(lens, "cache_seqlens", (bsz,), "(batch,)")
        _check_host(lens, "cache_seqlens", 0, capacity)
    if capacity >= 1 << 29 or sq >= 1 << 29:
        raise ArgumentError(f"argument 'k': {capacity} keys a sequence are too many")
    return forward(
        tq,
        tk,
        tv,
        causal=causal,
        scale_log2=float(scale) * LOG2E,
        window=window,
        stream=stream,
        block_table=bt,
        cache_seqlens=lens,
        stages=forced.get("stages"),
        keys=forced.get("keys"),
        waves=forced.get("waves"),
    )


def form(variant: Any) -> dict[str, int] | None:
    """The split kernel's form a `variant` names: ``"decode"`` (the
    defaults, {}) or ``"decode_s<stages>[k<keys>][w<waves>]"`` (build's ring
    depth and keys per tile, plan's waves, e.g. ``"decode_s2k32"``); None for
    other variants. ArgumentError for a malformed decode form."""
    if not isinstance(variant, str) or not variant.startswith("decode"):
        return None
    if variant == "decode":
        return {}
    m = re.fullmatch(r"decode_s([12])(?:k(32|64|128))?(?:w(\d+))?", variant)
    if m is None or (m.group(3) is not None and not 1 <= int(m.group(3)) <= 64):
        raise ArgumentError(
            f"argument 'variant': expected 'decode' or 'decode_s<1|2>[k<32|64|128>][w<waves>]', "
            f"got {variant!r}"
        )
    out = {"stages": int(m.group(1))}
    if m.group(2):
        out["keys"] = int(m.group(2))
    if m.group(3):
        out["waves"] = int(m.group(3))
    return out


def _count(x: Any, name: str) -> int:
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0:
        return int(x)
    raise ArgumentError(f"argument '{name}': expected an int >= 0, got {T.show(x)}")


def decode_default(on_gpu: bool, sq: int, sk: int) -> bool:
    """Whether attention() takes the split route by default."""
    return on_gpu and sq <= DECODE_MAX_Q and sk >= DECODE_MIN_K


__all__ = ["attention_kv", "build", "combine", "forward", "forward_varlen", "plan"]
