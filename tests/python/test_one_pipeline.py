"""One compile pipeline and one kernel cache (issue 28 item 3): ``cuda.load_hir``
compiles through ``zyntax.frontend.pipeline.cached_ptx`` as ``@zyntax.kernel``
does, so a module is compiled once per arch across calls and processes, its
entry is one the front-end, ``cuda.load_cached`` and ``zyntax cache`` read,
and the runtime reaches the pipeline without importing it. No GPU needed: the
driver's part (``cuda.load_module``) is replaced by a recorder."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import zyntax
from zyntax import _providers, compiler, cuda, hir, lang
from zyntax.frontend import cache, compile_hooks, pipeline

A1 = zyntax.Array[zyntax.f32, 1]


@zyntax.kernel
def triple(x):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < len(x):
        x[i] = x[i] * 3.0


def _module(name: str = "scale") -> hir.Module:
    m = hir.Module(name, targets=["sm_80"])
    p = hir.ptr("global", hir.f32)
    with m.kernel(name, [hir.u32, hir.f32, p], max_threads=256) as b:
        n, a, x = b.params
        i = b.block_idx("x") * b.block_dim("x") + b.thread_idx("x")
        with b.if_(i < n):
            xi = b.ptr_add(x, i)
            b.store(xi, b.load(xi) * a)
    return m


@pytest.fixture
def loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A fresh kernel cache, and every ``cuda.load_module`` call recorded instead of run."""
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNTAX_CACHE", raising=False)
    seen: list[dict[str, Any]] = []

    class Loaded:
        def kernel(self, name: str) -> str:
            return name

    def load_module(image: Any, device: int = 0, **kw: Any) -> Loaded:
        seen.append({"image": image, "device": device, **kw})
        return Loaded()

    monkeypatch.setattr(cuda, "load_module", load_module)
    return seen


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The compile hooks' events; each asserts that the compiler really ran once."""
    events: list[dict[str, Any]] = []
    calls: list[str] = []
    real = compiler.compile

    def counted(module: Any, *a: Any, **kw: Any) -> str:
        calls.append(module.name)
        return real(module, *a, **kw)

    def hook(event: dict[str, Any]) -> None:
        assert len(calls) == len(events) + 1, "a compile hook without a compilation"
        events.append(event)

    monkeypatch.setattr(compiler, "compile", counted)
    compile_hooks.append(hook)
    yield events
    compile_hooks.remove(hook)
    assert len(calls) == len(events), f"compilations {calls}, hooks {events}"


def test_load_hir_compiles_once_through_the_kernel_cache(
    loads: list[dict[str, Any]], compiles: list[dict[str, Any]], tmp_path: Path
) -> None:
    m = _module()
    cuda.load_hir(m, arch="sm_80")
    # Before, load_hir called the compiler directly: no cache entry, no hook.
    assert [(e["kernel"], e["arch"]) for e in compiles] == [("scale", "sm_80")]
    ptx = zyntax.compile(m, arch="sm_80")
    assert loads[0]["image"] == ptx and loads[0]["hir"] is m
    entries = cache.inspect()  # the user cache, signatures checked
    assert [(e.key, e.ok, e.kernels) for e in entries] == [(compiles[0]["key"], True, ["scale"])]
    # A second load (a new process would do the same) reads the entry back.
    cuda.load_hir(_module(), arch="sm_80")
    assert len(compiles) == 1 and loads[1]["image"] == ptx
    # Another arch is another entry.
    cuda.load_hir(m, arch="sm_90")
    assert [e["arch"] for e in compiles] == ["sm_80", "sm_90"]


def test_the_entry_is_the_shared_cache_format(
    loads: list[dict[str, Any]], compiles: list[dict[str, Any]], tmp_path: Path
) -> None:
    m = _module()
    cuda.load_hir(m, arch="sm_80")
    key = compiles[0]["key"]
    meta = json.loads((tmp_path / "ptx_cache" / f"{key}.json").read_text())
    assert meta["kernels"] == ["scale"] and meta["arch"] == "sm_80"
    assert meta["ptx_version"] == "7.0" and meta["zyntax_version"] == zyntax.__version__
    assert meta["params"] == ["u32", "f32", "ptr<global, f32>"]
    assert meta["launch"]["scale"]["max_threads"] == [256, 1, 1]
    # The key is the front-end's: the module's .zir, arch, PTX version, version.
    zir = (tmp_path / "ptx_cache" / f"{key}.zir").read_text()
    assert zir == m.to_zir()
    assert key == cache.cache_key(zir, "sm_80", "7.0", zyntax.__version__)
    # cuda.load_cached takes the entry's launch signatures from it.
    cuda.load_cached(tmp_path / "ptx_cache" / key)
    sigs = loads[-1]["signatures"]
    assert sigs["scale"]["params"] == meta["params"]
    assert sigs["scale"]["max_threads"] == [256, 1, 1]


def test_a_kernel_and_its_module_share_one_entry(
    loads: list[dict[str, Any]], compiles: list[dict[str, Any]]
) -> None:
    ptx = triple.ptx((A1,), arch="sm_80")
    assert len(compiles) == 1
    cuda.load_hir(triple.native_module((A1,)), arch="sm_80")
    assert len(compiles) == 1 and loads[0]["image"] == ptx


