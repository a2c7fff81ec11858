"""Run HIR on the CPU with the reference interpreter (exact GPU semantics).

``launch(module, "saxpy", grid, block, n, a, x, y)`` (or ``launch(module, grid,
block, ...)`` for a module's only kernel, or ``launch(kern, grid, block, ...)``
for a ``@zyntax.kernel``) runs a kernel over a grid;
numpy arrays passed for pointer parameters are read and written in place.
``call(module, "dot", x, y, n)`` runs a host or device function as one thread
and returns its result(s). Program faults (out-of-bounds access, shared-memory
data races, divergent barriers, ...) raise `TrapError` naming the instruction,
thread and block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zyntax import _native
from zyntax.errors import ArgumentError, LaunchError, ZyntaxError
from zyntax.hir import Module, Type, check_text

__all__ = ["Dim3", "TensorMap", "call", "launch"]

Dim3 = int | Sequence[int]

_NUMPY_OF = {
    "bool": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
}


class TensorMap:
    """A TMA tensor map for the interpreter (issue 13): a host description of
    `array` (a C-contiguous numpy array) and the box a TMA instruction moves,
    passed where a kernel takes a ``hir.tensormap`` parameter. The interpreter
    reads and writes `array` in place, as for a pointer argument.

    Dimensions, `box` and `element_strides` are innermost first (the array's
    last axis is dimension 0), as in PTX and ``zyntax.cuda.TensorMap.tiled``,
    whose checks (every field, named in an `ArgumentError`) it shares."""

    __slots__ = (
        "array",
        "box",
        "dims",
        "dtype",
        "element_strides",
        "oob_fill",
        "strides",
        "swizzle",
    )

    def __init__(
        self,
        array: np.ndarray[Any, Any],
        box: Sequence[int],
        *,
        swizzle: str = "none",
        element_strides: Sequence[int] | None = None,
        interleave: str = "none",
        oob_fill: str = "zero",
        l2_promotion: str = "none",
        dtype: str | None = None,
    ) -> None:
        if interleave != "none":
            raise ArgumentError(
                f"TensorMap argument 'interleave': the interpreter models interleave='none' "
                f"only, got {interleave!r}"
            )
        if l2_promotion not in ("none", "64B", "128B", "256B"):
            raise ArgumentError(
                f"TensorMap argument 'l2_promotion': unknown value {l2_promotion!r} "
                "(expected one of 'none', '64B', '128B', '256B')"
            )
        if not isinstance(array, np.ndarray):
            raise ArgumentError(
                f"TensorMap argument 'array': expected a numpy array, got {type(array).__name__}"
            )
        if not array.flags.c_contiguous:
            raise ArgumentError(
                "TensorMap argument 'array': the interpreter needs a C-contiguous array "
                "(copy it with numpy.ascontiguousarray)"
            )
        if dtype is None:
            names = {v: k for k, v in _NUMPY_OF.items()}
            dtype = names.get(array.dtype.name)
            if dtype is None:
                raise ArgumentError(
                    f"TensorMap dtype: the array's dtype {array.dtype} has no zyntax element "
                    "type (pass dtype=, e.g. dtype='bf16' for 2-byte bfloat16 data)"
                )
        size = {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2}.get(
            dtype, 8 if dtype[-2:] == "64" else 4
        )
        if size != array.itemsize:
            raise ArgumentError(
                f"TensorMap argument 'dtype': {dtype} is {size} bytes, "
                f"the array's elements {array.itemsize}"
            )
        self.array = array
        self.dtype = dtype
        self.dims = tuple(int(d) for d in reversed(array.shape))
        self.strides = tuple(int(s) for s in reversed(array.strides))[1:]
        self.box = tuple(int(b) for b in box)
        self.element_strides = tuple(
            int(e) for e in (element_strides if element_strides is not None else [1] * array.ndim)
        )
        self.swizzle = swizzle
        self.oob_fill = oob_fill
        _native_fn("interp_tensor_map_check")(self._desc(0), 0)

    @classmethod
    def tiled(
        cls,
        array: np.ndarray[Any, Any],
        box: Sequence[int],
        *,
        swizzle: str = "none",
        element_strides: Sequence[int] | None = None,
        interleave: str = "none",
        oob_fill: str = "zero",
        l2_promotion: str = "none",
        dtype: str | None = None,
    ) -> TensorMap:
        """The same as the constructor; spelled as ``zyntax.cuda.TensorMap.tiled``
        (`l2_promotion` only changes speed: accepted and ignored)."""
        return cls(
            array,
            box,
            swizzle=swizzle,
            element_strides=element_strides,
            interleave=interleave,
            oob_fill=oob_fill,
            l2_promotion=l2_promotion,
            dtype=dtype,
        )

    @property
    def box_bytes(self) -> int:
        """Bytes one box moves (what a load completes on its mbarrier)."""
        n = self.array.itemsize
        for b, e in zip(self.box, self.element_strides, strict=True):
            n *= -(-b // e)
        return n

    @property
    def shared_bytes(self) -> int:
        """Bytes one box spans in shared memory: `box_bytes` plus the padding
        of rows narrower than the swizzle span (each row takes a whole span)."""
        row = self.box[0] * self.array.itemsize
        span = {"none": 0, "32B": 32, "64B": 64, "128B": 128}.get(self.swizzle, 0)
        return self.box_bytes // row * max(row, span)

    def _desc(self, buffer: int) -> tuple[Any, ...]:
        return (
            buffer,
            self.dtype,
            self.dims,
            self.strides,
            self.box,
            self.element_strides,
            self.swizzle,
            self.oob_fill,
        )


def _native_fn(name: str) -> Any:
    fn = getattr(_native, name, None)
    if fn is None:
        raise ZyntaxError("this build of zyntax has no interpreter (built without `interp`)")
    return fn


def _scalar_of(t: Type) -> str | None:
    """numpy dtype name of a pointer's element (through vectors and arrays)."""
    while t.kind in ("vector", "array") and t.elem is not None:
        t = t.elem
    return _NUMPY_OF.get(str(t))


