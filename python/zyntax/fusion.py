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
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zyntax import _native, hir
from zyntax.errors import ArgumentError, BuildError
from zyntax.nest import launch_grid, parallel_for

__all__ = ["Buffer", "Decision", "Fused", "Kernel", "Sequence"]

#: Workgroups of the generated kernels: 1-D maps, 2-D maps, reductions (one thread per row).
WORKGROUP_1D = (256,)
WORKGROUP_2D = (4, 64)
WORKGROUP_REDUCE = (128,)

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
    ) -> None:
        self.b = b
        self.point = point
        self._ptrs = ptrs
        self._values = values
        self._reads = reads

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
        if name in self.buffers:
            raise BuildError(f"the sequence already has a buffer named {name!r}")
        shp = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
        if not 1 <= len(shp) <= 2 or any(d < 1 for d in shp):
            raise BuildError(f"buffer {name!r}: shape {shp} must have 1 or 2 positive extents")
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
        if op not in ("add", "max"):
            raise BuildError(f"reduce {name!r}: op must be 'add' or 'max', not {op!r}")
        st = _Stage(
            name, "reduce", out, body, op=op, registers=registers, shared_bytes=shared_bytes
        )
        st._inner = int(cols)
        self.stages.append(st)

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

    def sequence_json(self, budget: Mapping[str, int] | None = None) -> dict[str, Any]:
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
        }
        if budget is not None:
            out["budget"] = {
                "registers": int(budget["registers"]),
                "shared_bytes": int(budget["shared_bytes"]),
            }
        return out

    def fuse(
        self,
        *,
        arch: str | None = None,
        budget: Mapping[str, int] | None = None,
        enabled: bool = True,
    ) -> Fused:
        """Plans and builds the fused kernels. With `arch`, each stage's registers
        and shared memory come from ptxas's resource report for that arch.
        ``enabled=False`` builds one kernel per stage (the unfused baseline)."""
        if not self.stages:
            raise BuildError(f"sequence {self.name!r} has no stages")
        self._record()
        if arch is not None:
            self._measure(arch)
        plan = json.loads(_native.fusion_plan(json.dumps(self.sequence_json(budget))))
        decisions = [Decision(**d) for d in plan["decisions"]]
        if enabled:
            groups = [(g["stages"], set(g["elided"])) for g in plan["groups"]]
        else:
            groups = [([k], set()) for k in range(len(self.stages))]
            # Unfused, a temporary no one reads is still dead.
            read = {n for st in self.stages for n, _ in st.reads}
            for g, el in groups:
                out = self.stages[g[0]].out
                if out.role == "temporary" and out.name not in read:
                    el.add(out.name)
        kernels = [self._emit(k, g, el) for k, (g, el) in enumerate(groups)]
        return Fused(self, kernels, decisions)

    def _measure(self, arch: str) -> None:
        from zyntax.ptxinfo import ptxas_resources

        for k, st in enumerate(self.stages):
            kern = self._emit(k, [k], set())
            ptx = _native.compile_ptx(kern.module, arch)
            log = _native.ptxas_assemble(ptx if isinstance(ptx, str) else ptx["ptx"], arch)["log"]
            res = ptxas_resources(str(log)).get(kern.name, {})
            st.registers = int(res.get("registers", 0))
            st.shared_bytes = int(res.get("shared_bytes", 0))

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
        space = last.space
        nest = space[:-1] if reduce else space
        wg = WORKGROUP_REDUCE if reduce else (WORKGROUP_1D if len(nest) == 1 else WORKGROUP_2D)
        params = [hir.ptr("global", b.dtype) for b in used]
        with m.kernel(name, params, max_threads=tuple(reversed(wg))) as b:
            ptrs = {buf.name: p for buf, p in zip(used, b.params, strict=True)}

            def point_stages(point: tuple[Any, ...], values: dict[str, Any]) -> None:
                for st in stages:
                    if st.kind == "reduce":
                        continue
                    v = st.body(Env(b, point, ptrs, values, []))
                    v = _as(b, v, st.out.dtype)
                    values[st.out.name] = v
                    if st.out.name not in elided:
                        b.store(b.ptr_add(ptrs[st.out.name], _flat(st.out, point)), v)

            with parallel_for(b, nest, workgroup=wg) as idx:
                if not reduce:
                    point_stages(tuple(idx), {})
                else:
                    acc_t = last.out.dtype
                    init = b.const(0.0 if last.op == "add" else -math.inf, acc_t)
                    zero, cols = b.const(0, hir.u32), b.const(space[-1], hir.u32)
                    with b.loop(zero, cols, carry=[init]) as lp:
                        point = (*idx, lp.index)
                        values: dict[str, Any] = {}
                        point_stages(point, values)
                        v = _as(b, last.body(Env(b, point, ptrs, values, [])), acc_t)
                        acc = lp.carried[0]
                        lp.next(acc + v if last.op == "add" else b.max(acc, v))
                    b.store(
                        b.ptr_add(ptrs[last.out.name], _flat(last.out, tuple(idx))), lp.results[0]
                    )
        m.verify()
        grid, block = launch_grid(nest, wg)
        return Kernel(m, name, [st.name for st in stages], used, writes, grid, block)


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

    def run_interp(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Runs the kernels on the reference interpreter; outputs are written in place."""
        from zyntax import interp

        def alloc(b: Buffer) -> np.ndarray:
            return np.full(b.shape, np.nan, _NUMPY[str(b.dtype)])

        arrs = self._arrays(arrays, alloc)
        for k in self.kernels:
            interp.launch(k.module, k.name, k.grid, k.block, *[arrs[b.name] for b in k.buffers])

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
