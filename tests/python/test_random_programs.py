"""Random expression programs built through the Python builder: they verify,
survive the .zir and JSON round trips, and the reference interpreter computes
the same values as a Python model of HIR's semantics (wrapping integers,
IEEE doubles) on random non-zero inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from zyntax import hir, interp


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


@dataclass(frozen=True)
class Op:
    name: str
    arity: int
    model: Callable[..., float | int]


INT_OPS = [
    Op("add", 2, lambda a, b: wrap32(a + b)),
    Op("sub", 2, lambda a, b: wrap32(a - b)),
    Op("mul", 2, lambda a, b: wrap32(a * b)),
    Op("min", 2, min),
    Op("max", 2, max),
    Op("and_", 2, lambda a, b: a & b),
    Op("or_", 2, lambda a, b: a | b),
    Op("xor", 2, lambda a, b: a ^ b),
    Op("neg", 1, lambda a: wrap32(-a)),
    Op("not_", 1, lambda a: ~a),
]
FLOAT_OPS = [
    Op("add", 2, lambda a, b: a + b),
    Op("sub", 2, lambda a, b: a - b),
    Op("mul", 2, lambda a, b: a * b),
    Op("min", 2, min),
    Op("max", 2, max),
    Op("neg", 1, lambda a: -a),
    Op("abs", 1, abs),
    # Exact product and sum, rounded once (Fraction -> float rounds correctly).
    Op("fma", 3, lambda a, b, c: float(Fraction(a) * Fraction(b) + Fraction(c))),
]

# A program: a list of (op index, operand indices) over a growing value list
# whose first entries are the parameters.
Program = list[tuple[int, tuple[int, ...]]]


def programs(ops: list[Op], n_params: int) -> st.SearchStrategy[Program]:
    @st.composite
    def gen(draw: st.DrawFn) -> Program:
        steps: Program = []
        for k in range(draw(st.integers(1, 12))):
            i = draw(st.integers(0, len(ops) - 1))
            avail = n_params + k
            args = tuple(draw(st.integers(0, avail - 1)) for _ in range(ops[i].arity))
            steps.append((i, args))
        return steps

    return gen()


def build(prog: Program, ops: list[Op], ty: hir.Type, n_params: int) -> hir.Module:
    m = hir.Module("rand")
    with m.host_function("f", [ty] * n_params, [ty]) as b:
        vals = list(b.params)
        for i, args in prog:
            vals.append(getattr(b, ops[i].name)(*(vals[a] for a in args)))
        b.ret(vals[-1])
    return m


def model(prog: Program, ops: list[Op], params: list[float] | list[int]) -> float | int:
    vals: list[float | int] = list(params)
    for i, args in prog:
        vals.append(ops[i].model(*(vals[a] for a in args)))
    return vals[-1]


def check_round_trips(m: hir.Module) -> None:
    m.verify()
    assert hir.parse_zir(m.to_zir()) == m
    assert hir.Module.from_json(m.to_json()) == m


@settings(max_examples=60, deadline=None)
@given(
    prog=programs(INT_OPS, 3),
    params=st.lists(
        st.integers(-(2**31), 2**31 - 1).filter(lambda v: v != 0), min_size=3, max_size=3
    ),
)
def test_random_i32_programs(prog: Program, params: list[int]) -> None:
    m = build(prog, INT_OPS, hir.i32, 3)
    check_round_trips(m)
    assert interp.call(m, "f", *params) == model(prog, INT_OPS, params)


@settings(max_examples=60, deadline=None)
@given(
    prog=programs(FLOAT_OPS, 3),
    params=st.lists(
        st.floats(-1e3, 1e3, allow_nan=False).filter(lambda v: abs(v) > 1e-3),
        min_size=3,
        max_size=3,
    ),
)
def test_random_f64_programs(prog: Program, params: list[float]) -> None:
    m = build(prog, FLOAT_OPS, hir.f64, 3)
    check_round_trips(m)
    want = model(prog, FLOAT_OPS, params)
    got = interp.call(m, "f", *params)
    assert got == want, (got, want)
