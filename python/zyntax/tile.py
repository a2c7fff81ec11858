"""Tile programs from Python: the tile layer (``zyntax-tile``, docs/tile.md).

A tile program is a kernel written over *tiles* (values with a static shape
and an element type held by a whole CTA) instead of threads. Write one with a
:class:`Builder`; every method maps 1:1 onto the Rust ``TileBuilder``::

    from zyntax import tile

    def gemm(s: tile.Schedule) -> tile.Kernel:
        (bm, bn), bk = s.block, s.k
        t = tile.Builder("gemm", s)
        a, b, c = (t.view(n, "f32", 2) for n in "abc")
        m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

        def step(t: tile.Builder, k0: tile.Scalar, acc: list[tile.Value]) -> list[tile.Value]:
            x, y = t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn))
            return [t.dot(x, y, acc[0])]

        (acc,) = t.for_range(0, a.dim(1), bk, [t.full((bm, bn), "f32", 0.0)], step)
        t.store(c, (m0, n0), acc)
        return t.finish()

    k = gemm(tile.Schedule((64, 64), k=16, warps=4))
    k.run_interp(a, b, c, grid=k.grid(m, n))      # numpy arrays, on the interpreter
    k.launch(da, db, dc, grid=k.grid(m, n))       # device arrays, on the GPU

Tiles support ``+ - * /`` (with tiles of the same shape or numbers), unary
``-``, and methods (``exp``, ``sum``, ``max``, ``cast``, ``broadcast``...);
``u32`` scalars support ``+ - *`` with scalars or ints. Broadcasting is
explicit (``x - x.max(1).broadcast(x.shape)``). The first misuse of the
builder is raised by :meth:`Builder.finish` as a ``BuildError`` naming the op
and operand; wrong Python types are ``ArgumentError`` at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zyntax import _native
from zyntax.errors import ArgumentError
from zyntax.hir import Module

#: The schedule of a program: ``Schedule(block, k=16, warps=4, stages=1,
#: cluster=1, arch="sm_80", warp_specialize=False, persistent=False)``;
#: read-only fields, ``grid(extents)``, ``validate()``,
#: ``validate_gemm(operand_bytes)``. ``warp_specialize`` puts an sm_90a GEMM
#: loop on a TMA producer warpgroup beside the ``warps`` consumer warps,
#: ``persistent`` also walks the program's grid from one CTA per SM
#: (docs/tile.md, "Lowering to HIR").
Schedule = _native.TileSchedule
#: ``heuristic(m, n, k, operand_bytes=4, arch="sm_80", warp_specialize=False, sms=132)``:
#: an FFMA GEMM schedule, or with ``warp_specialize`` on sm_90a the warp-specialised
#: persistent one where it fits the shape (``zyntax_tile::ws_heuristic``).
heuristic = _native.tile_heuristic

__all__ = [
    "Builder",
    "Kernel",
    "Param",
    "Scalar",
    "Schedule",
    "Tile",
    "Value",
    "View",
    "heuristic",
]

#: numpy dtype of each view element type.
_NUMPY = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}
_U32_MAX = 2**32 - 1


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_number(x: object) -> bool:
    return _is_int(x) or isinstance(x, (float, np.floating))


@dataclass(frozen=True, eq=False)
class View:
    """A global tensor view parameter (pointer, extents, strides)."""

    builder: Builder
    id: int
    name: str
    dtype: str
    rank: int

    def dim(self, d: int) -> Scalar:
        """The runtime extent along `d` (a ``u32`` scalar)."""
        return self.builder.dim(self, d)


@dataclass(frozen=True, eq=False)
class Scalar:
    """A uniform scalar of a program (program ids, parameters, loop indices)."""

    builder: Builder
    id: int

    @property
    def dtype(self) -> str:
        return str(self.builder._b.scalar_type(self.id))

    def _op(self, op: str, other: Scalar | int, swap: bool = False) -> Scalar:
        o = self.builder._scalar(other, "other", self.dtype)
        a, b = (o, self) if swap else (self, o)
        return self.builder.scalar_binary(op, a, b)

    def __add__(self, other: Scalar | int) -> Scalar:
        return self._op("add", other)

    def __radd__(self, other: Scalar | int) -> Scalar:
        return self._op("add", other, swap=True)

    def __sub__(self, other: Scalar | int) -> Scalar:
        return self._op("sub", other)

    def __rsub__(self, other: Scalar | int) -> Scalar:
        return self._op("sub", other, swap=True)

    def __mul__(self, other: Scalar | int) -> Scalar:
        return self._op("mul", other)

    def __rmul__(self, other: Scalar | int) -> Scalar:
        return self._op("mul", other, swap=True)


@dataclass(frozen=True, eq=False)
class Tile:
    """A tile value: a static shape and an element type."""

    builder: Builder
    id: int
    shape: tuple[int, ...] = field(repr=True)
    dtype: str = field(repr=True)

    def _op(self, op: str, other: Tile | float, swap: bool = False) -> Tile:
        o = self.builder._tile_like(other, self)
        a, b = (o, self) if swap else (self, o)
        return self.builder.binary(op, a, b)

    def __add__(self, other: Tile | float) -> Tile:
        return self._op("add", other)

    def __radd__(self, other: Tile | float) -> Tile:
        return self._op("add", other, swap=True)

    def __sub__(self, other: Tile | float) -> Tile:
        return self._op("sub", other)

    def __rsub__(self, other: Tile | float) -> Tile:
        return self._op("sub", other, swap=True)

    def __mul__(self, other: Tile | float) -> Tile:
        return self._op("mul", other)

    def __rmul__(self, other: Tile | float) -> Tile:
        return self._op("mul", other, swap=True)

    def __truediv__(self, other: Tile | float) -> Tile:
        return self._op("div", other)

    def __rtruediv__(self, other: Tile | float) -> Tile:
        return self._op("div", other, swap=True)

    def __neg__(self) -> Tile:
        return self.builder.unary("neg", self)

    def exp(self) -> Tile:
        return self.builder.unary("exp", self)

    def sum(self, axis: int) -> Tile:
        return self.builder.reduce(self, axis, "sum")

    def max(self, axis: int) -> Tile:
        return self.builder.reduce(self, axis, "max")

    def min(self, axis: int) -> Tile:
        return self.builder.reduce(self, axis, "min")

    def cast(self, dtype: Any) -> Tile:
        return self.builder.cast(self, dtype)

    def broadcast(self, shape: Sequence[int]) -> Tile:
        return self.builder.broadcast(self, shape)


#: A value a loop carries.
Value = Tile | Scalar


@dataclass(frozen=True)
class Param:
    """A parameter of a lowered kernel: a view (``rank`` dims of ``dtype``,
    expanded to pointer, extents and strides) or a scalar (``rank`` 0)."""

    kind: str
    name: str
    dtype: str
    rank: int


class Builder:
    """Builds one tile program for one :data:`Schedule` (``zyntax_tile::TileBuilder``)."""

    def __init__(self, name: str, schedule: Any) -> None:
        self._b = _native.TileBuilder(name, schedule)
        self.schedule = schedule

    # -- handles
    def _own(self, h: object, cls: type, name: str) -> Any:
        if not isinstance(h, cls) or h.builder is not self:  # type: ignore[attr-defined]
            got = (
                type(h).__name__
                if not isinstance(h, cls)
                else f"a {cls.__name__} of another builder"
            )
            raise ArgumentError(
                f"argument '{name}': expected a tile.{cls.__name__} of this builder, got {got}"
            )
        return h.id  # type: ignore[attr-defined]

    def _tile(self, id: int) -> Tile:
        shape, dtype = self._b.tile_type(id)
        return Tile(self, id, tuple(shape), dtype)

    def _scalar(self, x: object, name: str, ty: str = "u32") -> Scalar:
        """A Scalar of this builder, or a constant of type `ty` from an int."""
        if _is_int(x):
            return self.constant(ty, int(x))  # type: ignore[call-overload]
        self._own(x, Scalar, name)
        assert isinstance(x, Scalar)
        return x

    def _tile_like(self, x: object, like: Tile) -> Tile:
        """A Tile of this builder, or a number splatted to `like`'s shape and type."""
        if _is_number(x):
            return self.full(like.shape, like.dtype, float(x))  # type: ignore[arg-type]
        self._own(x, Tile, "other")
        assert isinstance(x, Tile)
        return x

    def _origin(self, origin: Sequence[Scalar | int]) -> list[int]:
        if not isinstance(origin, (list, tuple)):
            raise ArgumentError(
                "argument 'origin': expected a list or tuple of scalars or ints, "
                f"got {type(origin).__name__}"
            )
        return [self._scalar(o, "origin").id for o in origin]

    # -- parameters and scalars
    def view(
        self,
        name: str,
        dtype: Any,
        rank: int,
        *,
        unit_stride_dim: int | None = None,
        align_bytes: int | None = None,
    ) -> View:
        """A global tensor view of `rank` dims of `dtype` (a kernel parameter).
        `unit_stride_dim` promises that dim has stride 1; `align_bytes` (a
        power of two up to 16, with `unit_stride_dim`) adds that the base
        pointer is that aligned, so accesses along the dim may be vectors."""
        id = self._b.view(
            name, dtype, rank, unit_stride_dim=unit_stride_dim, align_bytes=align_bytes
        )
        _, elem, _ = self._b.view_type(id)
        return View(self, id, name, elem, rank)

    def scalar_param(self, name: str, dtype: Any) -> Scalar:
        return Scalar(self, self._b.scalar_param(name, dtype))

    def program_id(self, axis: int) -> Scalar:
        """This program instance's grid index along `axis` (0, 1 or 2)."""
        return Scalar(self, self._b.program_id(axis))

    def constant(self, dtype: Any, value: float) -> Scalar:
        return Scalar(self, self._b.constant(dtype, value))

    def dim(self, view: View, d: int) -> Scalar:
        return Scalar(self, self._b.dim(self._own(view, View, "view"), d))

    def scalar_binary(self, op: str, a: Scalar | int, b: Scalar | int) -> Scalar:
        sa = self._scalar(a, "a")
        sb = self._scalar(b, "b", sa.dtype)
        return Scalar(self, self._b.scalar_binary(op, sa.id, sb.id))

    def scalar_cmp(self, op: str, a: Scalar | int, b: Scalar | int) -> Scalar:
        sa = self._scalar(a, "a")
        sb = self._scalar(b, "b", sa.dtype)
        return Scalar(self, self._b.scalar_cmp(op, sa.id, sb.id))

    # -- tiles and memory
    def splat(self, shape: Sequence[int], value: Scalar) -> Tile:
        return self._tile(self._b.splat(shape, self._own(value, Scalar, "value")))

    def full(self, shape: Sequence[int], dtype: Any, value: float) -> Tile:
        return self._tile(self._b.full(shape, dtype, value))

    def zeros(self, shape: Sequence[int], dtype: Any = "f32") -> Tile:
        return self.full(shape, dtype, 0.0)

    def iota(self, shape: Sequence[int], axis: int) -> Tile:
        """A ``u32`` tile whose elements are their coordinate along `axis`."""
        return self._tile(self._b.iota(shape, axis))

    def load(
        self, view: View, origin: Sequence[Scalar | int], shape: Sequence[int], other: float = 0.0
    ) -> Tile:
        """The `shape` box of `view` at `origin`; elements outside read as `other`."""
        v = self._own(view, View, "view")
        return self._tile(self._b.load(v, self._origin(origin), shape, other))

    def store(self, view: View, origin: Sequence[Scalar | int], tile: Tile) -> None:
        """Writes `tile` at `origin`; elements outside the view are dropped."""
        v = self._own(view, View, "view")
        self._b.store(v, self._origin(origin), self._own(tile, Tile, "tile"))

    def atomic_add(self, view: View, origin: Sequence[Scalar | int], tile: Tile) -> None:
        v = self._own(view, View, "view")
        self._b.atomic_add(v, self._origin(origin), self._own(tile, Tile, "tile"))

    # -- tile ops
    def unary(self, op: str, a: Tile) -> Tile:
        """`op` of each element: a HIR unary op's name (``"exp"``, ``"rsqrt"``,
        ...) or a fast f32 approximation (``"tanh_approx"``, ``"ex2_approx"``,
        ``"rcp_approx"``, ``"ex2_ftz_approx"``: one MUFU op on the GPU)."""
        return self._tile(self._b.unary(op, self._own(a, Tile, "a")))

    def binary(self, op: str, a: Tile, b: Tile) -> Tile:
        return self._tile(self._b.binary(op, self._own(a, Tile, "a"), self._own(b, Tile, "b")))

    def add(self, a: Tile, b: Tile) -> Tile:
        return self.binary("add", a, b)

    def sub(self, a: Tile, b: Tile) -> Tile:
        return self.binary("sub", a, b)

    def mul(self, a: Tile, b: Tile) -> Tile:
        return self.binary("mul", a, b)

    def div(self, a: Tile, b: Tile) -> Tile:
        return self.binary("div", a, b)

    def maximum(self, a: Tile, b: Tile) -> Tile:
        return self.binary("max", a, b)

    def minimum(self, a: Tile, b: Tile) -> Tile:
        return self.binary("min", a, b)

    def exp(self, a: Tile) -> Tile:
        return self.unary("exp", a)

    def cmp(self, op: str, a: Tile, b: Tile) -> Tile:
        """Element-wise comparison (``eq ne lt le gt ge``), a bool tile."""
        return self._tile(self._b.cmp(op, self._own(a, Tile, "a"), self._own(b, Tile, "b")))

    def fma(self, a: Tile, b: Tile, c: Tile) -> Tile:
        ids = [self._own(x, Tile, n) for x, n in ((a, "a"), (b, "b"), (c, "c"))]
        return self._tile(self._b.fma(*ids))

    def where(self, cond: Tile, a: Tile, b: Tile) -> Tile:
        """``cond ? a : b`` element-wise."""
        ids = [self._own(x, Tile, n) for x, n in ((cond, "cond"), (a, "a"), (b, "b"))]
        return self._tile(self._b.where_(*ids))

    def broadcast(self, tile: Tile, shape: Sequence[int]) -> Tile:
        return self._tile(self._b.broadcast(self._own(tile, Tile, "tile"), shape))

    def cast(self, tile: Tile, dtype: Any) -> Tile:
        return self._tile(self._b.cast(self._own(tile, Tile, "tile"), dtype))

    def reduce(self, tile: Tile, axis: int, op: str) -> Tile:
        """``sum``, ``max`` or ``min`` along `axis` (kept with size 1)."""
        return self._tile(self._b.reduce(self._own(tile, Tile, "tile"), axis, op))

    def sum(self, tile: Tile, axis: int) -> Tile:
        return self.reduce(tile, axis, "sum")

    def max(self, tile: Tile, axis: int) -> Tile:
        return self.reduce(tile, axis, "max")

    def dot(self, a: Tile, b: Tile, acc: Tile, inputs: str | None = None) -> Tile:
        """``acc + a @ b`` (f32 accumulator). `inputs` says how `a` and `b` are
        read: by their dtype (None or ``"native"``: f32 exact, f16, bf16),
        ``"tf32"`` (f32 operands, the low 13 mantissa bits dropped as the
        tensor cores read them) or ``"e4m3"`` / ``"e5m2"`` (u8 operands
        holding fp8 bytes: the tile layer has no fp8 dtype, as the HIR has
        none)."""
        ia, ib, ic = (self._own(x, Tile, n) for x, n in ((a, "a"), (b, "b"), (acc, "acc")))
        return self._tile(self._b.dot(ia, ib, ic, inputs))

    def for_range(
        self,
        lo: Scalar | int,
        hi: Scalar | int,
        step: Scalar | int,
        inits: Sequence[Value],
        body: Callable[[Builder, Scalar, list[Value]], Sequence[Value]],
    ) -> list[Value]:
        """``for iv in range(lo, hi, step)`` over ``u32`` scalars carrying `inits`:
        ``body(builder, iv, carried)`` returns the next carried values; returns
        the values after the last iteration."""
        bounds = [self._scalar(x, n).id for x, n in ((lo, "lo"), (hi, "hi"), (step, "step"))]
        if not isinstance(inits, (list, tuple)):
            raise ArgumentError(
                f"argument 'inits': expected a list of tiles or scalars, got {type(inits).__name__}"
            )
        pairs = [self._pair(v, "inits") for v in inits]
        if not callable(body):
            raise ArgumentError(f"argument 'body': expected a callable, got {type(body).__name__}")

        def native_body(iv: int, carried: list[tuple[str, int]]) -> list[tuple[str, int]]:
            yields = body(self, Scalar(self, iv), [self._value(p) for p in carried])
            if not isinstance(yields, (list, tuple)):
                raise ArgumentError(
                    "for_range body: expected it to return a list of tiles or scalars, "
                    f"got {type(yields).__name__}"
                )
            return [self._pair(v, "yields") for v in yields]

        lo_id, hi_id, step_id = bounds
        results = self._b.for_range(lo_id, hi_id, step_id, pairs, native_body)
        return [self._value(p) for p in results]

    def _pair(self, v: object, name: str) -> tuple[str, int]:
        if isinstance(v, Tile):
            return ("tile", self._own(v, Tile, name))
        if isinstance(v, Scalar):
            return ("scalar", self._own(v, Scalar, name))
        raise ArgumentError(
            f"argument '{name}': expected tile.Tile or tile.Scalar values, got {type(v).__name__}"
        )

    def _value(self, pair: tuple[str, int]) -> Value:
        kind, id = pair
        return self._tile(id) if kind == "tile" else Scalar(self, id)

    def finish(self) -> Kernel:
        """Lowers the program to a verified HIR kernel (raises the first
        misuse as a ``BuildError``, a bad schedule as an ``ArgumentError``)."""
        info = self._b.finish()
        return Kernel(
            module=info["module"],
            name=info["name"],
            schedule=self.schedule,
            block=tuple(info["block"]),
            shared_bytes=int(info["shared_bytes"]),
            params=tuple(Param(*p) for p in info["params"]),
            tensor_maps=tuple(
                TensorMapParam(v, int(i), int(inner), int(outer), (int(bx[0]), int(bx[1])))
                for v, i, inner, outer, bx in info.get("tensor_maps", ())
            ),
            persistent=bool(info.get("persistent", False)),
            cluster=int(info.get("cluster", 1)),
            dynamic_shared_bytes=int(info.get("dynamic_shared_bytes", 0)),
        )


