"""Automatic shared-memory tiling of reductions in a parallel loop nest.

A reduction inside a parallel nest declares what it reads as ``(pointer,
index)`` pairs whose indices are *affine forms* of the nest indices and the
reduction index (coefficients and offsets are Python ints or values defined
before the nest)::

    with m.kernel("mm", params, max_threads=(16, 16)) as b:
        a, bm, c, M, N, K = b.params
        with tiled_parallel_for(b, (M, N), workgroup=(16, 16), writes=[c]) as nest:
            i, j = nest.indices
            acc = nest.reduce(
                K, init=0.0,
                loads=lambda k: [(a, i * K + k), (bm, k * N + j)],
                combine=lambda acc, x, y: b.fma(x, y, acc),
            )
            with nest.inside():
                vi, vj = nest.values
                b.store(b.ptr_add(c, vi * N + vj), acc)
    print(nest.report)

Tiling happens as the nest is built (the helpers know the loop structure, and
the builder emits HIR eagerly, so a later HIR pass would have to rediscover the
nest from thread-index arithmetic). Every operand whose index does not depend
on some nest index is reused across that dimension of the workgroup: it is
staged through a shared-memory tile of ``workgroup extents x tile_k`` elements
(rows padded by one element against bank conflicts) between two barriers per
``tile_k`` step. Operands it cannot stage are loaded directly, and
:attr:`TiledNest.report` says why: an index that is not affine, a pointer that
the nest writes (``writes=``) or that is not a kernel parameter (aliasing it
cannot rule out), an operand that depends on every nest index (no reuse) or on
no reduction index, and a bound that is not loop-invariant (then nothing is
tiled). Tiles are bounded by the hardware (:data:`MAX_SHARED_BYTES`,
:data:`MAX_STAGED_PER_THREAD`; docs/tiling.md, "Tile-size limits").

The decisions (which operands are staged, the tiles' layouts, ``tile_k``
under the limits, the report) and the emission are the Rust core's,
``zyntax_opt::nest_stage`` (``plan_reduction``, ``TiledNest``); this module
lifts the ``loads=`` indices to affine forms and drives the Rust emitter on
the native builder under the one it is given (a
``zyntax.hir.FunctionBuilder`` or the kernel translator's), which calls
``combine`` back.

Exactness: every output element combines its terms in the order ``k = 0, 1,
..., K-1`` with the caller's ``combine``, exactly as the untiled loop does; the
last, ragged tile runs a shorter loop rather than padding with zeros, so the
results are bit-identical to the untiled nest.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from zyntax import _native
from zyntax.errors import BuildError
from zyntax.nest import _block_shape, check_sizes

__all__ = [
    "DEFAULT_TILE_K",
    "MAX_SHARED_BYTES",
    "MAX_STAGED_PER_THREAD",
    "NEST_UNARY",
    "Affine",
    "FusedNests",
    "KernelNest",
    "Nest",
    "NestBuffer",
    "NestExpr",
    "NestIndex",
    "NestLoop",
    "NestTile",
    "NestViewArg",
    "NotAffine",
    "TiledNest",
    "at",
    "fuse_nests",
    "kernel_nest",
    "launch_prange",
    "load",
    "nest_tiling_report",
    "nest_to_tile",
    "ptxas_measure",
    "tiled_parallel_for",
]

#: The tiler's limits, from the Rust core (zyntax_opt::nest_stage):
#: the static shared memory a block may declare on every target (all tiles of
#: a nest must fit); the elements of one operand's tile each thread copies per
#: ``tile_k`` step (the copy is unrolled, so this bounds its code size and
#: registers); the automatic ``tile_k`` (halved until the tiles fit).
MAX_SHARED_BYTES, MAX_STAGED_PER_THREAD, DEFAULT_TILE_K = _native.tiling_limits()

#: A coefficient or offset of an affine form: an int, or a value defined before the nest.
Coef = Any


class NotAffine:
    """An index expression the tiler cannot express as an affine form; `why`
    says what. It still evaluates (untiled): `expr` is ``(op, a, b)`` over
    affine forms, or `fn` computes the index from the reduction index value."""

    def __init__(
        self,
        why: str,
        expr: tuple[str, Any, Any] | None = None,
        fn: Any = None,
        text: str | None = None,
    ) -> None:
        self.why, self.expr, self.fn = why, expr, fn
        self.text = text  # the index as written, for the report

    def __add__(self, other: Any) -> NotAffine:
        return NotAffine(self.why, ("+", self, other))

    def __radd__(self, other: Any) -> NotAffine:
        return NotAffine(self.why, ("+", other, self))

    def __mul__(self, other: Any) -> NotAffine:
        return NotAffine(self.why, ("*", self, other))

    def __rmul__(self, other: Any) -> NotAffine:
        return NotAffine(self.why, ("*", other, self))

    def __repr__(self) -> str:
        return f"NotAffine({self.why})"

    def __str__(self) -> str:
        return self.text if self.text is not None else repr(self)


def _is_value(x: Any) -> bool:
    return hasattr(x, "id") and hasattr(x, "type")


@dataclass(frozen=True, eq=False)
class Affine:
    """``sum(coef[s] * s) + const`` over the symbols ``s`` (nest indices by
    position ``0..n-1`` and the reduction index ``"k"``)."""

    terms: tuple[tuple[Any, tuple[Coef, ...]], ...] = ()
    const: tuple[Coef, ...] = ()
    names: tuple[tuple[Any, str], ...] = field(default=(), compare=False)

    # A coefficient is kept as a tuple of factors summed: () is 0, (1,), (v,), (2, v)...
    def coef(self, sym: Any) -> tuple[Coef, ...]:
        for s, c in self.terms:
            if s == sym:
                return c
        return ()

    def _syms(self) -> list[Any]:
        return [s for s, _ in self.terms]

    def __add__(self, other: Any) -> Affine | NotAffine:
        o = _lift(other)
        if isinstance(o, NotAffine):
            return o
        terms = dict(self.terms)
        for s, c in o.terms:
            terms[s] = terms.get(s, ()) + c
        return Affine(tuple(terms.items()), self.const + o.const, self.names + o.names)

    __radd__ = __add__

    def __mul__(self, other: Any) -> Affine | NotAffine:
        o = _lift(other)
        if isinstance(o, NotAffine):
            return o
        if self.terms and o.terms:
            return NotAffine(f"product of two loop-dependent terms ({self} * {o})", ("*", self, o))
        var, inv = (self, o) if self.terms else (o, self)
        factor = inv.const
        if len(factor) != 1:
            # (a + b) * i: keep it affine by distributing over the summands
            parts = [var * Affine(const=(f,)) for f in factor]
            out: Affine | NotAffine = Affine()
            for p in parts:
                out = out + p
            return out
        f = factor[0]
        terms = tuple((s, tuple(_times(c, f) for c in cs)) for s, cs in var.terms)
        return Affine(terms, tuple(_times(c, f) for c in var.const), var.names)

    __rmul__ = __mul__

    def __str__(self) -> str:
        names = dict(self.names)
        parts = [f"{_fmt(c)}*{names.get(s, s)}" for s, c in self.terms if c]
        parts += [_fmt((c,)) for c in self.const]
        return " + ".join(parts) or "0"


def _is_one(c: Any) -> bool:
    return isinstance(c, int) and c == 1


def _times(a: Coef, b: Coef) -> Coef:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if _is_one(a):
        return b
    if _is_one(b):
        return a
    return ("*", a, b)


def _fmt(c: tuple[Coef, ...]) -> str:
    def one(x: Coef) -> str:
        if isinstance(x, tuple):
            return f"{one(x[1])}*{one(x[2])}"
        return x.name if _is_value(x) else str(x)

    return "+".join(one(x) for x in c)


def _lift(x: Any) -> Affine | NotAffine:
    if isinstance(x, Affine | NotAffine):
        return x
    if isinstance(x, int):
        return Affine(const=(x,))
    if _is_value(x):
        return Affine(const=(x,))
    if callable(x):
        return NotAffine(
            "the index is computed by a function (data-dependent), not an affine form", fn=x
        )
    return NotAffine(f"{x!r} is not an int, a value or a loop index")


@dataclass
class _Operand:
    pos: int
    ptr: Any
    index: Affine | NotAffine


class TiledNest:
    """An open tiled nest: :attr:`indices` are affine symbols for the loads of
    :meth:`reduce`, :attr:`values` the same indices as ``u32`` values, and
    :attr:`report` says, per operand of each reduction, whether it was tiled
    and why not.

    The Rust core emits the nest and its reductions
    (``zyntax_opt::nest_stage::TiledNest``, through ``_native.tiling_begin``)
    on the native builder: `b` itself (a ``zyntax.hir.FunctionBuilder``), or
    the one under the kernel translator's builder."""

    def __init__(
        self, b: Any, sizes: Sequence[Any], workgroup: Sequence[int], writes: Sequence[Any]
    ) -> None:
        self.b = b
        self.workgroup = tuple(int(w) for w in workgroup)
        self.block = _block_shape(workgroup)
        self.writes = list(writes)
        self.report: list[str] = []
        n = len(sizes)
        self.sizes = [s if _is_value(s) else b.const(int(s), "u32") for s in check_sizes(sizes)]
        names = tuple((d, f"i{d}") for d in range(n))
        self.indices = tuple(Affine(((d, (1,)),), (), names) for d in range(n))
        self.threads = math.prod(self.workgroup)
        #: Bytes of shared memory the tiles of this nest's reductions take so far.
        self.shared_bytes = 0
        self._io = io = _NativeIO(b)
        self._rust = _native.tiling_begin(
            io.fb,
            [io.unwrap(s) for s in self.sizes],
            list(self.workgroup),
            [io.unwrap(w) for w in self.writes if _is_value(w)],
        )
        self.values = tuple(io.wrap(v) for v in self._rust.values())
        self.in_range = io.wrap(self._rust.in_range())

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """``with nest.inside():`` code for in-range points only (the stores)."""
        with self.b.if_(self.in_range):
            yield

    # ---------------------------------------------------------------- values of affine forms
    # (the indices the Rust emitter calls back for: those it cannot analyse)

    def _coef_value(self, c: Coef) -> Any:
        if isinstance(c, tuple):
            return self._coef_value(c[1]) * self._coef_value(c[2])
        return c

    def _sum(self, parts: list[Any]) -> Any:
        out: Any = None
        for p in parts:
            if isinstance(p, int) and p == 0:
                continue
            if out is None:
                out = p if _is_value(p) else self.b.const(int(p), "u32")
            else:
                out = out + p
        return out if out is not None else self.b.const(0, "u32")

    def _eval(self, a: Affine, at: dict[Any, Any]) -> Any:
        """The value of `a` with each symbol replaced by ``at[symbol]``."""
        parts: list[Any] = []
        for s, cs in a.terms:
            for c in cs:
                cv = self._coef_value(c)
                x = at[s]
                parts.append(x if isinstance(cv, int) and cv == 1 else x * cv)
        parts += [self._coef_value(c) for c in a.const]
        return self._sum(parts)

    def _eval_any(self, x: Any, at: dict[Any, Any]) -> Any:
        """The value of an index expression, affine or not."""
        if isinstance(x, Affine):
            return self._eval(x, at)
        if isinstance(x, NotAffine):
            if x.fn is not None:
                return x.fn(at["k"])
            if x.expr is None:
                raise BuildError(f"an index the tiler cannot evaluate: {x.why}")
            op, lhs, rhs = x.expr
            lv, rv = self._eval_any(lhs, at), self._eval_any(rhs, at)
            return lv * rv if op == "*" else lv + rv
        return x

    # ---------------------------------------------------------------- the reduction

    def reduce(
        self,
        extent: Any,
        *,
        init: float | int | Any,
        loads: Callable[[Affine], Sequence[tuple[Any, Any]]],
        combine: Callable[..., Any],
        tile_k: int | None = None,
        ty: Any = None,
    ) -> Any:
        """``acc = init; for k in 0..extent: acc = combine(acc, *loaded)`` where
        ``loaded`` are the elements ``loads(k)`` names; returns ``acc`` in every
        thread (meaningful for in-range points).

        `tile_k` (reduction steps per tile) is bounded by the hardware: all
        tiles of the nest fit in :data:`MAX_SHARED_BYTES`, each thread copies
        at most :data:`MAX_STAGED_PER_THREAD` elements of a tile per step; a
        constant `extent` below it shortens it. A `tile_k` that breaks a bound
        is a BuildError. None (the default) is :data:`DEFAULT_TILE_K`, halved
        until the tiles fit; when not even 1 fits, the operands are loaded
        directly and the report says why.

        The Rust core plans, stages and loops
        (``nest_stage::TiledNest::reduce``); `combine` and the indices it
        cannot analyse are called back from it, emitting through `b`."""
        b, io = self.b, self._io
        check_sizes([extent], "reduction bound")
        _check_tile_k(tile_k)
        k_sym = Affine((("k", (1,)),), (), (("k", "k"),))
        ops = [_Operand(p, ptr, _lift(ix)) for p, (ptr, ix) in enumerate(loads(k_sym))]
        for op in ops:
            if not _is_value(op.ptr):
                raise BuildError(f"operand {op.pos} reads {op.ptr!r}, which is not a pointer value")
        acc_ty = ty if ty is not None else _elem(ops[0].ptr) if ops else "f32"
        acc0 = init if _is_value(init) else b.const(init, acc_ty)
        names, index_names, encoded = self._encode(ops)

        def opaque(pos: int, k: Any) -> Any:
            io.sync()
            at: dict[Any, Any] = dict(enumerate(self.values))
            at["k"] = io.wrap(k)
            return io.unwrap(self._eval_any(ops[pos].index, at))

        def fold(acc: Any, *xs: Any) -> Any:
            io.sync()
            return io.unwrap(combine(io.wrap(acc), *(io.wrap(x) for x in xs)))

        if _is_value(extent):
            names[extent.id] = extent.name
        try:
            acc, report = self._rust.reduce(
                io.unwrap(extent) if _is_value(extent) else int(extent),
                io.unwrap(acc0),
                [(io.unwrap(op.ptr), ix) for op, ix in zip(ops, encoded, strict=True)],
                list(names.items()),
                index_names,
                fold,
                opaque,
                tile_k=None if tile_k is None else int(tile_k),
            )
        finally:
            io.sync()
        self.report += report
        self.shared_bytes = self._rust.shared_bytes
        return io.wrap(acc)

    def _encode(self, ops: list[_Operand]) -> tuple[dict[int, str], list[str], list[Any]]:
        """The reduction's operands as the Rust core reads them: value names
        for the report, the nest indices' names and each index as nested
        tuples (``("affine", terms, const)`` or ``("not", why, text)``)."""
        names: dict[int, str] = {}

        def coef(c: Coef) -> Any:
            if isinstance(c, tuple):
                return ("*", coef(c[1]), coef(c[2]))
            if isinstance(c, int):
                return int(c)
            names[c.id] = c.name
            return ("v", c.id)

        def index(ix: Affine | NotAffine) -> Any:
            if isinstance(ix, NotAffine):
                return ("not", ix.why, ix.text)
            terms = [(s, [coef(c) for c in cs]) for s, cs in ix.terms]
            return ("affine", terms, [coef(c) for c in ix.const])

        encoded = []
        for op in ops:
            names[op.ptr.id] = op.ptr.name
            encoded.append(index(op.index))
        index_names = [
            dict(self.indices[d].names).get(d, f"i{d}") for d in range(len(self.workgroup))
        ]
        return names, index_names, encoded


