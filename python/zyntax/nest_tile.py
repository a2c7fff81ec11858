"""Loop nests lowered to tile programs by the Rust core
(``zyntax_opt::nest_tile``, docs/tiling.md "Nests lowered to tile
programs"): :func:`nest_to_tile` sends a nest description to the core and
wraps the result (:class:`NestTile`: the report, or the kernel, its grid
and view arguments) for the interpreter, the CPU and the GPU. Re-exported
by :mod:`zyntax.tiling`; :mod:`zyntax.nest_builder` builds descriptions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax.errors import ArgumentError, BuildError

__all__ = [
    "NestTile",
    "NestViewArg",
    "at",
    "load",
    "nest_tiling_report",
    "nest_to_tile",
]


# ------------------------------------------------ nests lowered to tile programs
#
# The Rust core (zyntax_opt::nest_tile, docs/tiling.md "Nests lowered to tile
# programs") recognises a declaratively described nest as a map, a
# contraction or a reduction and lowers it to a tile program; these functions
# reach it from Python and run the result through zyntax.tile.Kernel.


def at(*loops: int) -> list[tuple[str, list[tuple[int, int]], int]]:
    """The index list ``[l0, l1, ...]``: each dim indexed by one loop (by its
    position in ``spec["loops"]``)."""
    return [("affine", [(loop, 1)], 0) for loop in loops]


def load(buffer: int, *loops: int) -> tuple[str, int, list[Any]]:
    """The expression ``buffers[buffer][l0, l1, ...]``."""
    return ("load", buffer, at(*loops))


@dataclass(frozen=True)
class NestViewArg:
    """The kernel arguments of one view: `buffer` (its position in the spec)
    from element `offset` on, with these extents and strides (elements)."""

    buffer: int
    offset: int
    extents: tuple[int, ...]
    strides: tuple[int, ...]
    #: The kernel assumes the view's first element aligned to this many bytes.
    align: int = 1


@dataclass
class NestTile:
    """The result of :func:`nest_to_tile`. `report` is the core's one-line
    report (what was recognised, or why not); a refused nest has `refusal`
    (the kind, e.g. ``"NonAffineIndex"``), `reason` and no `kernel`.
    A lowered one has `kind` (``map``, ``contraction``, ``reduction``), the
    `kernel` (a :class:`zyntax.tile.Kernel`), its `grid` and one
    :class:`NestViewArg` per kernel view."""

    report: str
    refusal: str | None = None
    reason: str | None = None
    kind: str | None = None
    kernel: Any = None
    grid: tuple[int, int, int] = (1, 1, 1)
    args: tuple[NestViewArg, ...] = ()
    buffers: tuple[tuple[str, str, tuple[int, ...]], ...] = ()
    #: Which pipeline a contraction runs and why (the warp-specialised TMA
    #: pipeline, or why not); empty for maps and reductions.
    pipeline: str = ""

    def _kernel(self) -> Any:
        if self.kernel is None:
            raise BuildError(f"the nest was not lowered to a tile program: {self.report}")
        return self.kernel

    def _check(self, arrays: Sequence[Any], shape_of: Callable[[Any], Any]) -> None:
        if len(arrays) != len(self.buffers):
            names = ", ".join(b[0] for b in self.buffers)
            raise ArgumentError(
                f"the nest takes {len(self.buffers)} buffers ({names}), got {len(arrays)}"
            )
        for (name, _, shape), a in zip(self.buffers, arrays, strict=True):
            got = shape_of(a)
            if got is None or tuple(got) != shape:
                raise ArgumentError(
                    f"buffer {name!r}: expected a contiguous array of shape {shape}, got "
                    f"{type(a).__name__} of shape {None if got is None else tuple(got)}"
                )

    def run_interp(self, *buffers: Any, checks: bool = True) -> dict[str, int]:
        """Runs the kernel on the reference interpreter over C-contiguous
        numpy arrays, one per spec buffer (the output is updated in place)."""
        from zyntax.tile import _NUMPY

        kernel = self._kernel()

        def shape_of(a: Any) -> Any:
            ok = isinstance(a, np.ndarray) and a.flags.c_contiguous
            return a.shape if ok else None

        self._check(buffers, shape_of)
        # The output's view is the last (the core stores after every load).
        output = len(self.args) - 1
        views: list[Any] = []
        for i, arg in enumerate(self.args):
            a = buffers[arg.buffer]
            want = _NUMPY.get(self.buffers[arg.buffer][1])
            if want is None or a.dtype != np.dtype(want):
                raise ArgumentError(
                    f"buffer {self.buffers[arg.buffer][0]!r}: expected an array of "
                    f"{self.buffers[arg.buffer][1]}, got {a.dtype}"
                )
            v = np.lib.stride_tricks.as_strided(
                a.reshape(-1)[arg.offset :],
                shape=arg.extents,
                strides=[s * a.itemsize for s in arg.strides],
                writeable=i == output,
            )
            # On the interpreter each view is its own buffer: a read of
            # memory another view also uses (an operand read twice, the
            # output in `C += A·B`) reads a copy. The core refuses nests
            # whose iterations depend on each other, so a copy taken before
            # the launch reads what the nest would.
            if i != output and any(np.may_share_memory(v, w) for w in views):
                v = v.copy()
            views.append(v)
        for j in range(output):
            if np.may_share_memory(views[j], views[output]):
                views[j] = views[j].copy()
        for arg, v in zip(self.args, views, strict=True):
            self._check_aligned(arg, v.ctypes.data)
        return kernel.run_interp(*views, grid=self.grid, checks=checks)  # type: ignore[no-any-return]

    def _check_aligned(self, arg: NestViewArg, address: int) -> None:
        """The kernel assumes `arg`'s first element aligned to `arg.align` bytes."""
        if arg.align > 1 and address % arg.align:
            name = self.buffers[arg.buffer][0]
            raise ArgumentError(
                f"buffer {name!r}: the kernel reads it from element {arg.offset} on with "
                f"{arg.align}-byte vector copies, but that address ({address:#x}) is not "
                f"{arg.align}-byte aligned"
            )

    def run_cpu(self, *buffers: Any, mode: str | None = None) -> str:
        """Runs the kernel natively on this CPU (``zyntax.cpu``) over C-contiguous
        numpy arrays, one per spec buffer (the output is updated in place).
        The views read and write the arrays' memory, as on the GPU;
        ``mode="interp"`` is `run_interp`. Returns ``"cpu"`` or ``"interp"``."""
        from zyntax import cpu
        from zyntax.tile import _NUMPY

        if cpu.resolve_mode(mode) == "interp":
            self.run_interp(*buffers)
            return "interp"
        kernel = self._kernel()

        def shape_of(a: Any) -> Any:
            ok = isinstance(a, np.ndarray) and a.flags.c_contiguous
            return a.shape if ok else None

        self._check(buffers, shape_of)
        output = len(self.args) - 1
        views: list[Any] = []
        for i, arg in enumerate(self.args):
            a = buffers[arg.buffer]
            want = _NUMPY.get(self.buffers[arg.buffer][1])
            if want is None or a.dtype != np.dtype(want):
                raise ArgumentError(
                    f"buffer {self.buffers[arg.buffer][0]!r}: expected an array of "
                    f"{self.buffers[arg.buffer][1]}, got {a.dtype}"
                )
            views.append(
                np.lib.stride_tricks.as_strided(
                    a.reshape(-1)[arg.offset :],
                    shape=arg.extents,
                    strides=[s * a.itemsize for s in arg.strides],
                    writeable=i == output,
                )
            )
        return kernel.run_cpu(*views, grid=self.grid, mode=mode)  # type: ignore[no-any-return]

    def launch(self, *buffers: Any, device: int = 0, stream: Any = None) -> None:
        """Launches the kernel on the GPU over contiguous device arrays, one
        per spec buffer: ``zyntax.cuda.DeviceArray``s, objects with
        ``__cuda_array_interface__``, or torch tensors (bf16 included)."""
        self.prepare(*buffers, device=device, stream=stream)()

    def prepare(self, *buffers: Any, device: int = 0, stream: Any = None) -> Callable[[], None]:
        """Checks `buffers` (as :meth:`launch`) once and returns a call that
        launches the kernel over them with the arguments already expanded:
        a repeated launch over the same buffers (a benchmark, a training
        step) pays no per-call Python checks. The call keeps the buffers
        alive; their memory must stay where it is."""
        from zyntax import cuda
        from zyntax.tile import _device_view

        if not isinstance(device, int) or isinstance(device, bool) or device < 0:
            raise ArgumentError(f"argument 'device': expected an int >= 0, got {device!r}")
        kernel = self._kernel()
        self._check(buffers, _device_shape)
        windows = [_window(buffers[a.buffer], a) for a in self.args]
        if device not in kernel._loaded:
            kernel._loaded[device] = cuda.load_hir(kernel.module, device).kernel(kernel.name)
        loaded = kernel._loaded[device]

        for arg, w in zip(self.args, windows, strict=True):
            cai = None if _is_torch(w) else w.__cuda_array_interface__
            self._check_aligned(arg, int(w.data_ptr()) if cai is None else int(cai["data"][0]))

        def address(p: Any, w: Any) -> tuple[Any, Any, Any]:
            if not _is_torch(w):
                return _device_view(p, w)
            # A torch tensor's address as an int (bf16 has no array interface;
            # the launch then skips a DLPack import on every call; `windows`
            # keeps the memory alive). _check saw its shape; its dtype:
            if str(w.dtype) != _TORCH_DTYPES.get(p.dtype):
                raise ArgumentError(
                    f"argument {p.name!r}: the view holds {p.dtype}, got a tensor of {w.dtype}"
                )
            return int(w.data_ptr()), list(w.shape), list(w.stride())

        def tensor_map(m: Any, w: Any, ext: Sequence[int], st: Sequence[int]) -> Any:
            # A warp-specialised kernel's TMA maps, built once over the windows.
            return kernel._device_map(m, w, ext, st, device)

        flat = kernel.expand(windows, address, tensor_map)
        sms = _sm_count(device) if kernel.persistent else 1
        run_grid, extra = kernel.launch_grid(self.grid, sms)
        flat += extra
        grid, block = tuple(run_grid), kernel.block

        def call() -> None:
            loaded.launch(grid, block, *flat, stream=stream)

        call.keep = (buffers, windows)  # type: ignore[attr-defined]
        return call


