"""The on-disk kernel cache: content-addressed, atomic, self-checking, bound to its owner.

Layout (``ptx_cache/`` as in the repository's bundled ``ptx_cache/``)::

    $ZYNTAX_CACHE_DIR/signing.key            32 random bytes, 0600: this cache's secret
    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.ptx    PTX text
    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.json   metadata: kernels, parameter layout, arch, mac, ...
    $ZYNTAX_CACHE_DIR/ptx_cache/<key>.zir    the HIR the key was computed from (for export)
    $ZYNTAX_CACHE_DIR/cubin_cache/<key>.cubin|.json   cubins of AOT bundles (zyntax.aot)
    $ZYNTAX_CACHE_DIR/autotune/<hash>.json   tuning records (zyntax.tuning)

``ZYNTAX_CACHE_DIR`` defaults to ``~/.cache/zyntax``; ``ZYNTAX_CACHE=0`` turns the
disk cache off. The key is the SHA-256 of the canonical HIR text, the exact target
arch (``sm_90a`` is not ``sm_90``), the PTX version, the zyntax version and build
id, the LLVM version, the compile options and (for cubins) the ptxas version.

Threat model: the key is computable from public inputs, so anyone who can write
a file where the cache looks could otherwise plant code under a real key. Hence:

* **Directories are trusted as ssh and git trust theirs**: the cache root and
  its subfolders are created 0700 and, before every use, must be directories
  (subfolders: not symlinks) owned by this user and not writable by group or
  others. Otherwise the cache is not used (one warning; kernels compile as if
  it were off), and ``zyntax cache`` commands fail with :class:`UntrustedCacheError`.
* **Entries are bound to their producer**: every entry's metadata carries an
  HMAC-SHA256 (``mac``), keyed by ``signing.key`` (created 0600 with O_EXCL
  semantics; it must stay a regular 0600 file of this user), over the entry's
  kind, key, content digest and metadata. An entry whose MAC does not verify
  (planted, copied from another machine, or written before zyntax signed
  entries) is treated as absent: removed, rebuilt and logged, never loaded.
  Someone who cannot read the secret cannot forge an entry, even with the key
  and digests rewritten.
* **Reading still trusts nothing** (:mod:`zyntax.safeio`): only regular files
  (no symlinks, FIFOs or devices) of bounded size, JSON nesting bounded, the
  JSON must name the key, the PTX must match its checksum, and the PTX's
  ``.entry`` kernels and parameter sizes must be those the metadata (and, from
  the front-end, the kernel's HIR) says.

Entries move between machines only through ``zyntax cache export|import``
(:mod:`zyntax.cache_archive`), which re-derives or re-validates everything it
accepts and signs it with the local secret. The repository's bundled
``ptx_cache/`` is part of the installed package and is read and written
unsigned (``load_from``/``write_entry`` with no secret; scripts/build_ptx_cache.py).

Each file is written to a temporary file in the same directory and
``os.replace``\\ d into place; the JSON is written last.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zyntax import targets
from zyntax.errors import ZyntaxError
from zyntax.log import logger
from zyntax.safeio import RejectedFile, is_missing, read_bounded, read_json

#: Bump when the front-end changes what it emits for the same HIR inputs.
FORMAT_VERSION = 2

#: PTX ISA version zyntax emits per arch by default: the target table's
#: (``Arch::default_ptx``, read by :mod:`zyntax.targets`).
DEFAULT_PTX = targets.DEFAULT_PTX

#: Size limits of what the cache reads: larger files are corrupt by definition.
MAX_PTX_BYTES = 64 << 20
MAX_JSON_BYTES = 1 << 20
MAX_HIR_BYTES = 16 << 20

KEY_RE = re.compile(r"^[0-9a-f]{64}$")

#: The cache's secret, in the cache root.
SECRET_NAME = "signing.key"
SECRET_BYTES = 32

#: Why a cache entry was rejected (a file refused by :mod:`zyntax.safeio`, or a failed check).
CacheEntryError = RejectedFile


class CacheError(ZyntaxError):
    """A problem with the kernel cache as a whole (its directory, an archive to import)."""


class UntrustedCacheError(CacheError):
    """The cache directory or its secret could have been written by someone else."""


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


# --------------------------------------------------------------------------- trust


def check_private_dir(path: Path, *, follow: bool) -> None:
    """Raise UntrustedCacheError unless ``path`` is a directory owned by this user and not
    writable by group or others (``follow=False``: and not a symlink). A missing
    directory raises FileNotFoundError."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise UntrustedCacheError(f"{path}: {e.strerror or e}") from e
    if not stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise UntrustedCacheError(f"{path} is {what}")
    if st.st_uid != os.getuid():
        raise UntrustedCacheError(
            f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
        )
    if st.st_mode & 0o022:
        raise UntrustedCacheError(
            f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"`chmod go-w {path}` if only you can write it"
        )


