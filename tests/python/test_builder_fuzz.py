"""Fuzzing the Python builder API (issue 10, item 18): random type strings,
random nests of type constructors and random instruction sequences on a
kernel builder. Whatever is rejected is rejected with a ``ZyntaxError`` (an
``ArgumentError`` for a Python value of the wrong kind), never a crash; whatever
verifies prints, parses back and round-trips through JSON, and assembles
with ptxas on every arch it targets when ptxas is installed.

Examples per test: ``ZYNTAX_PY_FUZZ_CASES`` (default 60, the bounded run of
``scripts/test.sh``); docs/testing.md describes a long run."""

from __future__ import annotations

import functools
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zyntax
from zyntax import hir
from zyntax.errors import ZyntaxError

CASES = int(os.environ.get("ZYNTAX_PY_FUZZ_CASES", "60"))
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SCALARS = [
    "bool",
    "i8",
    "i16",
    "i32",
    "i64",
    "u8",
    "u16",
    "u32",
    "u64",
    "f16",
    "bf16",
    "f32",
    "f64",
]
SPACES = ["generic", "global", "shared", "constant", "local", "nowhere"]
TOKENS = [
    *SCALARS,
    *SPACES,
    "ptr",
    "vec",
    "frag",
    "<",
    ">",
    ",",
    "[",
    "]",
    ";",
    "4",
    "0",
    "a",
    "acc",
    "m16n16k16",
    "row",
    " ",
    "\u00e9",
    "99999999999999999999999",
]


@st.composite
def type_text(draw: st.DrawFn) -> str:
    """Mostly well-formed types, sometimes deep, sometimes token soup."""
    if draw(st.integers(0, 4)) == 0:
        return "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=30)))
    depth = draw(st.integers(0, 40))
    t = draw(st.sampled_from(SCALARS))
    if draw(st.booleans()):
        t = f"vec<{t}, {draw(st.sampled_from([2, 4, 8, 3]))}>"
    for _ in range(depth):
        if draw(st.booleans()):
            t = f"ptr<{draw(st.sampled_from(SPACES))}, {t}>"
        else:
            t = f"[{t}; {draw(st.integers(0, 2**64 - 1))}]"
    return t


@FUZZ
@given(type_text())
def test_type_strings_parse_or_raise_zyntax_error(text: str) -> None:
    try:
        t = hir.Type.parse(text)
    except ZyntaxError:
        return
    assert hir.Type.parse(str(t)) == t


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(["ptr", "array", "vec"]), st.integers(-3, 2**65)), max_size=45
    )
)
def test_type_constructors_raise_zyntax_error_at_any_depth(steps: list[tuple[str, int]]) -> None:
    t: Any = hir.f32
    for kind, n in steps:
        try:
            if kind == "ptr":
                t = hir.ptr("global", t)
            elif kind == "array":
                t = hir.array(t, n)
            else:
                t = hir.vec(t, n)
        except ZyntaxError:
            continue
        assert hir.Type.parse(str(t)) == t


OPS = ["load", "store", "add", "mul", "cmp", "const", "ptr_add", "alloca", "cast", "shfl"]


def apply(b: hir.FunctionBuilder, vals: list[Any], op: str, i: int, j: int, ty: str) -> None:
    a, c = vals[i % len(vals)], vals[j % len(vals)]
    if op == "load":
        vals.append(b.load(a))
    elif op == "store":
        b.store(a, c)
    elif op == "add":
        vals.append(b.add(a, c))
    elif op == "mul":
        vals.append(b.mul(a, c))
    elif op == "cmp":
        vals.append(b.lt(a, c))
    elif op == "const":
        vals.append(b.const(i, ty))
    elif op == "ptr_add":
        vals.append(b.ptr_add(a, c))
    elif op == "alloca":
        vals.append(b.alloca(ty, 1 + j % 4))
    elif op == "cast":
        vals.append(b.cast(a, ty))
    else:
        vals.append(b.shfl("down", a, 1 + j % 31))


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, 50), st.integers(0, 50), type_text()),
        max_size=25,
    )
)
def test_random_builder_programs_verify_and_round_trip_or_raise(
    steps: list[tuple[str, int, int, str]],
) -> None:
    m = hir.Module("fuzz", targets=["sm_70", "sm_80", "sm_90"])
    try:
        with m.kernel("k", [hir.ptr("global", hir.f32), hir.f32, hir.u32]) as b:
            vals: list[Any] = list(b.params)
            for op, i, j, ty in steps:
                try:
                    apply(b, vals, op, i, j, ty)
                except ZyntaxError:
                    pass
    except ZyntaxError:
        return
    try:
        m.verify()
    except ZyntaxError:
        return
    text = m.to_zir()
    assert hir.parse_zir(text).to_zir() == text
    assert hir.Module.from_json(m.to_json()).to_zir() == text
    if not os.environ.get("ZYNTAX_PTXAS"):
        return
    # CUDA 13's ptxas has no sm_70: validate for each declared arch the found ptxas has.
    for arch in _ptxas_archs().intersection(("sm_70", "sm_80", "sm_90")):
        zyntax.validate_ptx(zyntax.compile(m, arch=arch), arch=arch)


@functools.cache
def _ptxas_archs() -> frozenset[str]:
    from zyntax import aot

    return frozenset(aot.ptxas_archs())


def test_builder_fuzz_has_coverage() -> None:
    # The program test must reach verified modules, not only errors.
    m = hir.Module("fuzz", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.f32), hir.f32, hir.u32]) as b:
        vals: list[Any] = list(b.params)
        for op, i, j in [("load", 0, 0), ("add", 3, 1), ("store", 0, 4)]:
            apply(b, vals, op, i, j, "f32")
    m.verify()
