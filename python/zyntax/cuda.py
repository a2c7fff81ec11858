"""The CUDA runtime: devices, modules, kernel launches, memory, streams, events, graphs.

Needs only an NVIDIA driver at run time (``libcuda`` is loaded on first use);
on a machine without one, importing works and every call that needs the GPU
raises :class:`zyntax.CudaError` saying why (``err.kind`` is ``"no_driver"``
or ``"no_device"``)::

    import numpy as np
    import zyntax
    from zyntax import cuda

    module = build_saxpy()                       # a zyntax.hir.Module
    mod = cuda.load_hir(module)                  # compile for this GPU, load, keep signatures
    saxpy = mod.kernel("saxpy")
    x, y = cuda.to_device(xh), cuda.to_device(yh)
    saxpy[(n + 255) // 256, 256](n, 2.0, x, y)   # or saxpy.launch(grid, block, *args)
    result = y.to_host()

Kernel arguments: Python ``int``/``float``/``bool``, numpy scalars,
:class:`DeviceArray`, and any object with ``__cuda_array_interface__`` (CuPy,
PyTorch, Numba) or ``__dlpack__`` (JAX, ...). Launches are checked against
the kernel's signature and the device's limits before reaching the driver
(:class:`zyntax.LaunchError`), and are asynchronous; ``to_host`` and the
``synchronize`` methods wait with the GIL released.

Memory safety: the runtime checks types, counts, devices and limits, but
cannot know which indices a kernel touches; arrays must be large enough for
the launch, and arrays used on a non-default stream must stay alive until
that stream is synchronized.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from zyntax import _native, _providers
from zyntax.errors import ArgumentError, CudaError, LaunchError
from zyntax.safeio import read_bounded, read_json
from zyntax.targets import arch_for_capability

__all__ = [
    "Buffer",
    "CudaError",
    "Device",
    "DeviceArray",
    "Event",
    "Graph",
    "GraphExec",
    "Kernel",
    "LaunchError",
    "Launcher",
    "Module",
    "PinnedBuffer",
    "Program",
    "ProgramExec",
    "Stream",
    "TensorMap",
    "advise",
    "arch_for_capability",
    "as_device_array",
    "capture",
    "device_arch",
    "device_count",
    "driver_version",
    "empty",
    "empty_cache",
    "from_cuda_array_interface",
    "from_dlpack",
    "is_available",
    "load_bundle",
    "load_cached",
    "load_hir",
    "load_module",
    "managed_empty",
    "managed_host_view",
    "memory_kind",
    "memory_stats",
    "module_cache_len",
    "pinned_empty",
    "prefetch",
    "register_host",
    "set_memory_limit",
    "synchronize",
    "to_device",
    "zeros",
]

if not hasattr(_native, "CudaDevice"):  # pragma: no cover - builds without the `cuda` feature
    raise ImportError("this build of zyntax has no CUDA runtime (built without the `cuda` feature)")

Device = _native.CudaDevice
Stream = _native.CudaStream
Event = _native.CudaEvent
Module = _native.CudaModule
Kernel = _native.CudaKernel
Launcher = _native.CudaLauncher
Graph = _native.CudaGraph
GraphExec = _native.CudaGraphExec
PinnedBuffer = _native.CudaPinnedBuffer
DeviceArray = _native.DeviceArray
#: A TMA tensor map (``TensorMap.tiled(tensor, box, swizzle=...)``), passed to
#: a kernel's ``hir.tensormap`` parameter; see docs/runtime.md.
TensorMap = _native.CudaTensorMap

is_available = _native.cuda_is_available
device_count = _native.cuda_device_count
driver_version = _native.cuda_driver_version
synchronize = _native.cuda_synchronize
empty = _native.cuda_empty
from_cuda_array_interface = _native.cuda_from_cuda_array_interface
from_dlpack = _native.cuda_from_dlpack
module_cache_len = _native.cuda_module_cache_len
managed_empty = _native.cuda_managed_empty
register_host = _native.cuda_register_host
prefetch = _native.cuda_prefetch
advise = _native.cuda_advise
memory_kind = _native.cuda_memory_kind


def to_device(
    array: Any, device: int = 0, stream: Stream | None = None, sync: bool = True
) -> DeviceArray:
    """Copies a host array (anything ``numpy.asarray`` accepts) to a new DeviceArray.

    With ``sync=False`` the copy is only queued on `stream`: keep `array`
    alive and unchanged until the stream is synchronized.
    """
    host = np.ascontiguousarray(array)
    return _native.cuda_to_device(host, device, stream, sync)


def zeros(
    shape: int | tuple[int, ...],
    dtype: Any = np.float32,
    device: int = 0,
    stream: Stream | None = None,
) -> DeviceArray:
    """A zero-filled DeviceArray (the fill is queued on `stream`)."""
    a = empty(shape, dtype, device, stream)
    a.zero_(stream)
    return a


def as_device_array(obj: Any, device: int = 0) -> DeviceArray:
    """A DeviceArray view of `obj` without copying when it is already on the
    GPU (DeviceArray, ``__cuda_array_interface__``, ``__dlpack__``), else a copy
    of the host array."""
    if isinstance(obj, DeviceArray):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        return from_cuda_array_interface(obj)
    if hasattr(obj, "__dlpack_device__") and obj.__dlpack_device__()[0] in (2, 13):
        return from_dlpack(obj)
    return to_device(obj, device)


def _shape(shape: Any) -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints, numpy ints too) as a tuple of
    non-negative ints, else an ArgumentError naming it."""
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ArgumentError(
                f"argument 'shape': expected non-negative integers, got {d!r} in {shape!r}"
            )
        out.append(int(d))
    return tuple(out)


