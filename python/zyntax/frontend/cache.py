"""The on-disk PTX cache: content-addressed, atomic, self-checking, hostile-input safe.

Layout (the same as the repository's ``ptx_cache/``)::

    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.ptx    PTX text
    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.json   metadata: kernels, parameter layout, arch, ...

``ZYNTAX_CACHE_DIR`` defaults to ``~/.cache/zyntax``; ``ZYNTAX_CACHE=0`` turns the
disk cache off. The key is the SHA-256 of the canonical HIR text, the exact target
arch (``sm_90a`` is not ``sm_90``), the PTX version, the zyntax version and build
id, the LLVM version, the compile options and (for cubins) the ptxas version.

Each file is written to a temporary file in the same directory and
``os.replace``\\ d into place; the JSON is written last and records the PTX's
SHA-256. Reading trusts nothing in the directory: only regular files (no
symlinks, FIFOs or devices) of bounded size are read, JSON nesting is bounded,
the JSON must name the key, the PTX must match its checksum, and the PTX's
``.entry`` kernels and their parameter sizes must be those the metadata (and,
from the front-end, the kernel's HIR) says. An entry failing any check is
treated as absent, removed, rebuilt and logged, never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zyntax.log import logger
from zyntax.safeio import RejectedFile, is_missing, read_bounded, read_json

#: Bump when the front-end changes what it emits for the same HIR inputs.
FORMAT_VERSION = 2

#: PTX ISA version zyntax emits per arch by default (mirrors ``Arch::default_ptx``).
DEFAULT_PTX = {
    "sm_70": "6.4",
    "sm_75": "6.4",
    "sm_80": "7.0",
    "sm_86": "7.1",
    "sm_89": "7.8",
    "sm_90": "8.0",
    "sm_90a": "8.0",
}

#: Size limits of what the cache reads: larger files are corrupt by definition.
MAX_PTX_BYTES = 64 << 20
MAX_JSON_BYTES = 1 << 20

KEY_RE = re.compile(r"^[0-9a-f]{64}$")


#: Why a cache entry was rejected (a file refused by :mod:`zyntax.safeio`, or a failed check).
CacheEntryError = RejectedFile


def root_dir() -> Path:
    """``$ZYNTAX_CACHE_DIR`` (default ``~/.cache/zyntax``): PTX entries and tuning records."""
    base = os.environ.get("ZYNTAX_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "zyntax"
    )
    return Path(base)


def cache_dir() -> Path:
    return root_dir() / "ptx_cache"


def enabled() -> bool:
    return os.environ.get("ZYNTAX_CACHE", "1") not in ("0", "false", "off", "no")


@functools.cache
def toolchain() -> dict[str, str]:
    """The zyntax build id and LLVM version (part of every key; fixed per process)."""
    try:
        import zyntax

        info = zyntax.build_info()
    except Exception:  # a build without the extension: no compiler, nothing to key
        info = {}
    return {
        "build_id": str(info.get("build_id", "unknown")),
        "llvm": str(info.get("llvm_version", "unknown")),
    }


def cache_key(
    hir_text: str,
    arch: str,
    ptx_version: str,
    zyntax_version: str,
    options: dict[str, Any] | None = None,
    *,
    ptxas_version: str | None = None,
) -> str:
    h = hashlib.sha256()
    payload: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "arch": arch,
        "ptx": ptx_version,
        "zyntax": zyntax_version,
        "options": options or {},
        **toolchain(),
    }
    if ptxas_version is not None:
        payload["ptxas"] = ptxas_version
    h.update(json.dumps(payload, sort_keys=True).encode())
    h.update(b"\0")
    h.update(hir_text.encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- PTX checks

_ENTRY = re.compile(r"^\s*\.(?:visible\s+|weak\s+)?\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.M)
_SCALAR_BYTES = {
    "bool": 1,
    "i8": 1,
    "u8": 1,
    "i16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "i32": 4,
    "u32": 4,
    "f32": 4,
    "i64": 8,
    "u64": 8,
    "f64": 8,
}


def ptx_entries(ptx: str) -> dict[str, list[int]]:
    """``.entry`` kernel name -> parameter sizes in bytes, as the PTX declares them."""
    out: dict[str, list[int]] = {}
    for m in _ENTRY.finditer(ptx):
        sizes = []
        for decl in m.group(2).split(","):
            decl = decl.strip()
            if not decl:
                continue
            toks = decl.split()
            ty = next((t for t in toks if re.fullmatch(r"\.(?:[bsuf]\d+|pred)", t)), None)
            if ty is None:
                sizes.append(-1)
                continue
            elem = 1 if ty == ".pred" else int(ty[2:]) // 8
            arr = re.search(r"\[(\d+)\]$", toks[-1])
            sizes.append(elem * (int(arr.group(1)) if arr else 1))
        out[m.group(1)] = sizes
    return out


def hir_param_bytes(t: str) -> int | None:
    """Bytes of a kernel parameter of ``.zir`` type ``t`` (None: not a simple type)."""
    t = t.strip()
    if t.startswith("ptr<"):
        return 8
    return _SCALAR_BYTES.get(t)


def check_kernels(ptx: str, expect: Mapping[str, Sequence[str]]) -> None:
    """Raise unless the PTX's kernels are exactly ``expect`` (name -> ``.zir`` param types).

    Types whose by-value size is not simple (vectors, arrays) are checked by count only.
    """
    got = ptx_entries(ptx)
    if set(got) != set(expect):
        raise CacheEntryError(f"PTX kernels {sorted(got)} are not the expected {sorted(expect)}")
    for name, types in expect.items():
        sizes = got[name]
        if len(sizes) != len(types):
            raise CacheEntryError(
                f"PTX kernel {name} has {len(sizes)} parameters, its HIR {len(types)}"
            )
        for i, (s, t) in enumerate(zip(sizes, types, strict=True)):
            want = hir_param_bytes(str(t))
            if want is not None and s != want:
                raise CacheEntryError(
                    f"PTX kernel {name} parameter {i} is {s} bytes, its HIR type {t} needs {want}"
                )


def meta_kernels(meta: dict[str, Any]) -> dict[str, list[str]] | None:
    """The kernels an entry's metadata describes (name -> param types), if it says."""
    names = meta.get("kernels")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    launch = meta.get("launch")
    out: dict[str, list[str]] = {}
    for n in names:
        info = launch.get(n) if isinstance(launch, dict) else None
        params = info.get("params") if isinstance(info, dict) else None
        if not isinstance(params, list):
            out[n] = []
            continue
        out[n] = [str(p.get("type")) if isinstance(p, dict) else "?" for p in params]
    return out


