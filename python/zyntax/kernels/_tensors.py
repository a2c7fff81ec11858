"""Arguments of the ``zyntax.kernels`` functions: GPU tensors of any library
(DeviceArray, ``__cuda_array_interface__``, DLPack) or numpy arrays, checked
and normalised once, with errors that name the argument.

numpy arrays run on the reference interpreter (small inputs: tests and
checks); GPU tensors run on their device. Outputs are allocated like the
first input: a torch tensor for torch, a CuPy array for CuPy, a DeviceArray
otherwise, a numpy array for numpy.

Every argument is checked here before anything is copied, allocated or
launched (docs/kernels.md, "Arguments"): arrays by :func:`tensor` (their size
before a numpy array is copied), scalars by :func:`real`, names by
:func:`choice`, flags by :func:`flag`, streams by :func:`stream_arg`; each
refusal is an ArgumentError naming the argument.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax import cpu, cuda, hir
from zyntax.errors import ArgumentError
from zyntax.kernels import _plans
from zyntax.kernels._dtypes import DTYPES
from zyntax.kernels._plans import planned as planned  # entry functions use T.planned
from zyntax.kernels._plans import recording as recording

_ROW_DTYPES = ("f32", "f16", "bf16", "i32", "i64")
#: typestr (``__cuda_array_interface__`` / numpy ``dtype.str``) -> zyntax scalar name.
_TYPESTR = {DTYPES[n].typestr: n for n in _ROW_DTYPES}
#: zyntax scalar name -> HIR type.
HIR_TYPE = {n: getattr(hir, n) for n in _ROW_DTYPES}
ITEMSIZE = {n: DTYPES[n].itemsize for n in (*_ROW_DTYPES, "e4m3")}  # e4m3: tile GEMM maps
#: The largest finite f32: scalars reach the kernels as f32.
F32_MAX = float(np.finfo(np.float32).max)
#: Elements of one numpy argument (numpy runs on the interpreter: small
#: checks), checked before the array is copied or an output like it allocated.
MAX_HOST_ELEMENTS = 2**31 - 1


def show(x: Any) -> str:
    """`x` for a message, at most 40 characters (10**400 has 401 digits)."""
    try:
        r = repr(x)
    except Exception:
        r = f"<{type(x).__name__}>"
    return r if len(r) <= 40 else r[:37] + "..."


def real(x: Any, name: str, *, low: float | None = None, high: float = F32_MAX) -> float:
    """`x` as a float a kernel takes as f32: a real number (a Python or numpy
    int or float; not a bool, a complex number, an array or a string), finite,
    of magnitude at most `high` (the f32 maximum), at least `low` when given."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise ArgumentError(
            f"argument '{name}': expected a real number, got {type(x).__name__} {show(x)}"
        )
    try:
        v = float(x)
    except (OverflowError, ValueError, TypeError):
        raise ArgumentError(f"argument '{name}': {show(x)} does not fit in a float") from None
    if not math.isfinite(v) or abs(v) > high:
        raise ArgumentError(
            f"argument '{name}': {show(x)} is not a finite number of magnitude at most {high:.4g}"
        )
    if low is not None and not v >= low:
        raise ArgumentError(f"argument '{name}': {show(x)} is below {low}")
    return v


def choice(x: Any, name: str, allowed: Sequence[str | None], what: str = "value") -> Any:
    """`x` if it is one of `allowed` (strings, or None): anything else, an
    array or a list included, is an ArgumentError."""
    if (x is not None and not isinstance(x, str)) or x not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise ArgumentError(
            f"argument '{name}': unknown {what} {show(x)} (expected one of {shown})"
        )
    return x


def flag(x: Any, name: str) -> bool:
    """`x` as a bool: only True and False (numpy's too)."""
    if not isinstance(x, (bool, np.bool_)):
        raise ArgumentError(f"argument '{name}': expected True or False, got {show(x)}")
    return bool(x)


def stream_arg(stream: Any) -> Any:
    """`stream` if it is None or a zyntax.cuda.Stream."""
    if stream is not None and not isinstance(stream, cuda.Stream):
        raise ArgumentError(
            f"argument 'stream': expected a zyntax.cuda.Stream, got {type(stream).__name__}"
        )
    return stream


