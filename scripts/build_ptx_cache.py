"""Regenerates ``ptx_cache/``, the bundled kernel library's PTX, from ``examples/*.zir``.

Layout and key are those of the ``@zyntax.kernel`` disk cache
(:mod:`zyntax.frontend.cache`), so both share one format::

    ptx_cache/<key>.ptx    PTX text
    ptx_cache/<key>.json   kernels, parameter layout, launch bounds, shared bytes, source, ...

key = SHA-256 of (canonical HIR text, target arch, PTX version, zyntax version,
compile options), computed by ``zyntax.frontend.cache.cache_key``. Each example
module with kernels is compiled for sm_80 and sm_90 plus every other arch it
declares in ``targets(...)``; an undeclared sm_80/sm_90 that the verifier rejects
(for example a ``wgmma`` module) is skipped. Host-only modules have no PTX.

    python scripts/build_ptx_cache.py           # update: reuse valid entries, rebuild corrupt ones
    python scripts/build_ptx_cache.py --fresh   # recompile every entry
    python scripts/build_ptx_cache.py --check   # exit 1 unless ptx_cache/ equals a fresh build

A corrupt entry (truncated or edited PTX, JSON that does not parse or names
another key) fails ``cache.load_from`` and is rebuilt, never reused; entries that no
example produces any more are deleted. The bundle is part of the installed
package, so its entries are unsigned (no per-user MAC, unlike the user cache):
they are byte-identical on every machine.
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CACHE_NAME = "ptx_cache"

#: Archs every kernel module gets an entry for (when the verifier accepts it).
BASE_ARCHS = ("sm_80", "sm_90")

#: Options of the bundled build; part of the key (the front-end uses ``{}`` too).
DEFAULT_OPTIONS: dict[str, Any] = {}

_KEY_FILE = re.compile(r"^[0-9a-f]{64}\.(ptx|json)$")


def _zyntax() -> Any:
    import zyntax

    return zyntax


def _cache() -> Any:
    from zyntax.frontend import cache

    return cache


@dataclass(frozen=True)
class Entry:
    """One ``(module, arch)`` compilation of the bundle."""

    key: str
    arch: str
    source: str
    ptx: str
    meta: dict[str, Any]


@dataclass
class Report:
    written: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    #: keys whose files existed but failed validation, so were recompiled
    rebuilt: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: (source, arch, why) for undeclared base archs the verifier rejects
    skipped: list[tuple[str, str, str]] = field(default_factory=list)


def canonical_zir(module: Any) -> str:
    """The module's canonical ``.zir`` text (dense value/block numbering)."""
    c = module.copy()
    c.canonicalize()
    return str(c.to_zir())


def entry_key(
    zir: str,
    arch: str,
    ptx_version: str,
    compiler_version: str,
    options: dict[str, Any] | None = None,
) -> str:
    return str(_cache().cache_key(zir, arch, ptx_version, compiler_version, options))


def archs_for(module: Any) -> list[tuple[str, bool]]:
    """``(arch, declared)`` pairs to build, in ``DEFAULT_PTX`` order."""
    declared = set(module.targets)
    wanted = declared | set(BASE_ARCHS)
    return [(a, a in declared) for a in _cache().DEFAULT_PTX if a in wanted]


