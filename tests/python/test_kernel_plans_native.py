"""The native replay of call plans (``_native.CudaCallPlans``, issue 25).

No GPU and no torch here: stand-in tensors with PyTorch's method names
(``dtype``, ``get_device()``, ``data_ptr()``, ``shape``, ``stride()``,
``new_empty``) take torch.Tensor's place (``_plans._torch_info`` patched),
and the recorded launches go to a Python stand-in launcher that logs its
arguments. A planned entry function feeds its recording what ``_tensors``
would (tensors, an allocation, an overlap check, a launch); the second call
is then answered natively, and every change the key must see (dtype, device,
layout, alignment, shape, stream, scalars) takes the full path again.
tests/python/gpu/test_launch_fast_gpu.py runs the real functions with
PyTorch tensors and real launchers.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

import numpy as np
import pytest

import zyntax
from zyntax import _native
from zyntax.kernels import _plans
from zyntax.kernels._tensors import Tensor

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "CudaCallPlans"), reason="extension without CudaCallPlans"
)

rng = np.random.default_rng()


class DType:
    def __init__(self, name: str, itemsize: int) -> None:
        self.name, self.itemsize = name, itemsize


F32, F16 = DType("f32", 4), DType("f16", 2)


def fresh_ptr() -> int:
    return int(rng.integers(1, 2**30)) * 256


class FakeTensor:
    """A CUDA tensor as the key reads it (PyTorch's method names)."""

    made: ClassVar[list[tuple[Any, Any]]] = []  # (new tensor, the tensor it was made from)

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: DType = F32,
        device: int = 0,
        ptr: int | None = None,
        strides: tuple[int, ...] | None = None,
    ) -> None:
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self.ptr = fresh_ptr() if ptr is None else ptr
        if strides is None:
            strides, acc = [], 1
            for d in reversed(self.shape):
                strides.insert(0, acc)
                acc *= d
        self.strides = tuple(strides)

    def get_device(self) -> int:
        return self.device

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def new_empty(self, shape: tuple[int, ...], dtype: DType | None = None) -> FakeTensor:
        t = FakeTensor(shape, dtype or self.dtype, self.device)
        FakeTensor.made.append((t, self))
        return t


class FakeKernel:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def prepare(self, grid: Any, block: Any, shared: Any, stream: Any) -> Any:
        def launcher(*args: Any) -> None:
            self.log.append((grid, block, shared, stream, list(args)))

        return launcher


def _view(obj: FakeTensor, name: str) -> Tensor:
    return Tensor(name, obj, obj.ptr, True, obj.dtype.name, obj.shape, obj.strides, obj.device)


class Setup:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, like: bool = False) -> None:
        self.stream = 0
        self.runs = 0
        self.log: list[Any] = []
        monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: self.stream))
        FakeTensor.made.clear()
        setup = self

        @_plans.planned
        def entry(x: Any, *, out: Any = None, eps: float = 1e-5, flag: Any = None) -> Any:
            """A softmax-like function: x in, out given or made like x."""
            setup.runs += 1
            # No recording when a value has no key: one that is thrown away.
            rec = _plans.recording() or _plans._Recording(())
            tx = _view(x, "x")
            rec.tensor(tx)
            if out is None:

                def again(obj: Any) -> tuple[Any, int]:
                    o = obj.new_empty(x.shape)
                    return o, o.data_ptr()

                again.torch_alloc = (x.shape, None)  # type: ignore[attr-defined]
                again.torch_like = like  # type: ignore[attr-defined]
                obj, _ = again(x)
                rec.alloc(obj, again, tx)
            else:
                obj = out
            to = _view(obj, "out")
            rec.tensor(to)
            nbytes = x.dtype.itemsize * int(np.prod(x.shape))
            if out is not None:
                if to.ptr < tx.ptr + nbytes and tx.ptr < to.ptr + nbytes:
                    raise zyntax.ArgumentError("argument 'out': overlaps argument 'x' in memory")
                rec.overlap(to, [tx], [(0, nbytes, "out"), (0, nbytes, "x")])
            args = [tx, to, eps, True]
            # Launch (as _tensors.launch_loaded does), then note it.
            k = FakeKernel(setup.log)
            k.prepare((x.shape[0],), 128, None, None)(tx.ptr, to.ptr, eps, True)
            rec.launch(k, (x.shape[0],), 128, 0, None, args)
            return obj

        self.entry = entry


