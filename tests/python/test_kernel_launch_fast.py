"""The ``kern[grid, block](*args)`` hot path (generated per-signature guards).

No GPU here: the driver side is replaced by a recorder standing in for
``zyntax.cuda.Kernel`` (``launch`` and ``prepare``) and device arrays by a
class with the attributes the front-end reads. Everything above the driver
(dispatch, translation, the binder, the generated guards) is the real code.
The GPU run of the same path is tests/python/gpu/test_kernels_gpu.py and
benches/frontend.py ``launch_overhead``.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import lang
from zyntax.frontend import errors, pipeline

K = importlib.import_module("zyntax.frontend.kernel")


class FakeDeviceArray:
    """A device array's metadata (what ``zyntax.cuda.DeviceArray`` exposes)."""

    __slots__ = ("dtype", "itemsize", "shape", "strides", "typestr")

    def __init__(self, shape: tuple[int, ...], dtype: Any, strides: tuple[int, ...] | None = None):
        d = np.dtype(dtype)
        self.dtype = d
        self.shape = shape
        self.itemsize = d.itemsize
        self.typestr = d.str
        if strides is None:
            strides = tuple(int(s) for s in np.empty(shape, d).strides)
        self.strides = strides


class Recorder:
    """Stands in for a loaded ``zyntax.cuda.Kernel``; logs what would reach the driver."""

    def __init__(self, specs: tuple[Any, ...], log: list[tuple[Any, ...]]) -> None:
        self.specs = specs
        self.log = log

    def launch(
        self, grid: Any, block: Any, *args: Any, shared_mem: Any = None, stream: Any = None
    ) -> None:
        self.log.append(("launch", self.specs, grid, block, shared_mem, stream, list(args)))

    def prepare(self, grid: Any, block: Any, shared_mem: Any = None, stream: Any = None) -> Any:
        def call(*args: Any) -> None:
            self.log.append(("fast", self.specs, grid, block, shared_mem, stream, list(args)))

        return call


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    log: list[tuple[Any, ...]] = []

    class FakeModule:
        def __init__(self, hir: str) -> None:
            self.hir = hir

    def load_module(ptx: str, hir: str = "") -> Any:
        return FakeModule(hir)

    def run_gpu(v: Any, args: Any, g: Any, b: Any, shared_mem: int, stream: Any) -> None:
        # pipeline.run_gpu minus PTX and the driver: same binder, same native call.
        if "gpu" not in v.native:
            v.native["gpu"] = Recorder(v.specs, log)
        flat = v.binder(list(args))
        v.native["gpu"].launch(g, b, *flat, shared_mem=shared_mem or None, stream=stream)

    monkeypatch.setattr(K, "_DEVICE_ARRAY", [FakeDeviceArray])
    monkeypatch.setattr(pipeline, "gpu_available", lambda: True)
    monkeypatch.setattr(pipeline, "run_gpu", run_gpu)
    return log


def _mixed_kernel() -> Any:
    @zyntax.kernel
    def mixed(x, y, n, big, s, flag, h):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n and flag and big > 0:
            y[i] = x[i, 0] * s + h

    return mixed


def _tiny() -> Any:
    @zyntax.kernel
    def tiny(a, out):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < len(out):
            out[i] = a[i] + a[i]

    return tiny


def test_fast_path_passes_the_same_flat_args_as_the_slow_path(fake_gpu: list[Any]) -> None:
    rng = np.random.default_rng(7)
    k = _mixed_kernel()
    launch = k[(3, 2), 128, 64]
    for _ in range(3):
        rows, cols = (int(v) for v in rng.integers(2, 9, size=2))
        # x: a non-contiguous 2-D view (every other column), y contiguous.
        x = FakeDeviceArray((rows, cols), np.float32, strides=(cols * 8, 8))
        y = FakeDeviceArray((rows,), np.float32)
        args = (
            x,
            y,
            int(rng.integers(1, 1000)),
            int(rng.integers(2**40, 2**50)),  # an i64
            float(rng.uniform(0.5, 2.0)),
            True,
            np.float32(rng.uniform(1.0, 3.0)),
        )
        fake_gpu.clear()
        launch(*args)  # first time for these values: either path
        launch(*args)
        launch(*args)
        kinds = [e[0] for e in fake_gpu]
        assert (kinds[-1] == "fast" and "launch" in kinds) or kinds == ["fast"] * 3
        slow = K.Kernel._launch  # the general path, for comparison
        fake_gpu.clear()
        k._hot = None  # force the dispatcher and the binder
        slow(k, args, (3, 2, 1), (128, 1, 1), 64, None, None)
        assert [e[0] for e in fake_gpu] == ["launch"]
        want = fake_gpu[0]
        fake_gpu.clear()
        launch(*args)
        got = fake_gpu[-1]
        assert got[0] == "fast"
        # Same kernel variant, configuration and flat arguments.
        assert got[1:] == want[1:]
        flat = want[-1]
        assert flat[0] is x and flat[1:5] == [rows, cols, cols * 2, 2]
        assert flat[5] is y and flat[6:8] == [rows, 1]
        assert flat[8:] == list(args[2:])


