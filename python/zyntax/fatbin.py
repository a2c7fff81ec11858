"""Fatbins: building them with NVIDIA's nvFatbin library, and reading their headers.

:func:`build` bundles cubins (SASS for one arch each) and PTX (JIT-compiled by
the driver on newer GPUs) into one fatbin with ``libnvfatbin`` 12.x or 13.x,
opened at run time through ``ctypes`` (:func:`find`): ``$ZYNTAX_NVFATBIN``, the
``nvidia-nvfatbin-cu12`` wheel (the ``[compute]`` extra) or CUDA 13's
``nvidia-nvfatbin`` of this interpreter, a CUDA toolkit, then the system's
``libnvfatbin.so.12`` / ``.13``. Its release is checked (``nvFatbinVersion``).

:func:`parse` reads a fatbin's container format without any NVIDIA library (a
deployed machine needs only the driver) through zyntax's one fatbin parser,
``parse_fatbin`` of ``crates/zyntax-cuda/src/bundle.rs`` (which the native
bundle loader uses too): a 16-byte header (magic ``0xBA55ED50``, version,
header size, payload size) and one record per image, each with its kind (PTX
or ELF cubin), SM number, flags (bit 20: arch-specific, ``sm_90a``) and
payload size. It checks every size against the buffer, so truncated or
corrupted fatbins are reported, never read past. Building stays here, in
Python: the Rust crates have no nvFatbin binding.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zyntax import _native
from zyntax.errors import ArgumentError, CompileError


class FatbinFormatError(ArgumentError, ValueError):
    """The bytes are not a well-formed fatbin."""


@dataclass(frozen=True)
class FatbinImage:
    kind: str  # "ptx" or "cubin"
    arch: str  # e.g. "sm_90a"
    offset: int
    size: int


def parse(data: bytes) -> list[FatbinImage]:
    """The images in a fatbin (raises FatbinFormatError if it is malformed or truncated)."""
    native = getattr(_native, "cuda_parse_fatbin", None)
    if native is None:
        raise CompileError("this build of zyntax has no CUDA runtime (built without `cuda`)")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise FatbinFormatError(f"a fatbin is bytes, not {type(data).__name__}")
    try:
        images = native(bytes(data))
    except ArgumentError as e:
        raise FatbinFormatError(str(e)) from None
    return [FatbinImage(kind, arch, offset, size) for kind, arch, offset, size in images]


# --------------------------------------------------------------------------- nvFatbin

#: The nvFatbin major releases zyntax drives: it calls only functions both have
#: (Create, AddPTX, AddCubin, Size, Get, Destroy, Version, GetErrorString),
#: whose prototypes are the same in the 12.x and 13.x ``nvFatbin.h``.
SUPPORTED_MAJORS = (12, 13)

INSTALL_HINT = (
    "install it with `pip install 'zyntax-compiler[compute]'` (nvFatbin 12), "
    "`pip install nvidia-nvfatbin` (13), a CUDA toolkit, or set ZYNTAX_NVFATBIN to libnvfatbin.so"
)


def _candidates() -> list[str]:
    """Where nvFatbin may be, in order: the wheels of this interpreter (CUDA 12's
    ``nvidia-nvfatbin-cu12`` first, then CUDA 13's ``nvidia-nvfatbin``, which
    installs under ``nvidia/cu13``), a CUDA toolkit, then the system loader."""
    import importlib

    out = []
    wheels = (("nvidia.nvfatbin", "libnvfatbin.so.12"), ("nvidia.cu13", "libnvfatbin.so.13"))
    for package, soname in wheels:
        try:
            dirs = list(importlib.import_module(package).__path__)
        except ImportError:
            continue
        out += [str(Path(d) / "lib" / soname) for d in dirs]
    # The same wheels under this interpreter's prefix, even when `nvidia` is shadowed.
    site = (
        Path(sys.prefix)
        / "lib"
        / f"python{sys.version_info[0]}.{sys.version_info[1]}"
        / "site-packages/nvidia"
    )
    out += [str(site / "nvfatbin/lib/libnvfatbin.so.12"), str(site / "cu13/lib/libnvfatbin.so.13")]
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    for root in filter(None, roots):
        out += [str(Path(root) / "lib64" / f"libnvfatbin.so.{m}") for m in SUPPORTED_MAJORS]
    out += [f"libnvfatbin.so.{m}" for m in SUPPORTED_MAJORS]
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Nvfatbin:
    """An opened nvFatbin of a supported release."""

    lib: Any  # ctypes.CDLL with every prototype set
    path: str
    major: int
    minor: int


class _Unusable(Exception):
    """This candidate is not an nvFatbin zyntax can drive (the message says why)."""


def _open(path: str) -> Nvfatbin:
    """Opens ``path``, sets the prototypes of ``nvFatbin.h`` and checks the release."""
    import ctypes
    from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_void_p

    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise _Unusable(f"cannot be loaded: {e}") from None
    # nvFatbinResult is a C enum (int); nvFatbinHandle an opaque pointer; sizes are size_t.
    prototypes: dict[str, tuple[Any, list[Any]]] = {
        "nvFatbinGetErrorString": (c_char_p, [c_int]),
        "nvFatbinCreate": (c_int, [POINTER(c_void_p), POINTER(c_char_p), c_size_t]),
        "nvFatbinDestroy": (c_int, [POINTER(c_void_p)]),
        "nvFatbinAddPTX": (c_int, [c_void_p, c_char_p, c_size_t, c_char_p, c_char_p, c_char_p]),
        "nvFatbinAddCubin": (c_int, [c_void_p, c_void_p, c_size_t, c_char_p, c_char_p]),
        "nvFatbinSize": (c_int, [c_void_p, POINTER(c_size_t)]),
        "nvFatbinGet": (c_int, [c_void_p, c_void_p]),
        "nvFatbinVersion": (c_int, [POINTER(c_uint), POINTER(c_uint)]),
    }
    for name, (restype, argtypes) in prototypes.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise _Unusable(f"has no {name} (not nvFatbin?)") from None
        fn.restype, fn.argtypes = restype, argtypes
    major, minor = c_uint(), c_uint()
    if lib.nvFatbinVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        raise _Unusable("nvFatbinVersion failed")
    if major.value not in SUPPORTED_MAJORS:
        raise _Unusable(
            f"is nvFatbin {major.value}.{minor.value}; zyntax drives nvFatbin "
            + " or ".join(f"{m}.x" for m in SUPPORTED_MAJORS)
        )
    return Nvfatbin(lib, path, major.value, minor.value)


# ctypes is imported only to build: loading a bundle needs parse() alone.
_found: Nvfatbin | None = None


def find() -> Nvfatbin:
    """nvFatbin, opened once: ``$ZYNTAX_NVFATBIN`` (used or refused, never passed
    over), else the first supported one of :func:`_candidates`. CompileError names
    every place tried and why each was passed over."""
    global _found
    if _found is not None:
        return _found
    env = os.environ.get("ZYNTAX_NVFATBIN")
    if env:
        if not os.path.isfile(env):
            raise CompileError(
                f"$ZYNTAX_NVFATBIN={env} is not a file; point it at libnvfatbin.so or unset it"
            )
        try:
            _found = _open(env)
        except _Unusable as e:
            raise CompileError(f"$ZYNTAX_NVFATBIN={env} {e}") from None
        return _found
    tried = []
    for c in _candidates():
        if "/" in c and not os.path.isfile(c):
            tried.append(c)
            continue
        try:
            _found = _open(c)
            return _found
        except _Unusable as e:
            tried.append(f"{c} ({e})")
    raise CompileError(f"nvFatbin not found (tried: {', '.join(tried)}); {INSTALL_HINT}")


def library() -> Any:
    """libnvfatbin (a ``ctypes.CDLL`` with its prototypes set); see :func:`find`."""
    return find().lib


def _check(lib: Any, rc: int, what: str) -> None:
    if rc != 0:
        msg = lib.nvFatbinGetErrorString(rc)
        raise CompileError(f"nvFatbin: {what}: {msg.decode() if msg else rc}")


def version() -> str:
    """The release of the nvFatbin :func:`find` opened, e.g. ``"13.0"``."""
    nv = find()
    return f"{nv.major}.{nv.minor}"


def _sm(arch: str) -> str:
    """``sm_90a`` -> ``90a`` (nvFatbin's arch spelling)."""
    if not arch.startswith("sm_") or not arch[3:].rstrip("a").isdigit():
        raise CompileError(f"not an arch: {arch!r}")
    return arch[3:]


def build(cubins: dict[str, bytes], ptx: dict[str, str], name: str = "zyntax") -> bytes:
    """A fatbin holding ``cubins`` (arch -> cubin) and ``ptx`` (arch -> PTX text)."""
    import ctypes

    for arch, cubin in cubins.items():
        if not isinstance(cubin, bytes) or not cubin:
            raise CompileError(f"the {arch} cubin is {type(cubin).__name__}, not non-empty bytes")
    for arch, text in ptx.items():
        if not isinstance(text, str) or "\0" in text:
            raise CompileError(f"the {arch} PTX is not text without NUL bytes")
    lib = find().lib
    # nvFatbin may hold on to the buffers and strings it is given until the
    # fatbin is written out; every one stays referenced here until Destroy.
    keep: list[bytes] = []

    def c_str(s: str) -> bytes:
        keep.append(s.encode())
        return keep[-1]

    handle = ctypes.c_void_p()
    opts = (ctypes.c_char_p * 1)(c_str("-64"))
    _check(lib, lib.nvFatbinCreate(ctypes.byref(handle), opts, 1), "create")
    try:
        for arch, cubin in cubins.items():
            keep.append(cubin)
            rc = lib.nvFatbinAddCubin(
                handle, cubin, len(cubin), c_str(_sm(arch)), c_str(f"{name}.{arch}")
            )
            _check(lib, rc, f"adding the {arch} cubin")
        for arch, text in ptx.items():
            data = c_str(text + "\0")
            rc = lib.nvFatbinAddPTX(
                handle, data, len(data), c_str(_sm(arch)), c_str(f"{name}.{arch}.ptx"), c_str("")
            )
            _check(lib, rc, f"adding the {arch} PTX")
        size = ctypes.c_size_t()
        _check(lib, lib.nvFatbinSize(handle, ctypes.byref(size)), "size")
        out = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvFatbinGet(handle, out), "get")
        return out.raw[: size.value]
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))