class _NativeIO:
    """The native builder under `b` and the conversions of values across it:
    a ``zyntax.hir.FunctionBuilder`` is its own; the kernel translator's
    builder (``frontend.nest_tiling.TranslatorBuilder``) wraps one, and after
    the Rust tiler emitted blocks it continues in the current one (`sync`)."""

    def __init__(self, b: Any) -> None:
        self._outer: Any = None  # the translator's builder, when `b` is one
        if isinstance(b, _native.FunctionBuilder):
            self.fb = b
        elif hasattr(b, "native"):
            self.fb, self._outer = b.native, b
        else:
            raise BuildError(
                f"a tiled nest is built on a zyntax.hir.FunctionBuilder, not {type(b).__name__}"
            )

    def wrap(self, nv: Any) -> Any:
        return nv if self._outer is None else self._outer.adopt(nv)

    def unwrap(self, v: Any) -> Any:
        return v if self._outer is None else v.v.nv

    def sync(self) -> None:
        if self._outer is not None:
            self._outer.resync()


def _check_tile_k(tile_k: Any) -> None:
    if tile_k is not None and (
        isinstance(tile_k, bool) or not isinstance(tile_k, numbers.Integral)
    ):
        raise BuildError(f"tile_k must be an int, not {type(tile_k).__name__}")


