"""Differential fuzzing of the translator: random structured programs (nested if/elif/else,
for with positive and negative steps, while, break, continue, augmented assignment,
ternaries, short-circuit logic, floor division and modulo) run once as plain Python and
once as a kernel on the interpreter; the results must agree exactly.

A kernel body is valid Python, so the plain function is the oracle. Values stay far
from the i32 limits (every assignment reduces modulo 1000)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from zyntax import _native

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="this build has no interpreter binding"
)

VARS = ("a", "b", "c")


class Gen:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.loop_vars: list[str] = []
        self.counter = 0

    def atom(self) -> str:
        choices = [*VARS, "x", "y", *self.loop_vars, str(self.r.randint(-9, 9))]
        return self.r.choice(choices)

    def expr(self, depth: int = 0) -> str:
        r = self.r
        if depth >= 2 or r.random() < 0.3:
            return self.atom()
        k = r.randrange(6)
        a, b = self.expr(depth + 1), self.expr(depth + 1)
        if k == 0:
            return f"({a} + {b})"
        if k == 1:
            return f"({a} - {b})"
        if k == 2:
            return f"({a} * {self.atom()})"
        if k == 3:
            return f"({a} // ({b} % 7 + 1))"
        if k == 4:
            return f"({a} % ({b} % 5 - 6))"  # negative divisor: Python's sign rule
        return f"({a} if {self.cond()} else {b})"

    def cond(self) -> str:
        r = self.r
        op = r.choice(["<", "<=", "==", "!=", ">", ">="])
        c = f"{self.atom()} {op} {self.atom()}"
        k = r.randrange(5)
        if k == 0:
            return f"{c} and {self.atom()} > {r.randint(-5, 5)}"
        if k == 1:
            return f"not {c} or {self.atom()} % 3 == 0"
        if k == 2:
            return f"{r.randint(-3, 0)} <= {self.atom()} < {r.randint(1, 9)}"
        return c

    def block(self, depth: int, in_loop: bool, ind: str) -> list[str]:
        out: list[str] = []
        for _ in range(self.r.randint(1, 3)):
            out += self.stmt(depth, in_loop, ind)
        return out

    def stmt(self, depth: int, in_loop: bool, ind: str) -> list[str]:
        r = self.r
        v = r.choice(VARS)
        k = r.randrange(10)
        if k <= 2 or depth >= 3:
            return [f"{ind}{v} = {self.expr()} % 1000"]
        if k == 3:
            op = r.choice(["+=", "-=", "*="])
            return [f"{ind}{v} {op} {self.atom()}", f"{ind}{v} %= 1000"]
        if k == 4:
            lines = [f"{ind}if {self.cond()}:", *self.block(depth + 1, in_loop, ind + "    ")]
            if r.random() < 0.5:
                lines += [
                    f"{ind}elif {self.cond()}:",
                    *self.block(depth + 1, in_loop, ind + "    "),
                ]
            if r.random() < 0.6:
                lines += [f"{ind}else:", *self.block(depth + 1, in_loop, ind + "    ")]
            return lines
        if k in (5, 6):
            iv = f"i{depth}"
            lo, hi = r.randint(-3, 2), r.randint(0, 6)
            rng = r.choice(
                [f"range({hi})", f"range({lo}, {hi})", f"range({hi}, {lo}, -{r.randint(1, 2)})"]
            )
            self.loop_vars.append(iv)
            body = self.block(depth + 1, True, ind + "    ")
            self.loop_vars.pop()
            return [f"{ind}for {iv} in {rng}:", *body]
        if k == 7:
            self.counter += 1
            w = f"w{self.counter}"
            n = r.randint(0, 5)
            body = self.block(depth + 1, True, ind + "    ")
            return [f"{ind}{w} = 0", f"{ind}while {w} < {n}:", f"{ind}    {w} += 1", *body]
        if in_loop:
            kw = r.choice(["break", "continue"])
            return [f"{ind}if {self.cond()}:", f"{ind}    {kw}"]
        return [f"{ind}{v} = -{v}"]


def program(seed: int) -> str:
    g = Gen(random.Random(seed))
    body = g.block(0, False, "    ")
    return "\n".join(
        [
            "import zyntax",
            "",
            "",
            "@zyntax.kernel",
            "def prog(out, x, y):",
            "    a = x",
            "    b = y",
            "    c = 0",
            *body,
            "    out[0] = a",
            "    out[1] = b",
            "    out[2] = c",
            "",
        ]
    )


def load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_random_programs_match_python(tmp_path: Path) -> None:
    base = random.randrange(1 << 30)
    for n in range(40):
        seed = base + n
        src = program(seed)
        path = tmp_path / f"prog_{seed}.py"
        path.write_text(src)
        mod = load(path, f"zyfuzz_{seed}")
        x, y = random.randint(-1000, 1000), random.randint(-1000, 1000)
        want = np.zeros(3, np.int64)
        mod.prog.pyfunc(want, x, y)  # the plain Python function is the oracle
        got = np.zeros(3, np.int32)
        mod.prog.run_cpu(got, x, y, grid=1, block=1)
        assert got.tolist() == want.tolist(), f"seed {seed}, x={x}, y={y}\n{src}"
