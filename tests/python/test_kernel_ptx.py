"""@zyntax.kernel to PTX: every example kernel passes ptxas, and the disk cache
makes a second process compile nothing. A missing ptxas fails, never skips."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import zyntax
from conftest import ROOT


def example(name: str):  # type: ignore[no-untyped-def]
    """Import examples/kernels/<name>.py under a private module name."""
    key = f"zk_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            key, ROOT / "examples" / "kernels" / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


F32 = np.float32
A1 = zyntax.Array[zyntax.f32, 1]
A2 = zyntax.Array[zyntax.f32, 2]
KERNELS = [
    ("vector_add", "vector_add", (A1, A1, A1)),
    ("vector_add", "saxpy", None),
    ("transpose", "transpose", (A2, A2)),
    ("sgemm", "sgemm", (A2, A2, A2)),
    ("reduction", "block_sum", (A1, A1)),
    ("reduction", "warp_shuffle_sum", (A1, A1)),
    ("scan", "block_scan", (A1, A1)),
    ("histogram", "histogram", (zyntax.Array[zyntax.i32, 1], zyntax.Array[zyntax.u32, 1])),
    ("softmax", "softmax", (A2, A2)),
]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "zcache"))


@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
@pytest.mark.parametrize(("mod", "name", "sig"), KERNELS, ids=[k[1] for k in KERNELS])
def test_example_kernels_pass_ptxas(mod: str, name: str, sig: tuple | None, arch: str) -> None:
    k = getattr(example(mod), name)
    ptx = k.ptx(sig, arch=arch)
    assert f".target {arch}" in ptx
    assert f".entry {name}(" in ptx
    out = zyntax.validate_ptx(ptx, arch)
    assert out.cubin[:4] == b"\x7fELF"


def test_ptx_is_deterministic_and_llvm_is_available() -> None:
    sgemm = example("sgemm")
    sig = (A2, A2, A2)
    p1 = sgemm.sgemm.ptx(sig, arch="sm_80")
    sgemm.sgemm._variants.clear()  # translate again from the source
    assert sgemm.sgemm.ptx(sig, arch="sm_80") == p1
    ll = sgemm.sgemm.llvm(sig, arch="sm_80")
    assert "define" in ll and "sgemm" in ll


_SCRIPT = textwrap.dedent(
    """
    import hashlib, importlib.util, json
    from zyntax.frontend import compile_hooks
    spec = importlib.util.spec_from_file_location("zk_sgemm", {path!r})
    sgemm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sgemm)
    seen = []
    compile_hooks.append(seen.append)
    ptx = sgemm.sgemm.ptx(({a2}, {a2}, {a2}), arch="sm_80")
    print(json.dumps({{"compiles": len(seen), "sha": hashlib.sha256(ptx.encode()).hexdigest()}}))
    """
).format(
    path=str(ROOT / "examples" / "kernels" / "sgemm.py"),
    a2="sgemm.zyntax.Array[sgemm.zyntax.f32, 2]",
)


def _run(tmp: Path) -> dict[str, object]:
    env = dict(os.environ, ZYNTAX_CACHE_DIR=str(tmp), PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_second_process_compiles_nothing_and_corrupt_entries_are_rebuilt(tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first["compiles"] == 1
    second = _run(tmp_path)
    assert second == {"compiles": 0, "sha": first["sha"]}
    entries = sorted((tmp_path / "ptx_cache").iterdir())
    # .zir: the HIR the key was computed from (what `zyntax cache import` re-derives from).
    assert [p.suffix for p in entries] == [".json", ".ptx", ".zir"]
    meta = json.loads(entries[0].read_text())
    assert meta["kernels"] == ["sgemm"] and meta["arch"] == "sm_80"
    assert meta["params"][0] == "ptr<global, f32>"
    # The ptx_cache/ schema: zyntax.cuda.load_cached reads the launch section.
    launch = meta["launch"]["sgemm"]
    assert [p["type"] for p in launch["params"]] == meta["params"]
    assert launch["dynamic_shared_bytes"] == 0 and meta["module"] == "sgemm"
    assert meta["source"].endswith("sgemm.py:14")  # the def line
    # Corrupt the PTX: the next process notices, recompiles and repairs the entry.
    entries[1].write_text(entries[1].read_text()[:100])
    third = _run(tmp_path)
    assert third == {"compiles": 1, "sha": first["sha"]}
    assert hashlib.sha256(entries[1].read_bytes()).hexdigest() == first["sha"]


_AOT_FILE = """
import zyntax
from zyntax import lang


@zyntax.kernel
def scale(x: zyntax.Array[zyntax.f32, 1], s: zyntax.f32, n: zyntax.i32):
    i = lang.grid(1)
    if i < n:
        x[i] = x[i] * s


@zyntax.kernel
def untyped(x, n):
    x[0] = n
