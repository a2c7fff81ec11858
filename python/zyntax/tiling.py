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
under the limits, the report) are the Rust core's,
``zyntax_opt::nest_stage::plan_reduction`` (a Rust front-end also gets the
emission there, ``nest_stage::TiledNest``); this module lifts the ``loads=``
indices to affine forms, asks the core, and emits the plan on the builder it
is given (a ``zyntax.hir.FunctionBuilder`` or the kernel translator's).

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
from zyntax.nest import _DIMS, _block_shape, check_sizes

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
#: The value id a pointer that is not a value travels under (the plan refuses it).
_NO_VALUE = 2**32 - 1


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
    dims: list[int] = field(default_factory=list)  # nest dims the index depends on
    why: str | None = None  # None: tiled
    tile: Any = None
    row_base: Any = None  # this thread's offset into the tile
    # The tile's layout: coordinates fastest first, their strides, the staging
    # order (fastest first) and the padding of the fastest coordinate's rows.
    layout: list[Any] = field(default_factory=list)
    strides: dict[Any, int] = field(default_factory=dict)
    stage_order: list[Any] = field(default_factory=list)
    extent: dict[Any, int] = field(default_factory=dict)
    pad: int = 0
    size: int = 0


class TiledNest:
    """An open tiled nest: :attr:`indices` are affine symbols for the loads of
    :meth:`reduce`, :attr:`values` the same indices as ``u32`` values, and
    :attr:`report` says, per operand of each reduction, whether it was tiled
    and why not."""

    def __init__(
        self, b: Any, sizes: Sequence[Any], workgroup: Sequence[int], writes: Sequence[Any]
    ) -> None:
        self.b = b
        self.workgroup = tuple(int(w) for w in workgroup)
        self.block = _block_shape(workgroup)
        self.writes = list(writes)
        self.report: list[str] = []
        n = len(sizes)
        self._first_id: int | None = None
        self.sizes = [s if _is_value(s) else b.const(int(s), "u32") for s in check_sizes(sizes)]
        names = tuple((d, f"i{d}") for d in range(n))
        self.indices = tuple(Affine(((d, (1,)),), (), names) for d in range(n))
        self.threads = math.prod(self.workgroup)
        #: Bytes of shared memory the tiles of this nest's reductions take so far.
        self.shared_bytes = 0
        # On a zyntax.hir.FunctionBuilder the Rust core emits the nest and its
        # reductions (zyntax_opt::nest_stage::TiledNest); the kernel
        # translator's builder still gets the Python emission below.
        self._rust: Any = None
        if isinstance(b, _native.FunctionBuilder):
            self._rust = _native.tiling_begin(
                b, self.sizes, list(self.workgroup), [w for w in self.writes if _is_value(w)]
            )
            self.values = tuple(self._rust.values())
            self.in_range = self._rust.in_range()
            return
        self.tid: list[Any] = []
        self.base: list[Any] = []
        vals: list[Any] = []
        inside = None
        for d in range(n):
            dim = _DIMS[n - 1 - d]
            tid = b.thread_idx(dim)
            if self._first_id is None:
                self._first_id = tid.id
            base = b.block_idx(dim) * self.workgroup[d]
            i = base + tid
            below = i < self.sizes[d]
            inside = below if inside is None else b.and_(inside, below)
            self.tid.append(tid)
            self.base.append(base)
            vals.append(i)
        self.values = tuple(vals)
        self.in_range = inside
        self.flat_tid = self._flat_tid()

    def _flat_tid(self) -> Any:
        flat = self.tid[0]
        for d in range(1, len(self.tid)):
            flat = flat * self.workgroup[d] + self.tid[d]
        return flat

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        """``with nest.inside():`` code for in-range points only (the stores)."""
        with self.b.if_(self.in_range):
            yield

    # ---------------------------------------------------------------- values of affine forms

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
        directly and the report says why."""
        b = self.b
        check_sizes([extent], "reduction bound")
        k_sym = Affine((("k", (1,)),), (), (("k", "k"),))
        ops = [_Operand(p, ptr, _lift(ix)) for p, (ptr, ix) in enumerate(loads(k_sym))]
        acc_ty = ty if ty is not None else _elem(ops[0].ptr) if ops else "f32"
        acc0 = init if _is_value(init) else b.const(init, acc_ty)
        if self._rust is not None and all(_is_value(op.ptr) for op in ops):
            return self._rust_reduce(ops, extent, acc0, combine, tile_k)
        kv = extent if _is_value(extent) else b.const(int(extent), "u32")
        tile_k = self._plan(ops, extent, tile_k)
        if all(op.why is not None for op in ops):
            return self._untiled(ops, kv, acc0, combine)
        return self._tiled(ops, kv, acc0, combine, tile_k)

    def _rust_reduce(
        self,
        ops: list[_Operand],
        extent: Any,
        acc0: Any,
        combine: Callable[..., Any],
        tile_k: int | None,
    ) -> Any:
        """The reduction emitted by the Rust core (``nest_stage::TiledNest::reduce``):
        it plans, stages and loops; `combine` and the indices it cannot
        analyse are called back, emitting through this builder."""
        _check_tile_k(tile_k)
        names, index_names, _, encoded = self._encode(ops, extent)

        def opaque(pos: int, k: Any) -> Any:
            at: dict[Any, Any] = dict(enumerate(self.values))
            at["k"] = k
            return self._eval_any(ops[pos].index, at)

        acc, report = self._rust.reduce(
            extent if _is_value(extent) else int(extent),
            acc0,
            [(op.ptr, ix) for op, (_, _, ix) in zip(ops, encoded, strict=True)],
            list(names.items()),
            index_names,
            combine,
            opaque,
            tile_k=None if tile_k is None else int(tile_k),
        )
        self.report += report
        self.shared_bytes = self._rust.shared_bytes
        return acc

    def _encode(
        self, ops: list[_Operand], extent: Any
    ) -> tuple[dict[int, str], list[str], Any, list[Any]]:
        """The reduction as the Rust core reads it: value names for the
        report, the nest indices' names, the bound and the operands
        ``(ptr_id, elem_bytes, index)`` with affine forms as nested tuples."""
        names: dict[int, str] = {}

        def value(v: Any) -> Any:
            if isinstance(v, int):
                return int(v)
            names[v.id] = v.name
            return ("v", v.id)

        def coef(c: Coef) -> Any:
            return ("*", coef(c[1]), coef(c[2])) if isinstance(c, tuple) else value(c)

        def index(ix: Affine | NotAffine) -> Any:
            if isinstance(ix, NotAffine):
                return ("not", ix.why, ix.text)
            terms = [(s, [coef(c) for c in cs]) for s, cs in ix.terms]
            return ("affine", terms, [coef(c) for c in ix.const])

        operands = []
        for op in ops:
            if _is_value(op.ptr):
                names[op.ptr.id] = op.ptr.name
                t = op.ptr.type
                elem = t.elem.size_bytes if t.is_ptr and t.elem is not None else None
                operands.append((op.ptr.id, elem, index(op.index)))
            else:
                operands.append((_NO_VALUE, None, index(op.index)))
                names[_NO_VALUE] = repr(op.ptr)
        index_names = [
            dict(self.indices[d].names).get(d, f"i{d}") for d in range(len(self.workgroup))
        ]
        return names, index_names, value(extent), operands

    def _plan(self, ops: list[_Operand], extent: Any, tile_k: int | None) -> int:
        """The Rust core's decisions for this reduction
        (``zyntax_opt::nest_stage::plan_reduction``): per operand whether it
        is staged (and why not), its tile's layout, the ``tile_k`` used, and
        the report lines; claims the tiles' shared memory. A `tile_k` the
        hardware cannot hold is a BuildError."""
        _check_tile_k(tile_k)
        names, index_names, ext, operands = self._encode(ops, extent)
        assert self._first_id is not None  # set by the first nest index
        used, plans, report, self.shared_bytes = _native.tiling_plan(
            list(self.workgroup),
            self._first_id,
            [w.id for w in self.writes if _is_value(w)],
            self.shared_bytes,
            index_names,
            list(names.items()),
            ext,
            operands,
            tile_k=None if tile_k is None else int(tile_k),
        )
        for op, p in zip(ops, plans, strict=True):
            op.why, op.dims, op.pad, op.size = p["why"], p["dims"], p["pad"], p["size"]
            op.layout, op.stage_order = p["layout"], p["stage_order"]
            op.extent = dict(zip(op.layout, p["extents"], strict=True))
            op.strides = dict(zip(op.layout, p["strides"], strict=True))
        self.report += report
        return int(used)

    def _direct(self, op: _Operand, k: Any) -> Any:
        """A direct global load of `op` at `k`; out-of-range threads read nothing."""
        b = self.b
        ty = _elem(op.ptr)
        pick = b.if_else(self.in_range, results=[ty])
        with pick as (yes, no):
            with yes:
                yes.yield_(self._opaque_load(op, k))
            with no:
                no.yield_(_zero(b, ty))
        return pick.results[0]

    def _untiled(self, ops: list[_Operand], kv: Any, acc0: Any, combine: Callable[..., Any]) -> Any:
        b = self.b
        acc = _acc_var(b, acc0)
        with b.if_(self.in_range), b.for_range(b.const(0, "u32"), kv) as k:
            xs = [self._opaque_load(op, k) for op in ops]
            b.def_var(acc, combine(b.use_var(acc), *xs))
        return b.use_var(acc)

    def _opaque_load(self, op: _Operand, k: Any) -> Any:
        """Load of an operand in the untiled reduction (already in range)."""
        at: dict[Any, Any] = dict(enumerate(self.values))
        at["k"] = k
        return self.b.load(self.b.ptr_add(op.ptr, self._eval_any(op.index, at)))

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

    def _tiled(
        self, ops: list[_Operand], kv: Any, acc0: Any, combine: Callable[..., Any], tile_k: int
    ) -> Any:
        b = self.b
        for op in ops:
            if op.why is not None:
                continue
            op.tile = b.shared_alloc(_elem(op.ptr), op.size)
            op.row_base = self._sum(
                [0] + [self._scaled(self.tid[d], op.strides[d]) for d in op.dims]
            )
        steps = (kv + (tile_k - 1)) / tile_k
        acc = _acc_var(b, acc0)
        with b.for_range(b.const(0, "u32"), steps) as kt:
            k0 = kt * tile_k
            for op in ops:
                if op.why is None:
                    self._stage(op, k0, kv, tile_k)
            b.barrier()
            left = kv - k0
            with b.if_else(left >= tile_k) as (yes, no):
                with yes:
                    self._inner(ops, k0, b.const(tile_k, "u32"), acc, combine)
                with no:
                    self._inner(ops, k0, left, acc, combine)
            b.barrier()
        return b.use_var(acc)

    @staticmethod
    def _scaled(v: Any, stride: int) -> Any:
        return v * stride if stride != 1 else v

    def _inner(
        self, ops: list[_Operand], k0: Any, count: Any, acc: Any, combine: Callable[..., Any]
    ) -> None:
        """Folds `count` staged K steps into the accumulator variable `acc`."""
        b = self.b
        with b.for_range(b.const(0, "u32"), count) as k:
            xs = []
            for op in ops:
                if op.why is None:
                    kk = self._scaled(k, op.strides["k"])
                    xs.append(b.load(b.ptr_add(op.tile, op.row_base + kk)))
                else:
                    xs.append(self._direct(op, k0 + k))
            b.def_var(acc, combine(b.use_var(acc), *xs))

    def _stage(self, op: _Operand, k0: Any, kv: Any, tile_k: int) -> None:
        """Every thread copies its share of the operand's tile for the step at `k0`."""
        b = self.b
        assert isinstance(op.index, Affine)
        coords, extent = op.stage_order, op.extent
        elements = math.prod(extent.values())
        for r in range(-(-elements // self.threads)):
            e = self.flat_tid + r * self.threads if r else self.flat_tid
            local: dict[Any, Any] = {}
            rest = e
            for n_done, s in enumerate(coords):
                last = n_done == len(coords) - 1
                local[s] = rest if last else rest % extent[s]
                if not last:
                    rest = rest / extent[s]
            at: dict[Any, Any] = {d: self.base[d] + local[d] for d in op.dims}
            at["k"] = k0 + local["k"]
            ok = at["k"] < kv
            for d in op.dims:
                ok = b.and_(ok, at[d] < self.sizes[d])
            if elements % self.threads:
                ok = b.and_(ok, e < elements)
            ty = _elem(op.ptr)
            pick = b.if_else(ok, results=[ty])
            with pick as (yes, no):
                with yes:
                    yes.yield_(b.load(b.ptr_add(op.ptr, self._eval(op.index, at))))
                with no:
                    no.yield_(_zero(b, ty))
            slot = self._sum([0] + [self._scaled(local[s], op.strides[s]) for s in op.layout])
            store_ok = e < elements if elements % self.threads else None
            if store_ok is None:
                b.store(b.ptr_add(op.tile, slot), pick.results[0])
            else:
                with b.if_(store_ok):
                    b.store(b.ptr_add(op.tile, slot), pick.results[0])


def _check_tile_k(tile_k: Any) -> None:
    if tile_k is not None and (
        isinstance(tile_k, bool) or not isinstance(tile_k, numbers.Integral)
    ):
        raise BuildError(f"tile_k must be an int, not {type(tile_k).__name__}")


def _zero(b: Any, ty: Any) -> Any:
    return b.const(0.0 if ty.is_float else 0, ty)


def _acc_var(b: Any, init: Any) -> Any:
    """A reduction's accumulator as a builder variable holding `init`: the
    loops and branches that assign it get their block parameters from the
    builder's SSA construction."""
    acc = b.declare_var(init.type, "acc")
    b.def_var(acc, init)
    return acc


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