def test_the_second_call_replays_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    n = int(rng.integers(1, 1000))
    x1 = FakeTensor((n,))
    o1 = s.entry(x1)
    assert s.runs == 1 and len(s.entry.plans) == 1  # type: ignore[attr-defined]
    x2 = FakeTensor((n,))
    o2 = s.entry(x2)
    assert s.runs == 1  # answered by the plan
    assert type(o2) is FakeTensor and o2 is not o1 and o2.shape == (n,)
    assert FakeTensor.made[-1] == (o2, x2)  # made like this call's x
    ((_, _, _, _, a1), (grid, block, shared, stream, a2)) = s.log
    assert a1 == [x1.ptr, o1.ptr, 1e-5, True]
    assert a2 == [x2.ptr, o2.ptr, 1e-5, True]
    assert (grid, block, shared, stream) == ((n,), 128, None, None)


def test_a_given_out_is_checked_for_overlap_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    n = 4 * int(rng.integers(2, 250))  # out 16 bytes earlier keeps its alignment (the key's)
    p = fresh_ptr()
    s.entry(FakeTensor((n,), ptr=p), out=FakeTensor((n,), ptr=p + 4 * n))
    q = fresh_ptr()
    o = FakeTensor((n,), ptr=q + 4 * n)
    assert s.entry(FakeTensor((n,), ptr=q), out=o) is o  # adjacent: no overlap
    assert s.runs == 1 and s.log[-1][-1][:2] == [q, q + 4 * n]
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        s.entry(FakeTensor((n,), ptr=q), out=FakeTensor((n,), ptr=q + 4 * n - 16))
    assert s.runs == 1 and len(s.log) == 2  # refused by the plan, nothing launched


def test_what_changes_the_kernel_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    p = fresh_ptr()
    s.entry(FakeTensor((8, 16), ptr=p))
    runs = s.runs
    changed = [
        FakeTensor((8, 16), dtype=F16, ptr=p),  # dtype (at the freed tensor's address)
        FakeTensor((8, 16), device=1, ptr=p),  # device
        FakeTensor((8, 16), ptr=p, strides=(1, 8)),  # layout
        FakeTensor((8, 16), ptr=p + 4),  # alignment
        FakeTensor((8, 17), ptr=p),  # shape
    ]
    for t in changed:
        s.entry(t)
        runs += 1
        assert s.runs == runs, t.__dict__
    # Each made its own plan: the same calls again are all hits.
    for t in changed:
        s.entry(FakeTensor(t.shape, t.dtype, t.device, t.ptr, t.strides))
    assert s.runs == runs
    # A new tensor at a reused address with the same geometry: just another call.
    s.entry(FakeTensor((8, 16), ptr=p))
    assert s.runs == runs and s.log[-1][-1][0] == p


def test_scalars_streams_and_names_are_keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    x = FakeTensor((4,))
    s.entry(x, eps=1e-5)
    s.entry(x, eps=2e-5)
    s.entry(x, eps=-0.0)
    s.entry(x, eps=0.0)
    assert s.runs == 4
    assert [e[-1][2] for e in s.log] == [1e-5, 2e-5, -0.0, 0.0]
    s.entry(x, flag=(1, None))
    s.entry(x, flag=(1, None))
    s.entry(x, flag=True)
    s.entry(x, flag=1)  # a bool is not an int
    assert s.runs == 7
    s.stream = 12345  # another current stream
    s.entry(x, eps=1e-5)
    assert s.runs == 8
    s.entry(x, flag=None, eps=1e-5)  # keyword order is part of the key
    s.entry(x, eps=1e-5, flag=None)
    assert s.runs == 10
    s.entry(x, eps=1e-5, flag=None)
    assert s.runs == 10


def test_values_without_a_key_take_the_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    cpu = FakeTensor((4,), device=-1)
    for _ in range(2):
        s.entry(cpu)
    s.entry(FakeTensor((4,)), flag=np.zeros(2))
    s.entry(FakeTensor((4,)), flag=np.zeros(2))
    assert s.runs == 4 and len(s.entry.plans) == 0  # type: ignore[attr-defined]