def test_changing_dtype_redispatches(fake_gpu: list[Any]) -> None:
    k = _tiny()
    launch = k[1, 256]
    f4 = (FakeDeviceArray((256,), np.float32), FakeDeviceArray((256,), np.float32))
    f8 = (FakeDeviceArray((256,), np.float64), FakeDeviceArray((256,), np.float64))
    i4 = (FakeDeviceArray((16,), np.int32), FakeDeviceArray((16,), np.int32))
    for args in [f4, f4, f8, f8, f4, i4, f8, i4, f4]:
        fake_gpu.clear()
        launch(*args)
        (entry,) = fake_gpu
        spec = entry[1][0]
        assert spec.dtype.name == {"f4": "f32", "f8": "f64", "i4": "i32"}[args[0].typestr[1:]]
        assert entry[-1][0] is args[0]
    assert len(k.signatures) == 3
    # All three signatures are on the hot path now.
    for args in [f8, i4, f4]:
        fake_gpu.clear()
        launch(*args)
        assert [e[0] for e in fake_gpu] == ["fast"]


def test_int_range_and_layout_changes_redispatch(fake_gpu: list[Any]) -> None:
    @zyntax.kernel
    def scale(a, n):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n:
            a[i, 0] = a[i, 0] * 2.0

    launch = scale[1, 32]
    c = FakeDeviceArray((8, 4), np.float32)
    strided = FakeDeviceArray((8, 4), np.float32, strides=(32, 8))
    for args in [(c, 5), (c, 5), (c, 2**40), (strided, 5), (c, 5), (strided, 2**40)]:
        fake_gpu.clear()
        launch(*args)
        (entry,) = fake_gpu
        arr, n = entry[1]
        assert str(n) == ("i32" if args[1] < 2**31 else "i64")
        assert arr.layout == ("C" if args[0] is c else "A")
    assert len(scale.signatures) == 4


def test_changing_dtype_on_the_interpreter() -> None:
    k = zyntax.kernel(device="cpu")(_tiny().pyfunc)
    launch = k[2, 64]
    rng = np.random.default_rng(3)
    for dt in [np.float32, np.float64, np.float32, np.int32]:
        a = (rng.uniform(1, 100, size=100)).astype(dt)
        out = np.zeros_like(a)
        launch(a, out)
        np.testing.assert_array_equal(out, a + a)
    assert len(k.signatures) == 3


def test_wrong_args_after_the_fast_path_still_explain(fake_gpu: list[Any]) -> None:
    k = _tiny()
    launch = k[1, 256]
    a = FakeDeviceArray((256,), np.float32)
    for _ in range(3):  # a cached launcher installs the guard at its first launch
        launch(a, a)
    assert [e[0] for e in fake_gpu] == ["launch", "fast", "fast"]
    with pytest.raises(errors.KernelArgumentError) as info:
        launch(a)
    msg = str(info.value)
    assert "takes 2 argument(s) (a, out) but 1 were given" in msg
    assert "def tiny(a, out):" in msg and "^" in msg
    with pytest.raises(errors.KernelArgumentError) as info:
        launch(a, "out")
    msg = str(info.value)
    assert "argument 'out'" in msg and "cannot pass str" in msg and "^" in msg
    with pytest.raises(errors.KernelArgumentError, match="3 dimensions"):
        launch(a, FakeDeviceArray((2, 2, 2, 2), np.float32))


def test_launchers_are_cached_per_exact_config(fake_gpu: list[Any]) -> None:
    k = _tiny()
    assert k[1, 256] is k[1, 256]
    assert k[(2, 2), 256] is k[(2, 2), 256]
    assert k[1, 256] is not k[1, 128]
    # 1.0 == 1, but a float grid is still an error, not the cached launcher.
    with pytest.raises(errors.KernelArgumentError, match="grid"):
        k[1.0, 256]
    a = FakeDeviceArray((256,), np.float32)
    k[[1, 1], [256]](a, a)  # lists: valid, not cached
    assert fake_gpu[-1][2:4] == ((1, 1, 1), (256, 1, 1))