def host_size(obj: np.ndarray, name: str) -> None:
    """Refuses a numpy argument too large for the interpreter, before it is
    copied (a broadcast view's logical size may exceed any memory)."""
    if obj.size > MAX_HOST_ELEMENTS:
        raise ArgumentError(
            f"argument '{name}': shape {obj.shape} has {obj.size} elements; numpy arrays run "
            f"on the interpreter, at most 2**31 - 1"
        )


@dataclass
class Tensor:
    """One checked argument."""

    name: str
    obj: Any  # what the caller passed
    arr: Any  # a DeviceArray (GPU) or a C-contiguous numpy array (interpreter)
    on_gpu: bool
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    device: int

    @property
    def ptr(self) -> int:
        """Device address of element 0 (0 on the interpreter, whose buffers are aligned)."""
        if not self.on_gpu:
            return 0
        return self.arr if isinstance(self.arr, int) else int(self.arr.ptr)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def _dtype_name(typestr: str, np_name: str | None, name: str) -> str:
    if np_name == "bfloat16":
        return "bf16"
    d = _TYPESTR.get(typestr)
    if d is None:
        raise ArgumentError(
            f"argument '{name}': unsupported dtype {np_name or typestr} "
            "(expected float32, float16, bfloat16, int32 or int64)"
        )
    return d


def _device_view(obj: Any, name: str) -> Any:
    """A DeviceArray view of a GPU tensor, or None when `obj` is not one."""
    if isinstance(obj, cuda.DeviceArray):
        return obj
    if isinstance(obj, np.ndarray):
        return None
    try:
        # torch raises TypeError here for bfloat16; DLPack covers that case.
        cai = obj.__cuda_array_interface__
    except (AttributeError, TypeError):
        cai = None
    if cai is not None:
        return cuda.from_cuda_array_interface(obj)
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        kind = dev()[0]
        if kind in (2, 13):  # kDLCUDA, kDLCUDAManaged
            return cuda.from_dlpack(obj)
        raise ArgumentError(
            f"argument '{name}': a tensor on DLPack device type {kind} (host memory?); "
            "pass a GPU tensor, or a numpy array for the interpreter"
        )
    return None


_TORCH_DTYPES: dict[Any, str] = {}


