"""The pip-installed ``zyntax`` command: ``.zir`` through the Rust CLI, ``.py`` through the
Python front-end, ``--report``, and ``--backend cuda`` (one clear line without a GPU)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import zyntax
from conftest import EXAMPLES, ROOT
from zyntax import cuda

pytestmark = pytest.mark.skipif(
    not zyntax.build_info()["cli"], reason="extension built without the cli feature"
)

SCRIPT = Path(sys.executable).parent / "zyntax"


def launchers() -> list[list[str]]:
    """``python -m zyntax.cli`` and, where installed, the ``zyntax`` console script."""
    out = [[sys.executable, "-m", "zyntax.cli"]]
    if SCRIPT.exists():
        out.append([str(SCRIPT)])
    return out


def run(cmd: Sequence[str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, check=False, cwd=ROOT
    )


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_zir_to_ptx_on_stdout(cmd: list[str]) -> None:
    p = run(cmd, "compile", "--backend", "nvptx", "examples/saxpy.zir", "--arch", "sm_80")
    assert p.returncode == 0, p.stderr
    assert ".visible .entry saxpy(" in p.stdout
    assert ".target sm_80" in p.stdout
    assert p.stderr == ""
    # Byte-identical to the library (and hence to the cargo-built binary's output).
    module = zyntax.hir.parse_zir((EXAMPLES / "saxpy.zir").read_text())
    assert p.stdout == zyntax.compile(module, arch="sm_80")


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_bad_input_is_one_line_with_location(cmd: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.zir"
    bad.write_text(
        'module "x"\nkernel @k {\nblock0(v0: u32):\n    v1: u32 = frob v0\n    return\n}\n'
    )
    p = run(cmd, "compile", bad)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"{bad}:4:15: error:"), p.stderr
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr
    p = run(cmd, "compile", tmp_path / "missing.zir")
    assert p.returncode == 1
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr


def test_help_version_and_archs() -> None:
    cmd = launchers()[-1]
    p = run(cmd, "--version")
    assert p.returncode == 0 and zyntax.__version__ in p.stdout
    p = run(cmd, "compile", "--help")
    assert p.returncode == 0
    for opt in ("--backend", "--report", "--kernel", "--grid", "rand:N", "kernels.py"):
        assert opt in p.stdout, opt
    p = run(cmd, "archs")
    assert p.returncode == 0
    assert p.stdout.splitlines()[0].split()[0] == "sm_70"
    p = run(cmd, "compile", "--backend", "metal", "examples/saxpy.zir")
    assert p.returncode == 2 and "metal" in p.stderr


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_python_kernels_to_directory(cmd: list[str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    p = run(
        cmd,
        "compile",
        "--backend",
        "nvptx",
        "examples/kernels/vector_add.py",
        "--arch",
        "sm_80",
        "-o",
        out,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(out / "saxpy.ptx"), str(out / "saxpy.json")]
    # vector_add has no annotations: it cannot be compiled ahead of time.
    assert "skipped vector_add" in p.stderr
    ptx = (out / "saxpy.ptx").read_text()
    assert ".entry saxpy" in ptx and ".target sm_80" in ptx
    meta = json.loads((out / "saxpy.json").read_text())
    assert meta["arch"] == "sm_80"
    assert meta["source"].startswith("vector_add.py:")
    # The PTX is what ptxas accepts (a missing ptxas fails this test).
    zyntax.validate_ptx(ptx, "sm_80")


def test_python_kernels_to_one_ptx_file(tmp_path: Path) -> None:
    target = tmp_path / "saxpy.ptx"
    p = run(
        launchers()[0],
        "compile",
        "examples/kernels/vector_add.py",
        "--arch",
        "sm_90",
        "--output",
        target,
    )
    assert p.returncode == 0, p.stderr
    ptx = target.read_text()
    assert ".target sm_90" in ptx and ".entry saxpy" in ptx
    assert target.with_suffix(".json").exists()


def test_python_kernel_errors(tmp_path: Path) -> None:
    cmd = launchers()[0]
    # No fully annotated kernel in the file.
    p = run(cmd, "compile", "examples/kernels/sgemm.py", "-o", tmp_path)
    assert p.returncode == 1
    assert "no fully annotated @zyntax.kernel" in p.stderr
    assert "Traceback" not in p.stderr
    # An error in the kernel's source: file:line:col first, one line.
    src = tmp_path / "broken.py"
    src.write_text(
        "import zyntax\n"
        "from zyntax import lang\n"
        "\n"
        "\n"
        "@zyntax.kernel\n"
        "def broken(x: zyntax.Array[zyntax.f32, 1]):\n"
        "    i = lang.grid(1)\n"
        "    x[i] = undefined_name\n"
    )
    p = run(cmd, "compile", src, "-o", tmp_path / "o")
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"{src}:8:"), p.stderr
    assert ": error: " in p.stderr and "undefined_name" in p.stderr
    assert "Traceback" not in p.stderr
    # Options that mean nothing for Python files are usage errors.
    p = run(cmd, "compile", "--emit", "llvm", "examples/kernels/vector_add.py")
    assert p.returncode == 2 and "--emit" in p.stderr
    p = run(cmd, "compile", "--backend", "llvm", "examples/kernels/vector_add.py")
    assert p.returncode == 2 and "nvptx" in p.stderr


def test_output_named_py_is_not_the_input(tmp_path: Path) -> None:
    # `-o x.py` is an option value, not a Python input: this goes to the Rust CLI.
    out = tmp_path / "x.py"
    p = run(launchers()[0], "compile", "-o", out, "examples/saxpy.zir")
    assert p.returncode == 0, p.stderr
    assert ".entry saxpy" in out.read_text()


def test_report_for_the_cpu_backend(tmp_path: Path) -> None:
    cmd = launchers()[-1]
    p = run(cmd, "compile", "--backend", "llvm", "--report", "examples/critical_host.zir")
    assert p.returncode == 0, p.stderr
    assert "define" in p.stdout
    assert p.stderr.startswith("optimization report for module `critical_host`")
    assert "@risk_check (host, " in p.stderr
    obj = tmp_path / "host.o"
    p = run(
        cmd,
        "compile",
        "--backend",
        "llvm",
        "--emit",
        "obj",
        "--report=json",
        "-o",
        obj,
        "examples/critical_host.zir",
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["module"] == "critical_host"
    names = {f["name"] for f in report["functions"]}
    assert {"push_and_average", "risk_check"} <= names
    assert obj.read_bytes().startswith(b"\x7fELF")


def test_cuda_backend_runs_or_fails_with_one_line() -> None:
    # y = 3 * 2 + i over 1000 elements: sum = 6000 + 499500.
    p = run(
        launchers()[-1],
        "compile",
        "--backend",
        "cuda",
        "examples/saxpy.zir",
        "--grid",
        "4",
        "--block",
        "256",
        "1000",
        "3",
        "fill:1000:2",
        "range:1000",
    )
    if cuda.is_available():
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("kernel saxpy on ")
        assert "arg 4 (f32[1000]): [6, 7, 8, 9, 10, 11, 12, 13, ...] sum=505500 " in p.stdout
    else:
        assert p.returncode == 1
        assert p.stdout == ""
        assert p.stderr.count("\n") == 1, p.stderr
        assert p.stderr.startswith("error: cuda: ")
        assert "CUDA driver not available" in p.stderr or "no CUDA device" in p.stderr
    # A wrong argument is reported before any GPU is needed.
    p = run(
        launchers()[0], "compile", "--backend", "cuda", "examples/saxpy.zir", "1000", "3", "rand:10"
    )
    assert p.returncode == 1
    assert "takes 4 argument(s)" in p.stderr


# --------------------------------------------------------------------------- exit statuses


def run_env(
    cmd: Sequence[str], env: dict[str, str], *args: str | Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, check=False, cwd=ROOT, env=env
    )


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_usage_errors_are_one_line_with_status_2(cmd: list[str], tmp_path: Path) -> None:
    py = tmp_path / "k.py"
    py.write_text("import zyntax\n")
    for args in (
        ["compile", "--bogus", "examples/saxpy.zir"],
        ["compile", "--report", "examples/saxpy.zir"],
        ["compile", str(py), "--arch"],  # the Python front-end's parser
        ["compile", str(py), "--cache-layout=3"],
    ):
        p = run(cmd, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, (args, p.stderr)
        assert p.stdout == ""


def test_help_lists_the_exit_statuses_of_docs_cli_md() -> None:
    docs = (ROOT / "docs" / "cli.md").read_text()
    p = run(launchers()[-1], "--help")
    assert p.returncode == 0
    rows = p.stdout.split("Exit status:\n")[1].strip().splitlines()
    assert [r.split()[0] for r in rows] == ["0", "1", "2"]
    for r in rows:
        code, meaning = r.strip().split("  ", 1)
        assert f"| {code} | {meaning.strip()} |" in docs


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_output_naming_the_input_is_refused(cmd: list[str], tmp_path: Path) -> None:
    zir = tmp_path / "m.zir"
    zir.write_text((EXAMPLES / "saxpy.zir").read_text())
    kernels = tmp_path / "k.py"
    kernels.write_text((EXAMPLES / "kernels" / "vector_add.py").read_text())
    for src in (zir, kernels):
        before = src.read_bytes()
        for out in (src, tmp_path / ".." / tmp_path.name / src.name):
            p = run(cmd, "compile", src, "-o", out)
            assert p.returncode == 2, p.stderr
            assert "names the input file" in p.stderr and p.stderr.count("\n") == 1
            assert src.read_bytes() == before


@pytest.mark.parametrize("code", ["sys.exit(0)", "sys.exit()", "raise SystemExit(3)"])
def test_python_input_that_exits_is_an_error(code: str, tmp_path: Path) -> None:
    src = tmp_path / "quits.py"
    src.write_text(f"import sys\n{code}\n")
    p = run(launchers()[-1], "compile", src, "-o", tmp_path / "out")
    assert p.returncode == 1, p.stderr
    assert "while being imported: no kernel was compiled" in p.stderr
    assert p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cmd", launchers(), ids=lambda c: Path(c[-1]).name)
def test_an_abort_in_the_compiler_is_one_error_line(cmd: list[str]) -> None:
    """The command compiles in a worker; the test hook makes the worker abort
    (as LLVM does on a fatal error) and the command must still end cleanly."""
    env = dict(os.environ, ZYNTAX_WORKER_TEST_ABORT="1")
    p = run_env(cmd, env, "compile", "examples/saxpy.zir")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith(
        "error: the compiler worker process was killed by signal 6 (SIGABRT)"
    )
    assert p.stderr.count("\n") == 1, p.stderr
    # Without the hook the same command works (the hook is the only difference).
    assert run(cmd, "compile", "examples/saxpy.zir").returncode == 0


def test_validate_finds_the_compute_extra_without_an_activated_venv(tmp_path: Path) -> None:
    """ptxas of the `[compute]` extra is found through the running interpreter,
    not through whatever `python3` is first on PATH (issue: un-activated venvs)."""
    if importlib.util.find_spec("nvidia.cuda_nvcc") is None:
        pytest.skip("nvidia-cuda-nvcc-cu12 is not installed in this environment")
    # A PATH whose python3/python know nothing of this environment, and no ptxas.
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python3", "python"):
        (fake / name).write_text("#!/bin/sh\nexit 1\n")
        (fake / name).chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ZYNTAX_PTXAS", "ZYNTAX_PYTHON", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PATH"] = f"{fake}:/usr/bin:/bin"
    if shutil.which("ptxas", path=env["PATH"]):
        pytest.skip("a ptxas on the system PATH would hide the problem")
    code = (
        "import zyntax; from zyntax import hir; "
        f"m = hir.parse_zir(open({str(EXAMPLES / 'saxpy.zir')!r}).read()); "
        "r = zyntax.validate_ptx(zyntax.compile(m, arch='sm_80'), 'sm_80'); "
        "print('ptxas', r.ptxas)"
    )
    p = run_env([sys.executable, "-c", code], env)
    assert p.returncode == 0, p.stderr
    assert "nvidia" in p.stdout
    if SCRIPT.exists():
        p = run_env([str(SCRIPT)], env, "compile", "--validate", "examples/saxpy.zir")
        assert p.returncode == 0, p.stderr
        assert ".visible .entry saxpy(" in p.stdout


# ------------------------------------------------------------ no user file overwritten


def test_python_kernel_metadata_never_replaces_a_user_json(tmp_path: Path) -> None:
    """`compile kernels.py -o saxpy.ptx` (or `-o DIR`) writes the metadata to
    saxpy.json: a user's file there is kept and nothing is written, unless --force."""
    mine = '{"name": "my-package"}\n'
    src = "examples/kernels/vector_add.py"
    d = tmp_path / "d"
    d.mkdir()
    for out, meta in ((tmp_path / "saxpy.ptx", tmp_path / "saxpy.json"), (d, d / "saxpy.json")):
        meta.write_text(mine)
        before = sorted(tmp_path.rglob("*"))
        p = run(launchers()[-1], "compile", src, "--arch", "sm_80", "-o", out)
        assert p.returncode == 1, p.stderr
        assert p.stderr == (
            f"error: {meta} exists and is not zyntax kernel metadata: refusing to overwrite "
            "it (pass --force, or overwrite=True from Python, to replace it)\n"
        )
        assert meta.read_text() == mine and sorted(tmp_path.rglob("*")) == before
        p = run(launchers()[-1], "compile", src, "--arch", "sm_80", "-o", out, "--force")
        assert p.returncode == 0, p.stderr
        assert json.loads(meta.read_text())["kernels"] == ["saxpy"]
        # zyntax's own metadata is replaced without --force.
        p = run(launchers()[-1], "compile", src, "--arch", "sm_90", "-o", out)
        assert p.returncode == 0, p.stderr
        assert json.loads(meta.read_text())["arch"] == "sm_90"