def _source_name(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def kernel_layout(module: Any, name: str, ptx: str) -> dict[str, Any]:
    """Launch bounds, shared bytes and parameter layout of kernel ``name`` (see zyntax.ptxinfo)."""
    from zyntax.ptxinfo import kernel_layout as layout

    return dict(layout(module, name, ptx))


def compile_entry(
    path: Path,
    module: Any,
    arch: str,
    options: dict[str, Any] | None = None,
) -> Entry:
    """Compiles one module for one arch into a cache entry (raises VerifyError/CompileError)."""
    z = _zyntax()
    cache = _cache()
    options = dict(DEFAULT_OPTIONS if options is None else options)
    ptx_version = module.ptx_version or cache.DEFAULT_PTX[arch]
    zir = canonical_zir(module)
    version = str(z.__version__)
    key = entry_key(zir, arch, ptx_version, version, options)
    res = z.compile_ptx(module, arch, opt_level=options.get("opt_level"))
    if res.ptx_version != ptx_version:
        # The key names the PTX version; a backend that picks another one must not be cached.
        raise z.InternalError(
            f"{path.name} {arch}: compiled PTX {res.ptx_version}, key says {ptx_version}"
        )
    kernels = list(res.kernels)
    layouts = {k: kernel_layout(module, k, res.ptx) for k in kernels}
    meta: dict[str, Any] = {
        "arch": arch,
        "ptx_version": ptx_version,
        "zyntax_version": version,
        "options": options,
        "kernels": kernels,
        "module": module.name,
        "source": _source_name(path),
        "launch": layouts,
    }
    if len(kernels) == 1:
        # The front-end's single-kernel field: HIR parameter types in order.
        meta["params"] = [p["type"] for p in layouts[kernels[0]]["params"]]
    return Entry(key=key, arch=arch, source=meta["source"], ptx=res.ptx, meta=meta)


def example_modules(examples: Path = EXAMPLES) -> list[tuple[Path, Any]]:
    """The ``.zir`` examples that hold at least one kernel, parsed, sorted by name."""
    from zyntax import hir

    out: list[tuple[Path, Any]] = []
    for p in sorted(examples.glob("*.zir")):
        m = hir.parse_zir(p.read_text(encoding="utf-8"), p.name)
        if m.kernels:
            out.append((p, m))
    return out


@contextlib.contextmanager
def _cache_root(root: Path) -> Iterator[Path]:
    """Points the front-end cache at ``root/ptx_cache`` (store/load then act on it)."""
    saved = {k: os.environ.get(k) for k in ("ZYNTAX_CACHE_DIR", "ZYNTAX_CACHE")}
    os.environ["ZYNTAX_CACHE_DIR"] = str(root)
    os.environ["ZYNTAX_CACHE"] = "1"
    try:
        yield Path(_cache().cache_dir())
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_entry(root: Path, key: str) -> tuple[str, dict[str, Any]] | None:
    """The entry ``key`` of ``root/ptx_cache`` if present and intact (the front-end's check)."""
    with _cache_root(root):
        hit = _cache().load_from(root / CACHE_NAME, key)
    return None if hit is None else (str(hit[0]), dict(hit[1]))


def build(root: Path = ROOT, examples: Path = EXAMPLES, *, reuse: bool = True) -> Report:
    """Brings ``root/ptx_cache`` up to date; with ``reuse`` intact entries are kept as they are."""
    from zyntax import VerifyError

    cache = _cache()
    rep = Report()
    expected: set[str] = set()
    with _cache_root(root) as out:
        out.mkdir(parents=True, exist_ok=True)
        for path, module in example_modules(examples):
            zir = canonical_zir(module)
            version = str(_zyntax().__version__)
            for arch, declared in archs_for(module):
                ptx_version = module.ptx_version or cache.DEFAULT_PTX[arch]
                key = entry_key(zir, arch, ptx_version, version, DEFAULT_OPTIONS)
                # Before cache.load_from, which removes a bad entry it finds.
                existed = any(os.path.lexists(out / f"{key}{s}") for s in (".ptx", ".json"))
                if reuse and cache.load_from(out, key) is not None:
                    rep.reused.append(key)
                    expected.add(key)
                    continue
                try:
                    e = compile_entry(path, module, arch)
                except VerifyError as err:
                    if declared:
                        raise
                    rep.skipped.append((path.name, arch, str(err).splitlines()[0]))
                    continue
                assert e.key == key
                if existed:
                    rep.rebuilt.append(key)
                cache.write_entry(out, key, e.ptx, e.meta)
                rep.written.append(key)
                expected.add(key)
        for f in sorted(out.iterdir()):
            if _KEY_FILE.match(f.name) and f.name.split(".")[0] not in expected:
                f.unlink()
                rep.removed.append(f.name)
    return rep


def diff_dirs(a: Path, b: Path) -> list[str]:
    """Differences between two cache directories' entry files (empty: identical)."""

    def files(d: Path) -> set[str]:
        return {f.name for f in d.iterdir() if _KEY_FILE.match(f.name)} if d.is_dir() else set()

    fa, fb = files(a), files(b)
    out = [f"only in {a}: {n}" for n in sorted(fa - fb)]
    out += [f"only in {b}: {n}" for n in sorted(fb - fa)]
    out += [
        f"differs: {n}" for n in sorted(fa & fb) if not filecmp.cmp(a / n, b / n, shallow=False)
    ]
    return out


def check(root: Path = ROOT, examples: Path = EXAMPLES) -> list[str]:
    """Differences between ``root/ptx_cache`` and a fresh build (empty: up to date)."""
    with tempfile.TemporaryDirectory(prefix="zyntax-ptx-cache-") as tmp:
        build(Path(tmp), examples, reuse=False)
        return diff_dirs(root / CACHE_NAME, Path(tmp) / CACHE_NAME)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--root", type=Path, default=ROOT, help="writes ROOT/ptx_cache")
    ap.add_argument("--examples", type=Path, default=EXAMPLES)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--fresh", action="store_true", help="recompile every entry")
    mode.add_argument("--check", action="store_true", help="compare with a fresh build")
    a = ap.parse_args(argv)
    if a.check:
        diffs = check(a.root, a.examples)
        for d in diffs:
            print(d)
        print("ptx_cache is up to date" if not diffs else "ptx_cache is out of date")
        return 1 if diffs else 0
    rep = build(a.root, a.examples, reuse=not a.fresh)
    print(
        f"{a.root / CACHE_NAME}: {len(rep.written)} written ({len(rep.rebuilt)} corrupt rebuilt), "
        f"{len(rep.reused)} reused, {len(rep.removed)} stale removed"
    )
    for src, arch, why in rep.skipped:
        print(f"  skipped {src} {arch}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
