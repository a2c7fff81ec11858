"""Attention forward, FlashAttention-2 style on warp ``mma.sync`` (sm_80+):
``softmax(q @ k^T * scale [+ causal mask]) @ v`` for bf16/f16 tensors in
PyTorch SDPA's layout (batch, heads, sequence, head dim), head dims 64 and
128, any sequence lengths; optionally the row log-sum-exp a backward pass needs.

One block of four warps owns 64 query rows of one (batch, head); each warp
16 rows. The Q tile is read once into registers as ``ldmatrix`` fragments.
The block walks the keys in tiles of 64: ``cp.async`` brings the V tile in
while the warps compute S = Q K^T, and the next K tile while they run the
softmax and O += P V. Shared tiles are XOR-swizzled by 16-byte chunk
(``chunk ^ (row % 8)``) so every ``ldmatrix`` is conflict-free. The online
softmax works in the exp2 domain with ``scale·log2 e`` folded into one FMA
per score; the accumulator layout of S is already the A-fragment layout of
P, so P never leaves registers. Causal masking is top-left aligned (key j is
seen by query i when j <= i, as SDPA's ``is_causal``); the key tiles past the
diagonal are skipped. A row whose keys are all masked gives 0 and an LSE of
-inf, never NaN.

Variants (an sm_90a kernel with wgmma and TMA) add builders next to
``_build`` and a choice in ``_variant``.
"""

from __future__ import annotations

import math
from typing import Any

from zyntax import hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import LOG2E, NEG_INF, safe_max, tree, vector

__all__ = ["attention"]

BM = 64  # query rows per block (16 per warp)
BN = 64  # keys per tile
THREADS = 128
LN2 = math.log(2.0)


