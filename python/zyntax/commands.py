"""The Python-side subcommands of ``zyntax``: AOT bundles and cache management.

``zyntax compile --emit cubin|fatbin --arch A [--arch B ...] INPUT -o OUT``
builds a bundle (:mod:`zyntax.aot`) from a ``.zir`` module or from each fully
annotated ``@zyntax.kernel`` of a ``.py`` file. ``zyntax cache
list|verify|clear|export|import|dir`` inspects and moves the kernel cache
(``$ZYNTAX_CACHE_DIR``). Exit status: 0 success, 1 an error (or, for
``verify``, a bad entry), 2 a usage error. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from zyntax.frontend import cache
from zyntax.safeio import RejectedFile

#: Exit statuses, as in the Rust command's table (`zyntax --help`, docs/cli.md).
EXIT_ERROR = 1
EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line and status 2, like the Rust command's (the
    ``zyntax compile kernels.py`` parser of :mod:`zyntax.cli` and every
    subcommand parser here)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


# --------------------------------------------------------------------------- compile


def _bundle_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="zyntax compile",
        description=(
            "Build an AOT bundle: SASS for every --arch (ptxas) plus PTX of the newest portable "
            "arch, in one fatbin (nvFatbin), with a JSON launch manifest beside it "
            "(OUTPUT with .json). --emit cubin writes one arch's cubin."
        ),
        epilog="Exit status: as listed by `zyntax --help`.",
    )
    ap.add_argument("input", help="a .zir module or a .py file of @zyntax.kernel functions")
    ap.add_argument("--backend", default="nvptx", choices=["nvptx"])
    ap.add_argument("--emit", required=True, choices=["cubin", "fatbin"])
    ap.add_argument(
        "--arch",
        action="append",
        required=True,
        help="target arch, repeatable or comma-separated (sm_80, sm_90a, ...)",
    )
    ap.add_argument(
        "--ptx", dest="ptx_version", metavar="X.Y", help="PTX ISA version (default: the arch's)"
    )
    ap.add_argument(
        "--opt", dest="opt_level", metavar="LEVEL", help="optimization level (O0 ... O3)"
    )
    ap.add_argument("--no-ptx", action="store_true", help="SASS only: leave the PTX out")
    ap.add_argument(
        "-o",
        "--output",
        help="output file (default: INPUT's name with .fatbin/.cubin; a directory for .py files)",
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="replace a file where the manifest goes (OUTPUT with .json) even if it is not "
        "a zyntax manifest (without it such a file is an error and nothing is written)",
    )
    return ap


def compile_bundle(args: Sequence[str]) -> int:
    from zyntax import aot, hir
    from zyntax.errors import ZyntaxError
    from zyntax.frontend.errors import KernelError

    ns = _bundle_parser().parse_args(list(args))
    archs = [a.strip() for spec in ns.arch for a in spec.split(",") if a.strip()]
    src = Path(ns.input)
    try:
        if src.suffix == ".py":
            written = _bundle_python(src, archs, ns)
        else:
            text = sys.stdin.read() if ns.input == "-" else src.read_text(encoding="utf-8")
            module = hir.parse_zir(text, src.name)
            out = Path(ns.output or f"{src.stem if ns.input != '-' else 'module'}.{ns.emit}")
            if out.resolve() == src.resolve():
                raise ZyntaxError(f"the output {out} is the input file")
            r = aot.build_bundle(
                module,
                archs,
                out,
                emit=ns.emit,
                ptx=not ns.no_ptx,
                ptx_version=ns.ptx_version,
                opt_level=ns.opt_level,
                overwrite=ns.force,
            )
            written = [r.image, r.manifest]
    except KernelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (ZyntaxError, OSError) as e:
        print(f"{ns.input}: error: {e}", file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0


def _bundle_python(src: Path, archs: list[str], ns: argparse.Namespace) -> list[Path]:
    from zyntax import aot
    from zyntax.frontend import aot as pyaot
    from zyntax.frontend import pipeline
    from zyntax.frontend.errors import KernelError

    out_dir = Path(ns.output or ".")
    annotated = []
    for k in pyaot.load_kernels(src):
        specs = k.signature_specs()
        if specs is None:
            print(f"skipped {k.__name__}: not fully annotated", file=sys.stderr)
            continue
        annotated.append((k, specs, out_dir / f"{k.__name__}.{ns.emit}"))
    if not annotated:
        raise KernelError(f"{src}: no fully annotated @zyntax.kernel to compile")
    if not ns.force:  # every manifest target, before the first bundle is written
        for _, _, image in annotated:
            aot.check_manifest_target(image)
    written: list[Path] = []
    for k, specs, image in annotated:
        module = pipeline.native_module(k.variant(tuple(specs)))
        r = aot.build_bundle(
            module,
            archs,
            image,
            emit=ns.emit,
            ptx=not ns.no_ptx,
            ptx_version=ns.ptx_version,
            opt_level=ns.opt_level,
            overwrite=ns.force,
        )
        written += [r.image, r.manifest]
    return written


# --------------------------------------------------------------------------- cache


def _cache_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="zyntax cache",
        description="Inspect, check, clear, export and import the kernel cache "
        "($ZYNTAX_CACHE_DIR, default ~/.cache/zyntax).",
        epilog="Exit status: as listed by `zyntax --help`; `verify` exits 1 on a bad entry.",
    )
    # The metavar names the subcommand in usage errors ("required: COMMAND").
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    ls = sub.add_parser("list", help="one line per PTX entry: key, arch, kernels, size, state")
    ls.add_argument("--json", action="store_true", help="a JSON list instead")
    v = sub.add_parser("verify", help="check every entry; exit 1 if any is bad")
    v.add_argument("--repair", action="store_true", help="remove bad entries (they rebuild)")
    sub.add_parser("clear", help="remove every entry, cubin and tuning record")
    ex = sub.add_parser(
        "export", help="write the signed PTX entries and tuning records to one .tar.gz archive"
    )
    ex.add_argument("archive")
    im = sub.add_parser(
        "import",
        help="re-derive and check every member of an archive, then add them all (or nothing)",
    )
    im.add_argument("archive")
    sub.add_parser("dir", help="print the cache directory")
    return ap


def cache_command(args: Sequence[str]) -> int:
    from zyntax.errors import ZyntaxError

    ns = _cache_parser().parse_args(list(args))
    root = cache.root_dir()
    try:
        if ns.command == "dir":
            print(root)
            return 0
        if ns.command == "list":
            return _list(ns.json)
        if ns.command == "verify":
            return _verify(ns.repair)
        if ns.command == "clear":
            n = 0
            for sub in ("ptx_cache", "cubin_cache", "autotune"):
                d = root / sub
                if d.is_dir():
                    n += sum(1 for _ in d.iterdir())
                    shutil.rmtree(d)
            print(f"removed {n} files from {root}")
            return 0
        if ns.command == "export":
            return _export(Path(ns.archive))
        if ns.command == "import":
            return _import(Path(ns.archive))
    except (OSError, ZyntaxError) as e:  # UntrustedCacheError, ArchiveError, ...
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 2


def _list(as_json: bool) -> int:
    infos = cache.inspect()
    if as_json:
        print(json.dumps([vars(i) for i in infos], indent=1))
        return 0
    for i in infos:
        state = "ok" if i.ok else f"BAD: {i.problem}"
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(i.mtime)) if i.mtime else "?"
        names = ",".join(i.kernels) or "-"
        print(f"{i.key[:16]}  {i.arch:7} {names:24} {i.bytes:>9}  {when}  {state}")
    root = cache.root_dir()
    cubins = len(list((root / "cubin_cache").glob("*.cubin")))
    records = len(list((root / "autotune").glob("*.json")))
    print(
        f"{len(infos)} PTX entries in {cache.cache_dir()}; {cubins} cubins, "
        f"{records} kernels with tuning records",
        file=sys.stderr,
    )
    return 0


def _verify(repair: bool) -> int:
    """Check every PTX entry, cubin and tuning file, this cache's MACs included."""
    from zyntax import tuning
    from zyntax.bundle import MAX_IMAGE_BYTES

    checked = 0
    #: (what, why, folder, key, suffixes) of each bad entry.
    bad: list[tuple[str, str, Path, str, tuple[str, ...]]] = []
    for i in cache.inspect():
        checked += 1
        if not i.ok:
            bad.append((i.key, i.problem, cache.cache_dir(), i.key, cache.ENTRY_SUFFIXES))
    for sub, suffixes in (("cubin_cache", (".cubin", ".json")), ("autotune", (".json",))):
        d, secret = cache.explicit_dir(sub)
        if d is None:
            continue
        for k in cache.keys(d, suffixes):
            checked += 1
            try:
                if secret is None:
                    raise RejectedFile(f"not signed by this cache (it has no {cache.SECRET_NAME})")
                if sub == "autotune":
                    tuning.read_db(d, k, secret)
                else:
                    cache.check_blob(d, k, ".cubin", MAX_IMAGE_BYTES, secret)
            except RejectedFile as e:
                bad.append((f"{sub}/{k}", str(e), d, k, suffixes))
    for what, why, folder, key, sfx in bad:
        print(f"{what}: {why}" + ("  (removed)" if repair else ""))
        if repair:
            cache.remove_entry(folder, key, sfx)
    print(f"{checked - len(bad)} ok, {len(bad)} bad", file=sys.stderr)
    return 1 if bad and not repair else 0


def _export(archive: Path) -> int:
    from zyntax import cache_archive

    n, t, skipped = cache_archive.export_archive(archive)
    for why in skipped:
        print(f"skipped {why}", file=sys.stderr)
    print(f"exported {n} entries and {t} tuning files to {archive}")
    return 0


def _import(archive: Path) -> int:
    """All or nothing: see zyntax.cache_archive (an ArchiveError names the refused member)."""
    from zyntax import cache_archive

    rep = cache_archive.import_archive(archive)
    other = len(rep.other_build)
    print(
        f"imported {rep.entries} entries and {rep.tuning} tuning files into {cache.root_dir()}"
        + (f" ({other} entries of another zyntax build skipped)" if other else "")
    )
    return 0
