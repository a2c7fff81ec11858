"""Loop nests for the Rust core's nest lowering (``zyntax_opt::nest_tile``,
docs/tiling.md "Nests lowered to tile programs"), written with Python
operators or read from a ``lang.prange`` kernel; re-exported by
:mod:`zyntax.tiling`.

* :class:`Nest` builds the description :func:`zyntax.tiling.nest_to_tile`
  takes: ``n.store(C[i, j], n.sum(A[i, k] * B[k, j]) + bias[j])``.
* :func:`fuse_nests` fuses a sequence of nests in the core (an
  element-wise consumer into its producer's epilogue), checking the fused
  kernel's ptxas-measured resources.
* :func:`kernel_nest` reads a ``@zyntax.kernel`` whose body is one
  ``lang.prange`` nest, for concrete arguments, as a :class:`Nest` and
  lowers it; :func:`launch_prange` launches through it when the core
  lowers the nest and through the kernel's own lowering otherwise.
"""

from __future__ import annotations

import ast
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax.errors import ArgumentError, BuildError
from zyntax.nest_tile import (
    NestTile,
    _device_shape,
    _is_torch,
    nest_tiling_report,
    nest_to_tile,
)

__all__ = [
    "NEST_UNARY",
    "FusedNests",
    "KernelNest",
    "Nest",
    "NestBuffer",
    "NestExpr",
    "NestIndex",
    "NestLoop",
    "fuse_nests",
    "kernel_nest",
    "launch_prange",
    "ptxas_measure",
]

# ------------------------------------------------ a builder for nest descriptions
#
# ``Nest`` writes the dict :func:`nest_to_tile` takes with Python operators
# (``A[i, k] * B[k, j]``), so a front-end (zdsl, the prange route below, a
# user) builds a nest without spelling tuples; the core does the rest.


class NestLoop:
    """A loop of a :class:`Nest`; in an index it is that loop's value, and
    ``2 * i + 1`` is an affine index."""

    def __init__(self, nest: Nest, pos: int, name: str) -> None:
        self.nest, self.pos, self.name = nest, pos, name

    def _aff(self) -> NestIndex:
        return NestIndex({self.pos: 1}, 0, names={self.pos: self.name})

    def __add__(self, o: Any) -> NestIndex:
        return self._aff().__add__(o)

    __radd__ = __add__

    def __sub__(self, o: Any) -> NestIndex:
        return self._aff().__sub__(o)

    def __mul__(self, o: Any) -> NestIndex:
        return self._aff().__mul__(o)

    __rmul__ = __mul__


class NestIndex:
    """An affine index ``Σ coef·loop + constant`` (or, with `opaque` set, an
    index the core is told it cannot analyse)."""

    def __init__(
        self,
        terms: dict[int, int],
        constant: int,
        opaque: str | None = None,
        names: dict[int, str] | None = None,
    ) -> None:
        self.terms, self.constant, self.opaque = terms, constant, opaque
        #: Loop names by position, for the text of a non-affine index.
        self.names = names or {}

    @staticmethod
    def of(x: Any) -> NestIndex:
        if isinstance(x, NestIndex):
            return x
        if isinstance(x, NestLoop):
            return x._aff()
        if isinstance(x, numbers.Integral) and not isinstance(x, bool):
            return NestIndex({}, int(x))
        raise ArgumentError(f"a nest index is a loop, an int or an affine form; got {x!r}")

    def __add__(self, other: Any) -> NestIndex:
        o = NestIndex.of(other)
        if self.opaque is not None or o.opaque is not None:
            return NestIndex({}, 0, f"{self} + {o}")
        terms = dict(self.terms)
        for loop, c in o.terms.items():
            terms[loop] = terms.get(loop, 0) + c
        terms = {k: v for k, v in terms.items() if v}
        return NestIndex(terms, self.constant + o.constant, names={**self.names, **o.names})

    __radd__ = __add__

    def __sub__(self, other: Any) -> NestIndex:
        return self + NestIndex.of(other) * -1

    def __mul__(self, other: Any) -> NestIndex:
        o = NestIndex.of(other)
        if self.opaque is None and o.opaque is None:
            if not o.terms:
                k = o.constant
                scaled = {loop: c * k for loop, c in self.terms.items() if c * k}
                return NestIndex(scaled, self.constant * k, names=self.names)
            if not self.terms:
                return o.__mul__(self)
        return NestIndex({}, 0, f"{_paren(self)} * {_paren(o)}")

    __rmul__ = __mul__

    def spec(self) -> tuple[Any, ...]:
        if self.opaque is not None:
            return ("opaque", self.opaque)
        return ("affine", sorted(self.terms.items()), self.constant)

    def __str__(self) -> str:
        if self.opaque is not None:
            return self.opaque

        def term(loop: int, c: int) -> str:
            name = self.names.get(loop, f"loop{loop}")
            return name if c == 1 else f"{c}*{name}"

        parts = [term(loop, c) for loop, c in sorted(self.terms.items())]
        return " + ".join([*parts, str(self.constant)] if self.constant or not parts else parts)


