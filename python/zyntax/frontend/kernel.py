"""``@zyntax.kernel`` and ``@zyntax.func``: the decorator objects and their dispatcher.

A :class:`Kernel` specialises its Python function per *signature* (the
zyntax types of the arguments: scalar type, or array element type, rank and
layout), like Numba's dispatcher. Each signature is translated to HIR once
(:class:`Variant`) and compiled to PTX once per arch, memoised in memory and in
the on-disk PTX cache (:mod:`zyntax.frontend.cache`).
"""

from __future__ import annotations

import inspect
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import numpy as np

from zyntax import _native, hir, lang, nest
from zyntax.frontend import hirtypes as ir
from zyntax.frontend import pipeline
from zyntax.frontend.errors import (
    KernelArgumentError,
    KernelError,
    KernelTypeError,
    trim_traceback,
)
from zyntax.frontend.translator import (
    ArrayParam,
    FunctionTranslator,
    ModuleContext,
    ParamSpec,
    SourceInfo,
    TensorMapParam,
    load_source,
    mangle,
    param_hir_types,
    spec_from_annotation,
)

F = TypeVar("F", bound=Callable[..., Any])

Dim3 = tuple[int, int, int]


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _dim3(v: int | Sequence[int], what: str) -> Dim3:
    if type(v) is int and 0 < v < 2**32:  # the common case, checked first for launch speed
        return (v, 1, 1)
    # Only ints: a str ("12") or floats ([1.9]) must not turn into a launch shape.
    if _is_int(v):
        t = [int(v)]  # type: ignore[arg-type]
    elif isinstance(v, (tuple, list)) and all(_is_int(x) for x in v):
        t = [int(x) for x in v]
    else:
        raise KernelArgumentError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    if not 1 <= len(t) <= 3 or any(not 0 < x < 2**32 for x in t):
        raise KernelArgumentError(f"{what} must be 1 to 3 ints in [1, 2**32 - 1], got {v!r}")
    t += [1] * (3 - len(t))
    return (t[0], t[1], t[2])


# --------------------------------------------------------------------------- argument typing


def _array_like(a: Any) -> tuple[Any, tuple[int, ...], tuple[int, ...]] | None:
    """(dtype, shape, strides in bytes) of a numpy or device array, else None."""
    if isinstance(a, np.ndarray):
        return a.dtype, a.shape, a.strides
    dt = getattr(a, "dtype", None)
    shape = getattr(a, "shape", None)
    if dt is not None and shape is not None and hasattr(a, "strides"):
        return dt, tuple(shape), tuple(a.strides)
    return None


def _is_foreign_tensor(a: Any) -> bool:
    """A GPU tensor of another library (PyTorch, CuPy, JAX, Numba, ...)."""
    t = type(a)
    if t is np.ndarray or t is _device_array_type() or isinstance(a, (int, float, np.generic)):
        return False
    return hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack_device__")


def _adopt_foreign(args: tuple[Any, ...], names: Sequence[str]) -> tuple[Any, ...]:
    """``args`` with every foreign GPU tensor replaced by a zero-copy DeviceArray view.

    ``__cuda_array_interface__`` is preferred (its ``stream`` is waited for;
    for a PyTorch tensor, whose interface names none, torch's current stream);
    else ``__dlpack__`` is consumed on the legacy default stream, which orders
    zyntax's streams. Shape, dtype and strides come from the object; the view
    keeps it alive for as long as the launch needs it. Host tensors (DLPack
    CPU devices) are refused: pass a numpy array instead.
    """
    if not any(_is_foreign_tensor(a) for a in args):
        return args
    from zyntax import cuda

    out = list(args)
    for i, a in enumerate(args):
        if not _is_foreign_tensor(a):
            continue
        name = names[i] if i < len(names) else str(i)
        try:
            if hasattr(a, "__cuda_array_interface__"):
                out[i] = cuda.from_cuda_array_interface(a)
            else:
                dev_type = a.__dlpack_device__()[0]
                if dev_type not in (2, 13):  # kDLCUDA, kDLCUDAManaged
                    raise KernelArgumentError(
                        f"argument '{name}': {type(a).__name__} is not in CUDA device memory "
                        f"(DLPack device type {dev_type}); pass a GPU tensor or a numpy array"
                    )
                out[i] = cuda.from_dlpack(a)
        except KernelArgumentError:
            raise
        except Exception as e:  # the producer's or the runtime's error, with context
            raise KernelArgumentError(
                f"argument '{name}': cannot view {type(a).__name__} as a device array: {e}"
            ) from e
    return tuple(out)


def _dtype_name(dt: Any) -> str | None:
    if isinstance(dt, lang.DType):
        return dt.name
    if isinstance(dt, str) and dt in ir.SCALAR_NAMES:
        return dt
    name = str(dt)
    if name in ir.SCALAR_NAMES:
        return name
    try:
        d = lang.dtype_of_numpy(dt)
    except TypeError:
        return None
    return d.name if d is not None else None


def _fast_key(a: Any) -> Any:
    """A cheap key that determines ``spec_of_value(a)`` (used to skip it on repeat launches)."""
    t = type(a)
    if t is int:
        return int if -(2**31) <= a < 2**31 else "i64"
    if t is float or t is bool:
        return t
    if t is np.ndarray:
        if not a.ndim:
            return None
        return (t, a.dtype, a.ndim, a.strides[-1] == a.itemsize or a.shape[-1] == 1)
    if t is _device_array_type():
        s = a.strides
        return (t, a.typestr, len(s), s[-1] == a.itemsize or a.shape[-1] == 1)
    if isinstance(a, np.generic):
        return (t, a.dtype)
    return None  # other objects: always the full signature


