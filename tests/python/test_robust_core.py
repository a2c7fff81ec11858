"""Issue 10, Rust-core items, through the Python API: the one type nesting
limit (item 2), CPU name/feature validation (item 3), unbounded recursion in
native code (item 4) and hostile JSON (item 8). Whatever used to kill the
process runs in a subprocess, so a regression fails the test instead of
taking pytest down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zyntax
from conftest import ROOT
from zyntax import hir
from zyntax.errors import BuildError, CompileError, ParseError, TrapError

MAX_DEPTH = 32  # zyntax_hir::MAX_TYPE_DEPTH, documented in docs/hir.md


def run_py(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def nested(depth: int) -> str:
    return "ptr<global, " * depth + "f32" + ">" * depth


# ------------------------------------------------------------------ item 2


def test_deep_type_strings_are_a_build_error() -> None:
    assert str(hir.Type.parse(nested(MAX_DEPTH))) == nested(MAX_DEPTH)
    for depth in (MAX_DEPTH + 1, 20_000):
        with pytest.raises(BuildError, match="nested more than 32"):
            hir.Type.parse(nested(depth))
        with pytest.raises(BuildError, match="nested more than 32"):
            hir.ptr("global", nested(depth))  # a type string as a builder argument
    with pytest.raises(BuildError, match="nested more than 32"):
        hir.Type.parse("[" * 20_000 + "f32" + "; 1]" * 20_000)


def test_building_types_in_a_loop_stops_at_the_limit() -> None:
    t = hir.f32
    for _ in range(MAX_DEPTH):
        t = hir.ptr("global", t)
    assert str(t) == nested(MAX_DEPTH)
    with pytest.raises(BuildError, match="33 levels deep"):
        hir.ptr("global", t)
    with pytest.raises(BuildError, match="33 levels deep"):
        hir.array(t, 4)


def test_a_verified_module_at_the_limit_round_trips() -> None:
    text = f'module "m"\nhost @f {{\nblock0(v0: {nested(MAX_DEPTH)}):\n    return\n}}\n'
    m = hir.parse_zir(text)
    m.verify()
    assert hir.parse_zir(m.to_zir()).to_zir() == m.to_zir()
    assert hir.Module.from_json(m.to_json()).to_zir() == m.to_zir()
    deeper = text.replace(nested(MAX_DEPTH), nested(MAX_DEPTH + 1))
    with pytest.raises(ParseError, match="nested more than 32"):
        hir.parse_zir(deeper)


# ------------------------------------------------------------------ item 8


def test_out_of_range_ids_in_json_are_a_parse_error() -> None:
    m = hir.parse_zir(
        'module "m"\nhost @f -> i32 {\nblock0(v0: i32):\n    v1: i32 = add v0, v0\n'
        "    return v1\n}\n"
    )
    doc = json.loads(m.to_json())
    f = doc["functions"][0]
    for mutate in (
        lambda f: f["layout"].__setitem__(0, 99),
        lambda f: f["insts"][0]["args"].__setitem__(0, 4_000_000_000),
        lambda f: f["blocks"][0]["insts"].__setitem__(0, 7),
        lambda f: f["values"][0].__setitem__("def", {"param": [5, 0]}),
    ):
        bad = json.loads(json.dumps(doc))
        mutate(bad["functions"][0])
        with pytest.raises(ParseError, match="refers to"):
            hir.Module.from_json(json.dumps(bad))
    assert f["layout"] == [0]


# ------------------------------------------------------------------ item 3

SIMPLE = (
    'module "m"\nhost @f -> f32 {\nblock0(v0: f32):\n    v1: f32 = add v0, v0\n    return v1\n}\n'
)


@pytest.mark.parametrize(
    ("cpu", "features", "needle"),
    [
        ("not-a-cpu", "+nonsense", "unknown CPU `not-a-cpu`"),
        (None, "+nonsense", "unknown CPU feature `+nonsense`"),
        ("generic", "-64bit-mode", "changes the x86-64 ABI"),
        ("x86-64", "-sse2", "x86-64 ABI needs"),
    ],
)
def test_bad_cpu_options_are_a_compile_error(
    cpu: str | None, features: str | None, needle: str
) -> None:
    # In a subprocess: LLVM used to abort on some of these.
    p = run_py(
        f"""
        import zyntax
        from zyntax import hir
        from zyntax.errors import CompileError
        m = hir.parse_zir({SIMPLE!r})
        for fn in (zyntax.cpu.compile, lambda m, **kw: zyntax.cpu.emit(m, "asm", **kw)):
            try:
                fn(m, cpu={cpu!r}, features={features!r})
            except CompileError as e:
                print("CompileError:", e)
            else:
                print("compiled")
        """
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("CompileError:") == 2, p.stdout
    assert needle in p.stdout, p.stdout
    assert "not a recognized" not in p.stderr  # no LLVM warning lines


def test_bad_cpu_environment_variables_are_a_compile_error() -> None:
    code = f"""
        import zyntax
        from zyntax import hir
        from zyntax.errors import CompileError
        try:
            zyntax.cpu.compile(hir.parse_zir({SIMPLE!r}))
        except CompileError as e:
            print("CompileError:", e)
        """
    p = run_py(code, {"ZYNTAX_CPU": "not-a-cpu"})
    assert "CompileError: unknown CPU `not-a-cpu`" in p.stdout, (p.stdout, p.stderr)
    p = run_py(code, {"ZYNTAX_CPU_FEATURES": "-64bit-mode"})
    assert "changes the x86-64 ABI" in p.stdout, (p.stdout, p.stderr)


def test_good_cpu_options_still_compile() -> None:
    cm = zyntax.cpu.compile(hir.parse_zir(SIMPLE), cpu="x86-64", features="+sse4.2")
    x = np.float32(np.random.default_rng().uniform(1, 2))
    assert cm["f"](x) == pytest.approx(float(x) * 2)
    with pytest.raises(CompileError):
        zyntax.cpu.compile(hir.parse_zir(SIMPLE), cpu="not-a-cpu")


@pytest.mark.skipif(not zyntax.build_info()["cli"], reason="extension built without the cli")
def test_cli_rejects_bad_cpu_options(tmp_path: os.PathLike[str]) -> None:
    src = os.path.join(tmp_path, "m.zir")
    with open(src, "w") as f:
        f.write(SIMPLE)
    for opt in (["--cpu", "not-a-cpu"], ["--features", "-64bit-mode"]):
        p = subprocess.run(
            [sys.executable, "-m", "zyntax.cli", "compile", "--backend", "llvm", *opt, src],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert p.returncode not in (0, -6), (opt, p.returncode, p.stderr)
        assert "not a recognized" not in p.stderr, p.stderr
        assert "error:" in p.stderr, p.stderr


# ------------------------------------------------------------------ item 4

RUNAWAY = """module "m"
host @down -> i64 opt(O0) {
block0(v0: i64):
    v1: i64 = const 1
    v2: i64 = add v0, v1
    v3: i64 = call @down v2
    v4: i64 = add v3, v1
    return v4
}
"""


def test_unbounded_recursion_in_native_code_is_a_trap_error() -> None:
    p = run_py(
        f"""
        import zyntax
        from zyntax import hir
        from zyntax.errors import TrapError
        cm = zyntax.cpu.compile(hir.parse_zir({RUNAWAY!r}))
        try:
            cm["down"](0)
        except TrapError as e:
            print("TrapError", e.kind, e)
        """
    )
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert "TrapError stack_overflow" in p.stdout, p.stdout
    # And in this process, now that it is known not to crash.
    cm = zyntax.cpu.compile(hir.parse_zir(RUNAWAY))
    with pytest.raises(TrapError, match="stack overflow"):
        cm["down"](0)
