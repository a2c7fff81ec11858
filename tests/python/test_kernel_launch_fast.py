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
    for _ in range(3):  # the guard is installed on the launcher's second launch
        launch(a, a)
    assert [e[0] for e in fake_gpu] == ["launch", "launch", "fast"]
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