def _paren(ix: NestIndex) -> str:
    text = str(ix)
    return f"({text})" if " " in text else text


def _opaque(text: str) -> NestIndex:
    """An index the core cannot analyse (an indirect or data-dependent one),
    described by `text` for the report."""
    return NestIndex({}, 0, text)


class NestExpr:
    """An element-wise expression of a :class:`Nest` (the spec's tuple form
    in `spec`); ``+ - * /``, unary ``-`` and the functions of
    :data:`NEST_UNARY` / ``nest.max`` / ``nest.min`` build more."""

    def __init__(self, spec: tuple[Any, ...]) -> None:
        self.spec = spec

    @staticmethod
    def of(x: Any) -> NestExpr:
        if isinstance(x, NestExpr):
            return x
        if isinstance(x, numbers.Real) and not isinstance(x, bool):
            return NestExpr(("const", float(x)))
        raise ArgumentError(f"a nest expression is a load, a number or an expression; got {x!r}")

    def _bin(self, op: str, o: Any, swap: bool = False) -> NestExpr:
        a, b = self, NestExpr.of(o)
        if swap:
            a, b = b, a
        return NestExpr(("binary", op, a.spec, b.spec))

    def __add__(self, o: Any) -> NestExpr:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> NestExpr:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> NestExpr:
        return self._bin("sub", o)

    def __rsub__(self, o: Any) -> NestExpr:
        return self._bin("sub", o, True)

    def __mul__(self, o: Any) -> NestExpr:
        return self._bin("mul", o)

    def __rmul__(self, o: Any) -> NestExpr:
        return self._bin("mul", o, True)

    def __truediv__(self, o: Any) -> NestExpr:
        return self._bin("div", o)

    def __rtruediv__(self, o: Any) -> NestExpr:
        return self._bin("div", o, True)

    def __neg__(self) -> NestExpr:
        return NestExpr(("unary", "neg", self.spec))


#: The unary functions a nest expression may use (the core's tile ops).
NEST_UNARY = ("neg", "abs", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "floor", "ceil")


class NestBuffer:
    """A buffer of a :class:`Nest`; ``buf[i, k]`` is a load (an expression)
    and, in :meth:`Nest.store`, the output access."""

    def __init__(self, nest: Nest, pos: int, name: str, rank: int) -> None:
        self.nest, self.pos, self.name, self.rank = nest, pos, name, rank

    def __getitem__(self, index: Any) -> NestExpr:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != self.rank:
            raise ArgumentError(
                f"buffer {self.name!r} has rank {self.rank}, indexed with {len(idx)} indices"
            )
        return NestExpr(("load", self.pos, [NestIndex.of(i).spec() for i in idx]))