def _elem(ptr: Any) -> Any:
    t = ptr.type
    if t.elem is None:
        raise BuildError(f"{ptr!r} is not a pointer")
    return t.elem


@contextlib.contextmanager
def tiled_parallel_for(
    b: Any, sizes: Sequence[Any], workgroup: Sequence[int], *, writes: Sequence[Any] = ()
) -> Iterator[TiledNest]:
    """Open a parallel nest whose reductions (:meth:`TiledNest.reduce`) are
    tiled through shared memory where that is legal. Unlike
    :func:`zyntax.nest.parallel_for` the body is not guarded (barriers need
    every thread): put stores under ``with nest.inside():``. `writes` names the
    buffers the nest stores to; operands reading them are not staged. The
    kernel must be launched with exactly `workgroup` threads per block
    (:func:`zyntax.nest.launch_grid`)."""
    sizes = check_sizes(sizes)
    _block_shape(workgroup)
    if len(sizes) != len(workgroup):
        raise BuildError(
            f"the nest has {len(sizes)} dimensions but the workgroup {tuple(workgroup)} "
            f"has {len(workgroup)}"
        )
    yield TiledNest(b, sizes, workgroup, writes)


# Nests lowered to tile programs by the Rust core (zyntax_opt::nest_tile):
# the launcher in zyntax.nest_tile, the builder and the lang.prange route in
# zyntax.nest_builder; re-exported here, where users find the tilers.
from zyntax.nest_builder import (  # noqa: E402
    NEST_UNARY,
    FusedNests,
    KernelNest,
    Nest,
    NestBuffer,
    NestExpr,
    NestIndex,
    NestLoop,
    fuse_nests,
    kernel_nest,
    launch_prange,
    ptxas_measure,
)
from zyntax.nest_tile import (  # noqa: E402
    NestTile,
    NestViewArg,
    at,
    load,
    nest_tiling_report,
    nest_to_tile,
)
