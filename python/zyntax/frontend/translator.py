"""Python AST -> HIR translation for ``@zyntax.kernel`` and ``@zyntax.func``.

Design:

- **SSA by block parameters.** Mutable locals become SSA values through Braun et
  al.'s on-the-fly construction: each block records the current definition of
  every variable; reads that cross block boundaries create block parameters
  (incomplete ones in loop headers until the back edges are known) and trivial
  parameters are removed. Nothing goes through memory, so the interpreter and
  LLVM both see plain SSA.
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
import builtins
import inspect
import math
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from zyntax import hir, lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend import nest_tiling
from zyntax.frontend.emit import Block, Emitter, UndefinedVariable, Value, native_type
from zyntax.frontend.errors import (
    KernelError,
    KernelNameError,
    KernelSyntaxError,
    KernelTypeError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    U32,
    U64,
    Frag,
    HType,
    Ptr,
    Scalar,
    Vec,
)

# --------------------------------------------------------------------------- operands


@dataclass(frozen=True)
class Lit:
    """A compile-time constant (Python int, float or bool): weakly typed."""

    value: int | float | bool


@dataclass
class ArrayView:
    """An N-d view: element pointer plus shapes and strides (in elements)."""

    ptr: Value
    dtype: Scalar
    shape: list[Value | int | None]
    strides: list[Value | int]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def space(self) -> str:
        ty = self.ptr.ty
        assert isinstance(ty, Ptr)
        return ty.space


@dataclass
class TupleVal:
    items: list[Operand]


@dataclass(frozen=True)
class Ref:
    """A Python object used by name: module, type, primitive, device function, string."""

    obj: Any


Operand = Value | Lit | ArrayView | TupleVal | Ref


# --------------------------------------------------------------------------- parameter specs


@dataclass(frozen=True)
class ArrayParam:
    dtype: Scalar
    ndim: int
    layout: str = "A"  # "C": the last stride is known to be 1
    space: str = "global"

    def __str__(self) -> str:
        tail = "" if self.layout == "A" else f", {self.layout}"
        sp = "" if self.space == "global" else f" {self.space}"
        return f"array({self.dtype}, {self.ndim}{tail}){sp}"


@dataclass(frozen=True)
class TensorMapParam:
    """A TMA tensor map parameter (issue 13)."""

    def __str__(self) -> str:
        return "tensormap"


ParamSpec = Scalar | ArrayParam | TensorMapParam


def param_hir_types(spec: ParamSpec) -> list[HType]:
    """The HIR parameters one Python parameter becomes (the array ABI)."""
    if isinstance(spec, Scalar):
        return [spec]
    if isinstance(spec, TensorMapParam):
        return [ir.TensorMapT()]
    out: list[HType] = [Ptr(spec.space, spec.dtype)]
    return out + [I64] * (2 * spec.ndim)


def spec_from_annotation(ann: Any) -> ParamSpec | None:
    if isinstance(ann, lang.DType):
        return ir.scalar(ann.name)
    if isinstance(ann, lang.ArraySpec):
        return ArrayParam(ir.scalar(ann.dtype.name), ann.ndim, ann.layout)
    if ann is lang.TensorMap:
        return TensorMapParam()
    return None


def mangle(spec: ParamSpec) -> str:
    if isinstance(spec, Scalar):
        return spec.name
    if isinstance(spec, TensorMapParam):
        return "tmap"
    sp = "" if spec.space == "global" else spec.space[0]
    return f"{spec.dtype.name}{spec.ndim}{spec.layout.lower()}{sp}"


# --------------------------------------------------------------------------- type rules


def default_type(v: int | float | bool) -> Scalar:
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return I32 if -(2**31) <= v < 2**31 else I64
    return F32


def promote(a: Scalar, b: Scalar) -> Scalar | None:
    """The common type of two operand types, or None when an explicit cast is needed."""
    if a == b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        if {a.name, b.name} == {"f16", "bf16"}:
            return F32
        return a if a.bits >= b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.is_signed == b.is_signed:
        return a if a.bits >= b.bits else b
    s, u = (a, b) if a.is_signed else (b, a)
    if s.bits > u.bits:
        return s
    if u.bits < 64:
        return ir.scalar(f"i{2 * u.bits}")
    return None


def _convert_hint(node: ast.AST, a: Scalar, b: Scalar) -> str:
    """How to convert operands ``a`` and ``b`` of ``node`` (where `promote`
    found no common type: a signed integer and u64) into types that do promote."""
    left = getattr(node, "left", getattr(node, "target", None))
    right = getattr(node, "right", getattr(node, "value", None))
    text_a = ast.unparse(left) if isinstance(left, ast.AST) else "x"
    text_b = ast.unparse(right) if isinstance(right, ast.AST) else "y"
    signed, unsigned = ((text_a, a), (text_b, b)) if a.is_signed else ((text_b, b), (text_a, a))
    # Either conversion promotes: u64 with u64, i64 with any signed type (a test compiles both).
    return (
        f"convert one operand explicitly: zyntax.{unsigned[1]}({signed[0]}) if it is never "
        f"negative, or zyntax.i64({unsigned[0]}) if it fits in i64"
    )


def lit_type_with(lit: Lit, other: Scalar) -> Scalar:
    """The type a literal takes next to a typed operand."""
    v = lit.value
    if isinstance(v, bool):
        return other if not other.is_bool else BOOL
    if isinstance(v, int):
        return other if not other.is_bool else default_type(v)
    if other.is_float:
        return other
    return F64 if other.bits == 64 else F32


_PY_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitAnd: lambda a, b: a & b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitXor: lambda a, b: a ^ b,
}
_HIR_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.LShift: "shl",
    ast.RShift: "shr",
    ast.BitAnd: "and",
    ast.BitOr: "or",
    ast.BitXor: "xor",
}
_CMPOPS = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}
_PY_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
}
_OP_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.MatMult: "@",
}

# Math functions by object identity: lang.*, math.*, numpy.* all map to HIR unary ops.
_UNARY_MATH = ("sqrt", "exp", "log", "sin", "cos", "tanh", "floor", "ceil")
MATH_FUNCS: dict[int, str] = {}
for _n in _UNARY_MATH:
    for _mod in (lang, math, np):
        MATH_FUNCS[id(getattr(_mod, _n))] = _n
MATH_FUNCS[id(lang.rsqrt)] = "rsqrt"
for _obj in (lang.fma, getattr(math, "fma", lang.fma)):
    MATH_FUNCS[id(_obj)] = "fma"
for _obj in (lang.min, builtins.min, np.minimum, np.fmin):
    MATH_FUNCS[id(_obj)] = "min"
for _obj in (lang.max, builtins.max, np.maximum, np.fmax):
    MATH_FUNCS[id(_obj)] = "max"
for _obj in (lang.abs, builtins.abs, math.fabs, np.abs):
    MATH_FUNCS[id(_obj)] = "abs"

_ATOMIC_NAMES = {
    "add": "add",
    "sub": "sub",
    "min": "min",
    "max": "max",
    "and_": "and",
    "or_": "or",
    "xor": "xor",
    "exch": "exch",
    "inc": "inc",
    "dec": "dec",
}
# Cache operators and L2 eviction hints of global loads / stores (issue 12).
_LOAD_CACHE = ("ca", "cg", "cs", "lu", "cv", "evict_first", "evict_last")
_STORE_CACHE = ("wb", "cg", "cs", "wt", "evict_first", "evict_last")
_SCOPES = {
    "block": "block",
    "cta": "block",
    "device": "device",
    "gpu": "device",
    "system": "system",
}
_MMA_SHAPES = ("m16n16k16", "m32n8k16", "m8n32k16")


class _Restart(Exception):
    """A variable was widened: translate the function again."""


# --------------------------------------------------------------------------- module context


@dataclass
class ModuleContext:
    """Functions of the module being built: the entry plus specialised device functions."""

    module: hir.Module
    device_funcs: dict[tuple[int, tuple[ParamSpec, ...]], tuple[str, list[HType]]] = field(
        default_factory=dict
    )
    in_progress: set[int] = field(default_factory=set)
    # Python source objects that went into this module (for cache keys and AOT).
    sources: list[Any] = field(default_factory=list)


@dataclass
class SourceInfo:
    tree: ast.FunctionDef
    file: str
    line_offset: int
    col_offset: int


def load_source(pyfunc: Callable[..., Any], what: str) -> SourceInfo:
    try:
        lines, first = inspect.getsourcelines(pyfunc)
        file = inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
    except (OSError, TypeError) as e:
        raise KernelError(
            f"cannot read the source of {what} '{pyfunc.__name__}': kernels must be defined "
            f"in a file ({e})"
        ) from None
    src = "".join(lines)
    dedented = textwrap.dedent(src)
    col = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise KernelError(f"{what} '{pyfunc.__name__}' must be a plain def function")
    return SourceInfo(fdef, file, first - 1, col)


# --------------------------------------------------------------------------- translator


class FunctionTranslator:
    """Translates one Python function, specialised on parameter specs, into a
    function of the context's native module (through :class:`Emitter`)."""

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
        self.fn = Emitter(b, hir_params)
        self.fn.loc = (self.src.file, fdef.lineno + self.src.line_offset, 1)
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
            return self.fn.emit1("cmp.ne", [v, zero], BOOL)
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
            cond = self.fn.emit1(cmp, [cur, stop_v], BOOL)
        else:
            # Dynamic step: (step > 0 and i < stop) or (step < 0 and i > stop).
            zero = self.const(ty, 0)
            pos = self.fn.emit1("cmp.gt", [step_v, zero], BOOL)
            lt = self.fn.emit1("cmp.lt", [cur, stop_v], BOOL)
            gt = self.fn.emit1("cmp.gt", [cur, stop_v], BOOL)
            cond = self.fn.emit1("select", [pos, lt, gt], BOOL)
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
            nxt = self.fn.emit1("add", [cur2, step_v], ty)
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
            below = self.fn.emit1("cmp.lt", [idx, self.value(size, node, ty)], BOOL)
            cond = below if cond is None else self.fn.emit1("and", [cond, below], BOOL)
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
        return self.fn.emit1(op, [self.value(a, node, ty), self.value(b, node, ty)], ty)

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
            return self.fn.emit1("div", [self.value(a, node, t), self.value(b, node, t)], t)
        if isinstance(op, ast.Pow):
            if isinstance(b, Lit) and isinstance(b.value, int) and 0 <= b.value <= 8:
                av = self.value(a, node, t)
                if b.value == 0:
                    return self.const(t, 1)
                r = av
                for _ in range(b.value - 1):
                    r = self.fn.emit1("mul", [r, av], t)
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
        return self.fn.emit1(_HIR_BINOPS[type(op)], [av, bv], t)

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
            q = f.emit1("div", [a, b], t)
            return f.emit1("floor", [q], t)
        q = f.emit1("div", [a, b], t)
        if t.is_unsigned:
            return q
        r = f.emit1("rem", [a, b], t)
        zero = self.const(t, 0)
        nz = f.emit1("cmp.ne", [r, zero], BOOL)
        rneg = f.emit1("cmp.lt", [r, zero], BOOL)
        bneg = f.emit1("cmp.lt", [b, zero], BOOL)
        diff = f.emit1("xor", [rneg, bneg], BOOL)
        adj = f.emit1("and", [nz, diff], BOOL)
        one = self.const(t, 1)
        qm = f.emit1("sub", [q, one], t)
        return f.emit1("select", [adj, qm, q], t)

    def mod(self, a: Value, b: Value, t: Scalar) -> Value:
        """Python's modulo: the result has the divisor's sign."""
        f = self.fn
        if t.is_float:
            q = f.emit1("floor", [f.emit1("div", [a, b], t)], t)
            return f.emit1("sub", [a, f.emit1("mul", [q, b], t)], t)
        r = f.emit1("rem", [a, b], t)
        if t.is_unsigned:
            return r
        zero = self.const(t, 0)
        nz = f.emit1("cmp.ne", [r, zero], BOOL)
        rneg = f.emit1("cmp.lt", [r, zero], BOOL)
        bneg = f.emit1("cmp.lt", [b, zero], BOOL)
        diff = f.emit1("xor", [rneg, bneg], BOOL)
        adj = f.emit1("and", [nz, diff], BOOL)
        rb = f.emit1("add", [r, b], t)
        return f.emit1("select", [adj, rb, r], t)

    def expr_UnaryOp(self, e: ast.UnaryOp) -> Operand:
        v = self.expr(e.operand)
        if isinstance(e.op, ast.Not):
            c = self.to_bool(v, e.operand)
            if isinstance(c, bool):
                return Lit(not c)
            return self.fn.emit1("not", [c], BOOL)
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
            return self.fn.emit1("neg", [val], t)
        if isinstance(e.op, ast.Invert):
            if not t.is_int:
                raise self.error(e, f"'~' needs an integer operand, got {t}", KernelTypeError)
            return self.fn.emit1("not", [val], t)
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
        return self.fn.emit1(f"cmp.{name}", [self.value(a, node, t), self.value(b, node, t)], BOOL)

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
            handler = getattr(self, "prim_" + obj.qualname.replace(".", "_").rstrip("_"), None)
            if handler is None:
                raise self.error(e, f"primitive {obj.qualname} is not supported yet")
            try:
                return handler(e, *args, **kwargs)  # type: ignore[no-any-return]
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
                acc = self.fn.emit1(fname, [self.value(acc, e, t), self.value(b, e, t)], t)
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
            return self.fn.emit1("fma", [self.value(a, e, ft) for a in args], ft)
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
            return self.fn.emit1("abs", [self.value(a, e)], t)
        if not t.is_float:
            t = F64 if t.bits == 64 else F32
        return self.fn.emit1(fname, [self.value(a, e, t)], t)

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
            tr = FunctionTranslator(
                df.pyfunc, specs, kind="device", name=name, ctx=self.ctx, source=df.source()
            )
            tr.translate()
        finally:
            self.ctx.in_progress.discard(id(df))
        rets = list(tr.ret_types or [])
        self.ctx.device_funcs[key] = (name, rets)
        self.ctx.sources.append(df.pyfunc)
        return name, rets

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

    def _bit_op(self, e: ast.AST, name: str, x: Operand) -> Operand:
        t = self.scalar_type(x, e)
        if not t.is_int:
            raise self.error(e, f"zyntax.lang.{name}() takes an integer, got {t}", KernelTypeError)
        return self.fn.emit1(name, [self.value(x, e, t)], t)

    def prim_popc(self, e: ast.AST, x: Operand) -> Operand:
        return self._bit_op(e, "popc", x)

    def prim_clz(self, e: ast.AST, x: Operand) -> Operand:
        return self._bit_op(e, "clz", x)

    def prim_brev(self, e: ast.AST, x: Operand) -> Operand:
        return self._bit_op(e, "brev", x)

    def prim_bfind(self, e: ast.AST, x: Operand) -> Operand:
        return self._bit_op(e, "bfind", x)

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
        b = f.emit1("cast", [f.emit1(f"block_idx.{d}", [], U32)], I32)
        n = f.emit1("cast", [f.emit1(f"block_dim.{d}", [], U32)], I32)
        t = f.emit1("cast", [f.emit1(f"thread_idx.{d}", [], U32)], I32)
        return f.emit1("add", [f.emit1("mul", [b, n], I32), t], I32)

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
            bd = self.fn.emit1("cast", [self.fn.emit1(f"block_dim.{d}", [], U32)], I32)
            gd = self.fn.emit1("cast", [self.fn.emit1(f"grid_dim.{d}", [], U32)], I32)
            vals.append(self.fn.emit1("mul", [bd, gd], I32))
        return vals[0] if n == 1 else TupleVal(vals)

    def prim_lane_id(self, e: ast.AST) -> Operand:
        return self.fn.emit1("cast", [self.fn.emit1("lane_id", [], U32)], I32)

    def prim_syncthreads(self, e: ast.AST) -> Operand:
        self.fn.emit0("barrier", [])
        return Ref(None)

    def prim_syncwarp(self, e: ast.AST, mask: Operand = Lit(0xFFFFFFFF)) -> Operand:
        self.fn.emit0("warp_sync", [self._u32(mask, e)])
        return Ref(None)

    def prim_threadfence_block(self, e: ast.AST) -> Operand:
        self.fn.emit0("fence.block", [])
        return Ref(None)

    def prim_threadfence(self, e: ast.AST) -> Operand:
        self.fn.emit0("fence.device", [])
        return Ref(None)

    def prim_threadfence_system(self, e: ast.AST) -> Operand:
        self.fn.emit0("fence.system", [])
        return Ref(None)

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
        return self.fn.emit1("mbarrier.arrive", [bar], U64)

    def prim_mbarrier_arrive_expect_tx(
        self, e: ast.AST, bars: Operand, index: Operand, tx: Operand
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_arrive_expect_tx", bars, index)
        return self.fn.emit1("mbarrier.arrive_expect_tx", [bar, self._u32(tx, e)], U64)

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
        return self.fn.emit1("mbarrier.test_wait", [bar, self.value(state, e, U64)], BOOL)

    def prim_mbarrier_try_wait_parity(
        self, e: ast.AST, bars: Operand, index: Operand, parity: Operand, hint: Operand = Lit(0)
    ) -> Operand:
        bar = self._mbar(e, "mbarrier_try_wait_parity", bars, index)
        args = [bar, self._u32(parity, e), self._u32(hint, e)]
        return self.fn.emit1("mbarrier.try_wait_parity", args, BOOL)

    def prim_mbarrier_inval(self, e: ast.AST, bars: Operand, index: Operand) -> Operand:
        bar = self._mbar(e, "mbarrier_inval", bars, index)
        self.fn.emit0("mbarrier.inval", [bar])
        return Ref(None)

    def prim_fence_proxy_async(self, e: ast.AST) -> Operand:
        self.fn.emit0("fence.proxy_async", [])
        return Ref(None)

    def prim_fence_mbarrier_init(self, e: ast.AST) -> Operand:
        self.fn.emit0("fence.mbarrier_init", [])
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
        return self.fn.emit1(f"wgmma.desc.{sw}", [ptr, lbo, sbo], U64)

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

    def prim_wgmma_fence(self, e: ast.AST) -> Operand:
        self.fn.emit0("wgmma.fence", [])
        return Ref(None)

    def prim_wgmma_commit_group(self, e: ast.AST) -> Operand:
        self.fn.emit0("wgmma.commit_group", [])
        return Ref(None)

    def prim_wgmma_wait_group(self, e: ast.AST, n: Operand) -> Operand:
        self.fn.emit0(f"wgmma.wait_group.{self._const_int(n, e, 'n')}", [])
        return Ref(None)

    def prim_setmaxnreg(self, e: ast.AST, count: Operand, *, increase: Operand) -> Operand:
        if not isinstance(increase, Lit) or not isinstance(increase.value, bool):
            raise self.error(e, "increase must be True or False", KernelTypeError)
        way = "inc" if increase.value else "dec"
        self.fn.emit0(f"setmaxnreg.{way}.{self._const_int(count, e, 'count')}", [])
        return Ref(None)

    def prim_elect_sync(self, e: ast.AST) -> Operand:
        return self.fn.emit1("elect.sync", [], BOOL)

    # Clusters, DSMEM, PDL and grid sync (h13-cluster).
    def prim_cluster_ctarank(self, e: ast.AST) -> Operand:
        return self.fn.emit1("cast", [self.fn.emit1("cluster_ctarank", [], U32)], I32)

    def prim_cluster_nctarank(self, e: ast.AST) -> Operand:
        return self.fn.emit1("cast", [self.fn.emit1("cluster_nctarank", [], U32)], I32)

    def _emit_sync(self, mnemonics: list[str]) -> Operand:
        for m in mnemonics:
            self.fn.emit0(m, [])
        return Ref(None)

    def prim_cluster_arrive(self, e: ast.AST) -> Operand:
        return self._emit_sync(["cluster_barrier.arrive"])

    def prim_cluster_wait(self, e: ast.AST) -> Operand:
        return self._emit_sync(["cluster_barrier.wait"])

    def prim_cluster_sync(self, e: ast.AST) -> Operand:
        return self._emit_sync(["cluster_barrier.arrive", "cluster_barrier.wait"])

    def prim_griddepcontrol_wait(self, e: ast.AST) -> Operand:
        return self._emit_sync(["griddepcontrol.wait"])

    def prim_griddepcontrol_launch_dependents(self, e: ast.AST) -> Operand:
        return self._emit_sync(["griddepcontrol.launch_dependents"])

    def prim_grid_sync(self, e: ast.AST) -> Operand:
        return self._emit_sync(["grid_sync"])

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

    def _int_value(self, e: ast.AST, what: str, x: Operand) -> tuple[Value, Scalar]:
        t = self.scalar_type(x, e)
        if not t.is_int:
            raise self.error(e, f"zyntax.lang.{what}() takes an integer, got {t}", KernelTypeError)
        return self.value(x, e, t), t

    def prim_bfe(self, e: ast.AST, a: Operand, pos: Operand, length: Operand) -> Operand:
        v, t = self._int_value(e, "bfe", a)
        return self.fn.emit1("bfe", [v, self._u32(pos, e), self._u32(length, e)], t)

    def prim_bfi(
        self, e: ast.AST, a: Operand, b: Operand, pos: Operand, length: Operand
    ) -> Operand:
        bv, t = self._int_value(e, "bfi", b)
        args = [self.value(a, e, t), bv, self._u32(pos, e), self._u32(length, e)]
        return self.fn.emit1("bfi", args, t)

    def _u32_op(self, e: ast.AST, op: str, *xs: Operand) -> Operand:
        return self.fn.emit1(op, [self._u32(x, e) for x in xs], U32)

    def prim_prmt(self, e: ast.AST, a: Operand, b: Operand, sel: Operand) -> Operand:
        return self._u32_op(e, "prmt", a, b, sel)

    def prim_shf_l_wrap(self, e: ast.AST, lo: Operand, hi: Operand, n: Operand) -> Operand:
        return self._u32_op(e, "shf.l.wrap", lo, hi, n)

    def prim_shf_l_clamp(self, e: ast.AST, lo: Operand, hi: Operand, n: Operand) -> Operand:
        return self._u32_op(e, "shf.l.clamp", lo, hi, n)

    def prim_shf_r_wrap(self, e: ast.AST, lo: Operand, hi: Operand, n: Operand) -> Operand:
        return self._u32_op(e, "shf.r.wrap", lo, hi, n)

    def prim_shf_r_clamp(self, e: ast.AST, lo: Operand, hi: Operand, n: Operand) -> Operand:
        return self._u32_op(e, "shf.r.clamp", lo, hi, n)

    def _named_barrier(self, e: ast.AST, which: str, bar: Operand, count: Operand) -> Operand:
        i = self._const_int(bar, e, "the barrier id")
        n = self._const_int(count, e, "the thread count")
        self.fn.emit0(f"bar.{which}", [], id=i, count=n)
        return Ref(None)

    def prim_named_barrier_sync(self, e: ast.AST, bar: Operand, count: Operand) -> Operand:
        return self._named_barrier(e, "sync", bar, count)

    def prim_named_barrier_arrive(self, e: ast.AST, bar: Operand, count: Operand) -> Operand:
        return self._named_barrier(e, "arrive", bar, count)

    def _reduce(self, e: ast.AST, op: str, mask: Operand, value: Operand) -> Operand:
        t = self.scalar_type(value, e)
        if t.name not in ("u32", "i32"):
            raise self.error(e, f"reduce_{op}_sync takes u32 or i32, got {t}", KernelTypeError)
        return self.fn.emit1(f"redux.{op}", [self._u32(mask, e), self.value(value, e, t)], t)

    def prim_reduce_add_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "add", mask, value)

    def prim_reduce_min_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "min", mask, value)

    def prim_reduce_max_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "max", mask, value)

    def prim_reduce_and_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "and", mask, value)

    def prim_reduce_or_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "or", mask, value)

    def prim_reduce_xor_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self._reduce(e, "xor", mask, value)

    def prim_load_acquire(
        self, e: ast.AST, arr: Operand, index: Operand, scope: Operand = Ref("device")
    ) -> Operand:
        sc = _SCOPES[self._str(scope, e, "scope", tuple(_SCOPES))]
        ptr = self._index_ptr(e, "load_acquire", arr, index)
        assert isinstance(arr, ArrayView)
        return self.fn.emit1(f"load.acquire.{sc}", [ptr], arr.dtype)

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

    def prim_compiler_fence(self, e: ast.AST) -> Operand:
        self.fn.emit0("compiler_fence", [])
        return Ref(None)

    def _approx(self, e: ast.AST, op: str, x: Operand) -> Operand:
        return self.fn.emit1(f"{op}.approx", [self.value(x, e, F32)], F32)

    def prim_ex2_approx(self, e: ast.AST, x: Operand) -> Operand:
        return self._approx(e, "ex2", x)

    def prim_rcp_approx(self, e: ast.AST, x: Operand) -> Operand:
        return self._approx(e, "rcp", x)

    def prim_tanh_approx(self, e: ast.AST, x: Operand) -> Operand:
        return self._approx(e, "tanh", x)

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
        pair = self.fn.emit1(
            f"cvt_unpack.{f}", [self.value(bits, e, ir.scalar("u16"))], Vec(ir.F16, 2)
        )
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
        return self.fn.emit1(
            f"shfl.{mode}", [self._u32(mask, e), v, self._u32(lane, e)], v.ty, width=w
        )

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
        return self.fn.emit1(
            f"vote.{mode}", [self._u32(mask, e), pv], U32 if mode == "ballot" else BOOL
        )

    def prim_vote_ballot_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("ballot", e, mask, pred)

    def prim_vote_any_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("any", e, mask, pred)

    def prim_vote_all_sync(self, e: ast.AST, mask: Operand, pred: Operand) -> Operand:
        return self._vote("all", e, mask, pred)

    def prim_match_any_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        return self.fn.emit1("match.any", [self._u32(mask, e), self.value(value, e)], U32)

    def prim_match_all_sync(self, e: ast.AST, mask: Operand, value: Operand) -> Operand:
        r = self.fn.emit("match.all", [self._u32(mask, e), self.value(value, e)], [U32, BOOL])
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

    def prim_bulk_commit_group(self, e: ast.AST) -> Operand:
        self.fn.emit0("bulk.commit_group", [])
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

    def prim_async_commit(self, e: ast.AST) -> Operand:
        self.fn.emit0("cp.async.commit", [])
        return Ref(None)

    def prim_async_wait(self, e: ast.AST, pending: Operand = Lit(0)) -> Operand:
        self.fn.emit0("cp.async.wait", [], pending=self._const_int(pending, e, "pending"))
        return Ref(None)

    def _eval_annotation(self, node: ast.expr) -> Any:
        try:
            code = compile(ast.Expression(node), self.src.file, "eval")
            ns = dict(self.pyfunc.__globals__)
            return eval(code, ns)
        except Exception as ex:
            raise self.error(node, f"cannot evaluate annotation: {ex}", KernelTypeError) from None


