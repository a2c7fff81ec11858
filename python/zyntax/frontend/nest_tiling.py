"""Shared-memory tiling of ``lang.prange`` reductions: the kernel front-end's
side of :mod:`zyntax.tiling`.

A ``for i, j in prange(M, N):`` nest under ``@zyntax.kernel(workgroup=...)``
whose body holds reductions of the form ::

    acc = 0.0                                  # memory-free statements
    for k in range(K):                         # range(K) or range(0, K)
        acc += a[i, k] * b[k, j]               # one statement: acc op= E, or acc = E
    c[i, j] = acc                              # anything (runs for in-range points)

is translated through :class:`zyntax.tiling.TiledNest`, the same tiler the
builder's ``tiled_parallel_for`` uses: the array reads of ``E`` are its
operands (``a[i, k]`` is ``a`` at the affine form ``i * a.strides[0] + k *
a.strides[1]``), ``E`` with the loaded values substituted is its ``combine``.
The tiler decides per operand, stages what it can through shared memory with
barriers, and keeps the ``k`` order (exact). :class:`TranslatorBuilder` gives
it the builder calls it makes, emitted into the translator's function.

A nest that does not have this shape compiles as the plain guarded nest; the
report says why.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from typing import Any

from zyntax import lang
from zyntax.frontend import hirtypes as ir
from zyntax.frontend.emit import Block, Value, front_type
from zyntax.frontend.hirtypes import BOOL, I64, HType, Ptr, Scalar

__all__ = ["TV", "TranslatorBuilder", "plan_prange"]


class TType:
    """The type of a :class:`TV`, with what the tiler asks of a type."""

    def __init__(self, ht: HType) -> None:
        self.ht = ht

    @property
    def is_ptr(self) -> bool:
        return isinstance(self.ht, Ptr)

    @property
    def elem(self) -> TType | None:
        return TType(self.ht.pointee) if isinstance(self.ht, Ptr) else None

    @property
    def is_float(self) -> bool:
        return isinstance(self.ht, Scalar) and self.ht.is_float

    @property
    def size_bytes(self) -> int:
        """Bytes of a value of this type (the tiler sizes shared-memory tiles by it)."""
        ht = self.ht
        if isinstance(ht, Scalar):
            return ht.size_bytes
        if isinstance(ht, ir.Vec):
            return ht.elem.size_bytes * ht.lanes
        return 8  # a pointer

    def __str__(self) -> str:
        return str(self.ht)


class TV:
    """A translator value as the tiler sees a builder value (``id``, ``type``,
    ``name``, arithmetic and comparisons)."""

    def __init__(self, b: TranslatorBuilder, v: Value, name: str | None = None) -> None:
        self.b, self.v = b, v
        self._name = name

    @property
    def id(self) -> int:
        return int(self.v.nv.id)

    @property
    def type(self) -> TType:
        return TType(self.v.ty)

    @property
    def name(self) -> str:
        return self._name or f"v{self.id}"

    def _bin(self, op: str, other: Any, swap: bool = False) -> TV:
        a, c = self.b.unify(self, other)
        if swap:
            a, c = c, a
        return self.b.emit(op, [a, c], a.v.ty)

    def _cmp(self, op: str, other: Any) -> TV:
        a, c = self.b.unify(self, other)
        return self.b.emit(op, [a, c], BOOL)

    def __add__(self, o: Any) -> TV:
        return self._bin("add", o)

    def __radd__(self, o: Any) -> TV:
        return self._bin("add", o, True)

    def __sub__(self, o: Any) -> TV:
        return self._bin("sub", o)

    def __mul__(self, o: Any) -> TV:
        return self._bin("mul", o)

    def __rmul__(self, o: Any) -> TV:
        return self._bin("mul", o, True)

    def __truediv__(self, o: Any) -> TV:  # integer division (the tiler's indices are >= 0)
        return self._bin("div", o)

    def __mod__(self, o: Any) -> TV:
        return self._bin("rem", o)

    def __lt__(self, o: Any) -> TV:
        return self._cmp("cmp.lt", o)

    def __ge__(self, o: Any) -> TV:
        return self._cmp("cmp.ge", o)


def _scalar(ty: Any) -> HType:
    if isinstance(ty, TType):
        return ty.ht
    if isinstance(ty, str):
        return ir.scalar(ty)
    return ty  # type: ignore[no-any-return]


class TranslatorBuilder:
    """What :class:`zyntax.tiling.TiledNest` needs of the function a
    :class:`~zyntax.frontend.translator.FunctionTranslator` is building: its
    native builder (the Rust tiler emits there; the SSA construction sees
    every block, so the ``combine`` code may read the kernel's variables),
    values across it, and the index arithmetic of the forms it evaluates."""

    def __init__(self, tr: Any) -> None:
        self.tr = tr

    # ---- the Rust tiler (zyntax.tiling drives nest_stage::TiledNest on the native builder)
    @property
    def native(self) -> Any:
        """The native ``zyntax.hir.FunctionBuilder`` the translator emits through."""
        return self.tr.fn.b

    def adopt(self, nv: Any) -> TV:
        """A native value the Rust tiler made, as a translator value."""
        return TV(self, Value(nv, front_type(nv.type)))

    def resync(self) -> None:
        """The translator continues in the block the Rust tiler left current."""
        blk = Block(self.native.current_block, [])
        blk.preds = 1
        self.tr.fn.current = blk

    # ---- values
    def emit(self, op: str, args: list[TV], ty: HType, **imm: Any) -> TV:
        return TV(self, self.tr.fn.emit1(op, [a.v for a in args], ty, **imm))

    def const(self, v: Any, ty: Any) -> TV:
        return TV(self, self.tr.const(_scalar(ty), v))

    def value(self, x: Any, ty: HType) -> TV:
        """`x` (a TV or a Python number) as a value of type `ty`."""
        if not isinstance(x, TV):
            return self.const(x, ty)
        if x.v.ty == ty:
            return x
        return TV(self, self.tr.fn.emit1("cast", [x.v], ty))

    def unify(self, a: Any, c: Any) -> tuple[TV, TV]:
        """Two operands at one type: a number takes the other's; two integer
        types that differ meet at i64 (indices are never negative)."""
        if not isinstance(a, TV):
            return self.const(a, c.v.ty), c
        if not isinstance(c, TV):
            return a, self.const(c, a.v.ty)
        ta, tc = a.v.ty, c.v.ty
        if ta == tc:
            return a, c
        return self.value(a, I64), self.value(c, I64)

    # ---- control flow the translator asks of it
    @contextlib.contextmanager
    def if_(self, cond: TV) -> Iterator[None]:
        tr = self.tr
        then_b, merge = tr.fn.new_block(), tr.fn.new_block()
        tr.fn.branch(cond.v, then_b, merge)
        tr.seal(then_b)
        tr.fn.switch_to(then_b)
        yield
        if not tr.fn.terminated:
            tr.fn.jump(merge)
        tr.fn.switch_to(merge)
        tr.seal(merge)


# --------------------------------------------------------------------------- recognition


class Reduction:
    """One ``for k in range(K): acc op= E`` of a prange body."""

    def __init__(self, loop: ast.For, k: str, extent: ast.expr, acc: str, update: ast.stmt) -> None:
        self.loop, self.k, self.extent, self.acc, self.update = loop, k, extent, acc, update
        value = update.value if isinstance(update, (ast.AugAssign, ast.Assign)) else None
        assert value is not None
        self.expr: ast.expr = value
        # The operands: array reads of the update, not those inside another's indices.
        nested = {
            id(n)
            for sub in ast.walk(value)
            if isinstance(sub, ast.Subscript)
            for n in ast.walk(sub.slice)
        }
        self.reads = sorted(
            (n for n in ast.walk(value) if isinstance(n, ast.Subscript) and id(n) not in nested),
            key=lambda n: (n.lineno, n.col_offset),
        )


#: Calls a memory-free statement may make: scalar casts and math (by name).
_PURE_CALLS = frozenset(lang.DTYPES) | {
    "int",
    "float",
    "min",
    "max",
    "abs",
    "sqrt",
    "rsqrt",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "floor",
    "ceil",
    "fma",
}


def _pure_call(n: ast.Call) -> bool:
    f = n.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in _PURE_CALLS and not n.keywords


def _memory_read(n: ast.AST) -> bool:
    """An indexing that may read memory (``a.shape[0]``, ``a.strides[1]`` do not)."""
    return isinstance(n, ast.Subscript) and not (
        isinstance(n.value, ast.Attribute) and n.value.attr in ("shape", "strides")
    )


def _memory_free(s: ast.stmt) -> bool:
    """A plain assignment computing from scalars: no memory access, branch, or
    call other than a cast or math function."""
    if not isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return False
    return not any(
        _memory_read(n) or (isinstance(n, ast.Call) and not _pure_call(n)) for n in ast.walk(s)
    )


def _reduction(s: ast.stmt, nest_names: set[str]) -> Reduction | str | None:
    """The reduction `s` is, the reason it is a loop the tiler cannot take, or
    None when it is not a ``for`` loop at all."""
    if not isinstance(s, ast.For):
        return None
    it = s.iter
    if not (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and not it.keywords
        and (
            len(it.args) == 1
            or (
                len(it.args) == 2 and isinstance(it.args[0], ast.Constant) and it.args[0].value == 0
            )
        )
    ):
        return "the loop is not `for k in range(K)` (or range(0, K))"
    if not isinstance(s.target, ast.Name) or s.orelse:
        return "the loop variable is not a plain name"
    k = s.target.id
    if len(s.body) != 1:
        return "the loop body is not one update `acc op= expr` or `acc = expr`"
    u = s.body[0]
    if isinstance(u, ast.AugAssign) and isinstance(u.target, ast.Name):
        acc = u.target.id
    elif isinstance(u, ast.Assign) and len(u.targets) == 1 and isinstance(u.targets[0], ast.Name):
        acc = u.targets[0].id
    else:
        return "the loop body is not one update `acc op= expr` or `acc = expr`"
    r = Reduction(s, k, it.args[-1], acc, u)
    for sub in r.reads:
        if not isinstance(sub.value, ast.Name):
            return "an array read in the update is not `name[indices]`"
    inside = {id(n) for sub in r.reads for n in ast.walk(sub.slice)}
    for n in ast.walk(r.expr):
        if isinstance(n, ast.Name) and n.id == k and id(n) not in inside:
            return f"the loop index {k!r} is used outside array indices"
    if acc in nest_names or acc == k:
        return "the accumulator is a loop index"
    return r


def plan_prange(
    body: list[ast.stmt], nest_names: set[str]
) -> list[Reduction] | tuple[ast.AST, str]:
    """The reductions of a prange body if it has the tiled shape (memory-free
    statements and reductions, then anything), else where and why not."""
    found: list[Reduction] = []
    last = -1
    for n, s in enumerate(body):
        r = _reduction(s, nest_names)
        if isinstance(r, Reduction):
            found.append(r)
            last = n
        elif isinstance(r, str) and not found:
            return s, r
    if not found:
        return (
            body[0] if body else ast.Pass()
        ), "the nest body has no `for k in range(K)` reduction"
    for s in body[:last]:
        if not _memory_free(s) and not any(r.loop is s for r in found):
            return s, (
                "a statement before the last reduction reads or writes memory, calls or "
                "branches (every thread must reach the barriers, so only memory-free "
                "statements may precede a tiled reduction)"
            )
    return found
