"""Attention forward for sm_90a, FlashAttention-3 style: TMA, an mbarrier
ring and warpgroup MMA (``wgmma``) with warp specialisation. Same contract as
``attention()`` (bf16/f16, head dims 64, 96, 128 and 256, any lengths,
grouped-query heads, causal and window masks aligned bottom-right, optional
LSE); chosen by ``attention()`` on sm_90 devices.

A block of a producer and two (or, `Loop.consumers`, three) consumer warpgroups
owns 64 query rows per consumer of one (batch, head):

* warpgroup 0 is the producer (``setmaxnreg.dec`` to 24 registers, 32 with
  three consumers): one thread loads the Q tile once by TMA, then streams K
  and V tiles of BN = 128 keys through a ring of `Loop.stages` shared-memory slots.
  Each slot has "K full" and "V full" mbarriers (completed by the TMA
  bytes), so Q·Kᵀ can start before V lands, and "K empty" and "V empty"
  ones (every consumer thread arrives when done with the tile).
* warpgroups 1, 2 (, 3) are consumers (``setmaxnreg.inc`` to 240; 160 with
  three) of 64 query rows each: S = Q·Kᵀ is one ``wgmma`` chain (m64n128,
  A = Q and B = K by 128B-swizzled descriptors, both K-major); the online
  softmax runs in the exp2 domain (``ex2.approx.ftz``) with ``scale·log2 e``
  folded into one FMA per score; P is packed to the input type in registers
  (``cvt.rn.bf16x2``) and feeds O += P·V as wgmma's register A operand (the
  accumulator layout of S is the A-fragment layout of P), with
  V by an MN-major descriptor (``trans_b``).

TMA boxes are 64 elements (128 bytes, the 128B swizzle span) wide, so a
head dim of 128 is two boxes side by side; rows past the sequence end are
filled with zeros by the TMA unit (their scores are masked). Masking is
applied only in tiles that cross the sequence end or the band of the
warpgroup's rows (a warpgroup-uniform branch); key tiles no row of the block
sees are not loaded. A row whose keys are all masked gives 0 and an LSE of
-inf. Query head h reads KV head h // (H / Hk) (TMA coordinates: no copy).
Head dim 96 runs on tiles of 128 (tile_dim), 256 on 64-key tiles (kv_rows).

The persistent form (`Loop.persistent`) launches one block per SM. The
producer thread takes tiles from a global counter (``atomicAdd``; the last
block to stop zeroes it for the next launch on that stream), writes each
tile's index and coordinates next to its Q slot and completes the slot's
barrier; an index past the end tells the consumers to stop. Between two
tiles a consumer issues the next tile's S_0 before the last P V of the
current one and runs S_0's softmax while that P V is in flight, then writes
the finished tile.

`Loop` holds the consumer-loop forms (FA3's overlap and ping-pong, FA4's
lazy rescale, three consumers, ring depth, the split softmax, persistent);
LOOPS names them and DEFAULT_LOOP picks one per head dim and causal from the
measurements in docs/performance.md, "Attention, sm_90a path".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from zyntax import cuda, hir, interp
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import (
    LN2,
    NEG_INF,
    assign,
    cvt_pair,
    read,
    safe_max,
    tree,
    variables,
    wgmma_a_fragments,
)
from ._sync import wait_parity
from .gemm import _workspace

BN = 128  # keys per tile (head dims up to 128; kv_rows)
BOX = 64  # elements per TMA box row: 128 bytes, the 128B swizzle span
KV_BOX_BYTES = BN * 128  # one K/V box: BN rows of 128 bytes
#: Sequences the kernel takes: below 2^29, so positions plus clamped mask
#: bounds stay below 2^31 in its i32 arithmetic.
MAX_SEQ = 1 << 29
#: Persistent: u32 words per Q slot for its tile (index, batch, head,
#: batch * heads + head, first query row, key tiles, first key tile; padded).
TILE_WORDS = 8
COORDS = 6  # the coordinates of a tile (build's coords)
#: Head dims the kernel takes (96 runs on tiles of 128: tile_dim).
HEAD_DIMS = (64, 96, 128, 256)
#: Registers per thread of the producer and of each consumer warpgroup
#: (`setmaxnreg`), by the number of consumers: 64 Ki registers per SM.
REGS = {2: (24, 240), 3: (32, 160)}


def bm(consumers: int) -> int:
    """Query rows per block: 64 per consumer warpgroup."""
    return 64 * consumers


def threads(consumers: int) -> int:
    return 128 * (consumers + 1)


def q_slots(loop: Loop) -> int:
    """Q tiles in shared memory: two when persistent (the next tile's Q loads
    during this one)."""
    return 2 if loop.persistent else 1


def tile_dim(d: int) -> int:
    """The head dim of the shared tiles and the O accumulator: 96 runs as 128
    (the TMA unit fills the columns past the tensor's 96 with zeros, which
    change no score and no written output; Q K^T skips them)."""
    return 128 if d == 96 else d


def kv_rows(d: int, loop: Loop | None = None) -> int:
    """Keys per K/V tile: `loop.keys` if set, else BN, or 64 at head dim 256,
    where Q (128 x 256) and two stages of 128-key K and V tiles would take
    320 KiB of shared memory and S and O 192 accumulator registers a thread
    (FlashAttention-3 takes 80 keys there)."""
    if loop is not None and loop.keys:
        return loop.keys
    return 64 if d > 128 else BN


def shared_bytes(d: int, loop: Loop) -> int:
    """Q tiles, `stages` K and V tiles, the mbarriers, the Q slots' tiles."""
    qs, stages = q_slots(loop), loop.stages
    return (
        (qs * bm(loop.consumers) + 2 * stages * kv_rows(d, loop)) * tile_dim(d) * 2
        + 8 * (2 * qs + 4 * stages + loop.consumers)
        + 4 * TILE_WORDS * qs
    )


