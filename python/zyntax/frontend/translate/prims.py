"""``zyntax.lang`` primitives: bit ops, indices, barriers and fences, mbarriers,
tensor cores (wgmma, ldmatrix, mma.sync), clusters and distributed shared memory,
static arrays."""

from __future__ import annotations

import ast
import math

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Value
from zyntax.frontend.errors import (
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    I32,
    U32,
    U64,
    Ptr,
    Vec,
)
from zyntax.frontend.translate.exprs import ExprTranslator
from zyntax.frontend.translate.operands import (
    ArrayView,
    Lit,
    Operand,
    Ref,
    TupleVal,
)


class PrimTranslator(ExprTranslator):
    """``prim_<name>`` handles ``zyntax.lang.<name>(...)``."""

    def prim_bitcast(self, e: ast.AST, x: Operand, dtype: Operand) -> Operand:
        ty = self._dtype(dtype, e)
        src = self.scalar_type(x, e)
        if src.bits != ty.bits or src.is_bool or ty.is_bool:
            raise self.error(
                e,
                f"zyntax.lang.bitcast() of {src} to {ty}: needs non-bool types of one size",
                KernelTypeError,
            )
        return self.fn.emit1("bitcast", [self.value(x, e, src)], ty)

    def _global_dim(self, d: str) -> Value:
        f = self.fn
        b = f.emit1("cast", [f.emit1(f"block_idx.{d}", [])], I32)
        n = f.emit1("cast", [f.emit1(f"block_dim.{d}", [])], I32)
        t = f.emit1("cast", [f.emit1(f"thread_idx.{d}", [])], I32)
        return f.emit1("add", [f.emit1("mul", [b, n]), t])

    def prim_grid(self, e: ast.AST, ndim: Operand) -> Operand:
        n = self._const_int(ndim, e, "grid(ndim)")
        if n not in (1, 2, 3):
            raise self.error(e, "grid(ndim) takes 1, 2 or 3", KernelTypeError)
        vals: list[Operand] = [self._global_dim(d) for d in "xyz"[:n]]
        return vals[0] if n == 1 else TupleVal(vals)

    def prim_gridsize(self, e: ast.AST, ndim: Operand) -> Operand:
        n = self._const_int(ndim, e, "gridsize(ndim)")
        if n not in (1, 2, 3):
            raise self.error(e, "gridsize(ndim) takes 1, 2 or 3", KernelTypeError)
        vals: list[Operand] = []
        for d in "xyz"[:n]:
            bd = self.fn.emit1("cast", [self.fn.emit1(f"block_dim.{d}", [])], I32)
            gd = self.fn.emit1("cast", [self.fn.emit1(f"grid_dim.{d}", [])], I32)
            vals.append(self.fn.emit1("mul", [bd, gd]))
        return vals[0] if n == 1 else TupleVal(vals)

    # ---- Hopper transaction barriers (issue 13)
    def _mbar(self, e: ast.AST, name: str, bars: Operand, index: Operand) -> Value:
        """The barrier `bars[index]`: an element of a shared u64 array."""
        if not isinstance(bars, ArrayView) or bars.dtype != U64 or bars.space != "shared":
            raise self.error(
                e, f"{name} needs a shared u64 array (shared.array(n, u64))", KernelTypeError
            )
        idx: list[Operand] = index.items if isinstance(index, TupleVal) else [index]
        if len(idx) != bars.ndim:
            raise self.error(
                e,
                f"array has {bars.ndim} dimension(s) but {len(idx)} indices were given",
                KernelTypeError,
            )
        return self.element_ptr(bars, idx, e)

    def prim_mbarrier_init(
        self, e: ast.AST, bars: Operand, index: Operand, count: Operand
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_init", bars, index)
        self.fn.emit0("mbarrier.init", [bar, self._u32(count, e)])
        return Ref(None)

    def prim_mbarrier_arrive(self, e: ast.AST, bars: Operand, index: Operand) -> Operand:
        bar = self._mbar(e, "mbarrier_arrive", bars, index)
        return self.fn.emit1("mbarrier.arrive", [bar])

    def prim_mbarrier_arrive_expect_tx(
        self, e: ast.AST, bars: Operand, index: Operand, tx: Operand
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_arrive_expect_tx", bars, index)
        return self.fn.emit1("mbarrier.arrive_expect_tx", [bar, self._u32(tx, e)])

    def prim_mbarrier_complete_tx(
        self, e: ast.AST, bars: Operand, index: Operand, tx: Operand
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_complete_tx", bars, index)
        self.fn.emit0("mbarrier.complete_tx", [bar, self._u32(tx, e)])
        return Ref(None)

    def prim_mbarrier_test_wait(
        self, e: ast.AST, bars: Operand, index: Operand, state: Operand
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_test_wait", bars, index)
        return self.fn.emit1("mbarrier.test_wait", [bar, self.value(state, e, U64)])

    def prim_mbarrier_try_wait_parity(
        self, e: ast.AST, bars: Operand, index: Operand, parity: Operand, hint: Operand = Lit(0)
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_try_wait_parity", bars, index)
        args = [bar, self._u32(parity, e), self._u32(hint, e)]
        return self.fn.emit1("mbarrier.try_wait_parity", args)

    def prim_mbarrier_inval(self, e: ast.AST, bars: Operand, index: Operand) -> Operand:
        bar = self._mbar(e, "mbarrier_inval", bars, index)
        self.fn.emit0("mbarrier.inval", [bar])
        return Ref(None)

    # ---- warpgroup MMA and warp specialisation (issue 13, sm_90a)
    def prim_wgmma_desc(
        self,
        e: ast.AST,
        arr: Operand,
        index: Operand = Lit(0),
        *,
        leading_byte_offset: Operand,
        stride_byte_offset: Operand,
        swizzle: Operand = Ref("128B"),
    ) -> Operand:
        if not isinstance(arr, ArrayView) or arr.space != "shared":
            raise self.error(e, "wgmma_desc needs a shared array", KernelTypeError)
        sw = self._str(swizzle, e, "swizzle", ("128B", "64B", "32B", "none"))
        ptr = self.element_ptr(arr, [index], e)
        lbo, sbo = self._u32(leading_byte_offset, e), self._u32(stride_byte_offset, e)
        return self.fn.emit1(f"wgmma.desc.{sw}", [ptr, lbo, sbo])

    def prim_wgmma_zero(self, e: ast.AST, n: Operand, dtype: Operand = Ref(lang.f32)) -> Operand:
        lanes = self._const_int(n, e, "n") // 2
        return self.fn.emit1("wgmma.zero", [], Vec(self._dtype(dtype, e), lanes))

    def prim_wgmma(
        self,
        e: ast.AST,
        acc: Operand,
        a: Operand,
        b_desc: Operand,
        *,
        n: Operand,
        a_type: Operand = Ref("bf16"),
        b_type: Operand = Ref(None),
        scale_d: Operand = Lit(True),
        trans_a: Operand = Lit(False),
        trans_b: Operand = Lit(False),
    ) -> Operand:
        types = ("f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")
        ta = self._str(a_type, e, "a_type", types)
        tb = (
            ta
            if isinstance(b_type, Ref) and b_type.obj is None
            else self._str(b_type, e, "b_type", types)
        )
        flags = ""
        for name, op in (("trans_a", trans_a), ("trans_b", trans_b)):
            if not isinstance(op, Lit) or not isinstance(op.value, bool):
                raise self.error(e, f"{name} must be True or False", KernelTypeError)
            flags += f".{name}" if op.value else ""
        if not isinstance(acc, Value):
            raise self.error(e, "wgmma needs an accumulator (wgmma_zero(n))", KernelTypeError)
        av = a if isinstance(a, Value) else self.value(a, e, U64)
        bv = self.value(b_desc, e, U64)
        sd = self.to_bool(scale_d, e)
        sv = self.fn.const(BOOL, sd) if isinstance(sd, bool) else sd
        n_ = self._const_int(n, e, "n")
        mn = f"wgmma.m64n{n_}.{ta}.{tb}{flags}"
        return self.fn.emit1(mn, [acc, av, bv, sv], acc.ty)

    # ---- warp MMA fragments (issue 12, sm_80+): per-lane vector registers
    def prim_ldmatrix(
        self,
        e: ast.AST,
        arr: Operand,
        index: Operand = Lit(0),
        num: Operand = Lit(4),
        trans: Operand = Lit(False),
    ) -> Operand:
        if not isinstance(arr, ArrayView) or arr.space != "shared":
            raise self.error(e, "ldmatrix needs a shared array", KernelTypeError)
        n = self._const_int(num, e, "num")
        if n not in (1, 2, 4):
            raise self.error(e, f"ldmatrix loads 1, 2 or 4 matrices, got {n}", KernelTypeError)
        if not isinstance(trans, Lit) or not isinstance(trans.value, bool):
            raise self.error(e, "trans must be True or False", KernelTypeError)
        ptr = self.element_ptr(arr, [index], e)
        mn = f"ldmatrix.x{n}" + (".trans" if trans.value else "")
        return self.fn.emit1(mn, [ptr], U32 if n == 1 else Vec(U32, n))

    def prim_stmatrix(
        self,
        e: ast.AST,
        arr: Operand,
        index: Operand,
        frag: Operand,
        trans: Operand = Lit(False),
    ) -> Operand:
        if not isinstance(arr, ArrayView) or arr.space != "shared":
            raise self.error(e, "stmatrix needs a shared array", KernelTypeError)
        if not isinstance(frag, Value):
            raise self.error(e, "stmatrix stores a fragment (ldmatrix's kind)", KernelTypeError)
        ty = frag.ty
        n = ty.lanes if isinstance(ty, Vec) else 1
        if not isinstance(trans, Lit) or not isinstance(trans.value, bool):
            raise self.error(e, "trans must be True or False", KernelTypeError)
        ptr = self.element_ptr(arr, [index], e)
        self.fn.emit0(f"stmatrix.x{n}" + (".trans" if trans.value else ""), [ptr, frag])
        return Ref(None)

    def prim_mma_sync(
        self, e: ast.AST, a: Operand, b: Operand, c: Operand, elem: Operand = Ref("f16")
    ) -> Operand:
        shapes = {
            "f16": "m16n8k16",
            "bf16": "m16n8k16",
            "tf32": "m16n8k8",
            "s8": "m16n8k32",
            "u8": "m16n8k32",
            "e4m3": "m16n8k32",
            "e5m2": "m16n8k32",
            "f64": "m8n8k4",
        }
        el = self._str(elem, e, "elem", tuple(shapes))
        if not (isinstance(a, Value) and isinstance(b, Value) and isinstance(c, Value)):
            raise self.error(
                e, "mma_sync takes fragments (ldmatrix, frag_zero results)", KernelTypeError
            )
        return self.fn.emit1(f"mma.sync.{shapes[el]}.{el}", [a, b, c], c.ty)

    def prim_frag_zero(self, e: ast.AST, n: Operand, dtype: Operand = Ref(lang.f32)) -> Operand:
        # The accumulator of zeros `wgmma.zero` makes serves any fragment of n lanes.
        lanes = self._const_int(n, e, "n")
        return self.fn.emit1("wgmma.zero", [], Vec(self._dtype(dtype, e), lanes))

    def prim_frag_get(self, e: ast.AST, frag: Operand, i: Operand) -> Operand:
        return self.prim_wgmma_acc(e, frag, i)

    def prim_wgmma_acc(self, e: ast.AST, acc: Operand, i: Operand) -> Operand:
        if not isinstance(acc, Value) or not isinstance(acc.ty, Vec):
            raise self.error(e, "wgmma_acc needs a wgmma accumulator", KernelTypeError)
        ty = acc.ty
        assert isinstance(ty, Vec)
        return self.fn.emit1("extract", [acc], ty.elem, lane=self._const_int(i, e, "i"))

    def prim_wgmma_wait_group(self, e: ast.AST, n: Operand) -> Operand:
        self.fn.emit0(f"wgmma.wait_group.{self._const_int(n, e, 'n')}", [])
        return Ref(None)

    def prim_setmaxnreg(self, e: ast.AST, count: Operand, *, increase: Operand) -> Operand:
        if not isinstance(increase, Lit) or not isinstance(increase.value, bool):
            raise self.error(e, "increase must be True or False", KernelTypeError)
        way = "inc" if increase.value else "dec"
        self.fn.emit0(f"setmaxnreg.{way}.{self._const_int(count, e, 'count')}", [])
        return Ref(None)

    # Clusters, DSMEM, PDL and grid sync (h13-cluster).
    def _emit_sync(self, mnemonics: list[str]) -> Operand:
        for m in mnemonics:
            self.fn.emit0(m, [])
        return Ref(None)

    def prim_cluster_sync(self, e: ast.AST) -> Operand:
        return self._emit_sync(["cluster_barrier.arrive", "cluster_barrier.wait"])

    def _dsmem(self, e: ast.AST, name: str, arr: Operand, index: Operand, rank: Operand) -> Value:
        """`arr[index]` in the cluster's block of rank `rank` (a shared_cluster pointer)."""
        if not isinstance(arr, ArrayView) or arr.space != "shared":
            raise self.error(e, f"{name} needs a shared array (shared.array(...))", KernelTypeError)
        idx: list[Operand] = index.items if isinstance(index, TupleVal) else [index]
        if len(idx) != arr.ndim:
            raise self.error(
                e,
                f"array has {arr.ndim} dimension(s) but {len(idx)} indices were given",
                KernelTypeError,
            )
        p = self.element_ptr(arr, idx, e)
        return self.fn.emit1("mapa", [p, self._u32(rank, e)], ir.Ptr("shared_cluster", arr.dtype))

    def prim_dsmem_load(self, e: ast.AST, arr: Operand, index: Operand, rank: Operand) -> Operand:
        p = self._dsmem(e, "dsmem_load", arr, index, rank)
        assert isinstance(arr, ArrayView)
        return self.fn.emit1("load", [p], arr.dtype)

    def prim_dsmem_store(
        self, e: ast.AST, arr: Operand, index: Operand, rank: Operand, value: Operand
    ) -> Operand:
        p = self._dsmem(e, "dsmem_store", arr, index, rank)
        assert isinstance(arr, ArrayView)
        self.fn.emit0("store", [p, self.value(value, e, arr.dtype)])
        return Ref(None)

    def _shape(self, shape: Operand, e: ast.AST) -> list[int]:
        items = shape.items if isinstance(shape, TupleVal) else [shape]
        dims = [self._const_int(s, e, "shape") for s in items]
        if not 1 <= len(dims) <= 3 or any(d <= 0 for d in dims):
            raise self.error(e, "shape must have 1 to 3 positive dimensions", KernelTypeError)
        return dims

    def _static_array(
        self, op: str, space: str, shape: Operand, dtype: Operand, e: ast.AST
    ) -> ArrayView:
        dims = self._shape(shape, e)
        t = self._dtype(dtype, e)
        count = math.prod(dims)
        ptr = self.fn.emit1(op, [], Ptr(space, t), elem=t, count=count)
        strides = [math.prod(dims[k + 1 :]) for k in range(len(dims))]
        return ArrayView(ptr, t, list(dims), list(strides))

    def prim_shared_array(self, e: ast.AST, shape: Operand, dtype: Operand) -> Operand:
        return self._static_array("shared_alloc", "shared", shape, dtype, e)

    def prim_local_array(self, e: ast.AST, shape: Operand, dtype: Operand) -> Operand:
        return self._static_array("alloca", "local", shape, dtype, e)

    def prim_shared_dynamic(self, e: ast.AST, dtype: Operand) -> Operand:
        t = self._dtype(dtype, e)
        ptr = self.fn.emit1("dyn_shared", [], Ptr("shared", t), elem=t)
        return ArrayView(ptr, t, [None], [1])
