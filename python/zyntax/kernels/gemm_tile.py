"""Matrix products as one tile program (issue 30; docs/tile.md, docs/kernels.md).

:func:`program` is the whole GEMM: ``act(a @ b + bias)`` with f32
accumulation over bf16, f16 or f32 operands of any strides, batched (the
third grid axis) or grouped (MoE: row groups of `a` against per-group
weights), split along K when the output alone cannot fill the GPU. The tile
layer (``zyntax-tile``) picks the layouts and lowers the K loop to the wgmma
pipeline on sm_90a, ``mma.sync`` on sm_80-class code and FFMA for f32;
:func:`schedule` (the tile crate's table) only chooses the tile shapes.

:func:`launch` runs it over checked tensors; ``zyntax.kernels.matmul`` (batched
operands, and the 2-D cases where it is measured faster than the hand-written
kernels) and :func:`grouped_matmul` call it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax import _native, hir, tile
from zyntax.errors import ArgumentError

from . import _plans
from . import _tensors as T
from ._dtypes import DTYPES

GELU_C = 0.7978845608028654  # sqrt(2 / pi): GELU's tanh form, as the other variants


@dataclass(frozen=True)
class Spec:
    """What one compiled program specialises on (a kernel cache key).

    `a_rank`/`b_rank`: 2 for a view the batch is folded into (or broadcast
    over), 3 for a ``[batch, rows, cols]`` view; `a_unit`/`b_unit`: the
    unit-stride dim of the operand's last two (0, 1 or None); `aligned`:
    16-byte aligned bases of a, b, out; `groups`: 0, or the number of row
    groups of a grouped product (one output view each); `split`: the
    program writes f32 partials per K split (:func:`finish` sums them)."""

    dtype: str
    out_dtype: str
    bias: str | None
    activation: str | None
    a_rank: int
    b_rank: int
    a_unit: int | None
    b_unit: int | None
    aligned: tuple[bool, bool, bool]
    groups: int
    split: bool
    schedule: tuple[int, int, int, int, int, str]  # bm, bn, bk, warps, stages, arch
    #: the warp-specialised TMA pipeline (docs/tile.md), persistent
    ws: bool = False
    #: with `ws`: (wgmma groups in flight, two consumer sets in turn, CTAs
    #: per cluster, the cluster along N), as ``zyntax_tile::ws_heuristic``
    #: chose them
    ws_opts: tuple[int, bool, int, bool] = (0, False, 1, False)
    #: a contiguous, 8-byte aligned bias: read two columns per access
    bias_vec: bool = False
    #: how the dot reads a and b (``tile.Builder.dot``): "native", "tf32"
    #: (f32 operands) or "e4m3" (fp8 bytes, `dtype` "e4m3", u8 views)
    inputs: str = "native"
    #: an f32 scalar parameter `scale` multiplies the accumulator (fp8's
    #: per-tensor scales, ``scale_a * scale_b``, as ``torch._scaled_mm``)
    scaled: bool = False
    #: with `ws` (not split): the output is a 2-D view stored through shared
    #: memory and TMA (``Schedule.tma_store``, the tile crate's
    #: ``lower/store_tma.rs``)
    tma_store: bool = False
    #: GELU through ``tanh.approx.f32`` (one MUFU op; its ~5e-4 relative error
    #: is below a bf16/f16 output's rounding), on the GPU only
    gelu_approx: bool = False
    #: the swapped small-M form (:func:`launch_swapped`): the program computes
    #: ``c^T = b^T a^T`` (weight rows as its M, tokens as a narrow N), so `c`
    #: is unit-stride along its rows, the bias a per-row broadcast, and the
    #: warp-specialised grid is not persistent
    swap: bool = False


def _ge(p: tile.Scalar, s: tile.Scalar) -> tile.Scalar:
    """1 if p >= s else 0, for u32 values below 2^31 (the sign of the wrapped difference)."""
    return 1 - p.builder.scalar_binary("shr", p - s, 31)


def _bias_view(t: tile.Builder, s: Spec) -> tile.View | None:
    """The bias as a [1, N] view (row stride 0), if there is one."""
    if not s.bias:
        return None
    if s.swap:  # [N, 1]: one bias element per row of c^T
        return t.view("bias", s.bias, 2)
    if s.bias_vec:
        return t.view("bias", s.bias, 2, unit_stride_dim=1, align_bytes=8)
    return t.view("bias", s.bias, 2)


def _epilogue(
    t: tile.Builder, s: Spec, acc: tile.Tile, bias: Any, n0: Any, m0: Any = 0
) -> tile.Tile:
    """bias, activation and the cast of the output, in registers."""
    bm, bn = acc.shape
    if bias is not None and s.swap:
        acc = acc + t.load(bias, (m0, 0), (bm, 1)).cast("f32").broadcast((bm, bn))
    elif bias is not None:
        acc = acc + t.load(bias, (0, n0), (1, bn)).cast("f32").broadcast((bm, bn))
    if s.activation == "relu":
        acc = t.maximum(acc, t.zeros((bm, bn)))
    elif s.activation == "gelu" and s.gelu_approx:
        # x / 2 (1 + tanh(v)), v = c (x + 0.044715 x^3): one MUFU op
        half = acc * 0.5
        v = acc * (acc * acc * (0.044715 * GELU_C) + GELU_C)
        acc = half * t.unary("tanh_approx", v) + half
    elif s.activation == "gelu":
        # x (1 + tanh(v)) / 2 = x sigmoid(2 v) = x r^2, r = rsqrt(1 + exp(-2 v)):
        # two approximate MUFU ops where tanh took a full-precision division
        # (B1, H200: 218 against 508 TFLOP/s with bias only).
        v2 = (acc + acc * acc * acc * 0.044715) * (-2.0 * GELU_C)
        r = t.unary("rsqrt", t.unary("exp", v2) + 1.0)
        acc = acc * r * r
    return acc.cast(s.out_dtype)


def program(s: Spec) -> tile.Kernel:
    """``c[z] = act(a[z] @ b[z] + bias)``; grid (M tiles, N tiles, batch * splits),
    or (row tiles of all groups, N tiles, 1) when grouped."""
    bm, bn, bk, warps, stages, arch = s.schedule
    in_flight, pingpong, cluster, cluster_n = s.ws_opts
    sched = tile.Schedule(
        (bm, bn), k=bk, warps=warps, stages=stages, arch=arch, warp_specialize=s.ws,
        persistent=s.ws and not s.split and not s.swap, wgmma_in_flight=in_flight,
        cluster=cluster, cluster_n=cluster_n, **({"pingpong": True} if pingpong else {}),
        **({"tma_store": True} if s.tma_store else {}),
    )  # fmt: skip
    t = tile.Builder("matmul", sched)

    def view(name: str, dt: str, rank: int, unit: int | None, aligned: bool) -> tile.View:
        unit = None if unit is None else unit + rank - 2
        align = 16 if aligned and unit is not None else None
        return t.view(name, dt, rank, unit_stride_dim=unit, align_bytes=align)

    # fp8 operands are u8 views of their bytes; the dot names the format.
    in_dt = "u8" if s.dtype == "e4m3" else s.dtype
    a = view("a", in_dt, s.a_rank, s.a_unit, s.aligned[0])
    b = view("b", in_dt, s.b_rank, s.b_unit, s.aligned[1])
    out_dt = "f32" if s.split else s.out_dtype
    # A TMA store writes a 2-D view (one batch: the WS route's products).
    c_rank = 2 if s.tma_store else 3
    c_unit = 0 if s.swap else 1
    cs = [view(f"c{i}", out_dt, c_rank, c_unit, s.aligned[2]) for i in range(max(1, s.groups))]
    bias = _bias_view(t, s) if not s.split else None
    # Per batch, the folded views move by (a_r, a_c) and (b_r, b_c) elements of (rows, cols).
    kk, kps, splits, a_r, a_c, b_r, b_c = (
        t.scalar_param(n, "u32") for n in ("k", "kps", "splits", "a_r", "a_c", "b_r", "b_c")
    )
    scale = t.scalar_param("scale", "f32") if s.scaled else None
    # Swapped: the token tiles (N) are the grid's fastest axis, so the CTAs
    # that share a weight tile run together and read it from L2 once.
    pm, pn = (1, 0) if s.swap else (0, 1)
    n0, z = t.program_id(pn) * bn, t.program_id(2)
    batch = t.scalar_binary("div", z, splits)
    k_lo = t.scalar_binary("rem", z, splits) * kps
    m0, lead = t.program_id(pm) * bm, [z]
    if s.groups:  # the group of this row tile, from the groups' first tiles and rows
        p = t.program_id(0)
        firsts = [t.scalar_param(f"tile{i}", "u32") for i in range(1, s.groups)]
        rows = [t.scalar_param(f"row{i}", "u32") for i in range(1, s.groups)]
        ge = [_ge(p, f) for f in firsts]
        batch = _sum(t, ge)
        prev: list[Any] = [0, *firsts][:-1]
        m0 = (p - _sum(t, [g * (f - q) for g, f, q in zip(ge, firsts, prev, strict=True)])) * bm
        row0 = _sum(t, [g * r for g, r in zip(ge, rows, strict=True)])
        # 1 in the group's own view ([2, rows, N] from the group's first row);
        # in the others a multiple of 2^16 past 1, outside the view: no write.
        lead = [(batch - i) * 65536 + 1 for i in range(s.groups)]
    am = (row0 + m0) if s.groups else m0
    k_hi = t.scalar_binary("min", k_lo + kps, kk)

    def at(rank: int, r: Any, c: Any, dr: Any, dc: Any) -> tuple[Any, ...]:
        return (batch, r, c) if rank == 3 else (batch * dr + r, batch * dc + c)

    def step(t: tile.Builder, k0: tile.Scalar, acc: list[Any]) -> list[Any]:
        x = t.load(a, at(s.a_rank, am, k0, a_r, a_c), (bm, bk))
        y = t.load(b, at(s.b_rank, k0, n0, b_r, b_c), (bk, bn))
        return [t.dot(x, y, acc[0], None if s.inputs == "native" else s.inputs)]

    (acc,) = t.for_range(k_lo, k_hi, bk, [t.zeros((bm, bn))], step)
    if scale is not None:  # before a split's partials too: the sum is linear
        acc = acc * t.splat((bm, bn), scale)  # type: ignore[operator]
    res = acc if s.split else _epilogue(t, s, acc, bias, n0, m0)  # type: ignore[arg-type]
    for c, lz in zip(cs, lead, strict=True):
        t.store(c, (m0, n0) if s.tma_store else (lz, m0, n0), res)  # type: ignore[arg-type]
    return t.finish()


def finish(s: Spec) -> tile.Kernel:
    """The second pass of a split product: ``c[z, m, n] = act(sum_s ws[z, s, m * N + n] + bias)``.

    One instance sums a ``[S, bn]`` slab of the partials (``S``, the
    schedule's first block dim: the splits rounded up to a power of two;
    rows past the splits read 0) in one load, so every split's read is in
    flight at once, and reduces it in registers. The partials are a
    ``[batch, splits, M * N]`` view: a slab may run past row m's N columns
    into row m + 1, whose sums the store into ``c`` masks."""
    sp, bn, _, warps, _, arch = s.schedule
    t = tile.Builder("matmul_finish", tile.Schedule((sp, bn), k=16, warps=warps, arch=arch))
    ws = t.view("ws", "f32", 3, unit_stride_dim=2, align_bytes=16)
    c = t.view("c", s.out_dtype, 3, unit_stride_dim=2)
    bias = _bias_view(t, s)
    m, n0, z = t.program_id(0), t.program_id(1) * bn, t.program_id(2)
    part = t.load(ws, (z, 0, m * t.dim(c, 2) + n0), (sp, bn))
    t.store(c, (z, m, n0), _epilogue(t, s, t.sum(part, 0), bias, n0))
    return t.finish()


#: f32 partials per instance of the finishing pass (32 a thread over 4 warps).
#: A loop over the splits, one ``[bm, bn]`` tile a step, waited an L2 round
#: trip per split (session 12's finish).
FINISH_ELEMS = 4096
FINISH_WARPS = 4


def finish_launch(
    s: Spec, ws: T.Tensor, splits: int, c: Operand, bias: T.Tensor | None, stream: Any = None
) -> None:
    """Launches :func:`finish` for a split product's `splits` partials in
    `ws` (``[batch * splits, M, N]`` f32, contiguous) into `c` (`s`: the
    product's spec; its schedule is replaced by the finishing pass's)."""
    tc, (nb, m, n), cst = c
    sp = 1 << (splits - 1).bit_length()
    bn = min(512, max(32, FINISH_ELEMS // sp))
    fs = dataclasses.replace(s, schedule=(sp, bn, 16, FINISH_WARPS, 1, s.schedule[5]))
    bias_args = [] if bias is None else [bias, 1, n, 0, bias.strides[0]]
    args = [ws, nb, splits, m * n, splits * m * n, m * n, 1, tc, nb, m, n, *cst, *bias_args]
    grid = (m, -(-n // bn), nb)
    T.launch(_finish_module, (fs,), "matmul_finish", grid, FINISH_WARPS * 32, args, tc, stream)


def _sum(t: tile.Builder, xs: list[Any]) -> Any:
    total: Any = t.constant("u32", 0)
    for x in xs:
        total = total + x
    return total


# ---------------------------------------------------------------- schedules

#: Arch whose code numpy inputs run (natively on the CPU or on the interpreter).
HOST_ARCH = "sm_80"
#: 2-D bf16/f16 products on sm_90a (tiles 128 wide or more, no split) run the
#: warp-specialised, persistent TMA pipeline (a producer warpgroup, mbarrier
#: rings; docs/tile.md), bias and activation included (the consumers apply
#: them to the accumulator's registers, ``lower/fuse.rs``). B1 on an H200:
#: 678 TFLOP/s at 4096^3 against 558 on the cp.async pipeline, 672 against
#: 553 for A.T @ B, 249 (0.94x cuBLAS) at 256x4096x4096 on 64x128 tiles; on
#: 64x64 tiles 181 against 238, hence the width condition.
WARP_SPECIALIZE = True
#: Split-K products of M up to 64 (decode) also run the warp-specialised
#: pipeline, one CTA per (tile, split) and not persistent: TMA streams the
#: weights where every thread of the cp.async pipeline issued its copies
#: (B1 on an H200: that route ran 0.49-0.90x cuBLAS at M = 1 and 16).
WS_SPLIT = True
#: The largest M whose K-split products take that route (the cp.async
#: pipeline above it): the tile crate splits 129 to 256 rows with a long K
#: on 128x128 tiles (``MID_SPLIT_MIN_K``; session 12 B1 on an H200,
#: 256x4096x14336 in 2 splits on this route: 55.4 us against 67.3 unsplit).
WS_SPLIT_MAX_M = 256
#: ((bm, bn, bk, warps, stages), K splits) that replaces the tile crate's
#: choice for every call (benches/gemm.py --tile-ladder compares them).
FORCE: tuple[tuple[int, int, int, int, int], int] | None = None
#: Products on the warp-specialised route store their output tile through
#: shared memory and TMA (``Spec.tma_store``) where the output allows it
#: (16-byte aligned base and row stride, unit column stride). Session 12 B1,
#: H200, TFLOP/s, register stores / TMA store (same run; cuBLAS): QKV
#: 8192x3072x1024 + bias 503 / 551 on 128x128 ping-pong, 6 stages (556 with
#: 5: two box buffers a set; 688), MLP up 8192x4096x1024 + bias + GELU 285 /
#: 429 (504 addmm + GELU), down 8192x1024x4096 + bias on 128x256: 656 / 725
#: (779). Nsight Compute (QKV, locked ~1.3 GHz): 183.7 k cycles / 162.1 k,
#: tensor pipe 52.6 / 59.7 % (cuBLAS 123.8 k, 77.6 %).
TMA_STORE = True
#: GELU on the warp-specialised route with a bf16/f16 output runs
#: ``tanh.approx.f32`` (``Spec.gelu_approx``) instead of exp + rsqrt: B1, MLP
#: up with the TMA store on 128x128 ping-pong (5 stages), 436 / 523 TFLOP/s
#: (cuBLASLt's fused bias + GELU 645).
GELU_APPROX = True
#: ((bm, bn, warps, stages), wgmma_in_flight, pingpong[, cluster,
#: cluster_n]) that replaces the warp-specialised choice (benches; call
#: ``ws_schedule.cache_clear()`` and clear ``matmul.plans`` after setting it).
WS_FORCE: tuple[Any, ...] | None = None


@functools.cache
def ws_schedule(
    m: int, n: int, k: int, sms: int, operand_bytes: int = 2
) -> tuple[tuple[int, int, int, int, int, str], tuple[int, int, int, int]] | None:
    """The warp-specialised persistent schedule of an M x N x K bf16/f16
    product (`operand_bytes` 1: fp8, 4: tf32; K steps of 128 bytes) on
    sm_90a with `sms` SMs (``zyntax_tile::ws_heuristic``: the tile,
    stages, wgmma groups in flight, ping-pong, CTAs per cluster and whether
    the cluster runs along N), or None where the crate keeps the output off
    it (too few tiles)."""
    if WS_FORCE is not None:
        (bm, bn, warps, stages), in_flight, forced, *cl = WS_FORCE
        cluster, along_n = (cl[0] if cl else 1), (len(cl) > 1 and bool(cl[1]))
        sched = (bm, bn, 128 // operand_bytes, warps, stages, "sm_90a")
        return sched, (in_flight, int(forced), int(cluster), int(along_n))
    s = _native.tile_heuristic(
        m, n, k, operand_bytes=operand_bytes, arch="sm_90a", warp_specialize=True, sms=sms
    )
    if not s.warp_specialize:
        return None
    sched = (s.block[0], s.block[1], s.k, s.warps, s.stages, "sm_90a")
    return sched, (s.wgmma_in_flight, int(s.pingpong), s.cluster, int(s.cluster_n))


def schedule(
    dtype: str, m: int, n: int, k: int, batch: int, arch: str, sms: int, inputs: str = "native"
) -> tuple[tuple[int, int, int, int, int, str], int]:
    """(schedule, K splits) for a `batch` of M x N x K products: the tile
    crate's table (``zyntax_tile::schedule::gemm_schedule``: the largest tile
    that gives every SM a CTA, K split when the output leaves SMs idle).
    fp8 and tf32 on sm_90a take the 16-bit wgmma tiles with K steps of 128
    bytes (the same stage bytes); elsewhere they run on FFMA (its tiles)."""
    if FORCE is not None:
        return (*FORCE[0], arch), FORCE[1]
    wgmma = inputs != "native" and arch == "sm_90a"
    ob = 2 if wgmma or dtype in ("bf16", "f16") else 4
    s, splits = _native.tile_gemm_schedule(
        m, n, k, batch=batch, operand_bytes=ob, arch=arch, sms=sms
    )
    bk = 128 // ITEMSIZE[dtype] if wgmma else s.k
    return (s.block[0], s.block[1], bk, s.warps, s.stages, arch), splits


#: Bytes of an operand element, by dtype name.
ITEMSIZE = {n: DTYPES[n].itemsize for n in ("f32", "f16", "bf16", "e4m3")}


# ---------------------------------------------------------------- launching


#: The gemv route for products of a few rows: the module :mod:`gemv_tile`
#: (its ``applies`` and ``launch``), which sets it when imported (the package's ``__init__``
#: imports it, so it is set before any product runs; gemv_tile builds on this
#: module, which therefore does not import it).
GEMV: types.ModuleType | None = None


@functools.cache
def _kernel(s: Spec) -> tile.Kernel:
    return program(s)


def _module(s: Spec) -> hir.Module:
    return _kernel(s).module


def _finish_module(s: Spec) -> hir.Module:
    return finish(s).module


def _unit(strides: tuple[int, int], shape: tuple[int, int]) -> int | None:
    if strides[1] == 1 or shape[1] == 1:
        return 1
    return 0 if strides[0] == 1 or shape[0] == 1 else None


def _fold(
    shape: tuple[int, int, int], st: tuple[int, ...], inner: int, bk: int
) -> tuple[int, list[Any], int, int] | None:
    """A [B, R, C] operand as a 2-D view: (rank, view extents + strides, per-batch
    row and column offsets), or None when its batches are not one 2-D grid.
    `inner` is the dim (0 rows, 1 cols) that is K: folding along K needs whole
    K steps, so no step reads the next batch."""
    b, r, c = shape
    if b == 1 or st[0] == 0:
        return 2, [r, c, st[1], st[2]], 0, 0
    if st[0] == r * st[1] and (inner != 0 or r % bk == 0):
        return 2, [b * r, c, st[1], st[2]], r, 0
    if st[0] == c * st[2] and (inner != 1 or c % bk == 0):
        return 2, [r, b * c, st[1], st[2]], 0, c
    return None


#: An operand: the checked tensor (its address) and the [batch, rows, cols]
#: extents and strides (elements) the program reads it with.
Operand = tuple[T.Tensor, tuple[int, int, int], tuple[int, int, int]]


def launch(
    a: Operand,
    b: Operand,
    c: Operand,
    bias: T.Tensor | None,
    activation: str | None,
    *,
    arch: str,
    sms: int,
    stream: Any = None,
    groups: list[int] | None = None,
    inputs: str = "native",
    scale: float | None = None,
) -> None:
    """``c = act(a @ b + bias)`` over checked operands of matching shapes:
    a (Ba, M, K), b (Bb, K, N), c (B, M, N) with Ba and Bb 1 or B (broadcast);
    bias (N,). `groups`: row counts of a grouped product instead (a (1, T, K),
    b (G, K, N), c (1, T, N), sum(groups) == T). `inputs`: how the dot reads
    a and b (:class:`Spec`); `scale`: multiplies ``a @ b`` before the bias."""
    (ta, ash, ast), (tb, bsh, bst), (tc, csh, cst) = a, b, c
    nb, m, n = csh
    kk = ash[2]
    ng = len(groups) if groups else 0
    host = not tc.on_gpu
    arch = HOST_ARCH if host else arch
    one = not groups and nb == 1 and ash[0] == 1 and bsh[0] == 1
    if one and inputs == "native" and scale is None and m <= SWAP_MAX_M:
        # A few rows: weight rows on wgmma's M side (the crate's swapped schedule).
        if launch_swapped((a, b, c), bias, activation, arch=arch, sms=sms, stream=stream):
            return
    if GEMV is not None and inputs == "native" and GEMV.applies(m, (ash[0], bsh[0], nb), groups):
        # A few rows (decode): the FFMA gemv program, where the crate gives it a schedule.
        sms = 4 if host else sms
        GEMV.launch(a, b, c, bias, activation, arch=arch, sms=sms, stream=stream)
        return
    rows = max(groups) if groups else m
    batch, sms = max(nb, ng), 4 if host else sms
    sched, splits = schedule(ta.dtype, rows, n, kk, batch, arch, sms, inputs)
    folds = [_fold(ash, ast, 1, sched[2]), _fold(bsh, bst, 0, sched[2])]
    if None in folds and arch == "sm_90a":
        # A 3-D view keeps the loop off the wgmma pipeline: mma.sync tiles.
        sched, splits = schedule(ta.dtype, rows, n, kk, batch, "sm_80", sms)
        folds = [_fold(ash, ast, 1, sched[2]), _fold(bsh, bst, 0, sched[2])]
    (ar, av, a_r, a_c), (br, bv, b_r, b_c) = (
        f or (3, [*sh, *st], 0, 0) for f, sh, st in zip(folds, (ash, bsh), (ast, bst), strict=True)
    )
    if groups:
        splits = 1
    bm, bn, bk = sched[:3]
    kps = -(-kk // splits // bk) * bk
    splits = -(-kk // kps) if kk else 1
    units = (_unit((ast[1], ast[2]), (ash[1], ash[2])), _unit((bst[1], bst[2]), (bsh[1], bsh[2])))
    ws = (
        WARP_SPECIALIZE
        and not host
        and arch == "sm_90a"
        and (ta.dtype != "f32" or inputs == "tf32")
        and (splits == 1 or (WS_SPLIT and m <= WS_SPLIT_MAX_M))
        and not groups
        and nb == 1
        and (ar, br) == (2, 2)
        and None not in units
        and ta.ptr % 16 == 0
        and tb.ptr % 16 == 0
        # TMA needs 16-byte row strides (the map is refused otherwise)
        and all(_rows_16(v, ITEMSIZE[ta.dtype]) for v in (av, bv))
    )
    ws_opts = (0, False, 1, False)
    if ws and splits > 1:
        # The split route's own tile (64 rows), each split a whole ring or more.
        ws = sched[2] == 128 // ITEMSIZE[ta.dtype] and kps >= sched[2] * sched[4]
    elif ws:
        # The crate's warp-specialised table picks the tile (64-row tiles
        # too) and its pipeline knobs; a K shorter than the ring stays off
        # it (B2: 17x33x9, one short K step, failed there).
        got = ws_schedule(m, n, kk, sms, ITEMSIZE[ta.dtype])
        ws = got is not None and kk >= got[0][2] * got[0][4]
        if got is not None and ws:
            sched, (in_flight, pp, cl, cl_n) = got
            ws_opts = (in_flight, bool(pp), cl, bool(cl_n))
            bm, bn, bk = sched[:3]
            kps = -(-kk // bk) * bk
    out_2d = [m, n, cst[1], cst[2]]
    # Ping-pong sets store through registers: the session-14 GPU suite hung
    # (H200, wheel 35241ad) in test_ws_bias_activation at 4097x512x512 on
    # 128x128 ping-pong with the per-warpgroup TMA store, which the
    # interpreter runs correctly at 257x256x512; until that is understood
    # the combination stays off (docs/tile.md, "Known problems").
    tma_store = (
        ws
        and splits == 1
        and TMA_STORE
        and not ws_opts[1]
        and tc.ptr % 16 == 0
        and cst[2] == 1
        and _rows_16(out_2d, T.ITEMSIZE[tc.dtype])
    )
    spec = Spec(
        ta.dtype,
        tc.dtype,
        None if bias is None else bias.dtype,
        activation,
        ar,
        br,
        units[0],
        units[1],
        (ta.ptr % 16 == 0, tb.ptr % 16 == 0, tc.ptr % 16 == 0),
        ng,
        splits > 1,
        sched,
        ws,
        ws_opts,
        bias_vec=bias is not None and bias.strides[0] == 1 and bias.ptr % 8 == 0,
        tma_store=bool(tma_store),
        gelu_approx=GELU_APPROX and ws and activation == "gelu" and tc.dtype != "f32",
        inputs=inputs,
        scaled=scale is not None,
    )
    bias_args = [] if bias is None else [bias, 1, n, 0, bias.strides[0]]
    args: list[Any] = [ta, *av, tb, *bv]
    if groups:
        starts, tiles = [0], [0]
        for g in groups:
            starts.append(starts[-1] + g)
            tiles.append(tiles[-1] + -(-g // bm))
        for i, g in enumerate(groups):
            args += [tc, 2, g, n, starts[i] * cst[1], cst[1], cst[2]]
        grid = (max(1, tiles[-1]), -(-n // bn), 1)
    elif splits > 1:
        wt = T.tensor(T.empty_like(tc, (nb * splits, m, n), "f32"), "workspace")
        args += [wt, nb * splits, m, n, m * n, n, 1]
        grid = (-(-m // bm), -(-n // bn), nb * splits)
    elif tma_store:
        args += [tc, *out_2d]
        grid = (-(-m // bm), -(-n // bn), 1)
    else:
        args += [tc, *csh, *cst]
        grid = (-(-m // bm), -(-n // bn), nb)
    if spec.bias and not spec.split:
        args += bias_args
    args += [kk, kps, splits, a_r, a_c, b_r, b_c]
    if scale is not None:
        args.append(float(scale))
    if groups:
        args += tiles[1:ng] + [starts[i] - starts[i - 1] for i in range(1, ng)]
    threads = sched[3] * 32
    if ws:
        kern = _kernel(spec)
        threads = kern.block[0]
        views = {0: (ta, av), 1: (tb, bv), 2: (tc, out_2d)}  # a, b (and c) view parameters
        for tm in kern.tensor_maps:
            t, v = views[tm.param]
            args.append(_tensor_map(t, v, tm))
        if kern.persistent:
            args += [grid[0], grid[1]]
            resident = _resident(spec, max(tc.device, 0)) if kern.cluster > 1 else sms
            run, _ = kern.launch_grid(grid[:2], resident)
            grid = (run[0], 1, 1)
    T.launch(_module, (spec,), "matmul", grid, threads, args, tc, stream)
    if splits > 1:
        finish_launch(spec, wt, splits, c, bias, stream)


#: Rows up to which :func:`launch` tries the swapped form (the crate's own
#: bound, ``zyntax_tile::schedule::SWAP_MAX_M``, applies within it).
SWAP_MAX_M = 256
#: Small-M products on sm_90a run swapped (:func:`launch_swapped`) where the
#: tile crate gives them a schedule (``zyntax_tile::swapped_schedule``).
#: Session 14 B1 on an H200 (device time, us, swapped on the crate's
#: schedule / the route before / cuBLAS, same run): 128x768x768 + bias 7.0 /
#: 8.4 (mma_sync) / 6.7, 128x2304x768 + bias 8.1 / 8.8 / 7.4, 128x3072x768 +
#: bias + GELU 8.9 / 10.8 / 10.0, 16x14336x4096 32.4 / 40.6 / 32.0; it lost
#: 128x768x3072 + bias (12.3 / 11.0 / 10.1) and 64x4096x4096 (17.4 / 16.5 /
#: 13.7, before the token tiles ran fastest in the grid).
SWAP = True
#: ((bw, bt, bk, warps, stages), K splits) that forces the swapped form on
#: every 2-D product it can take, on the host too (benches, tests).
SWAP_FORCE: tuple[tuple[int, int, int, int, int], int] | None = None


def swap_schedule(
    dtype: str, m: int, n: int, k: int, arch: str, sms: int, host: bool = False
) -> tuple[tuple[int, int, int, int, int, str], int] | None:
    """(schedule of the swapped product ``c^T = b^T a^T``: block (weight
    rows, tokens), K splits) of an M x N x K product, or None where the
    swapped form does not apply (on the host: unless forced)."""
    if SWAP_FORCE is not None:
        return (*SWAP_FORCE[0], arch), SWAP_FORCE[1]
    if host or not SWAP or arch != "sm_90a" or dtype not in ("bf16", "f16"):
        return None
    got = _native.tile_swapped_schedule(m, n, k, sms=sms)
    if got is None:
        return None
    s, splits = got
    return (s.block[0], s.block[1], s.k, s.warps, s.stages, arch), splits


def launch_swapped(
    abc: tuple[Operand, Operand, Operand], bias: T.Tensor | None, act: str | None, **on: Any
) -> bool:
    """Runs the 2-D product ``c = act(a @ b + bias)`` (one batch) swapped, as
    ``c^T = act(b^T a^T + bias)``: the N weight rows fill wgmma's M side
    (64 or 128 a tile) and the M tokens are a narrow N tile (8 to 32), on
    the warp-specialised TMA pipeline with a deep ring; a split K writes
    each split's partials of ``c^T`` transposed into the ``[splits, M, N]``
    workspace, so the plain finishing pass sums them. Returns False (and
    launches nothing) where the form does not apply: the caller's routes run."""
    (ta, ash, ast), (tb, _, bst), (tc, csh, cst) = abc
    arch, sms, stream = on["arch"], on["sms"], on.get("stream")
    _, m, n = csh
    kk = ash[2]
    host = not tc.on_gpu
    got = swap_schedule(ta.dtype, m, n, kk, arch, sms, host)
    if got is None or kk == 0:
        return False
    sched, splits = got
    bw, bt, bk, warps, stages = sched[:5]
    kps = -(-kk // splits // bk) * bk
    splits = -(-kk // kps)
    av, bv = [n, kk, bst[2], bst[1]], [kk, m, ast[2], ast[1]]  # b^T, a^T
    # K-major where the stride allows (a^T of a single row counts as K-major,
    # not as N-major: wgmma's narrow N needs a K-major b).
    units = (
        1 if bst[1] == 1 or kk == 1 else _unit((bst[2], bst[1]), (n, kk)),
        0 if ast[2] == 1 or kk == 1 else _unit((ast[2], ast[1]), (kk, m)),
    )
    ws = (
        not host
        and arch == "sm_90a"
        and kk >= bk
        and None not in units
        and ta.ptr % 16 == 0
        and tb.ptr % 16 == 0
        and all(_rows_16(v, ITEMSIZE[ta.dtype]) for v in (av, bv))
    )
    if not ws and not host:
        return False  # the device's swapped form is the TMA pipeline (the only one measured)
    if ws:  # a ring no deeper than a split's K steps
        sched = (bw, bt, bk, warps, max(1, min(stages, kps // bk)), arch)
    spec = Spec(
        ta.dtype,
        tc.dtype,
        None if bias is None else bias.dtype,
        act,
        2,
        2,
        units[0],
        units[1],
        (tb.ptr % 16 == 0, ta.ptr % 16 == 0, tc.ptr % 16 == 0),
        0,
        splits > 1,
        sched,
        ws,
        gelu_approx=GELU_APPROX and ws and act == "gelu" and tc.dtype != "f32",
        swap=True,
    )
    args: list[Any] = [tb, *av, ta, *bv]
    if splits > 1:  # each split's c^T, stored transposed: [splits, M, N] partials
        wt = T.tensor(T.empty_like(tc, (splits, m, n), "f32"), "workspace")
        args += [wt, splits, n, m, m * n, 1, n]
    else:
        args += [tc, 1, n, m, 0, cst[2], cst[1]]
        if bias is not None:  # [N, 1]: a bias element per row of c^T
            args += [bias, n, 1, bias.strides[0], 0]
    args += [kk, kps, splits, 0, 0, 0, 0]
    grid = (-(-m // bt), -(-n // bw), splits)  # token tiles fastest (see program)
    threads = warps * 32
    if ws:
        kern = _kernel(spec)
        threads = kern.block[0]
        views = {0: (tb, av), 1: (ta, bv)}
        args += [_tensor_map(*views[tm.param], tm) for tm in kern.tensor_maps]
    T.launch(_module, (spec,), "matmul", grid, threads, args, tc, stream)
    if splits > 1:
        finish_launch(dataclasses.replace(spec, swap=False), wt, splits, abc[2], bias, stream)
    return True


def _problem_operand(o: Any, obj: Any = None) -> Operand:
    """A normalised matrix of ``kernels.gemm`` (``_problem.Operand``: device
    address or host buffer, layout, leading dimension) as a launch operand."""
    strides = (o.ld, 1) if o.layout == "row" else (1, o.ld)
    if o.host is None:
        t = T.Tensor(o.name, obj, o.ptr, True, o.dtype, (o.rows, o.cols), strides, o.device or 0)
    else:
        # fp8 host arrays (ml_dtypes) travel as their bytes
        arr = o.host.view(np.uint8) if o.dtype == "e4m3" else o.host
        t = T.Tensor(o.name, obj, arr, False, o.dtype, (o.rows, o.cols), strides, -1)
    return t, (1, o.rows, o.cols), (0, *strides)


def problem_matmul(p: Any, arch: str, sms: int) -> None:
    """Runs the 2-D product `p` (``kernels.gemm``'s normalised ``Problem``) on
    the tile program: fp8 e4m3 with its per-tensor scales (``scale_a *
    scale_b`` times the accumulator, before the bias, as ``torch._scaled_mm``)
    and f32 read as tf32 (``p.tf32``) included."""
    if p.a.dtype == "e4m3":
        inputs = "e4m3"
    else:
        inputs = "tf32" if p.tf32 and p.a.dtype == "f32" else "native"
    scale = None if p.scale_a is None else float(p.scale_a) * float(p.scale_b)
    a, b = _problem_operand(p.a), _problem_operand(p.b)
    c = _problem_operand(p.out, p.out_obj)
    bias = None
    if p.bias is not None:
        bias = _problem_operand(p.bias)[0]
        bias = dataclasses.replace(bias, shape=(p.n,), strides=(1,))
    launch(
        a, b, c, bias, p.activation, arch=arch, sms=sms, stream=p.stream, inputs=inputs, scale=scale
    )  # fmt: skip


@functools.cache
def _resident(s: Spec, device: int) -> int:
    """CTAs of the clustered kernel of `s` resident at once on `device`."""
    return _kernel(s).resident_ctas(device)


def _rows_16(view: list[Any], itemsize: int) -> bool:
    """Whether every stride of a 2-D view ([extents, strides]) other than
    the unit one is a multiple of 16 bytes, as TMA needs."""
    return all(st == 1 or (st * itemsize) % 16 == 0 for st in view[2:4])


def _tensor_map(t: T.Tensor, view: list[Any], m: tile.TensorMapParam) -> Any:
    """The TMA map of a 2-D view ([extents, strides]) of `t`, through
    ``_tensors.tensor_map`` (a call's plan rebuilds it at new addresses)."""
    ext, st = view[:2], view[2:]
    rows = dataclasses.replace(
        t, shape=(ext[m.outer_dim], ext[m.inner_dim]), strides=(st[m.outer_dim], 1)
    )
    rec = _plans.recording()
    if rec is not None:
        rec.tensor(rows)  # the same object as `t`: the plan knows where it comes from
    dtype = "u8" if t.dtype == "e4m3" else t.dtype  # fp8 bytes: the map copies bytes
    return T.tensor_map(rows, m.box, swizzle="128B", dtype=dtype)


def check_groups(groups: Any, rows: int, experts: int) -> list[int]:
    """`groups` as a list of row counts summing to `rows`, one per expert."""
    if not isinstance(groups, (list, tuple)) or not all(
        isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in groups
    ):
        raise ArgumentError(
            f"argument 'groups': expected a list of row counts (ints >= 0), got {T.show(groups)}"
        )
    if len(groups) != experts:
        raise ArgumentError(
            f"argument 'groups': {len(groups)} groups for {experts} weight matrices in 'b'"
        )
    if sum(groups) != rows:
        raise ArgumentError(
            f"argument 'groups': the groups cover {sum(groups)} rows, 'a' has {rows}"
        )
    if not 1 <= experts <= MAX_GROUPS:
        raise ArgumentError(f"argument 'b': 1 to {MAX_GROUPS} groups are supported, got {experts}")
    return list(groups)


#: Groups per launch: each has its own output view (its rows masked), so the
#: epilogue grows with their number.
MAX_GROUPS = 16


# ---------------------------------------------------------------- entry functions

_DTYPES = ("bf16", "f16", "f32")
_archs: dict[int, str] = {}


def _arch(device: int) -> str:
    """The device's arch (``cuda.device_arch``: sm_90a on compute capability
    9.0, for its wgmma, by the target table's rule)."""
    arch = _archs.get(device)
    if arch is None:
        from zyntax import cuda

        arch = _archs[device] = cuda.device_arch(device)
    return arch


def _matrix(t: T.Tensor, ranks: tuple[int, ...]) -> tuple[tuple[int, int, int], tuple[int, ...]]:
    """`t`'s shape and strides as [batch, rows, cols] (batch 1, stride 0 for a matrix)."""
    if len(t.shape) not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ArgumentError(f"argument '{t.name}': expected a {want} tensor, got shape {t.shape}")
    if len(t.shape) == 2:
        return (1, t.shape[0], t.shape[1]), (0, *t.strides)
    return (t.shape[0], t.shape[1], t.shape[2]), t.strides


def _checked(
    a: Any,
    b: Any,
    out: Any,
    bias: Any,
    activation: Any,
    out_dtype: Any,
    stream: Any,
    ranks: tuple[int, ...],
) -> tuple[T.Tensor, T.Tensor, T.Tensor | None, str]:
    T.choice(activation, "activation", [None, "relu", "gelu"], "activation")
    T.choice(out_dtype, "out_dtype", [None, *_DTYPES], "dtype")
    T.stream_arg(stream)
    ta, tb = T.tensor(a, "a"), T.tensor(b, "b")
    T.same_place(ta, tb)
    T.want_dtype(ta, _DTYPES)
    if tb.dtype != ta.dtype:
        raise ArgumentError(f"argument 'b': dtype {tb.dtype}, 'a' is {ta.dtype}")
    tbias = None
    if bias is not None:
        tbias = T.tensor(bias, "bias")
        T.same_place(ta, tbias)
        T.want_dtype(tbias, _DTYPES)
        if len(tbias.shape) != 1:
            raise ArgumentError(f"argument 'bias': expected a 1-D tensor, got shape {tbias.shape}")
    if out is not None and out_dtype is None:
        # As the other variants: a given `out` names the output dtype (an f32
        # `out` for bf16 operands keeps the f32 accumulator's precision).
        tout = T.tensor(out, "out")
        T.want_dtype(tout, _DTYPES)
        return ta, tb, tbias, tout.dtype
    return ta, tb, tbias, out_dtype or ta.dtype


def _fits(*ops: Operand) -> None:
    """Views address elements with u32 offsets."""
    for t, shape, strides in ops:
        if 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) > 1 << 32:
            raise ArgumentError(f"argument '{t.name}': spans more than 2^32 elements")


@T.planned
def matmul(
    a: Any,
    b: Any,
    out: Any = None,
    *,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    stream: Any = None,
) -> Any:
    """``act(a @ b + bias)`` as the tile program, with ``torch.matmul``'s
    batching: a (M, K) or (Ba, M, K), b (K, N) or (Bb, K, N); a batch of 1
    (or a 2-D operand) is broadcast. Any strides; bf16, f16 or f32 (exact,
    on FFMA) inputs; the output (M, N) or (B, M, N) of `out_dtype`."""
    ta, tb, tbias, odt = _checked(a, b, out, bias, activation, out_dtype, stream, (2, 3))
    (ba, m, k), ast = _matrix(ta, (2, 3))
    (bb, k2, n), bst = _matrix(tb, (2, 3))
    if k2 != k:
        raise ArgumentError(f"argument 'b': {k2} rows, 'a' has {k} columns")
    if ba != bb and 1 not in (ba, bb):
        raise ArgumentError(f"argument 'b': batch {bb} does not broadcast with a's batch {ba}")
    if tbias is not None and tbias.shape[0] != n:
        raise ArgumentError(f"argument 'bias': {tbias.shape[0]} elements, expected N = {n}")
    nb = max(ba, bb)
    shape = (m, n) if len(ta.shape) == len(tb.shape) == 2 else (nb, m, n)
    reads = [ta, tb] + ([tbias] if tbias is not None else [])
    obj, tc = T.output(out, ta, shape, odt, reads)
    (_, _, _), cst = _matrix(tc, (2, 3))
    ops: list[Operand] = [
        (ta, (ba, m, k), ast),  # type: ignore[list-item]
        (tb, (bb, k, n), bst),  # type: ignore[list-item]
        (tc, (nb, m, n), cst),  # type: ignore[list-item]
    ]
    _fits(*ops)
    if m and n:
        dev = max(tc.device, 0)
        arch, sms = (_arch(dev), T.sm_count(dev)) if tc.on_gpu else ("", 4)
        launch(ops[0], ops[1], ops[2], tbias, activation, arch=arch, sms=sms, stream=stream)
    return obj


@T.planned
def grouped_matmul(
    a: Any,
    b: Any,
    groups: Any,
    out: Any = None,
    *,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    stream: Any = None,
) -> Any:
    """A grouped product in one launch (a mixture-of-experts layer): the rows
    of `a` (T, K) come in ``len(groups)`` consecutive groups of ``groups[g]``
    rows, and group g is multiplied by ``b[g]`` (b is (G, K, N)):
    ``out[rows of g] = act(a[rows of g] @ b[g] + bias)``, out (T, N). Pass
    `groups` as a tuple for the fast repeated-call path."""
    ta, tb, tbias, odt = _checked(a, b, out, bias, activation, out_dtype, stream, (2,))
    (_, rows, k), ast = _matrix(ta, (2,))
    if len(tb.shape) != 3:
        raise ArgumentError(f"argument 'b': expected a 3-D tensor (G, K, N), got {tb.shape}")
    g, k2, n = tb.shape
    if k2 != k:
        raise ArgumentError(f"argument 'b': {k2} rows per group, 'a' has {k} columns")
    sizes = check_groups(groups, rows, g)
    if tbias is not None and tbias.shape[0] != n:
        raise ArgumentError(f"argument 'bias': {tbias.shape[0]} elements, expected N = {n}")
    reads = [ta, tb] + ([tbias] if tbias is not None else [])
    obj, tc = T.output(out, ta, (rows, n), odt, reads)
    (_, _, _), cst = _matrix(tc, (2,))
    ops: list[Operand] = [
        (ta, (1, rows, k), ast),  # type: ignore[list-item]
        (tb, tb.shape, tb.strides),  # type: ignore[list-item]
        (tc, (1, rows, n), cst),  # type: ignore[list-item]
    ]
    _fits(*ops)
    if rows and n:
        dev = max(tc.device, 0)
        arch, sms = (_arch(dev), T.sm_count(dev)) if tc.on_gpu else ("", 4)
        launch(
            ops[0],
            ops[1],
            ops[2],
            tbias,
            activation,
            arch=arch,
            sms=sms,
            stream=stream,
            groups=sizes,
        )
    return obj
