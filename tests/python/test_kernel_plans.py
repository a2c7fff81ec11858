"""Call plans of the ``zyntax.kernels`` functions (``zyntax.kernels._plans``).

No GPU here: a recording is fed what ``_tensors`` tells it during a call
(tensors, allocations, overlap checks, launches) with stand-ins for the loaded
kernel and the allocator; the plan it makes is then replayed with new
addresses. tests/python/gpu/test_launch_fast_gpu.py runs the real functions
with PyTorch tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax.kernels import _plans
from zyntax.kernels._tensors import Tensor

rng = np.random.default_rng()


class FakeKernel:
    """A loaded kernel: ``prepare`` gives a launcher that logs its arguments."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def prepare(self, grid: Any, block: Any, shared: Any, stream: Any) -> Any:
        def launcher(*args: Any) -> None:
            self.log.append((grid, block, shared, stream, list(args)))

        return launcher


class Obj:
    """An argument object (what the caller passed)."""


def _tensor(obj: Any, name: str, ptr: int, n: int) -> Tensor:
    return Tensor(name, obj, ptr, True, "f32", (n,), (1,), 0)


def _record(n: int, x_ptr: int, out_given: bool) -> tuple[Any, Any, Any, list[Any]]:
    """Records a softmax-like call: x (an argument), out (given or allocated)."""
    log: list[Any] = []
    x, out = Obj(), Obj()
    values = (x, out if out_given else None, 1.5)
    rec = _plans._Recording(values)
    allocated: list[tuple[Any, int]] = []  # (the object it was made like, address)

    def again(like: Any) -> tuple[Any, int]:
        p = int(rng.integers(1, 2**30)) * 256
        allocated.append((like, p))
        return Obj(), p

    tx = _tensor(x, "x", x_ptr, n)
    rec.tensor(tx)
    if not out_given:
        out = Obj()
        rec.alloc(out, again, tx)
    to = _tensor(out, "out", x_ptr + 4 * n if out_given else 2**40, n)
    rec.tensor(to)
    if out_given:
        rec.overlap(to, [tx], [(0, 4 * n, "out"), (0, 4 * n, "x")])
    rec.launch(FakeKernel(log), (n,), 128, 0, None, [tx, to, n, 1.5, True])
    return rec, out, allocated, log


def test_a_plan_replays_with_the_new_addresses() -> None:
    n = int(rng.integers(1, 1000))
    rec, out, allocated, log = _record(n, 4096, out_given=False)
    plan = rec.plan(out)
    assert plan is not None and not log  # recording launches nothing itself
    x2 = Obj()
    p2 = int(rng.integers(1, 2**30)) * 256
    got = plan((x2, None, 1.5), [p2, None, None])
    assert type(got) is Obj and got is not out  # a fresh output per call
    ((grid, block, shared, stream, args),) = log
    assert (grid, block, shared, stream) == ((n,), 128, None, None)
    assert args == [p2, allocated[-1][1], n, 1.5, True]
    assert allocated[-1][0] is x2  # made like this call's x


def test_a_given_out_is_rechecked_for_overlap_on_every_call() -> None:
    n = int(rng.integers(2, 1000))
    rec, out, allocated, log = _record(n, 4096, out_given=True)
    plan = rec.plan(out)
    assert plan is not None and not allocated
    x2, o2 = Obj(), Obj()
    px = int(rng.integers(1, 2**30)) * 256
    assert plan((x2, o2, 1.5), [px, px + 4 * n, None]) is o2  # adjacent: no overlap
    assert log[-1][-1][:2] == [px, px + 4 * n]
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        plan((x2, o2, 1.5), [px, px + 4 * (n - 1), None])
    assert len(log) == 1  # nothing launched for the refused call


def test_what_cannot_be_replayed_makes_no_plan() -> None:
    n = 64
    # An argument of unknown provenance (a tensor made from something that is
    # neither an argument nor a recorded allocation).
    rec, out, _, _ = _record(n, 4096, out_given=True)
    rec.tensor(_tensor(Obj(), "tmp", 8192, n))
    assert rec.plan(out) is None
    # A launch argument that is an object (not a Tensor, map or scalar).
    rec, out, _, _ = _record(n, 4096, out_given=True)
    rec.launch(FakeKernel([]), 1, 32, 0, None, [np.zeros(3)])
    assert rec.plan(out) is None
    # An int equal to a tensor's address: it would be stale on the next call.
    rec, out, _, _ = _record(n, 4096, out_given=True)
    rec.launch(FakeKernel([]), 1, 32, 0, None, [4096])
    assert rec.plan(out) is None
    # No launch at all (e.g. a kernel launched past _tensors).
    rec = _plans._Recording((Obj(),))
    assert rec.plan(rec.values[0]) is None
    # A result that is not an argument or an allocation.
    rec, _, _, _ = _record(n, 4096, out_given=True)
    assert rec.plan(Obj()) is None
    # An allocation that cannot be repeated, or made like an unknown tensor.
    rec, out, _, _ = _record(n, 4096, out_given=True)
    rec.alloc(Obj(), None, rec.tensors[0])
    assert rec.plan(out) is None
    rec, out, _, _ = _record(n, 4096, out_given=True)
    rec.alloc(Obj(), lambda like: (Obj(), 0), _tensor(Obj(), "y", 0, 1))
    assert rec.plan(out) is None


