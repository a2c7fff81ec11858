"""The on-disk PTX cache: content-addressed, atomic, self-checking.

Layout (the same as the repository's ``ptx_cache/``)::

    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.ptx    PTX text
    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.json   metadata: kernels, parameter layout, arch, ...

``ZYNTAX_CACHE_DIR`` defaults to ``~/.cache/zyntax``; ``ZYNTAX_CACHE=0`` turns the
disk cache off. The key is the SHA-256 of the canonical HIR text, the target
arch, the PTX version, the zyntax version and the compile options. Each file is
written to a temporary file in the same directory and ``os.replace``\\ d into
place; the JSON is written last and records the PTX's SHA-256, so an entry
whose files are missing, truncated, or do not match is treated as absent and
rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

#: Bump when the front-end changes what it emits for the same HIR inputs.
FORMAT_VERSION = 1

#: PTX ISA version zyntax emits per arch by default (mirrors ``Arch::default_ptx``).
DEFAULT_PTX = {
    "sm_70": "6.4",
    "sm_75": "6.4",
    "sm_80": "7.0",
    "sm_86": "7.1",
    "sm_89": "7.8",
    "sm_90": "7.8",
    "sm_90a": "8.0",
}


def cache_dir() -> Path:
    base = os.environ.get("ZYNTAX_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "zyntax"
    )
    return Path(base) / "ptx_cache"


def enabled() -> bool:
    return os.environ.get("ZYNTAX_CACHE", "1") not in ("0", "false", "off", "no")


def cache_key(
    hir_text: str,
    arch: str,
    ptx_version: str,
    zyntax_version: str,
    options: dict[str, Any] | None = None,
) -> str:
    h = hashlib.sha256()
    payload = {
        "format": FORMAT_VERSION,
        "arch": arch,
        "ptx": ptx_version,
        "zyntax": zyntax_version,
        "options": options or {},
    }
    h.update(json.dumps(payload, sort_keys=True).encode())
    h.update(b"\0")
    h.update(hir_text.encode())
    return h.hexdigest()


def _atomic_write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            # No fsync: the rename keeps readers from seeing partial files, and the
            # checksum catches anything a crash leaves behind.
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load(key: str) -> tuple[str, dict[str, Any]] | None:
    """The cached PTX and metadata for ``key``, or None if absent or corrupt."""
    if not enabled():
        return None
    d = cache_dir()
    try:
        meta = json.loads((d / f"{key}.json").read_text(encoding="utf-8"))
        ptx = (d / f"{key}.ptx").read_text(encoding="utf-8")
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    if meta.get("ptx_sha256") != hashlib.sha256(ptx.encode()).hexdigest():
        return None
    return ptx, meta


def store(key: str, ptx: str, meta: dict[str, Any]) -> Path | None:
    """Write an entry atomically; returns the PTX path (None: cache off or unwritable)."""
    if not enabled():
        return None
    d = cache_dir()
    meta = dict(meta, key=key, ptx_sha256=hashlib.sha256(ptx.encode()).hexdigest())
    try:
        _atomic_write(d / f"{key}.ptx", ptx)
        _atomic_write(d / f"{key}.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    except OSError:
        # A read-only or full cache directory must not fail the compile.
        return None
    return d / f"{key}.ptx"