def _torch_tensor(obj: Any, name: str) -> Tensor | None:
    """PyTorch tensors without an exchange protocol: their raw device address
    (an unchecked pointer argument of the launch) and metadata are read
    directly, which costs far less than building a DeviceArray view per call
    (memory-bound kernels of ~100 µs notice tens of µs of host time)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return None
    if not _TORCH_DTYPES:
        _TORCH_DTYPES.update({getattr(torch, DTYPES[n].torch): n for n in _ROW_DTYPES})
    if not obj.is_cuda:
        raise ArgumentError(
            f"argument '{name}': a CPU tensor; pass a GPU tensor, or a numpy array for the "
            "interpreter"
        )
    dtype = _TORCH_DTYPES.get(obj.dtype)
    if dtype is None:
        raise ArgumentError(
            f"argument '{name}': unsupported dtype {obj.dtype} "
            "(expected float32, float16, bfloat16, int32 or int64)"
        )
    shape = tuple(obj.shape)
    return Tensor(name, obj, obj.data_ptr(), True, dtype, shape, obj.stride(), obj.device.index)


def tensor(obj: Any, name: str) -> Tensor:
    """Checks and views one array argument (noted by a call's recording:
    ``_plans``)."""
    t = _tensor(obj, name)
    rec = _plans.recording()
    if rec is not None:
        rec.tensor(t)
    return t


def _tensor(obj: Any, name: str) -> Tensor:
    fast = _torch_tensor(obj, name)
    if fast is not None:
        return fast
    view = _device_view(obj, name)
    if view is not None:
        dtype = _dtype_name(view.typestr, None, name)
        item = view.itemsize
        strides = tuple(int(s) // item for s in view.strides)
        return Tensor(name, obj, view, True, dtype, tuple(view.shape), strides, view.device)
    if isinstance(obj, np.ndarray):
        dtype = _dtype_name(obj.dtype.str, obj.dtype.name, name)
        host_size(obj, name)
        arr = obj if obj.flags.c_contiguous else np.ascontiguousarray(obj)
        strides = tuple(s // arr.itemsize for s in arr.strides)
        return Tensor(name, obj, arr, False, dtype, tuple(arr.shape), strides, -1)
    raise ArgumentError(
        f"argument '{name}': expected a GPU tensor (DeviceArray, __cuda_array_interface__ or "
        f"DLPack) or a numpy array, got {type(obj).__name__}"
    )


def same_place(first: Tensor, *others: Tensor) -> None:
    """All tensors on the GPU device of the first, or all numpy."""
    for t in others:
        if t.on_gpu != first.on_gpu:
            where = "on the GPU" if first.on_gpu else "a numpy array"
            raise ArgumentError(
                f"argument '{t.name}' must be {where} like '{first.name}' (mixed host and device)"
            )
        if t.device != first.device:
            raise ArgumentError(
                f"argument '{t.name}' is on device {t.device}, '{first.name}' on device "
                f"{first.device}"
            )


def want_dtype(t: Tensor, allowed: Sequence[str]) -> None:
    if t.dtype not in allowed:
        raise ArgumentError(
            f"argument '{t.name}': dtype {t.dtype} is not supported (expected one of "
            f"{', '.join(allowed)})"
        )


def want_shape(t: Tensor, shape: tuple[int, ...], what: str) -> None:
    if t.shape != shape:
        raise ArgumentError(f"argument '{t.name}': shape {t.shape}, expected {shape} ({what})")


def _np_dtype(dtype: str) -> Any:
    if dtype == "bf16":
        import ml_dtypes  # type: ignore[import-not-found, unused-ignore]

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64}[dtype])


def fixed(obj: Any, ptr: int, name: str, dtype: str, shape: tuple[int, ...], device: int) -> Tensor:
    """A C-order GPU Tensor of `shape` at `ptr` in memory the caller keeps
    for the program's life (`obj`: a workspace), which a call's recording
    passes to its plan as a constant address."""
    strides: list[int] = []
    acc = 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    t = Tensor(name, obj, ptr, True, dtype, shape, tuple(strides), device)
    rec = _plans.recording()
    if rec is not None:
        rec.fixed_tensor(t)
    return t


def empty_like(like: Tensor, shape: tuple[int, ...], dtype: str, keep_order: bool = False) -> Any:
    """A new output allocated like `like` (same library and device); a
    call's recording (``_plans``) notes how to allocate another. With
    `keep_order`, an output of a torch `like`'s shape and dtype is laid out
    in `like`'s memory order (``torch.empty_like``: a permuted view gives a
    dense output in the same permutation, as SDPA's output), not C order."""
    ordered = _ordered(like, shape, dtype) if keep_order else None
    rec = _plans.recording()
    if rec is None or not like.on_gpu:
        return _empty_like(like, shape, dtype) if ordered is None else ordered(like.obj)[0]
    again = ordered or _allocator(like, shape, dtype)
    if again is None:
        obj = _empty_like(like, shape, dtype)
        rec.alloc(obj, None, like)
        return obj
    obj, _ = again(like.obj)
    rec.alloc(obj, again, like)
    return obj


def _ordered(like: Tensor, shape: tuple[int, ...], dtype: str) -> Any:
    """`empty_like`'s allocator of an output in `like`'s memory order, or
    None (not a torch GPU tensor, or another shape or dtype: C order). No
    ``torch_alloc``: a plan must not replay it as ``new_empty`` (C order,
    other strides than the ones its launches were recorded with)."""
    lib = type(like.obj).__module__.split(".")[0]
    if lib != "torch" or not like.on_gpu or tuple(shape) != like.shape or dtype != like.dtype:
        return None
    import torch  # type: ignore[import-not-found, unused-ignore]

    def ordered(obj: Any) -> tuple[Any, int]:
        o = torch.empty_like(obj)
        return o, o.data_ptr()

    ordered.torch_like = True  # type: ignore[attr-defined]
    return ordered