# ------------------------------------------------------------ the CLI says what it does


def test_help_lists_every_command_and_emit_value() -> None:
    cmd = launchers()[-1]
    p = run(cmd, "--help")
    assert p.returncode == 0
    commands = p.stdout.split("Commands:\n")[1].split("\n\n")[0]
    assert [line.split()[0] for line in commands.splitlines()] == [
        "compile",
        "archs",
        "cache",
        "help",
    ]
    p = run(cmd, "compile", "--help")
    assert p.returncode == 0
    emit = p.stdout.split("--emit <EMIT>")[1].split("\n      --")[0]
    for value in ("ptx", "llvm", "asm", "obj", "so", "cubin", "fatbin"):
        assert f"- {value}:" in emit, (value, emit)
    # `zyntax help cache` is the cache command's own help.
    p = run(cmd, "help", "cache")
    assert p.returncode == 0 and p.stdout.startswith("usage: zyntax cache")
    for sub in ("list", "verify", "clear", "export", "import", "dir"):
        assert f"    {sub} " in p.stdout, sub


@pytest.mark.parametrize(
    "args",
    [
        ["cache"],
        ["cache", "frobnicate"],
        ["cache", "export"],
        ["compile", "--emit", "fatbin", "examples/saxpy.zir"],  # no --arch
        ["compile", "--emit", "fatbin", "--arch", "sm_80", "--bogus", "examples/saxpy.zir"],
    ],
)
def test_python_usage_errors_are_one_line_without_internal_names(args: list[str]) -> None:
    p = run(launchers()[-1], *args)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert f"(see `zyntax {args[0]}" in p.stderr
    assert "cmd" not in p.stderr.replace("command", "") and "usage:" not in p.stderr
    assert p.stdout == ""