class Nest:
    """Builds a loop nest for :func:`nest_to_tile` with Python operators::

        n = Nest("matmul")
        i, j, k = n.parallel("i", M), n.parallel("j", N), n.reduction("k", K)
        A, B = n.buffer("A", "bf16", (M, K)), n.buffer("B", "bf16", (K, N))
        bias, C = n.buffer("bias", "f32", (N,)), n.buffer("C", "bf16", (M, N))
        n.store(C[i, j], n.sum(A[i, k] * B[k, j]) + bias[j])
        nt = n.lower(arch="sm_90")        # a NestTile: kernel + report, or the refusal

    With reduction loops the stored expression holds one ``n.sum(value)``:
    `value` is summed over the reduction loops, what surrounds it is the
    epilogue (fused into the contraction). Buffers are contiguous row-major."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loops: list[dict[str, Any]] = []
        self.buffers: list[dict[str, Any]] = []
        self._stored: dict[str, Any] | None = None

    def _loop(self, name: str, extent: int, kind: str) -> NestLoop:
        if not isinstance(extent, numbers.Integral) or isinstance(extent, bool) or extent < 1:
            raise ArgumentError(f"loop {name!r}: the extent must be an int >= 1, got {extent!r}")
        self.loops.append({"name": name, "extent": int(extent), "kind": kind})
        return NestLoop(self, len(self.loops) - 1, name)

    def parallel(self, name: str, extent: int) -> NestLoop:
        """A loop whose iterations are independent."""
        return self._loop(name, extent, "parallel")

    def reduction(self, name: str, extent: int) -> NestLoop:
        """A loop summed over (by :meth:`sum`)."""
        return self._loop(name, extent, "reduction")

    def buffer(self, name: str, dtype: str, shape: Sequence[int]) -> NestBuffer:
        """A contiguous row-major buffer of `dtype` (f32, f64, f16, bf16)."""
        self.buffers.append({"name": name, "dtype": dtype, "shape": [int(n) for n in shape]})
        return NestBuffer(self, len(self.buffers) - 1, name, len(shape))

    @staticmethod
    def sum(value: Any) -> NestExpr:
        """Marks `value` as summed over the reduction loops."""
        return NestExpr(("sum", NestExpr.of(value).spec))

    @staticmethod
    def unary(op: str, x: Any) -> NestExpr:
        if op not in NEST_UNARY:
            raise ArgumentError(
                f"unknown unary op {op!r} (expected one of: {', '.join(NEST_UNARY)})"
            )
        return NestExpr(("unary", op, NestExpr.of(x).spec))

    @staticmethod
    def max(a: Any, b: Any) -> NestExpr:
        return NestExpr.of(a)._bin("max", b)

    @staticmethod
    def min(a: Any, b: Any) -> NestExpr:
        return NestExpr.of(a)._bin("min", b)

    @staticmethod
    def gelu(value: Any) -> NestExpr:
        """The tanh approximation ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``."""
        x = NestExpr.of(value)
        inner = 0.7978845608028654 * (x + 0.044715 * (x * (x * x)))
        return 0.5 * x * (1.0 + Nest.unary("tanh", inner))

    def store(self, target: NestExpr, value: Any, accumulate: bool = False) -> None:
        """``target = value`` (``+=`` with `accumulate`) over the parallel
        loops; `target` is ``buffer[index, ...]``."""
        if not (isinstance(target, NestExpr) and target.spec[0] == "load"):
            raise ArgumentError("the store's target is a buffer element: buf[i, j]")
        if self._stored is not None:
            raise BuildError(f"nest {self.name!r}: a nest stores once")
        e = NestExpr.of(value).spec
        if accumulate:
            e = ("binary", "add", e, target.spec)
        found: list[Any] = []
        e = _take_sums(e, found)
        # One sum used several times (gelu(s) reads s five times) is one sum.
        sums = [v for n, v in enumerate(found) if v not in found[:n]]
        has_reduction = any(lp["kind"] == "reduction" for lp in self.loops)
        if has_reduction != bool(sums) or len(sums) > 1:
            raise BuildError(
                f"nest {self.name!r}: with reduction loops the stored value holds exactly one "
                f"sum(...), without them none (found {len(sums)})"
            )
        self._stored = {"output": (target.spec[1], target.spec[2])}
        if sums:
            self._stored["value"] = sums[0]
            if e != ("reduced",):
                self._stored["epilogue"] = e
        else:
            self._stored["value"] = e

    def spec(self) -> dict[str, Any]:
        """The description :func:`nest_to_tile` takes."""
        if self._stored is None:
            raise BuildError(f"nest {self.name!r} stores nothing (call store)")
        return {"name": self.name, "loops": self.loops, "buffers": self.buffers, **self._stored}

    def lower(self, *, arch: str | None = None, schedule: Any = None) -> NestTile:
        """:func:`nest_to_tile` of :meth:`spec`."""
        return nest_to_tile(self.spec(), arch=arch, schedule=schedule)

    def report(self) -> str:
        return nest_tiling_report(self.spec())


def _take_sums(e: Any, sums: list[Any]) -> Any:
    """`e` with each ``("sum", v)`` replaced by ``("reduced",)``, the `v`s in `sums`."""
    if not isinstance(e, tuple) or not e:
        return e
    if e[0] == "sum":
        inner: list[Any] = []
        sums.append(_take_sums(e[1], inner))
        if inner:
            raise BuildError("a sum inside a sum: a nest sums once")
        return ("reduced",)
    if e[0] == "unary":
        return ("unary", e[1], _take_sums(e[2], sums))
    if e[0] == "binary":
        return ("binary", e[1], _take_sums(e[2], sums), _take_sums(e[3], sums))
    return e


# ------------------------------------------------ lang.prange kernels as nests
#
# A ``@zyntax.kernel`` whose body is one ``lang.prange`` nest of a shape the
# core recognises is described, for concrete arguments, as a Nest and
# lowered by the core (tensor cores for bf16/f16, the epilogue fused);
# anything else keeps the kernel front-end's own lowering (threads +
# shared-memory tiling), and the report says why.

_PRANGE_UNARY = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "abs", "floor", "ceil"}
#: Conversions the nest drops: it computes in f32 (f64 when a buffer is f64).
_PRANGE_CASTS = {"f32", "f64", "float32", "float64", "float"}
_NUMPY_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16"}
_TORCH_NAMES = {
    "torch.float32": "f32",
    "torch.float64": "f64",
    "torch.float16": "f16",
    "torch.bfloat16": "bf16",
}


class _NotANest(Exception):
    """The kernel is not a nest the tile path takes; the message says why."""


def _array_info(a: Any) -> tuple[str, tuple[int, ...]] | str | None:
    """(dtype, shape) of a contiguous float array, None for a scalar, or a
    sentence saying why the array cannot be a nest buffer."""
    if isinstance(a, numbers.Number):
        return None
    if isinstance(a, np.ndarray):
        dt = _NUMPY_NAMES.get(a.dtype.name)
        if dt is None or not a.flags.c_contiguous:
            return f"a {a.dtype} numpy array{'' if a.flags.c_contiguous else ' (not contiguous)'}"
        return dt, tuple(a.shape)
    if _is_torch(a):
        dt = _TORCH_NAMES.get(str(a.dtype))
        if dt is None or not a.is_contiguous():
            return f"a {a.dtype} tensor{'' if a.is_contiguous() else ' (not contiguous)'}"
        return dt, tuple(a.shape)
    cai = getattr(a, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        dt = _NUMPY_NAMES.get(np.dtype(cai["typestr"]).name)
        shape = _device_shape(a)
        if dt is None or shape is None:
            return (
                f"a device array of {np.dtype(cai['typestr'])} (a contiguous float array is needed)"
            )
        return dt, tuple(shape)
    return f"a {type(a).__name__}"


def _callee(f: ast.expr) -> str | None:
    """``lang.exp`` / ``math.exp`` / ``exp`` -> ``exp``."""
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None


class _PrangeNest:
    """Describes a prange kernel's nest for concrete arguments (see kernel_nest)."""

    def __init__(self, name: str, params: list[str], args: Sequence[Any]) -> None:
        self.nest = Nest(name)
        self.scalars: dict[str, Any] = {}
        self.buffers: dict[str, NestBuffer] = {}
        self.not_buffers: dict[str, str] = {}
        self.positions: list[int] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        for pos, (p, a) in enumerate(zip(params, args, strict=True)):
            info = _array_info(a)
            if info is None:
                self.scalars[p] = a
            elif isinstance(info, str):
                self.not_buffers[p] = info
            else:
                self.buffers[p] = self.nest.buffer(p, info[0], info[1])
                self.shapes[p] = info[1]
                self.positions.append(pos)
        self.loops: dict[str, NestLoop] = {}
        self.temps: dict[str, NestExpr] = {}
        self.sizes: list[int] = []

    def build(self, fn: ast.FunctionDef) -> Nest:
        body = [
            s
            for s in fn.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        nest = body[0] if len(body) == 1 else None
        if not (
            isinstance(nest, ast.For)
            and isinstance(nest.iter, ast.Call)
            and _callee(nest.iter.func) == "prange"
        ):
            raise _NotANest("the kernel's body is not one `for ... in lang.prange(...)` nest")
        targets = nest.target.elts if isinstance(nest.target, ast.Tuple) else [nest.target]
        self.sizes = [self.size(a) for a in nest.iter.args]
        if len(targets) != len(self.sizes) or not all(isinstance(t, ast.Name) for t in targets):
            raise _NotANest("the prange targets are not one name per dimension")
        for t, n in zip(targets, self.sizes, strict=True):
            assert isinstance(t, ast.Name)
            self.loops[t.id] = self.nest.parallel(t.id, n)
        *head, last = nest.body
        for s in head:
            self.statement(s)
        self.store(last)
        return self.nest

    # -- statements
    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            self.temps[s.targets[0].id] = self.expr(s.value)
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value:
            self.temps[s.target.id] = self.expr(s.value)
        elif isinstance(s, ast.For):
            self.reduction(s)
        else:
            raise _NotANest(f"line {s.lineno}: `{ast.unparse(s)}` is not an assignment or a sum")

    def reduction(self, s: ast.For) -> None:
        """``for k in range(K): acc += X`` (or ``acc = acc + X``,
        ``acc = lang.fma(x, y, acc)``): acc becomes ``init + sum(X)``."""
        it = s.iter
        if not (
            isinstance(it, ast.Call)
            and _callee(it.func) == "range"
            and isinstance(s.target, ast.Name)
            and len(s.body) == 1
            and not s.orelse
        ):
            raise _NotANest(
                f"line {s.lineno}: the inner loop is not `for k in range(K):` + one update"
            )
        if len(it.args) == 2 and self.size(it.args[0]) == 0:
            extent = it.args[1]
        elif len(it.args) == 1:
            extent = it.args[0]
        else:
            raise _NotANest(f"line {s.lineno}: the inner range does not start at 0 with step 1")
        k = s.target.id
        self.loops[k] = self.nest.reduction(k, self.size(extent))
        acc, summand = self.update(s.body[0])
        del self.loops[k]  # the reduction index means nothing after its loop
        if acc not in self.temps:
            raise _NotANest(f"line {s.lineno}: `{acc}` is summed but not initialised before")
        init = self.temps[acc]
        total = Nest.sum(summand)
        self.temps[acc] = total if init.spec == ("const", 0.0) else init + total

    def update(self, u: ast.stmt) -> tuple[str, NestExpr]:
        where = f"line {u.lineno}: `{ast.unparse(u)}`"
        if isinstance(u, ast.AugAssign) and isinstance(u.target, ast.Name):
            if isinstance(u.op, ast.Add):
                return u.target.id, self.expr(u.value)
            raise _NotANest(f"{where} is not a sum")
        if isinstance(u, ast.Assign) and len(u.targets) == 1 and isinstance(u.targets[0], ast.Name):
            acc, v = u.targets[0].id, u.value

            def is_acc(e: ast.expr) -> bool:
                return isinstance(e, ast.Name) and e.id == acc

            if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Add):
                if is_acc(v.left):
                    return acc, self.expr(v.right)
                if is_acc(v.right):
                    return acc, self.expr(v.left)
            if isinstance(v, ast.Call) and _callee(v.func) == "fma" and len(v.args) == 3:
                if is_acc(v.args[2]):
                    return acc, self.expr(v.args[0]) * self.expr(v.args[1])
        raise _NotANest(f"{where} is not `acc += ...`, `acc = acc + ...` or `acc = fma(x, y, acc)`")

    def store(self, s: ast.stmt) -> None:
        target = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
        accumulate = isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add)
        if accumulate:
            assert isinstance(s, ast.AugAssign)
            target = s.target
        if not isinstance(target, ast.Subscript):
            first = ast.unparse(s).splitlines()[0]
            raise _NotANest(
                f"line {s.lineno}: the nest ends with `{first}`, not a store of one element"
            )
        value = s.value  # type: ignore[attr-defined]
        try:
            self.nest.store(self.load(target), self.expr(value), accumulate=accumulate)
        except BuildError as e:
            raise _NotANest(str(e)) from None

    # -- expressions
    def expr(self, e: ast.expr) -> NestExpr:
        if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)):
            return NestExpr.of(float(e.value))
        if isinstance(e, ast.Name):
            if e.id in self.temps:
                return self.temps[e.id]
            if isinstance(self.scalars.get(e.id), numbers.Real):
                return NestExpr.of(float(self.scalars[e.id]))
            raise _NotANest(f"line {e.lineno}: `{e.id}` is not a value the nest knows")
        if isinstance(e, ast.Subscript):
            return self.load(e)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            x = self.expr(e.operand)
            return -x if isinstance(e.op, ast.USub) else x
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            ops = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}
            op = ops.get(type(e.op))
            if op is None:
                raise _NotANest(f"line {e.lineno}: operator `{ast.unparse(e)}` is not element-wise")
            return a._bin(op, b)
        if isinstance(e, ast.Call):
            f = _callee(e.func)
            args = [self.expr(a) for a in e.args]
            if f in _PRANGE_UNARY and len(args) == 1:
                return Nest.unary(f, args[0])
            if f in ("max", "min") and len(args) == 2:
                return Nest.max(*args) if f == "max" else Nest.min(*args)
            if f == "fma" and len(args) == 3:
                return args[0] * args[1] + args[2]
            if f in _PRANGE_CASTS and len(args) == 1:
                return args[0]
        raise _NotANest(f"line {e.lineno}: `{ast.unparse(e)}` is not lowered to tiles")

    def load(self, e: ast.Subscript) -> NestExpr:
        if not isinstance(e.value, ast.Name):
            raise _NotANest(f"line {e.lineno}: `{ast.unparse(e)}` does not index an argument")
        name = e.value.id
        if name in self.not_buffers:
            raise _NotANest(f"argument {name!r} is {self.not_buffers[name]}")
        if name not in self.buffers:
            raise _NotANest(f"line {e.lineno}: `{name}` is not an array argument")
        idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
        try:
            return self.buffers[name][tuple(self.index(i) for i in idx)]
        except ArgumentError as err:
            raise _NotANest(f"line {e.lineno}: {err}") from None

    def index(self, e: ast.expr) -> Any:
        if isinstance(e, ast.Name) and e.id in self.loops:
            return self.loops[e.id]
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = NestIndex.of(self.index(e.left)), self.index(e.right)
            if isinstance(e.op, ast.Add):
                ix = a + b
            else:
                ix = a - b if isinstance(e.op, ast.Sub) else a * b
            # Not affine: the report quotes the index as written.
            return ix if ix.opaque is None else _opaque(ast.unparse(e))
        try:
            return self.size(e)
        except _NotANest:
            return _opaque(ast.unparse(e))

    def size(self, e: ast.expr) -> int:
        """An int known from the arguments: a literal, an int argument,
        ``x.shape[d]``, ``len(x)``, or arithmetic of those."""
        if isinstance(e, ast.Constant) and isinstance(e.value, int):
            return int(e.value)
        if isinstance(e, ast.Name) and isinstance(self.scalars.get(e.id), numbers.Integral):
            return int(self.scalars[e.id])
        if (
            isinstance(e, ast.Subscript)
            and isinstance(e.value, ast.Attribute)
            and e.value.attr == "shape"
            and isinstance(e.value.value, ast.Name)
            and e.value.value.id in self.shapes
            and isinstance(e.slice, ast.Constant)
            and isinstance(e.slice.value, int)
        ):
            return self.shapes[e.value.value.id][e.slice.value]
        if isinstance(e, ast.Call) and _callee(e.func) == "len" and len(e.args) == 1:
            arg = e.args[0]
            if isinstance(arg, ast.Name) and arg.id in self.shapes:
                return self.shapes[arg.id][0]
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = self.size(e.left), self.size(e.right)
            if isinstance(e.op, ast.Add):
                return a + b
            return a - b if isinstance(e.op, ast.Sub) else a * b
        raise _NotANest(f"line {getattr(e, 'lineno', '?')}: `{ast.unparse(e)}` is not a known size")