"""


def test_aot_compile_file(tmp_path: Path) -> None:
    from zyntax.frontend import aot

    src = tmp_path / "kernels.py"
    src.write_text(_AOT_FILE)
    res = aot.compile_file(src, "sm_80", tmp_path / "out")
    assert res.kernels == ["scale"]
    assert res.skipped and res.skipped[0][0] == "untyped"
    ptx = (tmp_path / "out" / "scale.ptx").read_text()
    assert ".entry scale(" in ptx
    assert zyntax.validate_ptx(ptx, "sm_80").cubin[:4] == b"\x7fELF"
    meta = json.loads((tmp_path / "out" / "scale.json").read_text())
    assert meta["params"] == ["ptr<global, f32>", "i64", "i64", "f32", "i32"]
    assert meta["source"] == "kernels.py:7"  # the def line
    # One kernel to a named .ptx file; content-addressed layout.
    one = aot.compile_file(src, "sm_90", tmp_path / "one.ptx")
    assert (tmp_path / "one.ptx").read_text().count(".entry") == 1 and one.written
    keyed = aot.compile_file(src, "sm_80", tmp_path / "cache", cache_layout=True)
    stem = keyed.written[0].stem
    assert len(stem) == 64 and (tmp_path / "cache" / f"{stem}.json").exists()
    # A file without any annotated kernel is an error.
    bad = tmp_path / "bad.py"
    bad.write_text(_AOT_FILE.split("@zyntax.kernel\ndef scale")[0] + _AOT_FILE.split("\n\n\n")[-1])
    with pytest.raises(zyntax.ZyntaxError, match="no fully annotated"):
        aot.compile_file(bad, "sm_80", tmp_path / "bad")
    # The command-line form.
    assert aot.main([str(src), "--arch", "sm_75", "-o", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "scale.ptx").exists()


def test_arch_gating_errors_point_at_the_python_line() -> None:
    from zyntax import lang

    @zyntax.kernel
    def staged(x: zyntax.Array[zyntax.f32, 1]):
        buf = lang.shared.array(64, zyntax.f32)
        lang.async_copy(buf, 0, x, 0, 16)
        lang.async_wait(0)
        x[0] = buf[1]

    with pytest.raises(zyntax.KernelError) as info:
        staged.ptx(arch="sm_70")
    e = info.value
    assert e.file == __file__
    assert "cp.async needs sm_80" in str(e)
    line = Path(__file__).read_text().splitlines()[(e.line or 0) - 1]
    assert line.strip() == "lang.async_copy(buf, 0, x, 0, 16)"
    assert ".target sm_80" in staged.ptx(arch="sm_80")


def test_line_info_puts_loc_lines_at_the_python_lines_of_the_ops() -> None:
    import re

    from zyntax import lang

    @zyntax.kernel
    def scaled(x: A1, y: A1, n: zyntax.i32):
        i = lang.block_idx.x * lang.block_dim.x + lang.thread_idx.x
        if i < n:
            y[i] = x[i] * 2.5 + 1.0  # the line the arithmetic comes from

    src = Path(__file__).read_text().splitlines()
    tag = "# the line the arithmetic comes from"
    marker = 1 + next(k for k, s in enumerate(src) if s.endswith(tag))
    ptx = scaled.ptx(arch="sm_80", line_info=True)
    assert ".loc" not in scaled.ptx(arch="sm_80")
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M))
    assert list(files.values()) == [__file__], files
    # Each .loc names a line of this kernel; the f32 arithmetic sits under the marker line's.
    current = None
    arith_lines = set()
    for line in ptx.splitlines():
        m = re.match(r"\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)", line)
        if m:
            current = int(m.group(2))
            assert m.group(1) in files
            assert current == 0 or marker - 4 <= current <= marker, line
        elif re.match(r"\s*(fma|mul|add)\.rn\.f32", line):
            arith_lines.add(current)
    assert arith_lines == {marker}, ptx
    assert zyntax.validate_ptx(ptx, "sm_80").cubin[:4] == b"\x7fELF"
    # The .zir with locations says the same, as comments that parse away.
    located = scaled.hir(located=True)
    assert f"; source: {__file__}" in located
    assert re.search(rf"f32 = mul .*  ; {marker}:\d+$", located, re.M), located
    assert zyntax.hir.parse_zir(located) == zyntax.hir.parse_zir(scaled.hir())


def test_line_info_ptx_stays_out_of_the_disk_cache() -> None:
    from zyntax import lang
    from zyntax.frontend import cache

    @zyntax.kernel
    def once(x: A1):
        x[lang.thread_idx.x] = 1.0

    ptx = once.ptx(arch="sm_80", line_info=True)
    assert ".loc" in ptx
    assert cache.keys() == []  # compiled, kept with the kernel, not stored
    assert once.ptx(arch="sm_80", line_info=True) is ptx
    plain = once.ptx(arch="sm_80")
    assert ".loc" not in plain and len(cache.keys()) == 1