class _Marshal:
    """Maps Python arguments to interpreter arguments and byte buffers."""

    def __init__(self, fname: str, params: Sequence[Type]) -> None:
        self.fname = fname
        self.params = params
        self.buffers: list[bytes] = []
        #: (array, index of the first argument that passed it)
        self.arrays: list[tuple[np.ndarray[Any, Any], int]] = []
        self.index_of: dict[int, int] = {}
        #: Tensor maps (issue 13), as the native launch takes them.
        self.tensor_maps: list[tuple[Any, ...]] = []

    def buffer(self, a: np.ndarray[Any, Any], k: int) -> int:
        """The buffer index of array `a` (added on first use)."""
        if id(a) not in self.index_of:
            self.index_of[id(a)] = len(self.buffers)
            self.buffers.append(np.ascontiguousarray(a).tobytes())
            self.arrays.append((a, k))
        return self.index_of[id(a)]

    def arg(self, k: int, a: Any) -> Any:
        ty = self.params[k]
        if isinstance(a, TensorMap) or ty.kind == "tensormap":
            if not isinstance(a, TensorMap) or ty.kind != "tensormap":
                raise ArgumentError(
                    f"@{self.fname} argument {k} is {ty}; got {type(a).__name__} "
                    "(a hir.tensormap parameter takes a zyntax.interp.TensorMap)"
                )
            self.tensor_maps.append(a._desc(self.buffer(a.array, k)))
            return ("tensormap", len(self.tensor_maps) - 1)
        if isinstance(a, np.ndarray):
            if not ty.is_ptr:
                raise ArgumentError(f"@{self.fname} argument {k} is {ty}; got a numpy array")
            assert ty.elem is not None
            want = _scalar_of(ty.elem)
            if want is not None and a.dtype != np.dtype(want):
                raise ArgumentError(
                    f"@{self.fname} argument {k} points to {ty.elem}; "
                    f"got an array of {a.dtype} (expected {want})"
                )
            return ("buffer", self.buffer(a, k))
        if isinstance(a, np.generic):
            return a.item()
        return a

    def write_back(self, buffers: Sequence[bytes]) -> None:
        """Copies changed buffers into their arrays. A read-only array that was
        only read is fine; one the program wrote to is an `ArgumentError`."""
        for (arr, k), before, data in zip(self.arrays, self.buffers, buffers, strict=True):
            if data == before:
                continue
            if not arr.flags.writeable:
                raise ArgumentError(
                    f"@{self.fname} argument {k}: the array is read-only, but the program "
                    "wrote to it (pass a writeable copy, e.g. numpy.array(a))"
                )
            arr[...] = np.frombuffer(data, dtype=arr.dtype).reshape(arr.shape)


def _marshal(module: Module, name: str, args: Sequence[Any]) -> tuple[_Marshal, list[Any]]:
    if not isinstance(module, Module):
        raise ArgumentError(f"expected a zyntax.hir.Module, got {type(module).__name__}")
    params, _ = module.signature(check_text(name, "name"))
    if len(args) != len(params):
        raise LaunchError(f"@{name} takes {len(params)} arguments, got {len(args)}")
    m = _Marshal(name, params)
    return m, [m.arg(k, a) for k, a in enumerate(args)]