@dataclass
class KernelNest:
    """:func:`kernel_nest`'s answer: `tile`, the :class:`NestTile` (lowered,
    or refused with the reason in its report); `positions`, which kernel
    arguments are its buffers (in order); `sizes`, the prange extents (for
    the fallback launch; empty when no prange nest was found)."""

    tile: NestTile
    positions: tuple[int, ...]
    sizes: tuple[int, ...]

    @property
    def report(self) -> str:
        return self.tile.report

    def buffers(self, args: Sequence[Any]) -> list[Any]:
        """The nest's buffers among the kernel's arguments."""
        return [args[p] for p in self.positions]


def kernel_nest(kern: Any, *args: Any, arch: str | None = None, schedule: Any = None) -> KernelNest:
    """Describes a ``@zyntax.kernel`` whose body is one ``lang.prange`` nest
    as a nest for these arguments and lowers it in the core
    (:func:`nest_to_tile`): ``for i, j in lang.prange(M, N)`` with
    element-wise statements, at most one ``for k in range(K)`` sum
    (``acc += x * y``, ``acc = lang.fma(x, y, acc)``) and one final store
    (``c[i, j] = f(acc, ...)``). Array arguments are the buffers
    (contiguous float numpy arrays, torch tensors or device arrays), int and
    float arguments constants of this specialisation. A kernel of another
    shape gets a refused :class:`NestTile` (``refusal="NotANest"``) whose
    report says why; :func:`launch_prange` then launches the kernel's own
    lowering."""
    import inspect
    import textwrap

    pyfunc = getattr(kern, "pyfunc", kern)
    name = getattr(pyfunc, "__name__", "kernel")
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(pyfunc)))
    except (OSError, TypeError, SyntaxError) as e:
        raise ArgumentError(f"cannot read the source of kernel {name!r}: {e}") from None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        raise ArgumentError(f"kernel {name!r}: no function definition in its source")
    params = [a.arg for a in fn.args.args]
    if len(args) != len(params):
        raise ArgumentError(f"kernel {name!r} takes {len(params)} arguments, got {len(args)}")
    p = _PrangeNest(name, params, args)
    try:
        nest = p.build(fn)
    except _NotANest as e:
        refused = NestTile(
            report=f"{name}: not tiled (NotANest): {e}", refusal="NotANest", reason=str(e)
        )
        return KernelNest(refused, tuple(p.positions), tuple(p.sizes))
    return KernelNest(nest.lower(arch=arch, schedule=schedule), tuple(p.positions), tuple(p.sizes))


