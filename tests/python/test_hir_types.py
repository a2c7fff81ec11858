"""zyntax.hir types: constructors, .zir spelling, parsing, equality, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import zyntax
from zyntax import hir

SCALAR_NAMES = ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
SCALAR_NAMES += ["f16", "bf16", "f32", "f64"]
SPACES = ["generic", "global", "shared", "constant", "local"]


def test_scalar_constants() -> None:
    assert str(hir.f32) == "f32"
    assert str(hir.bool_) == "bool"
    assert hir.u32.is_int and not hir.u32.is_signed
    assert hir.i64.is_signed and hir.i64.bits == 64
    assert hir.bf16.is_float and hir.bf16.size_bytes == 2
    assert set(hir.SCALARS) == set(SCALAR_NAMES)


def test_composite_types() -> None:
    p = hir.ptr("shared", hir.array(hir.f32, 8))
    assert str(p) == "ptr<shared, [f32; 8]>"
    assert p.is_ptr and p.addr_space == "shared"
    assert p.elem == hir.array(hir.f32, 8)
    assert p.elem is not None and p.elem.length == 8
    v = hir.vec(hir.f16, 4)
    assert str(v) == "vec<f16, 4>" and v.size_bytes == 8 and v.kind == "vector"
    fa = hir.frag("a", "m16n16k16", hir.f16, "row")
    assert str(fa) == "frag<a, m16n16k16, f16, row>"
    acc = hir.frag("acc", "m16n16k16", "f32")
    assert str(acc) == "frag<acc, m16n16k16, f32>" and acc.size_bytes is None


def test_type_accepts_strings_and_numpy() -> None:
    assert hir.ptr("global", "f32") == hir.ptr("global", hir.f32)
    assert hir.ptr("global", np.float32) == hir.ptr("global", hir.f32)
    assert hir.ptr("global", np.dtype("uint8")) == hir.ptr("global", hir.u8)
    assert hir.type_("ptr<global, vec<f32, 4>>") == hir.ptr("global", hir.vec(hir.f32, 4))


def test_equality_and_hash() -> None:
    a = hir.ptr("global", hir.f32)
    b = hir.Type.parse("ptr<global,f32>")
    assert a == b and hash(a) == hash(b)
    assert a != hir.ptr("shared", hir.f32)
    assert a != "ptr<global, f32>"  # a Type never equals a str
    assert len({a, b, hir.f32}) == 2
    assert pickle.loads(pickle.dumps(a)) == a


def _types() -> st.SearchStrategy[str]:
    scalar = st.sampled_from(SCALAR_NAMES)
    vec = st.tuples(st.sampled_from(SCALAR_NAMES[1:]), st.sampled_from([2, 4, 8])).map(
        lambda t: f"vec<{t[0]}, {t[1]}>"
    )
    frag = st.sampled_from(
        ["frag<a, m16n16k16, f16, row>", "frag<b, m32n8k16, bf16, col>", "frag<acc, m8n32k16, f32>"]
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        ptr = st.tuples(st.sampled_from(SPACES), inner).map(lambda t: f"ptr<{t[0]}, {t[1]}>")
        arr = st.tuples(inner, st.integers(1, 1 << 20)).map(lambda t: f"[{t[0]}; {t[1]}]")
        return ptr | arr

    return st.recursive(scalar | vec | frag, extend, max_leaves=6)


@given(_types())
def test_parse_print_round_trip(text: str) -> None:
    t = hir.Type.parse(text)
    assert str(t) == text
    assert hir.Type.parse(str(t)) == t


@pytest.mark.parametrize(
    "text",
    ["f33", "ptr<heap, f32>", "ptr<global f32>", "vec<f32>", "[f32; x]", "f32 junk", "", "frag<q>"],
)
def test_parse_rejects_bad_types(text: str) -> None:
    with pytest.raises(zyntax.BuildError, match="invalid type"):
        hir.Type.parse(text)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(zyntax.BuildError, match="unknown address space 'heap'"):
        hir.ptr("heap", hir.f32)
    with pytest.raises(zyntax.ArgumentError, match=r"expected a zyntax.hir.Type"):
        hir.ptr("global", 3)
    with pytest.raises(zyntax.BuildError, match="vector elements must be scalars"):
        hir.vec(hir.ptr("global", hir.f32), 4)
    with pytest.raises(zyntax.BuildError, match="need a layout"):
        hir.frag("a", "m16n16k16", hir.f16)
    with pytest.raises(zyntax.BuildError, match="take no layout"):
        hir.frag("acc", "m16n16k16", hir.f32, "row")
    with pytest.raises(zyntax.BuildError, match="unknown MMA shape"):
        hir.frag("a", "m8n8k4", hir.f16, "row")
    with pytest.raises(zyntax.BuildError, match="no zyntax equivalent"):
        hir.ptr("global", np.complex64)