@dataclass(frozen=True)
class TensorMapParam:
    """A tensor map the launch builds from view parameter `param` (index into
    ``Kernel.params``): 2-d over the view's unit-stride dim `inner_dim` and
    `outer_dim`, `box` elements (inner, outer), 128-byte swizzle, zero fill
    (the warp-specialised GEMM pipeline, docs/tile.md)."""

    view: str
    param: int
    inner_dim: int
    outer_dim: int
    box: tuple[int, int]


#: Builds a tensor map from (map, view argument, extents, strides).
_MapBuilder = Callable[[TensorMapParam, Any, Sequence[int], Sequence[int]], Any]


@dataclass
class Kernel:
    """A lowered tile program: its HIR module (one kernel named `name`), launch
    facts, and the parameters as the program declared them (each view expands
    to pointer, extents and strides in elements). A warp-specialised kernel
    also takes `tensor_maps` (built here from the views) and, `persistent`,
    the program's grid as two ``u32`` after them; the launch then runs about
    one CTA per SM. `cluster` > 1: the kernel declares clusters of that
    many CTAs along x (the schedule's ``cluster``), and a persistent launch
    runs whole clusters."""

    module: Module
    name: str
    schedule: Any
    block: tuple[int, ...]
    shared_bytes: int
    params: tuple[Param, ...]
    tensor_maps: tuple[TensorMapParam, ...] = ()
    persistent: bool = False
    cluster: int = 1
    dynamic_shared_bytes: int = 0
    _loaded: dict[int, Any] = field(default_factory=dict, repr=False)
    _maps: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    def grid(self, *extents: int) -> tuple[int, int, int]:
        """The grid for a problem of `extents` (one per block dim, ceil-divided)."""
        grid: tuple[int, int, int] = self.schedule.grid(list(extents))
        return grid

    def _check_count(self, args: Sequence[Any]) -> None:
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise ArgumentError(
                f"tile kernel {self.name!r} takes {len(self.params)} arguments ({names}), "
                f"got {len(args)}"
            )

    def _scalar(self, p: Param, x: object) -> int | float:
        if p.dtype.startswith(("f", "bf")):
            if not _is_number(x):
                raise ArgumentError(
                    f"argument {p.name!r}: expected a number for {p.dtype}, got {type(x).__name__}"
                )
            return float(x)  # type: ignore[arg-type]
        if not _is_int(x):
            raise ArgumentError(
                f"argument {p.name!r}: expected an int for {p.dtype}, got {type(x).__name__}"
            )
        return int(x)  # type: ignore[call-overload, no-any-return]

    def expand(
        self,
        args: Sequence[Any],
        array: Callable[[Param, Any], tuple[Any, Sequence[int], Sequence[int]]],
        tensor_map: _MapBuilder | None = None,
    ) -> list[Any]:
        """The lowered kernel's arguments: each view through `array(param, value)`
        → (pointer argument, extents, strides in elements), scalars checked;
        then each of `tensor_maps` through `tensor_map(map, value, extents,
        strides)`."""
        self._check_count(args)
        out: list[Any] = []
        views: dict[int, tuple[Any, Sequence[int], Sequence[int]]] = {}
        for i, (p, x) in enumerate(zip(self.params, args, strict=True)):
            if p.kind == "scalar":
                out.append(self._scalar(p, x))
                continue
            ptr, extents, strides = array(p, x)
            for what, vals in (("extent", extents), ("stride", strides)):
                for v in vals:
                    if not 0 <= v <= _U32_MAX:
                        raise ArgumentError(f"argument {p.name!r}: {what} {v} does not fit u32")
            out += [ptr, *extents, *strides]
            views[i] = (x, extents, strides)
        if self.tensor_maps:
            if tensor_map is None:
                raise ArgumentError(
                    f"tile kernel {self.name!r} loads through TMA tensor maps, which this "
                    "launch path does not build (use launch or run_interp)"
                )
            for m in self.tensor_maps:
                x, extents, strides = views[m.param]
                if strides[m.inner_dim] != 1 and extents[m.inner_dim] > 1:
                    raise ArgumentError(
                        f"argument {m.view!r}: the warp-specialised schedule loads it with TMA "
                        f"along dim {m.inner_dim}, whose stride is {strides[m.inner_dim]}, not 1"
                    )
                out.append(tensor_map(m, x, extents, strides))
        return out

    def launch_grid(self, grid: int | Sequence[int], sms: int) -> tuple[list[int], list[int]]:
        """(the grid to launch, extra arguments) for the program's `grid`: a
        persistent kernel runs min(instances, `sms`) CTAs along x and takes
        the program's grid (x, y) as arguments. With clusters of `c` CTAs it
        runs whole clusters, min(units of `c` instances, `sms` // `c`) of
        them (`sms`: the CTAs that can be resident at once)."""
        seq = [grid] if _is_int(grid) else grid
        g = [int(v) for v in seq]  # type: ignore[union-attr, arg-type]
        g += [1] * (3 - len(g))
        if not self.persistent:
            return g, []
        if g[2] != 1:
            raise ArgumentError(
                f"argument 'grid': a persistent tile kernel walks a 2-d grid, got {tuple(g)}"
            )
        c = self.cluster
        if c > 1:
            along_n = bool(getattr(self.schedule, "cluster_n", False))
            units = g[0] * -(-g[1] // c) if along_n else -(-g[0] // c) * g[1]
            return [c * max(1, min(units, sms // c)), 1, 1], g[:2]
        return [max(1, min(g[0] * g[1], sms)), 1, 1], g[:2]

    # -- the reference interpreter
    def run_interp(
        self, *args: Any, grid: int | Sequence[int], checks: bool = True
    ) -> dict[str, int]:
        """Runs the kernel on the reference interpreter. Views take numpy
        arrays of their dtype and rank, any non-negative strides (slices,
        transposes); they are updated in place. Returns the run's statistics."""
        from zyntax import interp

        windows: list[np.ndarray[Any, Any]] = []

        def array(p: Param, a: Any) -> tuple[Any, Sequence[int], Sequence[int]]:
            w, extents, strides = _numpy_view(p, a)
            for other in windows:
                if np.shares_memory(w, other):
                    raise ArgumentError(
                        f"argument {p.name!r}: shares memory with another view; on the interpreter "
                        "each view is its own buffer, so views must not overlap"
                    )
            windows.append(w)
            return w, extents, strides

        copies: list[tuple[Any, Any, bool, bytes]] = []

        def tensor_map(m: TensorMapParam, a: Any, ext: Sequence[int], st: Sequence[int]) -> Any:
            # The interpreter's map reads a C-contiguous array of its own: a
            # copy of the view, inner dim last; a TMA store (the output's map)
            # writes the copy, which goes back to the view after the run.
            swap = m.inner_dim != a.ndim - 1
            rows = np.ascontiguousarray(np.swapaxes(a, -1, -2) if swap else a)
            copies.append((a, rows, swap, rows.tobytes()))
            return interp.TensorMap(rows, m.box, swizzle="128B", dtype=_view_dtype(self, m))

        flat = self.expand(args, array, tensor_map)
        # A few CTAs walk a persistent kernel's grid (as SMs do on the GPU).
        run_grid, extra = self.launch_grid(grid, 4)
        stats: dict[str, int] = (
            interp.launch(
                self.module, self.name, run_grid, self.block, *flat, *extra, checks=checks
            )
            or {}
        )
        for a, rows, swap, before in copies:
            if rows.tobytes() != before:
                a[...] = np.swapaxes(rows, -1, -2) if swap else rows
        return stats

    # -- this CPU, natively
    def run_cpu(self, *args: Any, grid: int | Sequence[int], mode: str | None = None) -> str:
        """Runs the kernel on this CPU as native code (``zyntax.cpu.launch``:
        blocks on all cores). Views take numpy arrays as for `run_interp`, but
        read and write the arrays' own memory (overlapping views behave as on
        the GPU). `mode="interp"` is `run_interp`. Returns ``"cpu"`` or
        ``"interp"`` (a kernel the CPU backend refuses, see docs/cpu.md)."""
        from zyntax import cpu

        if cpu.resolve_mode(mode) == "interp" or self.tensor_maps:
            # TMA tensor maps run on the interpreter only (docs/cpu.md).
            self.run_interp(*args, grid=grid)
            return "interp"

        def array(p: Param, a: Any) -> tuple[Any, Sequence[int], Sequence[int]]:
            return _numpy_view(p, a)

        flat = self.expand(args, array)
        return cpu.launch(self.module, self.name, grid, self.block, *flat, mode=mode)

    # -- the GPU
    def launch(
        self, *args: Any, grid: int | Sequence[int], device: int = 0, stream: Any = None
    ) -> None:
        """Launches the kernel on the GPU. Views take ``zyntax.cuda.DeviceArray``s
        or any object with ``__cuda_array_interface__`` of their dtype and
        rank (strides in the interface are honoured). The module is compiled
        for `device` once (through the kernel cache) and kept."""
        from zyntax import cuda

        if not _is_int(device) or device < 0:
            raise ArgumentError(f"argument 'device': expected an int >= 0, got {device!r}")
        device = int(device)
        if device not in self._loaded:
            self._loaded[device] = cuda.load_hir(self.module, device).kernel(self.name)

        def tensor_map(m: TensorMapParam, a: Any, ext: Sequence[int], st: Sequence[int]) -> Any:
            return self._device_map(m, a, ext, st, device)

        flat = self.expand(args, _device_view, tensor_map)
        sms = self.resident_ctas(device) if self.persistent else 1
        run_grid, extra = self.launch_grid(grid, sms)
        self._loaded[device].launch(run_grid, self.block, *flat, *extra, stream=stream)

    def resident_ctas(self, device: int = 0) -> int:
        """CTAs of a persistent launch resident at once on `device`: one per
        SM, or with clusters as many whole clusters as fit (an SM whose GPC
        has no free partner stays idle; a cluster beyond them would wait for
        a second wave)."""
        sms = _sm_count(device)
        if self.cluster == 1:
            return sms
        from zyntax import cuda

        if device not in self._loaded:
            self._loaded[device] = cuda.load_hir(self.module, device).kernel(self.name)
        fit = self._loaded[device].max_active_clusters(
            self.block, (self.cluster, 1, 1), self.dynamic_shared_bytes
        )
        return min(sms, int(fit) * self.cluster)

    def _device_map(
        self, m: TensorMapParam, a: Any, ext: Sequence[int], st: Sequence[int], device: int
    ) -> Any:
        """The CUDA tensor map `m` of device view `a` (extents, strides in
        elements), cached: encoding one costs more host time than a large
        launch, and a map is a pure function of the key."""
        from zyntax import cuda

        ptr = _device_ptr(a)
        key = (m, ptr, tuple(ext), tuple(st), device)
        tm = self._maps.get(key)
        if tm is None:
            if len(self._maps) >= 64:
                self._maps.clear()
            rows = _Rows2d(a, ptr, ext[m.outer_dim], ext[m.inner_dim], st[m.outer_dim])
            tm = cuda.TensorMap.tiled(rows, m.box, swizzle="128B", dtype=_view_dtype(self, m))
            self._maps[key] = tm
        return tm

    def tensor_map_args(self, *args: Any, device: int = 0) -> list[Any]:
        """The tensor maps a warp-specialised kernel takes after its views,
        for the device views `args` (all of the program's arguments), for
        callers that launch through a prepared launcher (benches)."""

        def tensor_map(m: TensorMapParam, a: Any, ext: Sequence[int], st: Sequence[int]) -> Any:
            return self._device_map(m, a, ext, st, device)

        flat = self.expand(args, _device_view, tensor_map)
        return flat[len(flat) - len(self.tensor_maps) :]


def _view_dtype(k: Kernel, m: TensorMapParam) -> str:
    return k.params[m.param].dtype


def _sm_count(device: int) -> int:
    from zyntax.kernels._tensors import sm_count

    return sm_count(device)


def _device_ptr(a: Any) -> int:
    """The device address of a torch tensor, DeviceArray or array-interface object."""
    data_ptr = getattr(a, "data_ptr", None)
    if callable(data_ptr):
        return int(data_ptr())
    ptr = getattr(a, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    return int(a.__cuda_array_interface__["data"][0])


class _Rows2d:
    """A (rows, cols) view with a row stride (elements) of 2-byte device
    memory at `ptr`, for ``cuda.TensorMap.tiled``; it keeps `owner` alive."""

    def __init__(self, owner: Any, ptr: int, rows: int, cols: int, stride: int) -> None:
        self.owner = owner
        self.__cuda_array_interface__ = {
            "shape": (rows, cols),
            "typestr": "<u2",
            "data": (ptr, False),
            "strides": (2 * stride, 2),
            "version": 3,
        }


def _numpy_view(p: Param, a: Any) -> tuple[np.ndarray[Any, Any], list[int], list[int]]:
    """A numpy array as (1-D window from its first element over the memory it
    spans, extents, strides in elements)."""
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"argument {p.name!r}: expected a numpy array, got {type(a).__name__}")
    want = _NUMPY.get(p.dtype)
    if want is None or a.dtype != np.dtype(want):
        raise ArgumentError(
            f"argument {p.name!r}: the view holds {p.dtype}, got an array of {a.dtype}"
        )
    if a.ndim != p.rank:
        raise ArgumentError(
            f"argument {p.name!r}: the view has rank {p.rank}, got an array of {a.ndim} dims"
        )
    size = a.itemsize
    if any(s < 0 or s % size for s in a.strides):
        raise ArgumentError(
            f"argument {p.name!r}: strides {a.strides} must be non-negative multiples "
            f"of the item size {size}"
        )
    strides = [s // size for s in a.strides]
    span = 0 if a.size == 0 else 1 + sum((n - 1) * s for n, s in zip(a.shape, strides, strict=True))
    window = np.lib.stride_tricks.as_strided(
        a, shape=(span,), strides=(size,), writeable=a.flags.writeable
    )
    return window, list(a.shape), strides


def _device_view(p: Param, a: Any) -> tuple[Any, list[int], list[int]]:
    """A device array as (itself, extents, strides in elements)."""
    if hasattr(a, "__dlpack__") and callable(getattr(a, "stride", None)):
        # A torch tensor: its array interface spells bf16 as "|V2" (raw bytes).
        return _dlpack_view(p, a)
    cai = getattr(a, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise ArgumentError(
            f"argument {p.name!r}: expected a zyntax.cuda.DeviceArray or an object with "
            f"__cuda_array_interface__, got {type(a).__name__}"
        )
    shape = [int(n) for n in cai["shape"]]
    dtype = np.dtype(cai["typestr"])
    want = _NUMPY.get(p.dtype)
    if want is None or dtype != np.dtype(want):
        raise ArgumentError(
            f"argument {p.name!r}: the view holds {p.dtype}, got a device array of {dtype}"
        )
    if len(shape) != p.rank:
        raise ArgumentError(
            f"argument {p.name!r}: the view has rank {p.rank}, "
            f"got a device array of {len(shape)} dims"
        )
    raw = cai.get("strides")
    byte_strides = (
        list(raw)
        if raw is not None
        else [dtype.itemsize * math.prod(shape[d + 1 :]) for d in range(len(shape))]
    )
    if any(s < 0 or s % dtype.itemsize for s in byte_strides):
        raise ArgumentError(
            f"argument {p.name!r}: strides {tuple(byte_strides)} must be non-negative "
            "multiples of the item size"
        )
    return a, shape, [s // dtype.itemsize for s in byte_strides]


#: torch dtype names of each view element type (for tensors without a typestr).
_TORCH = {"bf16": "torch.bfloat16", "f16": "torch.float16", "f32": "torch.float32"}


def _dlpack_view(p: Param, a: Any) -> tuple[Any, list[int], list[int]]:
    """A DLPack tensor (a torch tensor, bf16 included) as (itself, extents,
    strides in elements); the launch reads its pointer through DLPack."""
    shape = [int(n) for n in getattr(a, "shape", ())]
    stride = getattr(a, "stride", None)
    if not callable(stride):
        raise ArgumentError(
            f"argument {p.name!r}: a DLPack tensor needs shape and stride() "
            f"(a torch tensor), got {type(a).__name__}"
        )
    if str(getattr(a, "dtype", "")) != _TORCH.get(p.dtype, "?"):
        raise ArgumentError(
            f"argument {p.name!r}: the view holds {p.dtype}, got a tensor of {a.dtype}"
        )
    if len(shape) != p.rank:
        raise ArgumentError(
            f"argument {p.name!r}: the view has rank {p.rank}, got a tensor of {len(shape)} dims"
        )
    strides = [int(s) for s in stride()]
    if any(s < 0 for s in strides):
        raise ArgumentError(f"argument {p.name!r}: negative strides {tuple(strides)}")
    return a, shape, strides