_KERNEL_NESTS: dict[tuple[Any, ...], KernelNest] = {}


def launch_prange(kern: Any, *args: Any, device: int = 0, stream: Any = None) -> KernelNest:
    """Launches a ``lang.prange`` kernel on the GPU: through the core's tile
    program when :func:`kernel_nest` lowers its nest (cached per argument
    shapes, dtypes and scalar values), else through the kernel's own
    lowering over the prange extents (``kern[kern.launch_grid(*sizes)]``).
    Returns the :class:`KernelNest`, whose report says which."""
    from zyntax import cuda

    def key_of(a: Any) -> Any:
        info = _array_info(a)
        return ("scalar", a) if info is None else info

    key = (id(kern), device, *(key_of(a) for a in args))
    kn = _KERNEL_NESTS.get(key)
    if kn is None:
        kn = kernel_nest(kern, *args, arch=cuda.device_arch(device))
        _KERNEL_NESTS[key] = kn
    if kn.tile.kernel is not None:
        kn.tile.launch(*kn.buffers(args), device=device, stream=stream)
    elif kn.sizes:
        kern[kern.launch_grid(*kn.sizes)](*args)
    else:
        raise ArgumentError(f"{kn.report}; launch it with an explicit grid")
    return kn


# ------------------------------------------------ fusion of nests (in the core)


