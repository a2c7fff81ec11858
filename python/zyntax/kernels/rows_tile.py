"""The row kernels as tile programs (``zyntax.tile``): softmax, layer_norm,
rms_norm and cross-entropy, forward and backward, for any row width and any
number of rows (docs/kernels.md, "Row kernels as tile programs").

Every program computes in f32 and reads and writes f32, bf16 or f16. Which
program shape runs is chosen by :func:`plan` from the width alone:

- ``rows``   (width <= 1024): a program instance holds several whole rows, a
  ``[R, W]`` tile (``W`` the width rounded up to a power of two), so narrow
  rows still give every thread ~16 elements; tails are masked loads;
- ``row``    (width <= 16384, 8192 for 2-byte types): one whole row per
  instance (``R = 1``), 4 to 32 warps, the row in registers between the
  reductions and the write;
- ``chunks`` (wider): one row per instance (or a few, see :func:`split`), a
  loop over ``[1, 4096]`` chunks (``CHUNK_OF`` per program) carrying running
  statistics (an online max and sum of exponentials, or shifted sums for the
  norms; per row or per lane, ``STATE``), then a second loop that writes.

Chunked rows that fit 1024 threads' registers stay whole over several
``[1, 8192]`` tiles instead (:func:`wide`, read once), and the norms'
forward keeps the first tiles of wider rows in registers (:func:`held`).
``rows`` and ``row`` are the same program text (``R`` rows of ``W``); only
``chunks`` differs. One-row programs of odd widths start each row's tiles at
its last 16-byte boundary (:func:`peeled`), so all but a masked head are
vector accesses; a whole row just past a power of two is a tile of half
that width plus a narrow tail tile (:func:`tailed`). The norm backward
accumulates ``dweight``/``dbias`` per program instance into an f32
``[G, width]`` buffer of partial sums that a second program sums over its
rows (deterministic: no atomics); for whole rows in the same pass as dx,
or in a second pass (``NORM_BWD``). The softmax forward's one-tile rows
loop over rows with the next row loaded ahead (:func:`prefetching`); a
chunked row can be split over a cluster of CTAs (:func:`clustered`, off:
measured slower). The upper-case module constants are
the tuning knobs (measured in docs/kernels.md); those that a Plan does not
carry are read when a program is built.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from zyntax import hir, tile
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows_ce import _ce_bwd, _ce_fwd, _ce_split_loss, _ce_split_stats, _ce_split_write
from ._rows_softmax import (
    _softmax_bwd,
    _softmax_bwd_split_dot,
    _softmax_bwd_split_write,
    _softmax_fwd,
    _softmax_split_write,
    _split_stats,
)

NEG_INF = -math.inf
#: Elements of one tile each thread holds in the whole-row shapes.
PER_THREAD = 16
#: Widest row of the ``rows`` shape, and of the ``row`` shape (f32, 2-byte types).
ROWS_MAX, ROW_MAX, ROW_MAX_16 = 1024, 16384, 8192
#: Chunk width and warps of the ``chunks`` shape.
CHUNK, CHUNK_WARPS = 4096, 8
#: What a chunk loop carries: "lanes" (per-lane state, one [1, CHUNK] tile per
#: statistic, reduced once after the loop) or "row" (each chunk reduced to the
#: row's [1, 1] state: two block reductions per chunk, far fewer registers).
STATE = "row"
#: Chunk width of some chunked programs relative to CHUNK (H200, batch B1
#: of session 9: the softmax forward at 128256 columns ran at 1.31x
#: PyTorch with 8192-column chunks against 1.17x with 4096; the norm
#: backward's statistics pass reduces four sums per chunk, and its dx pass
#: carries two partial sums per element: 160 registers at 4096 columns over
#: 8 warps, 79 at 2048).
CHUNK_OF = {"softmax_fwd": 2.0, "norm_bwd_stats": 2.0, "norm_bwd_chunks": 0.5}
#: Warps of some chunked programs (CHUNK_WARPS otherwise).
WARPS_OF: dict[str, int] = {}
#: Program instances per SM of the norm backward's row-block loop.
GROUPS_PER_SM = 3
#: Program instances per SM of the one-pass norm backward of whole rows,
#: and whether its threads hold half the elements of the plan's (8, not 16).
NORM_BWD_PER_SM = 2
NORM_BWD_THIN = False
#: Whether the one-pass norm backward loads the next row block before this
#: one's reductions (its tiles carried through the loop), and whether it
#: loads the weight per row block (from L1) instead of holding it.
NORM_BWD_PREFETCH = False
#: ... and from how many warps it always does, with one instance per SM
#: (H200, session 11 B2, LayerNorm backward at 4096x8192, [1, 8192] over 16
#: warps: 99 us against 144 with two instances and no prefetch, PyTorch
#: 130; at 4096x4097, [1, 4096] over 8 warps, the prefetch lost: 144 vs 84).
NORM_BWD_PREFETCH_WARPS = 16
#: Warps of the one-pass norm backward of a tailed row (0: the tail's plan,
#: the plan's elements per thread; 16 at 4097 columns: 8 a thread, and
#: with NORM_BWD_PREFETCH_WARPS the prefetch at one instance per SM).
NORM_BWD_TAIL_WARPS = 0
NORM_BWD_W_RELOAD = False
#: Program instances wanted when few wide rows would leave SMs idle: a
#: chunked softmax row is then split over S instances (see :func:`split`); 0
#: means two per SM on the GPU and no split on the interpreter.
SPLIT_TARGET = 0
#: Tile of the dweight/dbias program of whole rows ([rows, columns], 4 warps).
DW_R, DW_W, DW_PER_SM = 32, 64, 3
#: Columns per program instance of the partial-sum reduction.
COLSUM_W, COLSUM_R = 64, 64
#: Program families whose one-row programs peel each row's misaligned head
#: (see :func:`peeled`): "softmax", "ce", "norm".
PEEL = frozenset({"softmax", "ce", "norm"})
#: Chunked forward programs whose instances loop over rows (``Plan.persist``):
#: program name -> instances per SM (few rows in flight, so that a row's
#: second read, the write pass, finds it in L2).
PERSIST: dict[str, int] = {}
#: Whether the write pass of the chunked softmax and norm forward runs from
#: the row's last chunk to its first (see :meth:`_P.write_chunks`). Read
#: when a program is built (NORM_BWD_PREFETCH and NORM_BWD_W_RELOAD are
#: read at each call, part of the program's key).
REVERSE_WRITE = False
#: Whether the chunked norm backward's dx pass peels odd rows' heads.
PEEL_CHUNKS_BWD = True
#: Resident instances per SM asked of ptxas (``.minnctapersm``, which caps
#: the registers), by (program, plan shape), where that leaves 128 registers
#: a thread or more; absent: ptxas's own choice. The one-pass norm backward
#: of a [1, 4096] row and its tail took 168 registers, one instance of 8
#: warps per SM (ncu, H200, session 11 B1: 12.5 % occupancy, DRAM 16 % busy,
#: 120 us at 4096x4097); 2 caps it at 128 (32 bytes of spills). By device
#: time in B2 it made no difference (84 us either way; the tail made it).
MIN_BLOCKS: dict[tuple[str, str], int] = {("norm_bwd_rows", "row"): 2}
#: Program families whose whole-row programs take a tail tile (:func:`tailed`),
#: and the widest tail relative to the first tile (1/TAIL_FRAC of it).
TAILED = frozenset({"norm", "softmax", "ce"})
TAIL_FRAC = 4
#: Programs whose chunked rows (wider than a whole-row tile) stay whole in
#: registers over several tiles when they fit (:func:`wide`): the tile, the
#: warps of an instance, and the most elements a thread holds (1024 threads
#: may use 64 registers each). H200, session 12 B1, bf16 at 50257 columns:
#: the softmax forward 348 us wide against 382 chunked (PyTorch 361; at
#: 16384 rows 1355 against 1600, PyTorch 1412); cross-entropy forward 2083
#: against 222 and LayerNorm forward 1006 against 477 (both spill), the
#: cross-entropy backward 414 against 419.
WIDE = frozenset({"softmax_fwd"})
WIDE_TILE, WIDE_WARPS, WIDE_PER_THREAD = 8192, 32, 56
#: Warps of some programs' whole-row plans of one tile of 8192 columns or
#: more, no tail (the plan's otherwise: 16 elements a thread). H200, session
#: 12 B1, LayerNorm forward at 4096x8192 bf16: 58 us on 32 warps against 65
#: on 16 (PyTorch 66).
ROW_WARPS: dict[str, int] = {"norm_fwd": 32}
#: Programs whose chunked rows too wide for :func:`wide` keep their first
#: HELD_TILES tiles in registers and loop over the rest HELD_UNROLL tiles a
#: step (:func:`held`; the norm forward only: "norm_fwd" LayerNorm,
#: "rms_fwd" RMSNorm, as in CLUSTER and PREFETCH). Holding tiles lost:
#: H200, session 12 B1, RMSNorm forward at 4096x128256 1146 us held (5
#: tiles, 2 a step), 1010 (4, 3 a step, written backwards), against 928
#: chunked (PyTorch 803): one 1024-thread instance per SM keeps too few
#: loads in flight in the loop. The RMSNorm forward is in HELD for the loop
#: alone (HELD_FORM: nothing held).
HELD: frozenset[str] = frozenset({"rms_fwd"})
HELD_TILES, HELD_UNROLL = 5, 2
#: The held plan's tile width and warps (HELD_TILES 0: the chunked loop
#: with HELD_UNROLL tiles a step and per-lane state, nothing held).
HELD_TILE, HELD_WARPS = 8192, 32
#: Whether the held rows' write loop runs from the row's end (read last).
HELD_REVERSE = False
#: Per program, (HELD_TILES, HELD_UNROLL, HELD_TILE, HELD_WARPS) instead of
#: those. The RMSNorm forward holds nothing and loops over [1, 4096] tiles
#: on 8 warps with per-lane state: H200, 4096x128256 bf16, 867 us (session
#: 12 B2) and 870 (session 13 B1) against 929-932 chunked, PyTorch 803-806;
#: LayerNorm lost with the same loop (1313 against 1015). Those ran one
#: tile a step: until session 14 a plan holding nothing took the plain
#: chunk loop, whatever its unroll (the form said two a step).
HELD_FORM: dict[str, tuple[int, int, int, int]] = {"rms_fwd": (0, 1, 4096, 8)}
#: Programs whose chunked rows of CLUSTER_MIN columns or more are split over
#: a cluster of CTAs instead (:func:`clustered`), by program: the CTAs per
#: row. Each CTA holds its slice in registers on CLUSTER_WARPS warps in
#: [1, CLUSTER_TILE] tiles, the reductions combine the cluster's CTAs
#: through distributed shared memory (the tile layer's cluster reduction),
#: and the row is read from memory once, not twice as in the chunk loops.
#: Keys: "softmax_fwd", "norm_fwd" (LayerNorm), "rms_fwd" (RMSNorm).
CLUSTER: dict[str, int] = {}
CLUSTER_MIN, CLUSTER_TILE, CLUSTER_WARPS = 65536, 8192, 32
#: Programs whose cluster rows loop over rows (``Plan.persist``: that many
#: CTAs per SM, a cluster taking every G-th row) loading the next row's
#: slice before this row's reductions (softmax and the norms' forward).
CLUSTER_PERSIST: dict[str, int] = {}
#: Programs whose one-row plans (a whole row per instance, no cluster) loop
#: over rows the same way (``Plan.persist``: instances per SM), loading the
#: next row before this row's reductions (softmax and the norms' forward).
#: H200, session 13 B1, bf16 4096x4097: the softmax forward 25.1 us with 4
#: per SM, 30.7 with 2, 29.4 without (PyTorch 60.8); LayerNorm 43.6 with
#: either, 40.6 without (hence softmax only).
PREFETCH: dict[str, int] = {"softmax_fwd": 4}
#: The widest tile PREFETCH takes: a [1, 8192] f32 row and the next row
#: take 124 registers on 16 warps (one instance per SM), [1, 16384] spills
#: at 1024 threads (ptxas, sm_90); bf16 4096x8192 measured 39.2 against
#: 48.8 us (session 13 B2), f32 not. The narrowest: at 4096x1025 ([1, 1024]
#: and a tail) prefetching lost, 11.4 against 8.6 us.
PREFETCH_MAX_WIDTH = 4096
PREFETCH_MIN_WIDTH = 4096
#: Programs whose chunk loops (chunked rows, one an instance) load the next
#: chunk's tiles before this chunk's reductions and writes, carried through
#: the loop as loaded (:meth:`_P.streamed`): two chunks' loads in flight per
#: warp, not one (softmax_fwd, softmax_bwd, norm_fwd, rms_fwd, ce_fwd,
#: ce_bwd, norm_bwd_stats).
#: H200, session 14 B2, bf16 4096x128256: the cross-entropy forward 0.55
#: of a same-bytes copy against 0.47 (PyTorch 0.25); B1: the softmax and
#: norms' forward and the RMSNorm backward tied or lost, the cross-entropy
#: backward lost in B2 (0.39 against 0.50, with 32-warp chunks elsewhere).
CHUNK_AHEAD: frozenset[str] = frozenset({"ce_fwd"})
#: Per program, the (narrowest, widest) tile PREFETCH takes instead of those.
PREFETCH_WIDTHS: dict[str, tuple[int, int]] = {}
#: PREFETCH for the ``rows`` plans (several narrow rows an instance, a
#: [R, W] tile): program name -> instances per SM looping over row blocks.
#: H200, session 14 B2, bf16 16384x1000: the softmax backward 0.86 of a
#: same-bytes copy with 4 per SM against 0.77 without (8: 0.84); the
#: softmax forward, the norms and cross-entropy lost or tied.
PREFETCH_ROWS: dict[str, int] = {"softmax_bwd": 4}
#: The norm backward of whole rows, by plan shape: "fused" (one program
#: writes dx and accumulates dweight/dbias partial sums over its rows; x and
#: dy read once) or "split" (dx, then a column-block program reading x and
#: dy again). H200, batch B1 of session 9, bf16 LayerNorm: at 4096x4097
#: fused 140 us, split 228 (PyTorch 75); at 4096x1000 fused 29, split 24
#: (PyTorch 24): the fused program's registers (168 for [2, 1024] over 4
#: warps) leave too few instances per SM for narrow rows.
NORM_BWD = {"rows": "split", "row": "fused"}
_U32 = 1 << 32


@dataclass(frozen=True)
class Plan:
    """The program shape for one row width (see the module docstring)."""

    shape: str  # "rows" | "row" | "chunks"
    rows: int  # rows per program instance (R)
    width: int  # tile width: the padded row, or one chunk
    warps: int
    state: str = "lanes"  # what a chunk loop carries (STATE)
    #: The row stride modulo the 16-byte vector (elements), when each row's
    #: tile starts at its row's last 16-byte boundary (:func:`peeled`); 0: at
    #: column 0.
    peel: int = 0
    #: Width of a second tile holding the rest of a whole row past the
    #: first `width` columns (0: none; see :func:`tailed`).
    tail: int = 0
    #: How many `width` tiles hold a whole row before the tail (more than
    #: one: a wide row kept in registers over several tiles, see :func:`wide`).
    reps: int = 1
    #: Chunked rows: the row's first tiles kept in registers between the
    #: statistics and the write (see :func:`held`), and the loop's tiles a step.
    held: int = 0
    unroll: int = 1
    #: Chunked rows: program instances per SM, each looping over rows pid,
    #: pid + G, .. (0: one row per instance; see PERSIST).
    persist: int = 0
    #: Whole rows split over a cluster of this many CTAs (0: none; see
    #: :func:`clustered`): CTA k of a row's cluster holds columns
    #: ``k * reps * width ..`` in registers.
    cluster: int = 0
    #: Chunked rows: whether each chunk loop loads the next chunk before
    #: this chunk's work (see CHUNK_AHEAD and :meth:`_P.streamed`).
    ahead: int = 0


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def plan(n: int, itemsize: int = 4) -> Plan:
    """The one place where the width picks the program: the table in the
    module docstring (``PER_THREAD`` elements per thread for whole rows).
    Rows of 2-byte elements stay whole up to ``ROW_MAX_16`` only: their
    loads have another layout than the f32/u32 tiles the programs make
    (8 elements per thread, not 4), and converting a [1, W] f32 tile stages
    4·W bytes through the 48 KiB of shared memory."""
    w = max(16, _pow2(n))
    if w <= ROWS_MAX:
        return Plan("rows", PER_THREAD * 128 // w, w, 4)
    return _one_row(w, itemsize)


def _one_row(w: int, itemsize: int) -> Plan:
    """A whole row in a [1, w] tile, or the chunks past the widest."""
    if w <= (ROW_MAX if itemsize == 4 else ROW_MAX_16):
        return Plan("row", 1, w, max(4, min(32, w // (PER_THREAD * 32))))
    return Plan("chunks", 1, CHUNK, CHUNK_WARPS, STATE)


def chunked(name: str, p: Plan) -> Plan:
    """`p` with program `name`'s chunk width (CHUNK_OF) when it is chunked."""
    if p.shape != "chunks":
        return p
    width = max(16, int(CHUNK * CHUNK_OF.get(name, 1.0)))
    return dataclasses.replace(p, width=width, warps=WARPS_OF.get(name, p.warps))


