"""The package imports, exposes its declared API and maps errors correctly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zyntax
from conftest import ROOT
from zyntax import errors


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
