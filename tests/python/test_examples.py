"""Every examples/*.py builder script builds a module that verifies, prints
.zir that reads back to the same module, and matches examples/<name>.zir."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import zyntax
from conftest import EXAMPLES
from zyntax import hir

SCRIPTS = sorted(p.stem for p in EXAMPLES.glob("*.py"))
ZIR_FILES = sorted(EXAMPLES.glob("*.zir"))


def test_examples_exist() -> None:
    expected = {
        "saxpy",
        "reduce_sum",
        "histogram",
        "mma_tile",
        "cp_async_double_buffer",
        "host_latency",
    }
    assert expected <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_builds_and_verifies(name: str) -> None:
    module = importlib.import_module(name).build()
    module.verify()
    text = module.to_zir()
    assert hir.parse_zir(text) == module
    zir = EXAMPLES / f"{name}.zir"
    if zir.exists():
        on_disk = hir.parse_zir(zir.read_text(), filename=str(zir))
        # Structural equality: same functions, metadata and instructions
        # (source locations never take part).
        assert on_disk == module, f"{name}.py and {name}.zir differ"


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_script_prints_its_zir(name: str) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("module ")
    assert hir.parse_zir(out) == importlib.import_module(name).build()


@pytest.mark.parametrize("path", ZIR_FILES, ids=[p.name for p in ZIR_FILES])
def test_zir_examples_parse_and_verify(path: object) -> None:
    from pathlib import Path

    assert isinstance(path, Path)
    m = hir.parse_zir(path.read_text(), filename=str(path))
    m.verify()
    assert hir.parse_zir(m.to_zir()) == m


def _demo_arch_script() -> str:
    """The Python that scripts/demo.sh runs to pick each example's arch."""
    demo = (EXAMPLES.parent / "scripts" / "demo.sh").read_text()
    return demo.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]


@pytest.mark.parametrize("name", SCRIPTS)
def test_demo_compiles_every_module_with_kernels_to_ptx(name: str) -> None:
    """The demo labels a module "host functions" only when it has no kernel (not
    because it declares no targets, as nest_matmul does), and compiles the others."""
    arch = subprocess.run(
        [sys.executable, "-", name],
        input=_demo_arch_script(),
        capture_output=True,
        text=True,
        check=True,
        cwd=EXAMPLES.parent,
    ).stdout.strip()
    module = importlib.import_module(name).build()
    if not module.kernels:
        assert arch == ""
        return
    assert arch == (module.targets[0] if module.targets else "sm_80")
    ptx = zyntax.compile(module, arch=arch)
    for kernel in module.kernels:
        assert f".entry {kernel}(" in ptx, kernel
