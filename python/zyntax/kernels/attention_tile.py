"""Attention forward as a tile program (FlashAttention-2's algorithm on the
tile layer, docs/tile.md), for every head dim of 64..256, grouped-query
attention, causal and sliding-window masks and any sequence lengths.

One program instance owns ``bm`` query rows of one (batch, query head) and
walks the keys of its KV head (``h // group``) in blocks of ``bn``:

    s = dot(q, k^T) * scale           k^T is a transposed view (strides only)
    s = where(visible, s, -inf)       key < Sk, and the causal / window band
    m' = max(m, rowmax(s));  p = exp(s - m');  alpha = exp(m - m')
    l = l * alpha + rowsum(p);  acc = dot(p as bf16/f16, v, acc * alpha)

and stores ``acc / l`` and the log-sum-exp ``m + log l``. Masks are aligned
bottom-right (FlashAttention's convention): query ``i`` sits at key position
``i + Sk - Sq``, and with ``window = (left, right)`` sees keys ``j`` with
``i + Sk - Sq - left <= j <= i + Sk - Sq + right`` (``causal`` caps ``right``
at 0). Only the key blocks that can hold a visible key are visited. A row
that sees no key gives 0 and an LSE of -inf (``l`` is at least 1 for any
row that sees a key: its maximum contributes ``exp(0)``, so dividing by
``max(l, 1)`` is exact and turns the empty rows into 0 without a branch).

Head dims that are not a power of two (96) run on the next power of two: the
loads past ``D`` read zeros, which change no dot product, and the stores
past ``D`` are masked.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from zyntax import hir, tile
from zyntax.errors import ArgumentError

from . import _tensors as T

#: log2(e): the program's exponentials are base 2 (build).
LOG2E = 1.4426950408889634

#: An unbounded window side (any value >= Sq + Sk would do; the kernel's
#: arithmetic stays below 2^32 for sequences under 2^30).
UNBOUNDED = 1 << 30


#: Whether the default program runs the whole key blocks in a loop without
#: the mask (build's `split`).
SPLIT = False

#: Whether sm_90a devices (H100, H200) build the program for sm_90a, where
#: the tile layer puts both dots on wgmma (docs/tile.md, "Row-statistics
#: dots on wgmma"); False builds it for sm_80 (mma.sync) everywhere.
WGMMA = True


@functools.cache
def _device_arch(device: int) -> str:
    from zyntax import cuda

    return str(cuda.device_arch(device))


#: The key loop's TMA ring on sm_90a by tile head dim (build's `stages`,
#: `overlap`, `turns`); other dims keep K and V through registers (the
#: program's prefetch). Session 14 B1 on an H200 (docs/attention.md, same
#: run): at hd 128 the ring of 2 stages with P V in flight (128x64 over 8
#: warps) ran 363.6 TFLOP/s against 212.9 at 16k tokens and 179.1 against
#: 169.7 at 32 heads x 2048 causal; at hd 64 (64x64 over 4 warps, 16 x 16
#: heads x 512 causal) 54.5 against 82.2, so hd 64 stays off it.
RING = {128: (2, True, False)}

#: Tile head dims built for sm_90a on sm_90a devices. hd 64 gave wrong
#: results on an H200 in session 11 (Q's register fragments, reused by
#: ptxas inside the key loop, docs/tile.md); since the tile layer stages Q
#: once (SS form) it is right there and on wgmma 80.4 TFLOP/s against 74.7
#: on mma.sync at batch 16 x 16 heads x 512 causal (session 13 B1,
#: docs/attention.md). hd 256 does not fit wgmma.
WGMMA_DIMS = (64, 128)


def arch_for(t: T.Tensor, d: int = 128) -> str:
    """The schedule's arch for a launch on `t`'s device at head dim `d`:
    ``sm_90a`` on an sm_90a device (with WGMMA, for the tile dims of
    WGMMA_DIMS), else ``sm_80`` (also on the interpreter)."""
    on_90a = t.on_gpu and _device_arch(t.device) == "sm_90a"
    if WGMMA and on_90a and tile_dim(d) in WGMMA_DIMS:
        return "sm_90a"
    return "sm_80"


def tile_dim(d: int) -> int:
    """The head dim the program's tiles use: the next power of two."""
    return 1 << (d - 1).bit_length()