def test_one_shot_launchers_build_no_guard(
    fake_gpu: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    real = K._fast_launch_factory

    def counting(key: Any, args: Any) -> Any:
        built.append(key)
        return real(key, args)

    monkeypatch.setattr(K, "_fast_launch_factory", counting)
    k = _tiny()
    a = FakeDeviceArray((256,), np.float32)
    for _ in range(4):
        k[[1], 256](a, a)  # a list config is not cached: a new launcher each time
    assert built == [] and [e[0] for e in fake_gpu] == ["launch"] * 4
    for _ in range(3):
        k[1, 256](a, a)
    assert len(built) == 1 and [e[0] for e in fake_gpu][-1] == "fast"


def test_host_dlpack_tensor_is_refused_by_name() -> None:
    # A DLPack object in host memory (not a numpy array) names the argument,
    # on machines with or without a GPU.
    class HostTensor:
        def __init__(self, a: np.ndarray) -> None:
            self._a = a

        def __dlpack__(self, **kw: object) -> object:
            return self._a.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)  # kDLCPU

    @zyntax.kernel
    def copy1(src: zyntax.Array[zyntax.f32, 1], dst: zyntax.Array[zyntax.f32, 1]):
        i = zyntax.lang.thread_idx.x
        dst[i] = src[i]

    with pytest.raises(zyntax.ZyntaxError, match=r"argument 'src'.*not in CUDA device memory"):
        copy1[1, 32](HostTensor(np.ones(32, np.float32)), np.zeros(32, np.float32))


# --------------------------------------------------------------------------- PyTorch tensors
#
# The hot path reads PyTorch tensors natively (``zyntax.cuda.ArgPlan``: their
# ``dtype``, ``get_device()``, ``shape``, ``stride()`` and ``data_ptr()``). A
# stand-in class with those methods takes torch.Tensor's place; the slow path's
# adoption (a DeviceArray view through ``__cuda_array_interface__``, which
# needs a driver) is replaced by a FakeDeviceArray of the same metadata.


class FakeTorchTensor:
    """What the launch path reads of a torch tensor (strides in elements)."""

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        ptr: int,
        device: int = 0,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        self.np_dtype = np.dtype(dtype)
        self.dtype = _TORCH_DTYPES[self.np_dtype.name]  # one object per dtype, as torch's
        self.shape = shape
        self._ptr = ptr
        self._device = device
        if strides is None:
            strides = tuple(
                int(s) // self.np_dtype.itemsize for s in np.empty(shape, dtype).strides
            )
        self._strides = strides

    def get_device(self) -> int:
        return self._device

    def stride(self) -> tuple[int, ...]:
        return self._strides

    def data_ptr(self) -> int:
        return self._ptr

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self._device) if self._device >= 0 else (1, 0)  # kDLCUDA / kDLCPU


class _TorchDtype:
    def __init__(self, name: str) -> None:
        self.name = name


_TORCH_DTYPES = {n: _TorchDtype(n) for n in ("float32", "float64", "int32")}


def _as_device_array(t: FakeTorchTensor) -> FakeDeviceArray:
    item = t.np_dtype.itemsize
    return FakeDeviceArray(t.shape, t.np_dtype, tuple(s * item for s in t.stride()))