def _allocator(like: Tensor, shape: tuple[int, ...], dtype: str) -> Any:
    """(the call's object in `like`'s place) -> (a new GPU output like it,
    its address), for torch tensors and DeviceArrays (None for other
    libraries). A torch output is ``like.new_empty(shape)``: contiguous, on
    `like`'s device, and cheaper than ``torch.empty(shape, dtype=, device=)``
    (no device argument to parse)."""
    lib = type(like.obj).__module__.split(".")[0]
    if lib == "torch":
        import torch  # type: ignore[import-not-found, unused-ignore]

        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        if like.obj.dtype is tdt:

            def same_dtype(obj: Any) -> tuple[Any, int]:
                o = obj.new_empty(shape)
                return o, o.data_ptr()

            # What a native plan replays (``_plans._Plan.insert_into``):
            # torch.empty_like when that is the same allocation (the shape of
            # a C-contiguous `like`: ~0.8 us cheaper than new_empty on an H200).
            same_dtype.torch_alloc = (tuple(shape), None)  # type: ignore[attr-defined]
            # Or torch.empty_strided prepared once (_plans: the "args" kind).
            strided = (tuple(shape), _c_strides(tuple(shape)), tdt, like.obj.device)
            same_dtype.torch_strided = strided  # type: ignore[attr-defined]
            dense = like.strides == _c_strides(like.shape)
            same_dtype.torch_like = dense and tuple(shape) == like.shape  # type: ignore[attr-defined]
            return same_dtype

        def torch_tensor(obj: Any) -> tuple[Any, int]:
            o = obj.new_empty(shape, dtype=tdt)
            return o, o.data_ptr()

        torch_tensor.torch_alloc = (tuple(shape), tdt)  # type: ignore[attr-defined]
        strided = (tuple(shape), _c_strides(tuple(shape)), tdt, like.obj.device)
        torch_tensor.torch_strided = strided  # type: ignore[attr-defined]
        return torch_tensor
    if isinstance(like.obj, cuda.DeviceArray) or lib == "zyntax":
        np_dtype = "bfloat16" if dtype == "bf16" else _np_dtype(dtype)
        device = like.device

        def device_array(_obj: Any) -> tuple[Any, int]:
            o = cuda.empty(shape, np_dtype, device)
            return o, int(o.ptr)

        return device_array
    return None


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-contiguous strides in elements (as torch computes them: extents of
    0 count as 1)."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(out))


def _empty_like(like: Tensor, shape: tuple[int, ...], dtype: str) -> Any:
    if not like.on_gpu:
        return np.empty(shape, _np_dtype(dtype))
    lib = type(like.obj).__module__.split(".")[0]
    if lib == "torch":
        import torch  # type: ignore[import-not-found, unused-ignore]

        tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
        return torch.empty(shape, dtype=tdt, device=like.obj.device)
    if lib == "cupy" and dtype != "bf16":
        import cupy  # type: ignore[import-not-found, unused-ignore]

        with cupy.cuda.Device(like.device):
            return cupy.empty(shape, dtype=_np_dtype(dtype))
    return cuda.empty(shape, "bfloat16" if dtype == "bf16" else _np_dtype(dtype), like.device)


def _span(t: Tensor) -> tuple[int, int] | None:
    """The byte range [start, end) `t`'s elements lie in (None when empty)."""
    if t.size == 0:
        return None
    low = high = 0
    for d, s in zip(t.shape, t.strides, strict=True):
        if s < 0:
            low += (d - 1) * s
        else:
            high += (d - 1) * s
    base = t.ptr if t.on_gpu else int(t.arr.__array_interface__["data"][0])
    item = ITEMSIZE[t.dtype]
    return base + low * item, base + (high + 1) * item