def shapes(d: int) -> tuple[int, int, int]:
    """(query rows per program, keys per block, warps) for head dim `d`.

    With 16 query rows per warp both dots put every warp along M
    (FlashAttention-2's split, docs/tile.md): the row statistics stay in a
    warp, P's A fragments come from its registers and Q's are loaded once
    before the key loop. Measured on an H200 (docs/attention.md, B1 of
    session 9): 64x64 over 4 warps at hd 64 (74 TFLOP/s at batch 16 x 16
    heads x 512 causal, against 71 for 128x64 over 8 and 62 for 128x32
    over 8); 128x64 over 8 warps at hd 96/128 (129-135, within 1-3 % of
    128x32 over 8 and 64x32 over 4; 64x64 over 8 with warps split along N,
    the layout before, 86-93). At hd 256 Q's fragments would take 64
    registers and Q plus a staged K block exceed the 48 KiB scratch, so
    16x32 over 4 warps keeps the warps split along N and Q staged per key
    block."""
    td = tile_dim(d)
    if td >= 256:
        return 16, 32, 4
    if td == 128:
        return 128, 64, 8
    return 64, 64, 4


def prefetches(d: int) -> bool:
    """Whether the program for head dim `d` prefetches K and V (see build):
    it did at hd 64 (74 against 70 TFLOP/s) and 128 (129-135 against
    125-131 for 128x64 over 8 warps without), not at hd 256 (62 against 69:
    its 16x32 blocks over 4 warps run out of registers to hold them)."""
    return tile_dim(d) < 256