@pytest.fixture
def fake_torch(fake_gpu: list[Any], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    real_adopt = K._adopt_foreign

    def adopt(args: tuple[Any, ...], names: Any) -> tuple[Any, ...]:
        if any(isinstance(a, FakeTorchTensor) and a.get_device() < 0 for a in args):
            return real_adopt(args, names)  # the real refusal of host memory
        out = tuple(_as_device_array(a) if isinstance(a, FakeTorchTensor) else a for a in args)
        return args if out == args else out

    monkeypatch.setattr(K, "_adopt_foreign", adopt)
    monkeypatch.setattr(K, "_TORCH_TENSOR", [FakeTorchTensor])
    monkeypatch.setattr(K, "_RAW_STREAM", [lambda device: 0])  # the legacy default stream
    return fake_gpu


def _needs_arg_plan() -> None:
    if not hasattr(zyntax._native, "CudaArgPlan"):
        pytest.skip("an extension built without the CUDA runtime")


def test_torch_fast_path_passes_the_same_flat_args_as_the_slow_path(fake_torch: list[Any]) -> None:
    _needs_arg_plan()
    rng = np.random.default_rng()
    k = _mixed_kernel()
    launch = k[(3, 2), 128, 64]
    for _ in range(3):
        rows, cols = (int(v) for v in rng.integers(2, 9, size=2))
        ptr = int(rng.integers(1, 2**40)) * 256
        x = FakeTorchTensor((rows, cols), np.float32, ptr, strides=(cols * 2, 2))
        y = FakeTorchTensor((rows,), np.float32, ptr + 2**30)
        scalars = (
            int(rng.integers(1, 1000)),
            int(rng.integers(2**40, 2**50)),
            float(rng.uniform(0.5, 2.0)),
            True,
            np.float32(rng.uniform(1.0, 3.0)),
        )
        fake_torch.clear()
        for _ in range(3):
            launch(x, y, *scalars)
        assert fake_torch[-1][0] == "fast"
        got = fake_torch[-1]
        fake_torch.clear()
        k._hot = None  # the general path, for comparison
        K.Kernel._launch(k, (x, y, *scalars), (3, 2, 1), (128, 1, 1), 64, None, None)
        (want,) = fake_torch
        assert want[0] == "launch" and got[1:6] == want[1:6]  # variant and configuration
        flat, slow = got[-1], want[-1]
        # The address where the slow path passes its DeviceArray view, the rest equal.
        assert flat[0] == ptr and flat[5] == ptr + 2**30
        assert flat[1:5] == slow[1:5] == [rows, cols, cols * 2, 2]
        assert flat[6:8] == slow[6:8] == [rows, 1]
        assert flat[8:] == slow[8:] == list(scalars)
        assert type(flat[-1]) is np.float32


def _kinds(log: list[Any]) -> list[str]:
    return [e[0] for e in log]


def test_torch_tensor_changing_dtype_or_layout_never_takes_a_stale_plan(
    fake_torch: list[Any],
) -> None:
    _needs_arg_plan()
    k = _tiny()
    launch = k[1, 256]
    f4 = FakeTorchTensor((256,), np.float32, 4096)
    f8 = FakeTorchTensor((256,), np.float64, 8192)
    i4 = FakeTorchTensor((64,), np.int32, 8192)
    strided = FakeTorchTensor((128,), np.float32, 4096, strides=(2,))
    for _ in range(3):
        launch(f4, f4)
    assert _kinds(fake_torch)[-1] == "fast"
    for t, want, layout in [(f8, "f64", "C"), (i4, "i32", "C"), (strided, "f32", "A")]:
        fake_torch.clear()
        launch(t, t)
        (entry,) = fake_torch
        spec = entry[1][0]
        assert (str(spec.dtype), spec.layout) == (want, layout)
        assert entry[0] == "launch"  # the slow path chose the variant
    # Back to the first signature: its fast path, with the right variant.
    fake_torch.clear()
    launch(f4, f4)
    assert _kinds(fake_torch) == ["fast"] and str(fake_torch[0][1][0].dtype) == "f32"


def test_torch_tensor_changing_device_takes_the_slow_path(fake_torch: list[Any]) -> None:
    _needs_arg_plan()
    k = _tiny()
    launch = k[1, 256]
    on0 = FakeTorchTensor((256,), np.float32, 4096, device=0)
    on1 = FakeTorchTensor((256,), np.float32, 4096, device=1)
    for _ in range(3):
        launch(on0, on0)
    fake_torch.clear()
    launch(on1, on0)  # the same address and dtype on another device: not the plan of device 0
    assert _kinds(fake_torch) == ["launch"]
    host = FakeTorchTensor((256,), np.float32, 4096, device=-1)
    with pytest.raises(
        errors.KernelArgumentError, match=r"argument 'a'.*not in CUDA device memory"
    ):
        launch(host, on0)


def test_a_reused_address_reads_the_new_tensor(fake_torch: list[Any]) -> None:
    # Plans are keyed by dtype, rank, contiguity and device, never by address:
    # a tensor allocated where a freed one was is read afresh (its extents,
    # strides), and one of another dtype at that address dispatches anew.
    _needs_arg_plan()
    rng = np.random.default_rng()
    k = _tiny()
    launch = k[1, 256]
    addr = int(rng.integers(1, 2**30)) * 512
    for _ in range(3):
        launch(FakeTorchTensor((256,), np.float32, addr), FakeTorchTensor((256,), np.float32, 0))
    n = int(rng.integers(2, 200))
    fake_torch.clear()
    again = FakeTorchTensor((n,), np.float32, addr)
    launch(again, again)
    (entry,) = fake_torch
    assert entry[0] == "fast" and entry[-1] == [addr, n, 1, addr, n, 1]
    fake_torch.clear()
    launch(FakeTorchTensor((n,), np.int32, addr), FakeTorchTensor((n,), np.int32, addr))
    (entry,) = fake_torch
    assert entry[0] == "launch" and str(entry[1][0].dtype) == "i32"


def test_arg_plan_reads_and_misses() -> None:
    _needs_arg_plan()
    plan_type = zyntax._native.CudaArgPlan
    f32 = _TORCH_DTYPES["float32"]
    plan = plan_type(
        [
            ("tensor", FakeTorchTensor, f32, 2, True, 0, "<f4"),
            ("i32",),
            ("i64",),
            ("f32",),
            ("bool",),
            ("exact", np.float32),
        ]
    )
    assert plan.flat_len == 10
    rng = np.random.default_rng()
    rows, cols = (int(v) for v in rng.integers(1, 50, size=2))
    t = FakeTorchTensor((rows, cols), np.float32, 1 << 20)
    h = np.float32(rng.uniform())
    ok = (t, 7, 2**40, 0.5, False, h)
    got = plan.read(ok)
    assert got == [1 << 20, rows, cols, cols, 1, 7, 2**40, 0.5, False, h] and got[-1] is h
    for bad in [
        ok[:5],  # arity
        (FakeTorchTensor((rows, cols), np.float64, 1 << 20), *ok[1:]),  # dtype
        (FakeTorchTensor((rows, cols), np.float32, 1 << 20, device=1), *ok[1:]),  # device
        (FakeTorchTensor((rows, cols), np.float32, 1 << 20, device=-1), *ok[1:]),  # host
        (FakeTorchTensor((rows, cols, 1), np.float32, 1 << 20), *ok[1:]),  # rank
        (FakeTorchTensor((rows, 4), np.float32, 0, strides=(8, 2)), *ok[1:]),  # layout
        (t, 2**40, 2**40, 0.5, False, h),  # an i64 where the plan has an i32
        (t, 7, 7, 0.5, False, h),  # and the other way
        (t, True, 2**40, 0.5, False, h),  # a bool is not an int
        (t, 7, 2**40, 1, False, h),  # an int is not a float
        (t, 7, 2**40, 0.5, 0, h),
        (t, 7, 2**40, 0.5, False, np.float64(1.0)),
        (np.zeros((rows, cols), np.float32), *ok[1:]),
    ]:
        assert plan.read(bad) is None
    for slots in [
        [("tensor", FakeTorchTensor, f32, 4, True, 0, None)],
        [("array", "<f4", 1)],
        [("nope",)],
        ["i32"],
        ("i32",),
        [("exact", 3)],
    ]:
        with pytest.raises(zyntax.ArgumentError, match="ArgPlan"):
            plan_type(slots)


@zyntax.kernel
def _bump(x):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < len(x):
        x[i] = x[i] + 1.0


def test_launchers_are_kept_per_exact_configuration() -> None:
    # k[grid, block] is answered by the native base (KernelLaunchers) from
    # the launchers made before; 1.0 or True never find the launcher of 1
    # (the full path refuses or checks them), and a stream is never kept.
    if not hasattr(_bump, "cached_launchers"):
        pytest.skip("extension without KernelLaunchers")
    x = np.zeros(int(np.random.default_rng().integers(2, 50)), np.float32)
    n = len(x)
    first = _bump[1, n]
    assert _bump[1, n] is first and _bump[(1,), (n,)] is not first
    first(x)
    _bump[1, n](x)
    assert np.array_equal(x, np.full(n, 2.0, np.float32))
    kept = _bump.cached_launchers
    for bad in (1.0, True):
        with pytest.raises(errors.KernelArgumentError, match="grid must be an int"):
            _bump[bad, n]
    assert _bump.cached_launchers == kept
    assert _bump[1, n, 0, object()] is not _bump[1, n, 0, object()]
    assert _bump.cached_launchers == kept
    for g in range(1, 70):  # more than the table keeps: it starts over, still answering
        assert _bump[g, n] is _bump[g, n]
    assert 0 < _bump.cached_launchers <= 64