@dataclass
class FusedNests:
    """:func:`fuse_nests`'s answer: the fused `nests` (descriptions, one
    kernel each), the input nests each runs (`members`), every decision
    (dicts: producer, consumer, fused, rule, why) and the `report`."""

    nests: list[dict[str, Any]]
    members: list[list[str]]
    decisions: list[dict[str, Any]]
    report: str

    def lower(self, *, arch: str | None = None, schedule: Any = None) -> list[NestTile]:
        """Each fused nest through :func:`zyntax.tiling.nest_to_tile`."""
        return [nest_to_tile(s, arch=arch, schedule=schedule) for s in self.nests]


def ptxas_measure(arch: str) -> Any:
    """A `measure` for :func:`fuse_nests`: the registers per thread and
    static shared bytes ptxas reports for a lowered kernel on `arch`, or
    None when this build has no PTX backend or no ptxas is found."""
    from zyntax import _native
    from zyntax.ptxinfo import ptxas_resources

    compile_ptx = getattr(_native, "compile_ptx", None)
    assemble = getattr(_native, "ptxas_assemble", None)

    def measure(module: Any, name: str) -> tuple[int, int] | None:
        if compile_ptx is None or assemble is None:
            return None
        ptx = compile_ptx(module, arch)
        try:
            log = assemble(ptx if isinstance(ptx, str) else ptx["ptx"], arch)["log"]
        except Exception:  # no ptxas on this machine: not measured, said so
            return None
        res = ptxas_resources(str(log)).get(name)
        if res is None:
            return None
        return int(res.get("registers", 0)), int(res.get("shared_bytes", 0))

    return measure