@functools.cache
def build(
    dtype: str,
    d: int,
    bm: int,
    bn: int,
    warps: int,
    arch: str = "sm_80",
    prefetch: bool = True,
    split: bool = False,
    stages: int = 0,
    overlap: bool = False,
    turns: bool = False,
) -> tile.Kernel:
    """The forward kernel for tiles of `d` (a power of two) over `dtype`
    (``bf16`` or ``f16``). Parameters: views ``q [B, H, Sq, D]``, ``kt [B, Hk,
    D, Sk]`` (k transposed by its strides), ``v [B, Hk, Sk, D]``, ``o [B, H,
    Sq, D]``, ``lse [B, H, Sq, 1]`` (f32); scalars ``heads`` (H), ``group``
    (H / Hk), ``scale`` (f32), ``left``, ``right`` (the window).

    With `prefetch`, each key block loads its V block first and the K block
    of the next iteration (carried by the loop), so those global loads are
    in flight while the two dots and the softmax of this block run: the
    tile layer issues loads where the program places them and does not
    pipeline a loop other than the sm_90a GEMM loop itself. For sm_90a
    (wgmma) V is carried a block ahead as well, both loaded right after the
    first dot: the carried V is then ready when the first dot stages K, and
    is staged behind the same barrier (docs/tile.md).

    With `split`, the key blocks every row of the query block sees whole
    (left of a causal diagonal, inside a window, before the key tail) run in
    a loop of their own without the mask (FlashAttention's split of the
    masked blocks): three loops, masked / whole / masked, carrying the same
    values.

    With `stages` (sm_90a), the key loop (or the split program's three)
    runs on a TMA ring of that many stages (the tile layer's warp-specialised key
    loop, docs/tile.md): a producer warp loads each key block's K and V
    into shared memory by TMA and the dots read them there, so the program
    loads them in the loop body (no prefetch through registers). With
    `overlap` the loop is rotated: each iteration issues S of the next key
    block and P V of this one and runs the next block's softmax while P V
    runs (one wgmma group in flight, FlashAttention-3's intra-warpgroup
    overlap); with `turns` too (two consumer warpgroups: 8 warps) they take
    turns at issuing their wgmmas, one's softmax under the other's
    (FlashAttention-3's ping-pong; the schedule's ``pingpong``, which asks
    for ``persistent``: the ring's grid stays the program's)."""
    ring = stages > 0 and arch == "sm_90a"
    prefetch = prefetch and not ring
    t = tile.Builder(
        f"attention_tile_{dtype}_d{d}_{bm}x{bn}w{warps}{'_pf' if prefetch else ''}"
        f"{'_split' if split else ''}{f'_ring{stages}' if ring else ''}"
        f"{'o' if ring and overlap else ''}{'t' if ring and overlap and turns else ''}",
        tile.Schedule(
            (bm, bn),
            k=16,
            warps=warps,
            arch=arch,
            warp_specialize=ring,
            stages=stages if ring else 1,
            wgmma_in_flight=int(ring and overlap),
            persistent=ring and overlap and turns,
            pingpong=ring and overlap and turns,
        ),
    )
    # 16-byte aligned bases (attention() checks them): 8-element vector
    # accesses along the head dim wherever a run of them is in bounds.
    q = t.view("q", dtype, 4, unit_stride_dim=3, align_bytes=16)
    kt = t.view("kt", dtype, 4, unit_stride_dim=2, align_bytes=16)
    v = t.view("v", dtype, 4, unit_stride_dim=3, align_bytes=16)
    o = t.view("o", dtype, 4, unit_stride_dim=3, align_bytes=16)
    lse = t.view("lse", "f32", 4)
    heads = t.scalar_param("heads", "u32")
    group = t.scalar_param("group", "u32")
    scale = t.scalar_param("scale", "f32")
    left = t.scalar_param("left", "u32")
    right = t.scalar_param("right", "u32")

    # Grid (B * H, query blocks): the hardware starts blocks x-fastest, so
    # every head's last query block (the longest under a causal mask) runs
    # first and the short ones fill in at the end.
    bh = t.program_id(0)
    b = t.scalar_binary("div", bh, heads)
    h = t.scalar_binary("rem", bh, heads)
    hk = t.scalar_binary("div", h, group)
    sq, sk = q.dim(2), kt.dim(3)
    blocks = t.scalar_binary("div", sq + (bm - 1), t.constant("u32", bm))
    m0 = (blocks - 1 - t.program_id(1)) * bm

    # The key range any row of this block sees: [lo, hi), lo rounded down to
    # a block. With u32 scalars, max() keeps the subtractions from wrapping.
    first = t.scalar_binary("max", m0 + sk, sq + left) - (sq + left)
    lo = t.scalar_binary("div", first, t.constant("u32", bn)) * bn
    last = t.scalar_binary("max", m0 + bm + sk + right, sq) - sq
    hi = t.scalar_binary("min", last, sk)

    qt = t.load(q, (b, h, m0, 0), (bm, d))
    rows = t.iota((bm, bn), 0) + t.splat((bm, bn), m0 + sk)  # i + Sk
    # exp(scale * (s - m)) as 2^(s * scale2 - m * scale2), one FFMA and one
    # MUFU op per score (FlashAttention-3's form): s and m stay unscaled.
    scale2 = t.scalar_binary("mul", scale, t.constant("f32", LOG2E))
    neg_scale2 = t.scalar_binary("mul", scale, t.constant("f32", -LOG2E))
    scale2_t, neg_scale2_r = t.splat((bm, bn), scale2), t.splat((bm, 1), neg_scale2)
    neg_inf = t.full((bm, bn), "f32", float("-inf"))

    def softmax_terms(s: tile.Tile, m: tile.Tile, m_use: tile.Tile) -> tuple[tile.Tile, tile.Tile]:
        """p = exp(scale (s - m_use)) and alpha = exp(scale (m - m_use))."""
        neg = (m_use * neg_scale2_r).broadcast((bm, bn))
        p = t.unary("ex2_approx", t.fma(s, scale2_t, neg))
        alpha = t.unary("ex2_approx", (m_use - m) * neg_scale2_r)
        return p, alpha

    # On wgmma V is carried a block ahead too (see the docstring); on
    # mma.sync that would hold two V blocks in registers at once.
    v_ahead = prefetch and arch == "sm_90a"

    def step(
        t: tile.Builder, n0: tile.Scalar, carried: list[Any], masked: bool = True
    ) -> list[Any]:
        acc, m, l_, *ahead = carried
        if v_ahead:
            kb, vb = ahead
        elif prefetch:
            kb = ahead[0]
            vb = t.load(v, (b, hk, n0, 0), (bn, d))
            nexts = [t.load(kt, (b, hk, 0, n0 + bn), (d, bn))]
        else:
            kb = t.load(kt, (b, hk, 0, n0), (d, bn))
            nexts = []
        s = t.dot(qt, kb, t.zeros((bm, bn)))
        if v_ahead:  # the next key block's K and V, in flight through this one
            nexts = [
                t.load(kt, (b, hk, 0, n0 + bn), (d, bn)),
                t.load(v, (b, hk, n0 + bn, 0), (bn, d)),
            ]
        if not masked:  # every row sees every key of the block: m_new is finite
            m_new = t.maximum(m, s.max(1))
            p, alpha = softmax_terms(s, m, m_new)
            l_new = l_ * alpha + p.sum(1)
            if not prefetch:
                vb = t.load(v, (b, hk, n0, 0), (bn, d))
            acc = t.dot(p.cast(dtype), vb, acc * alpha.broadcast((bm, d)))
            return [acc, m_new, l_new, *nexts]
        cols = t.iota((bm, bn), 1) + t.splat((bm, bn), n0 + sq)  # j + Sq
        visible = t.cmp("lt", cols, t.splat((bm, bn), sk + sq))  # j < Sk
        after = t.cmp("ge", cols + t.splat((bm, bn), left), rows)  # j >= i' - left
        before = t.cmp("le", cols, rows + t.splat((bm, bn), right))  # j <= i' + right
        # One select per score: the three conditions and-ed as predicates.
        s = t.where(t.binary("and", visible, t.binary("and", after, before)), s, neg_inf)
        m_new = t.maximum(m, s.max(1))
        # A row with no visible key yet keeps m = -inf: subtract 0 instead,
        # so its p and alpha are exp(-inf) = 0 rather than NaN.
        m_use = t.where(
            t.cmp("eq", m_new, t.full((bm, 1), "f32", float("-inf"))),
            t.zeros((bm, 1)),
            m_new,
        )
        p, alpha = softmax_terms(s, m, m_use)
        l_new = l_ * alpha + p.sum(1)
        if not prefetch:
            vb = t.load(v, (b, hk, n0, 0), (bn, d))
        acc = t.dot(p.cast(dtype), vb, acc * alpha.broadcast((bm, d)))
        return [acc, m_new, l_new, *nexts]

    inits = [t.zeros((bm, d)), t.full((bm, 1), "f32", float("-inf")), t.zeros((bm, 1))]
    if prefetch:
        inits.append(t.load(kt, (b, hk, 0, lo), (d, bn)))
    if v_ahead:
        inits.append(t.load(v, (b, hk, lo, 0), (bn, d)))
    if split:
        # Whole blocks n0 (lo + k * bn): n0 >= i' - left for the last row
        # (from a on) and n0 + bn - 1 <= min(Sk - 1, i' + right) for the first
        # (the first (ue - Sq - lo) / bn blocks); u32 max() keeps the
        # subtractions from wrapping. Any whole block lies below hi.
        cbn = t.constant("u32", bn)
        low = t.scalar_binary("max", m0 + (bm - 1) + sk, sq + left + lo) - (sq + left)
        a = lo + t.scalar_binary("div", low - lo + (bn - 1), cbn) * bn
        ue = t.scalar_binary("min", sk + sq, m0 + sk + right + 1)
        whole = t.scalar_binary("div", t.scalar_binary("max", ue, sq + lo) - (sq + lo), cbn)
        c = t.scalar_binary("max", a, lo + whole * bn)
        carried = t.for_range(lo, t.scalar_binary("min", a, hi), bn, inits, step)
        carried = t.for_range(a, c, bn, carried, lambda t, n0, cr: step(t, n0, cr, masked=False))
        carried = t.for_range(c, hi, bn, carried, step)
    else:
        carried = t.for_range(lo, hi, bn, inits, step)
    acc, m, l_, *_ = (_tile(x) for x in carried)
    inv = 1.0 / t.maximum(l_, t.full((bm, 1), "f32", 1.0))
    t.store(o, (b, h, m0, 0), (acc * inv.broadcast((bm, d))).cast(dtype))
    # m is the unscaled row maximum.
    t.store(lse, (b, h, m0, 0), m * t.splat((bm, 1), scale) + t.unary("log", l_))
    return t.finish()


