"""Operands, parameter specs, type promotion and the op tables of the kernel translator."""

from __future__ import annotations

import ast
import builtins
import inspect
import linecache
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zyntax import hir, lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Value
from zyntax.frontend.errors import (
    KernelError,
)
from zyntax.frontend.hirtypes import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    HType,
    Ptr,
    Scalar,
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


def _def_by_indentation(pyfunc: Callable[..., Any]) -> tuple[list[str], int, ast.Module] | None:
    """The lines of `pyfunc`'s ``def`` (decorators included), its first line
    number and their parse, found by indentation: what
    ``inspect.getsourcelines`` finds with the tokenizer, whose regular
    expressions cost a fresh process about 4 ms to compile (most of the
    translation time of a first small kernel). None when the lines are not
    a function by themselves (a string or bracket continued at a shallower
    indentation ends the scan early, which never parses): the caller then
    asks ``inspect``."""
    code = getattr(pyfunc, "__code__", None)
    file = inspect.getsourcefile(pyfunc) if code is not None else None
    if code is None or file is None:
        return None
    text = linecache.getlines(file, pyfunc.__globals__)
    start = code.co_firstlineno - 1  # the first decorator's line
    if not 0 <= start < len(text):
        return None
    indent = len(text[start]) - len(text[start].lstrip())
    end = start
    while end < len(text) and not text[end].lstrip().startswith(("def ", "async def ")):
        end += 1
    end += 1
    while end < len(text):
        line = text[end]
        body = line.strip()
        if body and not body.startswith("#") and len(line) - len(line.lstrip()) <= indent:
            break
        end += 1
    lines = text[start:end]
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or getattr(tree.body[0], "name", None) != pyfunc.__name__:
        return None
    return lines, start + 1, tree


def load_source(pyfunc: Callable[..., Any], what: str) -> SourceInfo:
    found = _def_by_indentation(pyfunc)
    try:
        if found is None:
            lines, first = inspect.getsourcelines(pyfunc)
        else:
            lines, first, _ = found
        file = inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
    except (OSError, TypeError) as e:
        raise KernelError(
            f"cannot read the source of {what} '{pyfunc.__name__}': kernels must be defined "
            f"in a file ({e})"
        ) from None
    col = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(textwrap.dedent("".join(lines))) if found is None else found[2]
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise KernelError(f"{what} '{pyfunc.__name__}' must be a plain def function")
    return SourceInfo(fdef, file, first - 1, col)


# --------------------------------------------------------------------------- translator


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
