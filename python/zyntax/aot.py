"""Ahead-of-time bundles: SASS for each listed arch plus PTX, in one fatbin, with a manifest.

``build_bundle(module, ["sm_80", "sm_90a"], "out/saxpy.fatbin")`` compiles a
``zyntax.hir.Module`` to PTX for every arch (LLVM NVPTX), assembles each PTX to
a cubin with ``ptxas`` (keeping ``ptxas -v``'s registers, spills, stack and
shared memory per kernel), and bundles the cubins and the PTX of the newest
portable (non-``a``) arch into one fatbin with nvFatbin (:mod:`zyntax.fatbin`).
Beside it goes the launch manifest ``out/saxpy.json`` that
:func:`zyntax.cuda.load_bundle` reads on the deployed machine, which then needs
only the NVIDIA driver. ``emit="cubin"`` writes a single cubin (one arch, no PTX).

Cubins are cached under ``$ZYNTAX_CACHE_DIR/cubin_cache/`` keyed like PTX
entries plus the ptxas version, so re-bundling unchanged kernels runs neither
LLVM's code generator for them twice nor ptxas. See docs/aot.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zyntax import _native, compiler, fatbin, ptxinfo
from zyntax.bundle import (
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    MAX_IMAGE_BYTES,
    _content_hash,
    is_manifest,
    refuse_to_replace,
)
from zyntax.errors import CompileError
from zyntax.log import logger, progress


@dataclass
class BundleResult:
    image: Path
    manifest: Path
    #: Archs with SASS in the image, and the arch of its PTX (None: no PTX).
    sass: list[str] = field(default_factory=list)
    ptx: str | None = None
    #: Per arch: kernel -> ptxas resources.
    resources: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def _arch_number(arch: str) -> int:
    return int(arch[3:].rstrip("a"))


def portable_ptx_arch(archs: Sequence[str]) -> str:
    """The arch whose PTX a bundle carries: the newest without the ``a`` suffix
    (``sm_90a`` PTX runs on sm_90 only), else the newest."""
    plain = [a for a in archs if not a.endswith("a")]
    return max(plain or list(archs), key=_arch_number)


def locate_ptxas() -> str:
    """The ptxas zyntax.validate_ptx uses, found and version-checked by the one locator
    (Rust, ``zyntax_llvm::Ptxas::locate``): ``$ZYNTAX_PTXAS`` (set but unusable is an
    error), CUDA 12's ``nvidia-cuda-nvcc-cu12`` and CUDA 13's ``nvidia-cuda-nvcc``
    packages of this interpreter, a CUDA toolkit, then ``PATH``. CompileError when no
    ptxas 12.x or 13.x is found."""
    from zyntax.compiler import _backend

    return str(_backend("ptxas_info")()["path"])


def ptxas_version(ptxas: str) -> str:
    """The ``release`` line of ``ptxas --version`` (``Cuda compilation tools, release 12.9,
    V12.9.86``); CompileError if ``ptxas`` is no file or not a release zyntax drives."""
    from zyntax.compiler import _backend

    return str(_backend("ptxas_info")(ptxas)["version"])


def ptxas_archs(ptxas: str | None = None) -> list[str]:
    """The archs ``ptxas`` (default: the located one) assembles for; CUDA 13's lacks sm_70."""
    from zyntax.compiler import _backend

    return [str(a) for a in _backend("ptxas_info")(ptxas)["archs"]]


def _cubin(ptx: str, arch: str, ptxas: str, key: str) -> tuple[bytes, str]:
    """(cubin, ptxas -v log) for ``ptx`` on ``arch``, from the cubin cache or ptxas.

    A cached cubin is used only if this cache signed it (zyntax.frontend.cache) and
    it was assembled from this very PTX; anything else is rebuilt."""
    from zyntax.frontend import cache

    ptx_sha256 = hashlib.sha256(ptx.encode()).hexdigest()
    hit = cache.load_blob("cubin_cache", key, ".cubin", MAX_IMAGE_BYTES)
    if hit is not None:
        blob, meta = hit
        if meta.get("ptx_sha256") == ptx_sha256 and meta.get("arch") == arch:
            logger.info("reused the %s cubin from the cache (key %s)", arch, key[:16])
            return blob, str(meta.get("log", ""))
        logger.warning("cache: cubin entry %s is of other PTX; rebuilding it", key[:16])
    res = compiler.validate_ptx(ptx, arch, ptxas)
    meta = {"arch": arch, "log": res.log, "ptx_sha256": ptx_sha256}
    cache.store_blob("cubin_cache", key, ".cubin", res.cubin, meta)
    return res.cubin, res.log


def _kernel_info(module: Any, name: str, ptx: str) -> dict[str, Any]:
    lay = ptxinfo.kernel_layout(module, name, ptx)
    mt = lay.get("max_threads")
    limit = 1024
    if isinstance(mt, list) and mt:
        limit = 1
        for x in mt:
            limit *= int(x)
    return {
        "params": lay["params"],
        "param_bytes": lay["param_bytes"],
        "max_threads": mt,
        "max_block_threads": limit,
        # The required block size (reqntid) is not recorded yet; kept explicit.
        "required_block": None,
        "cluster_dims": lay.get("cluster"),
        "grid_sync": lay.get("grid_sync", False),
        "min_blocks": lay.get("min_blocks"),
        "max_registers": lay.get("max_registers"),
        "dynamic_shared_bytes": lay.get("dynamic_shared_bytes") or 0,
        "static_shared_bytes": lay.get("static_shared_bytes") or 0,
        "resources": {},
    }