def module(
    dtype: str,
    d: int,
    bm: int,
    bn: int,
    warps: int,
    prefetch: bool = True,
    split: bool = False,
    arch: str = "sm_80",
    stages: int = 0,
    overlap: bool = False,
    turns: bool = False,
) -> hir.Module:
    k = build(dtype, d, bm, bn, warps, arch, prefetch, split, stages, overlap, turns)
    return k.module


def qkv_shapes(tq: Any, tk: Any, tv: Any, *like_q: Any) -> tuple[int, int, int, int, int, int]:
    """``(batch, heads, q tokens, head dim, kv heads, kv tokens)`` of the
    attention forward's and backward's q, k, v (``T.tensor``s), checked: q is
    bf16 or f16 and k, v and `like_q` (the backward's o, do) of q's dtype, all
    of rank 4, a head dim of 64, 96, 128 or 256, k and v (batch, kv heads,
    kv tokens, head dim) with kv heads dividing q's heads; ArgumentError
    naming the argument."""
    T.want_dtype(tq, ("bf16", "f16"))
    for t in (tk, tv, *like_q):
        if t.dtype != tq.dtype:
            raise ArgumentError(f"argument '{t.name}': dtype {t.dtype}, expected {tq.dtype} (q's)")
    for t in (tq, tk, tv, *like_q):
        if len(t.shape) != 4:
            raise ArgumentError(
                f"argument '{t.name}': shape {t.shape}; expected (batch, heads, sequence, head dim)"
            )
    bsz, heads, sq, d = tq.shape
    kv_heads, sk = tk.shape[1], tk.shape[2]
    if d not in (64, 96, 128, 256):
        raise ArgumentError(f"argument 'q': head dim {d} is not supported (64, 96, 128 or 256)")
    if kv_heads < 1 or heads % kv_heads:
        raise ArgumentError(
            f"argument 'k': {kv_heads} heads; expected a divisor of q's {heads} heads"
        )
    T.want_shape(tk, (bsz, kv_heads, sk, d), "q's batch and head dim")
    T.want_shape(tv, (bsz, kv_heads, sk, d), "k's shape")
    return bsz, heads, sq, d, kv_heads, sk


