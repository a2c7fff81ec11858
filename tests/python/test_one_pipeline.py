"""One compile pipeline and one kernel cache (issue 28 item 3): ``cuda.load_hir``
compiles through ``zyntax.frontend.pipeline.cached_ptx`` as ``@zyntax.kernel``
does, so a module is compiled once per arch across calls and processes, its
entry is one the front-end, ``cuda.load_cached`` and ``zyntax cache`` read,
and the runtime reaches the pipeline without importing it. No GPU needed: the
driver's part (``cuda.load_module``) is replaced by a recorder."""

from __future__ import annotations

import json
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
