"""Attention forward for sm_90a, FlashAttention-3 style: TMA, an mbarrier
ring and warpgroup MMA (``wgmma``) with warp specialisation. Same contract as
``attention.py`` (bf16/f16, head dims 64 and 128, any lengths, causal
top-left aligned, optional LSE); chosen by ``attention()`` on sm_90 devices.

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
applied only in tiles that cross the sequence end or, when causal, the
diagonal (a warpgroup-uniform branch); key tiles wholly past the diagonal
are not loaded. A row whose keys are all masked gives 0 and an LSE of -inf.

`Loop` holds the consumer-loop forms (FA3's overlap and ping-pong, FA4's
lazy rescale, three consumers, ring depth); LOOPS names them and
DEFAULT_LOOP picks one per head dim and causal from the measurements in
docs/performance.md, "Attention, sm_90a path".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from zyntax import cuda, hir, interp
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import NEG_INF, safe_max, tree, vector
from .attention import LN2

BN = 128  # keys per tile
BOX = 64  # elements per TMA box row: 128 bytes, the 128B swizzle span
KV_BOX_BYTES = BN * 128  # one K/V box: BN rows of 128 bytes
#: Registers per thread of the producer and of each consumer warpgroup
#: (`setmaxnreg`), by the number of consumers: 64 Ki registers per SM.
REGS = {2: (24, 240), 3: (32, 160)}


def bm(consumers: int) -> int:
    """Query rows per block: 64 per consumer warpgroup."""
    return 64 * consumers


def threads(consumers: int) -> int:
    return 128 * (consumers + 1)


def shared_bytes(d: int, consumers: int = 2, stages: int = 2) -> int:
    """Q tile, `stages` K and V tiles, then the mbarriers."""
    return (bm(consumers) + 2 * stages * BN) * d * 2 + 8 * (2 + 4 * stages + consumers)


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
    raised it (FA4's trick); `stages`: K/V ring depth; `persistent`: one
    block per SM walks the tiles (grid-stride), so the producer loads the
    next tile's Q and K/V while the consumers finish the last one."""

    overlap: bool = False
    pingpong: bool = False
    defer: bool = False
    consumers: int = 2
    lazy: bool = False
    stages: int = 2
    persistent: bool = False

    def tag(self) -> str:
        """The module-name suffix naming this loop."""
        tags = ("_ovl" if self.overlap else "") + ("_pp" if self.pingpong else "")
        tags += "_defer" if self.defer else ""
        tags += f"_wg{self.consumers}" if self.consumers != 2 else ""
        tags += "_lazy" if self.lazy else ""
        tags += f"_s{self.stages}" if self.stages != 2 else ""
        return tags + ("_persist" if self.persistent else "")