def test_a_module_without_kernels_is_an_error_for_nvptx(tmp_path: Path) -> None:
    """host_latency.zir has host functions only: no empty PTX file, one error line."""
    out = tmp_path / "h.ptx"
    for emit in ("ptx", "llvm"):
        p = run(launchers()[-1], "compile", "--emit", emit, "examples/host_latency.zir", "-o", out)
        assert p.returncode == 1, p.stderr
        assert p.stderr.count("\n") == 1, p.stderr
        assert p.stderr.startswith("examples/host_latency.zir: error: module `host_latency` ")
        assert "has no kernel" in p.stderr and "--backend llvm" in p.stderr
        assert not out.exists()
    # The same module compiles for the CPU.
    p = run(launchers()[-1], "compile", "--backend", "llvm", "examples/host_latency.zir")
    assert p.returncode == 0 and "define" in p.stdout


@pytest.mark.parametrize("option", ["--arch sm_80", "--ptx 7.8"])
def test_docs_and_cli_agree_on_the_backends_of_an_option(option: str) -> None:
    """docs/cli.md's `backends` column for --arch and --ptx is what the command accepts,
    and its refusal names the same backends."""
    name = option.split()[0]
    docs = (ROOT / "docs" / "cli.md").read_text()
    row = next(r for r in docs.splitlines() if r.startswith(f"| `{name} "))
    documented = [b.strip() for b in row.split("|")[2].split(",")]
    assert documented == ["nvptx", "cuda"]
    for backend in ("nvptx", "llvm", "cuda"):
        p = run(
            launchers()[-1], "compile", "--backend", backend, *option.split(), "examples/saxpy.zir"
        )
        if backend in documented:
            assert name not in p.stderr, (backend, p.stderr)
        else:
            assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
            assert name in p.stderr and all(b in p.stderr for b in documented), p.stderr
