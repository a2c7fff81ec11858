"""Fatbins: building them with NVIDIA's nvFatbin library, and reading their headers.

:func:`build` bundles cubins (SASS for one arch each) and PTX (JIT-compiled by
the driver on newer GPUs) into one fatbin with ``libnvfatbin`` (PyPI
``nvidia-nvfatbin-cu12``, part of the ``[compute]`` extra), opened at run time
through ``ctypes``: ``$ZYNTAX_NVFATBIN``, the ``nvidia.nvfatbin`` package of this
interpreter, then the system's ``libnvfatbin.so.12``.

:func:`parse` reads a fatbin's container format without any NVIDIA library (a
deployed machine needs only the driver): a 16-byte header (magic ``0xBA55ED50``,
version, header size, payload size) and one record per image, each with its
kind (PTX or ELF cubin), SM number, flags (bit 20: arch-specific, ``sm_90a``)
and payload size. It checks every size
against the buffer, so truncated or corrupted fatbins are reported, never read
past.
"""

from __future__ import annotations

import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zyntax.errors import CompileError

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")
# kind, version, header size, padded payload size, flags, payload size (then per-kind fields).
_ENTRY = struct.Struct("<HHIQII")
_ENTRY_ARCH_OFFSET = 28  # u32 SM number (e.g. 90) inside an entry header
_ENTRY_FLAGS_OFFSET = 40  # u64 flags; bit 20 marks arch-specific code (sm_90a)
_FLAG_ARCH_SPECIFIC = 1 << 20

KIND_PTX = 1
KIND_ELF = 2


class FatbinFormatError(ValueError):
    """The bytes are not a well-formed fatbin."""


@dataclass(frozen=True)
class FatbinImage:
    kind: str  # "ptx" or "cubin"
    arch: str  # e.g. "sm_90a"
    offset: int
    size: int


def parse(data: bytes) -> list[FatbinImage]:
    """The images in a fatbin (raises FatbinFormatError if it is malformed or truncated)."""
    if len(data) < _HEADER.size:
        raise FatbinFormatError(f"{len(data)} bytes is shorter than a fatbin header")
    magic, _version, hsize, fsize = _HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise FatbinFormatError(f"bad magic 0x{magic:08x} (a fatbin starts with 0x{MAGIC:08x})")
    if hsize < _HEADER.size or hsize + fsize > len(data):
        raise FatbinFormatError(
            f"header says {hsize} + {fsize} bytes, the file has {len(data)} (truncated?)"
        )
    out: list[FatbinImage] = []
    pos = hsize
    end = hsize + fsize
    while pos < end:
        if pos + _ENTRY_FLAGS_OFFSET + 8 > end:
            raise FatbinFormatError(f"entry at byte {pos} is cut short")
        kind, _ver, ehsize, padded, _flags, _size = _ENTRY.unpack_from(data, pos)
        (sm,) = struct.unpack_from("<I", data, pos + _ENTRY_ARCH_OFFSET)
        (flags,) = struct.unpack_from("<Q", data, pos + _ENTRY_FLAGS_OFFSET)
        arch = f"sm_{sm}" + ("a" if flags & _FLAG_ARCH_SPECIFIC else "")
        if kind not in (KIND_PTX, KIND_ELF):
            raise FatbinFormatError(f"entry at byte {pos} has unknown kind {kind}")
        if ehsize < _ENTRY_FLAGS_OFFSET + 8 or pos + ehsize + padded > end:
            raise FatbinFormatError(f"entry at byte {pos} runs past the end of the fatbin")
        out.append(FatbinImage("ptx" if kind == KIND_PTX else "cubin", arch, pos + ehsize, padded))
        pos += ehsize + padded
    if not out:
        raise FatbinFormatError("the fatbin holds no image")
    return out


# --------------------------------------------------------------------------- nvFatbin


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("ZYNTAX_NVFATBIN")
    if env:
        out.append(env)
    try:
        import nvidia.nvfatbin as pkg  # type: ignore[import-untyped]

        for d in list(pkg.__path__):
            out.append(str(Path(d) / "lib" / "libnvfatbin.so.12"))
    except ImportError:
        pass
    # The same package under this interpreter's prefix, even when `nvidia` is shadowed.
    out.append(
        str(
            Path(sys.prefix)
            / "lib"
            / f"python{sys.version_info[0]}.{sys.version_info[1]}"
            / "site-packages/nvidia/nvfatbin/lib/libnvfatbin.so.12"
        )
    )
    out.append("libnvfatbin.so.12")
    return out


# ctypes is imported only to build: loading a bundle needs parse() alone.
_lib: Any = None


def library() -> Any:
    """libnvfatbin (a ``ctypes.CDLL``), opened once; CompileError names every place tried."""
    import ctypes

    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for c in _candidates():
        if "/" in c and not os.path.isfile(c):
            tried.append(c)
            continue
        try:
            lib = ctypes.CDLL(c)
        except OSError:
            tried.append(c)
            continue
        lib.nvFatbinGetErrorString.restype = ctypes.c_char_p
        _lib = lib
        return lib
    raise CompileError(
        "nvFatbin not found (tried: "
        + ", ".join(tried)
        + "); install it with `pip install nvidia-nvfatbin-cu12` (the [compute] extra) "
        "or set ZYNTAX_NVFATBIN to libnvfatbin.so"
    )


def _check(lib: Any, rc: int, what: str) -> None:
    if rc != 0:
        msg = lib.nvFatbinGetErrorString(rc)
        raise CompileError(f"nvFatbin: {what}: {msg.decode() if msg else rc}")


def version() -> str:
    import ctypes

    lib = library()
    major, minor = ctypes.c_uint(), ctypes.c_uint()
    _check(lib, lib.nvFatbinVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
    return f"{major.value}.{minor.value}"


def _sm(arch: str) -> str:
    """``sm_90a`` -> ``90a`` (nvFatbin's arch spelling)."""
    if not arch.startswith("sm_"):
        raise CompileError(f"not an arch: {arch!r}")
    return arch[3:]


def build(cubins: dict[str, bytes], ptx: dict[str, str], name: str = "zyntax") -> bytes:
    """A fatbin holding ``cubins`` (arch -> cubin) and ``ptx`` (arch -> PTX text)."""
    import ctypes

    lib = library()
    handle = ctypes.c_void_p()
    opts = (ctypes.c_char_p * 1)(b"-64")
    _check(lib, lib.nvFatbinCreate(ctypes.byref(handle), opts, 1), "create")
    try:
        for arch, cubin in cubins.items():
            buf = ctypes.create_string_buffer(cubin, len(cubin))
            rc = lib.nvFatbinAddCubin(
                handle,
                buf,
                ctypes.c_size_t(len(cubin)),
                _sm(arch).encode(),
                f"{name}.{arch}".encode(),
            )
            _check(lib, rc, f"adding the {arch} cubin")
        for arch, text in ptx.items():
            data = text.encode() + b"\0"
            rc = lib.nvFatbinAddPTX(
                handle,
                ctypes.c_char_p(data),
                ctypes.c_size_t(len(data)),
                _sm(arch).encode(),
                f"{name}.{arch}.ptx".encode(),
                b"",
            )
            _check(lib, rc, f"adding the {arch} PTX")
        size = ctypes.c_size_t()
        _check(lib, lib.nvFatbinSize(handle, ctypes.byref(size)), "size")
        out = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvFatbinGet(handle, out), "get")
        return out.raw[: size.value]
    finally:
        lib.nvFatbinDestroy(ctypes.byref(handle))
