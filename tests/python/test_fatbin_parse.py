"""``zyntax.fatbin.parse`` is the Rust parser (``parse_fatbin`` of
crates/zyntax-cuda/src/bundle.rs, the native bundle loader's): records, payload
offsets and sizes of a fatbin laid out as nvFatbin writes one, and every
damaged fatbin a typed FatbinFormatError, never read past. (A real fatbin,
built with nvFatbin, is parsed in test_aot_bundle.py.)"""

from __future__ import annotations

import random
import struct

import pytest

import zyntax
from zyntax import _native, fatbin

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "cuda_parse_fatbin"), reason="extension built without the cuda feature"
)

ARCH_SPECIFIC = 1 << 20


def _fatbin(records: list[tuple[int, int, bool, bytes]]) -> bytes:
    """A fatbin of (kind 1 PTX / 2 ELF, SM number, arch-specific, payload),
    with nvFatbin's 64-byte record headers."""
    body = b""
    for kind, sm, specific, payload in records:
        head = bytearray(64)
        struct.pack_into("<HHIQ", head, 0, kind, 0x101, 64, len(payload))
        struct.pack_into("<I", head, 28, sm)
        struct.pack_into("<Q", head, 40, (ARCH_SPECIFIC if specific else 0) | 1)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def _payloads(rng: random.Random) -> list[bytes]:
    return [rng.randbytes(rng.randrange(8, 200)) for _ in range(3)]


def test_records_and_payloads() -> None:
    rng = random.Random()
    p = _payloads(rng)
    data = _fatbin([(2, 80, False, p[0]), (2, 90, True, p[1]), (1, 86, False, p[2])])
    images = fatbin.parse(data)
    assert [(i.kind, i.arch) for i in images] == [
        ("cubin", "sm_80"),
        ("cubin", "sm_90a"),
        ("ptx", "sm_86"),
    ]
    assert [data[i.offset : i.offset + i.size] for i in images] == p
    assert fatbin.parse(bytearray(data)) == images


def test_damaged_fatbins_are_typed_errors() -> None:
    rng = random.Random()
    data = _fatbin([(2, 80, False, rng.randbytes(40)), (1, 80, False, rng.randbytes(24))])
    for n in range(len(data)):
        with pytest.raises(fatbin.FatbinFormatError):
            fatbin.parse(data[:n])
    with pytest.raises(fatbin.FatbinFormatError, match="truncated"):
        fatbin.parse(data[: len(data) // 2])
    with pytest.raises(fatbin.FatbinFormatError, match="bad magic 0x00000000"):
        fatbin.parse(b"\0" * 64)
    bad_kind = bytearray(data)
    bad_kind[16] = 9
    with pytest.raises(fatbin.FatbinFormatError, match="entry at byte 16 has unknown kind 9"):
        fatbin.parse(bytes(bad_kind))
    too_long = bytearray(data)
    struct.pack_into("<Q", too_long, 16 + 8, 1 << 40)
    with pytest.raises(fatbin.FatbinFormatError, match="entry at byte 16 runs past the end"):
        fatbin.parse(bytes(too_long))
    with pytest.raises(fatbin.FatbinFormatError, match="no image"):
        fatbin.parse(_fatbin([]))
    with pytest.raises(fatbin.FatbinFormatError, match="not str"):
        fatbin.parse("fatbin")  # type: ignore[arg-type]
    # Every header byte flipped: parsed or refused, what is parsed lies inside.
    for i in range(16 + 64):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        try:
            images = fatbin.parse(bytes(flipped))
        except fatbin.FatbinFormatError:
            continue
        assert all(im.offset + im.size <= len(data) for im in images)


def test_the_error_is_a_zyntax_error() -> None:
    assert issubclass(fatbin.FatbinFormatError, zyntax.ArgumentError)
    assert issubclass(fatbin.FatbinFormatError, ValueError)
    with pytest.raises(zyntax.ZyntaxError):
        fatbin.parse(b"")


def test_bundle_image_rules_are_the_native_loaders() -> None:
    """zyntax.bundle.runs_on/choose are zyntax-cuda's rules (the native
    bundle loader's): SASS same major and an equal or lower minor, PTX equal
    or older, `a` code on its own arch only."""
    from zyntax import bundle

    assert bundle.runs_on("sm_86", (8, 9), "cubin") and not bundle.runs_on("sm_86", (9, 0), "cubin")
    assert bundle.runs_on("sm_86", (9, 0), "ptx") and not bundle.runs_on("sm_90", (8, 9), "ptx")
    assert bundle.runs_on("sm_90a", (9, 0), "ptx") and not bundle.runs_on("sm_90a", (10, 0), "ptx")
    assert not bundle.runs_on("compute_80", (9, 0), "ptx")  # not an arch: runs nowhere
    assert bundle.choose(["sm_80", "sm_86", "sm_90"], "sm_90", (8, 9)) == ("sass", "sm_86")
    assert bundle.choose(["sm_90", "sm_90a"], None, (9, 0)) == ("sass", "sm_90a")
    assert bundle.choose(["sm_90a"], "sm_90", (10, 0)) == ("ptx", "sm_90")
    with pytest.raises(zyntax.ArgumentError):
        bundle.choose(["sm_80"], None, (-1, 0))
