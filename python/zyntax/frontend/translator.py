"""Python AST -> HIR translation for ``@zyntax.kernel`` and ``@zyntax.func``.

:class:`FunctionTranslator` is the driver and the statements; it stands on
the classes of :mod:`zyntax.frontend.translate` (operands and type rules,
the core with the SSA variables, expressions and calls, the primitives).

Design:

- **Straight into the native builder.** Each function is one
  ``zyntax.hir.FunctionBuilder`` (:mod:`zyntax.frontend.emit`); instructions go
  in by their ``.zir`` mnemonic with the statement's Python location set first.
  There is no Python-side IR and no text round trip.
- **SSA by block parameters.** Mutable locals are the builder's SSA variables
  (Braun et al.'s on-the-fly construction, in Rust): reads that cross block
  boundaries create block parameters (pending ones in loop headers until the
  back edges are known and the header is sealed) and trivial parameters are
  removed. Nothing goes through memory, so the interpreter and LLVM both see
  plain SSA.
- **Types.** Every variable has one type for the whole function. It starts as
  the type of its first assignment (or its annotation); when a later
  assignment needs a wider type (``acc = 0`` then ``acc += x[i]`` with ``x``
  f32), the variable is widened and the function translated again, so the
  first assignment is materialised with the final type. Python literals are
  weakly typed (they take the other operand's type), like JAX and Triton.
- **Arrays.** An N-d array parameter is a ``ptr<global, T>`` plus N ``i64``
  shapes and N ``i64`` strides in elements (see ``docs/kernels.md``, "ABI").
"""

from __future__ import annotations

import ast
from typing import Any

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend import nest_tiling
from zyntax.frontend.emit import Block, Emitter, Value, native_type
from zyntax.frontend.errors import (
    KernelNameError,
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    I32,
    I64,
    HType,
    Scalar,
)
from zyntax.frontend.translate.operands import (
    ArrayParam,
    ArrayView,
    Lit,
    ModuleContext,
    Operand,
    ParamSpec,
    Ref,
    SourceInfo,
    TensorMapParam,
    TupleVal,
    _Restart,
    _stmt_name,
    default_type,
    describe,
    lit_type_with,
    load_source,
    mangle,
    param_hir_types,
    promote,
    spec_from_annotation,
)
from zyntax.frontend.translate.prims_mem import MemPrimTranslator

__all__ = [
    "ArrayParam",
    "FunctionTranslator",
    "ModuleContext",
    "ParamSpec",
    "SourceInfo",
    "TensorMapParam",
    "load_source",
    "mangle",
    "param_hir_types",
    "spec_from_annotation",
]


