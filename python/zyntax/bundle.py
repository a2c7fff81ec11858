"""Loading AOT bundles (a fatbin or cubin plus its JSON launch manifest) with only the driver.

:func:`load_bundle` (also ``zyntax.cuda.load_bundle``) reads the manifest
written by :func:`zyntax.aot.build_bundle`, checks it and the image against
each other, picks what the driver will run on this device (SASS of a
compatible arch, else the PTX, which the driver JIT-compiles), loads the image
and returns a :class:`Bundle` whose kernels check launch arguments against the
manifest's parameter types and launch bounds. Nothing here imports the
compiler, the ``@zyntax.kernel`` front-end, LLVM or ptxas.

Every check before the device is touched raises :class:`BundleError` (a
:class:`zyntax.CudaError` with ``kind == "bundle"``): a missing, truncated or
corrupted image or manifest, a manifest edited after it was written, or one
that does not describe the image. A bundle with nothing this device can run
raises ``CudaError`` (``kind == "no_image"``) naming the archs present and the
device's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from zyntax import _native
from zyntax.errors import ArgumentError, CudaError
from zyntax.safeio import RejectedFile, read_bounded, read_json

#: Manifest format: bump the version on incompatible changes (older loaders refuse it).
MANIFEST_FORMAT = "zyntax-bundle"
MANIFEST_VERSION = 1
MAX_IMAGE_BYTES = 1 << 30
MAX_MANIFEST_BYTES = 16 << 20


class BundleError(CudaError):
    """A bundle's image or manifest is missing, corrupted, or they do not match."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kind = "bundle"
        self.driver_error = None


def runs_on(arch: str, cc: tuple[int, int], kind: str) -> bool:
    """Whether an image for ``arch`` runs on a device of compute capability ``cc``.

    SASS runs on the same major version with an equal or higher minor one; PTX
    is JIT-compiled for any newer device; ``a`` (arch-specific) code of either
    kind runs only on exactly its own arch. The rule is zyntax-cuda's
    (``bundle::runs_on``, which the native bundle loader applies too).
    """
    return bool(_native.cuda_bundle_runs_on(arch, cc, kind == "cubin"))


def choose(sass: list[str], ptx: str | None, cc: tuple[int, int]) -> tuple[str, str] | None:
    """What the driver runs from a bundle: ("sass", arch) or ("ptx", arch), or
    None; the closest SASS first (an exact ``a`` build, then the highest minor).
    zyntax-cuda's ``bundle::choose``."""
    picked = _native.cuda_bundle_choose(list(sass), ptx, cc)
    return None if picked is None else (str(picked[0]), str(picked[1]))


