"""Kernel fusion of a sequence of launches over named buffers.

Build a sequence of elementwise maps and row reductions, each written as a
function of the values at one point of its iteration space::

    s = fusion.Sequence("chain")
    x = s.input("x", (n,), hir.f32)
    t = s.temporary("t", (n,), hir.f32)
    y = s.output("y", (n,), hir.f32)
    s.map("scale", t, lambda e: e[x] * 2.0)          # e[buf]: buf at this point
    s.map("shift", y, lambda e: e[t] + 1.0)
    f = s.fuse()                                     # one kernel; t never stored
    print(f.report())                                # every decision and why
    f.run_interp({"x": xs, "y": ys})                 # or f.program() on the GPU

``e.load(buf, *index)`` reads another element (a broadcast, a neighbour) and
``e.point`` holds the point's indices (``u32``). The legality rules and the
grouping are ``zyntax_opt::fusion`` (docs/fusion.md): stages fuse when the
consumer reads what the producer writes at the same point of the same
iteration space, the group does not end in a reduction, buffers that alias do
not hide a dependence, and the registers and shared memory (ptxas's resource
report, with ``fuse(arch=...)``) stay within budget. A fused group keeps the
values of buffers no one reads afterwards in registers.

Only the planning is in the Rust core here; the kernels are generated in
Python from the stage lambdas. Nests described declaratively (a contraction
and its element-wise consumers) fuse entirely in the core:
:func:`zyntax.tiling.fuse_nests` (docs/fusion.md, "Nests").
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zyntax import _native, hir
from zyntax.errors import ArgumentError, BuildError

__all__ = ["Buffer", "Decision", "Fused", "Kernel", "Sequence"]

#: Bytes of one vector access: the generated kernels move the buffers each
#: thread reads or writes at its own points with 128-bit loads and stores.
VEC_BYTES = 16
#: Threads per block of a map kernel, and the vectors each thread moves per
#: buffer (all loads issued before any arithmetic: bytes in flight).
MAP_THREADS = 256
MAP_UNROLL = 2
#: Warps per block of a kernel ending in a row reduction: one warp per row.
REDUCE_WARPS = 8
#: Rows of at most this many whole runs per lane are unrolled, all loads first.
REDUCE_UNROLL = 8
#: Accumulator types a warp shuffle moves; other result types accumulate in f32.
_SHUFFLED = ("i32", "u32", "i64", "u64", "f32", "f64")

_NUMPY = {
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "u32": np.uint32,
}


@dataclass(frozen=True)
class Buffer:
    name: str
    role: str  # input, output, temporary
    shape: tuple[int, ...]
    dtype: Any  # a hir scalar type
    alias_of: str | None = None


@dataclass
class _Stage:
    name: str
    kind: str  # map, reduce
    out: Buffer
    body: Callable[[Env], Any]
    op: str = "add"
    registers: int = 0
    shared_bytes: int = 0
    reads: list[tuple[str, str]] = field(default_factory=list)

    @property
    def space(self) -> tuple[int, ...]:
        return self.out.shape if self.kind == "map" else (*self.out.shape, self._inner)

    _inner: int = 0


@dataclass(frozen=True)
class Decision:
    producer: str
    consumer: str
    fused: bool
    rule: str
    why: str

    def __str__(self) -> str:
        verb = "fused into" if self.fused else "not fused with"
        return f"{self.consumer} {verb} {self.producer}: {self.rule}: {self.why}"


class Env:
    """What a stage's body sees at one point: ``e[buf]``, ``e.load``, ``e.point``, ``e.b``."""

    def __init__(
        self,
        b: Any,
        point: tuple[Any, ...],
        ptrs: Mapping[str, Any],
        values: Mapping[str, Any],
        reads: list[tuple[str, str]],
        column: tuple[int, Callable[[Buffer], Any]] | None = None,
    ) -> None:
        self.b = b
        self.point = point
        self._ptrs = ptrs
        self._values = values
        self._reads = reads
        # In a vector run: `column(buf)` is a row-vector buffer at this point's
        # column, from one vector load per run (see _Gen._column).
        self._column = column

    def _flat(self, buf: Buffer, index: Seq[Any]) -> Any:
        if len(index) != len(buf.shape):
            raise BuildError(
                f"{buf.name} has {len(buf.shape)} dimensions, indexed with {len(index)}"
            )
        flat = index[0]
        for k in range(1, len(index)):
            flat = flat * buf.shape[k] + index[k]
        return flat

    def __getitem__(self, buf: Buffer) -> Any:
        """`buf` at this point; a buffer of fewer dimensions than the space is
        indexed by the leading ones (a row reduction's result by its row), which
        is a broadcast, not the thread's own element."""
        own = len(buf.shape) == len(self.point)
        self._reads.append((buf.name, "point" if own else "other"))
        if buf.name in self._values:
            return self._values[buf.name]
        return self.b.load(
            self.b.ptr_add(self._ptrs[buf.name], self._flat(buf, self.point[: len(buf.shape)]))
        )

    def load(self, buf: Buffer, *index: Any) -> Any:
        """`buf` at another index: a dependence between threads if a stage writes `buf`."""
        self._reads.append((buf.name, "other"))
        col = self._column
        if col is not None and len(index) == 1 and index[0] is self.point[-1]:
            if buf.shape == (col[0],):
                return col[1](buf)
        return self.b.load(self.b.ptr_add(self._ptrs[buf.name], self._flat(buf, index)))