def pinned_empty(shape: int | tuple[int, ...], dtype: Any = np.float32, device: int = 0) -> Any:
    """A numpy array in page-locked host memory (truly asynchronous copies,
    and copies that may be captured into graphs). Zero-filled."""
    dt = np.dtype(dtype)
    shp = _shape(shape)
    count = 1
    for d in shp:
        count *= d
    buf = PinnedBuffer(count * dt.itemsize, device)
    # numpy keeps `buf` alive as the array's base.
    return np.asarray(buf).view(dt).reshape(shp)


class _HostView:
    """Exports a managed array's memory to numpy (keeps the array alive)."""

    def __init__(self, arr: DeviceArray) -> None:
        self.arr = arr
        self.__array_interface__ = {
            "shape": tuple(arr.shape),
            "typestr": arr.typestr,
            "data": (arr.ptr, False),
            "version": 3,
        }


def managed_host_view(array: DeviceArray) -> Any:
    """A numpy array over a managed array's memory (no copy). Synchronize the
    device work that writes it before reading it on the host, and prefetch
    to ``"host"`` first for speed."""
    if memory_kind(array) != "managed":
        raise CudaError("managed_host_view needs an array from zyntax.cuda.managed_empty")
    return np.asarray(_HostView(array))


def _image_of(image: Any) -> str | bytes:
    if isinstance(image, (str, bytes)):
        return image
    if isinstance(image, os.PathLike):
        with open(image, "rb") as f:
            data = f.read()
        # cubin (ELF) and fatbin images stay bytes; anything else is PTX text.
        if data.startswith(b"\x7fELF") or data.startswith(b"\x50\xed\x55\xba"):
            return data
        return data.decode()
    ptx = getattr(image, "ptx", None)
    if isinstance(ptx, str):
        return ptx
    raise ArgumentError(
        f"argument 'image': cannot load a module from {type(image).__name__}; "
        "pass PTX text, cubin bytes, a path or a compile result"
    )


def _zir_of(hir: Any) -> str | None:
    if hir is None or isinstance(hir, str):
        return hir
    to_zir = getattr(hir, "to_zir", None)
    if to_zir is None:
        raise ArgumentError(
            f"argument 'hir': expected .zir text or a zyntax.hir.Module, got {type(hir).__name__}"
        )
    text: str = to_zir()
    return text


def load_module(
    image: Any,
    device: int = 0,
    *,
    hir: Any = None,
    signatures: dict[str, dict[str, Any]] | None = None,
) -> Module:
    """Loads PTX (``str``), a cubin/fatbin (``bytes``), a path, or a compile
    result with a ``.ptx`` attribute. Pass the module's HIR (a
    ``zyntax.hir.Module`` or ``.zir`` text) as `hir`, or per-kernel
    `signatures` (``{name: {"params": [".zir type", ...], "max_threads":
    [x, y, z], "shared_bytes": n}}``), to check launches against the HIR
    types and launch bounds; otherwise the PTX parameter list is used.
    Loaded modules are cached per process."""
    return Module.load(_image_of(image), device, _zir_of(hir), signatures)