@dataclasses.dataclass(frozen=True)
class Loop:
    """One consumer loop and block shape of the kernel.

    `overlap`: FA3's intra-warpgroup pipelining (S_j = Q K_j issued before
    O += P_{j-1} V_{j-1}); `pingpong` (with `overlap`): the consumer
    warpgroups take turns issuing GEMMs; `defer` (with `overlap`): O is
    rescaled after S_j is issued instead of after P V; `consumers`: 2 or 3
    consumer warpgroups of 64 query rows (FA3 uses 3 for head dim 64, whose
    tiles are small); `lazy`: a row's maximum is raised only when it grows by
    more than LAZY_HEADROOM, and O is rescaled only when a row of the warp
    raised it (FA4's trick); `stages`: K/V ring depth; `split` (with
    `overlap`): the softmax is written out in both arms of the masking
    branch, so the wait for P V (in the join) stays after it in ptxas's
    schedule; `persistent` (with `overlap`, two consumers): one block per SM
    takes tiles from a global counter, Q has two slots (the next tile's Q
    loads during this one) and each tile's S_0 and its softmax overlap the
    previous tile's last P V; ping-pong then uses named barriers. `narrow`
    (head dim 96 only): O += P V with wgmma N = 96, not the padded 128
    (V's MN-major operand then ends half-way into its second 64-column box).
    `keys`: keys per K/V tile (a multiple of 16; 0: kv_rows' choice)."""

    overlap: bool = False
    pingpong: bool = False
    defer: bool = False
    consumers: int = 2
    lazy: bool = False
    stages: int = 2
    persistent: bool = False
    split: bool = False
    narrow: bool = False
    keys: int = 0

    def tag(self) -> str:
        """The module-name suffix naming this loop."""
        tags = ("_ovl" if self.overlap else "") + ("_pp" if self.pingpong else "")
        tags += "_defer" if self.defer else ""
        tags += f"_wg{self.consumers}" if self.consumers != 2 else ""
        tags += "_lazy" if self.lazy else ""
        tags += f"_s{self.stages}" if self.stages != 2 else ""
        tags += "_split" if self.split else ""
        tags += "_n96" if self.narrow else ""
        tags += f"_bn{self.keys}" if self.keys else ""
        return tags + ("_persist" if self.persistent else "")