def _key_and_flat(args: Sequence[Any]) -> tuple[tuple[Any, ...] | None, list[Any]]:
    """Dispatch key and flattened HIR arguments in one pass, for device arrays,
    PyTorch CUDA tensors and scalars.

    The key determines the signature exactly as ``spec_of_value`` would; (None, [])
    when some argument needs the general path (host arrays, other objects). A
    tensor's key holds its dtype, rank, contiguity and device (never its
    address): a tensor that changes any of them has another key.
    """
    da = _device_array_type()
    tt = _torch_tensor_type()
    key: list[Any] = []
    flat: list[Any] = []
    for a in args:
        t = type(a)
        if tt is not None and isinstance(a, tt):
            dev = a.get_device()
            shp = tuple(a.shape)
            if dev < 0 or not 1 <= len(shp) <= 3:
                return None, []  # CPU tensors and other ranks: the general path explains
            st = tuple(a.stride())
            key.append(("tensor", tt, a.dtype, len(shp), st[-1] == 1 or shp[-1] == 1, dev))
            flat.append(a.data_ptr())
            flat.extend(shp)
            flat.extend(st)
        elif t is da:
            st = a.strides
            shp = a.shape
            item = a.itemsize
            if not st:
                return None, []
            key.append((t, a.typestr, len(st), st[-1] == item or shp[-1] == 1))
            flat.append(a)
            flat.extend(shp)
            flat.extend([x // item for x in st])
        elif t is int:
            key.append(int if -(2**31) <= a < 2**31 else "i64")
            flat.append(a)
        elif t is float or t is bool:
            key.append(t)
            flat.append(a)
        elif isinstance(a, np.generic):
            key.append((t, a.dtype))
            flat.append(a)
        else:
            return None, []
    return tuple(key), flat


#: Launch configurations whose launchers a kernel keeps (see ``Kernel.__getitem__``).
_LAUNCHER_CACHE_SIZE = 64


def _config_key(config: Any) -> tuple[Any, ...] | None:
    """``config`` when it is a tuple of exact ints or tuples of them, else None.

    Only such configurations are cached: ``1.0 == 1`` must not find the launcher
    of ``[1, 256]``, and streams are not kept alive by the cache.
    """
    if type(config) is not tuple:
        return None
    for x in config:
        if type(x) is not int:
            if type(x) is not tuple:
                return None
            for y in x:
                if type(y) is not int:
                    return None
    return config


_FACTORIES: dict[tuple[Any, ...], Callable[[Any], Callable[[tuple[Any, ...]], bool]] | None] = {}


def _fast_launch_factory(
    key: tuple[Any, ...], args: Sequence[Any]
) -> Callable[[Any], Callable[[tuple[Any, ...]], bool]] | None:
    """A factory of guards for one ``_key_and_flat`` key, generated once per key.

    ``factory(native)(args)`` launches and returns True when ``args`` have exactly
    that key (with the key's types and constants inlined, like Triton's
    ``create_function_from_signature``), passing ``native`` the same flat
    arguments as ``_key_and_flat``; else it returns False and launches nothing.
    """
    if key in _FACTORIES:
        return _FACTORIES[key]
    n = len(key)
    names = [f"a{i}" for i in range(n)]
    consts: dict[str, Any] = {"_DA": _device_array_type()}
    checks: list[str] = []  # cheap type checks first, then attribute checks
    attrs: list[str] = []
    shapes: list[str] = []
    flat: list[str] = []
    factory: Callable[[Any], Callable[[tuple[Any, ...]], bool]] | None = None
    for i, (a, k) in enumerate(zip(names, key, strict=True)):
        if k is int:
            checks.append(f"type({a}) is int and -2147483648 <= {a} < 2147483648")
            flat.append(a)
        elif k == "i64":
            checks.append(f"type({a}) is int and not -2147483648 <= {a} < 2147483648")
            flat.append(a)
        elif k is float or k is bool:
            checks.append(f"type({a}) is {k.__name__}")
            flat.append(a)
        elif isinstance(k, tuple) and len(k) == 2:  # a numpy scalar: its type fixes the dtype
            consts[f"_T{i}"] = k[0]
            checks.append(f"type({a}) is _T{i}")
            flat.append(a)
        elif isinstance(k, tuple) and len(k) == 4 and k[0] is consts["_DA"]:
            _, typestr, ndim, contiguous = k
            item = int(args[i].itemsize)  # fixed by the typestr
            consts[f"_S{i}"] = typestr
            checks.append(f"type({a}) is _DA")
            attrs.append(f"s{i} = {a}.strides")
            attrs.append(f"if {a}.typestr != _S{i} or len(s{i}) != {ndim}: return False")
            shapes.append(f"h{i} = {a}.shape")
            last = ndim - 1
            cont = f"(s{i}[{last}] == {item} or h{i}[{last}] == 1)"
            shapes.append(f"if {'not ' if contiguous else ''}{cont}: return False")
            flat.append(a)
            flat.extend(f"h{i}[{d}]" for d in range(ndim))
            flat.extend(f"s{i}[{d}] // {item}" for d in range(ndim))
        else:
            _FACTORIES[key] = None
            return None
    unpack = f"{', '.join(names)}, = args" if n else "pass"
    body = [
        "def factory(native):",
        "    def fast(args):",
        f"        if len(args) != {n}: return False",
        f"        {unpack}",
    ]
    if checks:
        body.append(f"        if not ({' and '.join(checks)}): return False")
    body += [f"        {x}" for x in attrs + shapes]
    body += [f"        native({', '.join(flat)})", "        return True", "    return fast"]
    ns: dict[str, Any] = dict(consts)
    exec("\n".join(body), ns)  # generated from the key's constants only
    factory = ns["factory"]
    _FACTORIES[key] = factory
    return factory


def _native_fast(key: tuple[Any, ...], prepared: Any) -> Callable[[tuple[Any, ...]], bool] | None:
    """The hot path of one key as one native call: a ``zyntax.cuda.ArgPlan`` of
    the key reads the arguments (pointers, extents, strides, PyTorch's
    stream) and launches through `prepared`; a call that does not match
    launches nothing and returns False. None when the key has tensors the
    native plan cannot express, or `prepared` is not a native launcher and
    the key has no PyTorch tensor (the generated guard serves it)."""
    from zyntax import _native

    plan_type = getattr(_native, "CudaArgPlan", None)
    slots = _arg_plan_slots(key)
    if plan_type is None or slots is None:
        return None
    plan = plan_type(slots)
    tensors = any(s[0] == "tensor" for s in slots)
    if tensors:
        from zyntax import _torch_c

        _torch_c.ensure()  # torch tensors read in C where libtorch's functions pass their check
    if type(prepared) is getattr(_native, "CudaLauncher", None):
        fast: Any = _native.CudaArgLauncher(prepared, plan, _raw_stream_fn() if tensors else None)
        return fast  # type: ignore[no-any-return]
    if not tensors:
        return None
    read = plan.read

    def through_python(args: tuple[Any, ...]) -> bool:
        # A launcher that is not native (tests' stand-ins): the same plan reads.
        flat = read(args)
        if flat is None:
            return False
        prepared(*flat)
        return True

    return through_python


_DEVICE_ARRAY: list[type] = []
#: torch.Tensor once torch is imported (tests put a stand-in class here).
_TORCH_TENSOR: list[type] = []


def _torch_tensor_type() -> Any:
    """torch.Tensor when the program has imported torch (never imports it), else None."""
    if not _TORCH_TENSOR:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        _TORCH_TENSOR.append(torch.Tensor)
    return _TORCH_TENSOR[0]


_RAW_STREAM: list[Callable[[int], int]] = []


def _raw_torch_stream(device: int) -> int:
    """PyTorch's current stream on `device` as a raw handle (0: the legacy
    default stream), through ``torch._C._cuda_getCurrentRawStream``: a
    fraction of a microsecond, against ~5 us for
    ``torch.cuda.current_stream(device).cuda_stream``."""
    return _raw_stream_fn()(device)


def _raw_stream_fn() -> Callable[[int], int]:
    if not _RAW_STREAM:
        import torch  # type: ignore[import-not-found, unused-ignore]

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # another torch: the public (slower) spelling
            raw = lambda d: torch.cuda.current_stream(d).cuda_stream  # noqa: E731
        _RAW_STREAM.append(raw)
    return _RAW_STREAM[0]


_TORCH_STREAMS: dict[tuple[int, int], Any] = {}


def _torch_stream(args: Sequence[Any]) -> Any:
    """The stream a launch with PyTorch tensors among `args` (and no stream
    of its own) goes to: PyTorch's current stream on the first tensor's
    device, as a zyntax Stream (None: the legacy default stream). Like
    Triton's, the launch is then ordered with the surrounding torch work on
    that stream, side streams and ``torch.cuda.graph`` captures included."""
    tt = _torch_tensor_type()
    if tt is None:
        return None
    for a in args:
        if isinstance(a, tt) and a.get_device() >= 0:
            dev = a.get_device()
            handle = _raw_torch_stream(dev)
            if handle == 0:
                return None
            s = _TORCH_STREAMS.get((dev, handle))
            if s is None:
                from zyntax import cuda

                s = _TORCH_STREAMS[(dev, handle)] = cuda.Stream.from_handle(handle, dev)
            return s
    return None


def _arg_plan_slots(key: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
    """The slots of a native ``zyntax.cuda.ArgPlan`` for a ``_key_and_flat`` key
    (None for a key it cannot express)."""
    da = _device_array_type()
    slots: list[tuple[Any, ...]] = []
    for k in key:
        if k is int:
            slots.append(("i32",))
        elif k == "i64":
            slots.append(("i64",))
        elif k is float:
            slots.append(("f32",))
        elif k is bool:
            slots.append(("bool",))
        elif isinstance(k, tuple) and len(k) == 2:  # a numpy scalar
            slots.append(("exact", k[0]))
        elif isinstance(k, tuple) and len(k) == 4 and k[0] is da:
            slots.append(("array", k[1], k[2], k[3]))
        elif isinstance(k, tuple) and len(k) == 6 and k[0] == "tensor":
            _, tt, dtype, ndim, contiguous, dev = k
            slots.append(("tensor", tt, dtype, ndim, contiguous, dev, None))
        else:
            return None
    return slots


def _device_array_type() -> type | None:
    """zyntax.cuda.DeviceArray, looked up once (None in builds without CUDA)."""
    if not _DEVICE_ARRAY:
        from zyntax import _native

        _DEVICE_ARRAY.append(getattr(_native, "DeviceArray", type(None)))
    return _DEVICE_ARRAY[0]


def spec_of_value(a: Any) -> ParamSpec:
    """The signature entry of one launch argument (Triton's rule for Python numbers)."""
    if isinstance(a, (bool, np.bool_)):
        return ir.BOOL
    if isinstance(a, np.generic):
        n = _dtype_name(a.dtype)
        if n is None:
            raise KernelArgumentError(f"scalars of dtype {a.dtype} are not supported")
        return ir.scalar(n)
    if isinstance(a, int):
        return ir.I32 if -(2**31) <= a < 2**31 else ir.I64
    if isinstance(a, float):
        return ir.F32
    if type(a).__name__ in ("TensorMap", "CudaTensorMap") and type(a).__module__ in (
        "zyntax.cuda",
        "zyntax.interp",
    ):
        return TensorMapParam()
    arr = _array_like(a)
    if arr is not None:
        dt, shape, strides = arr
        n = _dtype_name(dt)
        if n is None:
            raise KernelArgumentError(f"arrays of dtype {dt} are not supported")
        if not 1 <= len(shape) <= 3:
            raise KernelArgumentError(f"arrays must have 1 to 3 dimensions, got {len(shape)}")
        item = ir.scalar(n).size_bytes
        contiguous = strides[-1] == item or shape[-1] == 1
        return ArrayParam(ir.scalar(n), len(shape), "C" if contiguous else "A")
    raise KernelArgumentError(f"cannot pass {type(a).__name__} to a kernel")


def spec_of_sig_entry(x: Any) -> ParamSpec:
    """A signature entry given by the user: a zyntax type, a spec, or an example value."""
    s = spec_from_annotation(x)
    if s is not None:
        return s
    if isinstance(x, (ir.Scalar, ArrayParam, TensorMapParam)):
        return x
    if isinstance(x, str):
        # "f32", "f32[2]" (any strides) or "f32[2, C]" (contiguous).
        m = re.fullmatch(r"\s*(\w+)\s*(?:\[\s*([123])\s*(?:,\s*([AC])\s*)?\])?\s*", x)
        if m is None or m.group(1) not in ir.SCALAR_NAMES:
            raise KernelArgumentError(f"cannot read the type {x!r} (e.g. 'f32' or 'f32[2]')")
        t = ir.scalar(m.group(1))
        return t if m.group(2) is None else ArrayParam(t, int(m.group(2)), m.group(3) or "A")
    return spec_of_value(x)


def specs_compatible(want: ParamSpec, got: ParamSpec) -> bool:
    if isinstance(want, ir.Scalar):
        return isinstance(got, ir.Scalar)
    if isinstance(want, TensorMapParam) or isinstance(got, TensorMapParam):
        return want == got
    if not isinstance(got, ArrayParam):
        return False
    return (
        want.dtype == got.dtype
        and want.ndim == got.ndim
        and (want.layout == "A" or got.layout == "C")
    )


# --------------------------------------------------------------------------- variants


@dataclass
class Variant:
    """One signature of a kernel, translated to HIR."""

    kernel_name: str
    specs: tuple[ParamSpec, ...]
    #: The translated module (``zyntax.hir.Module``, verified by ``pipeline.native_module``).
    module: Any
    hir_text: str
    param_types: list[str]
    ptx: dict[str, str] = field(default_factory=dict)  # arch -> PTX text
    native: dict[Any, Any] = field(default_factory=dict)  # loaded CUDA functions by device
    binder: Callable[..., list[Any]] | None = None

    #: Launch bounds of the kernel (``max_threads`` as [x, y, z], ``min_blocks``, ...).
    bounds: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    #: What the tiler did with each ``prange`` nest (docs/tiling.md).
    tiling_report: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        """The cache entry's JSON (the ``ptx_cache/`` schema, see ptx_cache/README.md)."""
        launch = {
            "params": [{"index": i, "type": t} for i, t in enumerate(self.param_types)],
            "max_threads": self.bounds.get("max_threads"),
            "min_blocks": self.bounds.get("min_blocks"),
            "max_registers": self.bounds.get("max_registers"),
            "dynamic_shared_bytes": 0,
        }
        return {
            "kernels": [self.kernel_name],
            "params": self.param_types,
            "signature": [str(s) for s in self.specs],
            "launch": {self.kernel_name: launch},
            "module": self.kernel_name,
            "options": {},
            "source": self.source,
        }


def _make_binder(specs: tuple[ParamSpec, ...]) -> Callable[..., list[Any]]:
    """Flatten launch arguments to HIR parameters (the array ABI), built once per signature."""
    items = [s.dtype.size_bytes if isinstance(s, ArrayParam) else 0 for s in specs]

    def bind(args: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for item, a in zip(items, args, strict=True):
            if not item:
                out.append(a)
            else:
                out.append(a)
                out.extend(a.shape)
                out.extend([x // item for x in a.strides])
        return out

    return bind


# --------------------------------------------------------------------------- decorator objects


class _Translatable:
    def __init__(self, pyfunc: Callable[..., Any]) -> None:
        self.pyfunc = pyfunc
        self.__name__: str = pyfunc.__name__
        self.__qualname__: str = pyfunc.__qualname__
        self.__doc__ = pyfunc.__doc__
        self.__module__ = pyfunc.__module__
        self.__wrapped__ = pyfunc
        self._source: SourceInfo | None = None
        self._sig = inspect.signature(pyfunc)

    def source(self) -> SourceInfo:
        if self._source is None:
            self._source = load_source(self.pyfunc, "kernel")
        return self._source

    def _annotation(self, p: inspect.Parameter) -> Any:
        """The parameter's annotation; a string one (``from __future__ import
        annotations``) is evaluated in the function's globals, and one that
        cannot be is an error naming it, never "no annotation"."""
        ann = p.annotation
        if not isinstance(ann, str):
            return ann
        try:
            return eval(ann, self.pyfunc.__globals__)
        except Exception as e:
            code = getattr(self.pyfunc, "__code__", None)
            raise KernelTypeError(
                f"the annotation {ann!r} of parameter '{p.name}' cannot be evaluated "
                f"({type(e).__name__}: {e})",
                file=code.co_filename if code else None,
                line=code.co_firstlineno if code else None,
                kernel=self.__name__,
            ) from None

    def signature_specs(self) -> list[ParamSpec] | None:
        """Parameter specs from annotations when every parameter is annotated, else None."""
        out: list[ParamSpec] = []
        for p in self._sig.parameters.values():
            s = spec_from_annotation(self._annotation(p))
            if s is None:
                return None
            out.append(s)
        return out

    def partial_specs(self) -> list[ParamSpec | None]:
        return [spec_from_annotation(self._annotation(p)) for p in self._sig.parameters.values()]


class DeviceFunction(_Translatable):
    """A ``@zyntax.func``: callable from kernels, specialised per call signature."""

    #: What the translator sees in a call (it cannot import this module).
    zyntax_role = "func"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelError(
            f"@zyntax.func '{self.__name__}' can only be called inside a @zyntax.kernel"
        )

    def __repr__(self) -> str:
        return f"<zyntax.func {self.__name__}>"


# Hooks: tests and tools count compilations through these (the pipeline's list).
compile_hooks = pipeline.compile_hooks


#: The native base of Kernel that keeps its launchers (``k[grid, block]``
#: without a Python frame); ``object`` with an extension that lacks it.
_LauncherBase: type = getattr(_native, "KernelLaunchers", object)


class Kernel(_Translatable, _LauncherBase):  # type: ignore[misc]
    """A ``@zyntax.kernel``: launch with ``k[grid, block](*args)`` or ``k.launch(...)``."""

    #: What the translator sees in a call (it cannot import this module).
    zyntax_role = "kernel"

    def __init__(
        self,
        pyfunc: Callable[..., Any],
        *,
        max_threads: int | Sequence[int] | None = None,
        min_blocks: int | None = None,
        max_registers: int | None = None,
        device: str = "auto",
        workgroup: Sequence[int] | None = None,
        exact_threads: int | Sequence[int] | None = None,
        cluster: int | Sequence[int] | None = None,
        cooperative: bool = False,
    ) -> None:
        super().__init__(pyfunc)
        #: GPU launches are cooperative (all blocks co-resident), as `grid_sync` needs.
        self.cooperative = bool(cooperative)
        self.max_threads = _dim3(max_threads, "max_threads") if max_threads is not None else None
        #: The one block shape the kernel runs with (``.reqntid``); a launch with another fails.
        self.exact_threads = (
            _dim3(exact_threads, "exact_threads") if exact_threads is not None else None
        )
        #: Blocks per cluster (sm_90), declared in the kernel's metadata.
        self.cluster = _dim3(cluster, "cluster") if cluster is not None else None
        #: The workgroup of a ``prange`` nest, outermost first (``None``: not a nest kernel).
        self.workgroup = tuple(int(w) for w in workgroup) if workgroup is not None else None
        if self.workgroup is not None:
            # Its (x, y, z) block shape, checked against device limits, bounds the kernel.
            block = nest.launch_grid([0] * len(self.workgroup), self.workgroup)[1]
            if self.max_threads is not None and self.max_threads != block:
                raise ValueError(
                    f"max_threads {self.max_threads} contradicts workgroup {self.workgroup} "
                    f"(block {block})"
                )
            self.max_threads = block
        self.min_blocks = min_blocks
        self.max_registers = max_registers
        if device not in ("auto", "gpu", "cpu"):
            raise KernelArgumentError(f"device must be 'auto', 'gpu' or 'cpu', got {device!r}")
        self.device = device
        self._variants: dict[tuple[ParamSpec, ...], Variant] = {}
        self._fast: dict[tuple[Any, ...], Variant] = {}
        # Loaded GPU functions by _key_and_flat key (None until the first GPU launch).
        self._hot: dict[tuple[Any, ...], Any] | None = None
        self._launchers: dict[Any, Callable[..., None]] = {}
        self._lock = threading.Lock()
        self._pinned = self.partial_specs()
        self._param_names = list(self._sig.parameters)

    def __repr__(self) -> str:
        return f"<zyntax.kernel {self.__name__}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelError(
            f"kernel '{self.__name__}' must be launched with a grid: "
            f"{self.__name__}[grid, block](...) or {self.__name__}.launch(..., grid=, block=)"
        )

    # ---------------------------------------------------------------- signatures
    def _def_error(self, message: str) -> KernelArgumentError:
        """A launch error pointing at the kernel's def line."""
        try:
            src = self.source()
            d = src.tree
            return KernelArgumentError(
                message,
                file=src.file,
                line=d.lineno + src.line_offset,
                col=d.col_offset + 1 + src.col_offset,
                kernel=self.__name__,
            )
        except KernelError:
            return KernelArgumentError(message)

    def _param_error(self, index: int, message: str) -> KernelArgumentError:
        """A launch error pointing at the parameter in the def line."""
        try:
            src = self.source()
            arg = src.tree.args.args[index]
            return KernelArgumentError(
                message,
                file=src.file,
                line=arg.lineno + src.line_offset,
                col=arg.col_offset + 1 + src.col_offset,
                end_col=(arg.end_col_offset or arg.col_offset) + 1 + src.col_offset,
                kernel=self.__name__,
            )
        except KernelError:
            return KernelArgumentError(message)

    def specs_for(self, args: Sequence[Any]) -> tuple[ParamSpec, ...]:
        params = list(self._sig.parameters)
        if len(args) != len(params):
            raise self._def_error(
                f"kernel '{self.__name__}' takes {len(params)} argument(s) "
                f"({', '.join(params)}) but {len(args)} were given"
            )
        out: list[ParamSpec] = []
        for i, (a, pinned) in enumerate(zip(args, self._pinned, strict=True)):
            try:
                got = spec_of_value(a)
            except KernelArgumentError as e:
                raise self._param_error(i, f"argument '{params[i]}': {e.message}") from None
            if pinned is None:
                out.append(got)
                continue
            if not specs_compatible(pinned, got):
                raise self._param_error(
                    i,
                    f"argument '{params[i]}' should be {pinned} but got {got}",
                )
            out.append(pinned)
        return tuple(out)

    def _sig_specs(self, sig: Sequence[Any] | None) -> tuple[ParamSpec, ...]:
        if sig is None:
            full = self.signature_specs()
            if full is None:
                if len(self._variants) == 1:
                    return next(iter(self._variants))
                raise KernelTypeError(
                    f"kernel '{self.__name__}' is not fully annotated: pass a signature, "
                    "e.g. k.hir((zyntax.Array[zyntax.f32, 1], zyntax.i32))"
                )
            return tuple(full)
        if isinstance(sig, (str, bytes)) or not isinstance(sig, Sequence):
            raise KernelArgumentError(
                f"sig must be a sequence of types or example arguments, got {type(sig).__name__}"
            )
        return tuple(spec_of_sig_entry(x) for x in sig)

    # ---------------------------------------------------------------- translation
    def variant(self, specs: tuple[ParamSpec, ...]) -> Variant:
        v = self._variants.get(specs)
        if v is not None:
            return v
        with self._lock:
            v = self._variants.get(specs)
            if v is None:
                v = self._translate(specs)
                self._variants[specs] = v
        return v

    def _translate(self, specs: tuple[ParamSpec, ...]) -> Variant:
        # The translator builds straight into a native module; source locations
        # are set per statement (record_locations=False: no Python frame walk).
        mod = hir.Module(self.__name__, record_locations=False)
        ctx = ModuleContext(mod)
        src = self.source()
        opts = {
            "max_threads": self.max_threads,
            "min_blocks": self.min_blocks,
            "max_registers": self.max_registers,
            "exact_threads": self.exact_threads,
            "cluster": self.cluster,
        }
        tr = FunctionTranslator(
            self.pyfunc,
            list(specs),
            kind="kernel",
            name=self.__name__,
            ctx=ctx,
            source=self.source(),
            workgroup=self.workgroup,
            kernel_opts={k: v for k, v in opts.items() if v is not None},
        )
        tr.translate()
        params: list[str] = []
        for s in specs:
            params.extend(str(t) for t in param_hir_types(s))
        return Variant(
            self.__name__,
            specs,
            mod,
            mod.to_zir(),
            params,
            binder=_make_binder(specs),
            bounds={
                "max_threads": list(self.max_threads) if self.max_threads else None,
                "min_blocks": self.min_blocks,
                "max_registers": self.max_registers,
                "exact_threads": list(self.exact_threads) if self.exact_threads else None,
                "cluster": list(self.cluster) if self.cluster else None,
                "cooperative": self.cooperative,
            },
            source=f"{src.file}:{src.tree.lineno + src.line_offset}",
            tiling_report=list(tr.tiling_report),
        )

    # ---------------------------------------------------------------- inspection
    def hir(self, sig: Sequence[Any] | None = None, *, located: bool = False) -> str:
        """The HIR (``.zir`` text) of the kernel specialised for ``sig``; with
        ``located=True`` each instruction is followed by its Python
        ``; line:col`` (the file is named above the kernel)."""
        try:
            v = self.variant(self._sig_specs(sig))
            return v.module.to_zir(located=True) if located else v.hir_text
        except KernelError as e:
            raise trim_traceback(e) from None

    def tiling_report(self, sig: Sequence[Any] | None = None) -> list[str]:
        """What the tiler did with each ``prange`` nest of the kernel specialised
        for ``sig``: per reduction operand, staged through shared memory or why
        not; or why a nest was not tiled at all (docs/tiling.md)."""
        try:
            return list(self.variant(self._sig_specs(sig)).tiling_report)
        except KernelError as e:
            raise trim_traceback(e) from None

    def native_module(self, sig: Sequence[Any] | None = None) -> Any:
        """The specialisation as a verified native ``zyntax.hir.Module``."""

        try:
            return pipeline.native_module(self.variant(self._sig_specs(sig)))
        except KernelError as e:
            raise trim_traceback(e) from None

    def ptx(
        self, sig: Sequence[Any] | None = None, arch: str | None = None, *, line_info: bool = False
    ) -> str:
        """PTX for ``sig`` (through the disk cache); ``line_info=True`` adds
        ``.file``/``.loc`` lines at the kernel's Python lines (nvcc's
        ``-lineinfo``: Nsight Compute shows the source with them)."""

        try:
            v = self.variant(self._sig_specs(sig))
            return pipeline.ptx_for(v, pipeline.resolve_arch(arch), line_info=line_info)
        except KernelError as e:
            raise trim_traceback(e) from None

    def llvm(self, sig: Sequence[Any] | None = None, arch: str | None = None) -> str:
        """LLVM IR for ``sig`` (not cached)."""

        try:
            v = self.variant(self._sig_specs(sig))
            return pipeline.llvm_for(v, pipeline.resolve_arch(arch))
        except KernelError as e:
            raise trim_traceback(e) from None

    def _program_launch(self, device: int, args: Sequence[Any]) -> tuple[Any, list[Any]]:
        """For ``zyntax.cuda.Program.launch``: this kernel specialised for
        `args` (program buffers stand for C-contiguous arrays of their dtype
        and rank), loaded on `device`, and its flat argument list (arrays as
        pointer, extents and strides in elements)."""
        from zyntax import cuda

        specs = tuple(
            ArrayParam(ir.scalar(_dtype_name(a.dtype) or ""), a.ndim, "C")
            if isinstance(a, cuda.Buffer)
            else spec_of_value(a)
            for a in args
        )
        v = self.variant(specs)
        # The launch path keeps device 0's kernel under "gpu".
        key: Any = "gpu" if device == 0 else ("gpu", device)
        native = v.native.get(key)
        if native is None:
            ptx = pipeline.ptx_for(v, cuda.device_arch(device))
            native = cuda.load_module(ptx, device, hir=v.hir_text).kernel(v.kernel_name)
            v.native[key] = native
        flat: list[Any] = []
        for a, s in zip(args, specs, strict=True):
            flat.append(a)
            if isinstance(s, ArrayParam):
                flat.extend(a.shape)
                flat.extend(x // s.dtype.size_bytes for x in a.strides)
        return native, flat

    # ---------------------------------------------------------------- launch
    if _LauncherBase is object:  # an extension without KernelLaunchers

        def __getitem__(self, config: Any) -> Callable[..., None]:
            # Launchers are kept per configuration so that ``k[grid, block](...)`` in a
            # loop reuses the prepared native launches of the previous iterations.
            cache = self._launchers
            ckey = _config_key(config)
            if ckey is not None:
                hit = cache.get(ckey)
                if hit is not None:
                    return hit
            launcher = self._launcher_for(config)
            if ckey is not None:
                if len(cache) >= _LAUNCHER_CACHE_SIZE:
                    cache.clear()
                cache[ckey] = launcher
            return launcher

    def _launcher_for(self, config: Any) -> Callable[..., None]:
        """A new launcher of `config` (``k[config]``). The native base
        (``_native.KernelLaunchers``) keeps it per cacheable configuration
        and answers the next ``k[config]`` without a Python frame."""
        ckey = _config_key(config)
        if not isinstance(config, tuple) or len(config) not in (2, 3, 4):
            raise KernelArgumentError(
                f"launch configuration must be [grid, block] or [grid, block, shared_mem"
                f"[, stream]], got {config!r}"
            )
        grid, block = config[0], config[1]
        shared_mem = config[2] if len(config) > 2 else 0
        stream = config[3] if len(config) > 3 else None

        try:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
        except KernelError as e:
            raise trim_traceback(e) from None
        return self._make_launcher(g, b, shared_mem, stream, reused=ckey is not None)

    def _make_launcher(
        self, g: Dim3, b: Dim3, shared_mem: int, stream: Any, reused: bool = False
    ) -> Callable[..., None]:
        """The launcher of one configuration.

        The hot path is one guard per argument signature: a native
        ``CudaArgLauncher`` (:func:`_native_fast`), or a generated Python guard
        (:func:`_fast_launch_factory`) for launchers that are not native. It
        checks the arguments against the signature's key, flattens them and
        launches through the native launcher prepared for this configuration.
        Anything it does not accept goes through :meth:`_launch` (full dispatch,
        validation, friendly errors), which then installs the guard: from the
        first launch on for a `reused` (cached) launcher, so that one warm-up
        launch makes the next one legal inside ``torch.cuda.graph`` capture
        (the full path's adoption of a torch tensor waits on the legacy
        stream); from the second launch on otherwise.
        """
        # [last used guard, guards by dispatch key, launched before, native dispatch]
        state: list[Any] = [None, {}, reused, None]
        launch_slow = self._launch
        from zyntax import _native

        dispatch = getattr(_native, "CudaArgDispatch", None)
        if dispatch is not None:
            # One native call per launch: the guards, then `slow` (no Python frame).
            def slow(args: tuple[Any, ...]) -> None:
                try:
                    launch_slow(args, g, b, shared_mem, stream, None)
                    if state[2]:
                        self._install_fast(state, args, g, b, shared_mem, stream)
                    state[2] = True
                except KernelError as e:
                    raise trim_traceback(e) from None

            state[3] = dispatch(slow)
            return state[3]  # type: ignore[no-any-return]

        def launcher(*args: Any) -> None:
            try:
                fast = state[0]
                if fast is not None:
                    if fast(args):
                        return
                    # Alternating signatures: the other guards of this launcher.
                    for other in state[1].values():
                        if other is not fast and other(args):
                            state[0] = other
                            return
                launch_slow(args, g, b, shared_mem, stream, None)
                # Guards pay off on reused launchers only (uncached configurations,
                # e.g. with a stream, make a new launcher per k[...]).
                if state[2]:
                    self._install_fast(state, args, g, b, shared_mem, stream)
                state[2] = True
            except KernelError as e:
                raise trim_traceback(e) from None

        return launcher

    def _install_fast(
        self,
        state: list[Any],
        args: tuple[Any, ...],
        g: Dim3,
        b: Dim3,
        shared_mem: int,
        stream: Any,
    ) -> None:
        """After a GPU launch of ``args``, make their signature the launcher's hot path."""
        hot = self._hot
        if hot is None or self.device == "cpu":
            return
        key, _ = _key_and_flat(args)
        if key is None:
            return
        by_key: dict[tuple[Any, ...], Any] = state[1]
        fast = by_key.get(key)
        if fast is None:
            func = hot.get(key)
            if func is None:
                return
            coop = {"cooperative": True} if self.cooperative else {}
            prepared = func.prepare(g, b, shared_mem=shared_mem or None, stream=stream, **coop)
            fast = _native_fast(key, prepared)
            if fast is None:
                factory = _fast_launch_factory(key, args)
                if factory is None:
                    return
                fast = factory(prepared)
            by_key[key] = fast
        state[0] = fast
        if state[3] is not None:
            state[3].add(fast)

    def launch(
        self,
        *args: Any,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        shared_mem: int = 0,
        stream: Any = None,
        device: str | None = None,
    ) -> None:
        """Launch over ``grid`` blocks of ``block`` threads on the GPU (or the CPU interpreter)."""
        try:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
            if device not in (None, "auto", "gpu", "cpu"):
                raise KernelArgumentError(
                    f"device must be None, 'auto', 'gpu' or 'cpu', got {device!r}"
                )
            self._launch(args, g, b, shared_mem, stream, device)
        except KernelError as e:
            raise trim_traceback(e) from None

    def _launch(
        self,
        args: tuple[Any, ...],
        g: Dim3,
        b: Dim3,
        shared_mem: int,
        stream: Any,
        device: str | None,
        cpu_mode: str | None = None,
    ) -> None:
        given = args
        args = _adopt_foreign(args, self._param_names)
        if stream is None and args is not given and device in (None, "gpu"):
            # PyTorch tensors: on torch's current stream, as the fast path launches.
            stream = _torch_stream(given)
        hot = self._hot
        if hot is not None and device is None:
            # The hot path: device arrays and scalars, a signature seen before on the GPU.
            key, flat = _key_and_flat(args)
            func = hot.get(key) if key is not None else None
            if func is not None:
                if self.cooperative:
                    func.launch(
                        g, b, *flat, shared_mem=shared_mem or None, stream=stream, cooperative=True
                    )
                else:
                    func.launch(g, b, *flat, shared_mem=shared_mem or None, stream=stream)
                return
        # Dispatch on a cheap per-argument key first; the full signature (and the
        # checks against annotations) is computed once per new key.
        fkey = tuple([_fast_key(a) for a in args])
        v = self._fast.get(fkey)
        if v is None:
            v = self.variant(self.specs_for(args))
            if None not in fkey:
                self._fast[fkey] = v
        where = device or self.device
        if where == "auto":
            where = "gpu" if pipeline.gpu_available() else "cpu"
        if where == "cpu":
            pipeline.run_native(v, args, g, b, shared_mem, cpu_mode)
            return
        pipeline.run_gpu(v, args, g, b, shared_mem, stream)
        if device in (None, "gpu") and self.device != "cpu":
            # The launchers' hot paths find the loaded function by the key of
            # the arguments as given (torch tensors) and as adopted.
            for launched in (args, given) if args is not given else (args,):
                key, _ = _key_and_flat(launched)
                if key is not None:
                    if self._hot is None:
                        self._hot = {}
                    self._hot[key] = v.native["gpu"]

    def run_cpu(
        self,
        *args: Any,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        shared_mem: int = 0,
        mode: str | None = None,
    ) -> None:
        """Run on this CPU, no GPU needed: natively (``zyntax.cpu``: LLVM, blocks on
        all cores) by default; ``mode="interp"`` runs the reference interpreter (the
        checking mode: races, exact trap locations), ``mode="native"`` refuses a
        kernel the native lowering cannot run instead of using the interpreter
        (see ``zyntax.cpu.MODES``; default ``$ZYNTAX_CPU_MODE`` or ``"auto"``)."""
        try:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
            self._launch(args, g, b, shared_mem, None, "cpu", mode)
        except KernelError as e:
            raise trim_traceback(e) from None

    @property
    def signatures(self) -> list[tuple[ParamSpec, ...]]:
        return list(self._variants)

    def launch_grid(self, *sizes: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(grid, block)`` of a ``prange`` kernel for the nest's `sizes` at
        launch (outermost first), from its ``workgroup``."""
        if self.workgroup is None:
            raise ValueError(f"kernel {self.__name__} has no workgroup= (not a prange kernel)")
        return nest.launch_grid(sizes, self.workgroup)


@overload
def kernel(fn: F) -> Kernel: ...
@overload
def kernel(
    fn: None = None,
    *,
    max_threads: int | Sequence[int] | None = None,
    min_blocks: int | None = None,
    max_registers: int | None = None,
    device: str = "auto",
    workgroup: Sequence[int] | None = None,
    exact_threads: int | Sequence[int] | None = None,
    cluster: int | Sequence[int] | None = None,
    cooperative: bool = False,
) -> Callable[[F], Kernel]: ...


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    max_threads: int | Sequence[int] | None = None,
    min_blocks: int | None = None,
    max_registers: int | None = None,
    device: str = "auto",
    workgroup: Sequence[int] | None = None,
    exact_threads: int | Sequence[int] | None = None,
    cluster: int | Sequence[int] | None = None,
    cooperative: bool = False,
) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """Make a GPU kernel entry point from a Python function (see ``docs/kernels.md``)."""

    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(
            f,
            max_threads=max_threads,
            min_blocks=min_blocks,
            max_registers=max_registers,
            device=device,
            workgroup=workgroup,
            exact_threads=exact_threads,
            cluster=cluster,
            cooperative=cooperative,
        )

    return wrap(fn) if fn is not None else wrap


def func(fn: Callable[..., Any]) -> DeviceFunction:
    """Make a device function, callable from kernels and other device functions."""
    return DeviceFunction(fn)


__all__ = [
    "DeviceFunction",
    "Kernel",
    "Variant",
    "compile_hooks",
    "func",
    "kernel",
    "mangle",
    "spec_of_value",
]