def test_one_tensor_twice_makes_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The recording could not tell which argument a kernel argument came from.
    s = Setup(monkeypatch)
    x = FakeTensor((4,))
    s.entry(x, flag=x)
    s.entry(x, flag=x)
    assert s.runs == 2 and len(s.entry.plans) == 0  # type: ignore[attr-defined]
    s.entry(x, flag=FakeTensor((4,)))
    s.entry(x, flag=FakeTensor((4,)))
    assert s.runs == 3 and len(s.entry.plans) == 1  # type: ignore[attr-defined]


def test_native_insert_refuses_a_malformed_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    plans = _native.CudaCallPlans(object(), lambda: (FakeTensor, lambda d: 0))
    key = plans.key((FakeTensor((4,)),), {})
    assert key is not None and key.addresses[0] is not None
    with pytest.raises(zyntax.ArgumentError, match="out of range"):
        plans.insert(key, 1, [], [], [(print, [("ptr", 5)])], [0], False)
    with pytest.raises(zyntax.ArgumentError, match="one result"):
        plans.insert(key, 1, [], [], [], [], False)
    assert plans.key((np.zeros(2),), {}) is None


def test_an_output_like_its_input_may_be_made_by_empty_like(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ("like", ...): torch.empty_like(x) where that is the same allocation as
    # x.new_empty(x.shape) (an extension without the kind: new_empty).
    made: list[Any] = []

    class FakeTorch:
        @staticmethod
        def empty_like(t: FakeTensor) -> FakeTensor:
            o = FakeTensor(t.shape, t.dtype, t.device)
            made.append((o, t))
            return o

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    s = Setup(monkeypatch, like=True)
    n = int(rng.integers(1, 1000))
    s.entry(FakeTensor((n,)))
    x = FakeTensor((n,))
    o = s.entry(x)
    assert s.runs == 1 and type(o) is FakeTensor and o.shape == (n,)
    assert (o, x) in made or (o, x) in FakeTensor.made
    assert s.log[-1][-1][:2] == [x.ptr, o.ptr]


def test_an_output_in_its_inputs_memory_order_is_never_made_by_new_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # _tensors.empty_like(keep_order=True) (attention's output): the
    # allocator has no torch_alloc, only torch_like, so the plan replays it
    # as torch.empty_like (the input's strides) and never as new_empty (C
    # order: other strides than the recorded launch's).
    made: list[Any] = []

    class FakeTorch:
        @staticmethod
        def empty_like(t: FakeTensor) -> FakeTensor:
            o = FakeTensor(t.shape, t.dtype, t.device, strides=t.strides)
            made.append((o, t))
            return o

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: 0))
    log: list[Any] = []

    @_plans.planned
    def entry(x: Any) -> Any:
        rec = _plans.recording() or _plans._Recording(())
        tx = _view(x, "x")
        rec.tensor(tx)

        def ordered(obj: Any) -> tuple[Any, int]:
            o = FakeTorch.empty_like(obj)
            return o, o.data_ptr()

        ordered.torch_like = True  # type: ignore[attr-defined]
        obj, _ = ordered(x)
        rec.alloc(obj, ordered, tx)
        to = _view(obj, "out")
        rec.tensor(to)
        k = FakeKernel(log)
        k.prepare((1,), 32, None, None)(tx.ptr, to.ptr, *to.strides)
        rec.launch(k, (1,), 32, 0, None, [tx, to, *to.strides])
        return obj

    b, h, s, d = (int(v) for v in rng.integers(2, 9, 4))
    permuted = (s * h * d, d, h * d, 1)  # (b, h, s, d) laid out as (b, s, h, d)
    entry(FakeTensor((b, h, s, d), strides=permuted))
    x = FakeTensor((b, h, s, d), strides=permuted)
    o = entry(x)
    assert len(entry.plans) == 1 and made[-1] == (o, x)  # type: ignore[attr-defined]
    assert o.strides == permuted and not [t for t, _ in FakeTensor.made if t is o]
    assert log[-1][-1] == [x.ptr, o.ptr, *permuted]