def _build(dtype: str, d: int, causal: bool) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    chunk = hir.vec(elem, 8)  # 16 bytes
    cpr = d // 8  # chunks per row
    zero4 = hir.vec(hir.f32, 4)
    u32x2 = hir.vec(hir.u32, 2)
    m = hir.Module(
        f"attention_{dtype}_d{d}{'_causal' if causal else ''}", targets=["sm_80", "sm_90"]
    )
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
        m0 = mb * BM
        qbase = b.ptr_add(q, bi * qb + hi * qh)
        kbase = b.ptr_add(k, bi * kb + hi * kh)
        vbase = b.ptr_add(v, bi * vb + hi * vh)
        obase = b.ptr_add(o, bi * ob + hi * oh)
        s_q = b.shared_alloc(chunk, BM * cpr)
        s_k = b.shared_alloc(chunk, BN * cpr)
        s_v = b.shared_alloc(chunk, BN * cpr)

        def swz(r: Any, c: Any) -> Any:
            return r * cpr + (c ^ (r & 7))

        def load_tile(
            dst: hir.Value, base: hir.Value, stride: hir.Value, row0: Any, rows: int, total: Any
        ) -> None:
            """cp.async of rows [row0, row0 + rows) into `dst`; rows past the end
            repeat the last row (their scores are masked, their P is 0)."""
            for i in range(rows * cpr // THREADS):
                idx = tid + i * THREADS
                r, c = b.div(idx, cpr), b.rem(idx, cpr)
                gr = b.min(row0 + r, total - 1)
                src = b.ptr_cast(
                    b.ptr_add(base, b.cast(gr, hir.i64) * stride), hir.ptr("global", chunk)
                )
                b.cp_async(b.ptr_add(dst, swz(r, c)), b.ptr_add(src, c), bytes=16, cache="cg")
            b.cp_async_commit()

        def vec2(x: hir.Value, y: hir.Value) -> hir.Value:
            return vector(b, u32x2, [x, y])

        def pack(x: hir.Value, y: hir.Value) -> hir.Value:
            """Two f32 as the element pair of one u32 register (x in the low half)."""
            lo = b.cast(b.bitcast(b.cast(x, elem), hir.u16), hir.u32)
            hi = b.cast(b.bitcast(b.cast(y, elem), hir.u16), hir.u32)
            return b.or_(lo, b.shl(hi, 16))

        def quad(x: hir.Value, op: Any) -> hir.Value:
            """op over the four lanes of a quad (the threads sharing a row)."""
            x = op(x, b.shfl_xor(x, 1))
            return op(x, b.shfl_xor(x, 2))

        zero_acc = vector(b, zero4, [b.const(0.0, hir.f32)] * 4)
        load_tile(s_q, qbase, qs, m0, BM, sq)
        load_tile(s_k, kbase, ks, b.const(0, hir.u32), BN, sk)
        b.cp_async_wait(0)
        b.barrier()
        qf = [
            b.ldmatrix(b.ptr_add(s_q, swz(warp * 16 + (lane & 15), 2 * kk + (lane >> 4))), 4)
            for kk in range(d // 16)
        ]
        kv_end = b.min(m0 + BM, sk) if causal else sk
        nblocks = b.div(kv_end + (BN - 1), BN)
        qg = m0 + warp * 16 + g
        rows = [qg, qg + 8]
        init = [b.const(NEG_INF, hir.f32)] * 2 + [b.const(0.0, hir.f32)] * 2
        init += [b.const(0.0, hir.f32)] * (d // 8 * 4)
        with b.loop(0, nblocks, carry=init, type=hir.u32) as lp:
            j = lp.index
            m_old = lp.carried[0:2]
            l_old = lp.carried[2:4]
            acc = lp.carried[4:]
            b.barrier()  # every warp is done with the previous V tile
            load_tile(s_v, vbase, vs, j * BN, BN, sk)
            s = []
            for nt in range(BN // 8):
                c = zero_acc
                for q4 in range(d // 32):
                    kf = b.ldmatrix(
                        b.ptr_add(s_k, swz(nt * 8 + (lane & 7), 4 * q4 + (lane >> 3))), 4
                    )
                    c = b.mma_sync(
                        qf[2 * q4], vec2(b.extract(kf, 0), b.extract(kf, 1)), c, elem=dtype
                    )
                    c = b.mma_sync(
                        qf[2 * q4 + 1], vec2(b.extract(kf, 2), b.extract(kf, 3)), c, elem=dtype
                    )
                s.append([b.extract(c, i) for i in range(4)])
            b.cp_async_wait(0)
            b.barrier()  # V tile j landed; every warp is done with K tile j
            with b.if_(j + 1 < nblocks):
                load_tile(s_k, kbase, ks, (j + 1) * BN, BN, sk)
            # Mask keys past the end (and past the diagonal when causal).
            for nt in range(BN // 8):
                for i in range(4):
                    key = j * BN + (nt * 8 + (i & 1)) + 2 * t
                    ok = key < sk
                    if causal:
                        ok = b.and_(ok, key <= rows[i >> 1])
                    s[nt][i] = b.select(ok, s[nt][i], NEG_INF)
            m_new, alpha, p = [], [], [[None] * 4 for _ in range(BN // 8)]
            l_new = []
            for h in range(2):
                mx = quad(
                    tree(b.max, [s[nt][2 * h + e] for nt in range(BN // 8) for e in range(2)]),
                    b.max,
                )
                mn = b.max(m_old[h], mx * scale_log2)
                base = safe_max(b, mn)
                alpha.append(b.ex2_approx(m_old[h] - base))
                m_new.append(mn)
                for nt in range(BN // 8):
                    for e in range(2):
                        p[nt][2 * h + e] = b.ex2_approx(b.fma(s[nt][2 * h + e], scale_log2, -base))
                l_new.append(
                    b.fma(
                        l_old[h],
                        alpha[h],
                        tree(b.add, [p[nt][2 * h + e] for nt in range(BN // 8) for e in range(2)]),
                    )
                )
            acc = [a * alpha[(i % 4) >> 1] for i, a in enumerate(acc)]
            accv = [vector(b, zero4, acc[4 * nd : 4 * nd + 4]) for nd in range(d // 8)]
            for kk in range(BN // 16):
                pa, pb = p[2 * kk], p[2 * kk + 1]
                af = vector(
                    b,
                    hir.vec(hir.u32, 4),
                    [
                        pack(pa[0], pa[1]),
                        pack(pa[2], pa[3]),
                        pack(pb[0], pb[1]),
                        pack(pb[2], pb[3]),
                    ],
                )
                for pp in range(d // 16):
                    vf = b.ldmatrix(
                        b.ptr_add(s_v, swz(kk * 16 + (lane & 15), 2 * pp + (lane >> 4))),
                        4,
                        trans=True,
                    )
                    accv[2 * pp] = b.mma_sync(
                        af, vec2(b.extract(vf, 0), b.extract(vf, 1)), accv[2 * pp], elem=dtype
                    )
                    accv[2 * pp + 1] = b.mma_sync(
                        af, vec2(b.extract(vf, 2), b.extract(vf, 3)), accv[2 * pp + 1], elem=dtype
                    )
            b.cp_async_wait(0)  # K tile j + 1 (made visible by the next barrier)
            lp.next(*m_new, *l_new, *[b.extract(a, i) for a in accv for i in range(4)])
        res = lp.results
        m_fin, l_part, acc = res[0:2], res[2:4], res[4:]
        out2 = hir.ptr("global", hir.u32)
        for h in range(2):
            total = quad(l_part[h], b.add)
            empty = b.eq(total, 0.0)
            inv = b.select(empty, 0.0, b.div(b.const(1.0, hir.f32), total))
            row = rows[h]
            with b.if_(row < sq):
                orow = b.ptr_add(obase, b.cast(row, hir.i64) * os_)
                for nd in range(d // 8):
                    x, y = acc[4 * nd + 2 * h] * inv, acc[4 * nd + 2 * h + 1] * inv
                    dst = b.ptr_cast(b.ptr_add(orow, nd * 8 + 2 * t), out2)
                    b.store(dst, pack(x, y))
                with b.if_(b.eq(t, 0)):
                    val = b.select(empty, NEG_INF, b.fma(m_fin[h], LN2, b.log(total)))
                    b.store(
                        b.ptr_add(
                            lse, b.cast(bh, hir.i64) * b.cast(sq, hir.i64) + b.cast(row, hir.i64)
                        ),
                        val,
                    )
    return m


def _variant(arch_major: int) -> Any:
    """The kernel builder for a device (sm_90a's would be chosen here)."""
    return _build


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    stream: Any = None,
) -> Any:
    """``softmax(q @ k^T * scale) @ v`` per (batch, head).

    `q` (B, H, Sq, D), `k` and `v` (B, H, Sk, D): bf16 or f16 GPU tensors
    (or numpy arrays: the interpreter), D 64 or 128, the last axis contiguous.
    `scale` defaults to 1/sqrt(D). Returns the output (B, H, Sq, D) allocated
    like `q`, and with ``return_lse=True`` also the f32 log-sum-exp of each
    row (B, H, Sq), natural log, of the scaled scores.
    """
    tq, tk, tv = T.tensor(q, "q"), T.tensor(k, "k"), T.tensor(v, "v")
    T.same_place(tq, tk, tv)
    T.want_dtype(tq, ("bf16", "f16"))
    for t in (tk, tv):
        if t.dtype != tq.dtype:
            raise ArgumentError(f"argument '{t.name}': dtype {t.dtype}, expected {tq.dtype} (q's)")
    for t in (tq, tk, tv):
        if len(t.shape) != 4:
            raise ArgumentError(
                f"argument '{t.name}': shape {t.shape}; expected (batch, heads, sequence, head dim)"
            )
    bsz, heads, sq, d = tq.shape
    sk = tk.shape[2]
    if d not in (64, 128):
        raise ArgumentError(f"argument 'q': head dim {d} is not supported (64 or 128)")
    T.want_shape(tk, (bsz, heads, sk, d), "q's batch, heads and head dim")
    T.want_shape(tv, (bsz, heads, sk, d), "k's shape")
    if causal not in (True, False):
        raise ArgumentError(f"argument 'causal': expected a bool, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise ArgumentError(f"argument 'scale': expected a positive finite float, got {scale!r}")
    for t in (tq, tk, tv):
        if t.strides[3] != 1 or any(s % 8 for s in t.strides[:3]) or t.ptr % 16:
            raise ArgumentError(
                f"argument '{t.name}': the head dim must be contiguous and the other strides "
                f"multiples of 8 elements, 16-byte aligned (strides {t.strides})"
            )
    out_obj, o = T.output(None, tq, (bsz, heads, sq, d), tq.dtype)
    lse_obj, lse = T.output(None, tq, (bsz, heads, sq), "f32")
    if bsz * heads and sq:
        if sk == 0:
            raise ArgumentError("argument 'k': an empty key sequence")
        if bsz * heads >= 1 << 16 or sq >= 1 << 31:
            raise ArgumentError(f"argument 'q': shape {tq.shape} is too large")
        strides = [*tq.strides[:3], *tk.strides[:3], *tv.strides[:3], *o.strides[:3]]
        args = [tq, tk, tv, o, lse, sq, sk, heads, *strides, float(scale) * LOG2E]
        grid = (-(-sq // BM), bsz * heads)
        builder = _variant(8)
        T.launch(builder, (tq.dtype, d, bool(causal)), "attention", grid, THREADS, args, tq, stream)
    return (out_obj, lse_obj) if return_lse else out_obj