def build(
    dtype: str, head_dim: int, causal: bool, loop: Loop = Loop(), left: bool = False
) -> hir.Module:
    """The kernel for `dtype`, `head_dim` (one of HEAD_DIMS), consumer loop
    `loop`. Masks are aligned bottom-right: query row i sits at key position
    i + shift (the parameter ``shift`` = Sk - Sq). `causal`: keys after
    i + shift + right are hidden (``right`` a parameter: 0 for a causal mask,
    a window's right side); `left`: keys before i + shift - left are hidden
    too (a window's left side). Query head h reads K/V head h // group."""
    if loop.pingpong or loop.defer:
        assert loop.overlap, "pingpong and defer are forms of the overlapped loop"
    if loop.persistent:
        assert loop.overlap and loop.consumers == 2, "persistent: the overlapped loop, 2 consumers"
    overlap, pingpong, defer, lazy = loop.overlap, loop.pingpong, loop.defer, loop.lazy
    split, persistent = loop.split, loop.persistent
    consumers, STAGES = loop.consumers, loop.stages
    QS = q_slots(loop)
    elem = T.HIR_TYPE[dtype]
    d = tile_dim(head_dim)  # the tiles' and O's head dim
    BN = kv_rows(d, loop)
    KV_BOX_BYTES = BN * 128
    dn = head_dim if loop.narrow else d  # O's columns (P V's wgmma N)
    boxes = d // BOX
    BM, THREADS = bm(consumers), threads(consumers)
    PRODUCER_REGS, CONSUMER_REGS = REGS[consumers]
    q_box_bytes = BM * 128  # one Q box: BM rows of 128 bytes
    q_bytes, kv_bytes = BM * d * 2, BN * d * 2
    name = f"attention_sm90_{dtype}_d{head_dim}{'_causal' if causal else ''}"
    name += f"{'_left' if left else ''}{loop.tag()}"
    m = hir.Module(name, targets=["sm_90a"])
    params = [hir.tensormap] * 3 + [hir.ptr("global", elem), hir.ptr("global", hir.f32)]
    params += [hir.u32] * 4 + [hir.i64] * 3 + [hir.f32]
    params += [hir.u32] + [hir.i32] * 3  # group, shift, left, right
    if persistent:  # the tile counter and the count of blocks that stopped
        params.append(hir.ptr("global", hir.u32))
    su64 = hir.ptr("shared", hir.u64)
    with m.kernel("attention", params, max_threads=THREADS, min_blocks=1) as b:
        tq, tk, tv, o, lse, sq, sk, heads, tiles, ob, oh, os_, scale_log2 = b.params[:13]
        group, shift, w_left, w_right = b.params[13:17]
        sched = b.params[-1]  # persistent only
        tid = b.thread_idx()
        wg = tid >> 7
        base = b.dyn_shared(hir.u8)
        s_q = base  # QS Q tiles, then STAGES K tiles, then STAGES V tiles
        s_k = b.ptr_add(base, QS * q_bytes)
        s_v = b.ptr_add(base, QS * q_bytes + STAGES * kv_bytes)
        # mbarriers: per Q slot "Q full", per ring slot K full, V full, K
        # empty, V empty, the consumers' turns, per Q slot "Q empty"; then
        # (persistent) per Q slot its tile's index and coordinates.
        full_q = b.ptr_cast(b.ptr_add(base, QS * q_bytes + 2 * STAGES * kv_bytes), su64)
        full_k = b.ptr_add(full_q, QS)
        full_v = b.ptr_add(full_k, STAGES)
        empty_k = b.ptr_add(full_v, STAGES)
        empty_v = b.ptr_add(empty_k, STAGES)
        turns = b.ptr_add(empty_v, STAGES)  # one per consumer warpgroup
        empty_q = b.ptr_add(turns, consumers)
        tile_of = b.ptr_cast(b.ptr_add(empty_q, QS), hir.ptr("shared", hir.u32))

        def coords(tix: Any) -> tuple[Any, ...]:
            """(batch, head, batch * heads + head, first query row, key
            tiles, first key tile) of tile `tix` (None: this block's own
            tile). Tiles are head-major, the longest (causal) query blocks of
            a head first. The key tiles are those holding a key some row of
            the block sees, at least one (a block whose rows see no key
            loads one tile and masks all of it: 0 and an LSE of -inf)."""
            if tix is None:
                mb = b.grid_dim() - 1 - b.block_idx()
                bh = b.block_idx("y")
            else:
                nm = b.div(sq + (BM - 1), BM)  # query blocks per (batch, head)
                mb = nm - 1 - b.rem(tix, nm)
                bh = b.div(tix, nm)
            m0 = mb * BM
            zero_i = b.const(0, hir.i32)
            m0_i, sk_i = b.cast(m0, hir.i32), b.cast(sk, hir.i32)
            lo = b.const(0, hir.u32)
            if left:  # the first key of the block's first row, in whole tiles
                first_key = b.max(m0_i + shift - w_left, zero_i)
                lo = b.div(b.cast(first_key, hir.u32), BN)
            kv_end = sk
            if causal:  # one past the last key of the block's last row
                last = m0_i + (BM - 1) + shift + w_right
                kv_end = b.cast(b.max(b.min(last + 1, sk_i), zero_i), hir.u32)
            tiles_end = b.div(kv_end + (BN - 1), BN)
            nblocks = b.select(tiles_end > lo, tiles_end - lo, b.const(1, hir.u32))
            if left or causal:
                # A block wholly past the keys (rows before the window's
                # start): its one tile starts at a key, so TMA stays in range.
                lo = b.min(lo, b.div(sk - 1, BN))
            return b.div(bh, heads), b.rem(bh, heads), bh, m0, nblocks, lo

        with b.if_(b.eq(tid, 0)):
            for x in range(QS):
                b.mbarrier_init(b.ptr_add(full_q, x), 1)
                b.mbarrier_init(b.ptr_add(empty_q, x), 128 * consumers)
            for x in range(STAGES):
                b.mbarrier_init(b.ptr_add(full_k, x), 1)
                b.mbarrier_init(b.ptr_add(full_v, x), 1)
                b.mbarrier_init(b.ptr_add(empty_k, x), 128 * consumers)  # every consumer
                b.mbarrier_init(b.ptr_add(empty_v, x), 128 * consumers)
            for x in range(consumers):
                b.mbarrier_init(b.ptr_add(turns, x), 128)  # a warpgroup's threads
            b.fence_mbarrier_init()
        b.barrier()

        def wait(bar: hir.Value, parity: Any) -> None:
            wait_parity(b, bar, parity, 1000)

        def while_(state: list[hir.Value], step: Any) -> list[hir.Value]:
            """Runs `step(state)` -> (go on?, next state) until it says stop;
            the state it stopped with."""
            head, out = b.block(*[v.type for v in state]), b.block(*[v.type for v in state])
            b.jump(head, *state)
            b.switch_to(head)
            go, nxt = step(list(head.params))
            b.br(go, head, out, then_args=nxt, else_args=nxt)
            b.switch_to(out)
            return list(out.params)

        def slot(j: hir.Value) -> hir.Value:
            return b.rem(j, STAGES)

        def phase(j: hir.Value) -> hir.Value:
            """Parity of the phase of j's slot that tile j completes."""
            return b.div(j, STAGES) & 1

        def tile(ring: hir.Value, j: hir.Value) -> hir.Value:
            return b.ptr_add(ring, slot(j) * kv_bytes)

        def q_slot(n: hir.Value) -> tuple[hir.Value, hir.Value]:
            """(slot, parity of the phase) of the n-th Q tile of this block."""
            if QS == 1:
                return b.const(0, hir.u32), n & 1
            return n & 1, (n >> 1) & 1

        def tma(
            dst: hir.Value, tmap: hir.Value, row: Any, bar: hir.Value, box: int, bi: Any, hi: Any
        ) -> None:
            """The map's box rows from `row` of (batch bi, head hi) as `boxes`
            boxes of 64 columns (`box` bytes each), side by side."""
            for x in range(boxes):
                at = [b.const(x * BOX, hir.i32), b.cast(row, hir.i32)]
                at += [b.cast(hi, hir.i32), b.cast(bi, hir.i32)]
                b.tma_load(b.ptr_add(dst, x * box), tmap, at, bar)

        def pack(x: hir.Value, y: hir.Value) -> hir.Value:
            return cvt_pair(b, dtype, x, y)

        def quad(x: hir.Value, op: Any) -> hir.Value:
            """op over the four lanes of a quad (the threads sharing a row)."""
            x = op(x, b.shfl_xor(x, 1))
            out: hir.Value = op(x, b.shfl_xor(x, 2))
            return out

        def desc(ptr: hir.Value, lbo: int) -> hir.Value:
            return b.wgmma_desc(
                ptr, leading_byte_offset=lbo, stride_byte_offset=1024, swizzle="128B"
            )

        def moved(dsc: hir.Value, offset: Any) -> hir.Value:
            """The descriptor `dsc` with its address `offset` bytes further
            (16-byte aligned). The address field is bits 0-13 of address >> 4
            and shared addresses stay below 2^18, so adding offset >> 4 moves
            it exactly (CUTLASS's descriptor iterator): one add per wgmma
            operand instead of encoding each descriptor anew, which took a
            quarter of the loop's instructions."""
            if isinstance(offset, int):
                return dsc + (offset >> 4) if offset else dsc
            return dsc + b.cast(offset >> 4, hir.u64)

        # Consumer side. c: this consumer warpgroup; (g, t): the lane's row
        # group and column pair of the wgmma accumulator layout.
        c = wg - 1
        lane = tid & 31
        g, t = lane >> 2, lane & 3
        zero = b.const(0.0, hir.f32)
        ninf = b.const(NEG_INF, hir.f32)

        @dataclasses.dataclass
        class Tile:
            """What the consumer code of one query tile uses: its coordinates,
            the ring position of its first K/V tile (`it`), its Q slot."""

            bi: Any
            hi: Any
            bh: Any
            nblocks: Any
            it: Any
            n: Any
            m0w: Any  # this warpgroup's first query row
            rows: list[Any]  # the lane's two query rows
            q_desc: Any  # of this warpgroup's Q rows in shared memory
            k_desc: Any  # of the K ring's first slot
            v_desc: Any  # of the V ring's first slot
            lo: Any  # the key tile of its first K/V tile

        def tile_of_coords(tc: tuple[Any, ...], it: hir.Value, n: hir.Value) -> Tile:
            bi, hi, bh, m0, nblocks, lo = tc
            m0w = m0 + c * 64
            row0 = m0w + ((tid >> 5) & 3) * 16 + g
            qs = q_slot(n)[0]
            q_desc = moved(desc(s_q, 16), qs * q_bytes + c * 64 * 128)
            k_desc, v_desc = desc(s_k, 16), desc(s_v, KV_BOX_BYTES)
            rows = [row0, row0 + 8]
            return Tile(bi, hi, bh, nblocks, it, n, m0w, rows, q_desc, k_desc, v_desc, lo)

        def s_gemm(tl: Tile, j: hir.Value) -> hir.Value:
            """Issues S = Q K_j (one committed group, not waited for)."""
            r = tl.it + j  # its place in the ring
            wait(b.ptr_add(full_k, slot(r)), phase(r))
            kt = moved(tl.k_desc, slot(r) * kv_bytes)
            b.wgmma_fence()
            sacc = b.wgmma_zero(BN)
            for kk in range(head_dim // 16):  # 96: the zero columns skipped
                # k-step kk: box kk // 4, 32 bytes per step within its
                # 128-byte rows (the swizzle acts on the address).
                off = (kk % 4) * 32
                sacc = b.wgmma(
                    sacc,
                    moved(tl.q_desc, (kk // 4) * q_box_bytes + off),
                    moved(kt, (kk // 4) * KV_BOX_BYTES + off),
                    n=BN,
                    a_type=dtype,
                    scale_d=0 if kk == 0 else 1,
                )
            b.wgmma_commit_group()
            return sacc

        def pv_gemm(tl: Tile, j: hir.Value, acc: hir.Value, frags: list[hir.Value]) -> hir.Value:
            """Issues O += P V_j (one committed group, not waited for)."""
            r = tl.it + j
            wait(b.ptr_add(full_v, slot(r)), phase(r))
            vt = moved(tl.v_desc, slot(r) * kv_bytes)
            b.wgmma_fence()
            for kk in range(BN // 16):
                # V is MN-major: 16 keys (rows of 128 bytes) per step;
                # the next 64 head-dim columns are the next box (LBO).
                acc = b.wgmma(
                    acc, frags[kk], moved(vt, kk * 16 * 128), n=dn, a_type=dtype, trans_b=True
                )
            b.wgmma_commit_group()
            return acc

        def softmax(
            tl: Tile, sacc: hir.Value, j: hir.Value, m_old: list[Any], l_old: list[Any]
        ) -> tuple[list[hir.Value], list[hir.Value], list[hir.Value], list[list[hir.Value]]]:
            """(row maxima, row sums, rescale factors, P in f32 per row half) after S_j."""
            # Row half h, x = 2 * n-tile + e: key 8 n-tile + 2t + e.
            per = BN // 4
            flat = [
                b.extract(sacc, 4 * (x >> 1) + 2 * h + (x & 1))
                for h in range(2)
                for x in range(per)
            ]
            kt = tl.lo + j  # the key tile: keys kt BN ..
            tile_end = (kt + 1) * BN
            partial = tile_end > sk
            # The band of the warpgroup's rows m0w..m0w + 63 (signed: the
            # bounds may lie before key 0): the first row's last key and the
            # last row's first key.
            m0w = b.cast(tl.m0w, hir.i32)
            if causal:
                last_key = m0w + shift + w_right
                partial = b.or_(partial, b.cast(tile_end, hir.i32) > last_key + 1)
            if left:
                first_key = m0w + 63 + shift - w_left
                partial = b.or_(partial, b.cast(kt * BN, hir.i32) < first_key)

            def masked(vals: list[hir.Value]) -> list[hir.Value]:
                # Key kt BN + 2t + off is kept when off < sk - (kt BN + 2t),
                # (causal) off <= row + shift + right - (kt BN + 2t) and (left)
                # off >= row + shift - left - (kt BN + 2t): compares of
                # constants with a few values, where comparing 64 keys with sk
                # had LLVM hoist 64 key offsets out of the loop and ptxas
                # spill them.
                first = b.cast(kt * BN + 2 * t, hir.i32)
                end = b.cast(sk, hir.i32) - first
                at = [b.cast(r, hir.i32) + shift - first for r in tl.rows]
                diag = [x + w_right for x in at] if causal else []
                low = [x - w_left for x in at] if left else []
                out = []
                for n, val in enumerate(vals):
                    h, x = n // per, n % per
                    off = b.const((x >> 1) * 8 + (x & 1), hir.i32)
                    ok = b.lt(off, end)
                    if causal:
                        ok = b.and_(ok, b.le(off, diag[h]))
                    if left:
                        ok = b.and_(ok, b.ge(off, low[h]))
                    out.append(b.select(ok, val, NEG_INF))
                return out

            def stats(vals: list[hir.Value]) -> list[hir.Value]:
                """[*m_new, *l_new, *alpha, *P of row half 0, *P of row half 1]."""
                scores = [vals[h * per : (h + 1) * per] for h in range(2)]
                m_new, l_new, alpha, p = [], [], [], []
                for h in range(2):
                    mx = quad(tree(b.max, scores[h]), b.max)
                    mn = b.max(m_old[h], mx * scale_log2)
                    if lazy:
                        # Keep the old maximum unless it grew by more than
                        # LAZY_HEADROOM (P <= 2^headroom then); a first finite
                        # maximum grows by +inf, an all-masked row by NaN.
                        keep = b.le(mn - m_old[h], LAZY_HEADROOM)
                        mn = b.select(keep, m_old[h], mn)
                    base_h = safe_max(b, mn)
                    alpha.append(b.ex2_ftz_approx(m_old[h] - base_h))
                    ph = [b.ex2_ftz_approx(b.fma(x, scale_log2, -base_h)) for x in scores[h]]
                    p += ph
                    m_new.append(mn)
                    l_new.append(b.fma(l_old[h], alpha[h], tree(b.add, ph)))
                return [*m_new, *l_new, *alpha, *p]

            if split:
                # The whole softmax in each arm: the join block starts with
                # the wait for P V, which ptxas then cannot schedule above it
                # (it does within one block, and the softmax no longer
                # overlaps P V).
                sel = b.if_else(partial, results=[hir.f32] * (6 + len(flat)))
                with sel as (yes, no):
                    with yes:
                        yes.yield_(*stats(masked(flat)))
                    with no:
                        no.yield_(*stats(flat))
                out = list(sel.results)
            else:
                sel = b.if_else(partial, results=[hir.f32] * len(flat))
                with sel as (yes, no):
                    with yes:
                        yes.yield_(*masked(flat))
                    with no:
                        no.yield_(*flat)
                out = stats(list(sel.results))
            ps = out[6:]
            return out[0:2], out[2:4], out[4:6], [ps[:per], ps[per:]]

        def fragments(p: list[list[hir.Value]]) -> list[hir.Value]:
            """P's A fragments for keys 16kk..: rows (g, g + 8), as mma.sync's A.
            Packed only while no P V wgmma is in flight: writing registers a
            later wgmma reads while one is pending makes ptxas serialise
            every wgmma of the kernel (C7513)."""
            return wgmma_a_fragments(b, dtype, p, BN // 16)

        def release(ring: hir.Value, r: hir.Value) -> None:
            """This thread is done with ring position r of a K or V slot."""
            b.mbarrier_arrive(b.ptr_add(ring, slot(r)))

        def per_wg(first: Any, second: Any) -> None:
            """`first()` in the first consumer warpgroup, `second()` in the
            second (a warpgroup-uniform branch: named barrier ids are
            immediates)."""
            sel = b.if_else(b.eq(c, 0))
            with sel as (wg1, wg2):
                with wg1:
                    first()
                with wg2:
                    second()

        def my_turn(tl: Tile, k: Any) -> None:
            """Ping-pong: the consumer warpgroups take turns round-robin
            (warpgroup 1 first), so one issues its GEMMs while the others
            run their softmax. Turns are the overlapped loop's groups of
            GEMMs: S_0, then (S_j, P_{j-1} V_{j-1}), then the last P V."""
            if pingpong and persistent:
                # Named barrier 1 + c: this warpgroup's 128 threads wait for
                # the other's 128 (bar.arrive when its turn ended).
                per_wg(lambda: b.named_barrier_sync(1, 256), lambda: b.named_barrier_sync(2, 256))
            elif pingpong:
                # Consumer c's turn k waits for turn k of consumer c - 1,
                # the first's for turn k - 1 of the last (phase k - 1 of
                # its barrier: a fresh barrier passes parity 1). A tile
                # of nblocks key tiles has nblocks + 1 turns: it + n
                # turns came before this tile.
                first = b.select(b.eq(c, 0), b.const(1, hir.u32), b.const(0, hir.u32))
                wait(b.ptr_add(turns, c), (tl.it + tl.n + k + first) & 1)

        def end_turn(last: bool = False) -> None:
            """`last`: this warpgroup's last turn (persistent ping-pong: the
            second warpgroup's last arrival would have no one to meet)."""
            if pingpong and persistent:
                per_wg(
                    lambda: b.named_barrier_arrive(2, 256),
                    (lambda: None) if last else lambda: b.named_barrier_arrive(1, 256),
                )
            elif pingpong:
                nxt = b.select(b.eq(c, consumers - 1), b.const(0, hir.u32), c + 1)
                b.mbarrier_arrive(b.ptr_add(turns, nxt))

        def rescale(acc: hir.Value, alpha: list[hir.Value]) -> hir.Value:
            """O element i belongs to row half (i % 4) >> 1. With `lazy`,
            skipped (a warp-uniform branch) when no row of the warp has a
            factor other than 1."""

            def scaled() -> hir.Value:
                out = acc
                for i in range(head_dim // 2):  # 96: O's zero columns stay 0
                    out = b.insert(out, b.extract(acc, i) * alpha[(i % 4) >> 1], i)
                return out

            if not lazy:
                return scaled()
            need = b.vote_any(b.or_(b.ne(alpha[0], 1.0), b.ne(alpha[1], 1.0)))
            sel = b.if_else(need, results=[acc.type])
            with sel as (yes, no):
                with yes:
                    yes.yield_(scaled())
                with no:
                    no.yield_(acc)
            out: hir.Value = sel.results[0]
            return out

        def first_s(tl: Tile) -> list[hir.Value]:
            """S_0 of a tile, alone: its softmax state [*m, *l, *alpha, *P fragments]."""
            first = b.const(0, hir.u32)
            my_turn(tl, first)
            sacc = s_gemm(tl, first)
            end_turn()
            b.wgmma_wait_group(0)
            release(empty_k, tl.it)
            m1, l1, a1, p = softmax(tl, sacc, first, [ninf, ninf], [zero, zero])
            return [*m1, *l1, *a1, *fragments(p)]

        def key_loop(tl: Tile, state: list[hir.Value]) -> list[hir.Value]:
            """Key tiles 1.. of an overlapped tile from S_0's softmax state:
            [*m, *l, O (P_last V_last not added yet), *alpha, *P_last]."""
            # FA3's intra-warpgroup overlap: S_j = Q K_j is issued, then
            # O += P_{j-1} V_{j-1}; the softmax of S_j runs while the
            # tensor cores still work on P_{j-1} V_{j-1}. Carried: row
            # maxima, row sums, O, the rescale factors not yet applied to O
            # (deferred: FA3 scales O while S_j is computed), P's fragments.
            st = variables(b, [*state[0:4], b.wgmma_zero(dn), *state[4:]], "state")
            with b.for_range(1, tl.nblocks, type=hir.u32) as j:
                cur = read(b, st)
                m_old, l_old, acc = cur[0:2], cur[2:4], cur[4]
                a_old, frags = cur[5:7], cur[7:]
                my_turn(tl, j)
                sacc = s_gemm(tl, j)
                if defer:
                    acc = rescale(acc, a_old)
                acc = pv_gemm(tl, j - 1, acc, frags)
                end_turn()
                b.wgmma_wait_group(1)  # S_j is ready
                release(empty_k, tl.it + j)
                m_new, l_new, alpha, p = softmax(tl, sacc, j, m_old, l_old)
                b.wgmma_wait_group(0)
                release(empty_v, tl.it + j - 1)
                if not defer:
                    acc = rescale(acc, alpha)
                assign(b, st, [*m_new, *l_new, acc, *alpha, *fragments(p)])
            return read(b, st)

        def last_pv(tl: Tile, res: list[hir.Value]) -> hir.Value:
            """Issues O += P_last V_last on key_loop's result."""
            acc = rescale(res[4], res[5:7]) if defer else res[4]
            return pv_gemm(tl, tl.nblocks - 1, acc, list(res[7:]))

        def epilogue(tl: Tile, acc: hir.Value, m_fin: list[Any], l_part: list[Any]) -> None:
            """O / l in the input type and the rows' LSE (rows past the end skipped)."""
            out2 = hir.ptr("global", hir.u32)
            obase = b.ptr_add(o, b.cast(tl.bi, hir.i64) * ob + b.cast(tl.hi, hir.i64) * oh)
            for h in range(2):
                total = quad(l_part[h], b.add)
                none = b.eq(total, 0.0)
                inv = b.select(none, 0.0, b.rcp_approx(total))
                with b.if_(tl.rows[h] < sq):
                    orow = b.ptr_add(obase, b.cast(tl.rows[h], hir.i64) * os_)
                    for nt in range(head_dim // 8):
                        ox = b.extract(acc, 4 * nt + 2 * h) * inv
                        oy = b.extract(acc, 4 * nt + 2 * h + 1) * inv
                        dst = b.ptr_cast(b.ptr_add(orow, nt * 8 + 2 * t), out2)
                        b.store(dst, pack(ox, oy))
                    with b.if_(b.eq(t, 0)):
                        val = b.select(none, NEG_INF, b.fma(m_fin[h], LN2, b.log(total)))
                        at = b.cast(tl.bh, hir.i64) * b.cast(sq, hir.i64)
                        at += b.cast(tl.rows[h], hir.i64)
                        b.store(b.ptr_add(lse, at), val)

        def consume_one() -> None:
            """This block's own tile (one per block)."""
            zero_u32 = b.const(0, hir.u32)
            tl = tile_of_coords(coords(None), zero_u32, zero_u32)
            wait(full_q, 0)
            if not overlap:
                st = variables(b, [ninf, ninf, zero, zero, b.wgmma_zero(dn)], "state")
                with b.for_range(0, tl.nblocks, type=hir.u32) as j:
                    cur = read(b, st)
                    m_old, l_old, acc = cur[0:2], cur[2:4], cur[4]
                    sacc = s_gemm(tl, j)
                    b.wgmma_wait_group(0)
                    release(empty_k, j)
                    m_new, l_new, alpha, p = softmax(tl, sacc, j, m_old, l_old)
                    acc = pv_gemm(tl, j, rescale(acc, alpha), fragments(p))
                    b.wgmma_wait_group(0)
                    release(empty_v, j)
                    assign(b, st, [*m_new, *l_new, acc])
                res = read(b, st)
                epilogue(tl, res[4], res[0:2], res[2:4])
                return
            res = key_loop(tl, first_s(tl))
            my_turn(tl, tl.nblocks)
            acc = last_pv(tl, res)
            end_turn()
            b.wgmma_wait_group(0)
            release(empty_v, tl.it + tl.nblocks - 1)
            epilogue(tl, acc, res[0:2], res[2:4])

        def next_tile(n: hir.Value) -> tuple[hir.Value, tuple[hir.Value, ...]]:
            """Persistent: this block's n-th tile (index >= tiles: none left)
            and its coordinates, once the producer has filled its Q slot."""
            qs, par = q_slot(n)
            wait(b.ptr_add(full_q, qs), par)
            at = b.ptr_add(tile_of, qs * TILE_WORDS)
            words = [b.load(b.ptr_add(at, x)) for x in range(1 + COORDS)]
            return words[0], tuple(words[1:])

        def consume_stream() -> None:
            """Persistent: the tiles the producer hands out, with each tile's
            S_0 and its softmax overlapping the previous tile's last P V."""
            zero_u32 = b.const(0, hir.u32)
            tix0, tc0 = next_tile(zero_u32)
            with b.if_(tix0 < tiles):
                if pingpong:  # the first warpgroup takes the first turn
                    with b.if_(b.eq(c, 1)):
                        b.named_barrier_arrive(1, 256)
                tl0 = tile_of_coords(tc0, zero_u32, zero_u32)
                state0 = first_s(tl0)

                def step(st: list[hir.Value]) -> tuple[hir.Value, list[hir.Value]]:
                    n, it, tc = st[0], st[1], tuple(st[2 : 2 + COORDS])
                    tl = tile_of_coords(tc, it, n)
                    res = key_loop(tl, st[2 + COORDS :])
                    b.mbarrier_arrive(b.ptr_add(empty_q, q_slot(n)[0]))  # every S of it done
                    n1, it1 = n + 1, it + tl.nblocks
                    tix1, tc1 = next_tile(n1)
                    more = tix1 < tiles
                    sel = b.if_else(more, results=[v.type for v in st[2 + COORDS :]])
                    with sel as (yes, no):
                        with yes:
                            # S_0 of the next tile, then the last P V of this one.
                            nt = tile_of_coords(tc1, it1, n1)
                            first = b.const(0, hir.u32)
                            my_turn(nt, first)
                            sacc = s_gemm(nt, first)
                            acc = last_pv(tl, res)
                            end_turn()
                            b.wgmma_wait_group(1)
                            release(empty_k, it1)
                            m1, l1, a1, p = softmax(nt, sacc, first, [ninf, ninf], [zero, zero])
                            b.wgmma_wait_group(0)
                            release(empty_v, it1 - 1)
                            frags = fragments(p)  # packed first: 32 registers, not 64
                            epilogue(tl, acc, res[0:2], res[2:4])
                            yes.yield_(*m1, *l1, *a1, *frags)
                        with no:
                            my_turn(tl, tl.nblocks)
                            acc = last_pv(tl, res)
                            end_turn(last=True)
                            b.wgmma_wait_group(0)
                            release(empty_v, it1 - 1)
                            epilogue(tl, acc, res[0:2], res[2:4])
                            no.yield_(*st[2 + COORDS :])
                    return more, [n1, it1, *tc1, *sel.results]

                while_([zero_u32, zero_u32, *tc0, *state0], step)

        def produce_one() -> None:
            """This block's tile (thread 0): Q, then the K/V tiles into the ring."""
            bi, hi, _bh, m0, nblocks, lo = coords(None)
            b.mbarrier_arrive_expect_tx(full_q, q_bytes)
            tma(s_q, tq, m0, full_q, q_box_bytes, bi, hi)
            kv_loads(bi, hi, lo, b.const(0, hir.u32), nblocks, b.const(0, hir.u32))

        def kv_loads(bi: Any, hi: Any, lo: Any, first: Any, end: Any, it: hir.Value) -> None:
            """K/V tiles first..end - 1 of the query tile (bi, hi) (key tiles
            lo + first..), whose tile 0 is ring position `it`. K and V are
            those of the query head's KV head hi // group."""
            hk = b.div(hi, group)
            with b.loop(first, end, type=hir.u32) as lp:
                r = it + lp.index  # its place in the ring
                key0 = (lo + lp.index) * BN
                # A fresh barrier counts the phase before its first as
                # complete, so the first STAGES waits pass at once.
                fk, fv = b.ptr_add(full_k, slot(r)), b.ptr_add(full_v, slot(r))
                wait(b.ptr_add(empty_k, slot(r)), phase(r) ^ 1)
                b.mbarrier_arrive_expect_tx(fk, kv_bytes)
                tma(tile(s_k, r), tk, key0, fk, KV_BOX_BYTES, bi, hk)
                wait(b.ptr_add(empty_v, slot(r)), phase(r) ^ 1)
                b.mbarrier_arrive_expect_tx(fv, kv_bytes)
                tma(tile(s_v, r), tv, key0, fv, KV_BOX_BYTES, bi, hk)
                lp.next()

        def produce_stream() -> None:
            """Persistent (thread 0): takes tiles from the global counter
            `sched[0]` and hands each to the consumers with its Q (an index
            >= tiles with no Q: stop). The next tile is taken and its Q loaded
            right after this tile's first K/V, a tile ahead of its use (the
            counter's latency hides behind the wait for the next ring slot).
            The last block to stop zeroes the counters for the next launch."""
            zero_u32 = b.const(0, hir.u32)

            def take(n: hir.Value) -> hir.Value:
                """Takes a tile for this block's n-th Q slot and loads its Q."""
                tix = b.atomic_add(sched, 1)
                qs, par = q_slot(n)
                wait(b.ptr_add(empty_q, qs), par ^ 1)  # its last tile's S are done
                at = b.ptr_add(tile_of, qs * TILE_WORDS)
                b.store(at, tix)
                bar = b.ptr_add(full_q, qs)
                sel = b.if_else(tix < tiles)
                with sel as (yes, no):
                    with yes:
                        tc = coords(tix)  # once here, not in every consumer thread
                        for x, word in enumerate(tc):
                            b.store(b.ptr_add(at, 1 + x), word)
                        bi, hi, _bh, m0, _nblocks, _lo = tc
                        b.mbarrier_arrive_expect_tx(bar, q_bytes)
                        tma(b.ptr_add(s_q, qs * q_bytes), tq, m0, bar, q_box_bytes, bi, hi)
                    with no:
                        for x in range(COORDS):  # read (not used) by the consumers
                            b.store(b.ptr_add(at, 1 + x), zero_u32)
                        b.mbarrier_arrive(bar)  # the stop, with no bytes
                return tix

            def step(st: list[hir.Value]) -> tuple[hir.Value, list[hir.Value]]:
                n, it, tix = st
                bi, hi, _bh, _m0, nblocks, lo = coords(tix)
                kv_loads(bi, hi, lo, b.const(0, hir.u32), b.min(nblocks, 1), it)
                nxt = take(n + 1)
                kv_loads(bi, hi, lo, b.const(1, hir.u32), nblocks, it)
                return nxt < tiles, [n + 1, it + nblocks, nxt]

            first = take(zero_u32)
            with b.if_(first < tiles):
                while_([zero_u32, zero_u32, first], step)
            stopped = b.atomic_add(b.ptr_add(sched, 1), 1)
            with b.if_(b.eq(stopped, b.grid_dim() - 1)):
                b.store(sched, zero_u32)
                b.store(b.ptr_add(sched, 1), zero_u32)

        cond = b.if_else(b.eq(wg, 0))
        with cond as (producer, consumer):
            with producer:
                b.setmaxnreg(PRODUCER_REGS, increase=False)
                with b.if_(b.eq(tid, 0)):
                    (produce_stream if persistent else produce_one)()
            with consumer:
                b.setmaxnreg(CONSUMER_REGS, increase=True)
                (consume_stream if persistent else consume_one)()
        b.ret()
    return m


#: The consumer loops by name (``attention(..., variant="sm90_<name>")``;
#: benches/attention.py times each on Hopper, the tests run each).
LOOPS: dict[str, Loop] = {
    "plain": Loop(),
    "overlap": Loop(overlap=True),
    "pingpong": Loop(overlap=True, pingpong=True),
    "overlap_defer": Loop(overlap=True, defer=True),
    "pingpong_defer": Loop(overlap=True, pingpong=True, defer=True),
    "plain_lazy": Loop(lazy=True),
    "pingpong_defer_lazy": Loop(overlap=True, pingpong=True, defer=True, lazy=True),
    "plain_wg3": Loop(consumers=3),
    "pingpong_defer_wg3": Loop(overlap=True, pingpong=True, defer=True, consumers=3),
    "overlap_s3": Loop(overlap=True, stages=3),
    "overlap_split": Loop(overlap=True, split=True),
    "overlap_defer_split": Loop(overlap=True, defer=True, split=True),
    "pingpong_defer_split": Loop(overlap=True, pingpong=True, defer=True, split=True),
    "pingpong_defer_wg3_split": Loop(
        overlap=True, pingpong=True, defer=True, consumers=3, split=True
    ),
    "overlap_persist": Loop(overlap=True, split=True, persistent=True),
    "overlap_persist_nosplit": Loop(overlap=True, persistent=True),
    "pingpong_persist": Loop(overlap=True, pingpong=True, split=True, persistent=True),
    # Head dim 96 only (elsewhere the same as without `narrow`).
    "overlap_n96": Loop(overlap=True, narrow=True),
    "overlap_persist_n96": Loop(overlap=True, split=True, persistent=True, narrow=True),
    # Head dim 256 with FlashAttention-3's 80-key tiles (224 KiB of shared memory).
    "pingpong_defer_lazy_bn80": Loop(overlap=True, pingpong=True, defer=True, lazy=True, keys=80),
}
#: The loop `attention()` runs per (head dim, causal): the fastest on the
#: H100 (benches/attention.py; docs/performance.md, "Attention, sm_90a
#: path"). Head dim 128: the persistent overlapped loop (against SDPA's cuDNN
#: kernel, interleaved: 1.05x at 4096 tokens, 1.07x at 16k; the overlapped
#: loop per tile 0.99x and 1.03x); causal the overlapped loop per tile (1.11x;
#: the persistent loop 0.94x, not profiled yet). Head dim 64:
#: three consumer warpgroups with the deferred ping-pong (1.13x and 1.09x
#: causal; plain 1.10x and 1.08x). Three consumers spill at head dim 128
#: (160 registers).
DEFAULT_LOOP: dict[tuple[int, bool], str] = {
    (64, False): "pingpong_defer_wg3",
    (64, True): "pingpong_defer_wg3",
    (128, False): "overlap_persist",
    (128, True): "overlap",
    # Head dim 96 runs on tiles of 128 with P V at N = 96 (H200, session 10
    # B1, 2 x 16 heads x 4096 tokens: 573.8 TFLOP/s against 560.6 padded and
    # SDPA's 520.0); 256 (64-key tiles) has no room for the persistent loop's
    # second Q slot: the lazy ping-pong ran 532.3 causal at 4 x 16 x 2048,
    # the overlapped loop 512.2, plain 478.9 (SDPA 553.0).
    (96, False): "overlap_persist_n96",
    (96, True): "overlap_n96",
    # B2: the 80-key tiles 697.0 unmasked against 675.3 (SDPA 694.9); masked
    # 532.1 against 525.0, but that ping-pong spills 12 bytes.
    (256, False): "pingpong_defer_lazy_bn80",
    (256, True): "pingpong_defer_lazy",
}
#: With `lazy`: raise a row's running maximum only when it grows by more than
#: LAZY_HEADROOM (log2 units: P <= 256), skipping most rescales of O.
LAZY_HEADROOM = 8.0


def fits(d: int, loop: Loop) -> bool:
    """Whether `loop`'s shared memory fits a block (227 KiB on sm_90)."""
    return shared_bytes(d, loop) <= 227 * 1024


@functools.cache
def _module(dtype: str, d: int, causal: bool, loop: Loop, left: bool = False) -> hir.Module:
    return build(dtype, d, causal, loop, left)


@functools.cache
def _loaded(key: tuple[str, int, bool, Loop, bool], device: int) -> Any:
    return cuda.load_hir(_module(*key), device, arch="sm_90a")


def _tensor_map(t: T.Tensor, rows: int) -> Any:
    """A map of `t` (B, H, S, D) whose box is `rows` x 64 elements of one (b, h)."""
    box = [BOX, rows, 1, 1]
    if t.on_gpu:
        # From the address and geometry (cached; no stream of the tensor is
        # waited for, which would be illegal while torch captures a graph;
        # the launch is on torch's current stream anyway).
        return T.tensor_map(t, box, swizzle="128B", dtype=T.HIR_TYPE[t.dtype])
    return interp.TensorMap(t.arr, box, swizzle="128B", dtype=t.dtype)


def launch(
    tq: T.Tensor,
    tk: T.Tensor,
    tv: T.Tensor,
    o: T.Tensor,
    lse: T.Tensor,
    causal: bool,
    scale_log2: float,
    stream: Any,
    loop: str | None = None,
    window: tuple[int | None, int | None] | None = None,
) -> None:
    """Runs the kernel on checked tensors (attention() validated them: q, o
    (B, H, Sq, D), k, v (B, Hk, Sk, D), H a multiple of Hk, Sq and Sk below
    MAX_SEQ) with the consumer loop named `loop` (a key of LOOPS; None:
    DEFAULT_LOOP's). Masks are aligned bottom-right (build); `window` is
    attention()'s checked ``(left, right)`` or None."""
    bsz, heads, sq, d = tq.shape
    hk, sk = tk.shape[1], tk.shape[2]
    w_left, w_right = window if window is not None else (None, None)
    upper = causal or w_right is not None  # keys after a bound hidden
    lower = w_left is not None  # keys before a bound hidden
    # Bounds past every key are unbounded: the clamp keeps the kernel's i32
    # arithmetic (positions plus bounds) below 2^31.
    right = min(0 if causal else sq, sq if w_right is None else w_right, sq)
    left = min(sk if w_left is None else w_left, sk)
    lp = LOOPS[loop or DEFAULT_LOOP[d, upper or lower]]
    if not fits(d, lp):
        raise ArgumentError(
            f"argument 'variant': loop {loop!r} needs {shared_bytes(d, lp)}"
            f" bytes of shared memory at head dim {d}, more than a block has"
        )
    nc = lp.consumers
    kv = kv_rows(d, lp)
    maps = [_tensor_map(tq, bm(nc)), _tensor_map(tk, kv), _tensor_map(tv, kv)]
    grid = (-(-sq // bm(nc)), bsz * heads)
    tiles = grid[0] * grid[1]
    args = [*maps, o.arr, lse.arr, sq, sk, heads, tiles, *o.strides[:3], scale_log2]
    args += [heads // hk, sk - sq, left, right]
    if lp.persistent:  # one block per SM (the interpreter: 3) and the tile counters
        grid = (min(tiles, T.sm_count(tq.device) if tq.on_gpu else 3), 1)
        if tq.on_gpu:
            if stream is None and isinstance(tq.arr, int):
                stream = T._torch_stream(tq)
            args.append(_workspace(tq.device, stream, 2, "counters").ptr)
        else:
            args.append(np.zeros(2, np.uint32))
    smem = shared_bytes(d, lp)
    key = (tq.dtype, d, upper, lp, lower)
    if not tq.on_gpu:
        interp.launch(_module(*key), "attention", grid, threads(nc), *args, shared_bytes=smem)
        return
    k = _loaded(key, tq.device).kernel("attention")
    args[3:5] = [o, lse]  # as Tensors: a call plan (_plans) sees where they come from
    T.launch_loaded(k, grid, threads(nc), args, tq, stream, smem)