def load_cached(entry: str | os.PathLike[str], device: int = 0) -> Module:
    """Loads a ``ptx_cache`` entry (``<key>.ptx`` with its ``<key>.json``):
    `entry` is the path of either file or of the key without a suffix. The
    JSON's parameter layout and launch bounds become the kernels' signatures.
    Both files are read bounded (:mod:`zyntax.safeio`); a malformed JSON is an
    ArgumentError naming the file and the field."""
    from pathlib import Path

    base = Path(entry)
    if base.suffix in (".ptx", ".json"):
        base = base.with_suffix("")
    meta_path = base.with_suffix(".json")
    meta = read_json(meta_path)
    try:
        ptx = read_bounded(base.with_suffix(".ptx"), _MAX_PTX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise ArgumentError(f"{base.with_suffix('.ptx')}: PTX is not UTF-8 text") from None
    return load_module(ptx, device, signatures=_cached_signatures(meta, meta_path.name))


#: The largest PTX file :func:`load_cached` reads.
_MAX_PTX_BYTES = 256 << 20


def _cached_signatures(meta: Any, where: str) -> dict[str, dict[str, Any]]:
    """The ``launch`` section of a ``ptx_cache`` entry's JSON as signatures
    for :func:`load_module` (which checks the values' ranges), every access
    checked first: a wrong type anywhere is an ArgumentError naming the field."""

    def bad(field: str, got: Any) -> ArgumentError:
        shown = repr(got)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return ArgumentError(f"{where}: {field}: unexpected {shown}")

    if not isinstance(meta, dict):
        raise bad("the metadata", meta)
    launches = meta.get("launch", {})
    if not isinstance(launches, dict):
        raise bad("launch", launches)
    sigs: dict[str, dict[str, Any]] = {}
    for name, launch in launches.items():
        if not isinstance(launch, dict):
            raise bad(f"launch.{name}", launch)
        params = launch.get("params", [])
        if not isinstance(params, list):
            raise bad(f"launch.{name}.params", params)
        for i, p in enumerate(params):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise bad(f"launch.{name}.params[{i}]", p)
        sigs[name] = {
            "params": [p["type"] for p in params],
            "max_threads": launch.get("max_threads"),
            "shared_bytes": launch.get("dynamic_shared_bytes") or 0,
        }
    return sigs


def device_arch(device: int = 0) -> str:
    """The zyntax target for `device`: its own ``sm_XY`` when zyntax supports
    it, else the highest supported arch below it (the driver JIT-compiles the
    PTX forward). A compute capability 9.0 device (H100, H200) gets
    ``sm_90a``, so kernels may use wgmma and setmaxnreg; arch-specific PTX
    runs on that exact capability only, so newer devices get plain ``sm_90``.
    The rule is ``Arch::for_device`` in Rust (:func:`arch_for_capability`)."""
    major, minor = Device(device).compute_capability
    return arch_for_capability(int(major), int(minor))


def load_hir(module: Any, device: int = 0, arch: str | None = None) -> Module:
    """Compiles a ``zyntax.hir.Module`` to PTX for `device` (or `arch`) and
    loads it with its HIR signatures. The PTX comes through the kernel cache,
    as the ``@zyntax.kernel`` front-end's does (docs/runtime.md, "Loading
    HIR"): a module compiled once is not compiled again, in any process."""
    target = arch or device_arch(device)
    ptx = _providers.need(_providers.compile_hir, "compile_hir")(module, target)
    return load_module(ptx, device, hir=module)


@contextlib.contextmanager
def capture(stream: Stream, mode: str = "thread_local") -> Iterator[_Capture]:
    """Captures the zyntax launches and copies queued on `stream` into a graph::

        with cuda.capture(s) as cap:
            k.launch(grid, block, x, y, stream=s)
        g = cap.graph.instantiate()
        g.launch(s)

    Allocate memory before the capture: the pool's allocations are not graph
    nodes. Host copies inside a capture need pinned memory (`pinned_empty`).
    """
    cap = _Capture()
    stream.begin_capture(mode)
    try:
        yield cap
    except BaseException:
        # End the (possibly invalidated) capture so the stream is usable again,
        # and report the body's error rather than the capture's.
        with contextlib.suppress(CudaError):
            stream.end_capture()
        raise
    cap.graph = stream.end_capture()


class _Capture:
    """Holds the graph once the `capture` block has ended."""

    graph: Graph

    def __repr__(self) -> str:
        return f"<capture graph={getattr(self, 'graph', None)!r}>"


def memory_stats(device: int = 0) -> dict[str, Any]:
    """Counters of the device's memory pool (bytes in use, cached, peak, hits, ...)."""
    stats: dict[str, Any] = Device(device).memory_stats()
    return stats


def set_memory_limit(limit: int | None, device: int = 0) -> None:
    """Caps the pool's in-use plus cached bytes on `device` (``None``: no cap)."""
    Device(device).set_memory_limit(limit)


def empty_cache(device: int = 0) -> None:
    """Returns the pool's cached blocks on `device` to the driver."""
    Device(device).empty_cache()


def load_bundle(path: str | os.PathLike[str], device: int = 0) -> Any:
    """Loads an AOT bundle (fatbin or cubin plus its JSON manifest) with only the
    driver: :func:`zyntax.bundle.load_bundle`; see docs/aot.md."""
    return _providers.need(_providers.load_bundle, "load_bundle")(os.fspath(path), device)


# ---------------------------------------------------------------- programs

_ROLES = ("input", "parameter", "output", "temporary")


class Buffer:
    """A named buffer of a :class:`Program` (returned by ``Program.input`` & co.)."""

    __slots__ = ("dtype", "index", "name", "program", "role", "shape")

    def __init__(
        self, program: Program, index: int, name: str, role: str, shape: tuple[int, ...], dtype: Any
    ) -> None:
        self.program = program
        self.index = index
        self.name = name
        self.role = role
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def strides(self) -> tuple[int, ...]:
        """C-contiguous byte strides (the layout a program's buffers have)."""
        out: list[int] = []
        acc = np.dtype(self.dtype).itemsize
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def __repr__(self) -> str:
        return f"<{self.role} {self.name!r} {self.shape} {np.dtype(self.dtype).name}>"


class Program:
    """A sequence of kernel launches over named buffers, run as one unit::

        p = cuda.Program()
        x = p.input("x", (n,), np.float32)
        t = p.temporary("t", (n,), np.float32)
        y = p.output("y", (n,), np.float32)
        p.launch(scale, grid, 256, n, 2.0, x, t, writes=[t])        # zyntax.cuda.Kernel
        p.launch(add_one, grid, 256, t, y, writes=[y])              # or a @zyntax.kernel
        print(p.plan())                   # temporaries' allocations, planned vs naive bytes
        ex = p.prepare({"x": dx, "y": dy}, warmup=2)
        ex.run()                          # eager for the warm-up, then graph replays
        ex.bind("x", dx2)                 # new input: graph nodes updated in place

    Buffer arguments are read unless named in ``writes`` (written only) or
    ``updates`` (read and written). Temporaries are allocated by the executor,
    sharing memory where their lifetimes do not overlap; reading one before
    any launch writes it is an error at ``check()``/``prepare()``. Bindings
    must match each buffer's shape, dtype, device and (C-contiguous) layout.
    """

    def __init__(self, device: int = 0) -> None:
        if isinstance(device, (bool, np.bool_)) or not isinstance(device, (int, np.integer)):
            raise ArgumentError(f"argument 'device': expected an int, got {type(device).__name__}")
        if not 0 <= device < 2**31:
            raise ArgumentError(f"argument 'device': expected an ordinal >= 0, got {device}")
        self.device = int(device)
        self.buffers: list[Buffer] = []
        #: (kernel, grid, block, shared_mem, args) with buffers as (index, access).
        self._steps: list[tuple[Any, Any, Any, int | None, list[Any]]] = []
        self._uses: list[tuple[str, list[tuple[int, str]]]] = []

    # -- buffers
    def _buffer(self, name: str, role: str, shape: int | tuple[int, ...], dtype: Any) -> Buffer:
        if not isinstance(name, str):
            raise ArgumentError(
                f"argument 'name': a {role} buffer's name must be a str, got {type(name).__name__}"
            )
        shp = _shape(shape)
        if any(b.name == name for b in self.buffers):
            raise CudaError(f"the program already has a buffer named {name!r}")
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"argument 'dtype': buffer {name!r}: {e}") from None
        if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
            raise ArgumentError(f"argument 'dtype': buffer {name!r} needs a scalar dtype, got {dt}")
        b = Buffer(self, len(self.buffers), name, role, shp, dt)
        self.buffers.append(b)
        return b

    def input(self, name: str, shape: int | tuple[int, ...], dtype: Any = np.float32) -> Buffer:
        return self._buffer(name, "input", shape, dtype)

    def parameter(self, name: str, shape: int | tuple[int, ...], dtype: Any = np.float32) -> Buffer:
        return self._buffer(name, "parameter", shape, dtype)

    def output(self, name: str, shape: int | tuple[int, ...], dtype: Any = np.float32) -> Buffer:
        return self._buffer(name, "output", shape, dtype)

    def temporary(self, name: str, shape: int | tuple[int, ...], dtype: Any = np.float32) -> Buffer:
        return self._buffer(name, "temporary", shape, dtype)

    # -- launches
    def launch(
        self,
        kernel: Any,
        grid: Any,
        block: Any,
        *args: Any,
        writes: Any = (),
        updates: Any = (),
        shared_mem: int | None = None,
    ) -> None:
        """Records one launch of a ``zyntax.cuda.Kernel`` or a ``@zyntax.kernel``
        function; program buffers among `args` stand for the bound tensors.
        `writes` and `updates` are buffers (one or a list) among `args`."""
        written = {b.index for b in self._buffer_list(writes, "writes", args)}
        updated = {b.index for b in self._buffer_list(updates, "updates", args)}
        both = written & updated
        if both:
            raise ArgumentError(
                f"argument 'updates': buffer {self.buffers[min(both)].name!r} is also in "
                "'writes' (writes: written only; updates: read and written)"
            )
        if shared_mem is not None and (
            isinstance(shared_mem, (bool, np.bool_))
            or not isinstance(shared_mem, (int, np.integer))
            or not 0 <= shared_mem < 2**32
        ):
            raise ArgumentError(
                f"argument 'shared_mem': expected None or an integer in [0, 2**32), "
                f"got {shared_mem!r}"
            )

        def access(b: Buffer) -> str:
            if b.index in updated:
                return "readwrite"
            return "write" if b.index in written else "read"

        native, flat = self._resolve(kernel, args)
        out: list[Any] = []
        uses: list[tuple[int, str]] = []
        for a in flat:
            if isinstance(a, Buffer):
                ref = (self._own(a).index, access(a))
                out.append(ref)
                uses.append(ref)
            elif isinstance(a, np.generic):
                out.append(a.item())
            else:
                out.append(a)
        self._steps.append((native, grid, block, shared_mem, out))
        self._uses.append((native.name, uses))

    def _own(self, b: Any) -> Buffer:
        if not isinstance(b, Buffer) or b.program is not self:
            raise CudaError(f"{b!r} is not a buffer of this program")
        return b

    def _buffer_list(self, value: Any, what: str, args: tuple[Any, ...]) -> list[Buffer]:
        """`writes`/`updates`: a Buffer or an iterable of Buffers of this
        program, each among the launch's `args` (a name or an array there is
        an ArgumentError naming the argument)."""
        if isinstance(value, Buffer):
            value = [value]
        if isinstance(value, (str, bytes, np.ndarray)) or not isinstance(value, Iterable):
            raise ArgumentError(
                f"argument '{what}': expected program buffers (a Buffer or a list of them), "
                f"got {type(value).__name__}"
            )
        out = []
        for b in value:
            if not isinstance(b, Buffer):
                raise ArgumentError(
                    f"argument '{what}': expected program buffers, got a {type(b).__name__} "
                    "in it (pass the Buffer that Program.input/output/... returned)"
                )
            self._own(b)
            if not any(a is b for a in args):
                raise ArgumentError(
                    f"argument '{what}': buffer {b.name!r} is not an argument of this launch"
                )
            out.append(b)
        return out

    def _resolve(self, kernel: Any, args: tuple[Any, ...]) -> tuple[Any, list[Any]]:
        """The loaded kernel and its flat argument list. A front-end's kernel
        (``@zyntax.kernel``) resolves itself: its ``_program_launch(device,
        args)`` specialises it for the buffers (program buffers among `args`
        stand for C-contiguous arrays of their shape and dtype) and returns
        the same pair, so the runtime needs no front-end import."""
        if isinstance(kernel, Kernel):
            return kernel, list(args)
        resolve = getattr(kernel, "_program_launch", None)
        if resolve is None:
            raise ArgumentError(
                f"argument 'kernel': Program.launch takes a zyntax.cuda.Kernel or a "
                f"@zyntax.kernel, not {type(kernel).__name__}"
            )
        native, flat = resolve(self.device, args)
        return native, list(flat)

    # -- analysis (no GPU needed)
    def _decls(self) -> list[tuple[str, str, Any, list[int]]]:
        return [(b.name, b.role, b.dtype, list(b.shape)) for b in self.buffers]

    def plan(self) -> dict[str, Any]:
        """The temporaries' memory plan: ``slot_bytes`` (one entry per
        allocation), ``assignment`` (temporary → allocation), ``planned_bytes``
        and ``naive_bytes`` (one allocation per temporary)."""
        plan: dict[str, Any] = _native.cuda_program_plan(self._decls(), self._uses)
        return plan

    def check(self) -> None:
        """Raises :class:`CudaError` if a launch reads a temporary before any launch writes it."""
        _native.cuda_program_check(self._decls(), self._uses)

    def prepare(
        self,
        bindings: dict[str, Any],
        warmup: int | None = 2,
        stream: Stream | None = None,
    ) -> ProgramExec:
        """Checks the program, validates one binding per input, parameter and
        output (shape, dtype, device, layout; errors name the binding),
        allocates the planned temporaries and returns the executor. After
        `warmup` eager runs the program is captured into a CUDA graph
        (``None``: never). The executor keeps every bound tensor alive."""
        self._check_bindings(bindings)
        self.check()
        arrays: list[tuple[str, DeviceArray]] = []
        for name, obj in bindings.items():
            if isinstance(obj, np.ndarray):
                raise _binding_error(
                    name,
                    "is a host array; device memory is needed (copy it with zyntax.cuda.to_device)",
                )
            arrays.append((name, as_device_array(obj, self.device)))
        native = _native.CudaProgram(self.device, self._decls(), self._steps)
        return native.prepare(arrays, warmup, stream)

    def _check_bindings(self, bindings: Any) -> None:
        """`bindings` before any device work: a mapping from the names (str)
        of this program's inputs, parameters and outputs to device arrays.
        A bad name or value is the executor's own `CudaError` (``kind ==
        "binding"``, naming the binding), raised here without a device."""
        if not isinstance(bindings, Mapping):
            raise ArgumentError(
                f"argument 'bindings': expected a dict of buffer name -> array, "
                f"got {type(bindings).__name__}"
            )
        roles = {b.name: b.role for b in self.buffers}
        for name, obj in bindings.items():
            if not isinstance(name, str):
                raise ArgumentError(
                    f"argument 'bindings': keys are buffer names (str), got {type(name).__name__}"
                )
            if name not in roles:
                bindable = ", ".join(n for n, r in roles.items() if r != "temporary")
                raise _binding_error(name, f"the program has no such buffer (bindable: {bindable})")
            if roles[name] == "temporary":
                raise _binding_error(name, "is a temporary: the executor allocates it")
            if obj is None or isinstance(obj, (str, bytes, int, float, Buffer)):
                raise _binding_error(name, f"is a {type(obj).__name__}, not a device array")

    def __repr__(self) -> str:
        return f"<Program: {len(self.buffers)} buffers, {len(self._steps)} launches>"


ProgramExec = _native.CudaProgramExec


def _binding_error(name: str, message: str) -> CudaError:
    """A binding refused before the device, as the executor refuses it (``kind == "binding"``)."""
    err = CudaError(f"binding '{name}': {message}")
    setattr(err, "kind", "binding")  # noqa: B010 - set like the native errors
    return err