def manifest_path_for(output: str | Path) -> Path:
    """Where the manifest of the bundle image ``output`` goes: the same name with ``.json``."""
    return Path(output).with_suffix(".json")


def check_manifest_target(output: str | Path) -> None:
    """Raise ArgumentError if writing the manifest of ``output`` would replace a user's file
    (anything but a zyntax bundle manifest)."""
    refuse_to_replace(manifest_path_for(output), is_manifest, "a zyntax bundle manifest")


def build_bundle(
    module: Any,
    archs: Sequence[str],
    output: str | Path,
    *,
    emit: str = "fatbin",
    ptx: bool = True,
    ptx_version: str | None = None,
    opt_level: str | None = None,
    tuning: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> BundleResult:
    """Compile ``module`` for ``archs`` into ``output`` (a fatbin or cubin) plus its manifest.

    ``ptx=False`` leaves the PTX out (SASS only: no JIT fallback on other GPUs).
    ``tuning`` (kernel -> records, see :mod:`zyntax.autotune`) is shipped in the
    manifest so that a deployed machine never tunes. The manifest goes to
    ``output`` with ``.json``; a file there that is not a zyntax manifest raises
    ArgumentError (nothing written) unless ``overwrite=True``.
    """
    from zyntax.frontend import cache

    if emit not in ("fatbin", "cubin"):
        raise CompileError(f"unknown bundle kind {emit!r} (expected 'fatbin' or 'cubin')")
    archs = list(dict.fromkeys(archs))
    if not archs:
        raise CompileError("no arch given: name at least one (e.g. --arch sm_80)")
    for a in archs:
        if a not in cache.DEFAULT_PTX:
            raise CompileError(
                f"unknown arch {a!r}; expected one of {', '.join(cache.DEFAULT_PTX)}"
            )
    if emit == "cubin" and len(archs) != 1:
        raise CompileError(
            f"a cubin holds one arch, {len(archs)} were given; use emit='fatbin' for several"
        )
    if not module.kernels:
        raise CompileError(f"module {module.name} has no kernel to bundle")
    out = Path(output)
    if out.suffix == ".json":
        raise CompileError(f"{out}: the image needs a name of its own (the manifest is .json)")
    manifest_path = manifest_path_for(out)
    if not overwrite:
        check_manifest_target(out)
    zir = module.to_zir()
    version = str(_native.__version__)
    options: dict[str, Any] = {"opt_level": opt_level} if opt_level else {}

    ptx_texts: dict[str, str] = {}
    ptx_versions: dict[str, str] = {}
    cubins: dict[str, bytes] = {}
    resources: dict[str, dict[str, dict[str, int]]] = {}
    ptxas = locate_ptxas()
    ptxas_ver = ptxas_version(ptxas)
    for arch in progress(archs, total=len(archs), desc=f"zyntax: {module.name}"):
        res = compiler.compile_ptx(module, arch, ptx_version=ptx_version, opt_level=opt_level)
        ptx_texts[arch] = res.ptx
        ptx_versions[arch] = res.ptx_version
        key = cache.cache_key(zir, arch, res.ptx_version, version, options, ptxas_version=ptxas_ver)
        blob, log = _cubin(res.ptx, arch, ptxas, key)
        cubins[arch] = blob
        resources[arch] = ptxinfo.ptxas_resources(log)
        logger.info(
            "compiled %s for %s: %s",
            module.name,
            arch,
            ", ".join(f"{k} {r['registers']} regs" for k, r in resources[arch].items()),
        )

    ptx_arch = portable_ptx_arch(archs) if (ptx and emit == "fatbin") else None
    if emit == "fatbin":
        image = fatbin.build(
            cubins, {ptx_arch: ptx_texts[ptx_arch]} if ptx_arch else {}, name=module.name
        )
        nvfatbin = fatbin.version()
    else:
        image = cubins[archs[0]]
        nvfatbin = None

    layout_ptx = ptx_texts[ptx_arch or archs[-1]]
    kernels = {k: _kernel_info(module, k, layout_ptx) for k in module.kernels}
    for arch, per in resources.items():
        for k, r in per.items():
            if k in kernels:
                kernels[k]["resources"][arch] = r
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "module": module.name,
        "image": {
            "file": out.name,
            "kind": emit,
            "bytes": len(image),
            "sha256": hashlib.sha256(image).hexdigest(),
        },
        "sass": archs,
        "ptx": ptx_arch,
        "versions": {
            "zyntax": version,
            **cache.toolchain(),
            "ptx": ptx_versions,
            "ptxas": ptxas_ver,
            "nvfatbin": nvfatbin,
        },
        "hir_sha256": hashlib.sha256(zir.encode()).hexdigest(),
        "kernels": kernels,
        "tuning": tuning or {},
    }
    manifest["content_sha256"] = _content_hash(manifest)
    out.parent.mkdir(parents=True, exist_ok=True)
    cache._atomic_write(out, image)
    cache._atomic_write(manifest_path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    logger.info("wrote %s (%d bytes) and %s", out, len(image), manifest_path)
    return BundleResult(out, manifest_path, archs, ptx_arch, resources)
