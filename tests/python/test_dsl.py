"""examples/dsl (zdsl): a kernel language with its own grammar (lark), lowered
through the builder with DSL source locations; programs run on the
interpreter against numpy, errors point at DSL line:col."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import zyntax
from conftest import EXAMPLES
from zyntax import interp

pytest.importorskip("lark", reason="lark is a test dependency (scripts/deps.sh)")
sys.path.insert(0, str(EXAMPLES / "dsl"))
import zdsl

DSL = EXAMPLES / "dsl"


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def run(program: zdsl.Program, arrays: dict[str, np.ndarray]) -> np.ndarray:
    _, grid, block = program.launch_config(arrays)
    interp.launch(program.module, program.name, grid, block, *program.args(arrays))
    return arrays["out"]


def test_matmul_example_matches_numpy() -> None:
    p = zdsl.compile_dsl((DSL / "matmul.zk").read_text(), "matmul.zk")
    assert p.name == "matmul" and p.workgroup == (16, 16) and p.device == "cuda:0"
    r = rng()
    m, n, k = 21, 35, 9  # ragged against 16x16
    a = r.standard_normal((m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    got = run(p, {"A": a, "B": b, "out": out})
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_saxpy_example_matches_numpy() -> None:
    p = zdsl.compile_dsl((DSL / "saxpy.zk").read_text(), "saxpy.zk")
    r = rng()
    x, y = r.standard_normal((2, 1000)).astype(np.float32)
    out = np.full(1000, np.nan, np.float32)
    got = run(p, {"x": x, "y": y, "out": out})
    np.testing.assert_array_equal(got, np.float32(2.5) * x + y)


def test_statements_and_operators() -> None:
    src = """compute(a, b) @kernel(mix) {
    for i in 0..R, j in 0..C:
        var t = -a[i, j] / (b[i, j] * b[i, j] + 1.0)
        t *= 2.0
        t -= a[i, j]
        var s = 0.0
        for k in 0..3:
            s += t * k
        out[i, j] = s + t
}
"""
    p = zdsl.compile_dsl(src, "mix.zk")
    assert p.workgroup == (16, 16)
    r = rng()
    a, b = r.standard_normal((2, 20, 30)).astype(np.float32)
    out = np.full((20, 30), np.nan, np.float32)
    got = run(p, {"a": a, "b": b, "out": out})
    t = (-a / (b * b + np.float32(1))) * np.float32(2) - a
    want = t * np.float32(3) + t  # 0*t + 1*t + 2*t, then + t
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_instructions_carry_dsl_locations() -> None:
    p = zdsl.compile_dsl((DSL / "matmul.zk").read_text(), "matmul.zk")
    insts = json.loads(p.module.to_json())["functions"][0]["insts"]
    locs = {(i["loc"]["line"], i["loc"]["col"]) for i in insts if i.get("op") == {"binary": "mul"}}
    assert all(i["loc"]["file"] == "matmul.zk" for i in insts)
    # `A[i, k] * B[k, j]` on line 7: the `*` at column 28, and the address
    # arithmetic of `A[i, k]` (column 20) and `B[k, j]` (column 30).
    assert {(7, 20), (7, 28), (7, 30)} <= locs, locs


def one_d(body: str, colon: str = ":") -> str:
    """A 1-D program whose loop body (line 3, from column 9) is `body`."""
    return f"compute(a) {{\n    for i in 0..N{colon}\n        {body}\n}}\n"


WIDE = (
    "compute(a) {\n    @workgroup(64, 32)\n    for i in 0..N, j in 0..M:\n"
    "        out[i, j] = a[i, j]\n}\n"
)


@pytest.mark.parametrize(
    ("src", "line", "col", "message"),
    [
        (one_d("out[i] = a[i]", colon=""), 2, 18, "expected `,`, `..` or `:`, found end of line"),
        (one_d("out[i] = a[i] $ 2"), 3, 23, "unexpected character `$`"),
        (one_d("out[i] = b[i]"), 3, 18, "unknown array `b`"),
        (one_d("out[i] = a[i] + t"), 3, 25, "undefined name `t`"),
        (WIDE, 2, 5, "2048 threads; devices allow at most 1024"),
        (one_d("out[i] = a[i * 1.5]"), 3, 24, "array indices"),
    ],
)
def test_errors_point_at_dsl_line_and_column(src: str, line: int, col: int, message: str) -> None:
    with pytest.raises(zdsl.DslError) as e:
        zdsl.compile_dsl(src, "bad.zk")
    assert (e.value.file, e.value.line, e.value.col) == ("bad.zk", line, col), str(e.value)
    assert message in e.value.message
    assert str(e.value).startswith(f"bad.zk:{line}:{col}: error: ")
    assert isinstance(e.value, zyntax.ZyntaxError)


def test_compile_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "matmul.ptx"
    cmd = [sys.executable, str(DSL / "zdsl.py"), "compile", str(DSL / "matmul.zk"), "-o", str(out)]
    subprocess.run(cmd, check=True)
    assert ".entry matmul" in out.read_text()
    bad = tmp_path / "bad.zk"
    bad.write_text("compute(a) {\n    for i in 0..N\n        out[i] = a[i]\n}\n")
    r = subprocess.run(
        [sys.executable, str(DSL / "zdsl.py"), "compile", str(bad)], capture_output=True, text=True
    )
    assert r.returncode == 1
    assert r.stderr.startswith(f"{bad}:2:18: error: expected `,`, `..` or `:`"), r.stderr