def test_call_keys() -> None:
    # numpy arrays and unknown objects have no key (the full path every call);
    # scalars, None, strings and tuples key by value.
    assert _plans.call_key((np.zeros(3),)) is None
    assert _plans.call_key((Obj(),)) is None
    k1 = _plans.call_key((None, 1, 1.0, "x", (1, None)))
    k2 = _plans.call_key((None, 1, 1.0, "x", (1, None)))
    assert k1 is not None and k1 == k2
    assert _plans.call_key((True,)) != _plans.call_key((1,))  # bool is not int
    assert _plans.call_key((1,)) != _plans.call_key((1.0,))
    assert _plans.call_key((-0.0,)) != _plans.call_key((0.0,))
    assert _plans.call_key(((1, np.zeros(2)),)) is None


def test_planned_records_only_outside_a_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    @_plans.planned
    def entry(a: Any, *, out: Any = None) -> Any:
        calls.append(_plans.recording())
        return a

    # Scalars only: a key, a recording, no launch, so no plan; every call runs.
    for _ in range(3):
        assert entry(3, out=None) == 3
    assert len(calls) == 3 and all(c is not None for c in calls)
    assert len(entry.plans) == 0  # type: ignore[attr-defined]
    # A call inside another call's recording runs as written (its steps are
    # the outer recording's).
    calls.clear()
    outer = _plans._Recording(())
    monkeypatch.setattr(_plans._local, "rec", outer, raising=False)
    entry(4)
    assert calls == [outer]


def test_a_result_may_hold_none() -> None:
    # The backward functions return (dx, dweight, None) without a bias.
    rec, out, _, log = _record(16, 4096, out_given=False)
    plan = rec.plan((out, None))
    assert plan is not None
    got = plan((Obj(), None, 1.5), [8192, None, None])
    assert type(got) is tuple and len(got) == 2 and got[1] is None and type(got[0]) is Obj
    assert log[-1][-1][0] == 8192


def test_a_call_passing_one_tensor_twice_makes_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # attention(q, q, v): a kernel argument made from the shared object could
    # be either argument, so that call records no plan (and runs as written).
    monkeypatch.setattr(_plans, "call_key", lambda values: (("k",), [1, 2, None][: len(values)]))
    seen: list[Any] = []

    @_plans._planned_py  # the Python replay's key (the native one: test_kernel_plans_native)
    def entry(a: Any, b: Any) -> Any:
        rec = _plans.recording()
        seen.append(rec)
        rec.launch(FakeKernel([]), 1, 32, 0, None, [1.0])  # type: ignore[union-attr]
        return None

    x = Obj()
    entry(x, x)
    assert len(entry.plans) == 0  # type: ignore[attr-defined]
    entry(x, Obj())
    assert len(entry.plans) == 1  # type: ignore[attr-defined]


def test_tensor_maps_are_rebuilt_for_the_new_address(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[tuple[Any, ...]] = []

    def fake_map(ptr: int, *geometry: Any) -> tuple[Any, ...]:
        built.append((ptr, *geometry))
        return ("map", ptr, *geometry)

    monkeypatch.setattr(_plans, "tensor_map_at", fake_map)
    log: list[Any] = []
    x = Obj()
    rec = _plans._Recording((x,))
    tx = _tensor(x, "x", 4096, 64)
    rec.tensor(tx)
    geometry = ((64,), (4,), "<f4", (64,), "128B", "f32")
    m = fake_map(4096, *geometry)
    rec.tensor_map(m, tx, geometry)
    rec.launch(FakeKernel(log), 1, 128, 0, None, [m, 7])
    plan = rec.plan(x)
    assert plan is not None
    p = int(rng.integers(1, 2**30)) * 256
    for _ in range(2):
        assert plan((x,), [p]) is x
        assert log[-1][-1] == [("map", p, *geometry), 7]
    assert [b[0] for b in built] == [4096, p]  # the second call found p's map cached
    # A map of a tensor the recording did not see makes no plan.
    rec = _plans._Recording((x,))
    rec.tensor_map(m, _tensor(Obj(), "y", 0, 1), geometry)
    assert not rec.ok


def test_entry_functions_pickle_by_reference() -> None:
    # A planned entry function is its native plan table: it pickles by
    # module and name, as the plain function did (multiprocessing's spawn).
    import pickle

    from zyntax import kernels as zk

    for fn in (zk.softmax, zk.layer_norm, zk.matmul, zk.attention):
        assert pickle.loads(pickle.dumps(fn)) is fn