@dataclass
class Kernel:
    """One generated kernel: its module, the stages it runs, its buffers and launch shape."""

    module: Any
    name: str
    stages: list[str]
    buffers: list[Buffer]
    writes: list[Buffer]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


class Sequence:
    """A sequence of maps and row reductions over named buffers (see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.buffers: dict[str, Buffer] = {}
        self.stages: list[_Stage] = []

    # -- buffers
    def _buffer(
        self, name: str, role: str, shape: Any, dtype: Any, alias_of: Buffer | None
    ) -> Buffer:
        if not isinstance(name, str):
            raise ArgumentError(f"argument 'name': expected a str, got {type(name).__name__}")
        if name in self.buffers:
            raise BuildError(f"the sequence already has a buffer named {name!r}")
        shp = _extents(shape, name)
        if not 1 <= len(shp) <= 2:
            raise BuildError(f"buffer {name!r}: shape {shp} must have 1 or 2 positive extents")
        if str(dtype) not in (*_NUMPY, "bf16"):
            raise ArgumentError(
                f"argument 'dtype': buffer {name!r} needs one of the scalar types "
                f"{', '.join((*_NUMPY, 'bf16'))}, got {dtype!r}"
            )
        if alias_of is not None and not (
            isinstance(alias_of, Buffer) and self.buffers.get(alias_of.name) is alias_of
        ):
            raise ArgumentError(
                f"argument 'alias_of': buffer {name!r} can alias only a buffer of this "
                f"sequence, got {alias_of!r}"
            )
        b = Buffer(name, role, shp, dtype, alias_of.name if alias_of is not None else None)
        self.buffers[name] = b
        return b

    def input(
        self, name: str, shape: Any, dtype: Any = hir.f32, alias_of: Buffer | None = None
    ) -> Buffer:
        return self._buffer(name, "input", shape, dtype, alias_of)

    def output(
        self, name: str, shape: Any, dtype: Any = hir.f32, alias_of: Buffer | None = None
    ) -> Buffer:
        return self._buffer(name, "output", shape, dtype, alias_of)

    def temporary(self, name: str, shape: Any, dtype: Any = hir.f32) -> Buffer:
        return self._buffer(name, "temporary", shape, dtype, None)

    # -- stages
    def map(
        self,
        name: str,
        out: Buffer,
        body: Callable[[Env], Any],
        *,
        registers: int = 0,
        shared_bytes: int = 0,
    ) -> None:
        """``out[p] = body(e)`` for every point ``p`` of ``out``'s shape."""
        self._check_stage(name, out, body, registers, shared_bytes)
        self.stages.append(
            _Stage(name, "map", out, body, registers=registers, shared_bytes=shared_bytes)
        )

    def reduce(
        self,
        name: str,
        out: Buffer,
        cols: int,
        body: Callable[[Env], Any],
        *,
        op: str = "add",
        registers: int = 0,
        shared_bytes: int = 0,
    ) -> None:
        """``out[r] = op over c < cols of body(e at (r, c))``, accumulated in ``out``'s type."""
        self._check_stage(name, out, body, registers, shared_bytes)
        if op not in ("add", "max"):
            raise BuildError(f"reduce {name!r}: op must be 'add' or 'max', not {op!r}")
        (inner,) = _extents(cols, name)
        st = _Stage(
            name, "reduce", out, body, op=op, registers=registers, shared_bytes=shared_bytes
        )
        st._inner = inner
        self.stages.append(st)

    def _check_stage(
        self, name: Any, out: Any, body: Any, registers: Any, shared_bytes: Any
    ) -> None:
        """A stage's arguments, else an ArgumentError naming the one that is wrong."""
        if not isinstance(name, str):
            raise ArgumentError(f"argument 'name': expected a str, got {type(name).__name__}")
        if not isinstance(out, Buffer) or self.buffers.get(out.name) is not out:
            raise ArgumentError(
                f"argument 'out': stage {name!r} writes a buffer of this sequence, got {out!r}"
            )
        if not callable(body):
            raise ArgumentError(
                f"argument 'body': stage {name!r} needs a function of the point, "
                f"got {type(body).__name__}"
            )
        for what, v in (("registers", registers), ("shared_bytes", shared_bytes)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < 2**31:
                raise ArgumentError(
                    f"argument '{what}': stage {name!r} needs an integer in [0, 2**31), got {v!r}"
                )

    # -- planning
    def _record(self) -> None:
        """Runs each stage's body once in a scratch kernel to learn its accesses."""
        for st in self.stages:
            m = hir.Module(f"{self.name}_probe")
            names = list(self.buffers)
            params = [hir.ptr("global", self.buffers[n].dtype) for n in names]
            with m.kernel("probe", params) as b:
                point = tuple(b.thread_idx("x") for _ in st.space)
                st.reads = []
                st.body(Env(b, point, dict(zip(names, b.params, strict=True)), {}, st.reads))

    def sequence_json(
        self,
        budget: Mapping[str, int] | None = None,
        measured: Seq[Mapping[str, Any]] = (),
    ) -> dict[str, Any]:
        """The planner's input (``zyntax_opt::fusion::Sequence``)."""
        self._record()
        out: dict[str, Any] = {
            "buffers": [
                {"name": b.name, "live_out": b.role == "output", "alias_of": b.alias_of}
                for b in self.buffers.values()
            ],
            "stages": [
                {
                    "name": st.name,
                    "kind": st.kind,
                    "space": list(st.space),
                    "reads": [{"buffer": n, "index": i} for n, i in st.reads],
                    "writes": [{"buffer": st.out.name, "index": "point"}],
                    "registers": st.registers,
                    "shared_bytes": st.shared_bytes,
                }
                for st in self.stages
            ],
            "measured": [dict(m) for m in measured],
        }
        if budget is not None:
            out["budget"] = {
                "registers": int(budget["registers"]),
                "shared_bytes": int(budget["shared_bytes"]),
            }
        return out

    def _plan(
        self, budget: Mapping[str, int] | None, measured: Seq[Mapping[str, Any]]
    ) -> dict[str, Any]:
        seq = self.sequence_json(budget, measured)
        return dict(json.loads(_native.fusion_plan(json.dumps(seq))))

    def fuse(
        self,
        *,
        arch: str | None = None,
        budget: Mapping[str, int] | None = None,
        enabled: bool = True,
    ) -> Fused:
        """Plans and builds the fused kernels. With `arch`, resources come from
        ptxas's report for that arch: each stage's alone, and each fused kernel
        the planner considers is compiled and charged what it really needs.
        ``enabled=False`` builds one kernel per stage (the unfused baseline)."""
        if not self.stages:
            raise BuildError(f"sequence {self.name!r} has no stages")
        self._record()
        measured: list[dict[str, Any]] = []
        if arch is not None:
            for k, st in enumerate(self.stages):
                st.registers, st.shared_bytes = self._resources(arch, [k])
        plan = self._plan(budget, measured)
        if arch is not None and enabled:
            # Measure every fused kernel the plan contains or refused for its
            # resources, and plan again, until no new candidate appears.
            seen: set[tuple[int, ...]] = set()
            while todo := [c for c in self._candidates(plan) if c not in seen]:
                for c in todo:
                    seen.add(c)
                    regs, smem = self._resources(arch, list(c))
                    measured.append({"stages": list(c), "registers": regs, "shared_bytes": smem})
                plan = self._plan(budget, measured)
        decisions = [Decision(**d) for d in plan["decisions"]]
        if enabled:
            groups = [(g["stages"], set(g["elided"])) for g in plan["groups"]]
        else:
            groups = [([k], self._dead([k])) for k in range(len(self.stages))]
        kernels = [self._emit(k, g, el) for k, (g, el) in enumerate(groups)]
        return Fused(self, kernels, decisions)

    def _candidates(self, plan: Mapping[str, Any]) -> list[tuple[int, ...]]:
        """The multi-stage kernels a plan's resource checks looked at: every
        prefix of each group, and a group plus the stage it refused for resources."""
        groups = [list(g["stages"]) for g in plan["groups"]]
        out = [tuple(g[:m]) for g in groups for m in range(2, len(g) + 1)]
        for g, nxt in itertools.pairwise(groups):
            if plan["decisions"][nxt[0] - 1]["rule"] in ("registers", "shared_memory"):
                out.append((*g, nxt[0]))
        return out

    def _dead(self, group: list[int]) -> set[str]:
        """Temporaries the group writes that no later stage reads (kept in registers)."""
        later = {n for st in self.stages[group[-1] + 1 :] for n, _ in st.reads}
        return {
            self.stages[k].out.name
            for k in group
            if self.stages[k].out.role == "temporary" and self.stages[k].out.name not in later
        }

    def _resources(self, arch: str, group: list[int]) -> tuple[int, int]:
        """Registers per thread and static shared bytes of the kernel running
        `group`, from ptxas's resource report for `arch`."""
        from zyntax.ptxinfo import ptxas_resources

        kern = self._emit(0, group, self._dead(group))
        ptx = _native.compile_ptx(kern.module, arch)
        log = _native.ptxas_assemble(ptx if isinstance(ptx, str) else ptx["ptx"], arch)["log"]
        res = ptxas_resources(str(log)).get(kern.name, {})
        return int(res.get("registers", 0)), int(res.get("shared_bytes", 0))

    # -- code generation
    def _emit(self, index: int, group: list[int], elided: set[str]) -> Kernel:
        stages = [self.stages[k] for k in group]
        last = stages[-1]
        used: list[Buffer] = []
        for st in stages:
            for n, _ in st.reads:
                if n not in elided and self.buffers[n] not in used:
                    used.append(self.buffers[n])
            if st.out.name not in elided and st.out not in used:
                used.append(st.out)
        writes = [st.out for st in stages if st.out.name not in elided]
        name = f"{self.name}_{index}_" + "_".join(st.name for st in stages)
        m = hir.Module(name)
        reduce = last.kind == "reduce"
        threads = REDUCE_WARPS * 32 if reduce else MAP_THREADS
        params = [hir.ptr("global", b.dtype) for b in used]
        with m.kernel(name, params, max_threads=(threads,)) as b:
            ptrs = {buf.name: p for buf, p in zip(used, b.params, strict=True)}
            gen = _Gen(self, b, stages, ptrs, elided)
            blocks = gen.reduce_rows() if reduce else gen.map_points()
        m.verify()
        return Kernel(
            m, name, [st.name for st in stages], used, writes, (blocks, 1, 1), (threads, 1, 1)
        )


class _Gen:
    """Emits one kernel for a group of stages.

    Maps: thread ``t`` of block ``g`` owns ``MAP_UNROLL`` runs of ``V``
    consecutive points (flat, row-major), run ``u`` starting at
    ``((g * MAP_UNROLL + u) * MAP_THREADS + t) * V``, so each access
    instruction of a warp covers consecutive 16-byte vectors. ``V`` is what
    fills 16 bytes of the narrowest buffer moved at the thread's own points.
    Every such buffer is loaded as vectors before any arithmetic and stored as
    vectors after it; the last block, where points run out, takes a guarded
    scalar path.

    Row reductions: one warp per row; lane ``l`` takes ``V`` consecutive
    columns from ``l * V`` on, every ``32 * V`` columns (vectors where the row
    length keeps them aligned, else ``V = 1``), folds them into a register,
    and the warp combines its 32 partial results with ``shfl.xor``.
    """

    def __init__(
        self,
        seq: Sequence,
        b: Any,
        stages: list[_Stage],
        ptrs: Mapping[str, Any],
        elided: set[str],
    ) -> None:
        self.seq, self.b, self.stages, self.ptrs, self.elided = seq, b, stages, ptrs, elided
        last = stages[-1]
        self.space = last.space
        # Buffers read at the thread's own point (same shape as the space, so the
        # flat index is the point's) whose values come from memory.
        written = {st.out.name for st in stages}
        reads = dict.fromkeys(n for st in stages for n, i in st.reads if i == "point")
        self.own = [
            seq.buffers[n] for n in reads if n not in written and seq.buffers[n].shape == self.space
        ]
        self.stored = [st.out for st in stages if st.kind == "map" and st.out.name not in elided]
        #: A 16-byte vector loaded on the path being emitted (see _store_run).
        self.seed: Any = None
        #: In a vector run of `self.v` points along a row of `self.cols`: its first
        #: column, the lane being emitted and the row vectors loaded for it.
        self.run: tuple[Any, int, dict[str, list[Any]]] | None = None
        self.v, self.cols = 1, 0

    def _column(self) -> tuple[int, Callable[[Buffer], Any]] | None:
        """What Env.load needs to serve ``e.load(vec, e.point[-1])`` (a buffer of
        one row's length, read at the point's column) from one vector load per run."""
        if self.run is None or not self.cols:
            return None
        col0, lane, cache = self.run

        def fetch(buf: Buffer) -> Any:
            if buf.name not in cache:
                cache[buf.name] = self._load_run(buf, col0, self.v)
            return cache[buf.name][lane]

        return self.cols, fetch

    def _width(self, bufs: list[Buffer], row: int | None) -> int:
        """Points per vector run: 16 bytes of the narrowest buffer, if every
        buffer's rows (of `row` elements) start 16-byte aligned; else 1."""
        if not bufs:
            return 1
        sizes = [_size(x.dtype) for x in bufs]
        if row is not None and any(row * z % VEC_BYTES for z in sizes):
            return 1
        return max(1, min(8, VEC_BYTES // min(sizes)))

    def _point(self, flat: Any, dims: tuple[int, ...]) -> tuple[Any, ...]:
        """The row-major indices of flat index `flat` in `dims`."""
        out = []
        for d in reversed(dims[1:]):
            out.append(flat % d)
            flat = flat / d
        return (flat, *reversed(out))

    def _load_run(self, buf: Buffer, flat: Any, v: int) -> list[Any]:
        """`v` consecutive elements of `buf` from `flat` (a multiple of `v`), as vectors."""
        b = self.b
        if v == 1:
            return [b.load(b.ptr_add(self.ptrs[buf.name], flat))]
        per = min(v, VEC_BYTES // _size(buf.dtype))
        vp = b.ptr_cast(
            b.ptr_add(self.ptrs[buf.name], flat), hir.ptr("global", hir.vec(buf.dtype, per))
        )
        out = []
        for c in range(v // per):
            vec = b.load(b.ptr_add(vp, c) if c else vp)
            if per * _size(buf.dtype) == VEC_BYTES:
                self.seed = vec
            out += [b.extract(vec, lane) for lane in range(per)]
        return out

    def _store_run(self, buf: Buffer, flat: Any, vals: list[Any]) -> None:
        """Stores `vals` from `flat` as vectors. HIR has no vector constant: a
        vector is built by inserting lanes into one loaded on this path (its
        bits reinterpreted), else into a u64 zero seen as a 64-bit vector."""
        b = self.b
        v, size = len(vals), _size(buf.dtype)
        per = min(v, VEC_BYTES // size)
        if self.seed is None or per * size != VEC_BYTES:
            per = min(v, 8 // size)
        if per <= 1:
            for n, x in enumerate(vals):
                b.store(b.ptr_add(self.ptrs[buf.name], flat + n if n else flat), x)
            return
        vty = hir.vec(buf.dtype, per)
        if per * size == VEC_BYTES:
            seed = self.seed if str(self.seed.type) == str(vty) else b.bitcast(self.seed, vty)
        else:
            seed = b.bitcast(b.const(0, hir.u64), vty)
        vp = b.ptr_cast(b.ptr_add(self.ptrs[buf.name], flat), hir.ptr("global", vty))
        for c in range(v // per):
            vec = seed
            for lane in range(per):
                vec = b.insert(vec, vals[c * per + lane], lane)
            b.store(b.ptr_add(vp, c) if c else vp, vec)

    def _maps(self, point: tuple[Any, ...], values: dict[str, Any]) -> dict[str, Any]:
        """Runs the group's maps at `point`; `values` holds what is already in
        registers and receives each map's result."""
        b = self.b
        for st in self.stages:
            if st.kind == "map":
                env = Env(b, point, self.ptrs, values, [], self._column())
                values[st.out.name] = _as(b, st.body(env), st.out.dtype)
        return values

    def _scalar_point(self, flat: Any, dims: tuple[int, ...]) -> dict[str, Any]:
        """One point, every access scalar (the guarded tail)."""
        b = self.b
        point = self._point(flat, dims)
        values = {x.name: b.load(b.ptr_add(self.ptrs[x.name], flat)) for x in self.own}
        values = self._maps(point, values)
        for x in self.stored:
            b.store(b.ptr_add(self.ptrs[x.name], flat), values[x.name])
        return values

    def map_points(self) -> int:
        b, dims = self.b, self.space
        total = math.prod(dims)
        if total >= 2**32:
            raise BuildError(
                f"sequence {self.seq.name!r}: {total} points exceed the u32 index range"
            )
        v = self._width(self.own + self.stored, None)
        self.v, self.cols = v, (dims[-1] if dims[-1] % v == 0 else 0)
        per_block = MAP_THREADS * MAP_UNROLL * v
        first = b.block_idx("x") * MAP_UNROLL
        tid = b.thread_idx("x")
        starts = [((first + u) * MAP_THREADS + tid) * v for u in range(MAP_UNROLL)]
        full = starts[-1] + v <= total
        with b.if_else(full) as (yes, no):
            with yes:
                self.seed = None
                loaded: dict[str, list[Any]] = {x.name: [] for x in self.own}
                for s0 in starts:
                    for x in self.own:
                        loaded[x.name] += self._load_run(x, s0, v)
                results: dict[str, list[Any]] = {x.name: [] for x in self.stored}
                for u, s0 in enumerate(starts):
                    col0 = self._point(s0, dims)[-1]
                    row_vectors: dict[str, list[Any]] = {}
                    for lane in range(v):
                        flat = s0 + lane if lane else s0
                        vals = {n: lv[u * v + lane] for n, lv in loaded.items()}
                        self.run = (col0, lane, row_vectors)
                        vals = self._maps(self._point(flat, dims), vals)
                        for x in self.stored:
                            results[x.name].append(vals[x.name])
                    self.run = None
                for u, s0 in enumerate(starts):
                    for x in self.stored:
                        self._store_run(x, s0, results[x.name][u * v : (u + 1) * v])
            with no:
                for s0 in starts:
                    for lane in range(v):
                        flat = s0 + lane if lane else s0
                        with b.if_(flat < total):
                            self._scalar_point(flat, dims)
        return max(1, -(-total // per_block))

    def reduce_rows(self) -> int:
        b, last = self.b, self.stages[-1]
        rows_shape, cols = self.space[:-1], self.space[-1]
        rows = math.prod(rows_shape)
        out_t = last.out.dtype
        acc_t = out_t if str(out_t) in _SHUFFLED else hir.f32
        # Row-contiguous buffers (the space's shape) load as vectors; the row length
        # must keep each row's start 16-byte aligned.
        v = self._width(self.own + self.stored, cols)
        self.v, self.cols = v, cols
        chunk = 32 * v
        steps = -(-cols // chunk)
        lane = b.thread_idx("x") % 32
        row = b.block_idx("x") * REDUCE_WARPS + b.thread_idx("x") / 32
        ident = b.const(0 if last.op == "add" else -math.inf, acc_t)

        def fold(acc: Any, val: Any) -> Any:
            return acc + val if last.op == "add" else b.max(acc, val)

        def point_value(point: tuple[Any, ...], values: dict[str, Any]) -> Any:
            values = self._maps(point, values)
            env = Env(b, point, self.ptrs, values, [], self._column())
            return _as(b, last.body(env), acc_t)

        def run_loads(base: Any) -> dict[str, list[Any]]:
            return {x.name: self._load_run(x, base, v) for x in self.own}

        def run_fold(acc: Any, c0: Any, base: Any, loaded: dict[str, list[Any]]) -> Any:
            """The fused maps and the reduced values of one vector run."""
            outs: dict[str, list[Any]] = {x.name: [] for x in self.stored}
            row_vectors: dict[str, list[Any]] = {}
            for ln in range(v):
                vals = {n: lv[ln] for n, lv in loaded.items()}
                self.run = (c0, ln, row_vectors)
                acc = fold(acc, point_value((*idx, c0 + ln if ln else c0), vals))
                for n in outs:
                    outs[n].append(vals[n])
            self.run = None
            for x in self.stored:
                self._store_run(x, base, outs[x.name])
            return acc

        def tail(acc: Any, c0: Any, base: Any) -> Any:
            """A run crossing the row's end: each column guarded, scalar accesses."""
            for ln in range(v):
                col = c0 + ln if ln else c0
                inner = b.if_else(col < cols, results=[acc_t])
                with inner as (yes, no):
                    with yes:
                        at = base + ln if ln else base
                        vals = {x.name: b.load(b.ptr_add(self.ptrs[x.name], at)) for x in self.own}
                        got = point_value((*idx, col), vals)
                        for x in self.stored:
                            b.store(b.ptr_add(self.ptrs[x.name], at), vals[x.name])
                        yes.yield_(fold(acc, got))
                    with no:
                        no.yield_(acc)
                acc = inner.results[0]
            return acc

        with b.if_(row < rows):
            idx = self._point(row, rows_shape)
            first = lane * v
            if cols % chunk == 0 and steps <= REDUCE_UNROLL:
                # Short rows of whole runs: every load of the row first (bytes in flight).
                self.seed = None
                starts = [first + st * chunk if st else first for st in range(steps)]
                bases = [row * cols + c0 for c0 in starts]
                loaded = [run_loads(base) for base in bases]
                total = ident
                for c0, base, ld in zip(starts, bases, loaded, strict=True):
                    total = run_fold(total, c0, base, ld)
            else:
                # The accumulator is a builder variable: the loop and the
                # branch get its block parameters from SSA construction.
                acc = b.declare_var(acc_t, "acc")
                b.def_var(acc, ident)
                with b.for_range(b.const(0, hir.u32), b.const(steps, hir.u32)) as st:
                    c0 = st * chunk + first
                    base = row * cols + c0
                    if cols % chunk == 0:
                        self.seed = None
                        b.def_var(acc, run_fold(b.use_var(acc), c0, base, run_loads(base)))
                    else:
                        with b.if_else(c0 + v <= cols) as (yes, no):
                            with yes:
                                self.seed = None
                                got = run_fold(b.use_var(acc), c0, base, run_loads(base))
                                b.def_var(acc, got)
                            with no:
                                b.def_var(acc, tail(b.use_var(acc), c0, base))
                total = b.use_var(acc)
            for off in (16, 8, 4, 2, 1):
                total = fold(total, b.shfl_xor(total, off))
            with b.if_(lane < 1):
                b.store(b.ptr_add(self.ptrs[last.out.name], row), _as(b, total, out_t))
        return max(1, -(-rows // REDUCE_WARPS))


def _flat(buf: Buffer, point: tuple[Any, ...]) -> Any:
    flat = point[0]
    for k in range(1, len(buf.shape)):
        flat = flat * buf.shape[k] + point[k]
    return flat


def _as(b: Any, v: Any, ty: Any) -> Any:
    if isinstance(v, (int, float)):
        return b.const(v, ty)
    return v if str(v.type) == str(ty) else b.cast(v, ty)


class Fused:
    """The kernels of a planned sequence and the planner's decisions."""

    def __init__(self, seq: Sequence, kernels: list[Kernel], decisions: list[Decision]) -> None:
        self.sequence = seq
        self.kernels = kernels
        self.decisions = decisions

    def report(self) -> str:
        lines = [
            f"fusion of {self.sequence.name}: {len(self.sequence.stages)} stages -> "
            f"{len(self.kernels)} kernels"
        ]
        lines += [f"  {d}" for d in self.decisions]
        for k in self.kernels:
            lines.append(
                f"  kernel {k.name}: stages {', '.join(k.stages)}; "
                f"buffers {', '.join(b.name for b in k.buffers)}"
            )
        return "\n".join(lines)

    def _arrays(self, arrays: Mapping[str, Any], alloc: Callable[[Buffer], Any]) -> dict[str, Any]:
        out = dict(arrays)
        for b in self.sequence.buffers.values():
            if b.name not in out:
                if b.role != "temporary":
                    raise BuildError(f"no array given for {b.role} {b.name!r}")
                out[b.name] = alloc(b)
        return out

    def _checked_arrays(self, arrays: Any) -> dict[str, np.ndarray]:
        """`arrays` checked against the sequence's buffers: a mapping from
        buffer names to numpy arrays of exactly the declared shape and dtype,
        and no memory shared between two buffers the sequence does not
        declare to alias (``alias_of``) when a kernel writes either; declared
        aliases that share memory must be the same array, so that the
        interpreter sees one memory. Else an ArgumentError naming the buffer."""
        if not isinstance(arrays, Mapping):
            raise ArgumentError(
                f"argument 'arrays': expected a dict of buffer name -> numpy array, "
                f"got {type(arrays).__name__}"
            )
        buffers = self.sequence.buffers
        out: dict[str, np.ndarray] = {}
        for name, a in arrays.items():
            if not isinstance(name, str) or name not in buffers:
                raise ArgumentError(
                    f"argument 'arrays': {name!r} is not a buffer of sequence "
                    f"{self.sequence.name!r} (its buffers: {', '.join(buffers)})"
                )
            b = buffers[name]
            if not isinstance(a, np.ndarray):
                raise ArgumentError(
                    f"argument 'arrays': buffer {name!r} needs a numpy array, "
                    f"got {type(a).__name__}"
                )
            want = _np_dtype(b.dtype)
            if a.shape != b.shape or a.dtype != want:
                raise ArgumentError(
                    f"argument 'arrays': buffer {name!r} is {b.shape} {want}, "
                    f"got an array of {a.shape} {a.dtype}"
                )
            out[name] = a
        written = {b.name for k in self.kernels for b in k.writes}
        alias = _alias_roots(buffers)
        names = list(out)
        for i, n1 in enumerate(names):
            for n2 in names[i + 1 :]:
                a1, a2 = out[n1], out[n2]
                if not np.may_share_memory(a1, a2):
                    continue
                if not (written & {n1, n2}):
                    continue  # both only read: sharing changes nothing
                same_view = a1 is a2 or (
                    a1.__array_interface__["data"] == a2.__array_interface__["data"]
                    and a1.strides == a2.strides
                )
                if alias[n1] == alias[n2] and same_view and a1.shape == a2.shape:
                    out[n2] = a1  # one memory, as the kernels were planned for
                    continue
                why = (
                    "pass the same array for both"
                    if alias[n1] == alias[n2]
                    else "the sequence does not declare them to alias (alias_of=), so "
                    "the kernels may read what another thread already overwrote"
                )
                raise ArgumentError(
                    f"argument 'arrays': the arrays for {n1!r} and {n2!r} share memory "
                    f"and a kernel writes one of them: {why}"
                )
        return out

    def run_interp(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Runs the kernels on the reference interpreter; outputs are written in place.

        Each array must have its buffer's shape and dtype; two buffers may
        share memory only if both are only read, or they are declared to
        alias and get the same array (see :meth:`_checked_arrays`)."""
        from zyntax import interp

        def alloc(b: Buffer) -> np.ndarray:
            return np.full(b.shape, np.nan, _NUMPY[str(b.dtype)])

        arrs = self._arrays(self._checked_arrays(arrays), alloc)
        for k in self.kernels:
            interp.launch(k.module, k.name, k.grid, k.block, *[arrs[b.name] for b in k.buffers])

    def run_cpu(self, arrays: Mapping[str, np.ndarray], mode: str | None = None) -> None:
        """Runs the kernels natively on this CPU (``zyntax.cpu``: blocks on all
        cores), same arrays and checks as :meth:`run_interp`; ``mode="interp"``
        is the interpreter (docs/cpu.md)."""
        from zyntax import cpu

        def alloc(b: Buffer) -> np.ndarray:
            return np.full(b.shape, np.nan, _NUMPY[str(b.dtype)])

        arrs = self._arrays(self._checked_arrays(arrays), alloc)
        for k in self.kernels:
            cpu.launch(
                k.module, k.name, k.grid, k.block, *[arrs[b.name] for b in k.buffers], mode=mode
            )

    def program(self, device: int = 0) -> Any:
        """A ``zyntax.cuda.Program`` running the kernels (inputs and outputs
        bound at ``prepare``)."""
        from zyntax import cuda

        p = cuda.Program(device)
        np_dtype = {"bf16": _bf16_dtype()}
        bufs = {}
        used = {b.name for k in self.kernels for b in k.buffers}
        for b in self.sequence.buffers.values():
            if b.name not in used:
                continue  # kept in registers: no memory at all
            dt = np_dtype.get(str(b.dtype)) or _NUMPY[str(b.dtype)]
            bufs[b.name] = getattr(p, b.role)(b.name, b.shape, dt)
        for k in self.kernels:
            kern = cuda.load_hir(k.module, device).kernel(k.name)
            p.launch(
                kern,
                k.grid,
                k.block,
                *[bufs[b.name] for b in k.buffers],
                writes=[bufs[b.name] for b in k.writes],
            )
        return p

    def bytes_moved(self) -> int:
        """Bytes the kernels read and write in DRAM, each buffer once per kernel using it."""
        return sum(math.prod(b.shape) * _size(b.dtype) for k in self.kernels for b in k.buffers)


def _extents(shape: Any, name: str) -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints, numpy ints too) as positive
    extents, else an ArgumentError naming the buffer."""
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ArgumentError(
                f"argument 'shape': buffer {name!r} needs positive integer extents, "
                f"got {d!r} in {shape!r}"
            )
    return tuple(int(d) for d in dims)


def _np_dtype(ty: Any) -> np.dtype[Any]:
    """The numpy dtype of a buffer of HIR scalar type `ty` (bf16 through ml_dtypes)."""
    name = str(ty)
    return _bf16_dtype() if name == "bf16" else np.dtype(_NUMPY[name])


def _alias_roots(buffers: Mapping[str, Buffer]) -> dict[str, str]:
    """Each buffer's alias class: buffers linked by ``alias_of`` (in either
    direction, transitively) share a root."""
    root = {name: name for name in buffers}

    def find(n: str) -> str:
        while root[n] != n:
            n = root[n]
        return n

    for b in buffers.values():
        if b.alias_of is not None and b.alias_of in root:
            root[find(b.name)] = find(b.alias_of)
    return {n: find(n) for n in buffers}


def _size(ty: Any) -> int:
    return {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i32": 4, "u32": 4}[str(ty)]


def _bf16_dtype() -> Any:
    """numpy's bfloat16 (from ml_dtypes, which JAX and PyTorch installs bring),
    so that program buffers match the kernels' bf16 pointers."""
    try:
        import ml_dtypes  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise ArgumentError(
            "bf16 buffers in a zyntax.cuda.Program need numpy's bfloat16 type: "
            "pip install ml_dtypes"
        ) from e
    return np.dtype(ml_dtypes.bfloat16)