def test_an_output_may_be_made_by_a_prepared_call() -> None:
    # ("args", like, f, args, kwargs): f(*args, **kwargs) prepared once (as
    # torch.empty(shape, dtype=, device=)), its data_ptr() the launch's address.
    made: list[tuple[Any, Any]] = []

    def empty(shape: tuple[int, ...], *, dtype: DType, device: int) -> FakeTensor:
        o = FakeTensor(shape, dtype, device)
        made.append((o, (shape, dtype, device)))
        return o

    log: list[Any] = []
    plans = _native.CudaCallPlans(object(), lambda: (FakeTensor, lambda d: 0))
    n = int(rng.integers(1, 1000))
    x = FakeTensor((n,), F16)
    key = plans.key((x,), {})
    alloc = ("args", 0, empty, ((n, 2),), {"dtype": F32, "device": 0})
    launches = [(lambda *a: log.append(a), [("ptr", 0), ("ptr", 1), ("const", n)])]
    plans.insert(key, 1, [alloc], [], launches, [1], False)
    y = FakeTensor((n,), F16)
    o = plans.lookup((y,), {})
    assert type(o) is FakeTensor and made == [(o, ((n, 2), F32, 0))]
    assert log == [(y.ptr, o.ptr, n)]
    with pytest.raises(zyntax.ArgumentError, match="kwargs must be a dict"):
        key = plans.key((x,), {})
        plans.insert(key, 1, [("args", 0, empty, ((n,),), [1])], [], launches, [1], False)


def test_an_output_of_another_shape_is_made_by_empty_strided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An allocator with torch_strided (and not torch_like) replays natively as
    # torch.empty_strided(shape, strides, dtype=, device=) prepared once.
    made: list[Any] = []

    class FakeTorch:
        @staticmethod
        def empty_strided(
            shape: tuple[int, ...], strides: tuple[int, ...], *, dtype: DType, device: int
        ) -> FakeTensor:
            o = FakeTensor(shape, dtype, device, strides=strides)
            made.append((o, shape, strides, dtype, device))
            return o

    monkeypatch.setitem(sys.modules, "torch", FakeTorch)
    monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: 0))
    log: list[Any] = []
    runs = [0]

    @_plans.planned
    def entry(x: Any) -> Any:  # one f32 value per row of x (as cross_entropy's losses)
        runs[0] += 1
        rec = _plans.recording() or _plans._Recording(())
        tx = _view(x, "x")
        rec.tensor(tx)
        rows = x.shape[0]

        def again(obj: Any) -> tuple[Any, int]:
            o = obj.new_empty((rows,), dtype=F32)
            return o, o.data_ptr()

        again.torch_alloc = ((rows,), F32)  # type: ignore[attr-defined]
        again.torch_strided = ((rows,), (1,), F32, x.device)  # type: ignore[attr-defined]
        obj, _ = again(x)
        rec.alloc(obj, again, tx)
        to = _view(obj, "out")
        rec.tensor(to)
        k = FakeKernel(log)
        k.prepare((rows,), 32, None, None)(tx.ptr, to.ptr, rows)
        rec.launch(k, (rows,), 32, 0, None, [tx, to, rows])
        return obj

    rows, cols = (int(v) for v in rng.integers(1, 300, 2))
    entry(FakeTensor((rows, cols), F16))
    x = FakeTensor((rows, cols), F16)
    o = entry(x)
    assert runs[0] == 1 and made == [(o, (rows,), (1,), F32, 0)]
    assert log[-1][-1] == [x.ptr, o.ptr, rows]


def _knob_entry(monkeypatch: pytest.MonkeyPatch, module: Any, knob: str) -> tuple[Any, list[Any]]:
    """A planned entry function whose launch depends on `module.knob`, read
    at call time as kernel modules read their switches (the value goes into
    the launch as a constant, standing for the kernel it selects)."""
    monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: 0))
    log: list[Any] = []

    @_plans.planned
    def entry(x: Any) -> Any:
        rec = _plans.recording() or _plans._Recording(())
        tx = _view(x, "x")
        rec.tensor(tx)
        chosen = getattr(module, knob)
        k = FakeKernel(log)
        k.prepare((1,), 32, None, None)(tx.ptr, chosen)
        rec.launch(k, (1,), 32, 0, None, [tx, chosen])
        return x

    return entry, log


