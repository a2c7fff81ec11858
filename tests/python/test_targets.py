"""The one table of target facts (issue 28 item 3): ``zyntax.targets`` is read
from Rust, agrees with what the Rust compiler, verifier and command do, and
every default arch in the package is the table's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import cuda, hir, targets
from zyntax.frontend import cache, pipeline

ROOT = Path(__file__).resolve().parents[2]


def _copy_kernel(elem: Any = hir.f32, targets_: list[str] | None = None) -> hir.Module:
    m = hir.Module("copy", targets=targets_ or [])
    p = hir.ptr("global", elem)
    with m.kernel("copy", [p, p], max_threads=128) as b:
        x, y = b.params
        i = b.thread_idx("x")
        b.store(b.ptr_add(y, i), b.load(b.ptr_add(x, i)))
    return m


def test_the_table_lists_every_arch_with_its_facts() -> None:
    names = list(targets.ARCHS)
    assert names == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"]
    caps = [a.compute_capability for a in targets.ARCHS.values()]
    assert caps == sorted(caps) and caps[-1] == caps[-2] == (9, 0)
    assert [a for a, info in targets.ARCHS.items() if info.arch_specific] == ["sm_90a"]
    assert targets.DEFAULT_PTX == {a: i.ptx_version for a, i in targets.ARCHS.items()}
    assert cache.DEFAULT_PTX is targets.DEFAULT_PTX  # the kernel cache keys with the table
    for info in targets.ARCHS.values():
        assert info.ptx_version in targets.PTX_VERSIONS
        v = tuple(map(int, info.ptx_version.split(".")))
        assert v >= tuple(map(int, info.min_ptx_version.split("."))), info
        assert info.max_shared_bytes >= 48 * 1024 and "baseline" in info.features
    assert targets.PTX_VERSIONS[0] == "6.0" and targets.PTX_VERSIONS[-1] == "8.5"
    wgmma = [a for a, i in targets.ARCHS.items() if "wgmma" in i.features]
    assert wgmma == ["sm_90a"]
    assert next(a for a, i in targets.ARCHS.items() if "cp.async" in i.features) == "sm_80"


@pytest.mark.parametrize("arch", list(targets.ARCHS))
def test_the_compiler_emits_the_table_ptx_version(arch: str) -> None:
    res = zyntax.compile_ptx(_copy_kernel(), arch)
    want = targets.DEFAULT_PTX[arch]
    assert res.ptx_version == want
    assert f".version {want}\n" in res.ptx and f".target {arch}\n" in res.ptx


@pytest.mark.parametrize("arch", list(targets.ARCHS))
def test_the_verifier_gates_bf16_as_the_table_says(arch: str) -> None:
    compiles = True
    try:
        zyntax.compile_ptx(_copy_kernel(hir.bf16), arch)
    except zyntax.VerifyError:
        compiles = False
    assert compiles == ("bf16" in targets.ARCHS[arch].features)


def test_the_rust_command_lists_the_same_archs_and_ptx_versions() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "zyntax.cli", "archs"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()]
    assert {r[0]: r[2] for r in rows} == targets.DEFAULT_PTX


def _rule(major: int, minor: int) -> str | None:
    """The device rule stated over the table's rows: the arch-specific arch of
    exactly this capability, else the newest portable one at or below it."""
    exact = [a for a, i in targets.ARCHS.items() if i.arch_specific]
    exact = [a for a in exact if targets.ARCHS[a].compute_capability == (major, minor)]
    below = [
        a
        for a, i in targets.ARCHS.items()
        if not i.arch_specific and i.compute_capability <= (major, minor)
    ]
    found = exact or below
    return found[-1] if found else None


def test_capability_mapping_follows_the_rule_everywhere() -> None:
    for major in range(5, 14):
        for minor in range(10):
            want = _rule(major, minor)
            if want is None:
                with pytest.raises(zyntax.ArgumentError, match=f"{major}.{minor} is older"):
                    targets.arch_for_capability(major, minor)
            else:
                assert targets.arch_for_capability(major, minor) == want, (major, minor)
    assert cuda.arch_for_capability is targets.arch_for_capability
    assert cuda.arch_for_capability(9, 0) == "sm_90a"
    assert cuda.arch_for_capability(10, 0) == "sm_90"
    # Before the table, a 6.1 device got sm_70 PTX, which it cannot load.
    with pytest.raises(zyntax.ArgumentError, match="older than sm_70"):
        cuda.arch_for_capability(6, 1)


@pytest.mark.parametrize("bad", [-1, 2**32, 9.0, True, "9", None, np.float32(9)])
def test_capability_arguments_are_checked(bad: Any) -> None:
    with pytest.raises(zyntax.ArgumentError, match="integer"):
        targets.arch_for_capability(bad, 0)
    with pytest.raises(zyntax.ArgumentError, match="integer"):
        targets.arch_for_capability(9, bad)


def test_every_default_arch_is_the_table_default(tmp_path: Path) -> None:
    assert targets.DEFAULT_ARCH == "sm_80" and not targets.ARCHS["sm_80"].arch_specific
    assert pipeline.DEFAULT_ARCH == targets.DEFAULT_ARCH
    # zyntax.compile: the module's first declared target, else the default
    # (it was sm_90 here and sm_80 in the command).
    assert ".target sm_80\n" in zyntax.compile(_copy_kernel())
    assert zyntax.compile_ptx(_copy_kernel()).arch == "sm_80"
    assert ".target sm_75\n" in zyntax.compile(_copy_kernel(targets_=["sm_75", "sm_90"]))
    assert ".target sm_90\n" in zyntax.compile(_copy_kernel(), arch="sm_90")
    # The Rust command picks the same for a module without targets.
    src = tmp_path / "copy.zir"
    src.write_text(_copy_kernel().to_zir())
    p = subprocess.run(
        [sys.executable, "-m", "zyntax.cli", "compile", "--backend", "nvptx", str(src)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == zyntax.compile(_copy_kernel())
    # `zyntax compile kernels.py` and `python -m zyntax.frontend.aot` default to it too.
    from zyntax import cli

    assert cli._python_parser().parse_args(["k.py"]).arch == targets.DEFAULT_ARCH


def test_the_front_end_falls_back_to_the_default_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZYNTAX_ARCH", raising=False)
    monkeypatch.setattr(pipeline, "_device_arch", lambda: None)
    assert pipeline.resolve_arch(None) == targets.DEFAULT_ARCH
    monkeypatch.setenv("ZYNTAX_ARCH", "sm_90a")
    assert pipeline.resolve_arch(None) == "sm_90a"
    monkeypatch.setenv("ZYNTAX_ARCH", "sm_91")
    with pytest.raises(zyntax.KernelError, match="unknown arch 'sm_91'"):
        pipeline.resolve_arch(None)


def test_tile_schedules_default_to_the_table_default() -> None:
    """The tile layer's schedules (zyntax_tile::Schedule, tile_heuristic,
    tile_gemm_schedule) take the table's default arch when none is named, and
    a schedule's repr leaves out the fields at their defaults."""
    from zyntax import _native, tile

    s = tile.Schedule((64, 64))
    assert s.arch == targets.DEFAULT_ARCH
    assert _native.tile_heuristic(256, 256, 256).arch == targets.DEFAULT_ARCH
    assert _native.tile_gemm_schedule(256, 256, 256)[0].arch == targets.DEFAULT_ARCH
    assert repr(s) == (
        "Schedule(block=[64, 64], k=16, warps=4, stages=1, cluster=1, "
        f"arch='{targets.DEFAULT_ARCH}')"
    )
    shown = repr(tile.Schedule((64, 64), arch="sm_90a", wgmma_in_flight=1))
    assert shown.endswith("arch='sm_90a', wgmma_in_flight=1)")
    with pytest.raises(zyntax.ArgumentError, match="unknown arch 'sm_99'"):
        _native.tile_heuristic(64, 64, 64, arch="sm_99")


def test_feature_checks_read_the_table() -> None:
    """targets.has_feature is the table's feature list (the kernel library asks
    it for wgmma instead of naming the Hopper archs)."""
    assert targets.has_feature("sm_90a", "wgmma") and not targets.has_feature("sm_90", "wgmma")
    assert not targets.has_feature("interp", "wgmma")
    for name, info in targets.ARCHS.items():
        for feature in {f for a in targets.ARCHS.values() for f in a.features}:
            assert targets.has_feature(name, feature) == (feature in info.features)
