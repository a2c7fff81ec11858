"""The committed ``ptx_cache/`` (bundled kernel library) is exactly what
``scripts/build_ptx_cache.py`` produces now, every entry passes ptxas, a corrupt
entry is rebuilt rather than loaded, and every key input changes the key.

A missing ptxas fails these tests; it never skips them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import zyntax
from zyntax import hir
from zyntax.frontend import cache

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "ptx_cache"


def _load_script() -> ModuleType:
    path = ROOT / "scripts" / "build_ptx_cache.py"
    spec = importlib.util.spec_from_file_location("build_ptx_cache", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


bpc = _load_script()

ENTRIES = sorted(p.stem for p in BUNDLE.glob("*.json"))


def _meta(key: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((BUNDLE / f"{key}.json").read_text())
    return doc


def _copy_bundle(root: Path) -> Path:
    dst = root / "ptx_cache"
    shutil.copytree(BUNDLE, dst)
    return dst


# --------------------------------------------------------------------------- up to date


def test_bundle_equals_a_fresh_build(tmp_path: Path) -> None:
    rep = bpc.build(tmp_path, reuse=False)
    assert rep.written and not rep.reused
    diffs = bpc.diff_dirs(BUNDLE, tmp_path / "ptx_cache")
    hint = "ptx_cache/ is stale: run `python scripts/build_ptx_cache.py`"
    assert diffs == [], hint + "\n" + "\n".join(diffs)


def test_fresh_builds_are_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    bpc.build(a, reuse=False)
    bpc.build(b, reuse=False)
    assert bpc.diff_dirs(a / "ptx_cache", b / "ptx_cache") == []
    assert len(list((a / "ptx_cache").glob("*.ptx"))) == len(ENTRIES)


def test_check_mode_reports_up_to_date() -> None:
    assert bpc.main(["--check"]) == 0


def test_bundle_covers_every_example_kernel_module() -> None:
    modules = bpc.example_modules()
    assert len(modules) >= 4
    by_source: dict[str, set[str]] = {}
    for key in ENTRIES:
        m = _meta(key)
        by_source.setdefault(m["source"], set()).add(m["arch"])
    for path, module in modules:
        archs = by_source.get(f"examples/{path.name}", set())
        # Every declared target, plus sm_80 and sm_90 unless the verifier rejects them.
        assert set(module.targets) <= archs, path.name
        for base in bpc.BASE_ARCHS:
            if base in archs:
                continue
            with pytest.raises(zyntax.VerifyError):
                bpc.compile_entry(path, module, base)
        assert archs <= set(module.targets) | set(bpc.BASE_ARCHS), path.name
    assert sum(len(a) for a in by_source.values()) == len(ENTRIES)


# --------------------------------------------------------------------------- entries


@pytest.mark.parametrize("key", ENTRIES)
def test_entry_passes_ptxas_and_metadata_is_right(key: str) -> None:
    meta = _meta(key)
    ptx = (BUNDLE / f"{key}.ptx").read_text()
    out = zyntax.validate_ptx(ptx, meta["arch"])
    assert out.cubin[:4] == b"\x7fELF"
    assert meta["key"] == key
    assert f".target {meta['arch']}" in ptx
    assert f".version {meta['ptx_version']}" in ptx
    # The front-end's loader accepts the entry as it is.
    hit = bpc.load_entry(ROOT, key)
    assert hit is not None and hit[0] == ptx
    # The key is recomputable from the source it names.
    src = ROOT / meta["source"]
    module = hir.parse_zir(src.read_text(), src.name)
    assert key == bpc.entry_key(
        bpc.canonical_zir(module),
        meta["arch"],
        meta["ptx_version"],
        zyntax.__version__,
        meta["options"],
    )
    entries = re.findall(r"\.entry\s+(\w+)", ptx)
    assert sorted(entries) == sorted(meta["kernels"]) == sorted(module.kernels)
    for name in meta["kernels"]:
        lay = meta["launch"][name]
        sig = [str(t) for t in module.signature(name)[0]]
        assert [p["type"] for p in lay["params"]] == sig
        assert [p["index"] for p in lay["params"]] == list(range(len(sig)))
        for p in lay["params"]:
            assert p["offset"] % p["align"] == 0 and p["size"] > 0
        # Static shared bytes from PTX equal the sum of the kernel's shared_alloc.
        allocs = re.findall(
            r"= shared_alloc (.+), (\d+)(?: align \d+)?$", module.function_zir(name), re.M
        )
        sizes = [(hir.Type.parse(t).size_bytes, int(n)) for t, n in allocs]
        expect = sum(s * n for s, n in sizes if s is not None)
        assert all(s is not None for s, _ in sizes)
        assert lay["static_shared_bytes"] == expect
        m = re.search(r"max_threads\((\d+), (\d+), (\d+)\)", module.function_zir(name))
        if m:
            assert lay["max_threads"] == [int(g) for g in m.groups()]
            assert re.search(rf"\.maxntid {m[1]}, {m[2]}, {m[3]}", ptx)


def test_shared_memory_examples_have_nonzero_shared_bytes() -> None:
    # Guards the PTX parsing above against agreeing on 0 == 0 only.
    shared = {
        _meta(k)["module"]: max(v["static_shared_bytes"] for v in _meta(k)["launch"].values())
        for k in ENTRIES
    }
    assert shared["histogram"] == 256 * 4
    assert shared["cp_async_copy"] == 2048 * 4
    assert shared["saxpy"] == 0


# --------------------------------------------------------------------------- corruption


def _flip_ptx(d: Path, key: str) -> None:
    p = d / f"{key}.ptx"
    p.write_text(p.read_text().replace("ret;", "exit;", 1) + "\n")


def _truncate_ptx(d: Path, key: str) -> None:
    p = d / f"{key}.ptx"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _drop_ptx(d: Path, key: str) -> None:
    (d / f"{key}.ptx").unlink()


def _garble_json(d: Path, key: str) -> None:
    p = d / f"{key}.json"
    p.write_text(p.read_text()[:-10])


def _wrong_key_json(d: Path, key: str) -> None:
    p = d / f"{key}.json"
    doc = json.loads(p.read_text())
    doc["key"] = "0" * 64
    p.write_text(json.dumps(doc))


def _not_utf8(d: Path, key: str) -> None:
    (d / f"{key}.ptx").write_bytes(b"\xff\xfe" + (d / f"{key}.ptx").read_bytes())


CORRUPTIONS: dict[str, Callable[[Path, str], None]] = {
    "edited_ptx": _flip_ptx,
    "truncated_ptx": _truncate_ptx,
    "missing_ptx": _drop_ptx,
    "unparseable_json": _garble_json,
    "json_of_another_key": _wrong_key_json,
    "ptx_not_utf8": _not_utf8,
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_entry_is_detected_and_rebuilt(tmp_path: Path, kind: str) -> None:
    d = _copy_bundle(tmp_path)
    key = ENTRIES[len(ENTRIES) // 2]
    good = (BUNDLE / f"{key}.ptx").read_text()
    assert bpc.load_entry(tmp_path, key) is not None
    CORRUPTIONS[kind](d, key)
    rep = bpc.build(tmp_path, reuse=True)
    assert rep.written == [key]
    assert rep.rebuilt == [key]
    assert len(rep.reused) == len(ENTRIES) - 1
    hit = bpc.load_entry(tmp_path, key)
    assert hit is not None and hit[0] == good
    assert bpc.diff_dirs(BUNDLE, d) == []
    # Loading a bad entry never returns it, and removes it so the next store repairs it.
    CORRUPTIONS[kind](d, key)
    assert bpc.load_entry(tmp_path, key) is None
    assert not list(d.glob(f"{key}.*"))


def test_stale_entries_are_removed_and_other_files_kept(tmp_path: Path) -> None:
    d = _copy_bundle(tmp_path)
    stale = "f" * 64
    (d / f"{stale}.ptx").write_text("// stale\n")
    (d / f"{stale}.json").write_text("{}\n")
    (d / "README.md").write_text("kept\n")
    rep = bpc.build(tmp_path, reuse=True)
    assert sorted(rep.removed) == [f"{stale}.json", f"{stale}.ptx"]
    assert not rep.written
    assert (d / "README.md").exists()
    assert bpc.diff_dirs(BUNDLE, d) == []


def test_check_mode_reports_a_stale_bundle(tmp_path: Path) -> None:
    d = _copy_bundle(tmp_path)
    _flip_ptx(d, ENTRIES[0])
    assert bpc.main(["--check", "--root", str(tmp_path)]) == 1


# --------------------------------------------------------------------------- key


def test_every_key_input_changes_the_key() -> None:
    path = ROOT / "examples" / "saxpy.zir"
    zir = bpc.canonical_zir(hir.parse_zir(path.read_text(), path.name))
    base: tuple[str, str, str, dict[str, str]] = ("sm_90", "7.8", "0.1.0", {})
    k0 = bpc.entry_key(zir, *base)
    assert k0 == bpc.entry_key(zir, *base)  # stable
    assert re.fullmatch(r"[0-9a-f]{64}", k0)
    variants = [
        (zir.replace("fma", "add", 1).replace("v12, v13", "v12", 1), *base),
        (zir, "sm_80", "7.8", "0.1.0", {}),
        (zir, "sm_90", "8.0", "0.1.0", {}),
        (zir, "sm_90", "7.8", "0.1.1", {}),
        (zir, "sm_90", "7.8", "0.1.0", {"opt_level": "O2"}),
        (zir, "sm_90", "7.8", "0.1.0", {"opt_level": "O3"}),
    ]
    keys = [bpc.entry_key(*v) for v in variants]
    assert k0 not in keys
    assert len(set(keys)) == len(keys)


def test_compile_options_reach_the_entry_key(tmp_path: Path) -> None:
    path = ROOT / "examples" / "saxpy.zir"
    module = hir.parse_zir(path.read_text(), path.name)
    default = bpc.compile_entry(path, module, "sm_90")
    o1 = bpc.compile_entry(path, module, "sm_90", {"opt_level": "O1"})
    assert default.key != o1.key
    assert o1.meta["options"] == {"opt_level": "O1"}
    # The same inputs give the same key and byte-identical PTX.
    again = bpc.compile_entry(path, module, "sm_90")
    assert again.key == default.key and again.ptx == default.ptx
    assert default.key in ENTRIES


def test_canonical_text_ignores_value_numbering() -> None:
    src = (ROOT / "examples" / "saxpy.zir").read_text()
    renumbered = re.sub(r"\bv(\d+)\b", lambda m: f"v{int(m[1]) + 100}", src)
    a = bpc.canonical_zir(hir.parse_zir(src, "a.zir"))
    b = bpc.canonical_zir(hir.parse_zir(renumbered, "b.zir"))
    assert a == b
    inputs = ("sm_90", "7.8", "0.1.0")
    assert cache.cache_key(a, *inputs) == cache.cache_key(b, *inputs)