# --------------------------------------------------------------------------- entries


def _atomic_write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600 files; cache entries and bundles are ordinary readable files.
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            # No fsync: the rename keeps readers from seeing partial files, and the
            # checksum catches anything a crash leaves behind.
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_entry(
    d: Path, key: str, expect: Mapping[str, Sequence[str]] | None = None
) -> tuple[str, dict[str, Any]]:
    """Read and check the entry ``key`` of directory ``d``; raise CacheEntryError if bad."""
    meta = read_json(d / f"{key}.json", MAX_JSON_BYTES)
    try:
        ptx = read_bounded(d / f"{key}.ptx", MAX_PTX_BYTES).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CacheEntryError(f"{key}.ptx: not UTF-8") from e
    except RejectedFile as e:
        # Metadata without its PTX is a broken entry, not an absent one.
        raise CacheEntryError(str(e)) from None
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise CacheEntryError("metadata names another key")
    if meta.get("ptx_sha256") != hashlib.sha256(ptx.encode()).hexdigest():
        raise CacheEntryError("PTX does not match its checksum")
    described = meta_kernels(meta)
    if described is not None:
        check_kernels(ptx, described)
    if expect is not None:
        check_kernels(ptx, expect)
    return ptx, meta


def remove_entry(d: Path, key: str) -> None:
    """Delete an entry's files (whatever they are, but never a directory's contents)."""
    for suffix in (".json", ".ptx"):
        p = d / f"{key}{suffix}"
        try:
            if p.is_symlink() or not p.is_dir():
                p.unlink()
        except OSError:
            pass


def load(
    key: str, expect: Mapping[str, Sequence[str]] | None = None
) -> tuple[str, dict[str, Any]] | None:
    """The cached PTX and metadata for ``key``, or None if absent or bad.

    ``expect`` (kernel name -> ``.zir`` parameter types, from the HIR the key was
    computed from) binds the entry's content to its key: PTX of another kernel
    under this key is rejected. A bad entry is removed so the next store repairs it.
    """
    if not enabled():
        return None
    d = cache_dir()
    try:
        return check_entry(d, key, expect)
    except CacheEntryError as e:
        if not is_missing(e):
            logger.warning("cache: entry %s is bad (%s); removing it to rebuild", key[:16], e)
            remove_entry(d, key)
        return None


def store(key: str, ptx: str, meta: dict[str, Any]) -> Path | None:
    """Write an entry atomically; returns the PTX path (None: cache off or unwritable)."""
    if not enabled():
        return None
    d = cache_dir()
    meta = dict(meta, key=key, ptx_sha256=hashlib.sha256(ptx.encode()).hexdigest())
    try:
        _atomic_write(d / f"{key}.ptx", ptx)
        _atomic_write(d / f"{key}.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        # A read-only or full cache directory must not fail the compile.
        logger.warning("cache: could not write entry %s in %s: %s", key[:16], d, e)
        return None
    return d / f"{key}.ptx"


# --------------------------------------------------------------------------- management


@dataclass
class EntryInfo:
    key: str
    ok: bool
    problem: str
    kernels: list[str]
    arch: str
    bytes: int
    mtime: float


def keys(d: Path | None = None) -> list[str]:
    """Keys with at least one file in the cache directory, sorted."""
    d = cache_dir() if d is None else d
    if not d.is_dir():
        return []
    out = set()
    for p in d.iterdir():
        stem, _, suffix = p.name.partition(".")
        if KEY_RE.match(stem) and suffix in ("ptx", "json"):
            out.add(stem)
    return sorted(out)


def inspect(d: Path | None = None) -> list[EntryInfo]:
    """Every entry of the cache directory, checked."""
    d = cache_dir() if d is None else d
    out = []
    for k in keys(d):
        size = 0
        mtime = 0.0
        for suffix in (".ptx", ".json"):
            try:
                st = os.lstat(d / f"{k}{suffix}")
                size += st.st_size
                mtime = max(mtime, st.st_mtime)
            except OSError:
                pass
        try:
            _, meta = check_entry(d, k)
            kernels = [str(x) for x in meta.get("kernels", [])]
            out.append(EntryInfo(k, True, "", kernels, str(meta.get("arch", "?")), size, mtime))
        except CacheEntryError as e:
            out.append(EntryInfo(k, False, str(e), [], "?", size, mtime))
    return out