def describe(op: Operand) -> str:
    if isinstance(op, Value):
        return f"a value of type {op.ty}"
    if isinstance(op, Lit):
        return f"the constant {op.value!r}"
    if isinstance(op, ArrayView):
        return f"an array of {op.dtype} with {op.ndim} dimension(s)"
    if isinstance(op, TupleVal):
        return f"a tuple of {len(op.items)}"
    o = op.obj
    if o is None:
        return "None"
    return f"{getattr(o, '__name__', type(o).__name__)!s}"


def _stmt_name(s: ast.stmt) -> str:
    return {
        "With": "with",
        "AsyncWith": "async with",
        "Try": "try",
        "Raise": "raise",
        "Assert": "assert",
        "Delete": "del",
        "Import": "import",
        "ImportFrom": "from ... import",
        "AsyncFor": "async for",
        "Match": "match",
    }.get(type(s).__name__, type(s).__name__)


def _expr_name(e: ast.expr) -> str:
    return {
        "ListComp": "a list comprehension",
        "DictComp": "a dict comprehension",
        "SetComp": "a set comprehension",
        "GeneratorExp": "a generator expression",
        "Lambda": "lambda",
        "Dict": "a dict",
        "Set": "a set",
        "JoinedStr": "an f-string",
        "Await": "await",
        "Yield": "yield",
        "YieldFrom": "yield from",
        "NamedExpr": "':=' (walrus)",
        "Starred": "'*' unpacking",
        "Slice": "a slice",
    }.get(type(e).__name__, type(e).__name__)