def peeled(family: str, p: Plan, dtype: str, acc: int, n: int, *row_strides: int) -> Plan:
    """`p` with a peel (``Plan.peel``) where it pays: the family is in
    PEEL, the row views are unit-stride and 16-byte aligned (`acc` 16), one
    row per program instance, and every row view's stride leaves the same
    misalignment, not 0 (an odd width: 7 rows in 8 of bf16 would take the
    scalar path). Each row's tiles then start at its last 16-byte boundary
    before column 0 (:meth:`_P.head`). A whole-row tile must hold the row
    and the head: the next power of two when it does not (or chunks)."""
    if family not in PEEL or acc != 16 or p.rows != 1:
        return p
    lanes = 16 // T.ITEMSIZE[dtype]
    mis = {s % lanes for s in row_strides}
    if len(mis) != 1 or 0 in mis:
        return p
    if p.shape == "row" and p.width < n + lanes - 1:
        p = _one_row(2 * p.width, T.ITEMSIZE[dtype])
    return dataclasses.replace(p, peel=mis.pop())


def tailed(family: str, p: Plan, n: int, dtype: str) -> Plan:
    """`p` with its whole-row tile halved and a second, narrow tile for the
    rest of the row (``Plan.tail``) where the row (with its peel's head)
    passes a power of two by at most 1/TAIL_FRAC of the half: 4097 bf16
    columns as [1, 4096] and [1, 16] tiles, not one [1, 8192] whose upper
    half holds nothing but costs the threads and registers all the same (H200,
    session 9: the norm backward took 139 us at 4096x4097, 147 at 4096x8192).
    Only the families in TAILED, whose programs handle a tail."""
    if family not in TAILED or p.shape != "row" or p.rows != 1:
        return p
    need = n + (16 // T.ITEMSIZE[dtype] - 1 if p.peel else 0)
    half = p.width // 2
    if half < ROWS_MAX or not 0 < need - half <= half // TAIL_FRAC:
        return p
    warps = max(4, p.warps // 2)  # the plan's elements per thread
    return dataclasses.replace(p, width=half, warps=warps, tail=max(16, _pow2(need - half)))


def wide(name: str, p: Plan, n: int, dtype: str) -> Plan:
    """`p`, a chunked one-row plan, as a whole row in registers over
    ``reps`` tiles of ``[1, WIDE_TILE]`` (and a tail) on WIDE_WARPS warps,
    when program `name` is in WIDE and the row (with its peel's head) gives
    each thread at most WIDE_PER_THREAD elements: the row is then read from
    memory once, not twice (statistics, then the write), at one instance of
    1024 threads per SM whose loads of the whole row are all in flight at
    once (a 50257-wide bf16 row: six [1, 8192] tiles and a [1, 2048] tail,
    49 elements a thread)."""
    if name not in WIDE or p.shape != "chunks" or p.rows != 1 or p.persist:
        return p
    need = n + (16 // T.ITEMSIZE[dtype] - 1 if p.peel else 0)
    threads = WIDE_WARPS * 32
    if need > WIDE_PER_THREAD * threads:
        return p
    reps, rest = divmod(need, WIDE_TILE)
    tail = max(16, _pow2(rest)) if rest else 0
    if tail > WIDE_TILE // 2 or not reps:  # a tail as wide as a tile: one more tile
        reps, tail = reps + 1, 0
    return dataclasses.replace(
        p, shape="row", width=WIDE_TILE, warps=WIDE_WARPS, state="lanes", reps=reps, tail=tail
    )


def clustered(name: str, p: Plan, n: int, dtype: str) -> Plan:
    """`p`, a chunked one-row plan, as a whole row split over a cluster of
    C = CLUSTER[name] CTAs when the row has CLUSTER_MIN columns or more: CTA
    k holds the row's columns k·S .. (k + 1)·S (S = ``reps`` tiles of
    ``[1, CLUSTER_TILE]``, the row with its peel's head in C slices) in
    registers, so that the row is read once. A 128256-wide bf16 row over 4
    CTAs of 1024 threads: four [1, 8192] tiles each, 32 elements a thread."""
    c = CLUSTER.get(name, 0)
    if c < 2 or p.shape != "chunks" or p.rows != 1 or p.persist or n < CLUSTER_MIN:
        return p
    need = n + (16 // T.ITEMSIZE[dtype] - 1 if p.peel else 0)
    reps = -(-need // (c * CLUSTER_TILE))
    return dataclasses.replace(
        p,
        shape="row",
        width=CLUSTER_TILE,
        warps=CLUSTER_WARPS,
        state="lanes",
        reps=reps,
        tail=0,
        cluster=c,
        persist=CLUSTER_PERSIST.get(name, 0),
    )


def prefetching(name: str, p: Plan) -> Plan:
    """`p`, a whole-row plan of one tile (and a tail), looping over rows:
    one-row plans with PREFETCH (widths within PREFETCH_WIDTHS), several
    rows an instance with PREFETCH_ROWS; not a wide row (:func:`wide`),
    whose registers a second row would not fit."""
    if p.reps != 1 or p.cluster or p.persist:
        return p
    if p.shape == "rows":
        k = PREFETCH_ROWS.get(name, 0)
        return dataclasses.replace(p, persist=k) if k else p
    k = PREFETCH.get(name, 0)
    if not k or p.shape != "row" or p.rows != 1:
        return p
    lo, hi = PREFETCH_WIDTHS.get(name, (PREFETCH_MIN_WIDTH, PREFETCH_MAX_WIDTH))
    return dataclasses.replace(p, persist=k) if lo <= p.width <= hi else p


def ahead(name: str, p: Plan) -> Plan:
    """`p` with ``Plan.ahead`` when it is chunked and `name` in CHUNK_AHEAD."""
    return dataclasses.replace(p, ahead=1) if p.shape == "chunks" and name in CHUNK_AHEAD else p


def held(name: str, p: Plan, n: int) -> Plan:
    """`p`, a chunked one-row plan, with its first HELD_TILES tiles of
    ``[1, HELD_TILE]`` kept in registers on HELD_WARPS warps (one instance
    of 1024 threads per SM), the rest of the row a loop of HELD_UNROLL tiles
    a step, when program `name` is in HELD and the row is wider than the
    held tiles and one more: only the rest is read twice (a 128256-wide
    bf16 row: 49152 columns held, 79104 read twice)."""
    if name not in HELD or p.shape != "chunks" or p.rows != 1 or p.persist:
        return p
    tiles, unroll, tile_w, warps = HELD_FORM.get(
        name, (HELD_TILES, HELD_UNROLL, HELD_TILE, HELD_WARPS)
    )
    if n < (tiles + 1) * tile_w:
        return p
    return dataclasses.replace(
        p, width=tile_w, warps=warps, state="lanes", held=tiles, unroll=unroll
    )


# ---------------------------------------------------------------- program pieces


class _P:
    """One program under construction: the builder and the plan's shapes,
    with the helpers the programs share (f32 loads and stores, broadcasts
    of per-row values, masks)."""

    def __init__(self, name: str, p: Plan, dtype: str, access: int) -> None:
        # The schedule's block is only the grid's divisor (capped at 4096 per
        # dim); the programs compute their grids themselves.
        block = (p.rows, min(p.width, 4096))
        # A cluster (sm_90) makes every reduction cluster-wide (clustered()).
        if p.cluster:
            sched = tile.Schedule(block, warps=p.warps, cluster=p.cluster, arch="sm_90")
        else:
            sched = tile.Schedule(block, warps=p.warps)
        self.t = tile.Builder(name, sched)
        self.p, self.dtype, self.access = p, dtype, access
        self.shape = (p.rows, p.width)
        #: the shape of a chunk loop's carried statistics (see STATE).
        self.state = (1, 1) if p.state == "row" else (1, p.width)

    def view(self, name: str, dtype: str | None = None, promise: bool = True) -> tile.View:
        """A rank-2 view; its last dim is promised unit stride (and 16-byte
        aligned) when `access` says the host checked that for the row data
        (`promise`: the views whose tiles are rows, not per-row columns)."""
        dt = dtype or self.dtype
        if not promise:
            return self.t.view(name, dt, 2)
        if self.access == 16:
            return self.t.view(name, dt, 2, unit_stride_dim=1, align_bytes=16)
        if self.access == 1:
            return self.t.view(name, dt, 2, unit_stride_dim=1)
        return self.t.view(name, dt, 2)

    def load(
        self, v: tile.View, origin: Sequence[Any], shape: Sequence[int], other: float = 0.0
    ) -> tile.Tile:
        x = self.t.load(v, origin, shape, other=other)
        return x if x.dtype == "f32" else x.cast("f32")

    def store(self, v: tile.View, origin: Sequence[Any], x: tile.Tile) -> None:
        self.t.store(v, origin, x if v.dtype == "f32" else x.cast(v.dtype))

    def bc(self, x: tile.Tile, shape: Sequence[int] | None = None) -> tile.Tile:
        """`x` broadcast to `shape` (the plan's tile); `x` itself when it has
        that shape already: a broadcast takes the coalesced layout of f32,
        which a tile loaded from 2-byte data does not have, so a no-op
        broadcast of a [1, W] weight would cost two trips through shared
        memory."""
        shape = tuple(shape or self.shape)
        return x if tuple(x.shape) == shape else x.broadcast(shape)

    def pieces(self, c0: Any) -> list[tuple[Any, tuple[int, int]]]:
        """(first column, shape) of the tiles that hold whole rows starting at
        column `c0`: the plan's tile (``Plan.reps`` of them side by side), and
        the tail's (``Plan.tail``) after them."""
        shapes = [self.shape] * self.p.reps + ([(self.p.rows, self.p.tail)] if self.p.tail else [])
        out, c = [], c0
        for k, sh in enumerate(shapes):
            if k:
                w = self.p.width * k
                c = c0 + w if isinstance(c0, int) else self.t.scalar_binary("add", c0, w)
            out.append((c, sh))
        return out

    def whole_rows(self) -> tuple[Any, list[tuple[Any, tuple[int, int]]]]:
        """The first row of this instance's whole-row tiles and their
        pieces (:meth:`pieces` from the row's :meth:`head`); with a cluster
        (``Plan.cluster`` C, instances row·C + k) the row and CTA k's slice."""
        pid = self.t.program_id(0)
        c = self.p.cluster
        if not c:
            r0 = pid * self.p.rows
            return r0, self.pieces(self.head(r0))
        t, k = self.t, c.bit_length() - 1
        row = t.scalar_binary("shr", pid, k)
        rank = t.scalar_binary("and", pid, c - 1)
        c0 = t.scalar_binary("add", self.head(row), rank * (self.p.reps * self.p.width))
        return row, self.pieces(c0)

    def prefetched_rows(
        self,
        xs: Sequence[tuple[tile.View, float]],
        body: Callable[[Any, list[Any], list[tile.Tile]], None],
    ) -> None:
        """Whole rows (``Plan.persist``): instance (cluster) g of G, the u32
        parameter "instances", takes the row blocks of R rows g, g + G, ..,
        and loads each block's tiles of every (view, value outside) in `xs`
        before the previous block's reductions (carried through the loop as
        loaded): body(first row, pieces, f32 tiles: the first view's pieces,
        then the next view's, ..) per block."""
        t, c, R = self.t, self.p.cluster, self.p.rows
        pid = t.program_id(0)
        g = t.scalar_param("instances", "u32")
        first: Any = pid * R if R > 1 else pid
        step_rows: Any = g * R if R > 1 else g
        off: Any = 0
        if c:
            first = t.scalar_binary("shr", pid, c.bit_length() - 1)
            off = t.scalar_binary("and", pid, c - 1) * (self.p.reps * self.p.width)

        def segs(row: Any) -> list[tuple[Any, tuple[int, int]]]:
            h = self.head(row)
            return self.pieces(h if isinstance(off, int) else t.scalar_binary("add", h, off))

        def raw(row: Any) -> list[tile.Tile]:
            ss = segs(row)
            return [t.load(v, (row, c0), sh, other=o) for v, o in xs for c0, sh in ss]

        def step(_t: tile.Builder, row: tile.Scalar, cur: list[Any]) -> list[Any]:
            nxt = raw(row + step_rows)
            body(row, segs(row), [v if v.dtype == "f32" else v.cast("f32") for v in cur])
            return nxt

        t.for_range(first, xs[0][0].dim(0), step_rows, raw(first), step)

    def _fold_pieces(
        self, xs: Sequence[tile.Tile], op: Callable[..., tile.Tile]
    ) -> list[tile.Tile]:
        """`xs` with the tiles of one shape combined element-wise by `op`
        first: one block reduction per shape, not one per tile (a wide row's
        six [1, 8192] tiles)."""
        out: dict[tuple[int, ...], tile.Tile] = {}
        for x in xs:
            k = tuple(x.shape)
            out[k] = op(out[k], x) if k in out else x
        return list(out.values())

    def rowsum(self, xs: Sequence[tile.Tile]) -> tile.Tile:
        """The [R, 1] row sums over the pieces of a row."""
        ys = self._fold_pieces(xs, lambda a, b: a + b)
        acc = ys[0].sum(1)
        for x in ys[1:]:
            acc = acc + x.sum(1)
        return acc

    def rowmax(self, xs: Sequence[tile.Tile]) -> tile.Tile:
        """The [R, 1] row maxima over the pieces of a row."""
        ys = self._fold_pieces(xs, self.t.maximum)
        acc = ys[0].max(1)
        for x in ys[1:]:
            acc = self.t.maximum(acc, x.max(1))
        return acc

    def each_row(self, rows: Any, body: Callable[[Any], None]) -> None:
        """body(row) for this instance's rows: its own with one row per
        instance, or with ``Plan.persist`` rows pid, pid + G, .. (G
        instances in all, the u32 parameter "instances")."""
        pid = self.t.program_id(0)
        if not self.p.persist:
            body(pid)
            return
        g = self.t.scalar_param("instances", "u32")

        def step(_t: tile.Builder, row: tile.Scalar, c: list[Any]) -> list[Any]:
            body(row)
            return []

        self.t.for_range(pid, rows, g, [], step)

    def splat(self, s: tile.Scalar, shape: Sequence[int]) -> tile.Tile:
        return self.t.splat(tuple(shape), s)

    def cols(self, c0: Any, shape: Sequence[int]) -> tile.Tile:
        """Column index of each element (u32) for a tile starting at column `c0`."""
        i = self.t.iota(tuple(shape), 1)
        if isinstance(c0, int) and c0 == 0:
            return i
        return i + self.splat(self.t._scalar(c0, "c0"), shape)

    def lt(self, a: tile.Tile, s: tile.Scalar) -> tile.Tile:
        return self.t.cmp("lt", a, self.splat(s, a.shape))

    def inside(self, r0: Any, c0: Any, x: tile.View, shape: Sequence[int]) -> tile.Tile:
        """Whether each element's (row, column) lies in `x` (a bool tile)."""
        rows = self.t.iota(tuple(shape), 0) + self.splat(self.t._scalar(r0, "r0"), shape)
        ok_r = self.lt(rows, x.dim(0))
        return self.t.binary("and", ok_r, self.lt(self.cols(c0, shape), x.dim(1)))

    def zero_where_not(self, ok: tile.Tile, x: tile.Tile) -> tile.Tile:
        return self.t.where(ok, x, self.t.zeros(x.shape))

    def safe(self, m: tile.Tile) -> tile.Tile:
        """`m`, or 0 where it is -inf: exp(x - safe) is then 0 for x = -inf, never NaN."""
        ninf = self.t.full(m.shape, "f32", NEG_INF)
        return self.t.where(self.t.cmp("eq", m, ninf), self.t.zeros(m.shape), m)

    def fold(self, x: tile.Tile) -> tile.Tile:
        """A chunk's contribution to a carried sum: `x`, or its row sum for
        the per-row state."""
        return x.sum(1) if self.state == (1, 1) else x

    def unary(self, op: str, x: tile.Tile) -> tile.Tile:
        return self.t.unary(op, x)

    def for_range(self, lo: Any, hi: Any, step: Any, inits: Sequence[Any], body: Any) -> list[Any]:
        return self.t.for_range(lo, hi, step, list(inits), body)

    def head(self, row: Any) -> Any:
        """Where `row`'s tiles start, relative to column 0: 0, or with a peel
        minus the row's misalignment (its first element's offset modulo the
        16-byte vector), so that every tile column sits where an aligned
        vector access can reach it. The columns before the row wrap around
        (u32) to huge indices, which the masks of loads, stores and `cols`
        treat as outside the row: the head is a masked scalar tail at the
        front, the rest vectors."""
        if not self.p.peel:
            return 0
        lanes = 16 // T.ITEMSIZE[self.dtype]
        t = self.t
        mis = t.scalar_binary("and", t._scalar(row, "row") * self.p.peel, lanes - 1)
        return t.scalar_binary("sub", 0, mis)

    def streamed(
        self,
        n: tile.Scalar,
        xs: Sequence[tuple[tile.View, float, Any]],
        inits: Sequence[Any],
        body: Callable[[Any, list[tile.Tile], list[Any]], list[Any]],
        start: Any = 0,
    ) -> list[Any]:
        """:meth:`chunks` whose body gets the chunk's f32 tiles of each
        (view, value outside, row) of `xs` at (row, c0): body(c0, tiles,
        carried). With ``Plan.ahead`` the next chunk's tiles are loaded
        before this chunk's body and carried through the loop as loaded, so
        that their loads are in flight while this chunk reduces (a chunk past
        the row loads nothing: its columns are masked)."""
        sh, k = (1, self.p.width), len(xs)

        def raw(c0: Any) -> list[tile.Tile]:
            return [self.t.load(v, (r, c0), sh, other=o) for v, o, r in xs]

        def f32(ts: Sequence[tile.Tile]) -> list[tile.Tile]:
            return [v if v.dtype == "f32" else v.cast("f32") for v in ts]

        if not self.p.ahead:
            return self.chunks(n, inits, lambda c0, c: body(c0, f32(raw(c0)), c), start)

        def step(c0: tile.Scalar, c: list[Any]) -> list[Any]:
            nxt = raw(c0 + self.p.width)
            return nxt + body(c0, f32(c[:k]), c[k:])

        return self.chunks(n, [*raw(start), *inits], step, start)[k:]

    def chunks(
        self,
        n: tile.Scalar,
        inits: Sequence[tile.Value],
        body: Callable[[tile.Scalar, list[Any]], list[Any]],
        start: Any = 0,
    ) -> list[Any]:
        """for c0 in range(start, n, CHUNK) carrying `inits` (`start`: the
        row's :meth:`head`, 0 or a wrapped negative column)."""
        return self.strided(0, n, self.p.width, inits, body, start)

    def write_chunks(
        self,
        n: tile.Scalar,
        xs: Sequence[tuple[tile.View, float, Any]],
        write: Callable[[Any, list[tile.Tile]], None],
        start: Any = 0,
    ) -> None:
        """The write pass of a chunked row: :meth:`streamed` without carried
        values (write(c0, tiles)), last chunk first with REVERSE_WRITE (the
        chunks the statistics pass read last are the likeliest still in L2)."""

        def body(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
            write(c0, vs)
            return []

        if not REVERSE_WRITE:
            self.streamed(n, xs, [], body, start)
            return
        sh = (1, self.p.width)
        t, w = self.t, self.p.width
        span = n if isinstance(start, int) and start == 0 else t.scalar_binary("sub", n, start)
        count = t.scalar_binary("shr", t.scalar_binary("add", span, w - 1), w.bit_length() - 1)

        def step(_t: tile.Builder, k: tile.Scalar, c: list[Any]) -> list[Any]:
            j = t.scalar_binary("sub", t.scalar_binary("sub", count, 1), k)
            c0 = t.scalar_binary("mul", j, w)
            c0 = c0 if isinstance(start, int) and start == 0 else c0 + start
            write(c0, [self.load(v, (r, c0), sh, o) for v, o, r in xs])
            return []

        t.for_range(0, count, 1, [], step)

    def strided(
        self,
        lo: Any,
        n: Any,
        step: Any,
        inits: Sequence[Any],
        body: Callable[[tile.Scalar, list[Any]], list[Any]],
        start: Any = 0,
    ) -> list[Any]:
        """for c0 in range(start + lo, n, step) carrying `inits`; with a
        negative (wrapped) `start` the loop counts from 0 to n - start and
        hands the body its shifted column."""
        if isinstance(start, int) and start == 0:
            return self.t.for_range(lo, n, step, list(inits), lambda _t, c0, c: body(c0, c))
        hi = self.t.scalar_binary("sub", n, start)
        return self.t.for_range(lo, hi, step, list(inits), lambda _t, c0, c: body(c0 + start, c))


# ---------------------------------------------------------------- layer_norm, rms_norm


def _norm_views(P: _P, kind: str) -> tuple[Any, ...]:
    """x, y, weight, bias (None for rms / no bias), eps, 1/n."""
    x, y, w = P.view("x"), P.view("y"), P.view("weight")
    b = P.view("bias") if kind == "layer" else None
    eps, inv_n = P.t.scalar_param("eps", "f32"), P.t.scalar_param("inv_n", "f32")
    return x, y, w, b, eps, inv_n


def _norm_fwd_whole(
    P: _P,
    r0: Any,
    segs: list[tuple[Any, tuple[int, int]]],
    vs: list[tile.Tile],
    views: tuple[Any, ...],
    col: tuple[int, int],
    centre: bool,
) -> None:
    """y of whole rows r0.. from their f32 tiles `vs` (at `segs`)."""
    x, y, w, b, eps, inv_n = views
    if centre:
        mean = P.rowsum(vs) * P.splat(inv_n, col)
        vs = [
            P.zero_where_not(P.lt(P.cols(c, sh), x.dim(1)), v - P.bc(mean, sh))
            for (c, sh), v in zip(segs, vs, strict=True)
        ]
    var = P.rowsum([v * v for v in vs]) * P.splat(inv_n, col)
    rstd = P.unary("rsqrt", var + P.splat(eps, col))
    for (c, sh), v in zip(segs, vs, strict=True):
        out = v * P.bc(rstd, sh) * P.bc(P.load(w, (0, c), (1, sh[1])), sh)
        if b is not None:
            out = out + P.bc(P.load(b, (0, c), (1, sh[1])), sh)
        P.store(y, (r0, c), out)


def _norm_fwd(P: _P, kind: str) -> None:
    """kind: "layer" (weight and bias), "layer_nobias", "rms"."""
    x, y, w, b, eps, inv_n = _norm_views(P, kind)
    centre = kind != "rms"
    R, W = P.shape
    if P.p.shape != "chunks":
        col = (R, 1)

        def whole(r0: Any, segs: list[tuple[Any, tuple[int, int]]], vs: list[tile.Tile]) -> None:
            _norm_fwd_whole(P, r0, segs, vs, (x, y, w, b, eps, inv_n), col, centre)

        if P.p.persist:
            P.prefetched_rows([(x, 0.0)], whole)
            return
        r0, segs = P.whole_rows()
        whole(r0, segs, [P.load(x, (r0, c), sh) for c, sh in segs])
        return
    # Shifted sums in one pass (shift = the row's first element, so large
    # means cancel before squaring), then the write pass.
    n, sh, one = x.dim(1), (1, W), (1, 1)

    def one_row(row: Any) -> None:
        h = P.head(row)
        k = P.bc(P.load(x, (row, 0), one), sh) if centre else P.t.zeros(sh)
        if P.p.held or P.p.unroll > 1:
            _norm_fwd_held(P, row, h, k, (x, y, w, b, eps, inv_n), centre)
            return

        def sums(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
            d = P.zero_where_not(P.lt(P.cols(c0, sh), n), vs[0] - k)
            return [P.fold(d) + c[0], P.fold(d * d) + c[1]]

        z = P.t.zeros(P.state)
        s1, s2 = P.streamed(n, [(x, 0.0, row)], [z, z], sums, h)
        ms = s1.sum(1) * P.splat(inv_n, one) if centre else P.t.zeros(one)
        var = P.t.maximum(s2.sum(1) * P.splat(inv_n, one) - ms * ms, P.t.zeros(one))
        rstd = P.bc(P.unary("rsqrt", var + P.splat(eps, one)), sh)
        mean = k + P.bc(ms, sh) if centre else k

        def write(c0: Any, vs: list[tile.Tile]) -> None:
            out = (vs[0] - mean) * rstd * vs[1]
            P.store(y, (row, c0), out + vs[2] if b is not None else out)

        wb = [(w, 0.0, 0)] + ([(b, 0.0, 0)] if b is not None else [])
        P.write_chunks(n, [(x, 0.0, row), *wb], write, h)

    P.each_row(x.dim(0), one_row)


def _norm_fwd_held(
    P: _P, row: Any, h: Any, k: tile.Tile, views: tuple[Any, ...], centre: bool
) -> None:
    """A chunked row whose first ``Plan.held`` tiles stay in registers
    (:func:`held`): the shifted sums over the rest of the row (``unroll``
    tiles a loop step, per-lane state), then the held tiles' loads, the
    statistics, the held tiles' write, and the rest's write, which reads
    it again (from L2, with one instance per SM: 132 rows of 250 KiB in
    flight on an H200, not 528). `views`: :func:`_norm_views`'s."""
    x, y, w, b, eps, inv_n = views
    n, W, U, H = x.dim(1), P.p.width, P.p.unroll, P.p.held
    sh, one = (1, W), (1, 1)

    def at(c0: Any, j: int) -> Any:
        return c0 if not j else P.t.scalar_binary("add", c0, j * W)

    def dev(c0: Any) -> tile.Tile:
        """x - k at columns c0.., 0 outside the row."""
        return P.zero_where_not(P.lt(P.cols(c0, sh), n), P.load(x, (row, c0), sh) - k)

    def sums(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        ds = [dev(at(c0, j)) for j in range(U)]
        s1, s2 = c
        for d in ds:
            s1, s2 = d + s1, d * d + s2
        return [s1, s2]

    rest = at(h, H)  # the loop's first column: after the held tiles
    z = P.t.zeros(sh)
    s1, s2 = P.strided(0, n, U * W, [z, z], sums, rest)
    ds = [dev(at(h, j)) for j in range(H)]
    s1 = P.rowsum([*ds, s1])
    s2 = P.rowsum([*(d * d for d in ds), s2])
    ms = s1 * P.splat(inv_n, one) if centre else P.t.zeros(one)
    var = P.t.maximum(s2 * P.splat(inv_n, one) - ms * ms, P.t.zeros(one))
    rstd = P.bc(P.unary("rsqrt", var + P.splat(eps, one)), sh)
    msb = P.bc(ms, sh)

    def out(c0: Any, d: tile.Tile) -> None:
        """y at columns c0.. from d = x - k there."""
        v = (d - msb) * rstd * P.load(w, (0, c0), sh)
        P.store(y, (row, c0), v + P.load(b, (0, c0), sh) if b is not None else v)

    for j, d in enumerate(ds):
        out(at(h, j), d)

    def write(c0: tile.Scalar, c: list[Any]) -> list[Any]:
        for j in range(U):
            out(at(c0, j), P.load(x, (row, at(c0, j)), sh) - k)
        return []

    if not HELD_REVERSE:
        P.strided(0, n, U * W, [], write, rest)
        return
    # The last steps first: the rest's columns read last are the likeliest in L2.
    t = P.t
    count = t.scalar_binary("div", t.scalar_binary("sub", n, rest) + (U * W - 1), U * W)

    def back(_t: tile.Builder, i: tile.Scalar, c: list[Any]) -> list[Any]:
        j = t.scalar_binary("sub", t.scalar_binary("sub", count, 1), i)
        return write(t.scalar_binary("add", rest, j * (U * W)), c)

    t.for_range(0, count, 1, [], back)


def _norm_bwd(P: _P, kind: str) -> None:
    """dx of a whole-row plan (rows pid·R ..), and each row's (mean, rstd) for
    :func:`_norm_dw`, which sums dweight and dbias over the rows."""
    x, dy, dx, w = P.view("x"), P.view("dy"), P.view("dx"), P.view("weight")
    stats = P.view("stats", "f32", False)
    eps, inv_n = P.t.scalar_param("eps", "f32"), P.t.scalar_param("inv_n", "f32")
    centre = kind != "rms"
    R, W = P.shape
    col, sh = (R, 1), P.shape
    r0 = P.t.program_id(0) * R
    ok = P.inside(r0, 0, x, sh)
    v, g = P.load(x, (r0, 0), sh), P.load(dy, (r0, 0), sh)
    mean = P.t.zeros(col)
    if centre:
        mean = v.sum(1) * P.splat(inv_n, col)
        v = P.zero_where_not(ok, v - P.bc(mean))
    rstd = P.unary("rsqrt", (v * v).sum(1) * P.splat(inv_n, col) + P.splat(eps, col))
    xhat = P.zero_where_not(ok, v * P.bc(rstd))
    wg = g * P.bc(P.load(w, (0, 0), (1, W)))
    inner = wg - xhat * P.bc((wg * xhat).sum(1) * P.splat(inv_n, col))
    if centre:
        inner = inner - P.bc(wg.sum(1) * P.splat(inv_n, col))
    P.store(dx, (r0, 0), inner * P.bc(rstd))
    P.t.store(stats, (r0, 0), mean)
    P.t.store(stats, (r0, 1), rstd)


def _norm_bwd_rows(P: _P, kind: str, reload: bool = False, prefetch: bool = False) -> None:
    """Whole rows, one pass: instance i writes dx of the row blocks i, i +
    G, .. (as :func:`_norm_bwd`) and carries their dweight and dbias terms
    (``dy·x̂``, ``dy``) as [R, W] tiles, stored summed over R as row i of the
    f32 [G, width] partial buffers (summed by :func:`_colsum`): x and dy
    are read once. With a peel G is a multiple of the vector, so every row
    of an instance has the head of row i and the partial sums' columns line
    up."""
    x, dy, dx, w = P.view("x"), P.view("dy"), P.view("dx"), P.view("weight")
    dwp, dbp = P.view("dw_part", "f32", False), P.view("db_part", "f32", False)
    eps, inv_n = P.t.scalar_param("eps", "f32"), P.t.scalar_param("inv_n", "f32")
    centre = kind != "rms"
    R = P.shape[0]
    col = (R, 1)
    i = P.t.program_id(0)
    segs = P.pieces(P.head(i))
    step = dwp.dim(0) * R

    def weights() -> list[tile.Tile]:
        return [P.bc(P.load(w, (0, c), (1, sh[1])), sh) for c, sh in segs]

    def raw(r0: Any) -> list[tile.Tile]:
        """x's and dy's tiles of row block r0 as stored (bf16 stays bf16)."""
        return [P.t.load(v, (r0, c0), sh) for v in (x, dy) for c0, sh in segs]

    def f32(t: tile.Tile) -> tile.Tile:
        return t if t.dtype == "f32" else t.cast("f32")

    wvs = None if reload else weights()
    n_acc = 2 * len(segs)

    def block(_t: tile.Builder, r0: tile.Scalar, c: list[Any]) -> list[Any]:
        if prefetch:
            # The next row block's loads go out before this one's reductions.
            cur, nxt = c[n_acc:], raw(r0 + step)
        else:
            cur, nxt = raw(r0), []
        vs = [f32(t) for t in cur[: len(segs)]]
        gs = [f32(t) for t in cur[len(segs) :]]
        wv_ = wvs or weights()
        # Loads give 0 outside the rows, and so do the centred values once
        # masked: x̂ is 0 there without another mask.
        if centre:
            mean = P.rowsum(vs) * P.splat(inv_n, col)
            vs = [
                P.zero_where_not(P.inside(r0, c0, x, sh), v - P.bc(mean, sh))
                for (c0, sh), v in zip(segs, vs, strict=True)
            ]
        ms = P.rowsum([v * v for v in vs]) * P.splat(inv_n, col)
        rstd = P.unary("rsqrt", ms + P.splat(eps, col))
        xhats = [v * P.bc(rstd, v.shape) for v in vs]
        wgs = [g * wv for g, wv in zip(gs, wv_, strict=True)]
        c2 = P.rowsum([wg * xh for wg, xh in zip(wgs, xhats, strict=True)]) * P.splat(inv_n, col)
        c1 = P.rowsum(wgs) * P.splat(inv_n, col) if centre else None
        carry = []
        for k, (c0, sh) in enumerate(segs):
            inner = wgs[k] - xhats[k] * P.bc(c2, sh)
            if c1 is not None:
                inner = inner - P.bc(c1, sh)
            P.store(dx, (r0, c0), inner * P.bc(rstd, sh))
            carry += [gs[k] * xhats[k] + c[2 * k], gs[k] + c[2 * k + 1]]
        return carry + nxt

    z = [P.t.zeros(sh) for _, sh in segs for _ in range(2)]
    first = raw(i * R) if prefetch else []
    acc = P.for_range(i * R, x.dim(0), step, z + first, block)
    for k, (c0, _) in enumerate(segs):
        P.store(dwp, (i, c0), acc[2 * k].sum(0))
        if kind == "layer":
            P.store(dbp, (i, c0), acc[2 * k + 1].sum(0))


def _norm_dw(P: _P, kind: str) -> None:
    """Instance (j, i): columns j·W.. of dweight (dbias) summed over the row
    blocks i, i + S, .. of [R, W] tiles, x̂ from the rows' (mean, rstd); row
    i of the f32 partial buffers, summed by :func:`_colsum`."""
    x, dy = P.view("x"), P.view("dy")
    stats = P.view("stats", "f32", False)
    dwp, dbp = P.view("dw_part", "f32"), P.view("db_part", "f32")
    R, W = P.shape
    sh, col = P.shape, (R, 1)
    c0, i = P.t.program_id(0) * W, P.t.program_id(1)

    def block(_t: tile.Builder, r0: tile.Scalar, c: list[Any]) -> list[Any]:
        mean, rstd = P.t.load(stats, (r0, 0), col), P.t.load(stats, (r0, 1), col)
        xhat = (P.load(x, (r0, c0), sh) - P.bc(mean)) * P.bc(rstd)  # 0 outside: rstd 0
        g = P.load(dy, (r0, c0), sh)
        return [g * xhat + c[0], g + c[1]]

    z = P.t.zeros(sh)
    dw, db = P.for_range(i * R, x.dim(0), dwp.dim(0) * R, [z, z], block)
    P.store(dwp, (i, c0), dw.sum(0))
    if kind == "layer":
        P.store(dbp, (i, c0), db.sum(0))


def _norm_bwd_stats(P: _P, kind: str) -> None:
    """Chunked rows, first program: per row (mean, rstd, mean(g), mean(g·x̂))
    with g = dy·weight, from shifted sums in one pass over x and dy."""
    x, dy, w, stats = P.view("x"), P.view("dy"), P.view("weight"), P.view("stats", "f32", False)
    eps, inv_n = P.t.scalar_param("eps", "f32"), P.t.scalar_param("inv_n", "f32")
    centre = kind != "rms"
    row, n, sh, one = P.t.program_id(0), x.dim(1), P.shape, (1, 1)
    k = P.bc(P.load(x, (row, 0), one), sh) if centre else P.t.zeros(sh)

    def sums(c0: Any, vs: list[tile.Tile], c: list[Any]) -> list[Any]:
        d = P.zero_where_not(P.lt(P.cols(c0, sh), n), vs[0] - k)
        g = vs[1] * vs[2]
        return [P.fold(d) + c[0], P.fold(d * d) + c[1], P.fold(g) + c[2], P.fold(g * d) + c[3]]

    z = P.t.zeros(P.state)
    xs = [(x, 0.0, row), (dy, 0.0, row), (w, 0.0, 0)]
    sums4 = P.streamed(n, xs, [z, z, z, z], sums, P.head(row))
    s1, s2, sg, sgd = (s.sum(1) * P.splat(inv_n, one) for s in sums4)
    if not centre:  # rms: the mean square, not the variance
        s1 = P.t.zeros(one)
    var = P.t.maximum(s2 - s1 * s1, P.t.zeros(one))
    rstd = P.unary("rsqrt", var + P.splat(eps, one))
    # mean(g * xhat) = rstd * (mean(g * (x - k)) - (mean - k) * mean(g))
    c2 = rstd * (sgd - s1 * sg)
    mean = k.max(1) + s1 if centre else P.t.zeros(one)
    for j, val in enumerate((mean, rstd, sg if centre else P.t.zeros(one), c2)):
        P.t.store(stats, (row, j), val)


def _norm_bwd_chunks(P: _P, kind: str) -> None:
    """Chunked rows, second program: instance (j, i) writes dx of column
    chunk j for rows i, i + G, ... and row i of the partial sums there."""
    x, dy, dx, w = P.view("x"), P.view("dy"), P.view("dx"), P.view("weight")
    stats = P.view("stats", "f32", False)
    dwp, dbp = P.view("dw_part", "f32"), P.view("db_part", "f32")
    groups = P.t.scalar_param("groups", "u32")
    sh, one = P.shape, (1, 1)
    gi = P.t.program_id(1)
    # With a peel every row of group gi has gi's head (G is a multiple of
    # the vector), so the chunks of all its rows line up.
    c0 = P.t.program_id(0) * P.p.width
    if P.p.peel:
        c0 = c0 + P.head(gi)
    wv = P.load(w, (0, c0), sh)

    def rowstep(_t: tile.Builder, r: tile.Scalar, c: list[Any]) -> list[Any]:
        mean, rstd, c1, c2 = (P.bc(P.t.load(stats, (r, j), one), sh) for j in range(4))
        ok = P.inside(r, c0, x, sh)
        xhat = P.zero_where_not(ok, (P.load(x, (r, c0), sh) - mean) * rstd)
        g = P.load(dy, (r, c0), sh)
        P.store(dx, (r, c0), (g * wv - c1 - xhat * c2) * rstd)
        return [g * xhat + c[0], g + c[1]]

    z = P.t.zeros(sh)
    dw, db = P.for_range(gi, x.dim(0), groups, [z, z], rowstep)
    P.store(dwp, (gi, c0), dw)
    if kind == "layer":
        P.store(dbp, (gi, c0), db)


def _colsum(P: _P) -> None:
    """out[0, c] = sum over rows of part[:, c] (f32 sums, in a fixed order)."""
    part, out = P.view("part", "f32"), P.view("out")
    c0 = P.t.program_id(0) * COLSUM_W
    sh = (COLSUM_R, COLSUM_W)

    def step(_t: tile.Builder, r0: tile.Scalar, c: list[Any]) -> list[Any]:
        return [P.t.load(part, (r0, c0), sh) + c[0]]

    (acc,) = P.for_range(0, part.dim(0), COLSUM_R, [P.t.zeros(sh)], step)
    P.store(out, (0, c0), acc.sum(0))


# ---------------------------------------------------------------- building and launching

#: program name -> (body, plan shapes it runs on). Extra key entries are the
#: body's arguments (norm kind, target dtype).
_PROGRAMS: dict[str, Callable[..., None]] = {
    "softmax_fwd": _softmax_fwd,
    "softmax_bwd": _softmax_bwd,
    "softmax_bwd_split_dot": _softmax_bwd_split_dot,
    "softmax_bwd_split_write": _softmax_bwd_split_write,
    "split_stats": _split_stats,
    "softmax_split_write": _softmax_split_write,
    "norm_fwd": _norm_fwd,
    "norm_bwd": _norm_bwd,
    "norm_bwd_rows": _norm_bwd_rows,
    "norm_dw": _norm_dw,
    "norm_bwd_stats": _norm_bwd_stats,
    "norm_bwd_chunks": _norm_bwd_chunks,
    "colsum": _colsum,
    "ce_fwd": _ce_fwd,
    "ce_bwd": _ce_bwd,
    "ce_split_stats": _ce_split_stats,
    "ce_split_loss": _ce_split_loss,
    "ce_split_write": _ce_split_write,
}


@functools.cache
def kernel(name: str, p: Plan, dtype: str, access: int, *extra: Any) -> tile.Kernel:
    """The tile kernel of program `name` for plan `p` (built once)."""
    P = _P(name, p, dtype, access)
    _PROGRAMS[name](P, *extra)
    return P.t.finish()


def _module(name: str, p: Plan, dtype: str, access: int, *extra: Any) -> hir.Module:
    """The program's HIR, with ``.minnctapersm`` from MIN_BLOCKS: ptxas then
    caps the registers so that many instances fit on an SM."""
    m = kernel(name, p, dtype, access, *extra).module
    blocks = MIN_BLOCKS.get((name, p.shape))
    # Never below 128 registers a thread: past that the spills cost more.
    if not blocks or blocks * p.warps * 32 * 128 > 65536:
        return m
    j = json.loads(m.to_json())
    for f in j["functions"]:
        if "kernel" in f["kind"]:
            f["kind"]["kernel"]["min_blocks"] = blocks
    return hir.Module.from_json(json.dumps(j))


def view_args(t: T.Tensor, shape: tuple[int, int], strides: tuple[int, int]) -> list[Any]:
    """A rank-2 view argument: pointer, extents, strides (u32, checked)."""
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if n)
    if any(not 0 <= v < _U32 for v in (*shape, *strides)) or span >= _U32:
        raise ArgumentError(
            f"argument '{t.name}': shape {shape} with strides {strides} spans 2**32 elements "
            "or more (the tile programs index in u32)"
        )
    return [t, *shape, *strides]


def access(*views: tuple[T.Tensor, int]) -> int:
    """16 when every (tensor, column stride) has unit column stride and a
    16-byte aligned start (vector accesses), 1 for unit strides, else 0."""
    if any(cs != 1 for _, cs in views):
        return 0
    return 16 if all(_address(t) % 16 == 0 for t, _ in views) else 1


def _address(t: T.Tensor) -> int:
    """Where `t`'s element 0 is (numpy arrays too: the CPU backend runs on
    their own memory)."""
    return t.ptr if t.on_gpu else int(t.arr.__array_interface__["data"][0])


def groups(where: T.Tensor, blocks: int, per: int = 1, per_sm: int = 0) -> int:
    """Row groups of a loop over `blocks` row blocks when `per` instances
    share each group: `per_sm` (GROUPS_PER_SM) instances per SM in all on
    the GPU (the partial sums then stay small), 3 groups on the interpreter
    (so the loop and the partial-sum reduction are exercised)."""
    if not where.on_gpu:
        return max(1, min(blocks, 3))
    cap = (per_sm or GROUPS_PER_SM) * T.sm_count(where.device) // per
    return max(1, min(blocks, cap))


def split(where: T.Tensor, rows: int, n: int, p: Plan) -> int:
    """Instances per row for chunked rows: enough that `rows` rows fill
    SPLIT_TARGET instances (two per SM), at most one per chunk."""
    target = SPLIT_TARGET
    if not target and where.on_gpu:
        target = 2 * T.sm_count(where.device)
    if p.shape != "chunks" or rows >= target:
        return 1
    return max(1, min(-(-n // p.width), target // rows, 1024))


def launch(
    name: str,
    key: tuple[Any, ...],
    grid: tuple[int, ...],
    args: Sequence[Any],
    where: T.Tensor,
    stream: Any,
) -> None:
    """Launches program `name` with key (plan, dtype, access, *extra)."""
    k = kernel(name, *key)
    T.launch(_module, (name, *key), k.name, grid, k.block[0], args, where, stream)


def colsum(part: T.Tensor, rows: int, n: int, out: T.Tensor, stream: Any) -> None:
    """out[c] = sum of part[:rows, c] (deterministic)."""
    p = Plan("colsum", COLSUM_R, COLSUM_W, 4)
    args = [
        *view_args(part, (rows, n), (n, 1)),
        *view_args(out, (1, n), (0, out.strides[0])),
    ]
    launch("colsum", (p, out.dtype, 0), (-(-n // COLSUM_W),), args, part, stream)


# ---------------------------------------------------------------- runners (checked Tensors in)


def _rows2(t: T.Tensor) -> tuple[tuple[int, int], tuple[int, int]]:
    rows, n, rs, cs = T.rows_of(t)
    return (rows, n), (rs, cs)


def _parts(x: T.Tensor, rows: int, s: int, count: int) -> list[Any]:
    """`count` f32 [rows, s] views of partial statistics of split rows."""
    ts = [T.tensor(T.empty_like(x, (rows, s), "f32"), "partial statistics") for _ in range(count)]
    return [a for t in ts for a in view_args(t, (rows, s), (s, 1))]


def _grid(p: Plan, rows: int) -> tuple[int]:
    return (-(-rows // p.rows),)


def persisted(name: str, p: Plan) -> Plan:
    """`p` with PERSIST's instances per SM for program `name` when it is chunked."""
    k = PERSIST.get(name, 0)
    return dataclasses.replace(p, persist=k) if k and p.shape == "chunks" else p


def _row_grid(p: Plan, rows: int, where: T.Tensor) -> tuple[tuple[int], list[Any]]:
    """The grid of a one-row-per-instance program, and its "instances"
    argument when the instances loop over rows (``Plan.persist``: that many
    per SM on the GPU, 2 on the interpreter, so that the loop runs)."""
    if not p.persist:
        grid = (rows * p.cluster,) if p.cluster else _grid(p, rows)
        return grid, []
    # With a cluster of c CTAs: g clusters, c·g CTAs.
    c = max(1, p.cluster)
    cap = p.persist * T.sm_count(where.device) // c if where.on_gpu else 2
    g = max(1, min(-(-rows // p.rows), cap))
    return (g * c,), [g]


def run_softmax(x: T.Tensor, y: T.Tensor, stream: Any) -> None:
    (rows, n), xs = _rows2(x)
    ys = _rows2(y)[1]
    acc = access((x, xs[1]), (y, ys[1]))
    p = chunked("softmax_fwd", plan(n, T.ITEMSIZE[x.dtype]))
    p = tailed("softmax", peeled("softmax", p, x.dtype, acc, n, xs[0], ys[0]), n, x.dtype)
    key = (p, x.dtype, acc)
    xa, ya = view_args(x, (rows, n), xs), view_args(y, (rows, n), ys)
    s = split(x, rows, n, p)
    if s == 1:
        q = wide("softmax_fwd", persisted("softmax_fwd", p), n, x.dtype)
        q = prefetching("softmax_fwd", clustered("softmax_fwd", q, n, x.dtype))
        q = ahead("softmax_fwd", q)
        grid, extra = _row_grid(q, rows, x)
        launch("softmax_fwd", (q, *key[1:]), grid, [*xa, *ya, *extra], x, stream)
        return
    # Few wide rows: each split over s instances (statistics, then the write).
    pa = _parts(x, rows, s, 2)
    launch("split_stats", key, (rows, s), [*xa, *pa], x, stream)
    launch("softmax_split_write", (*key, _pow2(s)), (rows, s), [*xa, *ya, *pa], x, stream)


def run_softmax_backward(y: T.Tensor, dy: T.Tensor, dx: T.Tensor, stream: Any) -> None:
    (rows, n), ys = _rows2(y)
    gs, xs = _rows2(dy)[1], _rows2(dx)[1]
    acc = access((y, ys[1]), (dy, gs[1]), (dx, xs[1]))
    p = peeled("softmax", plan(n, T.ITEMSIZE[y.dtype]), y.dtype, acc, n, ys[0], gs[0], xs[0])
    p = tailed("softmax", p, n, y.dtype)
    key = (p, y.dtype, acc)
    args = [
        *view_args(y, (rows, n), ys),
        *view_args(dy, (rows, n), gs),
        *view_args(dx, (rows, n), xs),
    ]
    s = split(y, rows, n, p)
    if s == 1:
        q = ahead("softmax_bwd", prefetching("softmax_bwd", p))
        grid, extra = _row_grid(q, rows, y)
        launch("softmax_bwd", (q, *key[1:]), grid, [*args, *extra], y, stream)
        return
    # Few wide rows: each split over s instances (partial sums of y·dy, then the write).
    pa = _parts(y, rows, s, 1)
    reads = args[: 2 * len(view_args(y, (rows, n), ys))]  # y and dy
    launch("softmax_bwd_split_dot", key, (rows, s), [*reads, *pa], y, stream)
    launch("softmax_bwd_split_write", (*key, _pow2(s)), (rows, s), [*args, *pa], y, stream)


def _vec(t: T.Tensor, n: int) -> tuple[list[Any], tuple[T.Tensor, int]]:
    """A 1-D tensor of `n` as a [1, n] view (weight, bias)."""
    return view_args(t, (1, n), (0, t.strides[0])), (t, t.strides[0])


def run_norm(
    x: T.Tensor,
    w: T.Tensor,
    b: T.Tensor | None,
    eps: float,
    y: T.Tensor,
    kind: str,
    stream: Any,
) -> None:
    (rows, n), xs = _rows2(x)
    ys = _rows2(y)[1]
    wa, wv = _vec(w, n)
    ba, bv = _vec(b, n) if b is not None else ([], wv)
    acc = access((x, xs[1]), (y, ys[1]), wv, bv)
    p = chunked("norm_fwd", plan(n, T.ITEMSIZE[x.dtype]))
    p = peeled("norm", p, x.dtype, acc, n, xs[0], ys[0])
    p = persisted("norm_fwd", tailed("norm", p, n, x.dtype))
    # The newer switches (HELD, CLUSTER, CLUSTER_PERSIST, PREFETCH) name
    # the RMSNorm forward "rms_fwd" apart from LayerNorm's "norm_fwd": one
    # form can win for one and lose for the other.
    sw = "rms_fwd" if kind == "rms" else "norm_fwd"
    p = held(sw, clustered(sw, wide("norm_fwd", p, n, x.dtype), n, x.dtype), n)
    if p.shape == "row" and p.reps == 1 and not p.tail and not p.cluster and p.width >= 8192:
        p = dataclasses.replace(p, warps=ROW_WARPS.get("norm_fwd", p.warps))
    p = ahead(sw, prefetching(sw, p))
    key = (p, x.dtype, acc, kind)
    grid, extra = _row_grid(p, rows, x)
    args = [*view_args(x, (rows, n), xs), *view_args(y, (rows, n), ys), *wa, *ba, eps, 1.0 / n]
    launch("norm_fwd", key, grid, [*args, *extra], x, stream)


def run_norm_backward(
    dy: T.Tensor,
    x: T.Tensor,
    w: T.Tensor,
    eps: float,
    dx: T.Tensor,
    dw: T.Tensor,
    db: T.Tensor | None,
    kind: str,
    stream: Any,
) -> None:
    """dx, and dweight (dbias) summed over rows deterministically."""
    (rows, n), xs = _rows2(x)
    gs, os_ = _rows2(dy)[1], _rows2(dx)[1]
    p = plan(n, T.ITEMSIZE[x.dtype])
    wa, wv = _vec(w, n)
    acc = access((x, xs[1]), (dy, gs[1]), (dx, os_[1]), wv)
    xa, ga = view_args(x, (rows, n), xs), view_args(dy, (rows, n), gs)
    data = [*xa, *ga, *view_args(dx, (rows, n), os_), *wa]
    if NORM_BWD.get(p.shape) == "fused":
        if NORM_BWD_THIN:
            # Half the elements per thread: the carried partial sums raise
            # the program's registers (168 for [2, 1024] bf16 over 4 warps).
            p = Plan(p.shape, p.rows // 2, p.width, p.warps)
            if p.rows == 0:
                p = Plan("row", 1, p.width, min(32, 2 * p.warps))
        p = tailed("norm", peeled("norm", p, x.dtype, acc, n, xs[0], gs[0], os_[0]), n, x.dtype)
        if p.tail and NORM_BWD_TAIL_WARPS:
            p = dataclasses.replace(p, warps=NORM_BWD_TAIL_WARPS)
        # Instances looping over row blocks: about NORM_BWD_PER_SM per SM, a
        # multiple of the vector with a peel (every row of an instance then
        # has the same head).
        per_sm = 1 if p.warps >= NORM_BWD_PREFETCH_WARPS else NORM_BWD_PER_SM
        g = groups(x, -(-rows // p.rows), 1, per_sm)
        if p.peel:
            lanes = 16 // T.ITEMSIZE[x.dtype]
            g = -(-g // lanes) * lanes
        dwp, dbp = (T.tensor(T.empty_like(x, (g, n), "f32"), "partial sums") for _ in range(2))
        parts = [*view_args(dwp, (g, n), (n, 1)), *view_args(dbp, (g, n), (n, 1))]
        args = [*data, *parts, eps, 1.0 / n]
        # The weight reloaded per row block, the next block prefetched: in
        # the key (read here, not when the program is built).
        pf = NORM_BWD_PREFETCH or p.warps >= NORM_BWD_PREFETCH_WARPS
        key = (p, x.dtype, acc, kind, NORM_BWD_W_RELOAD, pf)
        launch("norm_bwd_rows", key, (g,), args, x, stream)
    elif p.shape != "chunks":
        # dx and the rows' statistics, then dweight/dbias by column blocks
        # over S row splits (every instance busy), then the sum of the splits.
        st = T.tensor(T.empty_like(x, (rows, 2), "f32"), "row statistics")
        sv = view_args(st, (rows, 2), (2, 1))
        args = [*data, *sv, eps, 1.0 / n]
        launch("norm_bwd", (p, x.dtype, acc, kind), _grid(p, rows), args, x, stream)
        q = Plan("dw", DW_R, DW_W, 4)
        cols = -(-n // DW_W)
        g = groups(x, -(-rows // DW_R), cols, DW_PER_SM)
        dwp, dbp = (T.tensor(T.empty_like(x, (g, n), "f32"), "partial sums") for _ in range(2))
        parts = [*view_args(dwp, (g, n), (n, 1)), *view_args(dbp, (g, n), (n, 1))]
        dkey = (q, x.dtype, access((x, xs[1]), (dy, gs[1])), kind)
        launch("norm_dw", dkey, (cols, g), [*xa, *ga, *sv, *parts], x, stream)
    else:
        q = chunked("norm_bwd_chunks", p)
        q = peeled("norm", q, x.dtype, acc, n, xs[0], gs[0], os_[0]) if PEEL_CHUNKS_BWD else q
        g = groups(x, rows)
        head = 0
        if q.peel:
            # Every row of a group then has the group's head (see _norm_bwd_chunks).
            lanes = 16 // T.ITEMSIZE[x.dtype]
            g, head = -(-g // lanes) * lanes, lanes - 1
        grid = (-(-(n + head) // q.width), g)
        # Partial sums of dweight and dbias (rms: dbias's is unused), row i by group i.
        dwp, dbp = (T.tensor(T.empty_like(x, (g, n), "f32"), "partial sums") for _ in range(2))
        parts = [*view_args(dwp, (g, n), (n, 1)), *view_args(dbp, (g, n), (n, 1))]
        st = T.tensor(T.empty_like(x, (rows, 4), "f32"), "row statistics")
        sv = view_args(st, (rows, 4), (4, 1))
        launch(
            "norm_bwd_stats",
            (
                ahead(
                    "norm_bwd_stats",
                    peeled("norm", chunked("norm_bwd_stats", p), x.dtype, acc, n, xs[0], gs[0]),
                ),
                x.dtype,
                acc,
                kind,
            ),
            (rows,),
            [*xa, *ga, *wa, *sv, eps, 1.0 / n],
            x,
            stream,
        )
        launch("norm_bwd_chunks", (q, x.dtype, acc, kind), grid, [*data, *sv, *parts, g], x, stream)
    colsum(dwp, g, n, dw, stream)
    if db is not None:
        colsum(dbp, g, n, db, stream)


def _targets(g: T.Tensor, rows: int, gs: int) -> list[Any]:
    return view_args(g, (rows, 1), (gs, 1))


def run_cross_entropy(x: T.Tensor, g: T.Tensor, gs: int, loss: T.Tensor, stream: Any) -> None:
    """loss[r] (f32, contiguous) per row."""
    (rows, n), xs = _rows2(x)
    acc = access((x, xs[1]))
    p = tailed("ce", peeled("ce", plan(n, T.ITEMSIZE[x.dtype]), x.dtype, acc, n, xs[0]), n, x.dtype)
    key = (p, x.dtype, acc, g.dtype)
    xa, ga, la = (
        view_args(x, (rows, n), xs),
        _targets(g, rows, gs),
        view_args(loss, (rows, 1), (1, 1)),
    )
    s = split(x, rows, n, p)
    if s == 1:
        q = ahead("ce_fwd", prefetching("ce_fwd", wide("ce_fwd", p, n, x.dtype)))
        grid, extra = _row_grid(q, rows, x)
        launch("ce_fwd", (q, *key[1:]), grid, [*xa, *ga, *la, *extra], x, stream)
        return
    parts = _parts(x, rows, s, 3)
    launch("ce_split_stats", key, (rows, s), [*xa, *ga, *parts], x, stream)
    launch("ce_split_loss", (*key, _pow2(s)), (rows,), [*xa, *ga, *parts, *la], x, stream)


def run_cross_entropy_backward(
    dl: T.Tensor,
    dls: int,
    scale: float,
    x: T.Tensor,
    g: T.Tensor,
    gs: int,
    dx: T.Tensor,
    stream: Any,
) -> None:
    """dx = (softmax(x) - onehot) * dl[r * dls] * scale (dls = 0: one dloss for all rows)."""
    (rows, n), xs = _rows2(x)
    os_ = _rows2(dx)[1]
    acc = access((x, xs[1]), (dx, os_[1]))
    p = peeled("ce", plan(n, T.ITEMSIZE[x.dtype]), x.dtype, acc, n, xs[0], os_[0])
    p = tailed("ce", p, n, x.dtype)
    key = (p, x.dtype, acc, g.dtype)
    xa, ga = view_args(x, (rows, n), xs), _targets(g, rows, gs)
    da, oa = view_args(dl, (rows, 1), (dls, 1)), view_args(dx, (rows, n), os_)
    s = split(x, rows, n, p)
    if s == 1:
        q = ahead("ce_bwd", prefetching("ce_bwd", wide("ce_bwd", p, n, x.dtype)))
        grid, extra = _row_grid(q, rows, x)
        args = [*xa, *ga, *da, *oa, scale, *extra]
        launch("ce_bwd", (q, *key[1:]), grid, args, x, stream)
        return
    parts = _parts(x, rows, s, 2)
    launch("split_stats", key[:3], (rows, s), [*xa, *parts], x, stream)
    args = [*xa, *ga, *da, *oa, *parts, scale]
    launch("ce_split_write", (*key, _pow2(s)), (rows, s), args, x, stream)