def window_arg(window: Any) -> tuple[int | None, int | None] | None:
    """`window` checked: None, an int w >= 0 (the same as ``(w, w)``) or a pair
    ``(left, right)`` of ints >= 0 or None (unbounded)."""
    if window is None:
        return None
    if _is_count(window):
        return int(window), int(window)
    if isinstance(window, (tuple, list)) and len(window) == 2:
        if all(w is None or _is_count(w) for w in window):
            left, right = (None if w is None else int(w) for w in window)
            return left, right
    raise ArgumentError(
        "argument 'window': expected None, an int >= 0 or a pair (left, right) of ints >= 0 "
        f"or None, got {T.show(window)}"
    )


def _is_count(x: Any) -> bool:
    return bool(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and x >= 0)


def _tile(x: tile.Value) -> tile.Tile:
    assert isinstance(x, tile.Tile)  # the loop carries tiles only
    return x


def window_bounds(causal: bool, window: tuple[int | None, int | None] | None) -> tuple[int, int]:
    """The (left, right) scalars of the kernel for `causal` and a checked `window`."""
    left, right = window if window is not None else (None, None)
    left = UNBOUNDED if left is None else min(left, UNBOUNDED)
    right = UNBOUNDED if right is None else min(right, UNBOUNDED)
    if causal:
        right = min(right, 0)
    return left, right


