"""Expressions and calls (device functions, ``zyntax.lang`` objects, math) of the
kernel translator."""

from __future__ import annotations

import ast
import builtins
import re
from typing import Any, cast

import numpy as np

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Value
from zyntax.frontend.errors import (
    KernelError,
    KernelNameError,
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    U32,
    HType,
    Scalar,
)
from zyntax.frontend.translate.core import TranslatorCore
from zyntax.frontend.translate.operands import (
    _CMPOPS,
    _HIR_BINOPS,
    _OP_SYMBOL,
    _PY_BINOPS,
    _PY_CMP,
    MATH_FUNCS,
    ArrayParam,
    ArrayView,
    Lit,
    Operand,
    ParamSpec,
    Ref,
    TupleVal,
    _convert_hint,
    _expr_name,
    default_type,
    describe,
    lit_type_with,
    mangle,
    promote,
)
from zyntax.frontend.translate.plain import emit_plain, plain


class ExprTranslator(TranslatorCore):
    """Python expressions as HIR values."""

    # ---------------------------------------------------------------- expressions
    def expr(self, e: ast.expr) -> Operand:
        if id(e) in self._subst:  # a tiled reduction's loaded operand or accumulator
            return self._subst[id(e)]
        meth = getattr(self, "expr_" + type(e).__name__, None)
        if meth is None:
            raise self.error(e, f"{_expr_name(e)} is not supported in kernels")
        prev = self.fn.loc
        self.set_loc(e)
        r: Operand = meth(e)
        self.fn.loc = prev
        return r

    def expr_Constant(self, e: ast.Constant) -> Operand:
        v = e.value
        if isinstance(v, (bool, int, float)):
            return Lit(v)
        if isinstance(v, str) or v is None:
            return Ref(v)
        raise self.error(e, f"constant {v!r} is not supported in kernels")

    def expr_Name(self, e: ast.Name) -> Operand:
        return self.load_name(e.id, e)

    def load_name(self, name: str, node: ast.AST) -> Operand:
        if name in self.static:
            return self.static[name]
        if name in self.locals:
            v = self.read_var(name)
            if v is None:
                raise self.error(
                    node,
                    f"local variable '{name}' might be used before it is assigned",
                    KernelNameError,
                )
            return v
        return self.global_operand(name, node)

    def global_operand(self, name: str, node: ast.AST) -> Operand:
        f = self.pyfunc
        found = False
        obj: Any = None
        code = f.__code__
        if f.__closure__ and name in code.co_freevars:
            cell = f.__closure__[code.co_freevars.index(name)]
            try:
                obj, found = cell.cell_contents, True
            except ValueError:
                found = False
        if not found and name in f.__globals__:
            obj, found = f.__globals__[name], True
        if not found and hasattr(builtins, name):
            obj, found = getattr(builtins, name), True
        if not found:
            raise self.error(node, f"name '{name}' is not defined", KernelNameError)
        return self.wrap_object(obj, name, node)

    def wrap_object(self, obj: Any, name: str, node: ast.AST) -> Operand:
        if isinstance(obj, (bool, int, float)):
            return Lit(obj)
        if isinstance(obj, np.generic) and np.isscalar(obj):
            return Lit(cast(np.generic, obj).item())
        if isinstance(obj, tuple) and all(isinstance(x, (int, float, bool)) for x in obj):
            return TupleVal([Lit(x) for x in obj])
        return Ref(obj)

    def _peek_ref(self, e: ast.expr) -> Operand | None:
        if isinstance(e, ast.Name) and e.id not in self.locals and e.id not in self.static:
            try:
                return self.global_operand(e.id, e)
            except KernelError:
                return None
        return None

    def expr_Attribute(self, e: ast.Attribute) -> Operand:
        base = self.expr(e.value)
        attr = e.attr
        if isinstance(base, Ref):
            obj = base.obj
            if isinstance(obj, lang._Dim3):
                if attr not in ("x", "y", "z"):
                    raise self.error(e, f"{obj._name} has no attribute '{attr}' (use x, y or z)")
                v = self.fn.emit1(f"{obj._name}.{attr}", [], U32)
                return self.fn.emit1("cast", [v], I32)
            if not hasattr(obj, attr):
                raise self.error(
                    e,
                    f"'{getattr(obj, '__name__', obj)!s}' has no attribute '{attr}'",
                    KernelNameError,
                )
            return self.wrap_object(getattr(obj, attr), attr, e)
        if isinstance(base, ArrayView):
            if attr == "shape":
                return TupleVal([self._dim_operand(s, e) for s in base.shape])
            if attr == "ndim":
                return Lit(base.ndim)
            if attr == "size":
                acc: Operand = Lit(1)
                for s in base.shape:
                    acc = self.binop(ast.Mult(), acc, self._dim_operand(s, e), e)
                return acc
            raise self.error(
                e, f"arrays have no attribute '{attr}' in kernels (use shape, ndim, size)"
            )
        raise self.error(e, f"{describe(base)} has no attribute '{attr}'")

    def _dim_operand(self, s: Value | int | None, node: ast.AST) -> Operand:
        if s is None:
            raise self.error(node, "the size of dynamic shared memory is not known in the kernel")
        return Lit(s) if isinstance(s, int) else s

    def expr_Tuple(self, e: ast.Tuple) -> Operand:
        return TupleVal([self.expr(x) for x in e.elts])

    expr_List = expr_Tuple

    def expr_Subscript(self, e: ast.Subscript) -> Operand:
        base = self.expr(e.value)
        if isinstance(base, TupleVal):
            idx = self.expr(e.slice)
            if not isinstance(idx, Lit) or not isinstance(idx.value, int):
                raise self.error(e.slice, "tuples can only be indexed by constants")
            try:
                return base.items[idx.value]
            except IndexError:
                raise self.error(e.slice, "tuple index out of range", KernelTypeError) from None
        if not isinstance(base, ArrayView):
            raise self.error(e.value, f"cannot index {describe(base)}", KernelTypeError)
        idx_ops = self._index_list(e.slice)
        if len(idx_ops) > base.ndim:
            raise self.error(
                e, f"too many indices: array has {base.ndim} dimension(s)", KernelTypeError
            )
        if len(idx_ops) < base.ndim:
            # Partial indexing: a view of the remaining dimensions (a[i][j] works).
            ptr = self.element_ptr(
                ArrayView(
                    base.ptr, base.dtype, base.shape[: len(idx_ops)], base.strides[: len(idx_ops)]
                ),
                idx_ops,
                e,
            )
            n = len(idx_ops)
            return ArrayView(ptr, base.dtype, base.shape[n:], base.strides[n:])
        ptr = self.element_ptr(base, idx_ops, e)
        return self.fn.emit1("load", [ptr], base.dtype)

    def _index_list(self, sl: ast.expr) -> list[Operand]:
        if isinstance(sl, ast.Slice):
            raise self.error(sl, "slices are not supported in kernels; index element by element")
        if isinstance(sl, ast.Tuple):
            return [self.expr(x) for x in sl.elts]
        return [self.expr(sl)]

    def _subscript_parts(self, t: ast.Subscript) -> tuple[ArrayView, list[Operand]]:
        base = self.expr(t.value)
        if not isinstance(base, ArrayView):
            raise self.error(t.value, f"cannot store into {describe(base)}", KernelTypeError)
        idx = self._index_list(t.slice)
        if len(idx) != base.ndim:
            raise self.error(
                t,
                f"array has {base.ndim} dimension(s) but {len(idx)} indices were given",
                KernelTypeError,
            )
        return base, idx

    def element_ptr(self, view: ArrayView, idx: list[Operand], node: ast.AST) -> Value:
        # Global arrays index in i64 (their shapes are i64); shared/local in i32 (small, constant).
        ity = I64 if view.space in ("global", "generic") else I32
        off: Operand = Lit(0)
        for i, (ix, st) in enumerate(zip(idx, view.strides, strict=False)):
            t = self.scalar_type(ix, node)
            if not (t.is_int or (isinstance(ix, Lit) and isinstance(ix.value, int))):
                raise self.error(
                    node, f"array index {i} must be an integer, got {t}", KernelTypeError
                )
            ixv: Operand = ix if isinstance(ix, Lit) else self.value(ix, node, ity)
            stv: Operand = Lit(st) if isinstance(st, int) else self.value(st, node, ity)
            term = self._arith("mul", ixv, stv, ity, node)
            off = self._arith("add", off, term, ity, node)
        if isinstance(off, Lit) and off.value == 0:
            return view.ptr
        return self.fn.emit1("ptr_add", [view.ptr, self.value(off, node, ity)], view.ptr.ty)

    def _arith(self, op: str, a: Operand, b: Operand, ty: Scalar, node: ast.AST) -> Operand:
        """Index arithmetic with folding of constant zeros and ones."""
        if isinstance(a, Lit) and isinstance(b, Lit):
            return Lit(a.value + b.value if op == "add" else a.value * b.value)
        if op == "add":
            if isinstance(a, Lit) and a.value == 0:
                return b
            if isinstance(b, Lit) and b.value == 0:
                return a
        if op == "mul":
            if (isinstance(a, Lit) and a.value == 0) or (isinstance(b, Lit) and b.value == 0):
                return Lit(0)
            if isinstance(a, Lit) and a.value == 1:
                return b
            if isinstance(b, Lit) and b.value == 1:
                return a
        return self.fn.emit1(op, [self.value(a, node, ty), self.value(b, node, ty)])

    def expr_BinOp(self, e: ast.BinOp) -> Operand:
        return self.binop(e.op, self.expr(e.left), self.expr(e.right), e)

    def binop(self, op: ast.operator, a: Operand, b: Operand, node: ast.AST) -> Operand:
        sym = _OP_SYMBOL.get(type(op), "?")
        if isinstance(op, ast.MatMult):
            raise self.error(node, "'@' is not supported in kernels (use zyntax.lang.mma)")
        if isinstance(a, Lit) and isinstance(b, Lit):
            try:
                return Lit(_PY_BINOPS[type(op)](a.value, b.value))
            except (ZeroDivisionError, KeyError, OverflowError, ValueError) as ex:
                raise self.error(
                    node, f"cannot evaluate constant expression: {ex}", KernelTypeError
                ) from None
        if isinstance(a, TupleVal) or isinstance(b, TupleVal):
            raise self.error(node, f"unsupported operand types for {sym}: tuples", KernelTypeError)
        ta = self._op_type(a, b, node)
        tb = self._op_type(b, a, node)
        t = promote(ta, tb)
        if t is None:
            raise self.error(
                node,
                f"unsupported operand types for {sym}: {ta} and {tb} have no common type "
                f"({_convert_hint(node, ta, tb)})",
                KernelTypeError,
            )
        if isinstance(op, ast.Div):
            if not t.is_float:
                t = F64 if t.bits == 64 else F32
            return self.fn.emit1("div", [self.value(a, node, t), self.value(b, node, t)])
        if isinstance(op, ast.Pow):
            if isinstance(b, Lit) and isinstance(b.value, int) and 0 <= b.value <= 8:
                av = self.value(a, node, t)
                if b.value == 0:
                    return self.const(t, 1)
                r = av
                for _ in range(b.value - 1):
                    r = self.fn.emit1("mul", [r, av])
                return r
            raise self.error(
                node, "'**' needs a small constant integer exponent (0..8)", KernelTypeError
            )
        if isinstance(op, ast.MatMult):
            raise self.error(node, "'@' is not supported in kernels (use zyntax.lang.mma)")
        if t.is_bool:
            t = I32 if not isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) else BOOL
        av, bv = self.value(a, node, t), self.value(b, node, t)
        if (
            isinstance(op, (ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr, ast.BitXor))
            and t.is_float
        ):
            raise self.error(node, f"'{sym}' needs integer operands, got {t}", KernelTypeError)
        if isinstance(op, ast.FloorDiv):
            return self.floordiv(av, bv, t)
        if isinstance(op, ast.Mod):
            return self.mod(av, bv, t)
        return self.fn.emit1(_HIR_BINOPS[type(op)], [av, bv])

    def _op_type(self, x: Operand, other: Operand, node: ast.AST) -> Scalar:
        if isinstance(x, Lit):
            if isinstance(other, Lit):
                return default_type(x.value)
            return lit_type_with(x, self.scalar_type(other, node))
        return self.scalar_type(x, node)

    def floordiv(self, a: Value, b: Value, t: Scalar) -> Value:
        """Python's floor division: rounds toward negative infinity."""
        f = self.fn
        if t.is_float:
            q = f.emit1("div", [a, b])
            return f.emit1("floor", [q])
        q = f.emit1("div", [a, b])
        if t.is_unsigned:
            return q
        r = f.emit1("rem", [a, b])
        zero = self.const(t, 0)
        nz = f.emit1("cmp.ne", [r, zero])
        rneg = f.emit1("cmp.lt", [r, zero])
        bneg = f.emit1("cmp.lt", [b, zero])
        diff = f.emit1("xor", [rneg, bneg])
        adj = f.emit1("and", [nz, diff])
        one = self.const(t, 1)
        qm = f.emit1("sub", [q, one])
        return f.emit1("select", [adj, qm, q])

    def mod(self, a: Value, b: Value, t: Scalar) -> Value:
        """Python's modulo: the result has the divisor's sign."""
        f = self.fn
        if t.is_float:
            q = f.emit1("floor", [f.emit1("div", [a, b])])
            return f.emit1("sub", [a, f.emit1("mul", [q, b])])
        r = f.emit1("rem", [a, b])
        if t.is_unsigned:
            return r
        zero = self.const(t, 0)
        nz = f.emit1("cmp.ne", [r, zero])
        rneg = f.emit1("cmp.lt", [r, zero])
        bneg = f.emit1("cmp.lt", [b, zero])
        diff = f.emit1("xor", [rneg, bneg])
        adj = f.emit1("and", [nz, diff])
        rb = f.emit1("add", [r, b])
        return f.emit1("select", [adj, rb, r])

    def expr_UnaryOp(self, e: ast.UnaryOp) -> Operand:
        v = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            c = self.to_bool(v, e.operand)
            if isinstance(c, bool):
                return Lit(not c)
            return self.fn.emit1("not", [c])
        if isinstance(v, Lit):
            if isinstance(e.op, ast.USub):
                return Lit(-v.value)
            if isinstance(e.op, ast.UAdd):
                return v
            if isinstance(e.op, ast.Invert) and isinstance(v.value, int):
                return Lit(~v.value)
        t = self.scalar_type(v, e)
        val = self.value(v, e)
        if isinstance(e.op, ast.UAdd):
            return val
        if isinstance(e.op, ast.USub):
            if t.is_bool:
                val, t = self._convert(val, I32, e), I32
            return self.fn.emit1("neg", [val])
        if isinstance(e.op, ast.Invert):
            if not t.is_int:
                raise self.error(e, f"'~' needs an integer operand, got {t}", KernelTypeError)
            return self.fn.emit1("not", [val])
        raise self.error(e, "unsupported unary operator")

    def expr_BoolOp(self, e: ast.BoolOp) -> Operand:
        is_and = isinstance(e.op, ast.And)
        # Short-circuit through blocks: `i < n and a[i] > 0` must not load when i >= n.
        merge = self.fn.new_block(BOOL)
        result = merge.params[0]
        folded: bool | None = None
        for k, sub in enumerate(e.values):
            c = self.to_bool(self.expr(sub), sub)
            last = k == len(e.values) - 1
            if isinstance(c, bool):
                if c != is_and or last:
                    # Decides the result (False for and, True for or) or is the last operand.
                    cv = self.fn.const(BOOL, c)
                    self.fn.jump(merge, [cv])
                    folded = c
                    break
                continue  # neutral constant operand
            if last:
                self.fn.jump(merge, [c])
                break
            nxt = self.fn.new_block()
            short = self.fn.const(BOOL, not is_and)
            if is_and:
                self.fn.branch(c, nxt, merge, [], [short])
            else:
                self.fn.branch(c, merge, nxt, [short], [])
            self.seal(nxt)
            self.fn.switch_to(nxt)
        if not merge.preds:
            return Lit(bool(folded))
        self.fn.switch_to(merge)
        self.seal(merge)
        return result

    def expr_Compare(self, e: ast.Compare) -> Operand:
        left = self.expr(e.left)
        if len(e.ops) == 1:
            return self.compare(e.ops[0], left, self.expr(e.comparators[0]), e)
        # a < b < c: short-circuit chain evaluating b once.
        merge = self.fn.new_block(BOOL)
        result = merge.params[0]
        for k, (op, comp) in enumerate(zip(e.ops, e.comparators, strict=True)):
            right = self.expr(comp)
            c = self.compare(op, left, right, e)
            cv = c if isinstance(c, Value) else self.fn.const(BOOL, bool(c.value))  # type: ignore[union-attr]
            if k == len(e.ops) - 1:
                self.fn.jump(merge, [cv])
            else:
                nxt = self.fn.new_block()
                f = self.fn.const(BOOL, False)
                self.fn.branch(cv, nxt, merge, [], [f])
                self.seal(nxt)
                self.fn.switch_to(nxt)
            left = right
        self.fn.switch_to(merge)
        self.seal(merge)
        return result

    def compare(self, op: ast.cmpop, a: Operand, b: Operand, node: ast.AST) -> Operand:
        name = _CMPOPS.get(type(op))
        if name is None:
            raise self.error(
                node, f"'{type(op).__name__}' comparisons are not supported in kernels"
            )
        if isinstance(a, Lit) and isinstance(b, Lit):
            return Lit(_PY_CMP[name](a.value, b.value))
        ta, tb = self._op_type(a, b, node), self._op_type(b, a, node)
        t = promote(ta, tb)
        if t is None:
            raise self.error(
                node, f"cannot compare {ta} with {tb}; convert one side explicitly", KernelTypeError
            )
        return self.fn.emit1(f"cmp.{name}", [self.value(a, node, t), self.value(b, node, t)])

    def expr_IfExp(self, e: ast.IfExp) -> Operand:
        c = self.to_bool(self.expr(e.test), e.test)
        if isinstance(c, bool):
            return self.expr(e.body if c else e.orelse)
        then_b, else_b = self.fn.new_block(), self.fn.new_block()
        self.fn.branch(c, then_b, else_b)
        self.seal(then_b)
        self.seal(else_b)
        self.fn.switch_to(then_b)
        tv = self.expr(e.body)
        then_end = self.block
        self.fn.switch_to(else_b)
        ev = self.expr(e.orelse)
        else_end = self.block
        ta, tb = self._op_type(tv, ev, e), self._op_type(ev, tv, e)
        t = promote(ta, tb)
        if t is None:
            raise self.error(e, f"the branches have types {ta} and {tb}", KernelTypeError)
        merge = self.fn.new_block(t)
        res = merge.params[0]
        self.fn.switch_to(then_end)
        self.fn.jump(merge, [self.value(tv, e.body, t)])
        self.fn.switch_to(else_end)
        self.fn.jump(merge, [self.value(ev, e.orelse, t)])
        self.fn.switch_to(merge)
        self.seal(merge)
        return res

    # ---------------------------------------------------------------- calls
    def expr_Call(self, e: ast.Call) -> Operand:
        callee = self.expr(e.func)
        if not isinstance(callee, Ref):
            raise self.error(e.func, f"{describe(callee)} is not callable", KernelTypeError)
        obj = callee.obj
        args = [self.expr(a) for a in e.args]
        if any(isinstance(a, ast.Starred) for a in e.args):
            raise self.error(e, "*args are not supported in kernels")
        kwargs = {}
        for kw in e.keywords:
            if kw.arg is None:
                raise self.error(e, "**kwargs are not supported in kernels")
            kwargs[kw.arg] = self.expr(kw.value)
        return self.call(obj, args, kwargs, e)

    def call(
        self, obj: Any, args: list[Operand], kwargs: dict[str, Operand], e: ast.Call
    ) -> Operand:
        if isinstance(obj, lang.DType):
            if len(args) != 1 or kwargs:
                raise self.error(e, f"{obj!r}() takes exactly one argument", KernelTypeError)
            return self.value(args[0], e, ir.scalar(obj.name))
        if obj is float:
            return self.value(self._one(args, kwargs, e, "float"), e, F32)
        if obj is int:
            return self.value(self._one(args, kwargs, e, "int"), e, I32)
        if obj is bool:
            a = self._one(args, kwargs, e, "bool")
            c = self.to_bool(a, e)
            return Lit(c) if isinstance(c, bool) else c
        if obj is len:
            a = self._one(args, kwargs, e, "len")
            if not isinstance(a, ArrayView):
                raise self.error(e, "len() needs an array", KernelTypeError)
            return self._dim_operand(a.shape[0], e)
        if obj is range:
            raise self.error(e, "range() can only be used as the iterable of a for loop")
        fname = MATH_FUNCS.get(id(obj))
        if fname is not None:
            return self.math(fname, args, kwargs, e)
        # @zyntax.func and @zyntax.kernel objects say which they are (kernel.py
        # defines them and imports this module, so it is not imported here).
        role = getattr(type(obj), "zyntax_role", None)
        if role == "func":
            return self.call_device(obj, args, kwargs, e)
        if role == "kernel":
            raise self.error(
                e, f"kernel '{obj.__name__}' cannot be called from device code; use @zyntax.func"
            )
        if isinstance(obj, lang.Primitive):
            key = obj.qualname.replace(".", "_").rstrip("_")
            # One instruction on the call's operands: declared (translate/plain.py).
            p = plain(obj)
            handler = getattr(self, "prim_" + key, None) if p is None else None
            if p is None and handler is None:
                raise self.error(e, f"primitive {obj.qualname} is not supported yet")
            try:
                if p is not None:
                    return emit_plain(self, p, e, args, kwargs)
                return handler(e, *args, **kwargs)  # type: ignore[no-any-return, misc]
            except TypeError as ex:
                if isinstance(ex, KernelError):
                    raise
                why = re.sub(r"^\S*prim_\w+\(\) ", "", str(ex))
                raise self.error(
                    e, f"zyntax.lang.{obj.qualname}(): {why}", KernelTypeError
                ) from None
        raise self.error(
            e,
            f"cannot call {getattr(obj, '__name__', repr(obj))!s} in a kernel: only @zyntax.func "
            "functions, math functions, casts and zyntax.lang primitives",
        )

    def _one(
        self, args: list[Operand], kwargs: dict[str, Operand], e: ast.AST, what: str
    ) -> Operand:
        if len(args) != 1 or kwargs:
            raise self.error(e, f"{what}() takes exactly one argument", KernelTypeError)
        return args[0]

    def math(
        self, fname: str, args: list[Operand], kwargs: dict[str, Operand], e: ast.Call
    ) -> Operand:
        if kwargs:
            raise self.error(e, f"{fname}() takes no keyword arguments", KernelTypeError)
        if fname in ("min", "max"):
            if len(args) < 2:
                raise self.error(e, f"{fname}() needs at least two arguments", KernelTypeError)
            acc = args[0]
            for b in args[1:]:
                if isinstance(acc, Lit) and isinstance(b, Lit):
                    acc = Lit(
                        min(acc.value, b.value) if fname == "min" else max(acc.value, b.value)
                    )
                    continue
                ta, tb = self._op_type(acc, b, e), self._op_type(b, acc, e)
                t = promote(ta, tb)
                if t is None:
                    raise self.error(e, f"{fname}() of {ta} and {tb}", KernelTypeError)
                acc = self.fn.emit1(fname, [self.value(acc, e, t), self.value(b, e, t)])
            return acc
        if fname == "fma":
            if len(args) != 3:
                raise self.error(e, "fma() takes 3 arguments", KernelTypeError)
            ft: Scalar | None = None
            for a in args:
                if isinstance(a, Value):
                    at = self.scalar_type(a, e)
                    ft = at if ft is None else (promote(ft, at) or F64)
            if ft is None or not ft.is_float:
                ft = F32 if ft is None or ft.bits < 64 else F64
            return self.fn.emit1("fma", [self.value(a, e, ft) for a in args])
        if len(args) != 1:
            raise self.error(e, f"{fname}() takes 1 argument", KernelTypeError)
        a = args[0]
        if isinstance(a, Lit):
            if fname == "abs":
                return Lit(builtins.abs(a.value))
            a = self.value(a, e, F32)
        t = self.scalar_type(a, e)
        if fname == "abs":
            if t.is_bool or t.is_unsigned:
                return a
            return self.fn.emit1("abs", [self.value(a, e)])
        if not t.is_float:
            t = F64 if t.bits == 64 else F32
        return self.fn.emit1(fname, [self.value(a, e, t)])

    def call_device(
        self, df: Any, args: list[Operand], kwargs: dict[str, Operand], e: ast.Call
    ) -> Operand:
        if kwargs:
            raise self.error(e, "device functions take positional arguments only", KernelTypeError)
        specs: list[ParamSpec] = []
        flat: list[Value] = []
        for a in args:
            if isinstance(a, ArrayView):
                layout = "C" if isinstance(a.strides[-1], int) and a.strides[-1] == 1 else "A"
                specs.append(ArrayParam(a.dtype, a.ndim, layout, a.space))
                flat.append(a.ptr)
                for s in a.shape:
                    if s is None:
                        raise self.error(e, "dynamic shared memory cannot be passed to functions")
                    flat.append(
                        self.value(Lit(s), e, I64) if isinstance(s, int) else self.value(s, e, I64)
                    )
                for st in a.strides:
                    flat.append(
                        self.value(Lit(st), e, I64)
                        if isinstance(st, int)
                        else self.value(st, e, I64)
                    )
            elif isinstance(a, (Lit, Value)):
                t = self.scalar_type(a, e)
                specs.append(t)
                flat.append(self.value(a, e, t))
            else:
                raise self.error(
                    e, f"cannot pass {describe(a)} to a device function", KernelTypeError
                )
        pinned = df.signature_specs()
        if pinned is not None:
            if len(pinned) != len(specs):
                raise self.error(
                    e,
                    f"'{df.__name__}' takes {len(pinned)} arguments, got {len(specs)}",
                    KernelTypeError,
                )
            flat = []
            specs2: list[ParamSpec] = []
            for a, want in zip(args, pinned, strict=True):
                if isinstance(want, Scalar):
                    flat.append(self.value(a, e, want))
                    specs2.append(want)
                else:
                    raise self.error(
                        e,
                        "annotate only scalar parameters of device functions",
                        KernelTypeError,
                    )
            specs = specs2
        name, rets = self.ctx_device(df, specs, e)
        results = self.fn.emit("call", flat, rets, {"callee": name})
        if not results:
            return Ref(None)
        if len(results) == 1:
            return results[0]
        return TupleVal(list(results))

    def ctx_device(self, df: Any, specs: list[ParamSpec], e: ast.AST) -> tuple[str, list[HType]]:
        key = (id(df), tuple(specs))
        got = self.ctx.device_funcs.get(key)
        if got is not None:
            return got
        if id(df) in self.ctx.in_progress:
            raise self.error(e, f"recursive call of '{df.__name__}' is not supported")
        self.ctx.in_progress.add(id(df))
        try:
            name = f"{df.__name__}__{'_'.join(mangle(s) for s in specs) or 'v'}"
            tr = type(self)(  # the whole translator (this class is one of its bases)
                df.pyfunc, specs, kind="device", name=name, ctx=self.ctx, source=df.source()
            )
            tr.translate()
        finally:
            self.ctx.in_progress.discard(id(df))
        rets = list(tr.ret_types or [])
        self.ctx.device_funcs[key] = (name, rets)
        self.ctx.sources.append(df.pyfunc)
        return name, rets