def build(dtype: str, d: int, causal: bool, loop: Loop = Loop()) -> hir.Module:
    """The kernel for `dtype`, head dim `d`, `causal`, consumer loop `loop`."""
    if loop.pingpong or loop.defer:
        assert loop.overlap, "pingpong and defer are forms of the overlapped loop"
    overlap, pingpong, defer, lazy = loop.overlap, loop.pingpong, loop.defer, loop.lazy
    consumers, STAGES = loop.consumers, loop.stages
    elem = T.HIR_TYPE[dtype]
    boxes = d // BOX
    BM, THREADS = bm(consumers), threads(consumers)
    PRODUCER_REGS, CONSUMER_REGS = REGS[consumers]
    q_box_bytes = BM * 128  # one Q box: BM rows of 128 bytes
    q_bytes, kv_bytes = BM * d * 2, BN * d * 2
    name = f"attention_sm90_{dtype}_d{d}{'_causal' if causal else ''}{loop.tag()}"
    m = hir.Module(name, targets=["sm_90a"])
    params = [hir.tensormap] * 3 + [hir.ptr("global", elem), hir.ptr("global", hir.f32)]
    params += [hir.u32] * 4 + [hir.i64] * 3 + [hir.f32]
    u32x4 = hir.vec(hir.u32, 4)
    su64 = hir.ptr("shared", hir.u64)
    with m.kernel("attention", params, max_threads=THREADS, min_blocks=1) as b:
        tq, tk, tv, o, lse, sq, sk, heads, tiles, ob, oh, os_, scale_log2 = b.params
        tid = b.thread_idx()
        wg = tid >> 7
        base = b.dyn_shared(hir.u8)
        s_q = base
        s_k = b.ptr_add(base, q_bytes)  # STAGES K tiles, then STAGES V tiles
        s_v = b.ptr_add(base, q_bytes + STAGES * kv_bytes)
        # mbarriers: Q, then per slot K full, V full, K empty, V empty, then
        # the consumers' turns and (persistent) "Q empty".
        bar_q = b.ptr_cast(b.ptr_add(base, q_bytes + 2 * STAGES * kv_bytes), su64)
        full_k = b.ptr_add(bar_q, 1)
        full_v = b.ptr_add(bar_q, 1 + STAGES)
        empty_k = b.ptr_add(bar_q, 1 + 2 * STAGES)
        empty_v = b.ptr_add(bar_q, 1 + 3 * STAGES)
        turns = b.ptr_add(bar_q, 1 + 4 * STAGES)  # one per consumer warpgroup
        empty_q = b.ptr_add(turns, consumers)  # persistent: Q read by every consumer

        def coords(tix: Any) -> tuple[hir.Value, hir.Value, hir.Value, Any, hir.Value]:
            """(batch, head, batch * heads + head, first query row, key
            tiles) of tile `tix` (None: this block's own tile). Tiles are
            head-major, the longest (causal) query blocks of a head first."""
            if tix is None:
                mb = b.grid_dim() - 1 - b.block_idx()
                bh = b.block_idx("y")
            else:
                nm = b.div(sq + (BM - 1), BM)  # query blocks per (batch, head)
                mb = nm - 1 - b.rem(tix, nm)
                bh = b.div(tix, nm)
            m0 = mb * BM
            kv_end = b.min(m0 + BM, sk) if causal else sk
            return b.div(bh, heads), b.rem(bh, heads), bh, m0, b.div(kv_end + (BN - 1), BN)

        def tile_loop(body: Any) -> None:
            """`body(coords, it, n)` for each tile of this block: `it` K/V
            tiles and `n` query tiles went through the ring before it."""
            if not loop.persistent:
                zero_u32 = b.const(0, hir.u32)
                body(coords(None), zero_u32, zero_u32)
                return
            start = [b.const(0, hir.u32)] * 2
            with b.loop(b.block_idx(), tiles, b.grid_dim(), carry=start, type=hir.u32) as tl:
                tc = coords(tl.index)
                body(tc, tl.carried[0], tl.carried[1])
                tl.next(tl.carried[0] + tc[4], tl.carried[1] + 1)

        with b.if_(b.eq(tid, 0)):
            b.mbarrier_init(bar_q, 1)
            b.mbarrier_init(empty_q, 128 * consumers)
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
            spin, done = b.block(), b.block()
            b.jump(spin)
            b.switch_to(spin)
            b.br(b.mbarrier_try_wait_parity(bar, parity, 1000), done, spin)
            b.switch_to(done)

        def slot(j: hir.Value) -> hir.Value:
            return b.rem(j, STAGES)

        def phase(j: hir.Value) -> hir.Value:
            """Parity of the phase of j's slot that tile j completes."""
            return b.div(j, STAGES) & 1

        def tile(ring: hir.Value, j: hir.Value) -> hir.Value:
            return b.ptr_add(ring, slot(j) * kv_bytes)

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
            """Two f32 as the element pair of one u32 register (x in the low
            half): one `cvt.rn.{bf16x2,f16x2}.f32` instead of two and a `prmt`."""
            return b.bitcast(b.cvt_pack(f"{dtype}x2", x, y), hir.u32)

        def quad(x: hir.Value, op: Any) -> hir.Value:
            """op over the four lanes of a quad (the threads sharing a row)."""
            x = op(x, b.shfl_xor(x, 1))
            out: hir.Value = op(x, b.shfl_xor(x, 2))
            return out

        def desc(ptr: hir.Value, lbo: int) -> hir.Value:
            return b.wgmma_desc(
                ptr, leading_byte_offset=lbo, stride_byte_offset=1024, swizzle="128B"
            )

        def consume(tc: tuple[Any, ...], it: hir.Value, n: hir.Value) -> None:
            """One tile: `it` K/V tiles and `n` Q tiles went through the ring before."""
            bi, hi, bh, m0, nblocks = tc
            c = wg - 1
            lane = tid & 31
            g, t = lane >> 2, lane & 3
            m0w = m0 + c * 64  # this warpgroup's first query row
            row0 = m0w + ((tid >> 5) & 3) * 16 + g
            rows = [row0, row0 + 8]
            s_qw = b.ptr_add(s_q, c * 64 * 128)
            zero = b.const(0.0, hir.f32)
            ninf = b.const(NEG_INF, hir.f32)

            def s_gemm(j: hir.Value) -> hir.Value:
                """Issues S = Q K_j (one committed group, not waited for)."""
                r = it + j  # its place in the ring
                wait(b.ptr_add(full_k, slot(r)), phase(r))
                kt = tile(s_k, r)
                b.wgmma_fence()
                sacc = b.wgmma_zero(BN)
                for kk in range(d // 16):
                    # k-step kk: box kk // 4, 32 bytes per step within its
                    # 128-byte rows (the swizzle acts on the address).
                    off = (kk % 4) * 32
                    sacc = b.wgmma(
                        sacc,
                        desc(b.ptr_add(s_qw, (kk // 4) * q_box_bytes + off), 16),
                        desc(b.ptr_add(kt, (kk // 4) * KV_BOX_BYTES + off), 16),
                        n=BN,
                        a_type=dtype,
                        scale_d=0 if kk == 0 else 1,
                    )
                b.wgmma_commit_group()
                return sacc

            def pv_gemm(j: hir.Value, acc: hir.Value, frags: list[hir.Value]) -> hir.Value:
                """Issues O += P V_j (one committed group, not waited for)."""
                r = it + j
                wait(b.ptr_add(full_v, slot(r)), phase(r))
                vt = tile(s_v, r)
                b.wgmma_fence()
                for kk in range(BN // 16):
                    # V is MN-major: 16 keys (rows of 128 bytes) per step;
                    # the next 64 head-dim columns are the next box (LBO).
                    vd = desc(b.ptr_add(vt, kk * 16 * 128), KV_BOX_BYTES)
                    acc = b.wgmma(acc, frags[kk], vd, n=d, a_type=dtype, trans_b=True)
                b.wgmma_commit_group()
                return acc

            def softmax(
                sacc: hir.Value, j: hir.Value, m_old: list[hir.Value], l_old: list[hir.Value]
            ) -> tuple[list[hir.Value], list[hir.Value], list[hir.Value], list[list[hir.Value]]]:
                """(row maxima, row sums, rescale factors, P in f32 per row half) after S_j."""
                # Row half h, x = 2 * n-tile + e: key 8 n-tile + 2t + e.
                per = BN // 4
                flat = [
                    b.extract(sacc, 4 * (x >> 1) + 2 * h + (x & 1))
                    for h in range(2)
                    for x in range(per)
                ]
                tile_end = (j + 1) * BN
                partial = tile_end > sk
                if causal:
                    partial = b.or_(partial, tile_end > m0w + 1)
                sel = b.if_else(partial, results=[hir.f32] * len(flat))
                with sel as (yes, no):
                    with yes:
                        masked = []
                        for n, val in enumerate(flat):
                            h, x = n // per, n % per
                            key = j * BN + (x >> 1) * 8 + (x & 1) + 2 * t
                            ok = key < sk
                            if causal:
                                ok = b.and_(ok, key <= rows[h])
                            masked.append(b.select(ok, val, NEG_INF))
                        yes.yield_(*masked)
                    with no:
                        no.yield_(*flat)
                scores = [list(sel.results[h * per : (h + 1) * per]) for h in range(2)]
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
                    p.append(ph)
                    m_new.append(mn)
                    l_new.append(b.fma(l_old[h], alpha[h], tree(b.add, ph)))
                return m_new, l_new, alpha, p

            def fragments(p: list[list[hir.Value]]) -> list[hir.Value]:
                """P's A fragment for keys 16kk..: rows (g, g + 8), as mma.sync's A.
                Packed only while no P V wgmma is in flight: writing registers a
                later wgmma reads while one is pending makes ptxas serialise
                every wgmma of the kernel (C7513)."""
                return [
                    vector(
                        b,
                        u32x4,
                        [
                            pack(p[0][4 * kk], p[0][4 * kk + 1]),
                            pack(p[1][4 * kk], p[1][4 * kk + 1]),
                            pack(p[0][4 * kk + 2], p[0][4 * kk + 3]),
                            pack(p[1][4 * kk + 2], p[1][4 * kk + 3]),
                        ],
                    )
                    for kk in range(BN // 16)
                ]

            def release(ring: hir.Value, j: hir.Value) -> None:
                """This thread is done with tile j of a K or V slot."""
                b.mbarrier_arrive(b.ptr_add(ring, slot(it + j)))

            def my_turn(k: hir.Value) -> None:
                """Ping-pong: the consumer warpgroups take turns round-robin
                (warpgroup 1 first), so one issues its GEMMs while the others
                run their softmax. Turns are the overlapped loop's groups of
                GEMMs: S_0, then (S_j, P_{j-1} V_{j-1}), then the last P V."""
                if pingpong:
                    # Consumer c's turn k waits for turn k of consumer c - 1,
                    # the first's for turn k - 1 of the last (phase k - 1 of
                    # its barrier: a fresh barrier passes parity 1). A tile
                    # of nblocks key tiles has nblocks + 1 turns: it + n
                    # turns came before this tile.
                    first_wg = b.select(b.eq(c, 0), b.const(1, hir.u32), b.const(0, hir.u32))
                    wait(b.ptr_add(turns, c), (it + n + k + first_wg) & 1)

            def end_turn() -> None:
                if pingpong:
                    nxt = b.select(b.eq(c, consumers - 1), b.const(0, hir.u32), c + 1)
                    b.mbarrier_arrive(b.ptr_add(turns, nxt))

            def rescale(acc: hir.Value, alpha: list[hir.Value]) -> hir.Value:
                """O element i belongs to row half (i % 4) >> 1. With `lazy`,
                skipped (a warp-uniform branch) when no row of the warp has a
                factor other than 1."""

                def scaled() -> hir.Value:
                    out = acc
                    for i in range(d // 2):
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

            def release_q() -> None:
                """Persistent: this thread's last S of the tile is done, so
                the producer may load the next tile's Q."""
                if loop.persistent:
                    b.mbarrier_arrive(empty_q)

            wait(bar_q, n & 1)
            if not overlap:
                init = [ninf, ninf, zero, zero, b.wgmma_zero(d)]
                with b.loop(0, nblocks, carry=init, type=hir.u32) as lp:
                    j = lp.index
                    m_old, l_old, acc = lp.carried[0:2], lp.carried[2:4], lp.carried[4]
                    sacc = s_gemm(j)
                    b.wgmma_wait_group(0)
                    release(empty_k, j)
                    m_new, l_new, alpha, p = softmax(sacc, j, m_old, l_old)
                    acc = pv_gemm(j, rescale(acc, alpha), fragments(p))
                    b.wgmma_wait_group(0)
                    release(empty_v, j)
                    lp.next(*m_new, *l_new, acc)
                res = lp.results
                release_q()
                m_fin, l_part, acc = res[0:2], res[2:4], res[4]
            else:
                # FA3's intra-warpgroup overlap: S_j = Q K_j is issued, then
                # O += P_{j-1} V_{j-1}; the softmax of S_j runs while the
                # tensor cores still work on P_{j-1} V_{j-1}.
                first = b.const(0, hir.u32)
                my_turn(first)
                sacc = s_gemm(first)
                end_turn()
                b.wgmma_wait_group(0)
                release(empty_k, first)
                m1, l1, a1, p = softmax(sacc, first, [ninf, ninf], [zero, zero])
                # Carried: row maxima, row sums, O, the rescale factors not yet
                # applied to O (deferred: FA3 scales O while S_j is computed),
                # P's fragments.
                init = [*m1, *l1, b.wgmma_zero(d), *a1, *fragments(p)]
                with b.loop(1, nblocks, carry=init, type=hir.u32) as lp:
                    j = lp.index
                    m_old, l_old, acc = lp.carried[0:2], lp.carried[2:4], lp.carried[4]
                    a_old, frags = lp.carried[5:7], list(lp.carried[7:])
                    my_turn(j)
                    sacc = s_gemm(j)
                    if defer:
                        acc = rescale(acc, a_old)
                    acc = pv_gemm(j - 1, acc, frags)
                    end_turn()
                    b.wgmma_wait_group(1)  # S_j is ready
                    release(empty_k, j)
                    m_new, l_new, alpha, p = softmax(sacc, j, m_old, l_old)
                    b.wgmma_wait_group(0)
                    release(empty_v, j - 1)
                    if not defer:
                        acc = rescale(acc, alpha)
                    lp.next(*m_new, *l_new, acc, *alpha, *fragments(p))
                res = lp.results
                release_q()
                last = nblocks - 1
                my_turn(nblocks)
                acc = rescale(res[4], res[5:7]) if defer else res[4]
                acc = pv_gemm(last, acc, list(res[7:]))
                end_turn()
                b.wgmma_wait_group(0)
                release(empty_v, last)
                m_fin, l_part = res[0:2], res[2:4]
            out2 = hir.ptr("global", hir.u32)
            obase = b.ptr_add(o, b.cast(bi, hir.i64) * ob + b.cast(hi, hir.i64) * oh)
            for h in range(2):
                total = quad(l_part[h], b.add)
                none = b.eq(total, 0.0)
                inv = b.select(none, 0.0, b.div(b.const(1.0, hir.f32), total))
                with b.if_(rows[h] < sq):
                    orow = b.ptr_add(obase, b.cast(rows[h], hir.i64) * os_)
                    for nt in range(d // 8):
                        ox = b.extract(acc, 4 * nt + 2 * h) * inv
                        oy = b.extract(acc, 4 * nt + 2 * h + 1) * inv
                        dst = b.ptr_cast(b.ptr_add(orow, nt * 8 + 2 * t), out2)
                        b.store(dst, pack(ox, oy))
                    with b.if_(b.eq(t, 0)):
                        val = b.select(none, NEG_INF, b.fma(m_fin[h], LN2, b.log(total)))
                        at = b.cast(bh, hir.i64) * b.cast(sq, hir.i64) + b.cast(rows[h], hir.i64)
                        b.store(b.ptr_add(lse, at), val)

        def produce(tc: tuple[Any, ...], it: hir.Value, n: hir.Value) -> None:
            """One tile's loads (thread 0): Q, then the K/V tiles into the ring."""
            bi, hi, _bh, m0, nblocks = tc
            if loop.persistent:  # every consumer is done with the last tile's Q
                wait(empty_q, (n & 1) ^ 1)
            b.mbarrier_arrive_expect_tx(bar_q, q_bytes)
            tma(s_q, tq, m0, bar_q, q_box_bytes, bi, hi)
            with b.loop(0, nblocks, type=hir.u32) as lp:
                j = lp.index
                r = it + j  # its place in the ring
                # A fresh barrier counts the phase before its first as
                # complete, so the first STAGES waits pass at once.
                fk, fv = b.ptr_add(full_k, slot(r)), b.ptr_add(full_v, slot(r))
                wait(b.ptr_add(empty_k, slot(r)), phase(r) ^ 1)
                b.mbarrier_arrive_expect_tx(fk, kv_bytes)
                tma(tile(s_k, r), tk, j * BN, fk, KV_BOX_BYTES, bi, hi)
                wait(b.ptr_add(empty_v, slot(r)), phase(r) ^ 1)
                b.mbarrier_arrive_expect_tx(fv, kv_bytes)
                tma(tile(s_v, r), tv, j * BN, fv, KV_BOX_BYTES, bi, hi)
                lp.next()

        cond = b.if_else(b.eq(wg, 0))
        with cond as (producer, consumer):
            with producer:
                b.setmaxnreg(PRODUCER_REGS, increase=False)
                with b.if_(b.eq(tid, 0)):
                    tile_loop(produce)
            with consumer:
                b.setmaxnreg(CONSUMER_REGS, increase=True)
                tile_loop(consume)
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
    "overlap_persist": Loop(overlap=True, persistent=True),
    "overlap_s3_persist": Loop(overlap=True, stages=3, persistent=True),
    "pingpong_defer_persist": Loop(overlap=True, pingpong=True, defer=True, persistent=True),
    "plain_wg3_persist": Loop(consumers=3, persistent=True),
}
#: The loop `attention()` runs per (head dim, causal): the fastest on the
#: H100 (benches/attention.py; docs/performance.md, "Attention, sm_90a
#: path"). Head dim 128: the overlapped loop (642-688 TFLOP/s against the
#: plain loop's 553-565). Head dim 64: three consumer warpgroups (plain 515-528
#: against two consumers' best 474), causal with the deferred ping-pong
#: (502 against 492). Three consumers spill at head dim 128 (160 registers).
DEFAULT_LOOP: dict[tuple[int, bool], str] = {
    (64, False): "plain_wg3",
    (64, True): "pingpong_defer_wg3",
    (128, False): "overlap",
    (128, True): "overlap",
}
#: With `lazy`: raise a row's running maximum only when it grows by more than
#: LAZY_HEADROOM (log2 units: P <= 256), skipping most rescales of O.
LAZY_HEADROOM = 8.0


def fits(d: int, loop: Loop) -> bool:
    """Whether `loop`'s shared memory fits a block (227 KiB on sm_90)."""
    return shared_bytes(d, loop.consumers, loop.stages) <= 227 * 1024


@functools.cache
def _sm_count(device: int) -> int:
    return int(cuda.Device(device).sm_count)


@functools.cache
def _module(dtype: str, d: int, causal: bool, loop: Loop) -> hir.Module:
    return build(dtype, d, causal, loop)


@functools.cache
def _loaded(key: tuple[str, int, bool, Loop], device: int) -> Any:
    return cuda.load_hir(_module(*key), device, arch="sm_90a")


def _tensor_map(t: T.Tensor, rows: int) -> Any:
    """A map of `t` (B, H, S, D) whose box is `rows` x 64 elements of one (b, h)."""
    box = [BOX, rows, 1, 1]
    if t.on_gpu:
        src = t.obj if isinstance(t.arr, int) else t.arr
        return cuda.TensorMap.tiled(src, box, swizzle="128B", dtype=T.HIR_TYPE[t.dtype])
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
) -> None:
    """Runs the kernel on checked tensors (attention() validated them) with
    the consumer loop named `loop` (a key of LOOPS; None: DEFAULT_LOOP's)."""
    bsz, heads, sq, d = tq.shape
    sk = tk.shape[2]
    lp = LOOPS[loop or DEFAULT_LOOP[d, causal]]
    if not fits(d, lp):
        raise ArgumentError(
            f"argument 'variant': loop {loop!r} needs {shared_bytes(d, lp.consumers, lp.stages)}"
            f" bytes of shared memory at head dim {d}, more than a block has"
        )
    nc = lp.consumers
    maps = [_tensor_map(tq, bm(nc)), _tensor_map(tk, BN), _tensor_map(tv, BN)]
    grid = (-(-sq // bm(nc)), bsz * heads)
    tiles = grid[0] * grid[1]
    if lp.persistent:  # one block per SM (the interpreter: 3, to share tiles unevenly)
        grid = (min(tiles, _sm_count(tq.device) if tq.on_gpu else 3), 1)
    args = [*maps, o.arr, lse.arr, sq, sk, heads, tiles, *o.strides[:3], scale_log2]
    smem = shared_bytes(d, nc, lp.stages)
    key = (tq.dtype, d, causal, lp)
    if not tq.on_gpu:
        interp.launch(_module(*key), "attention", grid, threads(nc), *args, shared_bytes=smem)
        return
    k = _loaded(key, tq.device).kernel("attention")
    if stream is None and isinstance(tq.arr, int):
        stream = T._torch_stream(tq)
    k.launch(grid, threads(nc), *args, shared_mem=smem, stream=stream)