def test_load_hir_checks_its_arguments(loads: list[dict[str, Any]]) -> None:
    with pytest.raises(zyntax.ArgumentError, match="argument 'module'"):
        cuda.load_hir("module m", arch="sm_80")
    with pytest.raises(zyntax.ArgumentError, match="unknown arch 'sm_99'"):
        cuda.load_hir(_module(), arch="sm_99")
    assert loads == []


def test_the_runtime_reaches_the_pipeline_through_the_providers() -> None:
    assert _providers.compile_hir is pipeline.ptx_for_module
    from zyntax import bundle

    assert _providers.load_bundle is bundle.load_bundle
    with pytest.raises(zyntax.InternalError, match="compile_hir is unset"):
        _providers.need(None, "compile_hir")


def test_a_kernel_for_another_arch_is_not_expected_in_the_entry(
    loads: list[dict[str, Any]], compiles: list[dict[str, Any]]
) -> None:
    # `arch=` keeps a kernel out of the other archs' PTX: the entry describes
    # what the PTX holds, so the second load is a hit, not a "bad entry".
    m = _module()
    p = hir.ptr("global", hir.f32)
    with m.kernel("hopper_only", [p], arch="sm_90a") as b:
        b.store(b.params[0], b.load(b.params[0]))
    for _ in range(2):
        cuda.load_hir(m, arch="sm_80")
    assert len(compiles) == 1 and ".entry hopper_only" not in loads[0]["image"]
    cuda.load_hir(m, arch="sm_90a")
    assert len(compiles) == 2 and ".entry hopper_only" in loads[-1]["image"]


# A constant drawn per run, so that no cache entry from elsewhere can match.
AXPY = """
import zyntax
from zyntax import Array, f32, i32


@zyntax.kernel
def axpy(x: Array[f32, 1], y: Array[f32, 1], a: f32, n: i32) -> None:
    i = zyntax.lang.grid(1)
    if i < n:
        y[i] = a * x[i] + y[i] * {scale!r}
"""


def _axpy_built(scale: float) -> hir.Module:
    """AXPY's HIR written with the builder, as another front-end would."""
    f32p = hir.ptr("global", hir.f32)
    m = hir.Module("axpy")
    params = [f32p, hir.i64, hir.i64, f32p, hir.i64, hir.i64, hir.f32, hir.i32]
    with m.kernel("axpy", params) as b:
        x, _, xs, y, _, ys, a, n = b.params
        bid = b.cast(b.block_idx(), hir.i32)
        bdim = b.cast(b.block_dim(), hir.i32)
        tid = b.cast(b.thread_idx(), hir.i32)
        i = b.add(b.mul(bid, bdim), tid)
        with b.if_(b.cmp("lt", i, n)):
            ax = b.mul(a, b.load(b.ptr_add(x, b.mul(b.cast(i, hir.i64), xs))))
            yv = b.load(b.ptr_add(y, b.mul(b.cast(i, hir.i64), ys)))
            value = b.add(ax, b.mul(yv, scale))
            b.store(b.ptr_add(y, b.mul(b.cast(i, hir.i64), ys)), value)
        b.ret()
    return m


def test_every_front_door_compiles_once_into_one_entry(
    loads: list[dict[str, Any]], compiles: list[dict[str, Any]], tmp_path: Path
) -> None:
    """@zyntax.kernel, the builder + cuda.load_hir, .zir text and the command:
    one compile, one cache entry (never rewritten), the same PTX everywhere."""
    scale = round(random.uniform(1.5, 9.5), 3)
    src = tmp_path / "kern.py"
    src.write_text(AXPY.format(scale=scale))
    spec = importlib.util.spec_from_file_location("one_pipeline_axpy", src)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    ptx = mod.axpy.ptx(arch="sm_80")  # the first and only compile
    assert [e["kernel"] for e in compiles] == ["axpy"]
    cache_dir = tmp_path / "ptx_cache"
    entries = {p.name: p.stat().st_mtime_ns for p in cache_dir.iterdir()}
    assert sorted(Path(e).suffix for e in entries) == [".json", ".ptx", ".zir"]
    zir = next(cache_dir.glob("*.zir")).read_text()

    built = _axpy_built(scale)
    assert built.to_zir() == zir
    cuda.load_hir(built, arch="sm_80")
    cuda.load_hir(hir.parse_zir(zir, "axpy.zir"), arch="sm_80")
    assert [x["image"] for x in loads] == [ptx, ptx]
    assert len(compiles) == 1

    # `zyntax compile kern.py` (the Python front-end) reads the entry back;
    # `zyntax compile axpy.zir` (the Rust command, which has no kernel cache)
    # runs the same compiler with the same defaults: the same PTX.
    cmd = [sys.executable, "-m", "zyntax.cli", "compile", "--backend", "nvptx"]
    env = {**os.environ, "ZYNTAX_LOG": "info"}
    out = tmp_path / "out"
    p = subprocess.run(
        [*cmd, str(src), "--arch", "sm_80", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert "reused axpy for sm_80 from the cache" in p.stderr, p.stderr
    assert (out / "axpy.ptx").read_text() == ptx
    (tmp_path / "axpy.zir").write_text(zir)
    p = subprocess.run(
        [*cmd, str(tmp_path / "axpy.zir"), "--arch", "sm_80", "--emit", "ptx"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == ptx
    assert {p.name: p.stat().st_mtime_ns for p in cache_dir.iterdir()} == entries
    assert len(compiles) == 1
