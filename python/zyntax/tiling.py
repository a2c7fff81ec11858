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

#: Static shared memory a block may declare on every target (sm_70 and newer):
#: all tiles of a nest must fit (more needs dynamic shared memory and an opt-in).
MAX_SHARED_BYTES = 48 * 1024
#: Elements of one operand's tile that each thread copies per ``tile_k`` step.
#: The copy is unrolled, so this bounds its code size and registers (a
#: ``tile_k`` of 2**20 unrolled 65536 copies and built for minutes).
MAX_STAGED_PER_THREAD = 32
#: The automatic ``tile_k`` (halved until the tiles fit).
DEFAULT_TILE_K = 16

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
        names = tuple((d, f"i{d}") for d in range(n))
        self.indices = tuple(Affine(((d, (1,)),), (), names) for d in range(n))
        self.threads = math.prod(self.workgroup)
        self.flat_tid = self._flat_tid()
        #: Bytes of shared memory the tiles of this nest's reductions take so far.
        self.shared_bytes = 0

    def _flat_tid(self) -> Any:
        flat = self.tid[0]
        for d in range(1, len(self.tid)):
            flat = flat * self.workgroup[d] + self.tid[d]
        return flat

    def _invariant(self, v: Any) -> bool:
        return not _is_value(v) or (self._first_id is not None and v.id < self._first_id)

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
        kv = extent if _is_value(extent) else b.const(int(extent), "u32")
        bound_ok = self._invariant(extent)
        for op in ops:
            op.why = self._why_not(op, bound_ok)
        tile_k = self._fit([op for op in ops if op.why is None], tile_k, extent)
        self.report.append(f"reduction over k < {_fmt((extent,))}")
        for op in ops:
            what = f"operand {op.pos} ({_name(op.ptr)}[{op.index}])"
            if op.why is None:
                self.report.append(
                    f"  {what}: tiled through shared memory, {self._tile_desc(op, tile_k)}"
                )
            else:
                self.report.append(f"  {what}: not tiled: {op.why}")
        if all(op.why is not None for op in ops):
            return self._untiled(ops, kv, acc0, combine)
        return self._tiled(ops, kv, acc0, combine, tile_k)

    def _why_not(self, op: _Operand, bound_ok: bool) -> str | None:
        if not bound_ok:
            return "the reduction bound is not loop-invariant (defined inside the nest)"
        if isinstance(op.index, NotAffine):
            return f"index is not affine in the loop indices: {op.index.why}"
        if not _is_value(op.ptr) or not op.ptr.type.is_ptr:
            return "not a pointer value"
        if any(w.id == op.ptr.id for w in self.writes):
            return "the nest writes this buffer (aliasing)"
        if not self._invariant(op.ptr):
            return "the pointer is computed inside the nest (aliasing cannot be ruled out)"
        for s, cs in op.index.terms:
            for c in cs:
                for leaf in _leaves(c):
                    if not self._invariant(leaf):
                        return f"coefficient of {s} is not loop-invariant"
        for c in op.index.const:
            for leaf in _leaves(c):
                if not self._invariant(leaf):
                    return "index offset depends on values computed inside the nest"
        syms = {s for s, cs in op.index.terms if cs}
        if "k" not in syms:
            return "does not depend on the reduction index (nothing to stage)"
        op.dims = sorted(s for s in syms if s != "k")
        others = [d for d in range(len(self.workgroup)) if d not in op.dims]
        if not any(self.workgroup[d] > 1 for d in others):
            return "depends on every nest index (no reuse across the workgroup)"
        return None

    def _layout(self, op: _Operand, tile_k: int) -> None:
        """Choose the tile layout. Reads in the inner loop: an operand that
        depends on the nest's x index (consecutive threads) keeps that index
        fastest, so a warp reads consecutive words; one that does not is read
        by broadcast and keeps ``k`` fastest (contiguous per thread). Staging:
        consecutive threads take the coordinate with unit stride in global
        memory (coalesced). When the two differ (a transposed operand) the
        staging writes would hit one bank, so the rows get one element of
        padding."""
        assert isinstance(op.index, Affine)
        x = len(self.workgroup) - 1
        rest = [d for d in reversed(op.dims) if d != x]
        op.layout = [x, "k", *rest] if x in op.dims else ["k", *rest]
        op.extent = {s: (tile_k if s == "k" else self.workgroup[s]) for s in op.layout}
        idx = op.index
        unit = [s for s in op.layout if len(idx.coef(s)) == 1 and _is_one(idx.coef(s)[0])]
        op.stage_order = list(op.layout)
        if unit:
            op.stage_order.remove(unit[0])
            op.stage_order.insert(0, unit[0])
        op.pad = 0 if op.stage_order[0] == op.layout[0] else 1
        stride = 1
        for n, s in enumerate(op.layout):
            op.strides[s] = stride
            stride *= op.extent[s] + (op.pad if n == 0 else 0)
        op.size = stride

    def _fit(self, tiled: list[_Operand], tile_k: int | None, extent: Any) -> int:
        """Lays out the tiles of `tiled` for `tile_k` (or the largest automatic
        one that fits) and claims their shared memory; returns the tile_k used."""
        if tile_k is not None:
            tile_k = _tile_k(tile_k, extent)
            why = self._over_budget(tiled, tile_k)
            if why is not None:
                raise BuildError(f"tile_k={tile_k}: {why}; use a smaller tile_k or workgroup")
            return tile_k
        tile_k = _tile_k(DEFAULT_TILE_K, extent)
        while (why := self._over_budget(tiled, tile_k)) is not None and tile_k > 1:
            tile_k //= 2
        if why is not None:
            for op in tiled:
                op.why = f"its tile does not fit: {why}"
        return tile_k

    def _over_budget(self, tiled: list[_Operand], tile_k: int) -> str | None:
        """Lays out `tiled` for `tile_k`; why the hardware cannot hold those
        tiles (None: it can, and their shared memory is claimed)."""
        need = 0
        for op in tiled:
            self._layout(op, tile_k)
            copies = -(-math.prod(op.extent.values()) // self.threads)
            if copies > MAX_STAGED_PER_THREAD:
                return (
                    f"each of the {self.threads} threads would copy {copies} elements of "
                    f"operand {op.pos}'s tile per step (at most {MAX_STAGED_PER_THREAD})"
                )
            need += op.size * _elem(op.ptr).size_bytes
        if self.shared_bytes + need > MAX_SHARED_BYTES:
            earlier = f" besides {self.shared_bytes} for earlier reductions" * bool(
                self.shared_bytes
            )
            return (
                f"the tiles need {need} bytes of shared memory{earlier}; a block has at "
                f"most {MAX_SHARED_BYTES}"
            )
        self.shared_bytes += need
        return None

    def _tile_desc(self, op: _Operand, tile_k: int) -> str:
        names = [dict(self.indices[d].names).get(d, f"i{d}") for d in range(len(self.workgroup))]
        reused = [names[d] for d in range(len(self.workgroup)) if d not in op.dims]
        shape = "x".join(str(self.workgroup[d]) for d in op.dims) or "1"
        pad = ", rows padded by 1 against bank conflicts" if op.pad else ""
        return f"{shape}x{tile_k}{pad}, reused across {', '.join(reused)}"

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


def _tile_k(tile_k: Any, extent: Any) -> int:
    """`tile_k` checked: a positive int, at most the extent when that is a
    constant (a longer tile would only stage padding)."""
    if isinstance(tile_k, bool) or not isinstance(tile_k, numbers.Integral):
        raise BuildError(f"tile_k must be an int, not {type(tile_k).__name__}")
    tk = int(tile_k)
    if tk < 1:
        raise BuildError(f"tile_k must be at least 1, not {tk}")
    if isinstance(extent, numbers.Integral) and 0 < int(extent) < tk:
        return int(extent)
    return tk


def _zero(b: Any, ty: Any) -> Any:
    return b.const(0.0 if ty.is_float else 0, ty)


def _acc_var(b: Any, init: Any) -> Any:
    """A reduction's accumulator as a builder variable holding `init`: the
    loops and branches that assign it get their block parameters from the
    builder's SSA construction."""
    acc = b.declare_var(init.type, "acc")
    b.def_var(acc, init)
    return acc


def _leaves(c: Coef) -> list[Any]:
    if isinstance(c, tuple):
        return _leaves(c[1]) + _leaves(c[2])
    return [c]


def _elem(ptr: Any) -> Any:
    t = ptr.type
    if t.elem is None:
        raise BuildError(f"{ptr!r} is not a pointer")
    return t.elem


def _name(ptr: Any) -> str:
    return ptr.name if _is_value(ptr) else repr(ptr)


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
