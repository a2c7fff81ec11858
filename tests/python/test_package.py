"""The package imports, exposes its declared API and maps errors correctly."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import zyntax
from conftest import REAL_HOME, ROOT, TEST_ROOT
from zyntax import errors
from zyntax.frontend import cache


def test_all_names_exist() -> None:
    for name in zyntax.__all__:
        assert hasattr(zyntax, name), name


def test_version_matches_cargo() -> None:
    # The workspace version is the first `version = "..."` in the root manifest.
    m = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M)
    assert m is not None
    assert zyntax.__version__ == m.group(1)


def test_build_info() -> None:
    info = zyntax.build_info()
    assert info["version"] == zyntax.__version__
    assert info["profile"] in {"debug", "release"}
    assert isinstance(info["hir"], bool)


@pytest.mark.parametrize(
    "cls",
    [
        errors.VerifyError,
        errors.ParseError,
        errors.CompileError,
        errors.CudaError,
        errors.LaunchError,
        errors.InternalError,
    ],
)
def test_error_hierarchy(cls: type[Exception]) -> None:
    assert issubclass(cls, zyntax.ZyntaxError)
    assert issubclass(cls, Exception)
    assert cls.__module__ == "zyntax"
    with pytest.raises(zyntax.ZyntaxError, match="boom"):
        raise cls("boom")


def test_errors_are_distinct() -> None:
    classes = {
        errors.VerifyError,
        errors.ParseError,
        errors.CompileError,
        errors.CudaError,
        errors.LaunchError,
    }
    for a in classes:
        for b in classes - {a}:
            assert not issubclass(a, b)


def test_cli_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zyntax.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    if not zyntax.build_info()["cli"]:
        assert proc.returncode == 2
        assert "command-line driver" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert "compile" in proc.stdout


def test_readme_python_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m is not None
    scope: dict[str, object] = {}
    exec(compile(m.group(1), "README.md", "exec"), scope)
    y = scope["y"]
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, np.full(1000, 3.0, np.float32))
    assert "kernel @saxpy" in capsys.readouterr().out


def _zyntax(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zyntax.cli", *args], capture_output=True, text=True, check=False
    )


def test_cli_compiles_zir_to_ptx(tmp_path: Path) -> None:
    out = tmp_path / "saxpy.ptx"
    zir = ROOT / "examples" / "saxpy.zir"
    proc = _zyntax("compile", "--backend", "nvptx", "--arch", "sm_80", str(zir), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    ptx = out.read_text()
    assert ".target sm_80" in ptx and ".entry saxpy(" in ptx
    # The same bytes as the library call (compilation is deterministic).
    assert ptx == zyntax.compile(zyntax.hir.parse_zir(zir.read_text()), arch="sm_80")


def test_cli_errors_are_one_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.zir"
    bad.write_text('module "m"\n\nkernel @k {\nblock0:\n    bogus\n}\n')
    proc = _zyntax("compile", str(bad))
    assert proc.returncode == 1
    assert f"{bad}:5:" in proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr
    proc = _zyntax("compile", "--arch", "sm_99", str(bad))
    assert proc.returncode == 2  # usage error, from the argument parser
    assert "sm_99" in proc.stderr


# ------------------------------------------------------------------ the distribution's name

#: The package index's `zyntax` is another project (it also ships a top-level `zyntax`).
DISTRIBUTION = "zyntax-compiler"


def test_distribution_is_zyntax_compiler() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    name = re.search(r'^\[project\]\n(?:#.*\n)*name = "([^"]+)"', pyproject, re.M)
    assert name is not None and name.group(1) == DISTRIBUTION
    assert 'zyntax = "zyntax.cli:main"' in pyproject  # the command keeps its name
    # The installed package (built by scripts/build-python.sh) carries that name.
    assert importlib.metadata.version(DISTRIBUTION) == zyntax.__version__


_PIP_INSTALL = re.compile(r"pip3? install\b([^`\n]*)")


def _installed_names(args: str) -> list[str]:
    """The project names a `pip install` command line asks for (not options, paths or URLs)."""
    names = []
    for token in args.replace('"', " ").replace("'", " ").split():
        if token.startswith(("-", ".", "/", "$", "file:", "http")) or token == "@":
            continue
        if token.endswith((".whl", ".tar.gz")):
            continue
        m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", token)
        if m:
            names.append(re.sub(r"[-_.]+", "-", m.group(0)).lower())
    return names


def _install_commands() -> list[tuple[str, str]]:
    """Every `pip install` in the README, the docs and the messages the code prints."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "python" / "zyntax").rglob("*.py"))
    files += sorted((ROOT / "crates").glob("*/src/**/*.rs"))
    files += sorted((ROOT / "scripts").glob("*.sh"))
    found = []
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for m in _PIP_INSTALL.finditer(line):
                found.append((f"{f.relative_to(ROOT)}:{n}", m.group(1)))
    return found


def test_every_install_command_names_this_project() -> None:
    commands = _install_commands()
    wrong = [
        f"{where}: pip install{args}"
        for where, args in commands
        if "zyntax" in _installed_names(args)
    ]
    assert not wrong, "these would install the index's unrelated `zyntax`:\n" + "\n".join(wrong)
    readme = [_installed_names(args) for where, args in commands if where.startswith("README.md:")]
    assert [DISTRIBUTION] in readme


def test_install_command_parser() -> None:
    assert _installed_names(' "zyntax[compute] @ file://$PWD/dist/x.whl"') == ["zyntax"]
    assert _installed_names(" 'zyntax-compiler[compute]'") == ["zyntax-compiler"]
    assert _installed_names(" --no-deps dist/zyntax_compiler-0.1.0-cp310-abi3.whl") == []
    assert _installed_names(" -q numpy>=1.24 Zyntax_Compiler") == ["numpy", "zyntax-compiler"]


# ------------------------------------------------------------------ the tests' own home

_PROBE = textwrap.dedent(
    """
    import zyntax
    from zyntax import Array, f32, i32


    @zyntax.kernel
    def home_probe(x: Array[f32, 1], n: i32) -> None:
        i = zyntax.lang.grid(1)
        if i < n:
            x[i] = x[i] * 3.0


    home_probe.ptx((Array[f32, 1], i32), arch="sm_80")
    """
)


def _tree(d: Path) -> list[tuple[str, int]]:
    if not d.is_dir():
        return []
    return sorted((str(p.relative_to(d)), p.stat().st_mtime_ns) for p in d.rglob("*"))


def test_tests_run_with_a_temporary_home_and_cache() -> None:
    root = TEST_ROOT.resolve()
    assert Path.home().resolve() != REAL_HOME.resolve()
    for p in (Path.home(), Path(os.environ["XDG_CACHE_HOME"]), cache.root_dir()):
        assert root in p.resolve().parents, p


def test_a_compile_in_a_subprocess_leaves_the_real_cache_alone(tmp_path: Path) -> None:
    real_cache = REAL_HOME / ".cache" / "zyntax"
    before = _tree(real_cache)
    script = tmp_path / "probe.py"
    script.write_text(_PROBE)
    # The environment the tests run in, as every subprocess a test starts inherits it.
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    written = [p for p in cache.cache_dir().glob("*.ptx") if ".entry home_probe(" in p.read_text()]
    assert written and all(TEST_ROOT.resolve() in p.resolve().parents for p in written)
    assert _tree(real_cache) == before
