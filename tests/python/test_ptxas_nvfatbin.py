"""Finding ptxas and nvFatbin of CUDA 12 and 13 (issue 29, item 6), without a GPU.

One locator (Rust's ``Ptxas::locate``, which Python's ``aot.locate_ptxas`` calls)
checks every ptxas' release: 12.x and 13.x are driven, anything else is a typed
error, and an arch the found ptxas lacks (CUDA 13: sm_70) is refused before it
runs, naming the arch and the release. ``$ZYNTAX_PTXAS`` / ``$ZYNTAX_NVFATBIN``
set to something unusable is an error, never passed over. nvFatbin is opened
through ctypes with the prototypes of ``nvFatbin.h``.

Stand-in ptxas executables (shell scripts printing a ``--version``) play the
releases this machine does not have; the real ptxas and nvFatbin are the
``[compute]`` extra's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import zyntax
from zyntax import aot, fatbin, hir

ROOT = Path(__file__).resolve().parents[2]
SAXPY = (ROOT / "examples" / "saxpy.zir").read_text()

V13 = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 13.0, V13.0.88\n"
V11 = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 11.8, V11.8.89\n"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "zcache"))


def _fake_ptxas(path: Path, version: str) -> Path:
    """An executable that answers ``--version`` like a ptxas of ``version``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # printf is a shell builtin: the stand-in runs with an empty PATH too.
    path.write_text(f"#!/bin/sh\nprintf '%s' '{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _saxpy_ptx(arch: str) -> str:
    return zyntax.compile_ptx(hir.parse_zir(SAXPY, "saxpy.zir"), arch).ptx


# ------------------------------------------------------------------------------ ptxas


def test_zyntax_ptxas_set_to_nothing_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It used to be passed over silently (the package's ptxas was used instead)."""
    monkeypatch.setenv("ZYNTAX_PTXAS", "/nonexistent/ptxas")
    for call in (aot.locate_ptxas, lambda: zyntax.validate_ptx(_saxpy_ptx("sm_80"), "sm_80")):
        with pytest.raises(zyntax.CompileError, match=r"\$ZYNTAX_PTXAS=/nonexistent/ptxas"):
            call()
    with pytest.raises(zyntax.CompileError, match="ZYNTAX_PTXAS"):
        aot.build_bundle(hir.parse_zir(SAXPY, "s.zir"), ["sm_80"], tmp_path / "k.fatbin")


def test_python_and_rust_share_one_locator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZYNTAX_PTXAS", raising=False)
    path = aot.locate_ptxas()
    assert zyntax.validate_ptx(_saxpy_ptx("sm_80"), "sm_80").ptxas == path
    info = zyntax._native.ptxas_info()
    assert info["path"] == path and aot.ptxas_version(path) == info["version"]
    assert info["release"].split(".")[0] in ("12", "13") and "sm_80" in info["archs"]


def test_other_ptxas_releases_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _fake_ptxas(tmp_path / "cuda11" / "ptxas", V11)
    with pytest.raises(zyntax.CompileError, match=r"not a supported ptxas.*release 11\.8"):
        aot.ptxas_version(str(old))
    with pytest.raises(zyntax.CompileError, match=r"12\.x or 13\.x"):
        zyntax.validate_ptx(_saxpy_ptx("sm_80"), "sm_80", str(old))
    monkeypatch.setenv("ZYNTAX_PTXAS", str(old))
    with pytest.raises(zyntax.CompileError, match="not a supported ptxas"):
        aot.locate_ptxas()
    not_ptxas = _fake_ptxas(tmp_path / "echo" / "ptxas", "hello\n")
    with pytest.raises(zyntax.CompileError, match="not a supported ptxas"):
        aot.ptxas_version(str(not_ptxas))


def test_ptxas_13_refuses_sm_70_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA 13 dropped sm_50 … sm_72: asking it for sm_70 is a CompileError naming
    the arch and the release, raised before ptxas runs (the stand-in would not
    assemble anything)."""
    p13 = str(_fake_ptxas(tmp_path / "cuda13" / "ptxas", V13))
    info = zyntax._native.ptxas_info(p13)
    assert info["release"] == "13.0" and info["version"].endswith("release 13.0, V13.0.88")
    assert "sm_70" not in info["archs"] and {"sm_75", "sm_90a"} <= set(info["archs"])
    with pytest.raises(zyntax.CompileError, match=r"ptxas 13\.0 .*cannot assemble for sm_70"):
        zyntax.validate_ptx(_saxpy_ptx("sm_70"), "sm_70", p13)
    monkeypatch.setenv("ZYNTAX_PTXAS", p13)
    with pytest.raises(zyntax.CompileError, match="sm_70") as e:
        aot.build_bundle(hir.parse_zir(SAXPY, "s.zir"), ["sm_70"], tmp_path / "k.fatbin")
    assert "13.0" in str(e.value)


def _hide_cuda12_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A regular package ``nvidia`` first on PYTHONPATH hides the installed wheels
    (namespace portions) from this process and the locator's interpreters; returns
    its directory, where a test may place a CUDA 13 layout (``nvidia/cu13``)."""
    shadow = tmp_path / "shadow" / "nvidia"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    for var in ("ZYNTAX_PTXAS", "ZYNTAX_PYTHON", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    if Path("/usr/local/cuda/bin/ptxas").exists():
        pytest.skip("a CUDA toolkit in /usr/local/cuda is found before PATH")
    return shadow


def test_missing_ptxas_names_the_projects_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_cuda12_wheels(tmp_path, monkeypatch)
    with pytest.raises(zyntax.CompileError, match="ptxas not found") as e:
        aot.locate_ptxas()
    assert "pip install 'zyntax-compiler[compute]'" in str(e.value)


def test_ptxas_of_the_cuda_13_wheel_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nvidia-cuda-nvcc`` 13.x installs its ptxas as ``nvidia/cu13/bin/ptxas``."""
    shadow = _hide_cuda12_wheels(tmp_path, monkeypatch)
    p13 = _fake_ptxas(shadow / "cu13" / "bin" / "ptxas", V13)
    assert aot.locate_ptxas() == str(p13)
    assert aot.ptxas_version(str(p13)) == "Cuda compilation tools, release 13.0, V13.0.88"


# ---------------------------------------------------------------------------- nvFatbin


@pytest.fixture
def fresh_nvfatbin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the nvFatbin this process opened, so the test's environment decides."""
    monkeypatch.setattr(fatbin, "_found", None)


@pytest.mark.usefixtures("fresh_nvfatbin")
def test_zyntax_nvfatbin_set_to_nothing_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_NVFATBIN", "/nonexistent/libnvfatbin.so")
    with pytest.raises(zyntax.CompileError, match=r"\$ZYNTAX_NVFATBIN=/nonexistent"):
        fatbin.build({}, {"sm_80": _saxpy_ptx("sm_80")})


@pytest.mark.usefixtures("fresh_nvfatbin")
def test_a_library_that_is_not_nvfatbin_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to leak an AttributeError from ctypes."""
    libm = ctypes.util.find_library("m")
    assert libm is not None
    path = next(
        str(Path(d) / libm)
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
        if (Path(d) / libm).is_file()
    )
    monkeypatch.setenv("ZYNTAX_NVFATBIN", path)
    with pytest.raises(zyntax.CompileError, match="has no nvFatbin"):
        fatbin.version()


@pytest.mark.usefixtures("fresh_nvfatbin")
def test_nvfatbin_of_the_cuda_13_wheel_is_a_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nvidia-nvfatbin`` 13.x installs ``nvidia/cu13/lib/libnvfatbin.so.13``."""
    cu13 = tmp_path / "nvidia" / "cu13" / "lib"
    cu13.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "toolkit"))
    found = fatbin._candidates()
    assert str(cu13 / "libnvfatbin.so.13") in found
    assert str(tmp_path / "toolkit" / "lib64" / "libnvfatbin.so.13") in found
    assert found[-2:] == ["libnvfatbin.so.12", "libnvfatbin.so.13"]


def test_nvfatbin_prototypes_are_the_headers() -> None:
    """Sizes are size_t and the handle a pointer (ctypes' default is a C int)."""
    nv = fatbin.find()
    assert nv.major in fatbin.SUPPORTED_MAJORS and fatbin.version() == f"{nv.major}.{nv.minor}"
    lib = nv.lib
    assert lib.nvFatbinCreate.argtypes[2] is ctypes.c_size_t
    assert lib.nvFatbinAddCubin.argtypes[:3] == [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    assert lib.nvFatbinAddPTX.argtypes[2] is ctypes.c_size_t
    assert lib.nvFatbinGetErrorString.restype is ctypes.c_char_p


def test_bad_fatbin_inputs_are_typed_errors() -> None:
    with pytest.raises(zyntax.CompileError, match="not non-empty bytes"):
        fatbin.build({"sm_80": "not bytes"}, {})  # type: ignore[dict-item]
    with pytest.raises(zyntax.CompileError, match="NUL"):
        fatbin.build({}, {"sm_80": "a\0b"})
    with pytest.raises(zyntax.CompileError, match="not an arch"):
        fatbin.build({}, {"compute_80": _saxpy_ptx("sm_80")})


def test_fatbin_builds_are_identical_under_freed_memory_poisoning() -> None:
    """Every buffer handed to nvFatbin stays alive until Destroy: with Python's
    debug allocator (freed memory overwritten), 20 builds in a fresh process are
    byte-identical and parse to every image."""
    code = (
        "import hashlib, pickle, sys\n"
        "from zyntax import fatbin\n"
        "cubins, ptx = pickle.loads(sys.stdin.buffer.read())\n"
        "outs = {hashlib.sha256(fatbin.build(dict(cubins), dict(ptx))).hexdigest()"
        " for _ in range(20)}\n"
        "last = fatbin.build(cubins, ptx)\n"
        "print(len(outs), sorted((i.kind, i.arch) for i in fatbin.parse(last)))\n"
    )
    import pickle

    archs = ["sm_75", "sm_80", "sm_90a"]
    cubins = {a: zyntax.validate_ptx(_saxpy_ptx(a), a).cubin for a in archs}
    ptx = {a: _saxpy_ptx(a) for a in archs}
    env = dict(os.environ, PYTHONMALLOC="debug")
    r = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", code],
        input=pickle.dumps((cubins, ptx)),
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr.decode()
    want = sorted([("cubin", a) for a in archs] + [("ptx", a) for a in archs])
    assert r.stdout.decode().strip() == f"1 {want}"


@pytest.mark.usefixtures("fresh_nvfatbin")
def test_missing_nvfatbin_names_the_projects_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZYNTAX_NVFATBIN", raising=False)
    monkeypatch.setattr(fatbin, "_candidates", lambda: ["/nonexistent/libnvfatbin.so.13"])
    with pytest.raises(zyntax.CompileError, match="nvFatbin not found") as e:
        fatbin.build({}, {"sm_80": _saxpy_ptx("sm_80")})
    assert "/nonexistent/libnvfatbin.so.13" in str(e.value)
    assert "pip install 'zyntax-compiler[compute]'" in str(e.value)
