"""The translator's core: source locations and errors, the pre-scan, locals as
the native builder's SSA variables, operand materialisation and conversions."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Block, Emitter, UndefinedVariable, Value
from zyntax.frontend.errors import (
    KernelError,
    KernelNameError,
    KernelSyntaxError,
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    I32,
    U32,
    HType,
    Scalar,
)
from zyntax.frontend.translate.operands import (
    Lit,
    ModuleContext,
    Operand,
    ParamSpec,
    Ref,
    SourceInfo,
    default_type,
    describe,
    load_source,
)


class TranslatorCore:
    """What every part of the translator uses: the function's source and
    errors at its lines, the pre-scan of assignments, locals as the native
    builder's SSA variables, and operands materialised as typed values."""

    #: The function being built (one native builder per attempt).
    fn: Emitter
    #: Compile-time bindings: arrays, references, constants.
    static: dict[str, Operand]
    #: (continue target, break target) of the enclosing loops.
    loops: list[tuple[Block, Block]]
    depth: int
    hidden: int
    saw_return_value: bool
    #: A tiled reduction's replacements for AST nodes (by id).
    _subst: dict[int, Operand]

    def __init__(
        self,
        pyfunc: Callable[..., Any],
        specs: list[ParamSpec],
        *,
        kind: str,
        name: str,
        ctx: ModuleContext,
        source: SourceInfo | None = None,
        workgroup: tuple[int, ...] | None = None,
        kernel_opts: dict[str, Any] | None = None,
    ) -> None:
        self.pyfunc = pyfunc
        #: Keyword arguments of ``zyntax.hir.Module.kernel`` (launch bounds, cluster).
        self.kernel_opts = kernel_opts or {}
        #: A prange kernel's workgroup (outermost first): its nests' reductions are tiled.
        self.workgroup = workgroup
        #: What the tiler did with each prange nest (zyntax.tiling's report lines).
        self.tiling_report: list[str] = []
        self.specs = specs
        self.kind = kind
        self.name = name
        self.ctx = ctx
        self.src = source or load_source(pyfunc, "kernel" if kind == "kernel" else "function")
        self.var_types: dict[str, HType] = {}
        self.ret_types: list[HType] | None = None
        self.ret_annotated = False
        self._scan()

    # ---------------------------------------------------------------- errors
    def where(self, node: ast.AST | None) -> dict[str, Any]:
        if node is None or not hasattr(node, "lineno"):
            return {"file": self.src.file}
        lineno: int = getattr(node, "lineno", 1)
        line = lineno + self.src.line_offset
        col = int(getattr(node, "col_offset", 0)) + 1 + self.src.col_offset
        end_col = None
        end = getattr(node, "end_col_offset", None)
        if getattr(node, "end_lineno", None) == lineno and end is not None:
            end_col = int(end) + 1 + self.src.col_offset
        return {
            "file": self.src.file,
            "line": line,
            "col": col,
            "end_col": end_col,
            "kernel": self.pyfunc.__name__,
        }

    def error(
        self, node: ast.AST | None, message: str, cls: type[KernelError] = KernelSyntaxError
    ) -> KernelError:
        return cls(message, **self.where(node))

    # ---------------------------------------------------------------- pre-scan
    def _scan(self) -> None:
        """Count assignments per name: single-assignment constants stay compile-time."""
        self.assign_count: dict[str, int] = {}
        self.rebound: set[str] = set()  # names assigned by augmented assignment or for targets
        fdef = self.src.tree
        for node in ast.walk(fdef):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.assign_count[node.id] = self.assign_count.get(node.id, 0) + 1
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.rebound.add(node.target.id)
                self.assign_count[node.target.id] = self.assign_count.get(node.target.id, 0) + 1
            if isinstance(node, ast.For):
                for t in ast.walk(node.target):
                    if isinstance(t, ast.Name):
                        self.rebound.add(t.id)
            if isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)) and node is not fdef:
                raise self.error(node, "nested functions and classes are not supported in kernels")
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                raise self.error(node, "'global'/'nonlocal' are not supported in kernels")
        self.locals = set(self.assign_count) | {a.arg for a in fdef.args.args}

    # ---------------------------------------------------------------- SSA
    # Locals are the native builder's SSA variables (zyntax.frontend.emit): a
    # read in a block without a local assignment gets a block parameter where
    # paths join, resolved when the block is sealed.
    def write_var(self, name: str, v: Value) -> None:
        self.fn.write_var(name, self.var_types.get(name) or v.ty, v)

    def read_var(self, name: str) -> Value | None:
        return self.fn.read_var(name)

    def seal(self, block: Block) -> None:
        try:
            self.fn.seal(block)
        except UndefinedVariable as u:
            raise self.error(
                self._cur_node,
                f"local variable '{u.name}' might be used before it is assigned "
                "(assign it before the loop)",
                KernelNameError,
            ) from None

    # ---------------------------------------------------------------- helpers
    _cur_node: ast.AST | None = None

    @property
    def block(self) -> Block:
        assert self.fn.current is not None
        return self.fn.current

    def set_loc(self, node: ast.AST) -> None:
        self._cur_node = node
        w = self.where(node)
        if "line" in w:
            self.fn.loc = (w["file"], w["line"], w["col"])

    def const(self, ty: Scalar, v: int | float | bool) -> Value:
        if ty.is_bool:
            return self.fn.const(BOOL, bool(v))
        if ty.is_float:
            return self.fn.const(ty, float(v))
        if isinstance(v, float) and not v.is_integer():
            raise KernelTypeError(f"cannot use {v!r} as {ty}")
        return self.fn.const(ty, int(v))

    def value(self, op: Operand, node: ast.AST, ty: Scalar | None = None) -> Value:
        """Materialise an operand as an SSA value (converting to ``ty`` if given)."""
        if isinstance(op, Lit):
            t = ty or default_type(op.value)
            if t.is_int and isinstance(op.value, float):
                if ty is not None:
                    # Explicit target type (cast): truncate like int().
                    return self.const(t, int(op.value))
                raise self.error(node, f"cannot use float {op.value!r} as {t}", KernelTypeError)
            return self.const(t, op.value)
        if isinstance(op, Value):
            return self._convert(op, ty, node) if ty is not None else op
        raise self.error(node, f"expected a scalar value, got {describe(op)}", KernelTypeError)

    def _convert(self, v: Value, ty: HType | None, node: ast.AST) -> Value:
        src = v.ty
        if ty is None or src == ty:
            return v
        if not isinstance(src, Scalar) or not isinstance(ty, Scalar):
            raise self.error(node, f"cannot convert {src} to {ty}", KernelTypeError)
        if ty.is_bool:
            zero = self.const(src, 0)
            return self.fn.emit1("cmp.ne", [v, zero])
        if src.is_bool and ty.is_float:
            v = self.fn.emit1("cast", [v], I32)
        return self.fn.emit1("cast", [v], ty)

    def scalar_type(self, op: Operand, node: ast.AST) -> Scalar:
        if isinstance(op, Lit):
            return default_type(op.value)
        if isinstance(op, Value):
            t = op.ty
            if isinstance(t, Scalar):
                return t
        raise self.error(node, f"expected a scalar value, got {describe(op)}", KernelTypeError)

    def to_bool(self, op: Operand, node: ast.AST) -> Value | bool:
        if isinstance(op, Lit):
            return bool(op.value)
        v = self.value(op, node)
        t = v.ty
        if t == BOOL:
            return v
        return self._convert(v, BOOL, node)

    # ---------------------------------------------------------------- primitives
    def _u32(self, op: Operand, node: ast.AST) -> Value:
        return self.value(op, node, U32)

    def _const_int(self, op: Operand, node: ast.AST, what: str) -> int:
        if isinstance(op, Lit) and isinstance(op.value, int) and not isinstance(op.value, bool):
            return op.value
        raise self.error(node, f"{what} must be a compile-time integer constant", KernelTypeError)

    def _str(self, op: Operand, node: ast.AST, what: str, allowed: tuple[str, ...]) -> str:
        if isinstance(op, Ref) and isinstance(op.obj, str) and op.obj in allowed:
            return op.obj
        raise self.error(
            node, f"{what} must be one of {', '.join(map(repr, allowed))}", KernelTypeError
        )

    def _dtype(self, op: Operand, node: ast.AST) -> Scalar:
        if isinstance(op, Ref):
            if isinstance(op.obj, lang.DType):
                return ir.scalar(op.obj.name)
            try:
                d = lang.dtype_of_numpy(op.obj)
            except TypeError:
                d = None
            if d is not None:
                return ir.scalar(d.name)
        raise self.error(
            node, "dtype must be a zyntax scalar type such as zyntax.f32", KernelTypeError
        )

    def translate(self) -> None:
        """Build the function into the context's module (the driver is the
        top class, :class:`zyntax.frontend.translator.FunctionTranslator`)."""
        raise NotImplementedError

    def _eval_annotation(self, node: ast.expr) -> Any:
        try:
            code = compile(ast.Expression(node), self.src.file, "eval")
            ns = dict(self.pyfunc.__globals__)
            return eval(code, ns)
        except Exception as ex:
            raise self.error(node, f"cannot evaluate annotation: {ex}", KernelTypeError) from None