def test_a_knob_set_from_outside_forgets_the_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    # The plan-key bug of session 13: a plan replayed the kernel its knob
    # selected when it was recorded, whatever the knob said now.
    from zyntax.kernels import attention_bwd_sm90, rows_tile

    for module, knob in ((rows_tile, "PER_THREAD"), (attention_bwd_sm90, "SPLIT_KEYS")):
        entry, log = _knob_entry(monkeypatch, module, knob)
        before = getattr(module, knob)
        after = int(rng.integers(2, 1000)) if type(before) is int else not before
        x = FakeTensor((int(rng.integers(1, 100)),))
        entry(x)
        entry(x)
        assert len(entry.plans) == 1 and len(log) == 2  # type: ignore[attr-defined]
        with monkeypatch.context() as m:
            m.setattr(module, knob, after)
            assert len(entry.plans) == 0  # type: ignore[attr-defined]
            entry(x)
            entry(x)  # the plan recorded under the new value
            assert [a[1] for *_, a in log[2:]] == [after, after]
        entry(x)  # the undo is an assignment too: the old kernel again
        assert log[-1][-1] == [x.ptr, before]
        setattr(module, knob, after)  # a plain assignment (restored below)
        try:
            entry(x)
            assert log[-1][-1] == [x.ptr, after]
        finally:
            setattr(module, knob, before)


def test_knobs_clear_the_caches_that_read_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # gemm_tile.ws_schedule reads WS_FORCE; gemm's own plans hold a variant's
    # kernel. A module imported after the package (attention_decode is
    # imported on its first call) is watched from its import on.
    import importlib

    from zyntax import kernels
    from zyntax.kernels import gemm, gemm_tile

    gemm_tile.ws_schedule.cache_clear()
    gemm_tile.ws_schedule(128, 128, 128, 132)
    gemm._plans[("stale",)] = None
    monkeypatch.setattr(gemm_tile, "WS_FORCE", ((128, 128, 8, 3), 1, 0))
    assert gemm_tile.ws_schedule.cache_info().currsize == 0 and not gemm._plans
    assert gemm_tile.ws_schedule(128, 128, 128, 132)[0][:2] == (128, 128)
    decode = importlib.import_module("zyntax.kernels.attention_decode")
    assert type(decode) is type(kernels) is _plans._KnobModule
    entry, _ = _knob_entry(monkeypatch, decode, "DECODE_MAX_Q")
    entry(FakeTensor((4,)))
    monkeypatch.setattr(decode, "DECODE_MAX_Q", 1)
    assert len(entry.plans) == 0  # type: ignore[attr-defined]
    # The private modules hold no knobs (tests patch them): not watched.
    assert type(_plans) is not _plans._KnobModule


def test_a_fixed_tensor_is_a_constant_of_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # A workspace the call writes and nobody reads (attention's LSE when it
    # is not returned): neither an argument nor an output, yet a plan.
    from zyntax.kernels import _tensors as T

    monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: 0))
    log: list[Any] = []
    ws, runs = fresh_ptr(), [0]

    @_plans.planned
    def entry(x: Any) -> Any:
        runs[0] += 1
        rec = _plans.recording() or _plans._Recording(())
        tx = _view(x, "x")
        rec.tensor(tx)
        scratch = T.fixed(None, ws, "lse", "f32", (x.shape[0], 3), 0)
        assert scratch.ptr == ws and scratch.strides == (3, 1)
        k = FakeKernel(log)
        k.prepare((1,), 32, None, None)(tx.ptr, scratch.ptr)
        rec.launch(k, (1,), 32, 0, None, [tx, scratch])
        return x

    entry(FakeTensor((5,)))
    x = FakeTensor((5,))
    entry(x)
    assert runs[0] == 1 and log[-1][-1] == [x.ptr, ws]  # the second call: the plan


def test_importing_a_kernel_module_forgets_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # A submodule imported on a first call (attention_decode, torch_ops)
    # sets the package's attribute: no knob, so the plans stay.
    import zyntax.kernels as package
    from zyntax.kernels import rows_tile

    entry, _ = _knob_entry(monkeypatch, rows_tile, "PER_THREAD")
    entry(FakeTensor((4,)))
    setattr(package, "rows_tile", rows_tile)  # noqa: B010 - as the import system does
    assert len(entry.plans) == 1  # type: ignore[attr-defined]
