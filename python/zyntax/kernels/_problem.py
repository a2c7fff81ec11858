"""Normalising a matrix-product call: operands, dtypes, layouts, devices, output.

Shared by every matmul variant (``mma_sync``, ``simt`` and the sm_90a
``gemm_sm90``): a variant receives a :class:`Problem` whose operands are
plain descriptions (device address, shape, layout, leading dimension, dtype
name) and never has to look at PyTorch, CuPy or DLPack objects itself. Every
check that can fail happens here, before any launch, as a ``ZyntaxError``
subclass naming the argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax.errors import ArgumentError
from zyntax.kernels import _tensors as T
from zyntax.kernels._dtypes import DTYPES

#: Element dtypes matmul knows.
_MATMUL_DTYPES = ("bf16", "f16", "f32", "e4m3")
#: Bytes per element, by zyntax name.
DTYPE_BYTES = {n: DTYPES[n].itemsize for n in _MATMUL_DTYPES}
#: Output dtypes a kernel can write.
OUT_DTYPES = ("f32", "bf16", "f16")
#: Epilogue activations (``None`` = identity). GELU is the tanh form (see docs/kernels.md).
ACTIVATIONS = (None, "relu", "gelu")

_TORCH_DTYPES = {f"torch.{DTYPES[n].torch}": n for n in _MATMUL_DTYPES}
_NUMPY_DTYPES = {DTYPES[n].numpy: n for n in ("f16", "f32", "bf16")}
_NUMPY_DTYPES["float8_e4m3fn"] = "e4m3"  # ml_dtypes' fp8 (the interpreter's tile program)
#: numpy/typestr spelling of each zyntax dtype name (bf16 is an opaque 2-byte type).
TYPESTR = {n: DTYPES[n].typestr for n in _MATMUL_DTYPES}


@dataclass(frozen=True)
class Operand:
    """One matrix: a ``rows x cols`` view of memory in ``layout`` order.

    ``layout == "row"``: element (i, j) is at ``ptr + (i * ld + j) * itemsize``;
    ``"col"``: at ``ptr + (j * ld + i) * itemsize``. On the interpreter
    (numpy inputs) ``host`` is the C-contiguous numpy array that holds the
    elements (the transpose for ``"col"``) and ``ptr`` is 0.
    """

    name: str
    dtype: str
    rows: int
    cols: int
    layout: str
    ld: int
    ptr: int
    device: int | None
    host: Any = None

    @property
    def itemsize(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def span(self) -> tuple[int, int]:
        """The device byte range [start, end) the matrix occupies."""
        outer, inner = (self.rows, self.cols) if self.layout == "row" else (self.cols, self.rows)
        if outer == 0 or inner == 0:
            return (self.ptr, self.ptr)
        return (self.ptr, self.ptr + ((outer - 1) * self.ld + inner) * self.itemsize)

    @property
    def aligned16(self) -> bool:
        """Every row (row layout) or column (col layout) starts 16-byte aligned."""
        return (self.ptr % 16 == 0) and (self.ld * self.itemsize) % 16 == 0


@dataclass(frozen=True)
class Problem:
    """``out[M, N] = act(a[M, K] @ b[K, N] + bias[N])``, normalised."""

    m: int
    n: int
    k: int
    a: Operand
    b: Operand
    out: Operand
    bias: Operand | None
    activation: str | None
    backend: str  # "cuda" or "interp"
    device: int | None
    out_obj: Any  # what matmul returns
    scale_a: float | None = None
    scale_b: float | None = None
    tf32: bool = False  # f32 operands may be read as tf32 by tensor cores
    stream: Any = None  # zyntax.cuda.Stream to launch on (None: the legacy default stream)


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch")


def _device_of(obj: Any) -> int | None:
    dev = getattr(obj, "device", None)
    if isinstance(dev, int):
        return dev
    for attr in ("index", "id"):
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    return 0 if dev is None or getattr(dev, "type", "cuda") == "cuda" else None


def _describe(
    obj: Any, name: str
) -> tuple[str, tuple[int, ...], tuple[int, ...], int, int | None, Any]:
    """(dtype, shape, element strides, device address, device, host array) of `obj`."""
    if isinstance(obj, np.ndarray):
        dt = _NUMPY_DTYPES.get(obj.dtype.name)
        if dt is None:
            raise ArgumentError(
                f"argument '{name}': dtype {obj.dtype} is not supported "
                f"(expected one of bf16, f16, f32)"
            )
        T.host_size(obj, name)  # before operand() copies a strided view
        strides = tuple(s // obj.itemsize for s in obj.strides)
        return dt, tuple(obj.shape), strides, 0, None, obj
    if _is_torch(obj) and hasattr(obj, "data_ptr"):
        dt = _TORCH_DTYPES.get(str(obj.dtype))
        if dt is None:
            raise ArgumentError(f"argument '{name}': dtype {obj.dtype} is not supported")
        if not obj.is_cuda:
            raise ArgumentError(
                f"argument '{name}': is a host tensor; device memory is needed (tensor.cuda())"
            )
        return dt, tuple(obj.shape), tuple(obj.stride()), obj.data_ptr(), obj.device.index, None
    try:
        iface = getattr(obj, "__cuda_array_interface__", None)
    except Exception:  # some libraries raise for dtypes the interface lacks (bf16)
        iface = None
    if iface is not None:
        ts = iface["typestr"]
        dt = next((k for k, v in TYPESTR.items() if v == ts and k != "e4m3"), None)
        if ts == "<V2":
            dt = "bf16"
        if dt is None:
            raise ArgumentError(
                f"argument '{name}': dtype {ts!r} is not supported (expected bf16, f16 or f32)"
            )
        shape = tuple(iface["shape"])
        size = DTYPE_BYTES[dt]
        if iface.get("strides") is None:  # C-contiguous
            acc, rev = 1, []
            for d in reversed(shape):
                rev.append(acc)
                acc *= d
            strides = tuple(reversed(rev))
        else:
            strides = tuple(s // size for s in iface["strides"])
        return dt, shape, strides, int(iface["data"][0]), _device_of(obj), None
    if hasattr(obj, "__dlpack__"):
        from zyntax import cuda

        return _describe(cuda.from_dlpack(obj), name)
    raise ArgumentError(
        f"argument '{name}': expected a zyntax DeviceArray, a GPU tensor "
        f"(__cuda_array_interface__ / DLPack) or a numpy array, got {type(obj).__name__}"
    )


def operand(obj: Any, name: str) -> Operand:
    """`obj` (a 2-D matrix) as an :class:`Operand`: row-major when its rows
    are contiguous, column-major when its columns are (a transposed view);
    anything else is an ArgumentError (the kernels read 16-byte rows)."""
    dt, shape, strides, ptr, device, host = _describe(obj, name)
    if len(shape) != 2:
        raise ArgumentError(f"argument '{name}': expected a 2-D matrix, got shape {shape}")
    rows, cols = shape
    if host is not None:
        # The interpreter takes whole C-contiguous buffers: keep the layout
        # of a transposed view, copy any other strided array.
        if host.flags.c_contiguous:
            return Operand(name, dt, rows, cols, "row", cols, 0, None, host)
        if host.T.flags.c_contiguous:
            return Operand(name, dt, rows, cols, "col", rows, 0, None, host.T)
        return Operand(name, dt, rows, cols, "row", cols, 0, None, np.ascontiguousarray(host))
    s0, s1 = strides
    if s1 == 1 or cols <= 1:
        layout, ld = "row", max(s0, cols, 1)
    elif s0 == 1 or rows <= 1:
        layout, ld = "col", max(s1, rows, 1)
    else:
        raise ArgumentError(
            f"argument '{name}': strides {strides} (in elements) are neither row- nor "
            "column-major; the kernels need one contiguous dimension (pass a contiguous copy)"
        )
    return Operand(name, dt, rows, cols, layout, ld, ptr, device, None)


def _alloc_out(like: Any, backend: str, m: int, n: int, dtype: str, device: int | None) -> Any:
    """A fresh row-major ``m x n`` output of `dtype` allocated like `like`."""
    if backend == "interp":
        if dtype == "bf16":
            raise ArgumentError(
                "argument 'out_dtype': bf16 output needs ml_dtypes on the interpreter path"
            )
        return np.empty((m, n), np.float16 if dtype == "f16" else np.float32)
    if _is_torch(like):
        import torch  # type: ignore[import-not-found,unused-ignore]

        tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
        return torch.empty((m, n), dtype=tdt, device=like.device)
    from zyntax import cuda

    return cuda.empty((m, n), "bfloat16" if dtype == "bf16" else TYPESTR[dtype], device or 0)


class _Unallocated:
    """Describes the output `normalise` would allocate, without allocating it."""

    def __init__(self, m: int, n: int, dtype: str, device: int | None) -> None:
        self.device = device
        self.__cuda_array_interface__ = {
            "shape": (m, n),
            "typestr": TYPESTR[dtype],
            "strides": None,
            "data": (0, False),
            "version": 3,
        }


def _scale(x: Any, name: str) -> Any:
    """A per-tensor scale: None, a 1-element f32 device array (gemm_sm90 checks
    it), or a real number (a float then)."""
    if x is None:
        return None
    if not isinstance(x, np.ndarray) and (
        hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__")
    ):
        return x
    return T.real(x, name)


def normalise(
    a: Any,
    b: Any,
    out: Any = None,
    *,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    scale_a: float | None = None,
    scale_b: float | None = None,
    tf32: bool = False,
    allocate: bool = True,
) -> Problem:
    """Checks a matmul call and describes it; allocates `out` when it is None."""
    T.choice(activation, "activation", ACTIVATIONS, "activation")
    if out_dtype is not None:
        T.choice(out_dtype, "out_dtype", OUT_DTYPES, "output dtype")
    scale_a, scale_b = _scale(scale_a, "scale_a"), _scale(scale_b, "scale_b")
    oa, ob = operand(a, "a"), operand(b, "b")
    if oa.cols != ob.rows:
        raise ArgumentError(
            f"argument 'b': inner dimensions differ: a is {oa.rows}x{oa.cols}, "
            f"b is {ob.rows}x{ob.cols}"
        )
    if oa.dtype != ob.dtype:
        raise ArgumentError(
            f"argument 'b': dtype {ob.dtype} does not match a's {oa.dtype} "
            "(mixed-dtype products are not supported)"
        )
    backend = "interp" if oa.host is not None else "cuda"
    if (ob.host is not None) != (oa.host is not None):
        raise ArgumentError(
            "argument 'b': a and b must both be numpy arrays (interpreter) or both GPU tensors"
        )
    if backend == "cuda" and oa.device != ob.device:
        raise ArgumentError(f"argument 'b': is on device {ob.device}, a on device {oa.device}")
    for name, scale in (("scale_a", scale_a), ("scale_b", scale_b)):
        if scale is not None and oa.dtype != "e4m3":
            raise ArgumentError(
                f"argument '{name}': per-tensor scales apply to fp8 (e4m3) inputs only; a and b "
                f"are {oa.dtype} (scale an input or the output instead)"
            )
    if oa.dtype == "e4m3" and (scale_a is None) != (scale_b is None):
        raise ArgumentError("argument 'scale_b': fp8 scales come in pairs (scale_a and scale_b)")
    m, k, n = oa.rows, oa.cols, ob.cols
    if m * n >= 2**31:  # before `out` is allocated (or a given one is looked at)
        raise ArgumentError(
            f"argument 'out': the product of a ({m} x {k}) and b ({k} x {n}) has {m * n} "
            "elements; at most 2**31 - 1"
        )
    default_out = "bf16" if oa.dtype == "e4m3" else oa.dtype
    odt = out_dtype or default_out
    out_obj: Any
    if out is None and not allocate:  # choose_variant: describe, do not allocate
        if backend == "cuda":
            out_obj = _Unallocated(m, n, odt, oa.device)
        else:
            out_obj = np.empty((m, n), np.float16 if odt == "f16" else np.float32)
    elif out is None:
        out_obj = _alloc_out(a, backend, m, n, odt, oa.device)
    else:
        out_obj = out
    oo = operand(out_obj, "out")
    if (oo.host is not None) != (backend == "interp"):
        raise ArgumentError("argument 'out': must live where a and b live")
    if out is not None and out_dtype is not None and oo.dtype != out_dtype:
        raise ArgumentError(
            f"argument 'out': dtype {oo.dtype} differs from out_dtype={out_dtype!r}"
        )
    if oo.dtype not in OUT_DTYPES:
        raise ArgumentError(f"argument 'out': dtype {oo.dtype} is not an output dtype")
    if (oo.rows, oo.cols) != (m, n):
        raise ArgumentError(f"argument 'out': shape {(oo.rows, oo.cols)} differs from {(m, n)}")
    if oo.layout != "row" and n > 1:
        raise ArgumentError("argument 'out': must be row-major (its rows contiguous)")
    if oo.host is not None and oo.host is not out_obj:  # a strided view would be copied
        raise ArgumentError("argument 'out': a numpy output must be C-contiguous")
    if oo.host is not None and not oo.host.flags.writeable:
        raise ArgumentError("argument 'out': a read-only array")
    if backend == "cuda" and oo.device != oa.device:
        raise ArgumentError(f"argument 'out': is on device {oo.device}, a on device {oa.device}")
    ob_bias = None
    if bias is not None:
        dt, shape, strides, ptr, device, host = _describe(bias, "bias")
        if shape != (n,):
            raise ArgumentError(f"argument 'bias': shape {shape} must be ({n},), one per column")
        if strides != (1,) and n > 1:
            raise ArgumentError("argument 'bias': must be contiguous")
        if dt == "e4m3":
            raise ArgumentError("argument 'bias': fp8 bias is not supported")
        if (host is not None) != (backend == "interp"):
            raise ArgumentError("argument 'bias': must live where a and b live")
        if backend == "cuda" and device != oa.device:
            raise ArgumentError(f"argument 'bias': is on device {device}, a on device {oa.device}")
        ob_bias = Operand("bias", dt, 1, n, "row", n, ptr, device, host)
    for op in (oa, ob, oo):
        if op.rows * op.cols >= 2**31:
            raise ArgumentError(f"argument '{op.name}': more than 2**31 elements")
    # The kernels read the inputs while writing out: no aliasing (a fresh
    # output cannot overlap anything).
    for op in [x for x in (oa, ob, ob_bias) if x is not None and out is not None]:
        if backend == "interp":
            overlap = np.may_share_memory(out_obj, {"a": a, "b": b, "bias": bias}[op.name])
        else:
            (s0, e0), (s1, e1) = oo.span(), op.span()
            overlap = s0 < e1 and s1 < e0
        if overlap:
            raise ArgumentError(f"argument 'out': overlaps argument '{op.name}' in memory")
    return Problem(
        m=m,
        n=n,
        k=k,
        a=oa,
        b=ob,
        out=oo,
        bias=ob_bias,
        activation=activation,
        backend=backend,
        device=oa.device,
        out_obj=out_obj,
        scale_a=scale_a,
        scale_b=scale_b,
        tf32=tf32 and oa.dtype == "f32",
    )