def launch(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    o: T.Tensor,
    lse: T.Tensor,
    *,
    causal: bool,
    scale: float,
    window: tuple[int | None, int | None] | None,
    stream: Any,
    tiles: tuple[Any, ...] | None = None,
) -> None:
    """Runs the forward program over checked tensors: q, o (B, H, Sq, D), k, v
    (B, Hk, Sk, D), lse (B, H, Sq) f32; H a multiple of Hk. `tiles` (query
    rows, keys per block, warps, prefetch[, split[, arch[, stages[,
    overlap[, turns]]]]]) replaces ``shapes(d)`` and the defaults (for
    benches sweeping them; `arch`, e.g. ``"sm_80"``, replaces
    ``arch_for(q)``; `stages` > 0 the TMA ring's, `overlap` and `turns`,
    see build; without them no ring, by default RING's)."""
    bsz, heads, sq, d = tq.shape
    hk, sk = tk.shape[1], tk.shape[2]
    # Views address elements with u32 offsets, and the mask arithmetic adds
    # positions and window sides (each below 2^30) in u32.
    for t in (tq, tk, tv, o, lse):
        if 1 + sum((n - 1) * st for n, st in zip(t.shape, t.strides, strict=True)) > 1 << 32:
            raise ArgumentError(f"argument '{t.name}': spans more than 2^32 elements")
        if t.ptr % 16 or t.strides[-1] != 1:  # the views' promises (see build)
            raise ArgumentError(
                f"argument '{t.name}': expected a 16-byte aligned base and a unit last stride"
            )
    if max(sq, sk) >= UNBOUNDED:
        raise ArgumentError(f"argument 'q': sequences of 2^30 tokens or more ({sq}, {sk})")
    bm, bn, warps, pf, *rest = tiles or (*shapes(d), prefetches(d), SPLIT)
    split = bool(rest and rest[0])
    arch = str(rest[1]) if len(rest) > 1 and rest[1] else arch_for(tq, d)
    # The ring: the caller's `tiles`, or by default RING's for the tile dim.
    given = [*rest[2:5], 0, False, False][:3]  # stages, overlap, turns
    ring = (int(given[0]), bool(given[1]), bool(given[2]))
    if tiles is None and arch == "sm_90a":
        ring = RING.get(tile_dim(d), ring)
    stages, overlap, turns = ring
    key = (tq.dtype, tile_dim(d), bm, bn, warps, pf, split, arch, stages, overlap, turns)
    kernel = build(*key[:5], arch, pf, split, stages, overlap, turns)
    left, right = window_bounds(causal, window)

    def view(t: T.Tensor, shape: tuple[int, ...], strides: tuple[int, ...]) -> list[Any]:
        return [t, *shape, *strides]

    qs, ks, vs, os_, ls = tq.strides, tk.strides, tv.strides, o.strides, lse.strides
    args = [
        *view(tq, tq.shape, qs),
        *view(tk, (bsz, hk, d, sk), (ks[0], ks[1], ks[3], ks[2])),  # k^T: strides only
        *view(tv, tv.shape, vs),
        *view(o, o.shape, os_),
        *view(lse, (*lse.shape, 1), (*ls, 1)),
        heads,
        heads // hk,
        float(scale),
        left,
        right,
    ]
    # The TMA ring's maps (build's `stages`): K and V as stored, (B, Hk, Sk,
    # D) innermost last, boxes of 64 head-dim elements x the key block.
    views = {"kt": tk, "v": tv}
    args += [_tensor_map(views[m.view], m.box) for m in kernel.tensor_maps]
    grid = (bsz * heads, -(-sq // bm), 1)
    if grid[1] >= 1 << 16:  # the grid's y extent
        raise ArgumentError(f"argument 'q': {sq} queries make more than 65535 blocks of {bm}")
    T.launch(module, key, kernel.name, grid, kernel.block[0], args, tq, stream)


def _tensor_map(t: T.Tensor, box: tuple[int, int]) -> Any:
    """The TMA map of K or V (``(B, Hk, Sk, D)``, D contiguous: the map's
    dims innermost first are D, Sk, Hk, B) with boxes of `box` (D, Sk)
    elements: on the GPU through ``_tensors.tensor_map``, on the interpreter
    over a C-contiguous copy."""
    full = (*box, 1, 1)
    if t.on_gpu:
        return T.tensor_map(t, full, swizzle="128B", dtype=t.dtype)
    from zyntax import interp

    return interp.TensorMap(np.ascontiguousarray(t.arr), full, swizzle="128B", dtype=t.dtype)
