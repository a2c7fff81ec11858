"""Builder pieces shared by the memory-bound kernels: 16-byte vector loads and
stores converted to and from f32, warp and block all-reductions, and the
launch shape of a block-per-row kernel.

A row kernel gives one block of ``T`` threads to each row. Thread ``t`` owns
the vectors ``t, t + T, ..., t + (K-1)·T`` of the row (``V`` elements each, 16
bytes when the row allows it), so every warp access is 512 contiguous bytes
and the row stays in registers between the reductions and the writes: each
byte is read once and written once. Rows longer than ``K_MAX·V·1024``
elements stream through the row instead (see each kernel).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from zyntax import hir, tile

if TYPE_CHECKING:
    from .rows_tile import _P

WARP = 32
LOG2E = 1.4426950408889634
LN2 = math.log(2.0)
NEG_INF = -math.inf
#: The most vectors a thread keeps in registers (64 f32 values for bf16 rows).
K_MAX = 8


def archs_for(dtype: str) -> list[str]:
    """Archs of a kernel's module: bf16 needs sm_80."""
    return ["sm_80", "sm_90"] if dtype == "bf16" else ["sm_70", "sm_80", "sm_90"]


Value = hir.Value
B = hir.FunctionBuilder


def row_shape(n: int, lanes: int) -> tuple[int, int]:
    """(threads, vectors per thread) for a row of `n` elements: about four
    vectors per thread, between one warp and 1024 threads."""
    nv = max(1, -(-n // lanes))
    threads = min(1024, max(WARP, 1 << (max(1, -(-nv // 4)) - 1).bit_length()))
    return threads, -(-nv // threads)


def guarded(
    b: B,
    cond: Value,
    types: Sequence[object],
    then: Callable[[], list[Value]],
    other: Sequence[Any],
) -> list[Value]:
    """`then()` when `cond`, else the constants `other` (nothing of `then` runs)."""
    sel = b.if_else(cond, results=list(types))
    with sel as (yes, no):
        with yes:
            yes.yield_(*then())
        with no:
            no.yield_(*other)
    return list(sel.results)


def vec_ptr(b: B, p: Value, space: str, elem: object, lanes: int) -> Value:
    return p if lanes == 1 else b.ptr_cast(p, hir.ptr(space, hir.vec(elem, lanes)))


def load_f32(b: B, vp: Value, index: Value, elem: object, lanes: int) -> list[Value]:
    """The `lanes` elements of vector `index` of `vp`, as f32."""
    v = b.load(b.ptr_add(vp, index))
    vals = [v] if lanes == 1 else [b.extract(v, j) for j in range(lanes)]
    return vals if elem == hir.f32 else [b.cast(x, hir.f32) for x in vals]


def store_f32(
    b: B, vp: Value, index: Value, vals: Sequence[Value], elem: object, lanes: int
) -> None:
    """Stores f32 `vals` (rounded to `elem`) as vector `index` of `vp`."""
    conv = list(vals) if elem == hir.f32 else [b.cast(x, elem) for x in vals]
    if lanes == 1:
        b.store(b.ptr_add(vp, index), conv[0])
        return
    b.store(b.ptr_add(vp, index), vector(b, hir.vec(elem, lanes), conv))


def vector(b: B, ty: object, lanes: Sequence[Value]) -> Value:
    """A vector of `lanes`. HIR constants are scalars, so the insertions start
    from an unwritten local (LLVM's SROA makes it an undefined register: no
    local memory is used)."""
    v = b.load(b.alloca(ty))
    for j, x in enumerate(lanes):
        v = b.insert(v, x, j)
    return v


def pack_pair(b: B, elem: object, x: Value, y: Value) -> Value:
    """Two f32 as the 16-bit `elem` pair of one u32 register (x in the low half)."""
    lo = b.cast(b.bitcast(b.cast(x, elem), hir.u16), hir.u32)
    hi = b.cast(b.bitcast(b.cast(y, elem), hir.u16), hir.u32)
    return b.prmt(lo, hi, 0x5410)  # low halves of lo and hi


def cvt_pair(b: B, dtype: str, x: Value, y: Value) -> Value:
    """Two f32 as the `dtype` ("bf16", "f16") pair of one u32 register (x in the
    low half): one `cvt.rn.{bf16x2,f16x2}.f32` instead of two and a `prmt`."""
    return b.bitcast(b.cvt_pack(f"{dtype}x2", x, y), hir.u32)


def wgmma_a_fragments(b: B, dtype: str, p: Sequence[Sequence[Value]], steps: int) -> list[Value]:
    """The A fragments (u32x4, K steps of 16) of a wgmma accumulator's 64 rows
    given as this thread's values of rows g (`p[0]`) and g + 8 (`p[1]`): P's
    registers as the next wgmma's A operand (the RS form), packed with
    :func:`cvt_pair`."""
    return [
        vector(
            b,
            hir.vec(hir.u32, 4),
            [
                cvt_pair(b, dtype, p[0][4 * kk], p[0][4 * kk + 1]),
                cvt_pair(b, dtype, p[1][4 * kk], p[1][4 * kk + 1]),
                cvt_pair(b, dtype, p[0][4 * kk + 2], p[0][4 * kk + 3]),
                cvt_pair(b, dtype, p[1][4 * kk + 2], p[1][4 * kk + 3]),
            ],
        )
        for kk in range(steps)
    ]


def quad(b: B, x: Value, op: Any) -> Value:
    """op over the four lanes of a quad (the threads sharing an mma.sync row)."""
    x = op(x, b.shfl_xor(x, 1))
    out: Value = op(x, b.shfl_xor(x, 2))
    return out


def p_fragment(b: B, elem: object, lo: Sequence[Value], hi: Sequence[Value], kk: int) -> Value:
    """K step `kk`'s A fragment (u32x4) of an mma.sync m16n8k16 from this thread's
    accumulator values of rows g (`lo`) and g + 8 (`hi`): FlashAttention-2's reuse of
    P's registers as the next dot's operand."""
    c0 = 4 * kk
    return vector(
        b,
        hir.vec(hir.u32, 4),
        [
            pack_pair(b, elem, lo[c0], lo[c0 + 1]),
            pack_pair(b, elem, hi[c0], hi[c0 + 1]),
            pack_pair(b, elem, lo[c0 + 2], lo[c0 + 3]),
            pack_pair(b, elem, hi[c0 + 2], hi[c0 + 3]),
        ],
    )


def flat(lists: Sequence[Sequence[Value]]) -> list[Value]:
    return [x for xs in lists for x in xs]


def variables(b: B, inits: Sequence[Value], name: str = "v") -> list[hir.Var]:
    """One builder variable per value of `inits`, holding it. A loop body
    reads them (`read`) and assigns the next values (`assign`); the builder's
    SSA construction threads them through the loop, so no value list is
    carried by hand."""
    vs = [b.declare_var(v.type, name) for v in inits]
    assign(b, vs, inits)
    return vs


def read(b: B, vs: Sequence[hir.Var]) -> list[Value]:
    """The current values of the variables `vs`."""
    return [b.use_var(v) for v in vs]


def assign(b: B, vs: Sequence[hir.Var], values: Sequence[Value]) -> None:
    """Gives the variables `vs` the `values`, one each."""
    for v, x in zip(vs, values, strict=True):
        b.def_var(v, x)


def tree(op: Callable[[Value, Value], Value], vals: Sequence[Value]) -> Value:
    """Balanced reduction of `vals` (short dependency chains)."""
    vals = list(vals)
    while len(vals) > 1:
        nxt = [op(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def warp_allreduce(b: B, v: Value, op: Callable[[Value, Value], Value], width: int = WARP) -> Value:
    off = width // 2
    while off:
        v = op(v, b.shfl_xor(v, off))
        off //= 2
    return v


def block_allreduce(b: B, v: Value, op: Callable[[Value, Value], Value], threads: int) -> Value:
    """Every thread of the block gets op over all threads' `v`: warp shuffles,
    one shared slot per warp, then every warp reduces the slots. Each call
    uses its own shared array, so consecutive calls need no extra barrier."""
    v = warp_allreduce(b, v, op)
    if threads <= WARP:
        return v
    warps = threads // WARP
    slots = b.shared_alloc(hir.f32, warps)
    tid = b.thread_idx()
    lane, warp = tid & (WARP - 1), tid >> 5
    with b.if_(b.eq(lane, 0)):
        b.store(b.ptr_add(slots, warp), v)
    b.barrier()
    # Every group of `warps` lanes reads all slots, so a butterfly of that
    # width leaves the total in every lane.
    w = b.load(b.ptr_add(slots, lane & (warps - 1)))
    return warp_allreduce(b, w, op, warps)


def nan_max(b: B, x: Value, y: Value) -> Value:
    """max(x, y) that is NaN when either is (numpy's ``max``, PyTorch's
    ``amax``): HIR's max, like PTX's ``max.f32``, returns the other operand."""
    either = b.select(b.ne(y, y), y, b.max(x, y))
    return b.select(b.ne(x, x), x, either)


def safe_max(b: B, m: Value) -> Value:
    """`m`, or 0 where `m` is -inf: exp(x - safe) is then 0 for x = -inf, never NaN."""
    return b.select(b.eq(m, NEG_INF), 0.0, m)


def exp_minus(b: B, x: Value, safe: Value) -> Value:
    """exp(x - safe) as ex2.approx; x <= safe, so nothing overflows even for
    logits near the f32 maximum."""
    return b.ex2_approx((x - safe) * LOG2E)


def combine_ms(b: B, m1: Value, s1: Value, m2: Value, s2: Value) -> tuple[Value, Value]:
    """Merges two online-softmax states (max, sum of exp(x - max))."""
    m = b.max(m1, m2)
    safe = safe_max(b, m)
    return m, b.fma(s1, exp_minus(b, m1, safe), s2 * exp_minus(b, m2, safe))


def block_allreduce_ms(b: B, m: Value, s: Value, threads: int) -> tuple[Value, Value]:
    """`block_allreduce` for online-softmax states."""

    def warp(m: Value, s: Value, width: int) -> tuple[Value, Value]:
        off = width // 2
        while off:
            m, s = combine_ms(b, m, s, b.shfl_xor(m, off), b.shfl_xor(s, off))
            off //= 2
        return m, s

    m, s = warp(m, s, WARP)
    if threads <= WARP:
        return m, s
    warps = threads // WARP
    ms = b.shared_alloc(hir.f32, warps)
    ss = b.shared_alloc(hir.f32, warps)
    tid = b.thread_idx()
    lane, wid = tid & (WARP - 1), tid >> 5
    with b.if_(b.eq(lane, 0)):
        b.store(b.ptr_add(ms, wid), m)
        b.store(b.ptr_add(ss, wid), s)
    b.barrier()
    slot = lane & (warps - 1)
    return warp(b.load(b.ptr_add(ms, slot)), b.load(b.ptr_add(ss, slot)), warps)


def row_base(b: B, p: Value, row: Value, stride: Value) -> Value:
    """Pointer to the first element of `row` (64-bit offset)."""
    return b.ptr_add(p, b.cast(row, hir.i64) * stride)


def element(b: B, base: Value, col: Value, col_stride: Value) -> Value:
    """Pointer to element `col` of a row with any column stride (the scalar path)."""
    return b.ptr_add(base, b.cast(col, hir.i64) * col_stride)


class RowAccess:
    """Loads and stores vector `i` of one row (`lanes` elements, f32 values);
    with one lane the row may have any column stride."""

    def __init__(
        self,
        b: B,
        p: Value,
        row: Value,
        stride: Value,
        col_stride: Value,
        space: str,
        elem: object,
        lanes: int,
    ) -> None:
        self.b, self.elem, self.lanes, self.col_stride = b, elem, lanes, col_stride
        self.base = row_base(b, p, row, stride)
        self.vp = vec_ptr(b, self.base, space, elem, lanes)

    def _ptr(self, i: Value) -> tuple[Value, Value]:
        if self.lanes == 1:
            return element(self.b, self.base, i, self.col_stride), self.b.const(0, hir.u32)
        return self.vp, i

    def load(self, i: Value) -> list[Value]:
        p, j = self._ptr(i)
        return load_f32(self.b, p, j, self.elem, self.lanes)

    def store(self, i: Value, vals: Sequence[Value]) -> None:
        p, j = self._ptr(i)
        store_f32(self.b, p, j, vals, self.elem, self.lanes)


def row_params(elem: object, extra: Sequence[object] = ()) -> list[object]:
    """x, out, n, x row stride, x column stride, out row stride, out column stride, extra..."""
    return [
        hir.ptr("constant", elem),
        hir.ptr("global", elem),
        hir.u32,
        hir.i64,
        hir.i64,
        hir.i64,
        hir.i64,
        *extra,
    ]


# ------------------------------------------ online softmax state (rows_tile, _rows_ce)


def _online(P: _P, m: tile.Tile, s: tile.Tile, v: tile.Tile) -> tuple[tile.Tile, tile.Tile]:
    """One step of an online softmax state (max, sum of exp(x - max)), per
    lane, or for the row when the state is [1, 1]. The chunk's terms come
    first in every operation (here and in the loops' sums): an element-wise
    op takes its first operand's layout, so the carried state takes the
    layout of the chunk's statistics (the rows' own) and nothing is
    converted per chunk."""
    if m.shape != v.shape:
        mn = P.t.maximum(v.max(1), m)
        safe = P.safe(mn)
        return mn, (v - P.bc(safe, v.shape)).exp().sum(1) + s * (m - safe).exp()
    mn = P.t.maximum(v, m)
    safe = P.safe(mn)
    return mn, (v - safe).exp() + s * (m - safe).exp()


def _merge(P: _P, m: tile.Tile, s: tile.Tile) -> tuple[tile.Tile, tile.Tile]:
    """The row's (max, sum of exp(x - max)) from per-lane states: [1, 1]
    tiles (the identity for a per-row state)."""
    mx = m.max(1)
    safe = P.safe(mx)
    return safe, (s * (m - P.bc(safe, m.shape)).exp()).sum(1)


def _split_merged(P: _P, mp: tile.View, sp: tile.View, row: Any, parts: int) -> tuple[Any, Any]:
    """The row's (safe max, sum) from its S partial states ([1, parts] tiles, masked)."""
    m = P.t.load(mp, (row, 0), (1, parts), other=NEG_INF)
    return _merge(P, m, P.t.load(sp, (row, 0), (1, parts)))
