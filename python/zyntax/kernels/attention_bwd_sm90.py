"""Attention backward for sm_90a, FlashAttention-3's structure: TMA, an
mbarrier ring, warpgroup MMA (``wgmma``) and warp specialisation, written
with the HIR builder the way attention_sm90.py (the forward) is. It computes
dK and dV, and adds dQ into an f32 buffer, for the contract of
``attention_backward`` (attention_bwd.py): bf16/f16, head dims 64, 96 and 128,
grouped-query heads, causal and window masks aligned bottom-right, any
lengths. attention_bwd.py's ``pre`` program (D = rowsum(dO * O), the LSE
with -inf made +inf, dQ's buffer zeroed) runs before it and ``dq_cast``
after it.

A block owns BN = 128 keys of one (batch, KV head) and walks every query
head of the group and every block of BM = 64 query rows that sees one of
its keys:

* warpgroup 0 is the producer (``setmaxnreg.dec``): one thread loads K and
  V once by TMA, then streams the Q and dO tiles of each query block, and
  its 64 LSE and D values (bulk copies), through a ring of `STAGES` slots
  ("full" completed by the bytes, "empty" by every consumer thread); a
  thread of its second warp is the dQ writer (below).
* warpgroups 1 and 2 are consumers of 64 keys each (``setmaxnreg.inc``):
  Sᵀ = K Qᵀ and dPᵀ = V dOᵀ are wgmma chains with both operands in shared
  memory (K-major, 128B swizzle, as the forward's S = Q Kᵀ); Pᵀ =
  exp2(Sᵀ·scale·log2 e - LSE·log2 e) and dSᵀ = Pᵀ∘(dPᵀ - D) stay in the
  accumulator registers, which are the A fragments of dV += Pᵀ dO and
  dK += dSᵀ Q (wgmma with A from registers, dO and Q MN-major: the
  forward's P V). dSᵀ is also written to shared memory as dS (rows =
  queries, 128B swizzle) for dQ = dS K (wgmma, K MN-major): at head dim 128
  warpgroup c computes dQ's columns 64c.. over all 128 keys (the two
  warpgroups meet at a named barrier), at 64 each warpgroup its own 64 keys'
  share of all columns. Each consumer writes its f32 dQ tile to shared
  memory and a second producer thread adds it into the global f32 buffer by
  a TMA reduction (``cp.reduce.async.bulk.tensor``; FlashAttention-3's way),
  so dQ's last bits vary between runs (the deterministic option runs the
  tile programs).

Masks are applied only in tiles that cross the diagonal / window band or the
end of the keys (a warpgroup-uniform branch). Query rows past the end
arrive as zeros from TMA and read a padded LSE and D of 0 (the scratch rows
are padded to whole query blocks), which makes every product of theirs 0.
"""

from __future__ import annotations

import functools
from typing import Any

from zyntax import cuda, hir, interp
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import LOG2E, assign, cvt_pair, read, variables, vector, wgmma_a_fragments
from ._sync import wait_parity
from .attention_sm90 import BOX, MAX_SEQ, _tensor_map, tile_dim

BN = 128  # keys per block (64 per consumer warpgroup)
BM = 64  # query rows per step (128 at head dim 64 with BM_HD64)
#: The LSE and D rows are padded to whole blocks of this many query rows.
PAD_ROWS = 128
THREADS = 384  # a producer and two consumer warpgroups
#: Head dims the kernel takes.
HEAD_DIMS = (64, 96, 128)
#: Registers per thread of the producer and of each consumer warpgroup.
REGS = (24, 240)


def dq_columns(d: int, split_keys: bool) -> int:
    """dQ columns per consumer: all of them when each consumer takes its own
    keys' share (`split_keys`, always at head dim 64), else half (head dim
    128: the consumers split the columns and read each other's dS)."""
    return d if split_keys or d == 64 else d // 2


def shared_bytes(
    d: int, stages: int, split_keys: bool = False, bm: int = BM, fuse_rows: bool = False
) -> int:
    """K, V, `stages` Q and dO tiles, two dS buffers, two dQ tiles, the rows,
    `stages` O tiles with `fuse_rows`, the barriers (`bm` query rows per step)."""
    return (
        2 * BN * d * 2
        + (3 if fuse_rows else 2) * stages * bm * d * 2
        + 2 * bm * BN * 2
        + 2 * bm * dq_columns(d, split_keys) * 4
        + 2 * stages * bm * 4
        + 8 * (1 + (3 if fuse_rows else 2) * stages + 4)
    )


