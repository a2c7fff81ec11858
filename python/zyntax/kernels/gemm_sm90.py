"""The sm_90a GEMM: wgmma fed by TMA through an mbarrier ring, warp-specialised
and persistent (issue 14, the Hopper variant). Written with the builder only.

``out[M, N] = act(A[M, K] @ B[K, N] + bias[N])`` with bf16 or f16 operands,
f32 accumulation and a bf16, f16 or f32 output. docs/kernels.md, "Hopper GEMM",
describes the design; in short:

- A block of 384 threads is three warpgroups. Warpgroup 0 is the producer: it
  gives registers back (``setmaxnreg.dec``) and one of its threads issues the
  TMA loads. Warpgroups 1 and 2 are consumers (``setmaxnreg.inc``): each owns 64
  rows of a 128 x 256 output tile and issues ``wgmma.m64n256k16``.
- Shared memory holds a ring of ``STAGES`` (A, B) tile pairs of K-width 64 (one
  128-byte swizzle row of 16-bit elements), with a ``full`` and an ``empty``
  mbarrier per stage. The producer waits for ``empty[s]``, announces the stage's
  bytes on ``full[s]`` (``arrive.expect_tx``) and starts the two TMA loads that
  complete it; a consumer waits for ``full[s]`` (parity of the ring lap), runs
  four wgmmas, waits for them, and arrives on ``empty[s]``.
- The grid is persistent (one block per SM, or fewer); blocks walk the output
  tiles with a stride of the grid size, in a grouped order (``GROUP_M`` tile rows
  at a time) so that concurrently running tiles share their A and B panels in L2.
- Clusters (``cluster_m=2``): the two blocks of a cluster compute vertically
  adjacent tiles with the same B tile. Each loads its own A and half of B,
  multicast into both blocks' stage (``tma.load`` with a CTA mask), so each
  ``full`` barrier still expects the whole stage's bytes; every consumer warp
  releases a stage on the ``empty`` barrier of both blocks (``mapa`` + a
  relaxed remote ``mbarrier.arrive``), since both producers write into it.
  The cluster walks tile pairs: both blocks see the same sequence.
- Tails: TMA fills out-of-bounds tile elements with zeros; the epilogue (bias,
  ReLU/GELU, cast) writes straight from the accumulator registers with guarded
  stores.

Layouts: A is row-major (K-major). B is either ``"col"`` (stored N x K, K-major,
the fastest) or ``"row"`` (stored K x N, N-major: the wgmma reads it transposed).
TMA needs 16-byte aligned row strides; :func:`matmul_sm90` copies an operand
into a padded buffer when its rows are not (K or N not a multiple of 8).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from zyntax import hir
from zyntax.kernels._rows import variables
from zyntax.kernels._sync import wait_parity

BM_PER_CONSUMER = 64  # rows of one wgmma (m64)
ROW_BYTES = 128  # K bytes per stage: one tile row = the 128B swizzle span
SLICE_BYTES = 32  # K bytes of one wgmma (16 f16/bf16, 8 tf32, 32 e4m3)
BK = 64  # K per stage for 16-bit operands (ROW_BYTES / element size in general)
SWIZZLE_ATOM = 8 * ROW_BYTES  # 8 rows x 128 bytes: the period of the 128B swizzle
GELU_C = 0.7978845608028654  # sqrt(2 / pi)

DTYPES = {"bf16": hir.bf16, "f16": hir.f16, "f32": hir.f32}
IN_DTYPES = ("bf16", "f16", "tf32", "e4m3")
#: Element bytes and the TMA element type of each operand dtype.
IN_BYTES = {"bf16": 2, "f16": 2, "tf32": 4, "e4m3": 1}
IN_TMA = {"bf16": "bf16", "f16": "f16", "tf32": "f32", "e4m3": "u8"}
OUT_DTYPES = ("bf16", "f16", "f32")
LAYOUTS = ("row", "col")
ACTIVATIONS = (None, "relu", "gelu")


@dataclasses.dataclass(frozen=True)
class Config:
    """One specialisation of the kernel (each is a separate module)."""

    dtype: str = "bf16"  # operands: bf16 | f16
    out_dtype: str = "bf16"  # bf16 | f16 | f32
    b_layout: str = "col"  # "col": B stored N x K (K-major); "row": K x N (N-major)
    bias: str | None = None  # the bias vector's dtype, or None for no bias
    activation: str | None = None  # None | "relu" | "gelu" (tanh form)
    bn: int = 256  # N of the output tile and of each wgmma
    stages: int = 4  # depth of the TMA ring
    consumers: int = 2  # consumer warpgroups, 64 output rows each
    setmaxnreg: bool = True  # move registers from the producer to the consumers
    group_m: int = 8  # tile rows walked together (L2 reuse)
    pair_store: bool = True  # N is even: store two output columns at once
    scaled: bool = False  # multiply by scale_a[0] * scale_b[0] (f32 pointers; fp8)
    # keep one wgmma group in flight and release its stage one step late; measured
    # slower with setmaxnreg on the H100 (benches/gemm_ladder.py), so off
    overlap: bool = False
    # blocks per cluster along M sharing (multicasting) the B tile: 1 or 2
    cluster_m: int = 1

    @property
    def bm(self) -> int:
        return BM_PER_CONSUMER * self.consumers

    @property
    def bk(self) -> int:
        """K elements per stage (one 128-byte row)."""
        return ROW_BYTES // IN_BYTES[self.dtype]

    @property
    def threads(self) -> int:
        return 128 * (1 + self.consumers)

    @property
    def a_bytes(self) -> int:
        return self.bm * ROW_BYTES

    @property
    def b_bytes(self) -> int:
        return self.bn * ROW_BYTES

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory: the ring, then 2 x stages barriers."""
        return self.stages * (self.a_bytes + self.b_bytes) + 16 * self.stages

    @property
    def registers(self) -> tuple[int, int]:
        """(producer, consumer) register counts after `setmaxnreg`: the
        consumers take what the producer gives up, within 64 Ki per block."""
        producer = 40
        consumer = (65536 // 128 - producer) // self.consumers // 8 * 8
        return producer, min(consumer, 256)

    def check(self) -> None:
        if self.dtype not in IN_DTYPES:
            raise ValueError(f"dtype must be one of {IN_DTYPES}, got {self.dtype!r}")
        if self.out_dtype not in OUT_DTYPES:
            raise ValueError(f"out_dtype must be one of {OUT_DTYPES}, got {self.out_dtype!r}")
        if self.b_layout not in LAYOUTS:
            raise ValueError(f"b_layout must be one of {LAYOUTS}, got {self.b_layout!r}")
        if self.bias is not None and self.bias not in OUT_DTYPES:
            raise ValueError(f"bias dtype must be one of {OUT_DTYPES}, got {self.bias!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if self.b_layout == "row" and IN_BYTES[self.dtype] != 2:
            raise ValueError(f"{self.dtype} wgmma needs a K-major B (b_layout='col')")
        if self.bn not in (64, 128, 256) or self.stages < 2 or self.consumers not in (1, 2):
            raise ValueError(f"unsupported tile configuration {self}")
        if self.cluster_m not in (1, 2) or (
            self.cluster_m > 1 and self.b_layout == "row" and self.bn < 128
        ):
            raise ValueError(f"unsupported cluster configuration {self}")

    @property
    def b_box_rows(self) -> int:
        """N rows of B one block loads per stage ("col" layout): all of the
        tile's, or its share of the multicast."""
        return self.bn // self.cluster_m


def _tile_coords(
    b: hir.FunctionBuilder, tile: hir.Value, tiles_m: hir.Value, tiles_n: hir.Value, group_m: int
) -> tuple[hir.Value, hir.Value]:
    """(tile row, tile column) of linear tile `tile` in the grouped order:
    groups of `group_m` tile rows, column-major inside a group, so that the
    tiles running at once reuse a few A row panels and B column panels."""
    per_group = tiles_n * group_m
    group = tile // per_group
    first_m = group * group_m
    rows = b.min(tiles_m - first_m, group_m)
    inner = tile - group * per_group
    return first_m + inner % rows, inner // rows


def _activation(b: hir.FunctionBuilder, x: hir.Value, act: str | None) -> hir.Value:
    if act == "relu":
        return b.max(x, 0.0)
    if act == "gelu":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the tanh form
        inner = (x + x * x * x * 0.044715) * GELU_C
        return x * 0.5 * (b.tanh(inner) + 1.0)
    return x


def build(cfg: Config) -> hir.Module:
    """The kernel ``gemm_sm90(tmap_a, tmap_b, out, [bias,] M, N, K)`` for `cfg`.
    Launch it with :func:`launch_shape` (grid, block, dynamic shared bytes)."""
    cfg.check()
    out_t = DTYPES[cfg.out_dtype]
    m = hir.Module("gemm_sm90", targets=["sm_90a"])
    params: list[Any] = [hir.tensormap, hir.tensormap, hir.ptr("global", out_t)]
    if cfg.bias is not None:
        params.append(hir.ptr("global", DTYPES[cfg.bias]))
    if cfg.scaled:
        params += [hir.ptr("global", hir.f32)] * 2
    params += [hir.u32, hir.u32, hir.u32]
    bm, bn, bk, stages = cfg.bm, cfg.bn, cfg.bk, cfg.stages
    su64 = hir.ptr("shared", hir.u64)
    cm = cfg.cluster_m
    cluster = (cm, 1, 1) if cm > 1 else None
    with m.kernel("gemm_sm90", params, max_threads=cfg.threads, min_blocks=1, cluster=cluster) as b:
        tmap_a, tmap_b, out = b.params[:3]
        bias = b.params[3] if cfg.bias is not None else None
        scales = b.params[-5:-3] if cfg.scaled else None
        size_m, size_n, size_k = b.params[-3:]
        smem = b.dyn_shared(hir.u8)

        def a_stage(s: hir.Value) -> hir.Value:
            return b.ptr_add(smem, s * cfg.a_bytes)

        def b_stage(s: hir.Value) -> hir.Value:
            return b.ptr_add(smem, s * cfg.b_bytes + stages * cfg.a_bytes)

        bars = b.ptr_cast(b.ptr_add(smem, stages * (cfg.a_bytes + cfg.b_bytes)), su64)

        def full(s: hir.Value) -> hir.Value:
            return b.ptr_add(bars, s)

        def empty(s: hir.Value) -> hir.Value:
            return b.ptr_add(bars, s + stages)

        tid = b.thread_idx()
        with b.if_(b.eq(tid, 0)):
            for i in range(stages):
                b.mbarrier_init(full(b.const(i, hir.u32)), 1)
                # every consumer warp of every block writing into the stage
                b.mbarrier_init(empty(b.const(i, hir.u32)), 4 * cfg.consumers * cm)
            b.fence_mbarrier_init()
        if cm > 1:
            # the peer's barriers are initialised before anything reaches them
            b.cluster_sync()
        else:
            b.barrier()

        tiles_m = (size_m + (bm - 1)) // bm
        tiles_n = (size_n + (bn - 1)) // bn
        k_blocks = (size_k + (bk - 1)) // bk
        if cm > 1:
            # the cluster walks units of cm vertically adjacent tiles
            rank = b.cluster_ctarank()
            unit_rows = (tiles_m + (cm - 1)) // cm
            first, stride = b.cluster_idx(), b.cluster_grid_dim()
        else:
            rank = None
            unit_rows = tiles_m
            first, stride = b.block_idx(), b.grid_dim()
        units = unit_rows * tiles_n  # tiles without a cluster

        def coords(unit: hir.Value) -> tuple[hir.Value, hir.Value]:
            """(tile row, tile column) of this block in unit `unit`."""
            um, tn = _tile_coords(b, unit, unit_rows, tiles_n, max(1, cfg.group_m // cm))
            return (um * cm + rank if rank is not None else um), tn

        def release(stage: hir.Value) -> None:
            """One warp's arrival on `empty[stage]` of every block of the cluster:
            relaxed, since the warp only read the stage (a cluster-scope release
            puts two MEMBAR.GPU before every arrival, which halved the speed)."""
            if cm == 1:
                b.mbarrier_arrive(empty(stage))
            else:
                for r in range(cm):
                    b.mbarrier_arrive_cluster(b.mapa(empty(stage), r), relaxed=True)

        warpgroup = tid >> 7
        producer_regs, consumer_regs = cfg.registers

        def ring_slot(it: hir.Value) -> tuple[hir.Value, hir.Value]:
            """(stage, parity of its current lap) of ring use number `it`."""
            return it % stages, (it // stages) & 1

        with b.if_else(b.eq(warpgroup, 0)) as roles:
            with roles.then:
                # Producer: one thread issues every TMA load.
                if cfg.setmaxnreg:
                    b.setmaxnreg(producer_regs, increase=False)
                with b.if_(b.eq(tid, 0)):
                    # ring uses so far, over every tile of this block
                    uses = variables(b, [b.const(0, hir.u32)], "it")[0]
                    with b.for_range(first, units, stride) as unit:
                        tm, tn = coords(unit)
                        with b.for_range(0, k_blocks, type=hir.u32) as kb:
                            it = b.use_var(uses)
                            s, parity = ring_slot(it)
                            wait_parity(b, empty(s), parity ^ 1)
                            bar = full(s)
                            b.mbarrier_arrive_expect_tx(bar, cfg.a_bytes + cfg.b_bytes)
                            k0 = b.cast(kb * bk, hir.i32)
                            row_a = b.cast(tm * bm, hir.i32)
                            b.tma_load(a_stage(s), tmap_a, [k0, row_a], bar)
                            # this block's share of B (all of it without a
                            # cluster), multicast into every block's stage
                            mask = b.const((1 << cm) - 1, hir.u16) if cm > 1 else None
                            if cfg.b_layout == "col":
                                half = cfg.b_box_rows
                                row = rank * half if rank is not None else 0
                                row_b = b.cast(tn * bn + row, hir.i32)
                                dst = b.ptr_add(b_stage(s), row * ROW_BYTES)
                                b.tma_load(dst, tmap_b, [k0, row_b], bar, multicast=mask)
                            else:
                                # N-major B: bn / 64 boxes of 64 columns x BK rows
                                share = bn // 64 // cm
                                for j in range(share):
                                    jj = rank * share + j if rank is not None else j
                                    col = b.cast(tn * bn + jj * 64, hir.i32)
                                    dst = b.ptr_add(b_stage(s), jj * (64 * ROW_BYTES))
                                    b.tma_load(dst, tmap_b, [col, k0], bar, multicast=mask)
                            b.def_var(uses, it + 1)
            with roles.else_:
                # Consumers: warpgroup c owns rows 64 (c - 1) .. of each tile.
                if cfg.setmaxnreg:
                    b.setmaxnreg(consumer_regs, increase=True)
                c = warpgroup - 1
                lt = tid & 127
                # every consumer warp hands a stage back once its own wgmma
                # wait is done (on the device one arrival per warpgroup would
                # do: a wgmma is one warpgroup-wide operation)
                lane = tid & 31
                scale = None
                if scales is not None:
                    scale = b.load(scales[0]) * b.load(scales[1])
                uses = variables(b, [b.const(0, hir.u32)], "it")[0]
                with b.for_range(first, units, stride) as unit:
                    tm, tn = coords(unit)
                    acc_var = variables(b, [b.wgmma_zero(bn)], "acc")[0]
                    with b.for_range(0, k_blocks, type=hir.u32) as kb:
                        acc, it = b.use_var(acc_var), b.use_var(uses)
                        s, parity = ring_slot(it)
                        wait_parity(b, full(s), parity)
                        a_base = b.ptr_add(a_stage(s), c * (BM_PER_CONSUMER * ROW_BYTES))
                        b_base = b_stage(s)
                        b.wgmma_fence()
                        for kk in range(ROW_BYTES // SLICE_BYTES):
                            da = b.wgmma_desc(
                                b.ptr_add(a_base, kk * SLICE_BYTES),
                                leading_byte_offset=16,
                                stride_byte_offset=SWIZZLE_ATOM,
                                swizzle="128B",
                            )
                            if cfg.b_layout == "col":
                                db = b.wgmma_desc(
                                    b.ptr_add(b_base, kk * SLICE_BYTES),
                                    leading_byte_offset=16,
                                    stride_byte_offset=SWIZZLE_ATOM,
                                    swizzle="128B",
                                )
                            else:
                                # rows kk*16.. of the 64-column boxes; LBO steps
                                # from one 64-column box to the next
                                db = b.wgmma_desc(
                                    b.ptr_add(b_base, kk * 16 * ROW_BYTES),
                                    leading_byte_offset=64 * ROW_BYTES,
                                    stride_byte_offset=SWIZZLE_ATOM,
                                    swizzle="128B",
                                )
                            acc = b.wgmma(
                                acc,
                                da,
                                db,
                                n=bn,
                                a_type=cfg.dtype,
                                trans_b=cfg.b_layout == "row",
                            )
                        b.wgmma_commit_group()
                        if cfg.overlap:
                            # the previous stage's wgmmas are done: hand it back
                            b.wgmma_wait_group(1)
                            with b.if_(b.and_(b.eq(lane, 0), b.gt(kb, 0))):
                                release((it + (stages - 1)) % stages)
                        else:
                            b.wgmma_wait_group(0)
                            with b.if_(b.eq(lane, 0)):
                                release(s)
                        b.def_var(acc_var, acc)
                        b.def_var(uses, it + 1)
                    acc, it_end = b.use_var(acc_var), b.use_var(uses)
                    if cfg.overlap:
                        b.wgmma_wait_group(0)
                        with b.if_(b.and_(b.eq(lane, 0), b.gt(k_blocks, 0))):
                            release((it_end + (stages - 1)) % stages)
                    _epilogue(b, cfg, acc, out, bias, scale, size_m, size_n, tm, tn, c, lt)
        if cm > 1:
            # no block exits while the peer may still arrive on its barriers
            b.cluster_sync()
        b.ret()
    m.verify()
    return m


def _epilogue(
    b: hir.FunctionBuilder,
    cfg: Config,
    acc: hir.Value,
    out: hir.Value,
    bias: hir.Value | None,
    scale: hir.Value | None,
    size_m: hir.Value,
    size_n: hir.Value,
    tm: hir.Value,
    tn: hir.Value,
    c: hir.Value,
    lt: hir.Value,
) -> None:
    """Bias, activation, cast and guarded stores straight from the wgmma
    accumulator: value 4j + 2h + e of thread (warp w, lane 4g + q) is row
    16w + g + 8h, column 8j + 2q + e of the consumer's 64 x bn block."""
    out_t = DTYPES[cfg.out_dtype]
    lane = lt & 31
    g, q = lane >> 2, lane & 3
    row0 = tm * cfg.bm + c * BM_PER_CONSUMER + (lt >> 5) * 16 + g
    col0 = tn * cfg.bn + q * 2
    rows = [row0, row0 + 8]
    row_ok = [b.lt(r, size_m) for r in rows]
    pair_t = hir.vec(out_t, 2)
    out2 = b.ptr_cast(out, hir.ptr("global", pair_t))
    for j in range(cfg.bn // 8):
        col = col0 + 8 * j
        col_ok = [b.lt(col, size_n), b.lt(col + 1, size_n)]
        add: list[hir.Value | float] = [0.0, 0.0]
        if bias is not None:
            for e in range(2):
                # clamp the index: columns past N read bias[N - 1] and are not stored
                at = b.min(col + e, size_n - 1)
                add[e] = b.cast(b.load(b.ptr_add(bias, at)), hir.f32)
        for h in range(2):
            vals = []
            for e in range(2):
                v = b.extract(acc, 4 * j + 2 * h + e)
                if scale is not None:
                    v = v * scale
                if bias is not None:
                    v = v + add[e]
                v = _activation(b, v, cfg.activation)
                vals.append(b.cast(v, out_t) if cfg.out_dtype != "f32" else v)
            at = rows[h] * size_n + col
            if cfg.pair_store:
                pair = _pack2(b, vals[0], vals[1], pair_t)
                with b.if_(b.and_(row_ok[h], col_ok[0])):
                    b.store(b.ptr_add(out2, at >> 1), pair)
            else:
                for e in range(2):
                    with b.if_(b.and_(row_ok[h], col_ok[e])):
                        b.store(b.ptr_add(out, at + e), vals[e])


def _pack2(b: hir.FunctionBuilder, x: hir.Value, y: hir.Value, pair_t: hir.Type) -> hir.Value:
    """`vec<T, 2>` of (x, y): both bit patterns in one integer, bitcast."""
    bits = x.type.bits or 32
    u, w = (hir.u16, hir.u32) if bits == 16 else (hir.u32, hir.u64)
    lo = b.cast(b.bitcast(x, u), w)
    hi = b.cast(b.bitcast(y, u), w)
    return b.bitcast(lo | (hi << bits), pair_t)


#: Blocks per cluster :func:`matmul_sm90` uses without a `config`: None
#: picks by size (:func:`default_config`); benches/gemm.py sets 1 or 2 to
#: time both.
CLUSTER_M: int | None = None
#: Output tiles from which the default config runs 2-block clusters; None:
#: never. The cluster variant first ran at half the 1-block speed (remote
#: releases fenced with MEMBAR.GPU, since relaxed); the fixed kernel has not
#: been timed yet (docs/kernels.md, "Hopper GEMM"), so the registry keeps
#: the measured 1-block kernel.
CLUSTER_MIN_TILES: int | None = None


def default_config(m: int, n: int) -> Config:
    """The tile configuration for an m x n output when none is given."""
    cm = CLUSTER_M
    if cm is None:
        base = Config()
        tiles_m, tiles_n = -(-m // base.bm), -(-n // base.bn)
        big = CLUSTER_MIN_TILES is not None and tiles_m * tiles_n >= CLUSTER_MIN_TILES
        cm = 2 if big and tiles_m >= 2 else 1
    return Config(cluster_m=cm)


@functools.lru_cache(maxsize=64)
def module(cfg: Config) -> hir.Module:
    """`build(cfg)`, cached."""
    return build(cfg)


def launch_shape(cfg: Config, m: int, n: int, sms: int) -> tuple[int, int, int]:
    """(grid, block, dynamic shared bytes) of a persistent launch on at most
    `sms` multiprocessors (pass a large `sms` for one block per tile); with
    clusters, whole clusters of `cfg.cluster_m` blocks, one per unit of
    `cluster_m` tile rows. The grid is the fewest blocks that take as many
    rounds of units as `sms` would: 2048 tiles on 132 SMs are 16 rounds
    either way, and 128 blocks ran them 7 % faster on the H100 (no
    part-empty last round contending for L2 and power)."""
    cm = cfg.cluster_m
    units = -(-m // (cfg.bm * cm)) * -(-n // cfg.bn)
    rounds = -(-units // max(1, sms // cm))
    return -(-units // rounds) * cm, cfg.threads, cfg.shared_bytes


# ------------------------------------------------------------------ launching

#: Names of the operand dtypes as the runtime spells them (typestr or name).
_DTYPE_NAMES = {
    "<f2": "f16",
    "<f4": "f32",
    "<V2": "bf16",
    "|u1": "u8",
    "bfloat16": "bf16",
    "float16": "f16",
}


def sm90_supports(a_dtype: str, b_dtype: str, out_dtype: str, a_layout: str, b_layout: str) -> bool:
    """Whether :func:`matmul_sm90` runs this combination natively: operands of
    one dtype ("bf16", "f16", "f32" through tf32, "e4m3"), a bf16/f16/f32
    output, A row-major; B either layout for 16-bit operands, else column-major
    (tf32 and fp8 wgmma read K-major operands only)."""
    return (
        a_dtype == b_dtype
        and a_dtype in ("bf16", "f16", "f32", "e4m3")
        and out_dtype in OUT_DTYPES
        and a_layout == "row"
        and (b_layout == "col" or (b_layout == "row" and a_dtype in ("bf16", "f16")))
    )


def _dtype_name(arr: Any) -> str:
    for key in (getattr(arr, "typestr", None), str(getattr(arr, "dtype", ""))):
        if key in _DTYPE_NAMES:
            return _DTYPE_NAMES[key]
    raise _argument_error(f"unsupported dtype {getattr(arr, 'dtype', '?')}")


def _given_dtype(obj: Any) -> str | None:
    """The zyntax dtype name an operand object states as a ``dtype`` string
    (``zyntax.kernels.matmul`` passes e4m3 as typestr ``|u1`` with
    ``dtype="e4m3"``), else None."""
    d = getattr(obj, "dtype", None)
    return d if isinstance(d, str) and d in ("bf16", "f16", "f32", "e4m3") else None


def _argument_error(msg: str) -> Exception:
    from zyntax.errors import ArgumentError

    return ArgumentError(f"matmul_sm90: {msg}")


@functools.lru_cache(maxsize=64)
def _kernel(cfg: Config, device: int) -> Any:
    from zyntax import cuda

    kern = cuda.load_hir(module(cfg), device, arch="sm_90a").kernel("gemm_sm90")
    kern.set_max_dynamic_shared(cfg.shared_bytes)
    return kern


@functools.lru_cache(maxsize=64)
def _resident_blocks(cfg: Config, device: int) -> int:
    """Blocks of `cfg` resident at once, the persistent grid: one per SM, or
    whole clusters as many as fit (an SM whose GPC has no free partner
    stays idle; a cluster beyond that would run as a second wave)."""
    from zyntax.kernels._tensors import sm_count

    sms = sm_count(device)
    if cfg.cluster_m == 1:
        return sms
    cluster = (cfg.cluster_m, 1, 1)
    fit = _kernel(cfg, device).max_active_clusters(cfg.threads, cluster, cfg.shared_bytes)
    return min(sms, int(fit) * cfg.cluster_m)


def _pad_module(dtype: str) -> hir.Module:
    """``pad(src, dst, rows, cols, src_row, src_col, dst_cols)``: dst[r, c] =
    src[r * src_row + c * src_col] for c < cols, else 0 (`dtype` elements;
    "u8" for fp8 bytes). Gives TMA a row-major copy with 16-byte aligned rows."""
    t = {**DTYPES, "u8": hir.u8}[dtype]
    m = hir.Module("gemm_sm90_pad", targets=["sm_80", "sm_90"])
    g = hir.ptr("global", t)
    with m.kernel("pad", [g, g, hir.u32, hir.u32, hir.u64, hir.u64, hir.u32], max_threads=256) as b:
        src, dst, rows, cols, src_row, src_col, dst_cols = b.params
        c = b.block_idx() * b.block_dim() + b.thread_idx()
        r = b.block_idx("y")
        with b.if_(b.and_(b.lt(c, dst_cols), b.lt(r, rows))):
            r64, c64 = b.cast(r, hir.u64), b.cast(c, hir.u64)
            to = b.ptr_add(dst, r64 * b.cast(dst_cols, hir.u64) + c64)
            with b.if_else(b.lt(c, cols)) as br:
                with br.then:
                    b.store(to, b.load(b.ptr_add(src, r64 * src_row + c64 * src_col)))
                with br.else_:
                    b.store(to, 0.0 if dtype != "u8" else 0)
        b.ret()
    m.verify()
    return m


@functools.lru_cache(maxsize=8)
def _pad_kernel(dtype: str, device: int) -> Any:
    from zyntax import cuda

    return cuda.load_hir(_pad_module(dtype), device).kernel("pad")


class _Rows:
    """A row-major (rows, cols) view of device memory for
    ``cuda.from_cuda_array_interface``."""

    def __init__(self, ptr: int, rows: int, cols: int, typestr: str) -> None:
        self.__cuda_array_interface__ = {
            "shape": (rows, cols),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": None,
            "version": 3,
        }


def _operand_map(
    arr: Any,
    rows: int,
    cols: int,
    row_stride: int,
    col_stride: int,
    box: tuple[int, int],
    dtype: str,
) -> tuple[Any, Any]:
    """(tensor map, buffer to keep alive) of `arr`'s (rows, cols) elements at
    (row_stride, col_stride), read as a row-major matrix: a view of `arr` when
    its rows are dense and 16-byte aligned (the map is cached: encoding one
    costs more host time than a 4096^3 launch), else a zero-padded copy with
    the row length rounded up to 8 elements."""
    from zyntax import cuda

    dtype = IN_TMA.get(dtype, dtype)
    dense = col_stride == 1 and (row_stride == cols or rows == 1)
    if dense and cols * arr.itemsize % 16 == 0 and arr.ptr % 16 == 0:
        return _view_map(arr.ptr, rows, cols, arr.typestr, arr.device, box, dtype), None
    per16 = 16 // arr.itemsize
    pitch = -(-cols // per16) * per16
    dst = cuda.empty((rows, pitch), arr.dtype, arr.device)
    kern = _pad_kernel(_dtype_name(arr), arr.device)
    kern.launch(
        ((pitch + 255) // 256, rows), 256, arr, dst, rows, cols, row_stride, col_stride, pitch
    )
    return cuda.TensorMap.tiled(dst, box, swizzle="128B", dtype=dtype), dst


@functools.lru_cache(maxsize=256)
def _view_map(
    ptr: int, rows: int, cols: int, typestr: str, device: int, box: tuple[int, int], dtype: str
) -> Any:
    """The tensor map of the row-major (rows, cols) matrix at `ptr` (a pure
    function of these fields, so a cached one is the same map)."""
    from zyntax import cuda

    view = cuda.from_cuda_array_interface(_Rows(ptr, rows, cols, typestr))
    return cuda.TensorMap.tiled(view, box, swizzle="128B", dtype=dtype)


def _boxes(cfg: Config) -> tuple[tuple[int, int], tuple[int, int]]:
    """TMA boxes of A and B, innermost first: a 64-element (128-byte) row by
    the tile's rows; an N-major B in 64-column boxes."""
    bk = cfg.bk
    return (bk, cfg.bm), ((bk, cfg.b_box_rows) if cfg.b_layout == "col" else (64, bk))


def tensor_maps(kind: Any, cfg: Config, a_rows: Any, b_rows: Any, dtype: str) -> tuple[Any, Any]:
    """The tensor maps of A (M x K rows) and B (N x K rows for "col", K x N
    for "row"): `kind` is ``zyntax.cuda.TensorMap`` or ``zyntax.interp.TensorMap``.
    Boxes are innermost first: a 64-element (128-byte) row by the tile's rows."""
    box_a, box_b = _boxes(cfg)
    return (
        kind.tiled(a_rows, box_a, swizzle="128B", dtype=dtype),
        kind.tiled(b_rows, box_b, swizzle="128B", dtype=dtype),
    )


def matmul_sm90(
    a: Any,
    b: Any,
    out: Any,
    *,
    bias: Any = None,
    activation: str | None = None,
    a_layout: str = "row",
    b_layout: str = "row",
    scale_a: Any = None,
    scale_b: Any = None,
    config: Config | None = None,
    sms: int | None = None,
    dtype: str | None = None,
    stream: Any = None,
) -> Callable[[int, int, int, int], None] | None:
    """``out = act(a @ b + bias)`` on `stream` (a ``zyntax.cuda.Stream``;
    None: the legacy default stream), asynchronously.

    `a` is (M, K), `b` is (K, N), `out` is (M, N) row-major, `bias` (N,) or
    None; any ``__cuda_array_interface__``/DLPack/DeviceArray objects on one
    device. `a_layout`/`b_layout` say how the operand is stored: "row" (row-
    major) or "col" (column-major, i.e. its transpose is row-major); only
    row-major A is supported (see :func:`sm90_supports`). `config` overrides
    the tile configuration (the dtypes, layout, bias and activation fields are
    filled in from the arguments); `sms` caps the persistent grid.

    f32 operands run as tf32. An operand object may state its zyntax dtype
    name as a ``dtype`` string attribute; `dtype` names both operands'
    element type (``"e4m3"`` for fp8 passed as uint8 bytes). `bias` may be
    (N,), (1, N) or (N, 1).
    `scale_a`/`scale_b` (floats or 1-element f32 device arrays, both or
    neither) multiply the product before the bias: fp8's per-tensor scales.

    Returns the launch prepared for more calls of the same shapes, strides,
    dtypes and 16-byte alignments: ``relaunch(a_ptr, b_ptr, out_ptr,
    bias_ptr)`` (the tensor maps of new addresses come from a cache), or None
    when the call needed padded operand copies or scales."""
    from zyntax import cuda

    da, db, dout = (cuda.as_device_array(x) for x in (a, b, out))
    ta = dtype or _given_dtype(a) or _dtype_name(da)
    tb = dtype or _given_dtype(b) or _dtype_name(db)
    to = _given_dtype(out) or _dtype_name(dout)
    if not sm90_supports(ta, tb, to, a_layout, b_layout):
        raise _argument_error(
            f"unsupported combination a={ta}/{a_layout}, b={tb}/{b_layout}, out={to}"
        )
    if da.ndim != 2 or db.ndim != 2 or dout.ndim != 2:
        raise _argument_error("a, b and out must be 2-D")
    (m, k), (k2, n) = da.shape, db.shape
    if k2 != k:
        raise _argument_error(f"inner dimensions differ: a is {m}x{k}, b is {k2}x{n}")
    if tuple(dout.shape) != (m, n):
        raise _argument_error(f"out must be {m}x{n}, got {tuple(dout.shape)}")
    if dout.strides != (n * dout.itemsize, dout.itemsize):
        raise _argument_error("out must be row-major and contiguous")
    if activation not in ACTIVATIONS:
        raise _argument_error(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    dbias = None
    if bias is not None:
        dbias = cuda.as_device_array(bias)
        item = dbias.itemsize
        dense = all(d == 1 or st == item for d, st in zip(dbias.shape, dbias.strides, strict=True))
        if dbias.size != n or dbias.ndim > 2 or not dense:
            raise _argument_error(f"bias must be a contiguous vector of {n} elements")
    if len({x.device for x in (da, db, dout)} | ({dbias.device} if dbias else set())) != 1:
        raise _argument_error("all tensors must be on one device")
    if (scale_a is None) != (scale_b is None):
        raise _argument_error("pass both scale_a and scale_b, or neither")
    scales = [_scale(x, dout.device) for x in (scale_a, scale_b) if x is not None]
    if m == 0 or n == 0:
        return None
    sa = [s // da.itemsize for s in da.strides]
    sb = [s // db.itemsize for s in db.strides]
    base = config or default_config(m, n)
    cfg = dataclasses.replace(
        base,
        dtype="tf32" if ta == "f32" else ta,
        out_dtype=to,
        scaled=bool(scales),
        b_layout=b_layout,
        bias=(_given_dtype(bias) or _dtype_name(dbias)) if dbias is not None else None,
        activation=activation,
        pair_store=n % 2 == 0,
    )
    kern = _kernel(cfg, dout.device)
    box_a, box_b = _boxes(cfg)
    # A as M x K rows; B as N x K rows ("col") or K x N rows ("row"). The
    # padded copies (if any) are freed stream-ordered after the launch.
    tmap_a, _pad_a = _operand_map(da, m, k, sa[0], sa[1], box_a, cfg.dtype)
    b_rows, b_cols = (n, k) if b_layout == "col" else (k, n)
    if b_layout == "col":
        tmap_b, _pad_b = _operand_map(db, n, k, sb[1], sb[0], box_b, cfg.dtype)
    else:
        tmap_b, _pad_b = _operand_map(db, k, n, sb[0], sb[1], box_b, cfg.dtype)
    grid, block, shared = launch_shape(cfg, m, n, sms or _resident_blocks(cfg, dout.device))
    launcher = kern.prepare(grid, block, shared, stream)
    launcher(tmap_a, tmap_b, dout, *([dbias] if dbias is not None else []), *scales, m, n, k)
    if _pad_a is not None or _pad_b is not None or scales:
        return None
    has_bias, device = dbias is not None, dout.device
    ta_str, tb_str, mdtype = da.typestr, db.typestr, IN_TMA.get(cfg.dtype, cfg.dtype)

    def relaunch(pa: int, pb: int, pc: int, pbias: int) -> None:
        map_a = _view_map(pa, m, k, ta_str, device, box_a, mdtype)
        map_b = _view_map(pb, b_rows, b_cols, tb_str, device, box_b, mdtype)
        launcher(map_a, map_b, pc, *((pbias,) if has_bias else ()), m, n, k)

    return relaunch


def _scale(x: Any, device: int) -> Any:
    """A per-tensor scale as a 1-element f32 device array."""
    from zyntax import cuda

    if isinstance(x, int | float):
        return cuda.to_device(np.array([x], np.float32), device)
    arr = cuda.as_device_array(x)
    if arr.size != 1 or _dtype_name(arr) != "f32":
        raise _argument_error("a scale must be a float or a 1-element f32 device array")
    return arr