def _device_shape(a: Any) -> Any:
    """The shape of a contiguous device array or torch tensor, else None."""
    if _is_torch(a):
        return tuple(a.shape) if a.is_cuda and a.is_contiguous() else None
    cai = getattr(a, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        return None
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    item = np.dtype(cai["typestr"]).itemsize
    dense = [item * math.prod(shape[d + 1 :]) for d in range(len(shape))]
    return shape if strides is None or list(strides) == dense else None


#: The torch dtype of each buffer element type.
_TORCH_DTYPES = {
    "f32": "torch.float32",
    "f64": "torch.float64",
    "f16": "torch.float16",
    "bf16": "torch.bfloat16",
}


def _is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch") and hasattr(a, "as_strided")


def _window(base: Any, arg: NestViewArg) -> Any:
    """One view's window of a device buffer: a strided torch view of a torch
    tensor (bf16 has no ``__cuda_array_interface__``), else a
    :class:`_DeviceWindow`."""
    if _is_torch(base):
        return base.as_strided(arg.extents, arg.strides, base.storage_offset() + arg.offset)
    return _DeviceWindow(base, arg)


class _DeviceWindow:
    """A strided window of a device array for one view (its own
    ``__cuda_array_interface__``; it keeps the array alive)."""

    def __init__(self, base: Any, arg: NestViewArg) -> None:
        cai = base.__cuda_array_interface__
        item = np.dtype(cai["typestr"]).itemsize
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": tuple(arg.extents),
            "strides": tuple(s * item for s in arg.strides),
            "typestr": cai["typestr"],
            "data": (int(cai["data"][0]) + arg.offset * item, False),
            "version": 3,
            # The producer's stream, so that the launch waits for its work.
            "stream": cai.get("stream"),
        }


