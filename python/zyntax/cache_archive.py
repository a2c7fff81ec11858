"""``zyntax cache export|import``: moving the kernel cache between machines, trusting nothing.

An archive (``.tar.gz``) holds, under the names the cache itself writes::

    ptx_cache/<key>.ptx    PTX text
    ptx_cache/<key>.json   its metadata (without the exporter's MAC)
    ptx_cache/<key>.zir    the canonical HIR the key was computed from
    autotune/<hash>.json   a kernel's tuning records (without the MAC)

An archive comes from elsewhere, so import treats it as hostile:

* every member must be a regular file whose name matches exactly one of the
  patterns above (no directories, links, devices, FIFOs, sparse files, ``..``,
  absolute or doubled paths, duplicates) within its kind's size limit, and the
  whole archive is bounded (compressed and uncompressed bytes, member count,
  header size) before anything is read into memory;
* a PTX entry is accepted only if it can be **re-derived**: its key must be
  the hash of its own HIR, arch, PTX version and options under this zyntax
  build, and compiling that HIR here must give byte-identical PTX (compilation
  is deterministic); its metadata must describe the kernels and parameter
  types of that HIR. Entries of another zyntax build are well-formed but could
  never be used here: they are skipped and counted, not imported;
* cubins are refused: checking one means running ptxas on re-derived PTX, which
  costs what importing it would save; the cubin cache refills on the first
  bundle build (and export does not write cubins);
* tuning records must pass :func:`zyntax.tuning.check_db` (types, bounded
  sizes, every config well-formed and named as zyntax names it, every record
  under its own key). At use a record can only pick among the kernel's own
  configs, so a lying record costs speed, never correctness.

Anything refused raises :class:`ArchiveError` naming the member, and nothing is
imported: accepted entries are signed with this cache's key in a staging folder
inside the cache, and moved into place only once every member has passed.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from zyntax.frontend import cache
from zyntax.safeio import RejectedFile, loads_bounded

#: Member name patterns (exactly as the cache writes them) -> (kind, size limit).
MEMBERS: dict[str, tuple[re.Pattern[str], int]] = {
    "ptx": (re.compile(r"ptx_cache/([0-9a-f]{64})\.ptx"), cache.MAX_PTX_BYTES),
    "meta": (re.compile(r"ptx_cache/([0-9a-f]{64})\.json"), cache.MAX_JSON_BYTES),
    "hir": (re.compile(r"ptx_cache/([0-9a-f]{64})\.zir"), cache.MAX_HIR_BYTES),
    "tuning": (re.compile(r"autotune/([0-9a-f]{64})\.json"), 4 << 20),
}
_CUBIN = re.compile(r"cubin_cache/[0-9a-f]{64}\.(cubin|json)")

#: Bounds of a whole archive.
MAX_ARCHIVE_BYTES = 1 << 30  # the file, compressed
MAX_UNPACKED_BYTES = 2 << 30  # the tar stream, uncompressed
MAX_MEMBERS = 100_000
#: Largest single read of the tar stream (a header, a member): a pax header
#: that claims more is refused before it is read into memory.
MAX_READ_BYTES = cache.MAX_PTX_BYTES

#: Compile options an entry may name (those zyntax's own producers use).
_OPTIONS = {"opt_level": {"O0", "O1", "O2", "O3"}}


class ArchiveError(cache.CacheError):
    """An archive to import was refused; ``member`` names the member (None: the archive)."""

    def __init__(self, member: str | None, why: str) -> None:
        self.member = member
        super().__init__(f"archive member {member!r}: {why}" if member else why)


@dataclass
class ImportReport:
    entries: int = 0
    tuning: int = 0
    #: Keys of well-formed entries made by another zyntax build (not imported).
    other_build: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- export


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _unsigned_json(meta: dict[str, Any]) -> bytes:
    out = {k: v for k, v in meta.items() if k != "mac"}
    return (json.dumps(out, indent=1, sort_keys=True) + "\n").encode()


def _ptx_members(d: Path, secret: bytes, skipped: list[str]) -> Iterator[tuple[str, bytes]]:
    for key in cache.keys(d):
        try:
            ptx, meta = cache.check_entry(d, key, secret=secret)
            hir = cache.read_hir(d, key, meta)
        except RejectedFile as e:
            skipped.append(f"{key[:16]}: {e}")
            continue
        yield f"ptx_cache/{key}.ptx", ptx.encode()
        yield f"ptx_cache/{key}.json", _unsigned_json(meta)
        yield f"ptx_cache/{key}.zir", hir.encode()


def _tuning_members(d: Path, secret: bytes, skipped: list[str]) -> Iterator[tuple[str, bytes]]:
    from zyntax import tuning

    for h in cache.keys(d, (".json",)):
        try:
            doc = tuning.read_db(d, h, secret)
        except RejectedFile as e:
            skipped.append(f"tuning {h[:16]}: {e}")
            continue
        yield f"autotune/{h}.json", _unsigned_json(doc)


def export_archive(archive: Path) -> tuple[int, int, list[str]]:
    """Write the signed, exportable PTX entries and tuning records of the user cache to
    ``archive`` (atomically); returns (entries, tuning files, skipped with why)."""
    skipped: list[str] = []
    sources: list[Iterator[tuple[str, bytes]]] = []
    ptx_dir, secret = cache.explicit_dir("ptx_cache")
    if ptx_dir is not None and secret is not None:
        sources.append(_ptx_members(ptx_dir, secret, skipped))
    tune_dir, secret = cache.explicit_dir("autotune")
    if tune_dir is not None and secret is not None:
        sources.append(_tuning_members(tune_dir, secret, skipped))
    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{archive.name}.", suffix=".tmp", dir=archive.parent)
    names: list[str] = []
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
            for name, data in itertools.chain(*sources):
                _add(tar, name, data)
                names.append(name)
        os.replace(tmp, archive)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    entries = sum(n.endswith(".ptx") for n in names)
    return entries, sum(n.startswith("autotune/") for n in names), skipped


# --------------------------------------------------------------------------- reading


class _BoundedStream(io.RawIOBase):
    """The uncompressed tar stream, refusing to go past ``MAX_UNPACKED_BYTES`` or to hand
    out more than ``MAX_READ_BYTES`` at once (tarfile reads a whole pax header in one
    call, whatever size the archive claims)."""

    def __init__(self, f: IO[bytes] | gzip.GzipFile) -> None:
        self.f = f

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.f.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        target = pos if whence == 0 else self.f.tell() + pos if whence == 1 else -1
        if not 0 <= target <= MAX_UNPACKED_BYTES:
            raise ArchiveError(None, f"more than {MAX_UNPACKED_BYTES} bytes unpacked")
        return self.f.seek(target)

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0 or n > MAX_READ_BYTES:
            raise ArchiveError(None, f"a header or member of more than {MAX_READ_BYTES} bytes")
        if self.f.tell() + n > MAX_UNPACKED_BYTES:
            raise ArchiveError(None, f"more than {MAX_UNPACKED_BYTES} bytes unpacked")
        return self.f.read(n)


def _open_archive(archive: Path) -> IO[bytes]:
    """The archive file, refused unless a regular file of bounded size (a FIFO or device
    would block or never end)."""
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ArchiveError(None, f"{archive}: {e.strerror or e}") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ARCHIVE_BYTES:
        os.close(fd)
        raise ArchiveError(
            None, f"{archive} is not a regular file of at most {MAX_ARCHIVE_BYTES} bytes"
        )
    return os.fdopen(fd, "rb")


def _member_kind(m: tarfile.TarInfo, seen: set[str]) -> tuple[str, str]:
    """(kind, key or hash) of a member, or ArchiveError saying why it is refused."""
    name = m.name
    if _CUBIN.fullmatch(name):
        raise ArchiveError(
            name,
            "cubins are not imported (checking one costs what importing saves; "
            "the cubin cache refills on the first bundle build)",
        )
    for kind, (pattern, limit) in MEMBERS.items():
        got = pattern.fullmatch(name)
        if got is None:
            continue
        if m.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or m.issparse():
            raise ArchiveError(name, "not a regular file (a link, device, FIFO or directory)")
        if m.size > limit:
            raise ArchiveError(name, f"{m.size} bytes (limit {limit})")
        if name in seen:
            raise ArchiveError(name, "appears twice")
        return kind, got.group(1)
    raise ArchiveError(
        name, "not a name the cache writes (ptx_cache/<key>.ptx|json|zir, autotune/<hash>.json)"
    )


def _unpack(archive: Path, scratch: Path) -> dict[str, dict[str, str]]:
    """Stage the members into ``scratch`` (every check before any byte is read); returns
    kind -> key -> member name."""
    found: dict[str, dict[str, str]] = {kind: {} for kind in MEMBERS}
    seen: set[str] = set()
    with _open_archive(archive) as raw:
        gz = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw
        try:
            with tarfile.open(fileobj=_BoundedStream(stream), mode="r:") as tar:
                for m in tar:
                    if len(seen) >= MAX_MEMBERS:
                        raise ArchiveError(None, f"more than {MAX_MEMBERS} members")
                    kind, key = _member_kind(m, seen)
                    seen.add(m.name)
                    f = tar.extractfile(m)
                    data = f.read(m.size) if f is not None else b""
                    if len(data) != m.size:
                        raise ArchiveError(m.name, "truncated")
                    dst = scratch / m.name
                    dst.parent.mkdir(mode=0o700, exist_ok=True)
                    dst.write_bytes(data)
                    found[kind][key] = m.name
        except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
            raise ArchiveError(None, f"{archive} is not a readable tar archive: {e}") from e
    return found


# --------------------------------------------------------------------------- import


def _text(path: Path, member: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArchiveError(member, "not UTF-8") from e


def _rederive(scratch: Path, key: str) -> tuple[str, dict[str, Any], str] | None:
    """(PTX, metadata, HIR) of the staged entry ``key`` once recompiling its HIR here
    gives the same PTX; None for an entry of another zyntax build."""
    from zyntax import _native, compiler
    from zyntax import hir as zhir
    from zyntax.errors import ZyntaxError

    base = f"ptx_cache/{key}"
    ptx = _text(scratch / f"{base}.ptx", f"{base}.ptx")
    hir_text = _text(scratch / f"{base}.zir", f"{base}.zir")
    try:
        meta = loads_bounded(_text(scratch / f"{base}.json", f"{base}.json"))
    except RejectedFile as e:
        raise ArchiveError(f"{base}.json", str(e)) from None
    if not isinstance(meta, dict):
        raise ArchiveError(f"{base}.json", "not a JSON object")
    arch, ptx_version = meta.get("arch"), meta.get("ptx_version")
    version, options = meta.get("zyntax_version"), meta.get("options", {})
    if arch not in cache.DEFAULT_PTX or not isinstance(ptx_version, str):
        raise ArchiveError(f"{base}.json", "arch or ptx_version missing or unknown")
    if not isinstance(options, dict) or any(
        k not in _OPTIONS or v not in _OPTIONS[k] for k, v in options.items()
    ):
        raise ArchiveError(f"{base}.json", f"compile options {options!r} are not ones zyntax uses")
    if version != str(_native.__version__) or meta.get("toolchain") != cache.toolchain():
        return None  # made by another build: its key can never be looked up here
    if cache.cache_key(hir_text, str(arch), ptx_version, version, options) != key:
        raise ArchiveError(f"{base}.json", "the key is not the hash of the entry's HIR and options")
    try:
        module = zhir.parse_zir(hir_text, f"{key[:16]}.zir")
        res = compiler.compile_ptx(module, str(arch), opt_level=options.get("opt_level"))
    except ZyntaxError as e:
        raise ArchiveError(f"{base}.zir", f"does not compile: {e}") from None
    if res.ptx_version != ptx_version or res.ptx != ptx:
        raise ArchiveError(f"{base}.ptx", "is not the PTX its HIR compiles to here")
    expect = {k: [str(t) for t in module.signature(k)[0]] for k in module.kernels}
    try:
        described = cache.meta_kernels(meta)
        if described != expect:
            raise RejectedFile(f"describes kernels {described}, its HIR has {expect}")
        cache.check_kernels(ptx, expect)
    except RejectedFile as e:
        raise ArchiveError(f"{base}.json", str(e)) from None
    return ptx, meta, hir_text


def _check_tuning(scratch: Path, h: str) -> dict[str, Any]:
    from zyntax import tuning

    member = f"autotune/{h}.json"
    try:
        doc = tuning.check_db(loads_bounded(_text(scratch / member, member)))
    except RejectedFile as e:
        raise ArchiveError(member, str(e)) from None
    return {k: v for k, v in doc.items() if k != "mac"}


def import_archive(archive: Path) -> ImportReport:
    """Check every member of ``archive``, then add them all to the user cache (signed
    with its key), or raise ArchiveError (UntrustedCacheError) and add nothing."""
    root = cache.user_dir(create=True)
    assert root is not None  # created above
    secret = cache.signing_key(root, create=True)
    assert secret is not None
    rep = ImportReport()
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=root))
    try:
        raw = staging / "raw"
        raw.mkdir()
        found = _unpack(archive, raw)
        ptx_keys = set(found["ptx"]) | set(found["meta"]) | set(found["hir"])
        for key in sorted(ptx_keys):
            for kind, suffix in (("ptx", ".ptx"), ("meta", ".json"), ("hir", ".zir")):
                if key not in found[kind]:
                    raise ArchiveError(
                        next(found[k][key] for k in ("ptx", "meta", "hir") if key in found[k]),
                        f"its entry has no ptx_cache/{key}{suffix} (needed to re-derive it)",
                    )
        out_ptx, out_tune = staging / "ptx_cache", staging / "autotune"
        out_ptx.mkdir()
        out_tune.mkdir()
        for key in sorted(ptx_keys):
            got = _rederive(raw, key)
            if got is None:
                rep.other_build.append(key)
                continue
            ptx, meta, hir_text = got
            cache.write_entry(out_ptx, key, ptx, meta, secret=secret, hir=hir_text)
            rep.entries += 1
        for h in sorted(found["tuning"]):
            doc = _check_tuning(raw, h)
            doc["mac"] = cache.mac(secret, "autotune", h, b"", doc)
            (out_tune / f"{h}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
            rep.tuning += 1
        # Everything passed: move into place (per entry the metadata last, as store does).
        for sub, staged in (("ptx_cache", out_ptx), ("autotune", out_tune)):
            names = sorted(p.name for p in staged.iterdir())
            if not names:
                continue
            dest = cache.user_dir(sub, create=True)
            assert dest is not None
            for name in sorted(names, key=lambda n: n.endswith(".json") and sub == "ptx_cache"):
                os.replace(staged / name, dest / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return rep
