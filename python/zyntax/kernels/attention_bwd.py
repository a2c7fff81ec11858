"""Attention backward as tile programs (FlashAttention-2's algorithm on the
tile layer, docs/tile.md): dQ, dK, dV of ``o = softmax(q k^T * scale) v``
from the forward's output ``o``, its log-sum-exp ``lse`` and the gradient
``do``, for the shapes and masks of the forward (attention_tile.py): head
dims 64/96/128/256, bf16/f16, grouped-query heads, causal and window masks
aligned bottom-right, any sequence lengths.

With ``p = exp(s - lse)`` the probabilities (recomputed from ``lse``, never
stored), ``dp = do v^T``, ``D = rowsum(do * o)`` (= rowsum(p * dp)) and
``ds = p * (dp - D)``:

    dv = p^T do      dk = scale * ds^T q      dq = scale * ds k

Three programs in either mode:

1. ``pre``: per query row, ``D`` and the LSE with -inf (a row that sees no
   key) replaced by +inf, so that ``exp(s - lse)`` is 0 there, not NaN.
2. ``dkdv``: one instance per block of ``bn`` keys of one (batch, KV head)
   keeps K and V and accumulates dK and dV (f32, in registers) over every
   query head of its group and every block of ``bm`` query rows that can
   see one of its keys. It works on the transposed scores ``s^T = k q^T``
   (``q^T`` is a transposed view, strides only), so that ``p^T`` and
   ``ds^T`` are the ``a`` operands of their dots without a transpose.
3. ``dq`` (deterministic): one instance per block of ``bm`` query rows
   walks the visible key blocks as the forward does and accumulates dQ; or
   ``dq_cast`` (atomic dQ, the default): scales and casts the f32 dQ.

By default ``dkdv`` also computes ``dq^T = k^T ds^T`` (``k^T`` a strided
view, loaded once) and adds it atomically into an f32 buffer (a transposed
view) that ``pre`` zeroes, and ``dq_cast`` scales it into dq: 5 dots per
pair of blocks, but the order of the f32 adds, hence dq's last bits, vary
between runs. With ``deterministic=True`` dQ has its own pass (3) instead:
each output element is written once by one instance, after a loop in a
fixed order, so the gradients are **bit-identical across runs**, at the
price of computing ``s``, ``p`` and ``dp`` in both passes (7 dots).

On sm_90 GPUs the atomic mode's dkdv program is replaced by the wgmma
kernel of attention_bwd_sm90.py (head dims 64, 96 and 128; ``SM90``), between
the same ``pre`` and ``dq_cast`` programs; the deterministic mode and the
other head dims keep the tile programs.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from zyntax import hir, tile
from zyntax.errors import ArgumentError

from . import _tensors as T
from . import attention_bwd_sm90
from ._rows import LOG2E
from .attention_tile import UNBOUNDED, qkv_shapes, tile_dim, window_arg, window_bounds

INF = float("inf")


def shapes(d: int) -> tuple[int, int, int]:
    """(query rows, keys, warps) per block of the backward programs for
    head dim `d`: 64x64 over 8 warps up to hd 128, 32x32 over 8 at hd 256.
    Chosen by ptxas's spills (sm_90; every tile a dot reads is held in
    registers until the dot stages it, so these programs sit at 255
    registers): at hd 128 the dkdv program spills 40 bytes at 64x64 and 120
    at 32x64, its atomic form 280 at 64x64 and still ran fastest on an H200
    (b4 h32 s2048 causal: 96.5 TFLOP/s, 92.8 at 32x64; the dQ pass 81.8 and
    67.6); over 4 warps hd 64 spilled 500 bytes and hd 256 at 16x32 over
    200, over 8 warps 0 to 8 (the atomic form at hd 64: 228)."""
    if tile_dim(d) >= 256:
        return 32, 32, 8
    return 64, 64, 8


def _schedule(bm: int, bn: int, warps: int, arch: str) -> Any:
    return tile.Schedule((bm, bn), k=16, warps=warps, arch=arch)


@functools.cache
def build_pre(
    dtype: str,
    d: int,
    bm: int,
    warps: int,
    dlse: bool = False,
    zero_dq: bool = False,
    arch: str = "sm_80",
) -> tile.Kernel:
    """``delta = rowsum(do * o)`` (minus ``dlse`` with `dlse`: the gradient of
    the LSE output adds ``p * dlse`` to ``ds``) and ``lse2 = lse`` with -inf
    made +inf. Views ``o``, ``do`` [B, H, Sq, D]; ``lse``, ``delta``,
    ``lse2`` (and ``dlse``) [B, H, Sq, 1] f32; with `zero_dq` also ``dq32``
    [B, H, Sq, D] f32, the atomic dQ accumulator, zeroed; scalar ``heads``."""
    name = f"attention_bwd_pre_{dtype}_d{d}_{bm}w{warps}{'_dlse' if dlse else ''}"
    name += "_zero" if zero_dq else ""
    t = tile.Builder(name, _schedule(bm, 16, warps, arch))
    o = t.view("o", dtype, 4, unit_stride_dim=3, align_bytes=16)
    do = t.view("do", dtype, 4, unit_stride_dim=3, align_bytes=16)
    lse = t.view("lse", "f32", 4)
    delta = t.view("delta", "f32", 4)
    lse2 = t.view("lse2", "f32", 4)
    dlse_v = t.view("dlse", "f32", 4) if dlse else None
    dq32 = t.view("dq32", "f32", 4, unit_stride_dim=3, align_bytes=16) if zero_dq else None
    heads = t.scalar_param("heads", "u32")
    bh = t.program_id(1)
    b, h = t.scalar_binary("div", bh, heads), t.scalar_binary("rem", bh, heads)
    m0 = t.program_id(0) * bm
    ot = t.load(o, (b, h, m0, 0), (bm, d)).cast("f32")
    dot_ = t.load(do, (b, h, m0, 0), (bm, d)).cast("f32")
    dsum = (ot * dot_).sum(1)
    if dlse_v is not None:
        dsum = dsum - t.load(dlse_v, (b, h, m0, 0), (bm, 1))
    t.store(delta, (b, h, m0, 0), dsum)
    lt = t.load(lse, (b, h, m0, 0), (bm, 1))
    empty = t.cmp("eq", lt, t.full((bm, 1), "f32", -INF))
    t.store(lse2, (b, h, m0, 0), t.where(empty, t.full((bm, 1), "f32", INF), lt))
    if dq32 is not None:
        t.store(dq32, (b, h, m0, 0), t.zeros((bm, d)))
    return t.finish()


@functools.cache
def build_zero(d: int, bm: int, warps: int, arch: str = "sm_80") -> tile.Kernel:
    """``dq32 = 0``: the atomic dQ accumulator zeroed, where the sm_90a kernel
    makes the LSE and D rows itself (attention_bwd_sm90.fuses_rows). View
    ``dq32`` [B, H, Sq, D] f32; scalar ``heads``."""
    t = tile.Builder(f"attention_bwd_zero_d{d}_{bm}w{warps}", _schedule(bm, 16, warps, arch))
    dq32 = t.view("dq32", "f32", 4, unit_stride_dim=3, align_bytes=16)
    heads = t.scalar_param("heads", "u32")
    bh = t.program_id(1)
    b, h = t.scalar_binary("div", bh, heads), t.scalar_binary("rem", bh, heads)
    t.store(dq32, (b, h, t.program_id(0) * bm, 0), t.zeros((bm, d)))
    return t.finish()


@functools.cache
def build_dq_cast(dtype: str, d: int, bm: int, warps: int, arch: str = "sm_80") -> tile.Kernel:
    """``dq = dq32 * scale`` in `dtype`: the atomic dQ accumulator's result.
    Views ``dq32`` [B, H, Sq, D] f32, ``dq`` [B, H, Sq, D]; scalars
    ``heads``, ``scale``."""
    t = tile.Builder(
        f"attention_bwd_dq_cast_{dtype}_d{d}_{bm}w{warps}", _schedule(bm, 16, warps, arch)
    )
    dq32 = t.view("dq32", "f32", 4, unit_stride_dim=3, align_bytes=16)
    dq = t.view("dq", dtype, 4, unit_stride_dim=3, align_bytes=16)
    heads = t.scalar_param("heads", "u32")
    scale = t.scalar_param("scale", "f32")
    bh = t.program_id(1)
    b, h = t.scalar_binary("div", bh, heads), t.scalar_binary("rem", bh, heads)
    m0 = t.program_id(0) * bm
    acc = t.load(dq32, (b, h, m0, 0), (bm, d))
    t.store(dq, (b, h, m0, 0), (acc * t.splat((bm, d), scale)).cast(dtype))
    return t.finish()


def _masked(
    t: tile.Builder,
    s: tile.Tile,
    keys: tile.Tile,
    queries: tile.Tile,
    sizes: tuple[tile.Scalar, tile.Scalar, tile.Scalar, tile.Scalar],
) -> tile.Tile:
    """`s` with -inf where key ``j`` (a u32 tile) is hidden from query ``i``:
    visible are ``j < Sk`` with ``i' - left <= j <= i' + right``, ``i' = i +
    Sk - Sq`` (the forward's bottom-right mask), in u32 arithmetic that
    cannot wrap (every term below 2^31). `sizes`: (Sq, Sk, left, right)."""
    sq, sk, left, right = sizes
    shape = s.shape
    jq = keys + t.splat(shape, sq)  # j + Sq
    ik = queries + t.splat(shape, sk)  # i + Sk
    inside = t.cmp("lt", jq, t.splat(shape, sk + sq))
    after = t.cmp("ge", jq + t.splat(shape, left), ik)
    before = t.cmp("le", jq, ik + t.splat(shape, right))
    neg_inf = t.full(shape, "f32", -INF)
    return t.where(inside, t.where(after, t.where(before, s, neg_inf), neg_inf), neg_inf)


@functools.cache
def build_dkdv(
    dtype: str,
    d: int,
    bm: int,
    bn: int,
    warps: int,
    atomic_dq: bool = False,
    arch: str = "sm_80",
) -> tile.Kernel:
    """dK and dV of one block of ``bn`` keys of one (batch, KV head). Views
    ``q`` [B, H, Sq, D], ``qt`` [B, H, D, Sq] (q transposed by its strides),
    ``k``, ``v`` [B, Hk, Sk, D], ``do`` [B, H, Sq, D], ``dot`` [B, H, D, Sq]
    (do transposed), ``lse``, ``delta`` [B, H, 1, Sq] f32 (rows),
    ``dk``, ``dv`` [B, Hk, Sk, D]; with `atomic_dq` also ``kt`` [B, Hk, D,
    Sk] (k transposed) and ``dq32`` [B, H, D, Sq] (an f32 accumulator,
    transposed), where ``dq^T += k^T ds^T`` is added atomically (unscaled);
    scalars ``kv_heads``, ``group``, ``scale``, ``left``, ``right``."""
    name = f"attention_bwd_dkdv_{dtype}_d{d}_{bm}x{bn}w{warps}{'_atomic' if atomic_dq else ''}"
    t = tile.Builder(name, _schedule(bm, bn, warps, arch))
    q = t.view("q", dtype, 4, unit_stride_dim=3, align_bytes=16)
    qt = t.view("qt", dtype, 4, unit_stride_dim=2, align_bytes=16)
    k = t.view("k", dtype, 4, unit_stride_dim=3, align_bytes=16)
    v = t.view("v", dtype, 4, unit_stride_dim=3, align_bytes=16)
    do = t.view("do", dtype, 4, unit_stride_dim=3, align_bytes=16)
    dot_ = t.view("dot", dtype, 4, unit_stride_dim=2, align_bytes=16)
    lse = t.view("lse", "f32", 4, unit_stride_dim=3)
    delta = t.view("delta", "f32", 4, unit_stride_dim=3)
    dk = t.view("dk", dtype, 4, unit_stride_dim=3, align_bytes=16)
    dv = t.view("dv", dtype, 4, unit_stride_dim=3, align_bytes=16)
    kt = t.view("kt", dtype, 4, unit_stride_dim=2, align_bytes=16) if atomic_dq else None
    dq32 = t.view("dq32", "f32", 4, unit_stride_dim=2) if atomic_dq else None
    kv_heads = t.scalar_param("kv_heads", "u32")
    group = t.scalar_param("group", "u32")
    scale = t.scalar_param("scale", "f32")
    left = t.scalar_param("left", "u32")
    right = t.scalar_param("right", "u32")

    bh = t.program_id(1)
    b, hk = t.scalar_binary("div", bh, kv_heads), t.scalar_binary("rem", bh, kv_heads)
    n0 = t.program_id(0) * bn
    sq, sk = q.dim(2), k.dim(2)
    # The query rows that see a key of [n0, n0 + bn): i with
    # j - right <= i + Sk - Sq <= j + left; [lo, hi), lo rounded down to a
    # block; max() keeps the u32 subtractions from wrapping.
    first = t.scalar_binary("max", n0 + sq, sk + right) - (sk + right)
    lo = t.scalar_binary("div", first, t.constant("u32", bm)) * bm
    last = t.scalar_binary("max", n0 + bn + left + sq, sk) - sk
    hi = t.scalar_binary("min", last, sq)

    kb = t.load(k, (b, hk, n0, 0), (bn, d))
    vb = t.load(v, (b, hk, n0, 0), (bn, d))
    ktb = t.load(kt, (b, hk, 0, n0), (d, bn)) if kt is not None else None
    shape = (bn, bm)
    keys = t.iota(shape, 0) + t.splat(shape, n0)
    scale_t = t.splat(shape, scale)

    def head(t: tile.Builder, g: tile.Scalar, carried: list[Any]) -> list[Any]:
        h = hk * group + g

        def step(t: tile.Builder, m0: tile.Scalar, carried: list[Any]) -> list[Any]:
            dk_acc, dv_acc = carried
            qtb = t.load(qt, (b, h, 0, m0), (d, bm))
            s = t.dot(kb, qtb, t.zeros(shape)) * scale_t  # s^T [bn, bm]
            queries = t.iota(shape, 1) + t.splat(shape, m0)
            s = _masked(t, s, keys, queries, (sq, sk, left, right))
            # Rows past Sq read an LSE of +inf: their p is 0.
            lrow = t.load(lse, (b, h, 0, m0), (1, bm), other=INF)
            p = (s - lrow.broadcast(shape)).exp()
            dob = t.load(do, (b, h, m0, 0), (bm, d))
            dv_acc = t.dot(p.cast(dtype), dob, dv_acc)
            dotb = t.load(dot_, (b, h, 0, m0), (d, bm))
            dp = t.dot(vb, dotb, t.zeros(shape))  # dp^T = v do^T
            drow = t.load(delta, (b, h, 0, m0), (1, bm))
            ds = p * (dp - drow.broadcast(shape))
            qb = t.load(q, (b, h, m0, 0), (bm, d))
            ds16 = ds.cast(dtype)
            dk_acc = t.dot(ds16, qb, dk_acc)
            if ktb is not None and dq32 is not None:
                # dq^T = k^T ds^T: no transposed register tile needed.
                t.atomic_add(dq32, (b, h, 0, m0), t.dot(ktb, ds16, t.zeros((d, bm))))
            return [dk_acc, dv_acc]

        return list(t.for_range(lo, hi, bm, carried, step))

    inits = [t.zeros((bn, d)), t.zeros((bn, d))]
    dk_acc, dv_acc = (_tile(x) for x in t.for_range(0, group, 1, inits, head))
    t.store(dk, (b, hk, n0, 0), (dk_acc * t.splat((bn, d), scale)).cast(dtype))
    t.store(dv, (b, hk, n0, 0), dv_acc.cast(dtype))
    return t.finish()


@functools.cache
def build_dq(dtype: str, d: int, bm: int, bn: int, warps: int, arch: str = "sm_80") -> tile.Kernel:
    """dQ of one block of ``bm`` query rows of one (batch, head). Views ``q``
    [B, H, Sq, D], ``k`` [B, Hk, Sk, D], ``kt``, ``vt`` [B, Hk, D, Sk] (k
    and v transposed by their strides), ``do`` [B, H, Sq, D], ``lse``,
    ``delta`` [B, H, Sq, 1] f32, ``dq`` [B, H, Sq, D]; scalars ``heads``,
    ``group``, ``scale``, ``left``, ``right``."""
    t = tile.Builder(
        f"attention_bwd_dq_{dtype}_d{d}_{bm}x{bn}w{warps}", _schedule(bm, bn, warps, arch)
    )
    q = t.view("q", dtype, 4, unit_stride_dim=3, align_bytes=16)
    k = t.view("k", dtype, 4, unit_stride_dim=3, align_bytes=16)
    kt = t.view("kt", dtype, 4, unit_stride_dim=2, align_bytes=16)
    vt = t.view("vt", dtype, 4, unit_stride_dim=2, align_bytes=16)
    do = t.view("do", dtype, 4, unit_stride_dim=3, align_bytes=16)
    lse = t.view("lse", "f32", 4)
    delta = t.view("delta", "f32", 4)
    dq = t.view("dq", dtype, 4, unit_stride_dim=3, align_bytes=16)
    heads = t.scalar_param("heads", "u32")
    group = t.scalar_param("group", "u32")
    scale = t.scalar_param("scale", "f32")
    left = t.scalar_param("left", "u32")
    right = t.scalar_param("right", "u32")

    bh = t.program_id(1)
    b, h = t.scalar_binary("div", bh, heads), t.scalar_binary("rem", bh, heads)
    hk = t.scalar_binary("div", h, group)
    m0 = t.program_id(0) * bm
    sq, sk = q.dim(2), k.dim(2)
    # The forward's key range: [lo, hi), lo rounded down to a block.
    first = t.scalar_binary("max", m0 + sk, sq + left) - (sq + left)
    lo = t.scalar_binary("div", first, t.constant("u32", bn)) * bn
    last = t.scalar_binary("max", m0 + bm + sk + right, sq) - sq
    hi = t.scalar_binary("min", last, sk)

    shape = (bm, bn)
    qb = t.load(q, (b, h, m0, 0), (bm, d))
    dob = t.load(do, (b, h, m0, 0), (bm, d))
    lcol = t.load(lse, (b, h, m0, 0), (bm, 1), other=INF).broadcast(shape)
    dcol = t.load(delta, (b, h, m0, 0), (bm, 1)).broadcast(shape)
    queries = t.iota(shape, 0) + t.splat(shape, m0)
    scale_t = t.splat(shape, scale)

    def step(t: tile.Builder, n0: tile.Scalar, carried: list[Any]) -> list[Any]:
        (dq_acc,) = carried
        ktb = t.load(kt, (b, hk, 0, n0), (d, bn))
        s = t.dot(qb, ktb, t.zeros(shape)) * scale_t
        keys = t.iota(shape, 1) + t.splat(shape, n0)
        s = _masked(t, s, keys, queries, (sq, sk, left, right))
        p = (s - lcol).exp()
        vtb = t.load(vt, (b, hk, 0, n0), (d, bn))
        dp = t.dot(dob, vtb, t.zeros(shape))
        ds = p * (dp - dcol)
        kb = t.load(k, (b, hk, n0, 0), (bn, d))
        return [t.dot(ds.cast(dtype), kb, dq_acc)]

    (dq_acc,) = t.for_range(lo, hi, bn, [t.zeros((bm, d))], step)
    t.store(dq, (b, h, m0, 0), (_tile(dq_acc) * t.splat((bm, d), scale)).cast(dtype))
    return t.finish()


#: Where the sm_90a kernel (attention_bwd_sm90) computes dK, dV and the
#: atomic dQ: None on sm_90 GPUs (the default), True also on the interpreter
#: (tests), False nowhere (the tile programs; benches compare both).
SM90: bool | None = None
SM90_ROWS = attention_bwd_sm90.PAD_ROWS


def _sm90(tq: T.Tensor, d: int, seq: int) -> bool:
    """Whether the sm_90a kernel runs this call (see SM90); `seq` the longer
    sequence (its i32 arithmetic takes sequences below 2^29)."""
    if SM90 is False or not attention_bwd_sm90.supports(d) or seq >= attention_bwd_sm90.MAX_SEQ:
        return False
    if not tq.on_gpu:
        return SM90 is True
    from .attention import _major

    return _major(tq.device) == 9


def _tile(x: tile.Value) -> tile.Tile:
    assert isinstance(x, tile.Tile)  # the loops carry tiles only
    return x


def module_pre(dtype: str, d: int, bm: int, warps: int, dlse: bool, zero: bool) -> hir.Module:
    return build_pre(dtype, d, bm, warps, dlse, zero).module


def module_zero(d: int, bm: int, warps: int) -> hir.Module:
    return build_zero(d, bm, warps).module


def module_dq_cast(dtype: str, d: int, bm: int, warps: int) -> hir.Module:
    return build_dq_cast(dtype, d, bm, warps).module


def module_dkdv(dtype: str, d: int, bm: int, bn: int, warps: int, atomic: bool) -> hir.Module:
    return build_dkdv(dtype, d, bm, bn, warps, atomic).module


def module_dq(dtype: str, d: int, bm: int, bn: int, warps: int) -> hir.Module:
    return build_dq(dtype, d, bm, bn, warps).module


def _args(t: T.Tensor, order: tuple[int, ...] = (0, 1, 2, 3)) -> list[Any]:
    """A 4-d view argument of `t` with its dims in `order` (strides only)."""
    return [t, *(t.shape[i] for i in order), *(t.strides[i] for i in order)]


def _rows(t: T.Tensor, column: bool) -> list[Any]:
    """A (B, H, S) f32 tensor as a 4-d view: (B, H, S, 1) when `column`,
    else (B, H, 1, S)."""
    (b, h, s), (sb, sh, ss) = t.shape, t.strides
    if column:
        return [t, b, h, s, 1, sb, sh, ss, 1]
    return [t, b, h, 1, s, sb, sh, ss, ss]


def launch(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    to: T.Tensor,
    tdo: T.Tensor,
    tlse: T.Tensor,
    dq: T.Tensor,
    dk: T.Tensor,
    dv: T.Tensor,
    delta: T.Tensor,
    lse2: T.Tensor,
    tdlse: T.Tensor | None = None,
    dq32: T.Tensor | None = None,
    *,
    causal: bool,
    scale: float,
    window: tuple[int | None, int | None] | None,
    stream: Any,
    tiles: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None,
    sm90: bool = False,
) -> None:
    """Runs the three programs over checked tensors: q, o, do, dq (B, H, Sq,
    D); k, v, dk, dv (B, Hk, Sk, D); lse, the scratch delta, lse2 and the
    LSE's gradient `tdlse` if any (B, H, Sq) f32. With `dq32` (B, H, Sq, D)
    f32, dQ is added there atomically by the dkdv program and cast into `dq`
    after (no dq program; not deterministic). `tiles`: the (query rows,
    keys, warps) of dkdv and of dq instead of :func:`shapes` (for sweeps).
    `sm90`: dK, dV and the atomic dQ by the sm_90a kernel
    (attention_bwd_sm90) instead of the dkdv program; delta and lse2 are then
    padded to whole blocks of its query rows."""
    bsz, heads, sq, d = tq.shape
    hk, sk = tk.shape[1], tk.shape[2]
    for t in (tq, tk, tv, to, tdo, tlse, dq, dk, dv, delta, lse2, *([dq32] if dq32 else [])):
        if 1 + sum((n - 1) * st for n, st in zip(t.shape, t.strides, strict=True)) > 1 << 32:
            raise ArgumentError(f"argument '{t.name}': spans more than 2^32 elements")
        # the views' promises (see the builds); the f32 rows are not vectorised
        if t.ptr % (4 if t.dtype == "f32" else 16) or t.strides[-1] != 1:
            raise ArgumentError(
                f"argument '{t.name}': expected a 16-byte aligned base and a unit last stride"
            )
    if max(sq, sk) >= UNBOUNDED:
        raise ArgumentError(f"argument 'q': sequences of 2^30 tokens or more ({sq}, {sk})")
    kv_tiles, q_tiles = tiles or (shapes(d), shapes(d))
    td = tile_dim(d)
    left, right = window_bounds(causal, window)
    group = heads // hk
    pre_bm = 64 if td <= 128 else 32
    key_pre = (tq.dtype, td, pre_bm, 4, tdlse is not None, dq32 is not None)
    args = [*_args(to), *_args(tdo), *_rows(tlse, True), *_rows(delta, True)]
    args += [*_rows(lse2, True), *(_rows(tdlse, True) if tdlse is not None else [])]
    args += [*(_args(dq32) if dq32 is not None else []), heads]
    # Every row of delta and lse2 (padded for the sm_90a kernel: rows past Sq
    # get D = 0 and LSE 0, which make their products 0).
    grid = (-(-delta.shape[2] // pre_bm), bsz * heads, 1)
    fused = sm90 and dq32 is not None and attention_bwd_sm90.fuses_rows(d, tdlse is not None)
    if fused and sq:  # the sm_90a kernel makes the rows: dQ's buffer zeroed only
        assert dq32 is not None
        key_zero = (td, pre_bm, 4)
        grid = (-(-sq // pre_bm), bsz * heads, 1)
        args = [*_args(dq32), heads]
        T.launch(module_zero, key_zero, build_zero(*key_zero).name, grid, 128, args, tq, stream)
    elif sq:
        T.launch(module_pre, key_pre, build_pre(*key_pre).name, grid, 128, args, tq, stream)

    if sm90 and dq32 is not None:
        if sk:
            attention_bwd_sm90.launch(
                *(tq, tk, tv, tdo, lse2, delta, dq32, dk, dv),
                causal=causal,
                scale=scale,
                window=window,
                stream=stream,
                rows_from=(to, tlse) if fused else None,
            )
    key = (tq.dtype, td, *kv_tiles, dq32 is not None)
    bm, bn, warps = kv_tiles
    t_ = (0, 1, 3, 2)  # the last two dims swapped: a transposed view
    args = [*_args(tq), *_args(tq, t_), *_args(tk), *_args(tv), *_args(tdo), *_args(tdo, t_)]
    args += [*_rows(lse2, False), *_rows(delta, False), *_args(dk), *_args(dv)]
    if dq32 is not None:
        args += [*_args(tk, t_), *_args(dq32, t_)]
    args += [hk, group, float(scale), left, right]
    grid = (-(-sk // bn), bsz * hk, 1)
    if sk and not sm90:
        T.launch(module_dkdv, key, build_dkdv(*key).name, grid, warps * 32, args, tq, stream)

    if dq32 is not None:
        key_cast = (tq.dtype, td, pre_bm, 4)
        # The sm_90a kernel adds dQ scaled, the dkdv program unscaled.
        args = [*_args(dq32), *_args(dq), heads, 1.0 if sm90 else float(scale)]
        grid = (-(-sq // pre_bm), bsz * heads, 1)
        if sq:
            name = build_dq_cast(*key_cast).name
            T.launch(module_dq_cast, key_cast, name, grid, 128, args, tq, stream)
        return
    key_dq = (tq.dtype, td, *q_tiles)
    bm, bn, warps = q_tiles
    args = [*_args(tq), *_args(tk), *_args(tk, t_), *_args(tv, t_), *_args(tdo)]
    args += [*_rows(lse2, True), *_rows(delta, True), *_args(dq)]
    args += [heads, group, float(scale), left, right]
    grid = (-(-sq // bm), bsz * heads, 1)
    if sq:
        T.launch(module_dq, key_dq, build_dq(*key_dq).name, grid, warps * 32, args, tq, stream)


@T.planned
def attention_backward(
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    lse: Any,
    do: Any,
    *,
    causal: bool = False,
    scale: float | None = None,
    window: Any = None,
    dlse: Any = None,
    deterministic: bool = False,
    stream: Any = None,
) -> tuple[Any, Any, Any]:
    """The gradients ``(dq, dk, dv)`` of ``o = attention(q, k, v, causal=,
    scale=, window=)`` for the output gradient `do`, from the forward's
    output `o` and log-sum-exp `lse` (``attention(..., return_lse=True)``).

    `q`, `o`, `do` (B, H, Sq, D); `k`, `v` (B, Hk, Sk, D), H a multiple of Hk
    (dk, dv sum over the query heads of each KV head); `lse` (B, H, Sq) f32;
    bf16 or f16 with f32 accumulation; D 64, 96, 128 or 256; masks aligned
    bottom-right as in ``attention`` (for Sq == Sk, the same as top-left).
    `dlse` (B, H, Sq) f32, if given, is the gradient of the LSE output
    (its contribution ``p * dlse`` is added to the scores' gradient).
    Returns new arrays like `q` and `k`, of q's dtype. By default the dK/dV
    program adds dQ atomically into an f32 buffer (FlashAttention-2's way:
    5 dots per pair of blocks; the order of the adds, hence the last bits of
    dq, vary from run to run); with ``deterministic=True`` dQ has a pass of
    its own (7 dots), nothing is added atomically and the same inputs give
    bit-identical gradients."""
    causal = T.flag(causal, "causal")
    deterministic = T.flag(deterministic, "deterministic")
    T.stream_arg(stream)
    names = ("q", "k", "v", "o", "lse", "do")
    tq, tk, tv, to, tl, tdo = (
        T.tensor(x, n) for x, n in zip((q, k, v, o, lse, do), names, strict=True)
    )
    T.same_place(tq, tk, tv, to, tl, tdo)
    T.want_dtype(tl, ("f32",))
    bsz, heads, sq, d, _kv_heads, sk = qkv_shapes(tq, tk, tv, to, tdo)
    T.want_shape(to, tq.shape, "q's shape")
    T.want_shape(tdo, tq.shape, "q's shape")
    T.want_shape(tl, (bsz, heads, sq), "q's (batch, heads, sequence)")
    rows = [tl]
    tdlse = None
    if dlse is not None:
        tdlse = T.tensor(dlse, "dlse")
        T.same_place(tq, tdlse)
        T.want_dtype(tdlse, ("f32",))
        T.want_shape(tdlse, (bsz, heads, sq), "q's (batch, heads, sequence)")
        rows.append(tdlse)
    window = window_arg(window)
    scale = 1.0 / math.sqrt(d) if scale is None else T.real(scale, "scale", high=T.F32_MAX / LOG2E)
    if not np.float32(scale * LOG2E) > 0:
        raise ArgumentError(f"argument 'scale': expected a positive number, got {scale!r}")
    for t in (tq, tk, tv, to, tdo):
        if t.strides[3] != 1 or any(s % 8 for s in t.strides[:3]) or t.ptr % 16:
            raise ArgumentError(
                f"argument '{t.name}': the head dim must be contiguous and the other strides "
                f"multiples of 8 elements, 16-byte aligned (strides {t.strides})"
            )
    for t in rows:
        if t.strides[2] != 1:
            raise ArgumentError(
                f"argument '{t.name}': the sequence must be contiguous (strides {t.strides})"
            )
    if bsz * heads and sq and sk == 0:
        raise ArgumentError("argument 'k': an empty key sequence")
    dq_obj, dq = T.output(None, tq, tq.shape, tq.dtype)
    dk_obj, dk = T.output(None, tq, tk.shape, tq.dtype)
    dv_obj, dv = T.output(None, tq, tk.shape, tq.dtype)
    sm90 = not deterministic and _sm90(tq, d, max(sq, sk))
    # Per query row: rowsum(do * o), and the LSE with -inf made +inf (for
    # the sm_90a kernel padded to whole blocks of its query rows).
    rows_len = -(-sq // SM90_ROWS) * SM90_ROWS if sm90 else sq
    _, delta = T.output(None, tq, (bsz, heads, rows_len), "f32")
    _, lse2 = T.output(None, tq, (bsz, heads, rows_len), "f32")
    dq32 = None if deterministic else T.output(None, tq, tq.shape, "f32")[1]
    if bsz * heads and (sq or sk):  # with Sq = 0, dk and dv are zeros (still written)
        launch(
            tq,
            tk,
            tv,
            to,
            tdo,
            tl,
            dq,
            dk,
            dv,
            delta,
            lse2,
            tdlse,
            dq32,
            causal=causal,
            scale=scale,
            window=window,
            stream=stream,
            sm90=sm90,
        )
    return dq_obj, dk_obj, dv_obj
