"""Ahead-of-time compilation of the fully annotated kernels in a Python file.

``zyntax compile --backend nvptx kernels.py`` routes here: every
``@zyntax.kernel`` in the file whose parameters all carry zyntax type
annotations is translated and compiled to PTX. Kernels without full
annotations cannot be specialised ahead of time and are reported as skipped.

Output: for each kernel ``<out>/<kernel>.ptx`` plus ``<out>/<kernel>.json``
(kernel name, parameter layout, arch, PTX version, source, signature), or with
``cache_layout=True`` the content-addressed ``<key>.ptx`` / ``<key>.json`` of
``ptx_cache/``. When ``out`` names a ``.ptx`` file and the file holds exactly
one compilable kernel, the PTX is written there (metadata beside it). A
``.json`` already where the metadata goes that zyntax did not write is the
user's: refused (ArgumentError, nothing written) unless ``overwrite=True``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zyntax import targets
from zyntax.bundle import refuse_to_replace
from zyntax.frontend import pipeline
from zyntax.frontend.errors import KernelError
from zyntax.frontend.kernel import Kernel


@dataclass
class AotResult:
    written: list[Path] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    #: (kernel name, why it was skipped)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Per compiled kernel, what the tiler did with its prange nests (docs/tiling.md).
    tiling: dict[str, list[str]] = field(default_factory=dict)


def load_kernels(path: str | Path) -> list[Kernel]:
    """Import a Python file and return its kernels in definition order."""
    p = Path(path).resolve()
    if not p.is_file():
        raise KernelError(f"no such file: {p}")
    name = "zyntax_aot_" + hashlib.sha256(str(p).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise KernelError(f"cannot import {p} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except KernelError:
        raise
    except SystemExit as e:
        # A script's `sys.exit(0)` must not end the compiler with "success".
        raise KernelError(
            f"{p} called sys.exit({e.code!r}) while being imported: no kernel was compiled"
        ) from e
    except Exception as e:
        raise KernelError(f"importing {p} failed: {type(e).__name__}: {e}") from e
    seen: set[int] = set()
    out: list[Kernel] = []
    for obj in vars(mod).values():
        if isinstance(obj, Kernel) and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    return out


def _is_kernel_metadata(data: Any) -> bool:
    """Whether parsed JSON is the metadata :func:`compile_file` writes beside a PTX file."""
    return (
        isinstance(data, dict)
        and isinstance(data.get("zyntax_version"), str)
        and isinstance(data.get("kernels"), list)
        and isinstance(data.get("launch"), dict)
    )


def compile_file(
    path: str | Path,
    arch: str,
    out: str | Path,
    *,
    cache_layout: bool = False,
    overwrite: bool = False,
) -> AotResult:
    """Compile every fully annotated kernel of ``path`` to PTX for ``arch`` into ``out``.

    A ``.json`` where metadata goes that is not zyntax's kernel metadata raises
    ArgumentError before anything is written, unless ``overwrite=True``.
    """
    arch = pipeline.resolve_arch(arch)
    kernels = load_kernels(path)
    res = AotResult()
    compiled: list[tuple[Kernel, str, dict[str, object], str]] = []
    for k in kernels:
        specs = k.signature_specs()
        if specs is None:
            res.skipped.append((k.__name__, "not every parameter has a zyntax type annotation"))
            continue
        v = k.variant(tuple(specs))
        ptx = pipeline.ptx_for(v, arch)
        meta: dict[str, object] = dict(
            v.metadata(),
            arch=arch,
            ptx_version=targets.DEFAULT_PTX[arch],
            zyntax_version=pipeline.zyntax_version(),
            source=f"{Path(path).name}:{k.source().tree.lineno + k.source().line_offset}",
        )
        compiled.append((k, ptx, meta, pipeline.cache_key(v, arch)))
        res.kernels.append(k.__name__)
        res.tiling[k.__name__] = list(v.tiling_report)
    if not compiled:
        raise KernelError(
            f"{path}: no fully annotated @zyntax.kernel to compile"
            + "".join(f"\n  skipped {n}: {why}" for n, why in res.skipped)
        )
    target = Path(out)
    # (PTX path, PTX, metadata path, metadata), all decided before anything is written.
    files: list[tuple[Path, str, Path, dict[str, object]]] = []
    if target.suffix == ".ptx":
        if len(compiled) != 1:
            raise KernelError(
                f"{path} holds {len(compiled)} kernels; give a directory as the output"
            )
        _, ptx, meta, _ = compiled[0]
        files.append((target, ptx, target.with_suffix(".json"), meta))
    else:
        for k, ptx, meta, key in compiled:
            stem = key if cache_layout else k.__name__
            meta_out = dict(meta, key=key, ptx_sha256=hashlib.sha256(ptx.encode()).hexdigest())
            files.append((target / f"{stem}.ptx", ptx, target / f"{stem}.json", meta_out))
    if not overwrite:
        for _, _, meta_path, _ in files:
            refuse_to_replace(meta_path, _is_kernel_metadata, "zyntax kernel metadata")
    for ptx_path, ptx, meta_path, meta in files:
        ptx_path.parent.mkdir(parents=True, exist_ok=True)
        ptx_path.write_text(ptx)
        meta_path.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        res.written += [ptx_path, meta_path]
    return res


def main(argv: list[str] | None = None) -> int:
    """``python -m zyntax.frontend.aot kernels.py --arch sm_80 -o out/``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m zyntax.frontend.aot")
    ap.add_argument("file")
    ap.add_argument("--arch", default=targets.DEFAULT_ARCH)
    ap.add_argument("-o", "--out", default=".")
    ap.add_argument("--cache-layout", action="store_true")
    ap.add_argument("--force", action="store_true", help="replace a .json zyntax did not write")
    a = ap.parse_args(argv)
    try:
        r = compile_file(a.file, a.arch, a.out, cache_layout=a.cache_layout, overwrite=a.force)
    except Exception as e:  # one clear message, no backtrace
        print(f"zyntax: {e}", file=sys.stderr)
        return 1
    for p in r.written:
        print(p)
    for n, why in r.skipped:
        print(f"skipped {n}: {why}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