def fuse_nests(
    nests: Sequence[Any],
    temporaries: Sequence[str],
    *,
    arch: str | None = None,
    measure: Any = True,
) -> FusedNests:
    """Fuses a sequence of nests (:class:`Nest`s or descriptions; buffers
    shared by name) in the Rust core (``zyntax_opt::nest_tile::fuse``,
    docs/fusion.md "Nests"): each element-wise consumer of a temporary
    another nest writes joins that nest (a contraction's epilogue), the
    temporary is never stored, and every decision is reported. With
    `measure` (default: ptxas for `arch`, the target table's default arch
    when None) the core lowers
    each fused nest and refuses a fusion whose measured registers or shared
    memory exceed the budget; ``measure=False`` skips the check, a callable
    ``measure(module, kernel_name) -> (registers, shared_bytes) | None``
    replaces ptxas."""
    from zyntax import _native, targets

    specs = [n.spec() if isinstance(n, Nest) else n for n in nests]
    if measure is True:
        measure = ptxas_measure(arch or targets.DEFAULT_ARCH)
    elif measure is False:
        measure = None
    r = _native.nest_fuse(specs, list(temporaries), arch=arch, measure=measure)
    return FusedNests(
        nests=list(r["nests"]),
        members=[list(m) for m in r["members"]],
        decisions=list(r["decisions"]),
        report=str(r["report"]),
    )