class FunctionTranslator(MemPrimTranslator):
    """Translates one Python function, specialised on parameter specs, into a
    function of the context's native module (through :class:`Emitter`)."""

    # ---------------------------------------------------------------- driver
    def translate(self) -> None:
        """Build the function into the context's module (``zyntax.hir.Module``)."""
        for _ in range(16):
            try:
                self._translate_once()
                return
            except _Restart:
                continue
        raise self.error(self.src.tree, "type inference did not converge", KernelTypeError)

    def _translate_once(self) -> None:
        fdef = self.src.tree
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.error(
                fdef, "kernel parameters must be plain positional parameters without defaults"
            )
        if len(a.args) != len(self.specs):
            raise self.error(
                fdef,
                f"'{fdef.name}' takes {len(a.args)} parameters but got {len(self.specs)} types",
                KernelTypeError,
            )
        hir_params: list[HType] = []
        for s in self.specs:
            hir_params.extend(param_hir_types(s))
        if self.kind == "device" and self.ret_types is None and fdef.returns is not None:
            ann = self._eval_annotation(fdef.returns)
            if isinstance(ann, lang.DType):
                self.ret_types = [ir.scalar(ann.name)]
            elif isinstance(ann, tuple) and all(isinstance(t, lang.DType) for t in ann):
                self.ret_types = [ir.scalar(t.name) for t in ann]
            elif ann is None:
                self.ret_types = []
            else:
                raise self.error(fdef.returns, "return annotation must be a zyntax scalar type")
            self.ret_annotated = True
        m = self.ctx.module
        params_n = [native_type(t) for t in hir_params]
        if self.kind == "kernel":
            b = m.kernel(self.name, params_n, **self.kernel_opts)
        else:
            rets = [native_type(t) for t in self.ret_types or []]
            b = m.device_function(self.name, params_n, rets)
        self.fn = Emitter(b, hir_params, kernel=self.pyfunc.__name__)
        self.fn.set_function_loc((self.src.file, fdef.lineno + self.src.line_offset, 1))
        try:
            self._translate_body(fdef)
        except BaseException:
            self.fn.abandon()  # the next attempt (or nobody) declares it again
            raise
        self.fn.finish()

    def _translate_body(self, fdef: ast.FunctionDef) -> None:
        a = fdef.args
        self.static: dict[str, Operand] = {}
        self.loops: list[tuple[Block, Block]] = []  # (continue target, break target)
        self.depth = 0
        self.hidden = 0
        self.saw_return_value = False
        self.tiling_report = []
        self._subst: dict[int, Operand] = {}
        self.seal(self.fn.entry)
        params = list(self.fn.entry.params)
        for arg, spec in zip(a.args, self.specs, strict=True):
            if isinstance(spec, Scalar):
                v = params.pop(0)
                self.var_types.setdefault(arg.arg, spec)
                if self.var_types[arg.arg] != spec:
                    self.write_var(arg.arg, self._convert(v, self.var_types[arg.arg], arg))
                else:
                    self.write_var(arg.arg, v)
            elif isinstance(spec, TensorMapParam):
                if arg.arg in self.assign_count:
                    raise self.error(arg, f"tensor map parameter '{arg.arg}' cannot be reassigned")
                self.static[arg.arg] = params.pop(0)
            else:
                ptr = params.pop(0)
                shapes: list[Value | int | None] = [params.pop(0) for _ in range(spec.ndim)]
                strides: list[Value | int] = [params.pop(0) for _ in range(spec.ndim)]
                if spec.layout == "C":
                    strides[-1] = 1
                if arg.arg in self.assign_count:
                    raise self.error(arg, f"array parameter '{arg.arg}' cannot be reassigned")
                self.static[arg.arg] = ArrayView(ptr, spec.dtype, shapes, strides)
        body = fdef.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # docstring
        self.stmts(body)
        if not self.fn.terminated:
            if self.kind == "device" and self.ret_types:
                raise self.error(
                    fdef,
                    f"'{fdef.name}' returns a value on some paths but not at its end",
                    KernelTypeError,
                )
            self.fn.emit0("return", [])
        if self.kind == "device" and self.ret_types is None:
            self.ret_types = []

    # ---------------------------------------------------------------- statements
    def stmts(self, body: list[ast.stmt]) -> None:
        for s in body:
            if self.fn.terminated:
                return  # the rest is unreachable (after return/break/continue)
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        self.set_loc(s)
        meth = getattr(self, "stmt_" + type(s).__name__, None)
        if meth is None:
            raise self.error(s, f"'{_stmt_name(s)}' statements are not supported in kernels")
        meth(s)

    def stmt_Pass(self, s: ast.Pass) -> None:
        pass

    def stmt_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # a string used as a comment
        self.expr(s.value)

    def stmt_Assign(self, s: ast.Assign) -> None:
        val = self.expr(s.value)
        for t in s.targets:
            self.assign(t, val, s.value)

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> None:
        if not isinstance(s.target, ast.Name):
            raise self.error(s.target, "annotated assignment needs a plain name")
        ann = self._eval_annotation(s.annotation)
        if not isinstance(ann, lang.DType):
            raise self.error(s.annotation, "local annotations must be zyntax scalar types")
        ty = ir.scalar(ann.name)
        old = self.var_types.get(s.target.id)
        if old is not None and old != ty:
            raise self.error(
                s, f"'{s.target.id}' is {old} elsewhere but annotated {ty}", KernelTypeError
            )
        self.var_types[s.target.id] = ty
        if s.value is not None:
            self.assign(s.target, self.expr(s.value), s.value)

    def stmt_AugAssign(self, s: ast.AugAssign) -> None:
        if isinstance(s.target, ast.Name):
            cur = self.load_name(s.target.id, s.target)
            new = self.binop(s.op, cur, self.expr(s.value), s)
            self.assign(s.target, new, s)
        elif isinstance(s.target, ast.Subscript):
            view, idx = self._subscript_parts(s.target)
            ptr = self.element_ptr(view, idx, s.target)
            cur = self.fn.emit1("load", [ptr], view.dtype)
            new = self.binop(s.op, cur, self.expr(s.value), s)
            self.fn.emit0("store", [ptr, self.value(new, s, view.dtype)])
        else:
            raise self.error(s.target, "unsupported target of augmented assignment")

    def assign(self, target: ast.expr, val: Operand, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, val, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(val, TupleVal) or len(val.items) != len(target.elts):
                n = len(val.items) if isinstance(val, TupleVal) else 1
                raise self.error(
                    target,
                    f"cannot unpack {n} value(s) into {len(target.elts)} targets",
                    KernelTypeError,
                )
            for t, v in zip(target.elts, val.items, strict=True):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            view, idx = self._subscript_parts(target)
            ptr = self.element_ptr(view, idx, target)
            self.fn.emit0("store", [ptr, self.value(val, node, view.dtype)])
        else:
            raise self.error(target, "unsupported assignment target")

    def assign_name(self, name: str, val: Operand, node: ast.AST) -> None:
        if name in self.static and not isinstance(self.static[name], Lit):
            raise self.error(node, f"'{name}' is an array/object binding and cannot be reassigned")
        single = self.assign_count.get(name, 0) <= 1 and name not in self.rebound
        if isinstance(val, (ArrayView, Ref, TupleVal)):
            if not single:
                raise self.error(
                    node,
                    f"'{name}' holds {describe(val)} and must be assigned exactly once",
                    KernelTypeError,
                )
            if isinstance(val, ArrayView) and self.depth:
                raise self.error(
                    node, f"array '{name}' must be created at the top level of the kernel"
                )
            if isinstance(val, TupleVal):
                raise self.error(node, "assign tuples by unpacking them: a, b = ...")
            self.static[name] = val
            return
        if isinstance(val, Lit) and single and not self.depth and name not in self.var_types:
            self.static[name] = val  # a compile-time constant
            return
        ty = self.var_types.get(name)
        if isinstance(val, Lit):
            if ty is None:
                ty = default_type(val.value)
                self.var_types[name] = ty
            elif isinstance(ty, Scalar):
                lt = lit_type_with(val, ty)
                j = promote(ty, lt)
                if j is not None and j != ty:
                    self.var_types[name] = j
                    raise _Restart
            self.write_var(name, self.value(val, node, ty if isinstance(ty, Scalar) else None))
            return
        assert isinstance(val, Value)
        vt = val.ty
        if ty is None:
            self.var_types[name] = vt
            self.write_var(name, val)
            return
        if vt != ty:
            if not isinstance(ty, Scalar) or not isinstance(vt, Scalar):
                raise self.error(node, f"'{name}' is {ty} but is assigned {vt}", KernelTypeError)
            j = promote(ty, vt)
            if j is None:
                raise self.error(
                    node,
                    f"'{name}' is {ty} but is assigned {vt}; convert explicitly, e.g. "
                    f"zyntax.{ty}(...)",
                    KernelTypeError,
                )
            if j != ty:
                self.var_types[name] = j
                raise _Restart
            val = self._convert(val, ty, node)
        self.write_var(name, val)

    def stmt_If(self, s: ast.If) -> None:
        cond = self.to_bool(self.expr(s.test), s.test)
        if isinstance(cond, bool):  # compile-time condition: translate one side only
            self.stmts(s.body if cond else s.orelse)
            return
        then_b, merge = self.fn.new_block(), self.fn.new_block()
        else_b = self.fn.new_block() if s.orelse else merge
        self.fn.branch(cond, then_b, else_b)
        self.seal(then_b)
        if else_b is not merge:
            self.seal(else_b)
        self.depth += 1
        self.fn.switch_to(then_b)
        self.stmts(s.body)
        if not self.fn.terminated:
            self.fn.jump(merge)
        if s.orelse:
            self.fn.switch_to(else_b)
            self.stmts(s.orelse)
            if not self.fn.terminated:
                self.fn.jump(merge)
        self.depth -= 1
        self.fn.switch_to(merge)
        self.seal(merge)
        if not merge.preds:
            self._dead()

    def _dead(self) -> None:
        # Nothing reaches here (both branches left): terminate so that the rest is skipped.
        self.fn.emit0("unreachable", [])

    def stmt_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.error(s, "'while ... else' is not supported in kernels")
        header, body, exit_b = self.fn.new_block(), self.fn.new_block(), self.fn.new_block()
        self.fn.jump(header)
        self.fn.switch_to(header)
        cond = self.to_bool(self.expr(s.test), s.test)
        if cond is False:
            self.fn.jump(exit_b)
        elif cond is True:
            self.fn.jump(body)
        else:
            self.fn.branch(cond, body, exit_b)
        self.seal(body)
        self.loops.append((header, exit_b))
        self.depth += 1
        self.fn.switch_to(body)
        self.stmts(s.body)
        if not self.fn.terminated:
            self.fn.jump(header)
        self.depth -= 1
        self.loops.pop()
        self.seal(header)
        self.fn.switch_to(exit_b)
        self.seal(exit_b)
        if not exit_b.preds:
            self._dead()

    def stmt_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.error(s, "'for ... else' is not supported in kernels")
        it = s.iter
        if isinstance(it, ast.Call):
            # `prange(...)`, `lang.prange(...)`, `zyntax.lang.prange(...)`
            ref = self._peek_ref(it.func)
            if isinstance(it.func, ast.Attribute):
                ref = self.expr(it.func)
            if isinstance(ref, Ref) and ref.obj is lang.prange:
                self._prange(s, it)
                return
        if not (
            isinstance(it, ast.Call)
            and isinstance(self._peek_ref(it.func), Ref)
            and self._peek_ref(it.func).obj is range  # type: ignore[union-attr]
        ):
            raise self.error(it, "kernels can only loop over range(...)")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "range() takes 1 to 3 positional arguments")
        ops = [self.expr(a) for a in it.args]
        if len(ops) == 1:
            ops = [Lit(0), ops[0], Lit(1)]
        elif len(ops) == 2:
            ops = [ops[0], ops[1], Lit(1)]
        start, stop, step = ops
        # Type of the induction variable: the common type of the bounds.
        ty: Scalar | None = None
        for o in ops:
            if isinstance(o, Value):
                t = self.scalar_type(o, it)
                if not t.is_int:
                    raise self.error(
                        it, f"range() bounds must be integers, got {t}", KernelTypeError
                    )
                ty = t if ty is None else promote(ty, t)
            elif not (
                isinstance(o, Lit) and isinstance(o.value, int) and not isinstance(o.value, bool)
            ):
                raise self.error(it, "range() bounds must be integers", KernelTypeError)
        if ty is None:
            vals = [o.value for o in ops if isinstance(o, Lit)]
            ty = I32 if all(-(2**31) <= int(v) < 2**31 for v in vals) else I64
        if isinstance(step, Lit) and step.value == 0:
            raise self.error(it, "range() step must not be zero", KernelTypeError)
        if isinstance(s.target, ast.Name):
            tname = s.target.id
            old = self.var_types.get(tname)
            if old is not None and old != ty:
                j = promote(old, ty) if isinstance(old, Scalar) else None
                if j is None:
                    raise self.error(
                        s.target, f"'{tname}' is {old} but loops over {ty}", KernelTypeError
                    )
                if j != old:
                    self.var_types[tname] = j
                    raise _Restart
                ty = j
        else:
            raise self.error(s.target, "the loop variable must be a plain name")
        self.hidden += 1
        iv = f"$iv{self.hidden}"
        self.var_types[iv] = ty
        start_v = self.value(start, s.iter, ty)
        stop_v = self.value(stop, s.iter, ty)
        step_v = self.value(step, s.iter, ty)
        self.write_var(iv, start_v)
        header, body = self.fn.new_block(), self.fn.new_block()
        latch, exit_b = self.fn.new_block(), self.fn.new_block()
        self.fn.jump(header)
        self.fn.switch_to(header)
        cur = self.read_var(iv)
        assert cur is not None
        if isinstance(step, Lit):
            cmp = "cmp.lt" if step.value > 0 else "cmp.gt"
            cond = self.fn.emit1(cmp, [cur, stop_v])
        else:
            # Dynamic step: (step > 0 and i < stop) or (step < 0 and i > stop).
            zero = self.const(ty, 0)
            pos = self.fn.emit1("cmp.gt", [step_v, zero])
            lt = self.fn.emit1("cmp.lt", [cur, stop_v])
            gt = self.fn.emit1("cmp.gt", [cur, stop_v])
            cond = self.fn.emit1("select", [pos, lt, gt])
        self.fn.branch(cond, body, exit_b)
        self.seal(body)
        self.fn.switch_to(body)
        self.assign_name(tname, cur, s.target)
        self.loops.append((latch, exit_b))
        self.depth += 1
        self.stmts(s.body)
        if not self.fn.terminated:
            self.fn.jump(latch)
        self.depth -= 1
        self.loops.pop()
        self.fn.switch_to(latch)
        self.seal(latch)
        if latch.preds:
            cur2 = self.read_var(iv)
            assert cur2 is not None
            nxt = self.fn.emit1("add", [cur2, step_v])
            self.write_var(iv, nxt)
            self.fn.jump(header)
        else:
            self.fn.emit0("unreachable", [])
        self.seal(header)
        self.fn.switch_to(exit_b)
        self.seal(exit_b)

    def _prange(self, s: ast.For, it: ast.Call) -> None:
        """``for i, j in prange(M, N)``: a parallel nest, one point per thread.
        The last index runs along x (see zyntax.nest); the body is guarded by
        ``index < size`` in every dimension."""
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error(it, "prange() takes 1 to 3 sizes")
        if self.depth or self.loops:
            raise self.error(s, "prange() must be the kernel's outermost statement, not nested")
        n = len(it.args)
        names = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        if len(names) != n or not all(isinstance(t, ast.Name) for t in names):
            raise self.error(s.target, f"prange() over {n} sizes needs {n} plain loop names")
        sizes = [self.expr(a) for a in it.args]
        where = f"nest at line {self.where(s).get('line')}"
        if self.workgroup is None:
            self.tiling_report.append(f"{where}: not tiled: the kernel has no workgroup=")
        else:
            plan = nest_tiling.plan_prange(s.body, {t.id for t in names if isinstance(t, ast.Name)})
            why = plan if isinstance(plan, tuple) else self._untileable_reads(plan)
            if why is None:
                assert isinstance(plan, list)
                self._tiled_prange(s, it, sizes, plan, where)
                return
            node, reason = why
            line = self.where(node).get("line")
            self.tiling_report.append(f"{where}: not tiled: line {line}: {reason}")
        cond: Value | None = None
        indices: list[Value] = []
        for k, (size, node) in enumerate(zip(sizes, it.args, strict=True)):
            ty = I32
            if isinstance(size, Value):
                st = self.scalar_type(size, node)
                wide = promote(st, I32) if st.is_int else None
                if wide is None:
                    raise self.error(
                        node, f"prange() sizes must be integers, got {st}", KernelTypeError
                    )
                ty = wide
            elif not (isinstance(size, Lit) and isinstance(size.value, int)):
                raise self.error(node, "prange() sizes must be integers", KernelTypeError)
            idx = self._global_dim("xyz"[n - 1 - k])
            if ty != I32:
                idx = self.fn.emit1("cast", [idx], ty)
            below = self.fn.emit1("cmp.lt", [idx, self.value(size, node, ty)])
            cond = below if cond is None else self.fn.emit1("and", [cond, below])
            indices.append(idx)
        assert cond is not None
        body, merge = self.fn.new_block(), self.fn.new_block()
        self.fn.branch(cond, body, merge)
        self.seal(body)
        self.depth += 1
        self.fn.switch_to(body)
        for t, idx in zip(names, indices, strict=True):
            assert isinstance(t, ast.Name)
            self.assign_name(t.id, idx, t)
        self.stmts(s.body)
        if not self.fn.terminated:
            self.fn.jump(merge)
        self.depth -= 1
        self.fn.switch_to(merge)
        self.seal(merge)

    # ---------------------------------------------------------------- tiled prange
    def _untileable_reads(self, plan: list[nest_tiling.Reduction]) -> tuple[ast.AST, str] | None:
        """Where and why a reduction's reads are not arrays the tiler can take."""
        for r in plan:
            if r.acc not in self.locals or self.assign_count.get(r.acc, 0) < 2:
                return r.update, f"the accumulator {r.acc!r} is not a variable set before the loop"
            for sub in r.reads:
                assert isinstance(sub.value, ast.Name)
                view = self.static.get(sub.value.id)
                if not isinstance(view, ArrayView) or view.space != "global":
                    return sub, f"{sub.value.id!r} is not a global array parameter"
                if len(self._slice_nodes(sub)) != view.ndim:
                    return sub, f"{sub.value.id!r} is not indexed by all its dimensions"
        return None

    @staticmethod
    def _slice_nodes(sub: ast.Subscript) -> list[ast.expr]:
        return list(sub.slice.elts) if isinstance(sub.slice, ast.Tuple) else [sub.slice]

    def _tiled_prange(
        self,
        s: ast.For,
        it: ast.Call,
        sizes: list[Operand],
        plan: list[nest_tiling.Reduction],
        where: str,
    ) -> None:
        """A prange nest through zyntax.tiling's tiler: indices unguarded (every
        thread reaches the barriers), memory-free statements and the tiled
        reductions, then the rest of the body for in-range points only."""
        from zyntax.tiling import Affine, TiledNest

        assert self.workgroup is not None
        tb = nest_tiling.TranslatorBuilder(self)
        targets = s.target.elts if isinstance(s.target, ast.Tuple) else [s.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        size_vals: list[Any] = []
        types: list[Scalar] = []
        for size, node in zip(sizes, it.args, strict=True):
            ty = I32
            if isinstance(size, Value):
                size_t = self.scalar_type(size, node)
                wide = promote(size_t, I32) if size_t.is_int else None
                if wide is None:
                    raise self.error(
                        node, f"prange() sizes must be integers, got {size_t}", KernelTypeError
                    )
                ty = wide
                size_vals.append(nest_tiling.TV(tb, size, ast.unparse(node)))
            elif isinstance(size, Lit) and isinstance(size.value, int):
                size_vals.append(size.value)
            else:
                raise self.error(node, "prange() sizes must be integers", KernelTypeError)
            types.append(ty)
        writes = [
            nest_tiling.TV(tb, view.ptr)
            for name in self._written_arrays(s.body)
            if isinstance(view := self.static.get(name), ArrayView)
        ]
        nest = TiledNest(tb, size_vals, self.workgroup, writes)
        nest.indices = tuple(
            Affine(((d, (1,)),), (), tuple(enumerate(names))) for d in range(len(names))
        )
        self.depth += 1
        for name, v, ty, node in zip(names, nest.values, types, it.args, strict=True):
            self.assign_name(name, self._convert(v.v, ty, node), node)
        last = max(s.body.index(r.loop) for r in plan)
        loops = {id(r.loop): r for r in plan}
        dims = {name: d for d, name in enumerate(names)}
        for stmt in s.body[: last + 1]:
            if id(stmt) in loops:
                self.set_loc(stmt)
                self._tiled_reduction(nest, tb, loops[id(stmt)], dims)
            else:
                self.stmt(stmt)
        assert nest.in_range is not None
        with tb.if_(nest.in_range):
            self.stmts(s.body[last + 1 :])
        self.depth -= 1
        self.tiling_report.append(f"{where}: tiled, workgroup {self.workgroup}")
        self.tiling_report += [f"  {line}" for line in nest.report]

    def _written_arrays(self, body: list[ast.stmt]) -> list[str]:
        """Names of the arrays the nest may write: stored into, or passed to a call."""
        out: list[str] = []
        for n in (x for st in body for x in ast.walk(st)):
            targets: list[ast.expr] = []
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = list(n.targets) if isinstance(n, ast.Assign) else [n.target]
            elif isinstance(n, ast.Call):
                targets = [a for a in n.args if isinstance(a, ast.Name)]
            for t in targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Name) and base.id not in out:
                    out.append(base.id)
        return out

    def _tiled_reduction(
        self,
        nest: Any,
        tb: nest_tiling.TranslatorBuilder,
        r: nest_tiling.Reduction,
        dims: dict[str, int],
    ) -> None:
        from zyntax.tiling import Affine, NotAffine

        init = self.read_var(r.acc)
        if init is None:
            raise self.error(
                r.update, f"'{r.acc}' must be assigned before the loop", KernelNameError
            )
        acc_ty = self.var_types[r.acc]
        assert isinstance(acc_ty, Scalar)
        ext = self.expr(r.extent)
        if isinstance(ext, Lit) and isinstance(ext.value, int):
            extent: Any = ext.value
        elif isinstance(ext, Value) and self.scalar_type(ext, r.extent).is_int:
            extent = nest_tiling.TV(tb, ext, ast.unparse(r.extent))
        else:
            raise self.error(r.extent, "range() bounds must be integers", KernelTypeError)
        k_ty = self.var_types.get(r.k)
        if not isinstance(k_ty, Scalar):
            k_ty = extent.v.ty if isinstance(extent, nest_tiling.TV) else I32
            self.var_types[r.k] = k_ty

        def form(node: ast.expr, k_sym: Any) -> Any:
            """An index expression as an affine form, or NotAffine (with why)."""
            if isinstance(node, ast.Name):
                if node.id == r.k:
                    return k_sym
                if node.id in dims:
                    return nest.indices[dims[node.id]]
            if isinstance(node, ast.Constant) and type(node.value) is int:
                return Affine(const=(node.value,))
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
                a, c = form(node.left, k_sym), form(node.right, k_sym)
                if isinstance(a, NotAffine):
                    return a
                if isinstance(c, NotAffine):
                    return c
                return a + c if isinstance(node.op, ast.Add) else a * c
            loop_vars = {r.k, *dims}
            if any(isinstance(n, ast.Name) and n.id in loop_vars for n in ast.walk(node)):
                what = type(node.op).__name__ if isinstance(node, ast.BinOp) else "expression"
                return NotAffine(f"{ast.unparse(node)} ({what} involving a loop index)")
            v = self.expr(node)  # loop-invariant: a parameter, a shape, a constant
            if isinstance(v, Lit) and type(v.value) is int:
                return Affine(const=(v.value,))
            if isinstance(v, Value) and self.scalar_type(v, node).is_int:
                return Affine(const=(nest_tiling.TV(tb, v, ast.unparse(node)),))
            return NotAffine(f"{ast.unparse(node)} is not an integer")

        def flat_at(sub: ast.Subscript, view: ArrayView, kv: Any) -> Any:
            """The element offset of `sub` at reduction index `kv`, computed as
            the untiled kernel would (an index the tiler cannot analyse)."""
            self.write_var(r.k, self._convert(kv.v, k_ty, sub))
            off: Operand = Lit(0)
            for ix_node, st in zip(self._slice_nodes(sub), view.strides, strict=True):
                ix = self.expr(ix_node)
                if not self.scalar_type(ix, ix_node).is_int:
                    raise self.error(ix_node, "array indices must be integers", KernelTypeError)
                ixv = ix if isinstance(ix, Lit) else self.value(ix, ix_node, I64)
                stv: Operand = Lit(st) if isinstance(st, int) else st
                off = self._arith(
                    "add", off, self._arith("mul", ixv, stv, I64, ix_node), I64, ix_node
                )
            return nest_tiling.TV(tb, self.value(off, sub, I64))

        def loads(k_sym: Any) -> list[tuple[Any, Any]]:
            out = []
            for sub in r.reads:
                assert isinstance(sub.value, ast.Name)
                name = sub.value.id
                view = self.static[name]
                assert isinstance(view, ArrayView)
                flat: Any = Affine()
                for d, (ix, st) in enumerate(
                    zip(self._slice_nodes(sub), view.strides, strict=True)
                ):
                    f = form(ix, k_sym)
                    if isinstance(f, NotAffine):
                        flat = f
                        break
                    coef = (
                        st
                        if isinstance(st, int)
                        else nest_tiling.TV(tb, st, f"{name}.strides[{d}]")
                    )
                    flat = flat + f * Affine(const=(coef,))
                    if isinstance(flat, NotAffine):
                        break
                if isinstance(flat, NotAffine):
                    flat = NotAffine(
                        flat.why,
                        fn=lambda kv, sub=sub, view=view: flat_at(sub, view, kv),
                        text=", ".join(ast.unparse(x) for x in self._slice_nodes(sub)),
                    )
                out.append((nest_tiling.TV(tb, view.ptr, name), flat))
            return out

        def combine(acc: Any, *xs: Any) -> Any:
            subst: dict[int, Operand] = {id(sub): x.v for sub, x in zip(r.reads, xs, strict=True)}
            for n in ast.walk(r.expr):
                if isinstance(n, ast.Name) and n.id == r.acc:
                    subst[id(n)] = acc.v
            saved, self._subst = self._subst, {**self._subst, **subst}
            try:
                u = r.update
                val = self.expr(u.value) if isinstance(u, ast.Assign) else None
                if isinstance(u, ast.AugAssign):
                    val = self.binop(u.op, acc.v, self.expr(u.value), u)
            finally:
                self._subst = saved
            assert val is not None
            t = self.scalar_type(val, r.update)
            if t != acc_ty:
                j = promote(acc_ty, t)
                if j is None:
                    raise self.error(
                        r.update, f"'{r.acc}' is {acc_ty} but is assigned {t}", KernelTypeError
                    )
                if j != acc_ty:
                    self.var_types[r.acc] = j
                    raise _Restart
            return nest_tiling.TV(tb, self.value(val, r.update, acc_ty))

        res = nest.reduce(extent, init=nest_tiling.TV(tb, init), loads=loads, combine=combine)
        self.write_var(r.acc, res.v)

    def stmt_Break(self, s: ast.Break) -> None:
        if not self.loops:
            raise self.error(s, "'break' outside a loop")
        self.fn.jump(self.loops[-1][1])

    def stmt_Continue(self, s: ast.Continue) -> None:
        if not self.loops:
            raise self.error(s, "'continue' outside a loop")
        self.fn.jump(self.loops[-1][0])

    def stmt_Return(self, s: ast.Return) -> None:
        if self.kind == "kernel":
            if s.value is not None and not (
                isinstance(s.value, ast.Constant) and s.value.value is None
            ):
                raise self.error(s.value, "kernels cannot return a value; store it into an array")
            self.fn.emit0("return", [])
            return
        if s.value is None:
            vals: list[Operand] = []
        else:
            r = self.expr(s.value)
            vals = list(r.items) if isinstance(r, TupleVal) else [r]
        if self.ret_types is None:
            tys: list[HType] = []
            for v, in_ in zip(vals, [s.value] * len(vals), strict=False):
                tys.append(self.scalar_type(v, in_ or s))
            self.ret_types = tys
            raise _Restart
        if len(vals) != len(self.ret_types):
            raise self.error(
                s,
                f"returns {len(vals)} value(s) here but {len(self.ret_types)} elsewhere",
                KernelTypeError,
            )
        out = []
        for v, t in zip(vals, self.ret_types, strict=True):
            assert isinstance(t, Scalar)
            vt = self.scalar_type(v, s)
            if isinstance(v, Value) and vt != t:
                j = promote(t, vt)
                if j is None or (j != t and self.ret_annotated):
                    raise self.error(
                        s, f"returns {vt} here but the function returns {t}", KernelTypeError
                    )
                if j != t:
                    self.ret_types = [j if x is t else x for x in self.ret_types]
                    raise _Restart
            out.append(self.value(v, s, t))
        self.fn.emit0("return", out)