def _make_private_dir(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)  # the umask can only take bits away
    except FileExistsError:
        pass


def user_dir(sub: str | None = None, *, create: bool = False) -> Path | None:
    """The cache root (or its folder ``sub``) after the ownership and permission checks;
    None if it does not exist (``create``: made 0700). Raises UntrustedCacheError."""
    root = root_dir()
    if create:
        root.parent.mkdir(parents=True, exist_ok=True)
        _make_private_dir(root)
    try:
        # The root may be a symlink (a cache on another disk); what it points to is checked.
        check_private_dir(root, follow=True)
        if sub is None:
            return root
        if create:
            _make_private_dir(root / sub)
        check_private_dir(root / sub, follow=False)
    except FileNotFoundError:
        return None
    return root / sub


def _read_secret(path: Path) -> bytes:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise UntrustedCacheError(f"{path}: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise UntrustedCacheError(f"{path} is not a regular file of this user")
        if st.st_mode & 0o077:
            raise UntrustedCacheError(
                f"{path} is readable or writable by others (mode {stat.S_IMODE(st.st_mode):o})"
            )
        data = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != SECRET_BYTES:
        raise UntrustedCacheError(f"{path} holds {len(data)} bytes, not {SECRET_BYTES}")
    return data


def signing_key(root: Path, *, create: bool = False) -> bytes | None:
    """The cache's secret (``root/signing.key``); None if absent and not ``create``.

    Created as a complete 0600 file and hard-linked into place, so a concurrent
    process sees either no secret or the whole one, and the first to link wins."""
    path = root / SECRET_NAME
    try:
        return _read_secret(path)
    except FileNotFoundError:
        if not create:
            return None
    fd, tmp = tempfile.mkstemp(prefix=f".{SECRET_NAME}.", dir=root)  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(SECRET_BYTES))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
    finally:
        os.unlink(tmp)
    return _read_secret(path)


_warned: set[str] = set()


def _warn_once(where: Path, why: BaseException) -> None:
    if str(where) not in _warned:
        _warned.add(str(where))
        logger.warning("cache: not using %s (%s); compiling without the disk cache", where, why)


def usable_dir(sub: str, *, create: bool) -> tuple[Path, bytes] | None:
    """For implicit use (compiles, tuning): the checked folder ``sub`` and the secret, or
    None (absent, or untrusted/unwritable: warned once, and the caller does without)."""
    try:
        d = user_dir(sub, create=create)
        key = signing_key(d.parent, create=create) if d is not None else None
    except (UntrustedCacheError, OSError) as e:
        _warn_once(root_dir(), e)
        return None
    return None if d is None or key is None else (d, key)