def launch(
    target: Any,
    *args: Any,
    shared_bytes: int = 0,
    checks: bool = True,
    fuel: int | None = None,
    cluster: int | Sequence[int] | None = None,
    globals: dict[str, np.ndarray[Any, Any]] | None = None,
) -> dict[str, int] | None:
    """Runs a kernel over a grid on the interpreter.

    Accepted forms::

        launch(module, "saxpy", grid, block, *args)  # a kernel of a module, by name
        launch(module, grid, block, *args)           # the module's only kernel
        launch(kern, grid, block, *args)             # a @zyntax.kernel function

    numpy arrays are passed by pointer and updated in place; numbers pass by
    value. Returns the run's statistics (thread-instructions, warp steps) for
    HIR modules; ``None`` for ``@zyntax.kernel`` functions, which specialise on
    the arguments first (see ``Kernel.run_cpu``).

    ``cluster`` is the number of blocks per cluster (an int or up to 3 ints;
    default: the kernel's declared ``cluster``, else none): the grid must be
    a whole number of clusters. Blocks of a cluster (with ``grid_sync``, of
    the whole grid) run co-scheduled.

    ``globals`` maps names of module globals (``Module.global_var``) to numpy
    arrays of exactly their size: each is written into its global before the
    run and updated in place from it afterwards. Globals not named start from
    their initializers.
    """
    if not isinstance(target, Module):
        run_cpu = getattr(target, "run_cpu", None)
        if run_cpu is None:
            raise ArgumentError(
                "interp.launch takes a zyntax.hir.Module or a @zyntax.kernel function, "
                f"got {type(target).__name__}"
            )
        if len(args) < 2:
            raise LaunchError("interp.launch(kernel, grid, block, *args) needs grid and block")
        # This module is the interpreter: a @zyntax.kernel runs there too (run_cpu's
        # default is native code).
        run_cpu(*args[2:], grid=args[0], block=args[1], shared_mem=shared_bytes, mode="interp")
        return None
    if args and isinstance(args[0], str):
        kernel, rest = args[0], args[1:]
    else:
        kernels = target.kernels
        if len(kernels) != 1:
            raise LaunchError(
                f"module {target.name!r} has {len(kernels)} kernels ({', '.join(kernels)}); "
                "name the one to launch: launch(module, name, grid, block, *args)"
            )
        kernel, rest = kernels[0], args
    if len(rest) < 2:
        raise LaunchError(f"launching @{kernel} needs a grid and a block size")
    grid, block, kargs = rest[0], rest[1], rest[2:]
    marshal, conv = _marshal(target, kernel, kargs)
    gl = _globals_in(globals)
    try:
        bufs, stats = _native_fn("interp_launch")(
            target,
            kernel,
            grid,
            block,
            conv,
            marshal.buffers,
            shared_bytes=shared_bytes,
            checks=checks,
            fuel=fuel,
            tensor_maps=marshal.tensor_maps,
            cluster=cluster,
            globals=gl,
        )
    except ZyntaxError as e:
        if hasattr(e, "buffers"):
            marshal.write_back(e.buffers)
        raise
    marshal.write_back(bufs)
    after = stats.pop("globals", {})
    for name, a in (globals or {}).items():
        a[...] = np.frombuffer(after[name], dtype=a.dtype).reshape(a.shape)
    result: dict[str, int] = stats
    return result


def _globals_in(globals: dict[str, np.ndarray[Any, Any]] | None) -> list[tuple[str, bytes]] | None:
    if globals is None:
        return None
    if not isinstance(globals, dict):
        raise ArgumentError(
            f"globals: expected a dict of name -> numpy array, got {type(globals).__name__}"
        )
    out = []
    for name, a in globals.items():
        if not isinstance(name, str) or not isinstance(a, np.ndarray):
            raise ArgumentError(
                "globals: expected str -> numpy array, "
                f"got {type(name).__name__} -> {type(a).__name__}"
            )
        out.append((name, np.ascontiguousarray(a).tobytes()))
    return out


def call(
    module: Module,
    function: str,
    *args: Any,
    checks: bool = True,
    fuel: int | None = None,
) -> Any:
    """Runs host or device function `function` as one thread and returns
    ``None``, its single result, or a tuple of results."""
    marshal, conv = _marshal(module, function, args)
    results, bufs = _native_fn("interp_call")(
        module, function, conv, marshal.buffers, checks=checks, fuel=fuel
    )
    marshal.write_back(bufs)
    if not results:
        return None
    if len(results) == 1:
        return results[0]
    return tuple(results)