def check_overlap(out: Tensor, reads: Sequence[Tensor]) -> None:
    """Refuses an `out` that shares memory with a tensor the kernel reads:
    the kernels read their inputs through the read-only (constant) path
    while other threads write `out`, so even exact in-place use is refused
    (the interpreter traps it; on the GPU a thread could read stale data)."""
    so = _span(out)
    checked: list[Tensor] = []
    for t in reads:
        st = _span(t)
        if so is None or st is None or t.on_gpu != out.on_gpu or t.device != out.device:
            continue
        if so[0] < st[1] and st[0] < so[1]:
            raise ArgumentError(f"argument '{out.name}': overlaps argument '{t.name}' in memory")
        checked.append(t)
    rec = _plans.recording()
    if rec is not None and so is not None and out.on_gpu:
        # A plan re-checks these pairs on the addresses of each call.
        extents = []
        for t in [out, *checked]:
            lo, hi = _span(t)  # type: ignore[misc]
            extents.append((lo - t.ptr, hi - t.ptr, t.name))
        rec.overlap(out, checked, extents)


def output(
    out: Any,
    like: Tensor,
    shape: tuple[int, ...],
    dtype: str,
    reads: Sequence[Tensor] = (),
    keep_order: bool = False,
) -> tuple[Any, Tensor]:
    """The caller's `out` (checked, and apart from `reads`: :func:`check_overlap`)
    or a new array (`keep_order`: see :func:`empty_like`); returns (object
    to return, its Tensor)."""
    obj = empty_like(like, shape, dtype, keep_order) if out is None else out
    t = tensor(obj, "out")
    same_place(like, t)
    if t.dtype != dtype:
        raise ArgumentError(f"argument 'out': dtype {t.dtype}, expected {dtype}")
    want_shape(t, shape, "the result's shape")
    if not t.on_gpu and out is not None and t.arr is not out:
        raise ArgumentError("argument 'out': a numpy output must be C-contiguous")
    if not t.on_gpu and not t.arr.flags.writeable:
        raise ArgumentError("argument 'out': a read-only array")
    if out is not None:
        check_overlap(t, reads)
    return obj, t


def vector_lanes(dtype: str, *tensors: Tensor, extents: Sequence[int] = ()) -> int:
    """Lanes of the widest access (16 bytes) every tensor allows: contiguous rows
    whose start addresses and row strides are 16-byte aligned; else 1."""
    lanes = 16 // ITEMSIZE[dtype]
    for t in tensors:
        if t.strides and t.strides[-1] != 1 and t.shape[-1] > 1:
            return 1
        if t.ptr % 16:
            return 1
        for s in t.strides[:-1]:
            if s % lanes:
                return 1
    for e in extents:
        if e % lanes:
            return 1
    return lanes


# ---------------------------------------------------------------- launching


@functools.cache
def _stream(handle: int, device: int) -> Any:
    return cuda.Stream.from_handle(handle, device)


def _torch_stream(where: Tensor) -> Any:
    """PyTorch's current stream when it is not the legacy default (None),
    read as a raw handle (``_plans.raw_torch_stream``: no torch Stream object)."""
    handle = _plans.raw_torch_stream(where.device)
    return _stream(handle, where.device) if handle else None


@functools.cache
def _loaded(builder: Callable[..., hir.Module], key: tuple[Any, ...], device: int) -> Any:
    return cuda.load_hir(builder(*key), device)


@functools.cache
def module(builder: Callable[..., hir.Module], key: tuple[Any, ...]) -> hir.Module:
    """The module `builder(*key)`, built once."""
    return builder(*key)


def launch(
    builder: Callable[..., hir.Module],
    key: tuple[Any, ...],
    kernel: str,
    grid: int | tuple[int, ...],
    block: int,
    args: Sequence[Any],
    where: Tensor,
    stream: Any = None,
    shared: int = 0,
) -> None:
    """Launches `kernel` of `builder(*key)` on `where`'s device, or on the
    interpreter for numpy tensors. Tensor arguments are passed as `Tensor`."""
    if where.on_gpu:
        k = _loaded(builder, key, where.device).kernel(kernel)
        launch_loaded(k, grid, block, args, where, stream, shared)
        return
    flat = [a.arr if isinstance(a, Tensor) else a for a in args]
    # numpy tensors: natively on this CPU (zyntax.cpu; the interpreter for
    # kernels the CPU backend refuses, or with ZYNTAX_CPU_MODE=interp). The
    # module is kept so that it is compiled once.
    m = _HOST_MODULES.get((builder, key))
    if m is None:
        m = _HOST_MODULES[(builder, key)] = module(builder, key)
    cpu.launch(m, kernel, grid, block, *flat, shared_bytes=shared)