def mac(key: bytes, kind: str, name: str, content: bytes, meta: Mapping[str, Any]) -> str:
    """HMAC-SHA256 binding an entry's kind, name (key), content and metadata (less ``mac``)."""
    body = {k: v for k, v in meta.items() if k != "mac"}
    # The JSON round trip makes the MAC the same for the dict written and the dict read back.
    body = json.loads(json.dumps(body))
    msg = json.dumps(
        [kind, name, hashlib.sha256(content).hexdigest(), body],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


def signed(key: bytes, kind: str, name: str, content: bytes, meta: Any) -> bool:
    """Whether ``meta["mac"]`` is the MAC of this entry under ``key``."""
    if not isinstance(meta, dict):
        return False
    got = meta.get("mac")
    if not isinstance(got, str) or not KEY_RE.match(got):
        return False
    return hmac.compare_digest(got, mac(key, kind, name, content, meta))


# --------------------------------------------------------------------------- key


@functools.cache
def toolchain() -> dict[str, str]:
    """The zyntax build id and LLVM version (part of every key; fixed per process)."""
    try:
        from zyntax import _native

        info = _native.build_info()
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


def _sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def check_entry(
    d: Path,
    key: str,
    expect: Mapping[str, Sequence[str]] | None = None,
    secret: bytes | None = None,
) -> tuple[str, dict[str, Any]]:
    """Read and check the entry ``key`` of directory ``d``; raise CacheEntryError if bad.

    With ``secret`` (the user cache) the entry must carry this cache's MAC; without
    it (the bundled ``ptx_cache/``, part of the installed package) it need not."""
    meta = read_json(d / f"{key}.json", MAX_JSON_BYTES)
    try:
        raw = read_bounded(d / f"{key}.ptx", MAX_PTX_BYTES)
        ptx = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CacheEntryError(f"{key}.ptx: not UTF-8") from e
    except RejectedFile as e:
        # Metadata without its PTX is a broken entry, not an absent one.
        raise CacheEntryError(str(e)) from None
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise CacheEntryError("metadata names another key")
    if meta.get("ptx_sha256") != _sha256(raw):
        raise CacheEntryError("PTX does not match its checksum")
    if secret is not None and not signed(secret, "ptx", key, raw, meta):
        raise CacheEntryError(
            "not signed by this cache (planted by someone else, copied from another "
            "cache, or written before zyntax signed its entries)"
        )
    described = meta_kernels(meta)
    if described is not None:
        check_kernels(ptx, described)
    if expect is not None:
        check_kernels(ptx, expect)
    return ptx, meta


def read_hir(d: Path, key: str, meta: Mapping[str, Any]) -> str:
    """The HIR text of a checked entry (``<key>.zir``), checked against ``hir_sha256``."""
    want = meta.get("hir_sha256")
    if not isinstance(want, str):
        raise CacheEntryError("the entry keeps no HIR (stored without it)")
    raw = read_bounded(d / f"{key}.zir", MAX_HIR_BYTES)
    if _sha256(raw) != want:
        raise CacheEntryError("HIR does not match its checksum")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CacheEntryError(f"{key}.zir: not UTF-8") from e


def write_entry(
    d: Path,
    key: str,
    ptx: str,
    meta: Mapping[str, Any],
    *,
    secret: bytes | None = None,
    hir: str | None = None,
) -> Path:
    """Write an entry atomically (metadata last), signed when ``secret`` is given, with
    the HIR it was compiled from when ``hir`` is; returns the PTX path. Raises OSError."""
    out = {k: v for k, v in meta.items() if k not in ("mac", "hir_sha256")}
    out.update(key=key, ptx_sha256=_sha256(ptx))
    if hir is not None:
        out["hir_sha256"] = _sha256(hir)
        _atomic_write(d / f"{key}.zir", hir)
    else:
        (d / f"{key}.zir").unlink(missing_ok=True)
    if secret is not None:
        out["mac"] = mac(secret, "ptx", key, ptx.encode(), out)
    _atomic_write(d / f"{key}.ptx", ptx)
    _atomic_write(d / f"{key}.json", json.dumps(out, indent=1, sort_keys=True) + "\n")
    return d / f"{key}.ptx"


ENTRY_SUFFIXES = (".json", ".ptx", ".zir")


def remove_entry(d: Path, key: str, suffixes: Sequence[str] = ENTRY_SUFFIXES) -> None:
    """Delete an entry's files (whatever they are, but never a directory's contents)."""
    for suffix in suffixes:
        p = d / f"{key}{suffix}"
        try:
            if p.is_symlink() or not p.is_dir():
                p.unlink()
        except OSError:
            pass


def load_from(
    d: Path,
    key: str,
    expect: Mapping[str, Sequence[str]] | None = None,
    secret: bytes | None = None,
) -> tuple[str, dict[str, Any]] | None:
    """:func:`check_entry`, with a bad entry logged and removed (so the next store repairs
    it) and None returned for it, as for an absent one."""
    try:
        return check_entry(d, key, expect, secret)
    except CacheEntryError as e:
        if not is_missing(e):
            logger.warning("cache: entry %s is bad (%s); removing it to rebuild", key[:16], e)
            remove_entry(d, key)
        return None


def load(
    key: str, expect: Mapping[str, Sequence[str]] | None = None
) -> tuple[str, dict[str, Any]] | None:
    """The cached PTX and metadata for ``key``, or None if absent or bad.

    ``expect`` (kernel name -> ``.zir`` parameter types, from the HIR the key was
    computed from) binds the entry's content to its key: PTX of another kernel
    under this key is rejected. Only entries this cache signed are loaded.
    """
    if not enabled():
        return None
    found = usable_dir("ptx_cache", create=False)
    if found is None:
        return None
    return load_from(found[0], key, expect, found[1])


def store(key: str, ptx: str, meta: dict[str, Any], *, hir: str | None = None) -> Path | None:
    """Write a signed entry atomically; returns the PTX path (None: cache off, untrusted
    or unwritable). ``hir``, the text the key was computed from, makes it exportable."""
    if not enabled():
        return None
    found = usable_dir("ptx_cache", create=True)
    if found is None:
        return None
    d, key_bytes = found
    meta = dict(meta, toolchain=toolchain())
    try:
        return write_entry(d, key, ptx, meta, secret=key_bytes, hir=hir)
    except OSError as e:
        # A read-only or full cache directory must not fail the compile.
        logger.warning("cache: could not write entry %s in %s: %s", key[:16], d, e)
        return None


# --------------------------------------------------------------------------- blobs (cubins)


def check_blob(
    d: Path, key: str, suffix: str, limit: int, secret: bytes | None
) -> tuple[bytes, dict[str, Any]]:
    """Read and check the binary entry ``<key><suffix>`` + ``<key>.json`` of ``d``."""
    kind = suffix.lstrip(".")
    meta = read_json(d / f"{key}.json", MAX_JSON_BYTES)
    try:
        blob = read_bounded(d / f"{key}{suffix}", limit)
    except RejectedFile as e:
        raise CacheEntryError(str(e)) from None
    if not isinstance(meta, dict) or meta.get("key") != key:
        raise CacheEntryError("metadata names another key")
    if meta.get(f"{kind}_sha256") != _sha256(blob):
        raise CacheEntryError(f"{kind} does not match its checksum")
    if secret is not None and not signed(secret, kind, key, blob, meta):
        raise CacheEntryError("not signed by this cache")
    return blob, meta


def load_blob(sub: str, key: str, suffix: str, limit: int) -> tuple[bytes, dict[str, Any]] | None:
    """A signed binary entry of the user cache folder ``sub``, or None (absent or bad:
    a bad one is logged and removed)."""
    if not enabled():
        return None
    found = usable_dir(sub, create=False)
    if found is None:
        return None
    d, key_bytes = found
    try:
        return check_blob(d, key, suffix, limit, key_bytes)
    except CacheEntryError as e:
        if not is_missing(e):
            logger.warning("cache: %s entry %s is bad (%s); rebuilding it", sub, key[:16], e)
            remove_entry(d, key, (".json", suffix))
        return None


def store_blob(sub: str, key: str, suffix: str, blob: bytes, meta: Mapping[str, Any]) -> None:
    """Write a signed binary entry (the blob, then its metadata) to the user cache."""
    if not enabled():
        return
    found = usable_dir(sub, create=True)
    if found is None:
        return
    d, key_bytes = found
    kind = suffix.lstrip(".")
    out = {k: v for k, v in meta.items() if k != "mac"}
    out.update(key=key, **{f"{kind}_sha256": _sha256(blob)})
    out["mac"] = mac(key_bytes, kind, key, blob, out)
    try:
        _atomic_write(d / f"{key}{suffix}", blob)
        _atomic_write(d / f"{key}.json", json.dumps(out, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        logger.warning("cache: could not write %s entry %s: %s", sub, key[:16], e)


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


def keys(d: Path | None = None, suffixes: Sequence[str] = ENTRY_SUFFIXES) -> list[str]:
    """Keys with at least one file (of ``suffixes``) in the directory, sorted."""
    d = cache_dir() if d is None else d
    if not d.is_dir():
        return []
    out = set()
    for p in d.iterdir():
        stem, dot, suffix = p.name.partition(".")
        if KEY_RE.match(stem) and dot + suffix in suffixes:
            out.add(stem)
    return sorted(out)


def explicit_dir(sub: str) -> tuple[Path | None, bytes | None]:
    """For ``zyntax cache`` commands: the checked folder ``sub`` (None: absent) and the
    secret (None: none yet). Raises UntrustedCacheError instead of doing without."""
    d = user_dir(sub)
    return d, (signing_key(d.parent) if d is not None else None)


def inspect(d: Path | None = None, secret: bytes | None = None) -> list[EntryInfo]:
    """Every entry of the directory, checked (default: the user cache, its MACs included)."""
    unsigned = False
    if d is None:
        found, secret = explicit_dir("ptx_cache")
        if found is None:
            return []
        d = found
        unsigned = secret is None  # no signing key yet: this cache signed nothing here
    out = []
    for k in keys(d):
        size = 0
        mtime = 0.0
        for suffix in ENTRY_SUFFIXES:
            try:
                st = os.lstat(d / f"{k}{suffix}")
                size += st.st_size
                mtime = max(mtime, st.st_mtime)
            except OSError:
                pass
        try:
            if unsigned:
                raise CacheEntryError(f"not signed by this cache (it has no {SECRET_NAME})")
            _, meta = check_entry(d, k, secret=secret)
            kernels = [str(x) for x in meta.get("kernels", [])]
            out.append(EntryInfo(k, True, "", kernels, str(meta.get("arch", "?")), size, mtime))
        except CacheEntryError as e:
            out.append(EntryInfo(k, False, str(e), [], "?", size, mtime))
    return out