def _content_hash(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON without its ``content_sha256`` field."""
    body = {k: v for k, v in manifest.items() if k != "content_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _paths(path: str | Path) -> tuple[Path, Path]:
    p = Path(path)
    if p.suffix == ".json":
        return p, p
    return p, p.with_suffix(".json")


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise BundleError(f"bundle manifest: {what}")


def is_manifest(data: Any) -> bool:
    """Whether parsed JSON carries a bundle manifest's marker fields (of any version:
    an older zyntax's manifest is still ours to replace)."""
    return (
        isinstance(data, dict)
        and data.get("format") == MANIFEST_FORMAT
        and isinstance(data.get("version"), int)
    )


def refuse_to_replace(path: Path, is_ours: Callable[[Any], bool], what: str) -> None:
    """Raise ArgumentError if ``path`` exists and is not a JSON file zyntax wrote.

    zyntax writes a JSON file beside its outputs under a name the user did not
    give (``out.fatbin`` -> ``out.json``); whatever else lives there (not JSON,
    other JSON, a symlink, unreadable) is the user's and is never overwritten.
    """
    if not os.path.lexists(path):
        return
    try:
        ours = is_ours(read_json(path, MAX_MANIFEST_BYTES))
    except RejectedFile:
        ours = False
    if not ours:
        raise ArgumentError(
            f"{path} exists and is not {what}: refusing to overwrite it "
            "(pass --force, or overwrite=True from Python, to replace it)"
        )


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest at ``path``, checked for shape and against its own content hash."""
    try:
        m = read_json(path, MAX_MANIFEST_BYTES)
    except RejectedFile as e:
        raise BundleError(f"cannot read the bundle manifest {path}: {e}") from None
    _expect(isinstance(m, dict), "not a JSON object")
    _expect(m.get("format") == MANIFEST_FORMAT, f"format is not {MANIFEST_FORMAT!r}")
    _expect(
        m.get("version") == MANIFEST_VERSION,
        f"version {m.get('version')!r}; this zyntax reads version {MANIFEST_VERSION}",
    )
    _expect(m.get("content_sha256") == _content_hash(m), "edited after it was written (hash)")
    # The hash only catches accidents (anyone can recompute it): every field
    # the loader uses is checked for type and range here, before the device.
    img = m.get("image")
    _expect(isinstance(img, dict), "no image record")
    _expect(img.get("kind") in ("fatbin", "cubin"), "image kind is not fatbin or cubin")
    file = img.get("file")
    if not (isinstance(file, str) and _FILE_NAME.fullmatch(file) is not None):
        _bad(f"image.file: expected a plain file name, got {_shown(file)}")
    _field_int(img.get("bytes"), "image.bytes", 0, MAX_IMAGE_BYTES)
    if not (isinstance(img.get("sha256"), str) and _SHA256.fullmatch(img["sha256"]) is not None):
        _bad(f"image.sha256: expected 64 hex digits, got {_shown(img.get('sha256'))}")
    sass = m.get("sass")
    if not (isinstance(sass, list) and all(_is_arch(a) for a in sass)):
        _bad(f"sass: expected a list of arch names (e.g. 'sm_90'), got {_shown(sass)}")
    ptx = m.get("ptx")
    if not (ptx is None or _is_arch(ptx)):
        _bad(f"ptx: expected null or an arch name, got {_shown(ptx)}")
    kernels = m.get("kernels")
    _expect(isinstance(kernels, dict) and bool(kernels), "no kernels")
    for name, k in kernels.items():
        _check_kernel(name, k)
    tuning = m.get("tuning")
    if not (tuning is None or isinstance(tuning, dict)):
        _bad(f"tuning: expected an object, got {_shown(tuning)}")
    return dict(m)


_ARCH = re.compile(r"sm_[1-9][0-9]{1,2}a?")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_KERNEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]{0,1023}")
#: Launch dimensions and byte counts the driver takes (unsigned 32-bit, kept positive).
_U31 = 2**31 - 1
#: Kernel parameters: PTX passes at most 32 KiB of them, so at most this many.
_MAX_PARAMS = 32764


def _bad(what: str) -> NoReturn:
    raise BundleError(f"bundle manifest: {what}")


def _shown(v: Any) -> str:
    """`v` for an error message, cut short (a hostile manifest may hold megabytes)."""
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_arch(a: Any) -> bool:
    return isinstance(a, str) and _ARCH.fullmatch(a) is not None


def _field_int(v: Any, where: str, lo: int, hi: int) -> int:
    """`v`, an integer in [lo, hi] (never a bool or float), else a BundleError naming `where`."""
    if not (isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi):
        _bad(f"{where}: expected an integer in [{lo}, {hi}], got {_shown(v)}")
    return int(v)


def _field_dims(v: Any, where: str) -> None:
    """`v`: null or a list of 1 to 3 positive integers (block or cluster dimensions)."""
    if v is None:
        return
    if not (isinstance(v, list) and 1 <= len(v) <= 3):
        _bad(f"{where}: expected null or a list of 1 to 3 integers, got {_shown(v)}")
    for i, d in enumerate(v):
        _field_int(d, f"{where}[{i}]", 1, _U31)


def _check_kernel(name: str, k: Any) -> None:
    """One entry of the manifest's ``kernels``: every field the loader reads."""
    if _KERNEL_NAME.fullmatch(name) is None:
        _bad(f"kernels: {_shown(name)} is not a kernel name")
    at = f"kernels.{name}"
    if not isinstance(k, dict):
        _bad(f"{at}: expected an object, got {_shown(k)}")
    params = k.get("params")
    if not (isinstance(params, list) and len(params) <= _MAX_PARAMS):
        _bad(
            f"{at}.params: expected a list of at most {_MAX_PARAMS} parameters, "
            f"got {_shown(params)}"
        )
    for i, p in enumerate(params):
        if not (isinstance(p, dict) and isinstance(p.get("type"), str) and len(p["type"]) <= 4096):
            _bad(f"{at}.params[{i}]: expected an object with a type name, got {_shown(p)}")
    _field_dims(k.get("max_threads"), f"{at}.max_threads")
    _field_dims(k.get("cluster_dims"), f"{at}.cluster_dims")
    shared = k.get("dynamic_shared_bytes")
    if shared is not None:
        _field_int(shared, f"{at}.dynamic_shared_bytes", 0, _U31)
    if not isinstance(k.get("grid_sync", False), bool):
        _bad(f"{at}.grid_sync: expected true or false, got {_shown(k.get('grid_sync'))}")
    resources = k.get("resources", {})
    if not isinstance(resources, dict):
        _bad(f"{at}.resources: expected an object, got {_shown(resources)}")
    for arch, r in resources.items():
        if not (_is_arch(arch) and isinstance(r, dict)):
            _bad(
                f"{at}.resources.{_shown(arch)}: expected an arch name and an object, "
                f"got {_shown(r)}"
            )
        if r.get("registers") is not None:
            _field_int(r["registers"], f"{at}.resources.{arch}.registers", 0, 65536)


@dataclass
class Bundle:
    """A loaded bundle: its kernels, manifest, and how the driver ran it."""

    path: Path
    manifest: dict[str, Any]
    module: Any
    #: "sass" (a cubin for this device was used) or "ptx" (the driver JIT-compiled the PTX).
    loaded_from: str
    #: The arch of the image that ran (e.g. "sm_90" SASS, or "sm_80" PTX).
    image_arch: str
    device_arch: str
    #: Seconds spent in the driver's module load (JIT included when ``jit``).
    load_seconds: float
    kernels: dict[str, Any] = field(default_factory=dict)

    @property
    def jit(self) -> bool:
        return self.loaded_from == "ptx"

    @property
    def kernel_names(self) -> list[str]:
        return sorted(self.kernels)

    @property
    def tuning(self) -> dict[str, Any]:
        t = self.manifest.get("tuning")
        return dict(t) if isinstance(t, dict) else {}

    def kernel(self, name: str) -> Any:
        k = self.kernels.get(name)
        if k is None:
            raise CudaError(
                f"bundle {self.path.name} has no kernel {name!r} (it has: "
                + ", ".join(self.kernel_names)
                + ")"
            )
        return k

    def __getattr__(self, name: str) -> Any:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(name)

    def __repr__(self) -> str:
        how = "SASS" if self.loaded_from == "sass" else "PTX (JIT)"
        return (
            f"<zyntax Bundle {self.path.name}: {', '.join(self.kernel_names)}; "
            f"{how} {self.image_arch} on {self.device_arch}>"
        )


def check_image(manifest: dict[str, Any], image: bytes) -> None:
    """Raise BundleError unless ``image`` is the one ``manifest`` describes: its
    size and SHA-256, and a fatbin's records exactly the manifest's SASS and
    PTX archs (a cubin must be ELF). The check is zyntax-cuda's
    (``bundle::check_image``), the one the native loader runs."""
    try:
        _native.cuda_bundle_check_image(json.dumps(manifest), bytes(image))
    except CudaError as e:
        raise BundleError(str(e)) from None


def load_bundle(path: str | Path, device: int = 0) -> Bundle:
    """Load a bundle (its image or its ``.json`` manifest path) on ``device``."""
    from zyntax import cuda

    given, manifest_path = _paths(path)
    manifest = read_manifest(manifest_path)
    image_path = manifest_path.with_name(manifest["image"]["file"])
    if given != manifest_path and given.name != image_path.name:
        raise BundleError(f"manifest {manifest_path} describes {image_path.name}, not {given}")
    try:
        image = read_bounded(image_path, MAX_IMAGE_BYTES)
    except RejectedFile as e:
        raise BundleError(f"cannot read the bundle image {image_path}: {e}") from None
    check_image(manifest, image)
    sass = list(manifest["sass"]) if manifest["image"]["kind"] == "fatbin" else manifest["sass"]
    ptx = manifest.get("ptx") if manifest["image"]["kind"] == "fatbin" else None

    dev = cuda.Device(device)
    cc = tuple(dev.compute_capability)
    dev_arch = f"sm_{cc[0]}{cc[1]}"
    picked = choose(sass, ptx, (int(cc[0]), int(cc[1])))
    if picked is None:
        have = ", ".join(sass) + (f" + PTX {ptx}" if ptx else " (no PTX)")
        err = CudaError(
            f"bundle {image_path.name} cannot run on device {device} ({dev.name}, {dev_arch}): "
            f"it holds SASS for {have}"
        )
        err.kind = "no_image"  # type: ignore[attr-defined]
        err.driver_error = None  # type: ignore[attr-defined]
        raise err
    sigs = {
        name: {
            "params": [str(p.get("type")) for p in k["params"]],
            "max_threads": k.get("max_threads"),
            "shared_bytes": int(k.get("dynamic_shared_bytes") or 0),
            "cluster": k.get("cluster_dims"),
            "grid_sync": bool(k.get("grid_sync")),
        }
        for name, k in manifest["kernels"].items()
    }
    t0 = time.perf_counter()
    mod = cuda.load_module(image, device, signatures=sigs)
    load_s = time.perf_counter() - t0
    kernels: dict[str, Any] = {}
    for name in manifest["kernels"]:
        try:
            kernels[name] = mod.kernel(name)
        except CudaError as e:
            if getattr(e, "kind", None) == "kernel_not_found":
                raise BundleError(
                    f"bundle manifest names kernel {name!r}, which {image_path.name} lacks"
                ) from None
            raise
    kind, arch = picked
    if kind == "sass":
        for name, k in kernels.items():
            want = manifest["kernels"][name].get("resources", {}).get(arch, {}).get("registers")
            if want is not None and int(k.num_regs) != int(want):
                raise BundleError(
                    f"kernel {name}: the {arch} SASS uses {k.num_regs} registers, the manifest "
                    f"says {want} (the manifest does not describe this image)"
                )
    b = Bundle(Path(image_path), manifest, mod, kind, arch, dev_arch, load_s, kernels)
    if b.tuning:
        from zyntax import tuning

        tuning.install_tables(b.tuning, dev_arch)
    return b