#: Modules launched on the CPU, by (builder, key).
_HOST_MODULES: dict[tuple[Any, tuple[Any, ...]], hir.Module] = {}


def launch_loaded(
    k: Any,
    grid: int | tuple[int, ...],
    block: int,
    args: Sequence[Any],
    where: Tensor,
    stream: Any = None,
    shared: int = 0,
) -> None:
    """Launches the loaded kernel `k` on `where`'s device (PyTorch's current
    stream for torch tensors when `stream` is None); tensor arguments are
    passed as `Tensor` and maps from :func:`tensor_map`, so that a call's
    recording (``_plans``) sees where each argument comes from."""
    flat = [a.arr if isinstance(a, Tensor) else a for a in args]
    if stream is None and isinstance(where.arr, int):
        stream = _torch_stream(where)
    k.launch(grid, block, *flat, shared_mem=shared or None, stream=stream)
    rec = _plans.recording()
    if rec is not None:
        rec.launch(k, grid, block, shared, stream, list(args))


def tensor_map(t: Tensor, box: Sequence[int], *, swizzle: str, dtype: Any) -> Any:
    """A tiled tensor map of GPU tensor `t` (``cuda.TensorMap.tiled``) built
    from its address and geometry (``_plans.tensor_map_at``: cached, owning
    nothing, so the same map serves any tensor at that address with that
    geometry)."""
    item = ITEMSIZE[t.dtype]
    geometry = (
        tuple(t.shape),
        tuple(s * item for s in t.strides),
        DTYPES[t.dtype].typestr,
        tuple(box),
        swizzle,
        dtype,
    )
    m = _plans.tensor_map_at(t.ptr, *geometry)
    rec = _plans.recording()
    if rec is not None:
        rec.tensor_map(m, t, geometry)
    return m


def rows_of(t: Tensor) -> tuple[int, int, int, int]:
    """(rows, row length, row stride, column stride) of `t` viewed as a matrix
    of its last axis; leading axes must collapse into one row index."""
    if not t.shape:
        raise ArgumentError(f"argument '{t.name}': expected at least one dimension, got a scalar")
    n, cs = t.shape[-1], t.strides[-1]
    rows, rs = 1, n * cs
    if len(t.shape) > 1:
        rs = t.strides[-2]
        for d in range(len(t.shape) - 2):
            if t.shape[d] > 1 and t.strides[d] != t.strides[d + 1] * t.shape[d + 1]:
                raise ArgumentError(
                    f"argument '{t.name}': its leading dimensions {t.shape[:-1]} with strides "
                    f"{t.strides[:-1]} do not collapse into one row index (make it contiguous)"
                )
        for d in t.shape[:-1]:
            rows *= d
    if n >= 1 << 32 or rows >= 1 << 31:
        raise ArgumentError(f"argument '{t.name}': shape {t.shape} is too large")
    return rows, n, rs, cs


def contiguous(t: Tensor) -> bool:
    """Whether `t`'s elements are C-contiguous (the strides of dimensions of
    extent 1 do not matter, nor any of an empty tensor)."""
    if t.size == 0:
        return True
    expect = 1
    for d, s in zip(reversed(t.shape), reversed(t.strides), strict=True):
        if d > 1 and s != expect:
            return False
        expect *= d
    return True


@functools.cache
def sm_count(device: int) -> int:
    """Streaming multiprocessors of GPU `device`, asked of the driver once."""
    return int(cuda.Device(device).sm_count)


@functools.cache
def one_wave(
    builder: Callable[..., hir.Module], key: tuple[Any, ...], kernel: str, device: int, threads: int
) -> int:
    """Blocks of `threads` that the device runs at once (registers and the
    2048-thread limit per SM): a grid-stride kernel launched with exactly
    this many runs in one wave, with no block waiting for a second."""
    k = _loaded(builder, key, device).kernel(kernel)
    per_sm = min(2048 // threads, 65536 // max(1, int(k.num_regs) * threads))
    return int(max(1, per_sm) * sm_count(device))
