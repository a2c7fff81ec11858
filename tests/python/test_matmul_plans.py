"""``zyntax.kernels.matmul``'s hand-written variants replayed by matmul's
native plan table (issue 25: one plan lookup per call on every route).

No GPU and no torch here: the stand-in tensors of test_kernel_plans_native
take torch.Tensor's place, ``gemm.matmul`` is replaced by a planned stand-in
that does what the real one does on a hand-written route (launch a
``gemm._Plan``'s steps, then hand the plan to its recording through
``gemm._store``), and the launcher logs its arguments. The second call of a
signature must be answered natively with this call's addresses, a new output
made like this call's `a`, the overlap of a given `out` checked, and nothing
stored for a call inside another entry function's recording.
tests/python/gpu/test_matmul_decode_gpu.py runs the real routes on a GPU.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest

import zyntax
from test_kernel_plans_native import F16, FakeTensor, fresh_ptr
from zyntax import _native
from zyntax.kernels import _plans, gemm

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "CudaCallPlans"), reason="extension without CudaCallPlans"
)

rng = np.random.default_rng()
WS, COUNT = 0x7000_0000, 0x7100_0000  # the split-K workspace addresses (constants)


def hand_written_plan(log: list[Any], m: int, n: int, k: int, has_bias: bool) -> Any:
    """A gemm._Plan of one split-K launch, its launcher a logging stand-in."""
    plan = object.__new__(gemm._Plan)
    plan.alloc = None
    plan.ws, plan.ws_ptr, plan.count_ptr = None, WS, COUNT
    plan.has_bias = has_bias
    plan.spans = (2 * m * n, 2 * m * k, 2 * k * n, 2 * n if has_bias else 0)
    ptrs = (gemm.A, gemm.B, gemm.OUT, gemm.BIAS, gemm.WS, gemm.COUNT)

    def launcher(*args: Any) -> None:
        log.append(list(args))

    plan.steps = [(launcher, operator.itemgetter(*ptrs), (m, n, k), ptrs)]
    return plan


class Setup:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.runs = 0
        self.log: list[Any] = []
        monkeypatch.setattr(_plans, "_torch_info", lambda: (FakeTensor, lambda d: 0))
        FakeTensor.made.clear()
        setup = self

        @_plans.planned
        def matmul(a: Any, b: Any, out: Any = None, *, bias: Any = None) -> Any:
            setup.runs += 1
            (m, k), n = a.shape, b.shape[1]
            plan = hand_written_plan(setup.log, m, n, k, bias is not None)
            if out is None:
                plan.alloc = gemm._allocator(_Problem(m, n, a.new_empty((m, n), dtype=F16)))
                obj = plan.alloc(a)[0]
            else:
                obj = out
            pbias = bias.data_ptr() if bias is not None else 0
            plan(a.data_ptr(), b.data_ptr(), obj.data_ptr(), pbias)
            gemm._store(plan, a, b, out, bias)
            return obj

        monkeypatch.setattr(gemm, "matmul", matmul)
        self.matmul = matmul


class _Problem:
    """What gemm._allocator reads of a Problem (a torch-like output)."""

    def __init__(self, m: int, n: int, out_obj: Any) -> None:
        self.m, self.n, self.device, self.out_obj = m, n, 0, out_obj


def test_a_hand_written_route_replays_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    m, n, k = (int(x) for x in rng.integers(1, 64, 3))
    calls = []
    for _ in range(3):  # fresh operands each call: one signature
        a, b, bias = FakeTensor((m, k), F16), FakeTensor((k, n), F16), FakeTensor((n,), F16)
        calls.append((a, b, bias, s.matmul(a, b, bias=bias)))
    assert s.runs == 1 and len(s.matmul.plans) == 1  # type: ignore[attr-defined]
    for (a, b, bias, got), args in zip(calls, s.log, strict=True):
        assert args == [a.ptr, b.ptr, got.ptr, bias.ptr, WS, COUNT, m, n, k]
        assert type(got) is FakeTensor and got.shape == (m, n) and got.dtype is F16
    assert [src for _, src in FakeTensor.made[-2:]] == [calls[1][0], calls[2][0]]  # like a


def test_a_given_out_is_checked_and_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Setup(monkeypatch)
    m, n, k = 8, 16, 8  # out (256 bytes) as large as a: a shifted out overlaps it
    a, b, out = FakeTensor((m, k), F16), FakeTensor((k, n), F16), FakeTensor((m, n), F16)
    assert s.matmul(a, b, out) is out
    p = fresh_ptr()
    a2, out2 = FakeTensor((m, k), F16, ptr=p), FakeTensor((m, n), F16, ptr=p + 2 * m * k)
    b2 = FakeTensor((k, n), F16)
    assert s.matmul(a2, b2, out2) is out2
    assert s.runs == 1 and s.log[-1][:4] == [a2.ptr, b2.ptr, out2.ptr, out2.ptr]  # no bias
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'a'"):
        s.matmul(a2, b2, FakeTensor((m, n), F16, ptr=p + 2 * m * k - 16))
    assert s.runs == 1 and len(s.log) == 2  # refused by the plan before launching


def test_one_tensor_twice_or_another_recording_stores_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = Setup(monkeypatch)
    a = FakeTensor((8, 8), F16)
    s.matmul(a, a)
    s.matmul(a, a)  # a @ a: a plan by position would read a for b on another call
    assert s.runs == 2 and len(s.matmul.plans) == 0  # type: ignore[attr-defined]

    @_plans.planned
    def outer(x: Any) -> Any:  # calls matmul inside its own recording
        return s.matmul(x, FakeTensor((8, 8), F16))

    outer(FakeTensor((8, 8), F16))
    outer(FakeTensor((8, 8), F16))
    assert s.runs == 4  # neither outer nor the inner matmul replayed
    assert len(outer.plans) == 0 and len(s.matmul.plans) == 0  # type: ignore[attr-defined]


def test_clearing_the_python_plans_clears_the_native_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = Setup(monkeypatch)
    s.matmul(FakeTensor((8, 8), F16), FakeTensor((8, 8), F16))
    assert len(s.matmul.plans) == 1  # type: ignore[attr-defined]
    gemm._plans.clear()
    assert len(s.matmul.plans) == 0  # type: ignore[attr-defined]
