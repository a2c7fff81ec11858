"""libtorch's C functions for the native host path (issue 25): the call plans
of ``zyntax.kernels`` (``kernels/_plans.py``) and the ``@zyntax.kernel``
launch path (``frontend/kernel.py``) read torch tensors and make torch
outputs through them once :func:`ensure` turned them on (crate file
``crates/zyntax-python/src/cuda/torch_c.rs``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from zyntax import _native

#: torch dtype -> PyTorch's ScalarType code while the native plans read and
#: allocate torch tensors through libtorch's C functions (empty: the methods).
torch_c_codes: dict[Any, int] = {}
_torch_c_tried: list[bool] = []
#: Whether libtorch's stream function was checked (needs CUDA initialized).
_stream_tried: list[bool] = []
#: [whether launches read PyTorch's current stream through it] once checked.
torch_c_stream: list[bool] = []


def torch_c_enable(on: bool = True) -> bool:
    """Turns the native plans' C path for torch tensors on (after checking it)
    or off; returns whether it is on. On: each tensor's key (dtype, device,
    shape, strides, address) is read and each output made (``at::
    empty_strided``, PyTorch's caching allocator) through the C functions of
    libtorch (AOTInductor's ``aoti_torch_*`` shim and ``THPVariable_Wrap``;
    crates/zyntax-python/src/cuda/torch_c.rs) instead of the tensor's Python
    methods and ``torch.empty_like`` (H200, session 11: ~1.0 us a tensor's
    key and ~1.6 us an output that way). Every value read is first compared
    with the tensor's own methods, on CPU tensors of each dtype (and a CUDA
    one once CUDA is up), and a tensor made with what Python sees of it: a
    PyTorch whose objects or functions differ fails the check and keeps the
    methods. ``ZYNTAX_TORCH_C=0`` keeps them too."""
    load = getattr(_native, "cuda_torch_c_load", None)
    torch = sys.modules.get("torch")
    torch_c_codes.clear()
    if not on or load is None or torch is None or os.environ.get("ZYNTAX_TORCH_C") == "0":
        if load is not None:
            _native.cuda_torch_c_enable(False)
        return False
    try:
        codes = _torch_c_check(torch, load)
    except Exception:  # any surprise means the methods
        codes = None
    if not codes:
        _native.cuda_torch_c_enable(False)
        return False
    torch_c_codes.update(codes)
    on = bool(_native.cuda_torch_c_enable(True))
    _stream_tried.clear()
    torch_c_stream.clear()
    if on and torch.cuda.is_initialized():
        _stream_enable(torch)
    return on


def _stream_enable(torch: Any) -> bool:
    """Turns the launches' read of PyTorch's current stream through
    libtorch's C function (``aoti_torch_get_current_cuda_stream``) on where
    it gives what ``torch._C._cuda_getCurrentRawStream`` gives, on the
    current device's default stream and on a side stream (CUDA initialized:
    :func:`ensure` tries again later otherwise); returns whether it is on."""
    stream_on = getattr(_native, "cuda_torch_c_stream_enable", None)
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if stream_on is None or raw is None or torch.cuda.is_current_stream_capturing():
        return False  # (capturing: not now, the next plan tries again)
    _stream_tried.append(True)
    try:
        dev = torch.cuda.current_device()
        side = torch.cuda.Stream(dev)
        ok = _native.cuda_torch_c_stream(dev) == raw(dev)
        with torch.cuda.stream(side):
            ok = ok and _native.cuda_torch_c_stream(dev) == raw(dev) == side.cuda_stream
        ok = ok and _native.cuda_torch_c_stream(dev) == raw(dev)
    except Exception:  # any surprise means the Python function
        ok = False
    torch_c_stream[:] = [bool(stream_on(ok))]
    return torch_c_stream[0]


def _torch_c_check(torch: Any, load: Callable[[str, str], str | None]) -> dict[Any, int] | None:
    """The dtype codes when libtorch's C functions read and make tensors as
    the methods say (see :func:`torch_c_enable`), else None."""
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    paths = [os.path.join(lib, f"libtorch_{n}.so") for n in ("cpu", "python", "cuda")]
    if not os.path.exists(paths[2]) or not hasattr(_native, "cuda_torch_c_stream"):
        paths.pop()  # a CPU build of torch, or an extension without the stream function
    if load(*paths):
        return None  # a library or function is missing
    read, empty = _native.cuda_torch_c_read, _native.cuda_torch_c_empty
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64]
    dtypes += [torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]
    dtypes += [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]
    samples = [torch.empty((3, 5), dtype=d)[:, 1:4] for d in dtypes]  # offset and strides
    if torch.cuda.is_initialized():
        samples.append(torch.empty((4, 6), device="cuda").t())
    codes: dict[Any, int] = {}
    for t in samples:
        got = read(t, t._cdata)
        dev = t.get_device()
        want_type = 1 if dev >= 0 else 0  # c10::DeviceType CUDA, CPU
        if got is None or got[1:] != (want_type, dev, tuple(t.shape), t.stride(), t.data_ptr()):
            return None
        codes[t.dtype] = got[0]
    if len(set(codes.values())) != len(codes):
        return None
    made = [(empty([2, 3], [3, 1], codes[torch.float32], 0, -1), torch.float32, "cpu")]
    if torch.cuda.is_initialized():
        dev = torch.cuda.current_device()  # no context on another device
        made.append((empty([5, 2], [1, 5], codes[torch.bfloat16], 1, dev), torch.bfloat16, "cuda"))
    for (t, p), dtype, kind in made:
        shape, strides = ((2, 3), (3, 1)) if kind == "cpu" else ((5, 2), (1, 5))
        ok = type(t) is torch.Tensor and t.dtype is dtype and t.device.type == kind
        ok = ok and tuple(t.shape) == shape and t.stride() == strides and t.data_ptr() == p
        if not ok or t.requires_grad:
            return None
    return codes


def ensure() -> None:
    """:func:`torch_c_enable` the first time torch tensors are met once torch
    is imported (tests' stand-in tensors before that leave it untried), and
    the stream function's check once CUDA is initialized."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if not _torch_c_tried:
        _torch_c_tried.append(True)
        torch_c_enable()
    elif not _stream_tried and torch_c_codes and torch.cuda.is_initialized():
        _stream_enable(torch)
