"""Integer arguments of the HIR builder surface are range-checked at the
boundary: a negative, too large or non-int value raises zyntax.ArgumentError
(a ZyntaxError) naming the accepted range, never OverflowError/TypeError."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import zyntax
from zyntax import hir

G_F32 = hir.ptr("global", hir.f32)
S_F32 = hir.ptr("shared", hir.f32)


def with_builder(action: Callable[[hir.FunctionBuilder], object]) -> None:
    m = hir.Module("t", targets=["sm_80"])
    b = m.kernel("k", [G_F32, hir.vec(hir.f32, 4), hir.f32])
    action(b)


BUILDER_CASES: list[tuple[str, Callable[[hir.FunctionBuilder], object]]] = [
    ("param", lambda b: b.param(-1)),
    ("extract", lambda b: b.extract(b.params[1], -1)),
    ("insert", lambda b: b.insert(b.params[1], 1.0, 2**33)),
    ("alloca", lambda b: b.alloca(hir.f32, -1)),
    ("shared_alloc", lambda b: b.shared_alloc(hir.f32, 2**70)),
    ("shfl_down width", lambda b: b.shfl_down(b.params[2], 1, width=-1)),
    ("shfl width", lambda b: b.shfl("xor", b.params[2], 1, width=2**40)),
    ("cp_async bytes", lambda b: b.cp_async(b.shared_alloc(hir.f32, 4), b.params[0], bytes=-4)),
    ("cp_async_wait", lambda b: b.cp_async_wait(-1)),
    ("set_location", lambda b: b.set_location("x.py", -1)),
    ("float count", lambda b: b.alloca(hir.f32, 2.0)),
]


@pytest.mark.parametrize("action", [c[1] for c in BUILDER_CASES], ids=[c[0] for c in BUILDER_CASES])
def test_builder_integer_arguments_raise_argument_error(
    action: Callable[[hir.FunctionBuilder], object],
) -> None:
    with pytest.raises(zyntax.ArgumentError, match=r"expected an integer in \["):
        with_builder(action)


TYPE_CASES: list[tuple[str, Callable[[], object]]] = [
    ("vec lanes", lambda: hir.vec(hir.f32, -1)),
    ("array length", lambda: hir.array(hir.f32, 2**70)),
    ("array bool", lambda: hir.array(hir.f32, True)),
]


@pytest.mark.parametrize("make", [c[1] for c in TYPE_CASES], ids=[c[0] for c in TYPE_CASES])
def test_type_integer_arguments_raise_argument_error(make: Callable[[], object]) -> None:
    with pytest.raises(zyntax.ArgumentError, match=r"expected an integer in \["):
        make()


KERNEL_CASES: list[dict[str, object]] = [
    {"min_blocks": -1},
    {"max_registers": 2**40},
    {"shared_bytes": -1},
    {"max_threads": -1},
    {"max_threads": (32, -1)},
]


@pytest.mark.parametrize("kwargs", KERNEL_CASES, ids=[next(iter(k)) for k in KERNEL_CASES])
def test_kernel_attribute_arguments_raise_argument_error(kwargs: dict[str, object]) -> None:
    m = hir.Module("t")
    with pytest.raises(zyntax.ArgumentError, match=r"expected an integer in \["):
        m.kernel("k", [G_F32], **kwargs)  # type: ignore[arg-type]
    assert issubclass(zyntax.ArgumentError, zyntax.ZyntaxError)


def test_in_range_values_still_build() -> None:
    m = hir.Module("t", targets=["sm_80"])
    with m.kernel("k", [G_F32, hir.f32], min_blocks=1, shared_bytes=0, max_threads=(64, 2)) as b:
        b.set_location("x.py", 3, 4)
        v = b.shfl_down(b.params[1], 1, width=16)
        s = b.shared_alloc(hir.f32, 8)
        b.alloca(hir.vec(hir.f32, 4))
        b.cp_async(s, b.params[0], bytes=4, cache="ca")
        b.cp_async_commit()
        b.cp_async_wait(0)
        b.store(b.params[0], v)
        b.ret()
    m.verify()
    assert "width 16" in m.to_zir()
    assert "[f32; 3]" in str(hir.array(hir.f32, 3))
