"""``zyntax.lang`` primitives on memory and warps: atomics and ``red``, bit-field
ops, named barriers, warp reductions, acquire/release, vector and cached
loads/stores, packed conversions, shuffles and votes, WMMA, ``cp.async``, TMA
and bulk copies."""

from __future__ import annotations

import ast
from typing import Any

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Value
from zyntax.frontend.errors import (
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    F32,
    I32,
    U32,
    Frag,
    Ptr,
    Scalar,
    Vec,
)
from zyntax.frontend.translate.operands import (
    _ATOMIC_NAMES,
    _LOAD_CACHE,
    _MMA_SHAPES,
    _SCOPES,
    _STORE_CACHE,
    ArrayView,
    Lit,
    Operand,
    Ref,
    TupleVal,
)
from zyntax.frontend.translate.prims import PrimTranslator


class MemPrimTranslator(PrimTranslator):
    """The memory and warp primitives (``prim_<name>``)."""

    def _atomic(
        self, name: str, e: ast.AST, arr: Operand, index: Operand, *vals: Operand, scope: Operand
    ) -> Operand:
        if not isinstance(arr, ArrayView):
            raise self.error(
                e, f"atomic.{name} needs an array as its first argument", KernelTypeError
            )
        idx: list[Operand] = index.items if isinstance(index, TupleVal) else [index]
        if len(idx) != arr.ndim:
            raise self.error(
                e,
                f"array has {arr.ndim} dimension(s) but {len(idx)} indices were given",
                KernelTypeError,
            )
        sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
        ptr = self.element_ptr(arr, idx, e)
        args = [self.value(v, e, arr.dtype) for v in vals]
        return self.fn.emit1(f"atomic.{name}.{sc}", [ptr, *args], arr.dtype)

    # ---- issue 12: the warp-level ISA
    def _index_ptr(self, e: ast.AST, what: str, arr: Operand, index: Operand) -> Value:
        """The pointer to `arr[index]` (an int or a tuple of ints)."""
        if not isinstance(arr, ArrayView):
            raise self.error(e, f"{what} needs an array as its first argument", KernelTypeError)
        idx: list[Operand] = index.items if isinstance(index, TupleVal) else [index]
        if len(idx) != arr.ndim:
            raise self.error(
                e,
                f"array has {arr.ndim} dimension(s) but {len(idx)} indices were given",
                KernelTypeError,
            )
        return self.element_ptr(arr, idx, e)

    def _named_barrier(self, e: ast.AST, which: str, bar: Operand, count: Operand) -> Operand:
        i = self._const_int(bar, e, "the barrier id")
        n = self._const_int(count, e, "the thread count")
        self.fn.emit0(f"bar.{which}", [], id=i, count=n)
        return Ref(None)

    def prim_named_barrier_sync(self, e: ast.AST, bar: Operand, count: Operand) -> Operand:
        return self._named_barrier(e, "sync", bar, count)

    def prim_named_barrier_arrive(self, e: ast.AST, bar: Operand, count: Operand) -> Operand:
        return self._named_barrier(e, "arrive", bar, count)

    def prim_load_acquire(
        self, e: ast.AST, arr: Operand, index: Operand, scope: Operand = Ref("device")
    ) -> Operand:
        sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
        ptr = self._index_ptr(e, "load_acquire", arr, index)
        assert isinstance(arr, ArrayView)
        return self.fn.emit1(f"load.acquire.{sc}", [ptr])

    def prim_store_release(
        self,
        e: ast.AST,
        arr: Operand,
        index: Operand,
        value: Operand,
        scope: Operand = Ref("device"),
    ) -> Operand:
        sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
        ptr = self._index_ptr(e, "store_release", arr, index)
        assert isinstance(arr, ArrayView)
        self.fn.emit0(f"store.release.{sc}", [ptr, self.value(value, e, arr.dtype)])
        return Ref(None)

    def prim_fence_acq_rel(self, e: ast.AST, scope: Operand = Ref("device")) -> Operand:
        sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
        self.fn.emit0(f"fence.acq_rel.{sc}", [])
        return Ref(None)

    def _vec_ptr(
        self, e: ast.AST, what: str, arr: Operand, index: Operand, n: int
    ) -> tuple[Value, Vec, str]:
        """`arr[index]` as a pointer to `n` contiguous elements (one access)."""
        ptr = self._index_ptr(e, what, arr, index)
        assert isinstance(arr, ArrayView)
        if n not in (2, 4) or arr.dtype.bits * n > 128 or arr.dtype.bits < 16:
            raise self.error(
                e,
                f"{what} moves 2 or 4 elements of 16 to 64 bits, up to 16 bytes "
                f"(got {n} x {arr.dtype})",
                KernelTypeError,
            )
        if arr.strides[-1] != 1:
            raise self.error(
                e,
                f"{what} needs the array's last dimension contiguous: annotate it "
                "Array[dtype, ndim, 'C'] or pass a C-contiguous array",
                KernelTypeError,
            )
        vt = Vec(arr.dtype, n)
        return self.fn.emit1("ptr_cast", [ptr], Ptr(arr.space, vt)), vt, arr.space

    def _cache_op(self, e: ast.AST, cache: Operand, allowed: tuple[str, ...]) -> str | None:
        if isinstance(cache, Ref) and cache.obj is None:
            return None
        return self._str(cache, e, "cache", allowed)

    def prim_load_vec(
        self, e: ast.AST, arr: Operand, index: Operand, n: Operand, cache: Operand = Ref(None)
    ) -> Operand:
        k = self._const_int(n, e, "the element count")
        vp, vt, space = self._vec_ptr(e, "load_vec", arr, index, k)
        c = self._cache_op(e, cache, _LOAD_CACHE)
        if c is not None and space != "global":
            raise self.error(e, "cache operators apply to global arrays", KernelTypeError)
        v = self.fn.emit1("load" if c is None else f"load.{c}", [vp], vt)
        return TupleVal([self.fn.emit1("extract", [v], vt.elem, lane=i) for i in range(k)])

    def prim_store_vec(
        self, e: ast.AST, arr: Operand, index: Operand, values: Operand, cache: Operand = Ref(None)
    ) -> Operand:
        if not isinstance(values, TupleVal):
            raise self.error(e, "store_vec takes a tuple of 2 or 4 values", KernelTypeError)
        k = len(values.items)
        vp, vt, space = self._vec_ptr(e, "store_vec", arr, index, k)
        c = self._cache_op(e, cache, _STORE_CACHE)
        if c is not None and space != "global":
            raise self.error(e, "cache operators apply to global arrays", KernelTypeError)
        # The vector is assembled in a per-thread slot (registers after SROA).
        tmp = self.fn.emit1("alloca", [], Ptr("local", vt), elem=vt, count=1)
        lanes = self.fn.emit1("ptr_cast", [tmp], Ptr("local", vt.elem))
        for i, x in enumerate(values.items):
            p = lanes if i == 0 else self.fn.emit1("ptr_add", [lanes, self.const(I32, i)], lanes.ty)
            self.fn.emit0("store", [p, self.value(x, e, vt.elem)])
        v = self.fn.emit1("load", [tmp], vt)
        self.fn.emit0("store" if c is None else f"store.{c}", [vp, v])
        return Ref(None)

    def prim_load_cached(
        self, e: ast.AST, arr: Operand, index: Operand, cache: Operand = Ref("cs")
    ) -> Operand:
        c = self._str(cache, e, "cache", _LOAD_CACHE)
        ptr = self._index_ptr(e, "load_cached", arr, index)
        assert isinstance(arr, ArrayView)
        if arr.space != "global" or arr.dtype.bits < 16:
            raise self.error(
                e, "load_cached reads global arrays of 16- to 64-bit elements", KernelTypeError
            )
        return self.fn.emit1(f"load.{c}", [ptr], arr.dtype)

    def prim_store_cached(
        self, e: ast.AST, arr: Operand, index: Operand, value: Operand, cache: Operand = Ref("cs")
    ) -> Operand:
        c = self._str(cache, e, "cache", _STORE_CACHE)
        ptr = self._index_ptr(e, "store_cached", arr, index)
        assert isinstance(arr, ArrayView)
        if arr.space != "global" or arr.dtype.bits < 16:
            raise self.error(
                e, "store_cached writes global arrays of 16- to 64-bit elements", KernelTypeError
            )
        self.fn.emit0(f"store.{c}", [ptr, self.value(value, e, arr.dtype)])
        return Ref(None)

    def prim_cvt_pack(self, e: ast.AST, fmt: Operand, lo: Operand, hi: Operand) -> Operand:
        f = self._str(fmt, e, "the pair format", ("f16x2", "bf16x2", "e4m3x2", "e5m2x2"))
        args = [self.value(lo, e, F32), self.value(hi, e, F32)]
        if f in ("e4m3x2", "e5m2x2"):
            return self.fn.emit1(f"cvt_pack.{f}", args, ir.scalar("u16"))
        # f16x2 / bf16x2: the pair's bits as one u32 (lo in the low half).
        pair = self.fn.emit1(f"cvt_pack.{f}", args, Vec(ir.scalar(f[:-2]), 2))
        return self.fn.emit1("bitcast", [pair], U32)

    def prim_cvt_unpack(self, e: ast.AST, fmt: Operand, bits: Operand) -> Operand:
        f = self._str(fmt, e, "the pair format", ("e4m3x2", "e5m2x2"))
        pair = self.fn.emit1(f"cvt_unpack.{f}", [self.value(bits, e, ir.scalar("u16"))])
        return self.fn.emit1("bitcast", [pair], U32)

    def __getattr__(self, name: str) -> Any:
        # prim_red_<op>: an atomic without a result (issue 12).
        if name.startswith("prim_red_"):
            key = name[len("prim_red_") :]
            key = key if key in _ATOMIC_NAMES else key + "_"
            if key in _ATOMIC_NAMES:
                op = _ATOMIC_NAMES[key]

                def red(
                    e: ast.AST,
                    arr: Operand,
                    index: Operand,
                    value: Operand,
                    scope: Operand = Ref("device"),
                ) -> Operand:
                    sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
                    ptr = self._index_ptr(e, f"red.{op}", arr, index)
                    assert isinstance(arr, ArrayView)
                    self.fn.emit0(f"red.{op}.{sc}", [ptr, self.value(value, e, arr.dtype)])
                    return Ref(None)

                return red
        # prim_atomic_<op>: one handler per atomic op.
        if name.startswith("prim_atomic_"):
            op = name[len("prim_atomic_") :]
            if op == "cas":

                def cas(
                    e: ast.AST,
                    arr: Operand,
                    index: Operand,
                    expected: Operand,
                    desired: Operand,
                    scope: Operand = Ref("device"),
                ) -> Operand:
                    return self._atomic("cas", e, arr, index, expected, desired, scope=scope)

                return cas
            key = op if op in _ATOMIC_NAMES else op + "_"
            if key in _ATOMIC_NAMES:
                hir = _ATOMIC_NAMES[key]

                def rmw(
                    e: ast.AST,
                    arr: Operand,
                    index: Operand,
                    value: Operand,
                    scope: Operand = Ref("device"),
                ) -> Operand:
                    return self._atomic(hir, e, arr, index, value, scope=scope)

                return rmw
        raise AttributeError(name)

    def _shfl(
        self, mode: str, e: ast.AST, mask: Operand, value: Operand, lane: Operand, width: Operand
    ) -> Operand:
        w = self._const_int(width, e, "width")
        if w not in (1, 2, 4, 8, 16, 32):
            raise self.error(e, "width must be a power of two up to 32", KernelTypeError)
        v = self.value(value, e)
        return self.fn.emit1(f"shfl.{mode}", [self._u32(mask, e), v, self._u32(lane, e)], width=w)

    def prim_shfl_sync(
        self, e: ast.AST, mask: Operand, value: Operand, src_lane: Operand, width: Operand = Lit(32)
    ) -> Operand:
        return self._shfl("idx", e, mask, value, src_lane, width)

    def prim_shfl_up_sync(
        self, e: ast.AST, mask: Operand, value: Operand, delta: Operand, width: Operand = Lit(32)
    ) -> Operand:
        return self._shfl("up", e, mask, value, delta, width)

    def prim_shfl_down_sync(
        self, e: ast.AST, mask: Operand, value: Operand, delta: Operand, width: Operand = Lit(32)
    ) -> Operand:
        return self._shfl("down", e, mask, value, delta, width)

    def prim_shfl_xor_sync(
        self,
        e: ast.AST,
        mask: Operand,
        value: Operand,
        lane_mask: Operand,
        width: Operand = Lit(32),
    ) -> Operand:
        return self._shfl("xor", e, mask, value, lane_mask, width)

    def _vote(self, mode: str, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        p = self.to_bool(pred, e)
        pv = p if isinstance(p, Value) else self.fn.const(BOOL, p)
        return self.fn.emit1(f"vote.{mode}", [self._u32(mask, e), pv])

    def prim_vote_ballot_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("ballot", e, mask, pred)

    def prim_vote_any_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("any", e, mask, pred)

    def prim_vote_all_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("all", e, mask, pred)

    def prim_match_all_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        r = self.fn.emit("match.all", [self._u32(mask, e), self.value(value, e)])
        return TupleVal(list(r))

    def _mma_ptr(self, arr: Operand, offset: Operand, e: ast.AST) -> tuple[Value, Scalar]:
        if not isinstance(arr, ArrayView):
            raise self.error(e, "MMA load/store needs an array", KernelTypeError)
        flat = ArrayView(arr.ptr, arr.dtype, [None], [1])
        return self.element_ptr(flat, [offset], e), arr.dtype

    def _mma_load(
        self,
        kind: str,
        e: ast.AST,
        arr: Operand,
        ldm: Operand,
        layout: Operand,
        shape: Operand,
        offset: Operand,
    ) -> Operand:
        lay = self._str(layout, e, "layout", ("row", "col"))
        shp = self._str(shape, e, "shape", _MMA_SHAPES)
        ptr, dt = self._mma_ptr(arr, offset, e)
        fr = Frag(kind, shp, dt, None if kind == "acc" else lay)
        return self.fn.emit1(f"mma.load.{lay}", [ptr, self._u32(ldm, e)], fr)

    def prim_mma_load_a(
        self,
        e: ast.AST,
        arr: Operand,
        ldm: Operand,
        layout: Operand = Ref("row"),
        shape: Operand = Ref("m16n16k16"),
        offset: Operand = Lit(0),
    ) -> Operand:
        return self._mma_load("a", e, arr, ldm, layout, shape, offset)

    def prim_mma_load_b(
        self,
        e: ast.AST,
        arr: Operand,
        ldm: Operand,
        layout: Operand = Ref("row"),
        shape: Operand = Ref("m16n16k16"),
        offset: Operand = Lit(0),
    ) -> Operand:
        return self._mma_load("b", e, arr, ldm, layout, shape, offset)

    def prim_mma_load_c(
        self,
        e: ast.AST,
        arr: Operand,
        ldm: Operand,
        layout: Operand = Ref("row"),
        shape: Operand = Ref("m16n16k16"),
        offset: Operand = Lit(0),
    ) -> Operand:
        return self._mma_load("acc", e, arr, ldm, layout, shape, offset)

    def prim_mma_fill(
        self,
        e: ast.AST,
        value: Operand,
        shape: Operand = Ref("m16n16k16"),
        dtype: Operand = Ref(lang.f32),
    ) -> Operand:
        shp = self._str(shape, e, "shape", _MMA_SHAPES)
        t = self._dtype(dtype, e)
        fr = Frag("acc", shp, t, None)
        return self.fn.emit1("mma.fill", [self.value(value, e, t)], fr)

    def prim_mma_mma(self, e: ast.AST, a: Operand, b: Operand, c: Operand) -> Operand:
        vals = [self.value(x, e) if isinstance(x, Value) else None for x in (a, b, c)]
        if any(v is None or not isinstance(v.ty, Frag) for v in vals):
            raise self.error(e, "mma.mma(a, b, c) needs three fragments", KernelTypeError)
        cv = vals[2]
        assert cv is not None
        return self.fn.emit1("mma", [v for v in vals if v is not None], cv.ty)

    def prim_mma_store(
        self,
        e: ast.AST,
        arr: Operand,
        frag: Operand,
        ldm: Operand,
        layout: Operand = Ref("row"),
        offset: Operand = Lit(0),
    ) -> Operand:
        lay = self._str(layout, e, "layout", ("row", "col"))
        ptr, _ = self._mma_ptr(arr, offset, e)
        if not isinstance(frag, Value) or not isinstance(frag.ty, Frag):
            raise self.error(e, "mma.store needs a fragment", KernelTypeError)
        self.fn.emit0(f"mma.store.{lay}", [ptr, frag, self._u32(ldm, e)])
        return Ref(None)

    def prim_async_copy(
        self,
        e: ast.AST,
        dst: Operand,
        dst_index: Operand,
        src: Operand,
        src_index: Operand,
        nbytes: Operand = Lit(16),
        cache: Operand = Ref("ca"),
    ) -> Operand:
        n = self._const_int(nbytes, e, "nbytes")
        if n not in (4, 8, 16):
            raise self.error(e, "async_copy copies 4, 8 or 16 bytes", KernelTypeError)
        hint = self._str(cache, e, "cache", ("ca", "cg"))
        ptrs = []
        for arr, idx in ((dst, dst_index), (src, src_index)):
            if not isinstance(arr, ArrayView):
                raise self.error(e, "async_copy needs arrays", KernelTypeError)
            items: list[Operand] = idx.items if isinstance(idx, TupleVal) else [idx]
            ptrs.append(self.element_ptr(arr, items, e))
        self.fn.emit0(f"cp.async.{hint}.{n}", ptrs)
        return Ref(None)

    # ---- TMA (issue 13 item 2)
    def _tmap(self, e: ast.AST, name: str, tmap: Operand) -> Value:
        if not isinstance(tmap, Value) or not isinstance(tmap.ty, ir.TensorMapT):
            raise self.error(
                e,
                f"{name} needs a tensor map parameter (annotated zyntax.lang.TensorMap)",
                KernelTypeError,
            )
        return tmap

    def _coords(self, e: ast.AST, name: str, coords: Operand) -> list[Value]:
        items: list[Operand] = coords.items if isinstance(coords, TupleVal) else [coords]
        if not 1 <= len(items) <= 5:
            raise self.error(e, f"{name} takes 1 to 5 coordinates", KernelTypeError)
        out = []
        for c in items:
            t = self.scalar_type(c, e)
            out.append(self.value(c, e, t if t in (I32, U32) else I32))
        return out

    def _box(self, e: ast.AST, name: str, arr: Operand) -> Value:
        """The start of a shared array (the box)."""
        if not isinstance(arr, ArrayView) or arr.space != "shared":
            raise self.error(e, f"{name} needs a shared array for the box", KernelTypeError)
        return arr.ptr

    def prim_tma_load(
        self,
        e: ast.AST,
        dst: Operand,
        tmap: Operand,
        coords: Operand,
        bars: Operand,
        index: Operand,
    ) -> Operand:
        box = self._box(e, "tma_load", dst)
        t = self._tmap(e, "tma_load", tmap)
        bar = self._mbar(e, "tma_load", bars, index)
        self.fn.emit0("tma.load", [box, t, bar, *self._coords(e, "tma_load", coords)])
        return Ref(None)

    def prim_tma_store(self, e: ast.AST, tmap: Operand, coords: Operand, src: Operand) -> Operand:
        t = self._tmap(e, "tma_store", tmap)
        box = self._box(e, "tma_store", src)
        self.fn.emit0("tma.store", [t, box, *self._coords(e, "tma_store", coords)])
        return Ref(None)

    def prim_tma_reduce(
        self, e: ast.AST, op: Operand, tmap: Operand, coords: Operand, src: Operand
    ) -> Operand:
        o = self._str(op, e, "op", ("add", "min", "max"))
        t = self._tmap(e, "tma_reduce", tmap)
        box = self._box(e, "tma_reduce", src)
        self.fn.emit0(f"tma.reduce.{o}", [t, box, *self._coords(e, "tma_reduce", coords)])
        return Ref(None)

    def _elem(self, e: ast.AST, name: str, arr: Operand, index: Operand, space: str) -> Value:
        """A pointer to `arr[index]`, `arr` an array in `space`."""
        if not isinstance(arr, ArrayView) or arr.space != space:
            raise self.error(e, f"{name} needs a {space} array there", KernelTypeError)
        items: list[Operand] = index.items if isinstance(index, TupleVal) else [index]
        return self.element_ptr(arr, items, e)

    def prim_bulk_copy_g2s(
        self,
        e: ast.AST,
        dst: Operand,
        dst_index: Operand,
        src: Operand,
        src_index: Operand,
        nbytes: Operand,
        bars: Operand,
        index: Operand,
    ) -> Operand:
        d = self._elem(e, "bulk_copy_g2s", dst, dst_index, "shared")
        s = self._elem(e, "bulk_copy_g2s", src, src_index, "global")
        bar = self._mbar(e, "bulk_copy_g2s", bars, index)
        self.fn.emit0("bulk.copy.g2s", [d, s, self._u32(nbytes, e), bar])
        return Ref(None)

    def prim_bulk_copy_s2g(
        self,
        e: ast.AST,
        dst: Operand,
        dst_index: Operand,
        src: Operand,
        src_index: Operand,
        nbytes: Operand,
    ) -> Operand:
        d = self._elem(e, "bulk_copy_s2g", dst, dst_index, "global")
        s = self._elem(e, "bulk_copy_s2g", src, src_index, "shared")
        self.fn.emit0("bulk.copy.s2g", [d, s, self._u32(nbytes, e)])
        return Ref(None)

    def prim_bulk_reduce(
        self,
        e: ast.AST,
        op: Operand,
        dst: Operand,
        dst_index: Operand,
        src: Operand,
        src_index: Operand,
        nbytes: Operand,
    ) -> Operand:
        o = self._str(op, e, "op", ("add", "min", "max"))
        d = self._elem(e, "bulk_reduce", dst, dst_index, "global")
        s = self._elem(e, "bulk_reduce", src, src_index, "shared")
        self.fn.emit0(f"bulk.reduce.{o}", [d, s, self._u32(nbytes, e)])
        return Ref(None)

    def prim_bulk_wait_group(
        self, e: ast.AST, pending: Operand = Lit(0), read: Operand = Lit(False)
    ) -> Operand:
        if not isinstance(read, Lit) or not isinstance(read.value, bool):
            raise self.error(e, "bulk_wait_group's read must be True or False", KernelTypeError)
        op = "bulk.wait_group.read" if read.value else "bulk.wait_group"
        self.fn.emit0(op, [], pending=self._const_int(pending, e, "pending"))
        return Ref(None)

    def prim_prefetch_tensormap(self, e: ast.AST, tmap: Operand) -> Operand:
        self.fn.emit0("prefetch.tensormap", [self._tmap(e, "prefetch_tensormap", tmap)])
        return Ref(None)

    def prim_async_wait(self, e: ast.AST, pending: Operand = Lit(0)) -> Operand:
        self.fn.emit0("cp.async.wait", [], pending=self._const_int(pending, e, "pending"))
        return Ref(None)