def _spec_buffers(spec: Any) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    return tuple(
        (str(b["name"]), str(b["dtype"]), tuple(int(n) for n in b["shape"]))
        for b in spec["buffers"]
    )


def nest_to_tile(
    spec: dict[str, Any], *, arch: str | None = None, schedule: Any = None, sms: int = 132
) -> NestTile:
    """Recognises and lowers a loop nest to a tile program in the Rust core.

    `spec` is a dict: ``name``; ``loops``, a list of ``{"name", "extent",
    "kind": "parallel" | "reduction"}``; ``buffers``, a list of ``{"name",
    "dtype", "shape"}`` (contiguous row-major; f32, f64, f16, bf16);
    ``output``, ``(buffer, [index, ...])``; ``value`` and an optional
    ``epilogue``, expressions. An index is ``("affine", [(loop, coef), ...],
    constant)`` or ``("opaque", text)``; an expression is ``("load", buffer,
    [index, ...])``, ``("const", x)``, ``("unary", op, e)``, ``("binary", op,
    a, b)`` or ``("reduced",)`` (the sum over the reduction loops, in an
    epilogue only); :func:`load` and :func:`at` write the common indices.
    Loops and buffers are referred to by position. A malformed spec raises
    an ``ArgumentError`` naming the field; a nest the core does not tile
    returns a :class:`NestTile` whose report says why.

    A bf16/f16 contraction on sm_90a whose operands TMA can load (unit
    stride along the contraction's inner dims, 16-byte aligned rows) with
    enough output tiles for `sms` SMs takes the warp-specialised persistent
    pipeline, as ``zyntax.kernels.matmul`` does (`NestTile.pipeline` says
    which pipeline, or why not); the launch builds its tensor maps."""
    from zyntax import _native
    from zyntax.tile import Kernel, Param, TensorMapParam

    r = _native.nest_tile(spec, arch=arch, schedule=schedule, sms=sms)
    if r["refusal"] is not None:
        return NestTile(report=r["report"], refusal=r["refusal"], reason=r["reason"])
    kernel = Kernel(
        module=r["module"],
        name=r["name"],
        schedule=r["schedule"],
        block=tuple(r["block"]),
        shared_bytes=int(r["shared_bytes"]),
        params=tuple(Param(*p) for p in r["params"]),
        tensor_maps=tuple(
            TensorMapParam(v, int(i), int(inner), int(outer), (int(bx[0]), int(bx[1])))
            for v, i, inner, outer, bx in r["tensor_maps"]
        ),
        persistent=bool(r["persistent"]),
    )
    return NestTile(
        report=r["report"],
        kind=r["kind"],
        kernel=kernel,
        grid=tuple(r["grid"]),
        args=tuple(NestViewArg(a[0], a[1], tuple(a[2]), tuple(a[3]), *a[4:]) for a in r["args"]),
        buffers=_spec_buffers(spec),
        pipeline=str(r["pipeline"]),
    )


def _sm_count(device: int) -> int:
    from zyntax.kernels._tensors import sm_count

    return sm_count(device)


def nest_tiling_report(spec: dict[str, Any]) -> str:
    """The core's one-line report for `spec` (see :func:`nest_to_tile`): what
    it recognises the nest as, or why it does not tile it."""
    from zyntax import _native

    return _native.nest_tiling_report(spec)
