"""PTX / LLVM IR emission from Python, checked with ptxas for every target an
example declares. A missing ptxas fails these tests: it is never a skip."""

from __future__ import annotations

import importlib

import pytest

import zyntax
from conftest import EXAMPLES
from zyntax import hir

SCRIPTS = sorted(p.stem for p in EXAMPLES.glob("*.py"))
CASES = []
for _name in SCRIPTS:
    _m = importlib.import_module(_name).build()
    if _m.kernels:
        CASES += [(_name, arch) for arch in _m.targets]


@pytest.mark.parametrize(("name", "arch"), CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_examples_compile_and_pass_ptxas(name: str, arch: str) -> None:
    m = importlib.import_module(name).build()
    res = zyntax.compile_ptx(m, arch)
    assert res.arch == arch
    assert f".target {arch}" in res.ptx
    assert res.kernels == m.kernels
    for k in m.kernels:
        assert f".entry {k}(" in res.ptx
    assert set(res.timings) == {
        "verify",
        "lower",
        "llvm_verify",
        "optimize",
        "print_ir",
        "codegen",
    }
    out = zyntax.validate_ptx(res.ptx, arch)
    assert out.cubin[:4] == b"\x7fELF"
    assert out.ptxas


def test_compile_is_deterministic_and_emits_llvm() -> None:
    import saxpy

    m = saxpy.build()
    a = zyntax.compile(m, backend="nvptx", arch="sm_90", emit="ptx")
    b = zyntax.compile(saxpy.build(), arch="sm_90")
    assert a == b
    ir = zyntax.compile(m, arch="sm_80", emit="llvm")
    assert "define" in ir and "saxpy" in ir
    assert "nvvm.annotations" in ir or "ptx_kernel" in ir


def test_launch_bounds_reach_ptx() -> None:
    m = hir.Module("lb", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.u32)], max_threads=(64, 2), min_blocks=3) as b:
        b.store(b.params[0], b.thread_idx())
    ptx = zyntax.compile(m, arch="sm_80")
    assert ".maxntid 64, 2, 1" in ptx
    assert ".minnctapersm 3" in ptx


def test_arch_gating_is_a_verify_error() -> None:
    import cp_async_double_buffer

    m = cp_async_double_buffer.build()
    with pytest.raises(zyntax.VerifyError, match="sm_80"):
        zyntax.compile(m, arch="sm_75")


def test_bad_requests() -> None:
    import saxpy

    m = saxpy.build()
    with pytest.raises(zyntax.CompileError, match="unknown backend"):
        zyntax.compile(m, backend="amdgpu")  # type: ignore[arg-type]
    with pytest.raises(zyntax.CompileError, match="unknown emit"):
        zyntax.compile(m, emit="sass")  # type: ignore[arg-type]
    with pytest.raises(zyntax.BuildError, match="unknown arch 'sm_100'"):
        zyntax.compile(m, arch="sm_100")
    with pytest.raises(zyntax.BuildError, match="unknown opt level"):
        zyntax.compile(m, opt_level="O7")
    # PTX 6.0 predates sm_90: the arch gate rejects it before LLVM sees anything.
    with pytest.raises(zyntax.VerifyError, match="PTX"):
        zyntax.compile(m, arch="sm_90", ptx_version="6.0")


def test_a_given_pass_pipeline() -> None:
    """The extension's `passes=` (LLVM's `opt -passes=` text) replaces the
    level's pipeline; text LLVM does not parse is a CompileError naming it."""
    import saxpy
    from zyntax import _native

    m = saxpy.build()
    out = _native.compile_ptx(m, "sm_80", passes="function(instcombine)")
    assert zyntax.validate_ptx(out["ptx"], "sm_80").cubin[:4] == b"\x7fELF"
    with pytest.raises(zyntax.CompileError, match="no-such-pass"):
        _native.compile_ptx(m, "sm_80", passes="no-such-pass")


def test_ptxas_rejects_bad_ptx() -> None:
    with pytest.raises(zyntax.CompileError, match="ptxas rejected"):
        zyntax.validate_ptx(".version 7.8\n.target sm_90\n.address_size 64\nbogus;\n", "sm_90")
    with pytest.raises(zyntax.CompileError, match="ptxas"):
        zyntax.validate_ptx(".version 7.8\n", "sm_90", ptxas="/nonexistent/ptxas")