def build(
    dtype: str,
    head_dim: int,
    upper: bool,
    lower: bool,
    stages: int = 2,
    split_keys: bool = False,
    late_dk: bool = False,
    pingpong: bool = False,
    longest_first: bool = False,
    kv_regs: bool = False,
    dq_swizzle: bool = False,
    uniform: bool = False,
    defer_dq: bool = False,
    bm: int = BM,
    smem_epilogue: bool = False,
    fuse_rows: bool = False,
    grouped: bool = False,
    wait_hint: int | None = 1000,
    rows_first: bool = False,
) -> hir.Module:
    """The kernel for `dtype`, head dim `head_dim` (64, 96 or 128; 96 runs
    on tiles of 128 as the forward's: the TMA unit fills the columns past
    96 with zeros, Sᵀ and dPᵀ skip them, the stores and the dQ reductions
    leave them out). `upper`: keys after i + shift + right are hidden from
    query i (causal, a window's right side); `lower`: keys before
    i + shift - left are (a window's left side); shift = Sk - Sq
    (bottom-right alignment). `stages`: the Q/dO ring's depth. `split_keys` (head dim 128):
    each consumer computes dQ over its own 64 keys for all columns (no
    barrier between the consumers, twice the reductions) instead of half the
    columns over all 128 keys. `late_dk`: dK += dSᵀ Q is issued after dQ's
    wgmma, and dQ's tile is written while it runs (else dV and dK are issued
    before the barrier and everything is waited for before dQ is written).
    `pingpong` (implies `split_keys`): the consumers take turns issuing
    their wgmmas (Sᵀ and dPᵀ; then dV, dK, dQ), FlashAttention-3's forward
    ping-pong, so that one's softmax runs under the other's products.
    `longest_first`: the grid is (batch x KV heads, key blocks), so the
    blocks of the first key blocks (the longest under a causal mask) start
    first, not those of the first (batch, head) only (grid (key blocks,
    batch x KV heads)). `kv_regs` (head dim 64): the consumer's K and V rows
    are loaded into registers once (ldmatrix, 32 registers) and Sᵀ, dPᵀ
    take them as wgmma's register A operand, which halves those products'
    shared-memory reads. `dq_swizzle`: the dQ tiles in shared memory are
    boxes of 32 f32 columns with the 128B swizzle (stores free of bank
    conflicts), else of 64 columns unswizzled. `smem_epilogue`: dK and dV
    go to global memory in whole rows through shared memory (store_dkdv),
    else straight from the accumulators. `uniform`: the K, V and
    dQ-B descriptors are re-derived every step from the warpgroup index
    broadcast by a shuffle (warp-uniform to ptxas, as CUTLASS's canonical
    warp-group index; not hoisted by LLVM), not held as ~24 loop-invariant
    register pairs: no spills at head dim 128 (60 bytes without).
    `defer_dq`: step i's dQ tile is written to shared memory in step i + 1,
    after its Sᵀ and dPᵀ are issued, so that those products run on the
    tensor cores while the tile is stored (else the tensor cores idle from
    the end of dQ's product to the next step's Sᵀ). `fuse_rows` (64 query
    rows per step): the step's D = rowsum(dO ∘ O) and LSE (-inf made +inf)
    are made here, by the producer's warps 2 and 3 (a query row each) from
    an O tile loaded with Q and dO and the caller's LSE, instead of read from
    the pre program's rows (pre then only zeroes dQ's buffer: it read O and
    dO for D, 77.6 µs of the ~840 at b4 h32 s2048 hd128). `grouped`: the
    grid is 1-d, blocks mapped to key blocks in groups of the `bh_group`
    parameter's (batch, KV head) pairs (launch's GROUP_BH). `wait_hint`: the
    mbarrier waits' suspend-time hint in ns (None: the hardware's default;
    ptxas makes a 1000 a `NANOSLEEP.SYNCS 0x3e8` in each wait loop).
    `rows_first` (64 query rows per step): the step's LSE values are read
    from shared memory before Sᵀ and dPᵀ are issued, not after (ptxas put
    those loads between the dPᵀ chain's wgmmas, where they wait behind the
    wgmmas' operand reads: 12 % of the stall samples on the multiplications
    by log2 e waiting for them, session 14 B1)."""
    assert not rows_first or bm == BM, "rows_first: 64 query rows per step"
    assert not (grouped and longest_first), "grouped: not with longest_first"
    assert not (defer_dq and (late_dk or pingpong)), "defer_dq: not with late_dk, pingpong"
    assert bm == BM or (bm == 2 * BM and head_dim == 64), "bm: 64, or 128 at head dim 64"
    assert head_dim in HEAD_DIMS
    assert not kv_regs or head_dim == 64, "kv_regs: head dim 64 (registers)"
    assert not fuse_rows or bm == BM, "fuse_rows: 64 query rows per step"
    d = tile_dim(head_dim)  # the tiles' head dim
    split_keys = split_keys or d == 64 or pingpong
    dq_cols = dq_columns(d, split_keys)
    dq_bytes = bm * dq_cols * 4  # one consumer's dQ tile
    row_bytes = bm * 4  # one step's LSE (or D) values
    # dQ's pieces: (64-row half, 64-column piece) of a consumer's tile.
    pieces = [(rh, pc) for rh in range(bm // 64) for pc in range(dq_cols // 64)]
    dq_box = 32 if dq_swizzle else 64  # columns of one TMA reduction's box
    elem = T.HIR_TYPE[dtype]
    boxes = d // BOX
    kv_bytes, q_bytes = BN * d * 2, bm * d * 2
    kv_box, q_box = BN * 128, bm * 128  # one 64-column box of a K/V, Q/dO tile
    ds_bytes = bm * BN * 2
    name = f"attention_bwd_sm90_{dtype}_d{head_dim}{'_upper' if upper else ''}"
    name += f"{'_lower' if lower else ''}_s{stages}{'_keys' if split_keys else ''}"
    name += "_latedk" if late_dk else ""
    name += "_pp" if pingpong else ""
    name += "_lpt" if longest_first else ""
    name += "_kvregs" if kv_regs else ""
    name += "_dqsw" if dq_swizzle else ""
    name += "_uni" if uniform else ""
    name += "_defer" if defer_dq else ""
    name += f"_m{bm}" if bm != BM else ""
    name += "_epi" if smem_epilogue else ""
    name += "_rows" if fuse_rows else ""
    name += "_grp" if grouped else ""
    name += f"_hint{wait_hint}" if wait_hint != 1000 else ""
    name += "_rf" if rows_first else ""
    m = hir.Module(name, targets=["sm_90a"])
    params = [hir.tensormap] * 5
    params += [hir.ptr("global", hir.f32)] * 2 + [hir.ptr("global", elem)] * 2
    params += [hir.u32] * 6 + [hir.i64] * 3 + [hir.f32] * 2 + [hir.i32] * 3 + [hir.u32]
    if fuse_rows:  # O's map; the LSE (B, H, Sq) f32 and its batch and head strides
        params += [hir.tensormap, hir.ptr("global", hir.f32), hir.i64, hir.i64]
    f32p = hir.ptr("shared", hir.f32)
    with m.kernel("attention_bwd", params, max_threads=THREADS, min_blocks=1) as b:
        tk, tv, tq, tdo, tdq, lse2, delta, dk, dv = b.params[:9]
        sq, sk, sq_pad, heads, kv_heads, group = b.params[9:15]
        sb, sh, ss, scale_log2, scale, shift, w_left, w_right, bh_group = b.params[15:24]
        # fuse_rows: O's map, the caller's LSE and its strides (else unused).
        to, lse_in, lse_sb, lse_sh = b.params[24:28] if fuse_rows else b.params[:4]
        tid = b.thread_idx()
        wg = tid >> 7
        base = b.dyn_shared(hir.u8)
        s_k = base
        s_v = b.ptr_add(base, kv_bytes)
        s_q = b.ptr_add(base, 2 * kv_bytes)
        s_do = b.ptr_add(s_q, stages * q_bytes)
        s_ds = b.ptr_add(s_do, stages * q_bytes)  # two buffers
        s_dq = b.ptr_add(s_ds, 2 * ds_bytes)  # a dQ tile per consumer
        s_rows = b.ptr_add(s_dq, 2 * dq_bytes)  # per stage: LSE, then D
        s_o = b.ptr_add(s_rows, 2 * stages * row_bytes)  # fuse_rows: O per stage
        s_end = b.ptr_add(s_o, stages * q_bytes) if fuse_rows else s_o
        bars = b.ptr_cast(s_end, hir.ptr("shared", hir.u64))
        full_kv = bars
        full = b.ptr_add(bars, 1)
        empty = b.ptr_add(full, stages)
        # fuse_rows: per stage, Q, dO and O landed (the row warps wait, then
        # complete `full`: the rows written).
        loaded = b.ptr_add(empty, stages)
        dq_full = b.ptr_add(loaded, stages if fuse_rows else 0)  # per consumer: tile written
        dq_empty = b.ptr_add(dq_full, 2)  # per consumer: its dQ tile read by TMA

        # The block's keys and the query blocks that see one of them.
        if longest_first:
            n0 = b.block_idx("y") * BN
            bhk = b.block_idx()
        else:
            n0 = b.block_idx() * BN
            bhk = b.block_idx("y")
        if grouped:
            # A 1-d grid: blocks in groups of `bh_group` (batch, KV head)
            # pairs, key block by key block within a group (GROUP_BH), so the
            # longest (causal) blocks of every group start before the short
            # ones of any; the last group may be smaller.
            nkb = b.div(sk + (BN - 1), BN)
            lin = b.block_idx()
            grp = b.div(lin, bh_group * nkb)
            within = lin - grp * bh_group * nkb
            gc = b.min(bh_group, b.div(b.grid_dim(), nkb) - grp * bh_group)
            n0 = b.div(within, gc) * BN
            bhk = grp * bh_group + b.rem(within, gc)
        bi, hk = b.div(bhk, kv_heads), b.rem(bhk, kv_heads)
        n0i, sqi, ski = b.cast(n0, hir.i32), b.cast(sq, hir.i32), b.cast(sk, hir.i32)
        zero_i = b.const(0, hir.i32)
        first = zero_i
        last = sqi - 1
        if upper:  # query i sees key j only if j <= i + shift + right
            first = b.max(n0i - shift - w_right, zero_i)
        if lower:  # ... and j >= i + shift - left
            last = b.min(n0i + (BN - 1) - shift + w_left, sqi - 1)
        qlo = b.div(b.cast(first, hir.u32), bm)
        some = b.ge(last, first)
        safe_last = b.cast(b.max(last, zero_i), hir.u32)
        nq = b.select(some, b.div(safe_last, bm) + 1 - qlo, b.const(0, hir.u32))
        total = group * nq

        def step_coords(it: Any) -> tuple[Any, Any]:
            """(query head, first query row) of step `it`: heads of the group
            in turn, the query blocks of each in order."""
            nq1 = b.max(nq, b.const(1, hir.u32))
            return hk * group + b.div(it, nq1), (qlo + b.rem(it, nq1)) * bm

        with b.if_(b.eq(tid, 0)):
            b.mbarrier_init(full_kv, 1)
            for x in range(stages):
                b.mbarrier_init(b.ptr_add(full, x), 64 if fuse_rows else 1)  # row warps
                b.mbarrier_init(b.ptr_add(empty, x), 256)  # every consumer thread
                if fuse_rows:
                    b.mbarrier_init(b.ptr_add(loaded, x), 1)
            for x in range(2):
                b.mbarrier_init(b.ptr_add(dq_full, x), 128)  # the consumer's threads
                b.mbarrier_init(b.ptr_add(dq_empty, x), 1)  # the dQ writer
            b.fence_mbarrier_init()
        b.barrier()

        def wait(bar: hir.Value, parity: Any) -> None:
            wait_parity(b, bar, parity, wait_hint)

        def tma(
            dst: hir.Value, tmap: hir.Value, row: Any, bar: hir.Value, box: int, hi: Any
        ) -> None:
            for x in range(boxes):
                at = [b.const(x * BOX, hir.i32), b.cast(row, hir.i32)]
                at += [b.cast(hi, hir.i32), b.cast(bi, hir.i32)]
                b.tma_load(b.ptr_add(dst, x * box), tmap, at, bar)

        def produce() -> None:
            b.mbarrier_arrive_expect_tx(full_kv, 2 * kv_bytes)
            tma(s_k, tk, n0, full_kv, kv_box, hk)
            tma(s_v, tv, n0, full_kv, kv_box, hk)
            with b.for_range(0, total, type=hir.u32) as it:
                st, ph = b.rem(it, stages), b.div(it, stages) & 1
                wait(b.ptr_add(empty, st), ph ^ 1)  # a fresh barrier passes parity 1
                h, m0 = step_coords(it)
                if fuse_rows:  # Q, dO, O; the row warps make the rows (make_rows)
                    bar = b.ptr_add(loaded, st)
                    b.mbarrier_arrive_expect_tx(bar, 3 * q_bytes)
                    tma(b.ptr_add(s_o, st * q_bytes), to, m0, bar, q_box, h)
                else:
                    bar = b.ptr_add(full, st)
                    b.mbarrier_arrive_expect_tx(bar, 2 * q_bytes + 2 * row_bytes)
                    row = b.cast((bi * heads + h) * sq_pad + m0, hir.i64)
                    rows = b.ptr_cast(b.ptr_add(s_rows, st * 2 * row_bytes), f32p)
                    b.bulk_copy_g2s(rows, b.ptr_add(lse2, row), row_bytes, bar)
                    b.bulk_copy_g2s(b.ptr_add(rows, bm), b.ptr_add(delta, row), row_bytes, bar)
                tma(b.ptr_add(s_q, st * q_bytes), tq, m0, bar, q_box, h)
                tma(b.ptr_add(s_do, st * q_bytes), tdo, m0, bar, q_box, h)

        def make_rows() -> None:
            """fuse_rows, the producer's warps 2 and 3: thread r makes query
            row r's LSE (the caller's; -inf, a row that sees no key, made
            +inf so that its p is 0; rows past Sq 0) and D = rowsum(dO ∘ O)
            (rows past Sq arrive as zeros: D 0) from the step's O and dO tiles
            (64-column boxes of 128-byte rows, 16-byte chunk k of row r at
            k ^ (r & 7)), and completes the stage's `full` barrier."""
            r = tid - 64
            vec8p = hir.ptr("shared", hir.vec(elem, 8))
            with b.for_range(0, total, type=hir.u32) as it:
                st, ph = b.rem(it, stages), b.div(it, stages) & 1
                h, m0 = step_coords(it)
                qrow = m0 + r
                at = b.cast(bi, hir.i64) * lse_sb + b.cast(h, hir.i64) * lse_sh
                at = at + b.cast(b.min(qrow, sq - 1), hir.i64)
                lse_v = b.load(b.ptr_add(lse_in, at))  # issued before the wait
                wait(b.ptr_add(loaded, st), ph)
                acc = b.const(0.0, hir.f32)
                for x in range(boxes):
                    for k in range(8):
                        off = x * q_box + r * 128 + ((k ^ (r & 7)) << 4)
                        off = off + st * q_bytes
                        ov = b.load(b.ptr_cast(b.ptr_add(s_o, off), vec8p))
                        dv_ = b.load(b.ptr_cast(b.ptr_add(s_do, off), vec8p))
                        for e in range(8):
                            oe = b.cast(b.extract(ov, e), hir.f32)
                            acc = b.fma(oe, b.cast(b.extract(dv_, e), hir.f32), acc)
                lse_v = b.select(b.eq(lse_v, float("-inf")), float("inf"), lse_v)
                lse_v = b.select(qrow < sq, lse_v, 0.0)
                rows = b.ptr_cast(b.ptr_add(s_rows, st * 2 * row_bytes), f32p)
                b.store(b.ptr_add(rows, r), lse_v)
                b.store(b.ptr_add(rows, bm + r), acc)
                b.mbarrier_arrive(b.ptr_add(full, st))

        def write_dq() -> None:
            """The dQ writer (a thread of the producer warpgroup): adds each
            consumer's dQ tile into the f32 buffer by a TMA reduction (rows
            past Sq clipped by the unit) and hands the tile back once read.
            Both consumers' reductions are issued before the first wait for a
            read (a consumer waited for the other's tile to be read too:
            5 % of the warps' stall samples on that wait in B1)."""
            with b.for_range(0, total, type=hir.u32) as it:
                h, m0 = step_coords(it)
                for x in range(2):
                    wait(b.ptr_add(dq_full, x), it & 1)
                    for piece in range(dq_cols // dq_box):
                        col = piece * dq_box + (0 if split_keys else x * 64)
                        at = [b.const(col, hir.i32), b.cast(m0, hir.i32)]
                        at += [b.cast(h, hir.i32), b.cast(bi, hir.i32)]
                        src = b.ptr_add(s_dq, x * dq_bytes + piece * bm * dq_box * 4)
                        b.tma_reduce("add", tdq, at, src)
                    b.bulk_commit_group()
                for x in range(2):
                    b.bulk_wait_group(1 - x, read=True)  # consumer x's group read
                    b.mbarrier_arrive(b.ptr_add(dq_empty, x))
            b.bulk_wait_group(0)  # the reductions' writes done before the block ends

        # Consumer side: c the warpgroup (keys n0 + 64c ..), w the warp in it,
        # (g, t) the lane's row group and column pair of the accumulator
        # layout (rows = keys of Sᵀ, dK, dV; queries of dQ).
        c = wg - 1
        w = (tid >> 5) & 3
        lane = tid & 31
        g, t = lane >> 2, lane & 3

        def desc(ptr: hir.Value, lbo: int) -> hir.Value:
            return b.wgmma_desc(
                ptr, leading_byte_offset=lbo, stride_byte_offset=1024, swizzle="128B"
            )

        def moved(dsc: hir.Value, offset: Any) -> hir.Value:
            """`dsc` with its address `offset` bytes further (attention_sm90's moved)."""
            if isinstance(offset, int):
                return dsc + (offset >> 4) if offset else dsc
            return dsc + b.cast(offset >> 4, hir.u64)

        def fragments(p: list[list[hir.Value]]) -> list[hir.Value]:
            """The A fragments (K = 16 queries each) of a 64 x 64 accumulator
            given per row half: the forward's P fragments."""
            return wgmma_a_fragments(b, dtype, p, bm // 16)

        def ss_chain(a: Any, bd: hir.Value, a_box: int) -> hir.Value:
            """A Bᵀ for a 64-row A (K-major; or its register fragments per
            k-step, a list) and 64 rows of B (K-major) over the head dim:
            k-step kk is box kk // 4, 32 bytes per step."""
            acc = b.wgmma_zero(bm)
            for kk in range(head_dim // 16):  # 96: the zero columns skipped
                off = (kk % 4) * 32
                a_kk = a[kk] if isinstance(a, list) else moved(a, (kk // 4) * a_box + off)
                acc = b.wgmma(
                    acc,
                    a_kk,
                    moved(bd, (kk // 4) * q_box + off),
                    n=bm,
                    a_type=dtype,
                    scale_d=0 if kk == 0 else 1,
                )
            return acc

        def a_fragments(tile: hir.Value) -> list[hir.Value]:
            """This consumer's 64 rows of a K/V tile (one 128-byte box,
            head dim 64) as wgmma A fragments per k-step, by ldmatrix.x4:
            lane l gives row 16w + (l & 7) + 8 ((l >> 3) & 1), 16-byte chunk
            2kk + (l >> 4) of the swizzled row (chunk ^ row & 7)."""
            row = c * 64 + w * 16 + (lane & 7) + ((lane >> 3) & 1) * 8
            out = []
            for kk in range(head_dim // 16):
                chunk = (kk * 2 + (lane >> 4)) ^ (row & 7)
                out.append(b.ldmatrix(b.ptr_add(tile, row * 128 + (chunk << 4)), 4))
            return out

        def per_half(acc: hir.Value) -> list[list[hir.Value]]:
            """A 64 x 64 accumulator as [row half][x], x = 2 n-tile + e:
            column 8 n-tile + 2t + e."""
            return [
                [b.extract(acc, 4 * (x >> 1) + 2 * h + (x & 1)) for x in range(bm // 4)]
                for h in range(2)
            ]

        def rs_chain(acc: hir.Value, frags: list[hir.Value], bd: hir.Value) -> hir.Value:
            """acc += A B with A from registers (K = 64 queries) and B a
            [queries, d] tile, MN-major: 16 rows of 128 bytes per k-step."""
            for kk in range(bm // 16):
                acc = b.wgmma(
                    acc, frags[kk], moved(bd, kk * 16 * 128), n=d, a_type=dtype, trans_b=True
                )
            return acc

        def row_values(rows: hir.Value, first: int) -> list[hir.Value]:
            """The lane's 16 columns' values of a step's row (LSE or D):
            column x is query 8 (x >> 1) + 2t + (x & 1), two at a time."""
            f32x2 = hir.vec(hir.f32, 2)
            out = []
            for nt in range(bm // 8):
                at = b.ptr_add(rows, first + nt * 8 + 2 * t)
                pair = b.load(b.ptr_cast(at, hir.ptr("shared", f32x2)))
                out += [b.extract(pair, 0), b.extract(pair, 1)]
            return out

        def per_wg(first: Any, second: Any) -> None:
            """`first()` in the first consumer, `second()` in the second (a
            warpgroup-uniform branch: named barrier ids are immediates)."""
            sel = b.if_else(b.eq(c, 0))
            with sel as (one, two):
                with one:
                    first()
                with two:
                    second()

        def my_turn() -> None:
            """Ping-pong: wait until the other consumer has issued its last
            group of wgmmas (named barrier 3: the first consumer's turn, 4:
            the second's; 256 threads, the other's by bar.arrive)."""
            if pingpong:
                per_wg(lambda: b.named_barrier_sync(3, 256), lambda: b.named_barrier_sync(4, 256))

        def end_turn(more: Any = None) -> None:
            """Ping-pong: the other consumer's turn; `more` false: this was
            the second consumer's last turn (nobody waits for it)."""

            def second() -> None:
                if more is None:
                    b.named_barrier_arrive(3, 256)
                else:
                    with b.if_(more):
                        b.named_barrier_arrive(3, 256)

            if pingpong:
                per_wg(lambda: b.named_barrier_arrive(4, 256), second)

        def store_dq(accs: list[list[hir.Value]], parity: Any = None, real: Any = None) -> None:
            """Writes a step's dQ pieces (64 rows x 64 columns each, in the
            order of `pieces`; scaled) into
            this consumer's tile and hands it to the writer; first waits for
            the writer to have read the last one (mbarrier phase `parity`,
            unless None: waited for already). `real` false: no step to hand
            (the store only fills the free tile, the writer is not told).
            Boxes of `bm` rows x `dq_box` f32 columns: unswizzled rows of 256
            bytes put the 8 rows of a store on the same banks (8-way
            conflicts), hence `dq_swizzle`."""
            if parity is not None:
                wait(b.ptr_add(dq_empty, c), parity)
            tile_dq = b.ptr_add(s_dq, c * dq_bytes)
            if dq_swizzle:
                # The lane's byte in a box row, 128B swizzle (16-byte chunk
                # ^= row & 7 = g): column 8 j + 2t of row r sits at chunk
                # (2 j + (t >> 1)) ^ g, i.e. at (32 j) ^ lane_at. Rows g and
                # g ^ 1 would put their 32 bytes in the same two chunks (a
                # 2-way conflict, 4 wavefronts per store in B1): odd rows
                # store column group j ^ 2 when the even ones store j.
                odd = b.eq(g & 1, 1)
                lane_at = (w * 16 + g) * 128 + (((t >> 1) ^ g) << 4) + ((t & 1) << 3)
                lane_at = lane_at ^ ((g & 1) << 6)
            f32x2 = hir.vec(hir.f32, 2)
            for (rh, pc), dq_acc in zip(pieces, accs, strict=True):
                for h_ in range(2):
                    row = rh * 64 + 8 * h_  # + w * 16 + g
                    for nt in range(8):
                        i = 4 * nt + 2 * h_
                        vals = [dq_acc[i], dq_acc[i + 1]]
                        if dq_swizzle:
                            i2 = 4 * (nt ^ 2) + 2 * h_  # the same box
                            vals = [b.select(odd, dq_acc[i2 + e], vals[e]) for e in range(2)]
                            box = pc * 2 + nt // 4
                            at = lane_at ^ (32 * (nt % 4))
                            dst = b.ptr_add(tile_dq, at + (box * bm * 32 + row * 32) * 4)
                        else:
                            at = (w * 16 + g + row) * 64 + 2 * t + nt * 8
                            dst = b.ptr_add(tile_dq, (at + pc * bm * 64) * 4)
                        dst = b.ptr_cast(dst, hir.ptr("shared", f32x2))
                        b.store(dst, vector(b, f32x2, vals))
            b.fence_proxy_async()
            if real is None:
                b.mbarrier_arrive(b.ptr_add(dq_full, c))
            else:
                with b.if_(real):
                    b.mbarrier_arrive(b.ptr_add(dq_full, c))

        def store_dkdv(dk_acc: hir.Value, dv_acc: hir.Value) -> None:
            """dK (scaled) and dV through shared memory: each consumer puts
            its 64 rows of each (bf16/f16) where K and V were, then stores
            whole rows of 16-byte chunks (keys before Sk). The accumulator's
            4-byte pairs put 8 rows per store on the same banks and half of
            each 32-byte sector: its direct global stores were 8 % of the
            warps' stall samples in B1 of session 13. Rows of `d` columns,
            chunk k of row r at chunk k ^ (r & 7) (r & 7 = g: no conflicts)."""
            pitch = d * 2
            # Both consumers' last products (dQ reads all of K) are done.
            b.named_barrier_sync(5, 256)
            u32p = hir.ptr("shared", hir.u32)
            for acc, tile, mul in ((dk_acc, s_k, scale), (dv_acc, s_v, None)):
                for h_ in range(2):
                    row = b.ptr_add(tile, (c * 64 + w * 16 + g + 8 * h_) * pitch + t * 4)
                    for nt in range(head_dim // 8):
                        i = 4 * nt + 2 * h_
                        x, y = b.extract(acc, i), b.extract(acc, i + 1)
                        if mul is not None:
                            x, y = x * mul, y * mul
                        dst = b.ptr_cast(b.ptr_add(row, (g ^ nt) << 4), u32p)
                        b.store(dst, cvt_pair(b, dtype, x, y))
            # This consumer's rows written (named barriers 6 and 7: 128 threads).
            per_wg(lambda: b.named_barrier_sync(6, 128), lambda: b.named_barrier_sync(7, 128))
            chunks = head_dim // 8  # 16-byte chunks per row
            me = w * 32 + lane  # the thread in its warpgroup
            v4 = hir.vec(hir.u32, 4)
            base = b.cast(bi, hir.i64) * sb + b.cast(hk, hir.i64) * sh
            for rep_ in range(64 * chunks // 128):
                idx = me + rep_ * 128
                r = c * 64 + b.div(idx, chunks)
                k = b.rem(idx, chunks)
                key = n0 + r
                with b.if_(key < sk):
                    at = base + b.cast(key, hir.i64) * ss + b.cast(k * 8, hir.i64)
                    off = r * pitch + ((k ^ (r & 7)) << 4)
                    for tile, out in ((s_k, dk), (s_v, dv)):
                        val = b.load(b.ptr_cast(b.ptr_add(tile, off), hir.ptr("shared", v4)))
                        dst = b.ptr_cast(b.ptr_add(out, at), hir.ptr("global", v4))
                        b.store(dst, val)

        def consume() -> None:
            wait(full_kv, 0)

            kv_frags = (a_fragments(s_k), a_fragments(s_v)) if kv_regs else None

            def key_descs(cw: Any) -> tuple[Any, Any]:
                """This warpgroup's 64 keys of K and of V as Sᵀ's and dPᵀ's A."""
                if kv_frags is not None:
                    return kv_frags
                at = cw * 64 * 128
                return moved(desc(s_k, 16), at), moved(desc(s_v, 16), at)

            k_a, v_a = key_descs(c)
            kmn_desc = desc(s_k, kv_box)  # K as dQ's MN-major B
            q_desc0, do_desc0 = desc(s_q, 16), desc(s_do, 16)
            qmn0, domn0 = desc(s_q, q_box), desc(s_do, q_box)
            ds_desc0 = desc(s_ds, 16)
            key0 = n0 + c * 64 + w * 16 + g  # the lane's first key row
            st_vars = variables(b, [b.wgmma_zero(d), b.wgmma_zero(d)], "acc")

            def carried() -> list[list[hir.Value]]:
                """The dQ pieces carried from the last step (defer_dq)."""
                vals = read(b, dq_vars)
                return [vals[32 * i : 32 * i + 32] for i in range(len(pieces))]

            zero = b.const(0.0, hir.f32)
            dq_vars = variables(b, [zero] * 32 * len(pieces), "dq") if defer_dq else []
            if pingpong:  # the first consumer takes the first turn
                with b.if_(b.and_(b.eq(c, 1), total > 0)):
                    b.named_barrier_arrive(3, 256)
            with b.for_range(0, total, type=hir.u32) as it:
                dk_acc, dv_acc = read(b, st_vars)
                st, ph = b.rem(it, stages), b.div(it, stages) & 1
                _h, m0 = step_coords(it)
                wait(b.ptr_add(full, st), ph)
                if defer_dq:
                    # The last step's dQ tile is stored below, while Sᵀ and
                    # dPᵀ run; the wait for the writer to have read the one
                    # before (told a step ago) stays out of there: a wait loop
                    # under a running wgmma makes ptxas serialise them all
                    # (C7518). In step 0 it passes (parity 1 of a fresh
                    # barrier) and the writer is not told of a tile.
                    first = b.eq(it, 0)
                    wait(b.ptr_add(dq_empty, c), b.select(first, b.const(1, hir.u32), it & 1))
                q_off = st * q_bytes
                cw = c
                if uniform:
                    # Re-derived every step from a shuffled (warp-uniform to
                    # ptxas, opaque to LLVM's hoisting) warpgroup index: the
                    # key descriptors of the k-steps are not 24 loop-invariant
                    # register pairs then.
                    cw = b.shfl_idx(wg, 0) - 1
                    k_a, v_a = key_descs(cw)
                # The rows' LSE and D (column x's query: 8 (x >> 1) + 2t + (x & 1)).
                rows = b.ptr_cast(b.ptr_add(s_rows, st * 2 * row_bytes), f32p)
                # rows_first: the LSE loaded before Sᵀ and dPᵀ are issued.
                first_lse = [x * LOG2E for x in row_values(rows, 0)] if rows_first else []
                my_turn()
                b.wgmma_fence()
                s_acc = ss_chain(k_a, moved(q_desc0, q_off), kv_box)
                b.wgmma_commit_group()
                dp_acc = ss_chain(v_a, moved(do_desc0, q_off), kv_box)
                b.wgmma_commit_group()
                end_turn()
                if defer_dq:
                    store_dq(carried(), None, b.vote_any(b.not_(first)))
                # Loaded while Sᵀ runs (their shared-memory latency was 7 % of
                # the stall samples after the wait in B1), D while dPᵀ runs;
                # with 128 query rows after the waits (32 more live registers
                # each spilled).
                early = bm == BM
                lse_l2 = first_lse
                if not lse_l2 and early:
                    lse_l2 = [x * LOG2E for x in row_values(rows, 0)]
                b.wgmma_wait_group(1)  # S is ready; P is computed while dP runs
                lse_l2 = lse_l2 or [x * LOG2E for x in row_values(rows, 0)]
                s_h = per_half(s_acc)
                p = [
                    [
                        b.ex2_ftz_approx(b.fma(s_h[h_][x], scale_log2, -lse_l2[x]))
                        for x in range(bm // 4)
                    ]
                    for h_ in range(2)
                ]
                # Masks: only where the warpgroup's 64 keys cross the key end
                # or the band of the block's 64 query rows.
                kc0 = b.cast(n0 + c * 64, hir.i32)
                m0i = b.cast(m0, hir.i32)
                partial = b.cast(n0 + c * 64 + 64, hir.i32) > ski
                if upper:
                    partial = b.or_(partial, kc0 + 63 - m0i > shift + w_right)
                if lower:
                    partial = b.or_(partial, kc0 - (m0i + bm - 1) < shift - w_left)

                def masked(vals: list[list[hir.Value]]) -> list[hir.Value]:
                    out = []
                    for h_ in range(2):
                        j = b.cast(key0 + 8 * h_, hir.i32)
                        rel = j - m0i - b.cast(2 * t, hir.i32) - shift  # key - query at offset 0
                        keep = b.lt(j, ski)
                        for x in range(bm // 4):
                            off = (x >> 1) * 8 + (x & 1)
                            ok = keep
                            if upper:  # key - query <= shift + right
                                ok = b.and_(ok, b.ge(b.const(off, hir.i32), rel - w_right))
                            if lower:  # key - query >= shift - left
                                ok = b.and_(ok, b.le(b.const(off, hir.i32), rel + w_left))
                            out.append(b.select(ok, vals[h_][x], 0.0))
                    return out

                sel = b.if_else(partial, results=[hir.f32] * (bm // 2))
                with sel as (yes, no):
                    with yes:
                        yes.yield_(*masked(p))
                    with no:
                        no.yield_(*p[0], *p[1])
                pf = list(sel.results)
                p = [pf[: bm // 4], pf[bm // 4 :]]
                dl = row_values(rows, bm) if early else []
                b.wgmma_wait_group(0)  # dP
                dp_h = per_half(dp_acc)
                dl = dl or row_values(rows, bm)
                ds = [[p[h_][x] * (dp_h[h_][x] - dl[x]) for x in range(bm // 4)] for h_ in range(2)]
                p_frags, ds_frags = fragments(p), fragments(ds)
                my_turn()
                b.wgmma_fence()
                dv_acc = rs_chain(dv_acc, p_frags, moved(domn0, q_off))
                if not late_dk:
                    dk_acc = rs_chain(dk_acc, ds_frags, moved(qmn0, q_off))
                b.wgmma_commit_group()
                # dS (rows = queries, this warpgroup's box of 64 keys) from
                # dSᵀ's A fragments by stmatrix.trans: lane 8i + r of matrix i
                # (keys 16w + 8 (i & 1).., queries 16kk + 8 (i >> 1)..) gives
                # the address of query row 16kk + 8 (i >> 1) + r, whose 8 keys
                # are 16-byte chunk 2w + (i & 1) of the swizzled row.
                buf = b.ptr_add(s_ds, (it & 1) * ds_bytes + c * (bm * 128))
                mi, r8 = lane >> 3, lane & 7
                chunk = ((w * 2 + (mi & 1)) ^ r8) << 4
                row_at = ((mi >> 1) * 8 + r8) * 128 + chunk
                for kk in range(bm // 16):
                    b.stmatrix(b.ptr_add(buf, row_at + kk * 16 * 128), ds_frags[kk], trans=True)
                b.fence_proxy_async()
                ds_desc = moved(ds_desc0, (it & 1) * ds_bytes)
                if not split_keys:
                    b.named_barrier_sync(1, 256)  # both warpgroups' dS written
                else:
                    sel2 = b.if_else(b.eq(c, 0))
                    with sel2 as (one, two):
                        with one:
                            b.named_barrier_sync(1, 128)
                        with two:
                            b.named_barrier_sync(2, 128)
                if not defer_dq:  # the tile is free once the writer read the last one
                    wait(b.ptr_add(dq_empty, c), (it & 1) ^ 1)
                if not split_keys:  # columns 64c.., all 128 keys
                    steps = BN // 16
                    kb = moved(kmn_desc, cw * kv_box)
                else:  # all columns, this warpgroup's 64 keys
                    steps = 4
                    kb = moved(kmn_desc, cw * 64 * 128)
                    ds_desc = moved(ds_desc, c * (bm * 128))
                # dQ in 64 x 64 pieces (two with split_keys at head dim 128:
                # 32 accumulator registers, not 64, which made ptxas serialise
                # the wgmmas; two row halves with bm = 128).
                dq_accs = []
                for piece, (rh, pc) in enumerate(pieces):
                    b.wgmma_fence()
                    dq_acc = b.wgmma_zero(64)
                    for s in range(steps):
                        a_off = (s // 4) * (bm * 128) + (s % 4) * 32 + rh * 64 * 128
                        dq_acc = b.wgmma(
                            dq_acc,
                            moved(ds_desc, a_off),
                            moved(kb, s * 16 * 128 + pc * kv_box),
                            n=64,
                            a_type=dtype,
                            trans_b=True,
                            scale_d=0 if s == 0 else 1,
                        )
                    b.wgmma_commit_group()
                    if late_dk and piece == 0:
                        dk_acc = rs_chain(dk_acc, ds_frags, moved(qmn0, q_off))
                        b.wgmma_commit_group()
                    if piece == 0:  # the other consumer's turn (not after the last)
                        end_turn(it + 1 < total)
                    if late_dk and piece == 0:
                        b.wgmma_wait_group(1)  # dV and dQ done; dK runs while dQ is written
                    else:
                        b.wgmma_wait_group(0)
                        if piece == 0:  # dV and dK done: the stage is free
                            b.mbarrier_arrive(b.ptr_add(empty, st))
                    # Scaled here: new registers, not the wgmma's (ptxas waits
                    # for every wgmma before a read of registers a wgmma
                    # defined once they cross the loop, C7517: defer_dq).
                    dq_accs.append([b.extract(dq_acc, i) * scale for i in range(32)])
                if defer_dq:
                    assign(b, dq_vars, [x for piece in dq_accs for x in piece])
                else:
                    store_dq(dq_accs)  # (waited for above)
                if late_dk:
                    b.wgmma_wait_group(0)
                    b.mbarrier_arrive(b.ptr_add(empty, st))
                assign(b, st_vars, [dk_acc, dv_acc])
            if defer_dq:  # the last step's dQ tile
                with b.if_(total > 0):
                    store_dq(carried(), ((total - 1) & 1) ^ 1)
            dk_acc, dv_acc = read(b, st_vars)
            if smem_epilogue:
                store_dkdv(dk_acc, dv_acc)
                return
            # dK (scaled) and dV, keys before Sk.
            for h_ in range(2):
                key = key0 + 8 * h_
                with b.if_(key < sk):
                    at = b.cast(bi, hir.i64) * sb + b.cast(hk, hir.i64) * sh
                    at += b.cast(key, hir.i64) * ss
                    for nt in range(head_dim // 8):
                        i = 4 * nt + 2 * h_
                        col = b.cast(nt * 8 + 2 * t, hir.i64)
                        out2 = hir.ptr("global", hir.u32)
                        kx = b.extract(dk_acc, i) * scale
                        ky = b.extract(dk_acc, i + 1) * scale
                        b.store(
                            b.ptr_cast(b.ptr_add(dk, at + col), out2), cvt_pair(b, dtype, kx, ky)
                        )
                        vx, vy = b.extract(dv_acc, i), b.extract(dv_acc, i + 1)
                        b.store(
                            b.ptr_cast(b.ptr_add(dv, at + col), out2), cvt_pair(b, dtype, vx, vy)
                        )

        cond = b.if_else(b.eq(wg, 0))
        with cond as (producer, consumer):
            with producer:
                b.setmaxnreg(REGS[0], increase=False)
                with b.if_(b.eq(tid, 0)):
                    produce()
                with b.if_(b.eq(tid, 32)):
                    write_dq()
                if fuse_rows:
                    with b.if_(tid >= 64):
                        make_rows()
            with consumer:
                b.setmaxnreg(REGS[1], increase=True)
                consume()
        b.ret()
    return m


@functools.cache
def _module(
    dtype: str,
    d: int,
    upper: bool,
    lower: bool,
    stages: int,
    split_keys: bool,
    late_dk: bool,
    pingpong: bool,
    longest_first: bool,
    kv_regs: bool,
    dq_swizzle: bool,
    uniform: bool,
    defer_dq: bool,
    bm: int,
    smem_epilogue: bool,
    fuse_rows: bool,
    grouped: bool,
    wait_hint: int | None,
    rows_first: bool,
) -> hir.Module:
    return build(
        dtype,
        d,
        upper,
        lower,
        stages,
        split_keys,
        late_dk,
        pingpong,
        longest_first,
        kv_regs,
        dq_swizzle,
        uniform,
        defer_dq,
        bm,
        smem_epilogue,
        fuse_rows,
        grouped,
        wait_hint,
        rows_first,
    )


@functools.cache
def _loaded(key: tuple[Any, ...], device: int) -> Any:
    return cuda.load_hir(_module(*key), device, arch="sm_90a")


#: Q/dO ring depth.
STAGES = 2
#: Key descriptors re-derived each step (build's uniform; B1 of session 13:
#: no spills, 2.0 % faster alone at b4 h32 s2048 hd128 causal).
UNIFORM = True
#: dQ tiles in 128B-swizzled boxes of 32 columns (build's dq_swizzle; B1: 5.3 %
#: faster alone, 11.8 % with UNIFORM, the whole call).
DQ_SWIZZLE = True
#: Step i's dQ tile stored during step i + 1's first products (build's
#: defer_dq; B1: 6 % slower with the two above, 15 % without).
DEFER_DQ = False
#: Head dim 128: dQ split by keys between the consumers (build's split_keys).
SPLIT_KEYS = False
#: dK issued after dQ, dQ written while it runs (build's late_dk; head dims
#: 96 and 128). Session 14 B1 (H200, whole call, grid order): 6 % faster at
#: b4 h32 s2048 hd128 causal (414.5 against 390.1 TFLOP/s) and at GQA 32/8
#: s4096 (442.3 against 417.1). (Session 12's "within 0.5 %" timed the
#: default's kernel: the plans bug.) Off: with GROUP_BH's grouped blocks
#: ptxas serialises its wgmmas (C7512) unless ROWS_FIRST is on too.
LATE_DK = False
#: The consumers take turns issuing wgmmas (build's pingpong).
PINGPONG = False
#: Key blocks as the grid's second dimension (build's longest_first).
LONGEST_FIRST = False
#: Head dim 64: K and V as wgmma's register A operand (build's kv_regs).
KV_REGS = False
#: dK and dV stored through shared memory in whole rows (build's smem_epilogue).
SMEM_EPILOGUE = True
#: Head dim 64: query rows per step (build's bm: 64 or 128; B1: 128 is 6 %
#: faster at b16 h12 s1024 causal).
BM_HD64 = 128
#: Blocks launched in groups of this many (batch, KV head) pairs, the key
#: blocks of a group in turn (0: all key blocks of one pair, then the next;
#: None: as many pairs as fill the SMs once, SMs // key blocks, at least 1).
#: With a causal mask the first key blocks walk the most query blocks; in
#: grid order the longest blocks of the last pairs start last and run
#: alone (a list-scheduling model of 132 SMs, equal steps: GQA 32/8 at 4096
#: tokens ends 28 % after an even split, 0 % with groups of 4 or 8; 7 % and
#: 2 % at b4 h32 s2048). Unlike LONGEST_FIRST (every pair's first block
#: first: 28 % slower in session 13), a group's blocks share its Q and dO
#: in L2 as the grid order's do. Session 14 B1 (H200, whole call, causal):
#: GQA 32/8 s4096 hd128 417.1 TFLOP/s in grid order, 515.5 / 502.4 / 460.5
#: in groups of 4 / 8 / 16; b4 h32 s2048 hd128 390.1, 406.1 / 413.3 / 403.6;
#: b16 h12 s1024 hd64 244.5, 247.5 / 248.5 / 251.6: the best group is the
#: one whose blocks (group x key blocks: 128 each time) fill the 132 SMs once.
GROUP_BH: int | None = None
#: The SM count GROUP_BH = None assumes on the interpreter (an H100/H200's).
INTERP_SMS = 132


#: The LSE read before Sᵀ and dPᵀ are issued (build's rows_first; 64 query
#: rows per step).
ROWS_FIRST = False
#: The mbarrier waits' suspend-time hint in ns (build's wait_hint; None: the
#: hardware's default).
WAIT_HINT: int | None = 1000
#: The LSE and D rows made in the kernel from O, dO and the caller's LSE
#: (build's fuse_rows; head dims 96 and 128, no LSE gradient): the pre
#: program only zeroes dQ's buffer then.
FUSE_ROWS = False


__all__ = ["MAX_SEQ", "build", "fuses_rows", "launch", "supports"]


def supports(d: int) -> bool:
    """Whether the kernel takes head dim `d`."""
    return d in HEAD_DIMS


def fuses_rows(d: int, dlse: bool) -> bool:
    """Whether the kernel makes the LSE and D rows itself (FUSE_ROWS) at head
    dim `d`, `dlse` whether the LSE has a gradient (then pre makes them)."""
    return FUSE_ROWS and tile_dim(d) == 128 and not dlse


def _dq_map(t: T.Tensor, swizzled: bool, bm: int) -> Any:
    """A map of the f32 dQ buffer (B, H, Sq, D) whose box is a piece of a
    consumer's dQ tile of one (b, h): `bm` rows x 32 columns with the 128B
    swizzle (`swizzled`), else `bm` x 64 unswizzled."""
    box = [32 if swizzled else 64, bm, 1, 1]
    swizzle = "128B" if swizzled else "none"
    if t.on_gpu:
        return T.tensor_map(t, box, swizzle=swizzle, dtype=hir.f32)
    return interp.TensorMap(t.arr, box, swizzle=swizzle, dtype="f32")


def launch(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    tdo: T.Tensor,
    lse2: T.Tensor,
    delta: T.Tensor,
    dq32: T.Tensor,
    dk: T.Tensor,
    dv: T.Tensor,
    *,
    causal: bool,
    scale: float,
    window: tuple[int | None, int | None] | None,
    stream: Any,
    rows_from: tuple[T.Tensor, T.Tensor] | None = None,
) -> None:
    """Runs the kernel on checked tensors (attention_backward validated
    them): q, do (B, H, Sq, D); k, v, dk, dv (B, Hk, Sk, D) with dk and dv
    alike; lse2, delta (B, H, Sq padded to a multiple of PAD_ROWS) f32 from the
    pre program; dq32 (B, H, Sq, D) f32, contiguous and zeroed, where dQ
    (scaled) is added. `rows_from` (o, lse) when :func:`fuses_rows`: the
    kernel makes the rows from them (lse2 and delta unread)."""
    bsz, heads, sq, d = tq.shape
    hk, sk = tk.shape[1], tk.shape[2]
    sq_pad = lse2.shape[2]
    bm = BM_HD64 if d == 64 else BM
    assert sq_pad % bm == 0 and delta.shape == lse2.shape and T.contiguous(lse2)
    assert T.contiguous(dq32) and T.contiguous(delta) and dk.strides == dv.strides
    w_left, w_right = window if window is not None else (None, None)
    upper = causal or w_right is not None
    lower = w_left is not None
    # Bounds past every key or query are unbounded: clamped to keep the
    # kernel's i32 arithmetic (positions plus bounds) below 2^31.
    right = min(0 if causal else sq, sq if w_right is None else w_right, sq)
    left = min(sk if w_left is None else w_left, sk)
    maps = [_tensor_map(tk, BN), _tensor_map(tv, BN), _tensor_map(tq, bm), _tensor_map(tdo, bm)]
    maps.append(_dq_map(dq32, DQ_SWIZZLE, bm))
    args: list[Any] = [*maps, lse2, delta, dk, dv, sq, sk, sq_pad, heads, hk, heads // hk]
    args += [*dk.strides[:3], float(scale) * LOG2E, float(scale), sk - sq, left, right]
    grid = (-(-sk // BN), bsz * hk)
    longest = LONGEST_FIRST and grid[0] < 1 << 16  # the grid's y extent
    group_bh = GROUP_BH
    if group_bh is None:
        sms = T.sm_count(tq.device) if tq.on_gpu else INTERP_SMS
        group_bh = max(1, sms // grid[0])
    # (a 1-d grid: x extents below 2^31)
    group_bh = 0 if longest or grid[0] * grid[1] >= 1 << 31 else min(group_bh, grid[1])
    args.append(group_bh)
    if rows_from is not None:
        to, tlse = rows_from
        args += [_tensor_map(to, bm), tlse, *tlse.strides[:2]]
    if longest:
        grid = (grid[1], grid[0])
    elif group_bh:  # one dimension: the kernel maps blocks to groups (build)
        grid = (grid[0] * grid[1], 1)
    split = SPLIT_KEYS or d == 64 or PINGPONG
    key = (
        tq.dtype,
        d,
        upper,
        lower,
        STAGES,
        split,
        LATE_DK and tile_dim(d) == 128 and not DEFER_DQ,
        PINGPONG,
        longest,
        KV_REGS and d == 64,
        DQ_SWIZZLE,
        UNIFORM,
        DEFER_DQ,
        bm,
        SMEM_EPILOGUE,
        rows_from is not None,
        group_bh > 0,
        WAIT_HINT,
        ROWS_FIRST and bm == BM,
    )
    d = tile_dim(d)
    smem = shared_bytes(d, STAGES, key[5], bm, rows_from is not None)
    if smem > 227 * 1024:  # a form set by hand (STAGES, SPLIT_KEYS, PINGPONG) too large
        raise ArgumentError(
            f"argument 'q': the sm_90a backward's form needs {smem} bytes of shared memory "
            f"at head dim {d}, more than a block has"
        )
    if not tq.on_gpu:
        flat = [a.arr if isinstance(a, T.Tensor) else a for a in args]
        interp.launch(_module(*key), "attention_bwd", grid, THREADS, *flat, shared_bytes=smem)
        return
    k = _loaded(key, tq.device).kernel("attention_bwd")
    T.launch_loaded(k, grid, THREADS, args, tq, stream, smem)
