"""No forged code runs (issue 29, item 2).

The cache key is computable from public inputs, so a file planted under a real
key must not be used: entries carry the MAC of the cache that wrote them, the
cache directory must be this user's and private, and ``zyntax cache import``
re-derives (PTX), validates (tuning records) or refuses (cubins, anything else)
every archive member, importing all or nothing.

Each attack is played against a real cache in ``tmp_path``: a forged PTX entry
of the same kernel with another body (key and digests rewritten), an entry
copied from another cache, a cubin of another kernel planted under the real
key, forged and malformed tuning records, and archives with odd names,
oversize members, links, devices, FIFOs and path traversal
(``tests/fuzz_corpus/cache_import_*.tar.gz`` too).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import stat
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import zyntax
from zyntax import Array, aot, cache_archive, commands, compiler, f32, hir, i32, tuning
from zyntax.frontend import cache, pipeline

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz_corpus"
ARCH = "sm_80"


def _scale(factor: str) -> Any:
    """A fresh ``scale`` kernel (nothing memoised); ``factor`` picks its body, not its
    name or signature, so both bodies have the same ``.entry`` and parameters."""
    if factor == "2":

        @zyntax.kernel
        def scale(x: Array[f32, 1], n: i32) -> None:
            i = zyntax.lang.grid(1)
            if i < n:
                x[i] = x[i] * 2.0

    else:

        @zyntax.kernel
        def scale(x: Array[f32, 1], n: i32) -> None:
            i = zyntax.lang.grid(1)
            if i < n:
                x[i] = x[i] * 3.0

    return scale


def _variant(factor: str = "2") -> Any:
    k = _scale(factor)
    specs = k.signature_specs()
    assert specs is not None
    return k.variant(tuple(specs))


def _fresh_ptx(v: Any) -> str:
    """What the compiler makes of the variant's HIR, bypassing every cache."""
    return str(zyntax.compile_ptx(hir.parse_zir(v.hir_text, "k.zir"), ARCH).ptx)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    r = tmp_path / "cache"
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(r))
    monkeypatch.delenv("ZYNTAX_CACHE", raising=False)
    cache._warned.clear()
    return r


def _forge(d: Path, key: str, ptx: str) -> None:
    """Plant ``ptx`` under ``key``: the PTX replaced, its digest rewritten, the key and
    everything else (the genuine entry's MAC included) kept."""
    meta = json.loads((d / f"{key}.json").read_text())
    (d / f"{key}.ptx").write_text(ptx)
    meta["ptx_sha256"] = hashlib.sha256(ptx.encode()).hexdigest()
    (d / f"{key}.json").write_text(json.dumps(meta))


# --------------------------------------------------------------------------- PTX entries


def test_forged_ptx_of_the_same_kernel_is_not_loaded(root: Path) -> None:
    v = _variant("2")
    genuine = pipeline.ptx_for(v, ARCH)
    key = pipeline.cache_key(v, ARCH)
    forged = pipeline.ptx_for(_variant("3"), ARCH)
    # Same kernel name and parameters: the old checks (digest, kernels, HIR signature) pass.
    assert forged != genuine and cache.ptx_entries(forged) == cache.ptx_entries(genuine)
    _forge(root / "ptx_cache", key, forged)
    got = pipeline.ptx_for(_variant("2"), ARCH)
    assert got == genuine == _fresh_ptx(v)
    # The rebuilt entry is signed again and loads.
    hit = cache.load(key, expect={v.kernel_name: v.param_types})
    assert hit is not None and hit[0] == genuine


def test_entry_copied_from_another_cache_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(a))
    v = _variant()
    genuine = pipeline.ptx_for(v, ARCH)
    key = pipeline.cache_key(v, ARCH)
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(b))
    pipeline.ptx_for(_variant(), ARCH)  # b exists, with its own key
    for suffix in (".ptx", ".json", ".zir"):
        (b / "ptx_cache" / f"{key}{suffix}").write_bytes(
            (a / "ptx_cache" / f"{key}{suffix}").read_bytes()
        )
    with caplog.at_level(logging.INFO, logger="zyntax"):
        assert pipeline.ptx_for(_variant(), ARCH) == genuine
    msgs = [r.getMessage() for r in caplog.records]
    assert any("not signed by this cache" in m for m in msgs), msgs
    assert any(m.startswith("compiled scale") for m in msgs), msgs
    assert not any(m.startswith("reused scale") for m in msgs)


def test_new_cache_folders_and_key_are_private(root: Path) -> None:
    pipeline.ptx_for(_variant(), ARCH)
    for d in (root, root / "ptx_cache"):
        assert stat.S_IMODE(os.lstat(d).st_mode) & 0o077 == 0, d
    key = root / cache.SECRET_NAME
    st = os.lstat(key)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_size == cache.SECRET_BYTES and st.st_uid == os.getuid()


# --------------------------------------------------------------------------- untrusted folders


def _plant_forged_entry(root: Path) -> str:
    """A genuine entry rewritten to the other body's PTX; returns the genuine PTX."""
    v = _variant("2")
    genuine = pipeline.ptx_for(v, ARCH)
    key = pipeline.cache_key(v, ARCH)
    _forge(root / "ptx_cache", key, pipeline.ptx_for(_variant("3"), ARCH))
    return genuine


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


def _world_writable(root: Path) -> None:
    os.chmod(root, 0o777)


def _group_writable_subfolder(root: Path) -> None:
    os.chmod(root / "ptx_cache", 0o770)


def _world_readable_key(root: Path) -> None:
    os.chmod(root / cache.SECRET_NAME, 0o644)


def _symlinked_key(root: Path) -> None:
    k = root / cache.SECRET_NAME
    data = k.read_bytes()
    k.unlink()
    (root.parent / "elsewhere.key").write_bytes(data)
    os.chmod(root.parent / "elsewhere.key", 0o600)
    k.symlink_to(root.parent / "elsewhere.key")


UNTRUSTED: dict[str, Callable[[Path], None]] = {
    "world_writable_root": _world_writable,
    "group_writable_subfolder": _group_writable_subfolder,
    "world_readable_key": _world_readable_key,
    "symlinked_key": _symlinked_key,
}


@pytest.mark.parametrize("kind", sorted(UNTRUSTED))
def test_untrusted_cache_is_not_used(
    root: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    genuine = _plant_forged_entry(root)
    UNTRUSTED[kind](root)
    before = _files(root / "ptx_cache")
    with caplog.at_level(logging.WARNING, logger="zyntax"):
        for _ in range(2):
            assert pipeline.ptx_for(_variant("2"), ARCH) == genuine
    # Compiled without the cache: nothing loaded, nothing written, one warning.
    assert _files(root / "ptx_cache") == before
    warnings = [r.getMessage() for r in caplog.records if "not using" in r.getMessage()]
    assert len(warnings) == 1, warnings
    # The cache commands refuse it with a typed error instead.
    with pytest.raises(cache.UntrustedCacheError):
        cache.inspect()
    assert commands.cache_command(["list"]) == 1


def test_symlinked_subfolder_is_neither_read_nor_written(root: Path, tmp_path: Path) -> None:
    genuine = _plant_forged_entry(root)
    target = tmp_path / "planted"
    (root / "ptx_cache").rename(target)
    (root / "ptx_cache").symlink_to(target)
    before = _files(target)
    assert pipeline.ptx_for(_variant("2"), ARCH) == genuine
    assert _files(target) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")
def test_cache_of_another_user_is_not_used(root: Path) -> None:
    genuine = _plant_forged_entry(root)
    os.chown(root, 12345, 12345)
    assert pipeline.ptx_for(_variant("2"), ARCH) == genuine
    with pytest.raises(cache.UntrustedCacheError, match="owned by uid 12345"):
        cache.inspect()


# --------------------------------------------------------------------------- cubins


def test_planted_cubin_under_the_real_key_is_not_used(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = hir.parse_zir((ROOT / "examples" / "saxpy.zir").read_text(), "saxpy.zir")
    ptx = zyntax.compile_ptx(m, ARCH).ptx
    ptxas: Any = None  # validate_ptx finds it (the key is opaque to the cubin cache)
    key = "c" * 64
    other = hir.parse_zir((ROOT / "examples" / "reduce_sum.zir").read_text(), "r.zir")
    planted = zyntax.validate_ptx(zyntax.compile_ptx(other, ARCH).ptx, ARCH, ptxas).cubin
    genuine = zyntax.validate_ptx(ptx, ARCH, ptxas).cubin
    assert planted != genuine
    d = root / "cubin_cache"
    d.mkdir(parents=True, mode=0o700)
    (d / f"{key}.cubin").write_bytes(planted)
    meta = {
        "key": key,
        "arch": ARCH,
        "log": "",
        "cubin_sha256": hashlib.sha256(planted).hexdigest(),
        "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest(),
    }
    (d / f"{key}.json").write_text(json.dumps(meta))
    real = compiler.validate_ptx
    runs: list[str] = []

    def counted(text: str, arch: str, path: str | None) -> Any:
        runs.append(text)
        return real(text, arch, path)

    monkeypatch.setattr(compiler, "validate_ptx", counted)
    blob, _ = aot._cubin(ptx, ARCH, ptxas, key)
    assert blob == genuine and runs == [ptx]
    # The rebuilt cubin is signed: the next bundle reuses it without ptxas ...
    assert aot._cubin(ptx, ARCH, ptxas, key)[0] == genuine and runs == [ptx]
    # ... but not for other PTX under the same key.
    edited = ptx.replace("ret;", "exit;", 1)
    assert aot._cubin(edited, ARCH, ptxas, key)[0] == real(edited, ARCH, ptxas).cubin
    assert runs == [ptx, edited]


# --------------------------------------------------------------------------- tuning records

CONFIGS = [tuning.Config(block=b) for b in (32, 64)]
KERNEL_HASH = "e" * 64


def _tune() -> tuple[tuning.Config, tuning.TuneReport]:
    def never(*_: Any) -> Any:
        raise AssertionError("ZYNTAX_AUTOTUNE=0 must not compile or measure")

    return tuning.tune(
        kernel="k",
        kernel_hash=KERNEL_HASH,
        configs=CONFIGS,
        key_values={"n": 10},
        arch=ARCH,
        version="1",
        prepare=never,
        arg_sets=never,
        warmup=1,
        reps=1,
        limits=never,
        min_occupancy_ratio=0.25,
    )


def _record(**changes: Any) -> dict[str, Any]:
    b = tuning.bucket({"n": 10})
    rec: dict[str, Any] = {
        "bucket": b,
        "arch": ARCH,
        "version": "1",
        "kernel": "k",
        "times_ms": {"block=32": 0.5, "block=64": 0.25},
        "pruned": {},
        "failed": {},
        "best": "block=64",
        "complete": True,
        "configs": {c.name(): c.as_dict() for c in CONFIGS},
        "seconds": 1.5,
    }
    rec.update(changes)
    return {
        "version": tuning.DB_VERSION,
        "kernel": "k",
        "records": {tuning.record_key(b, ARCH, "1"): rec},
    }


def test_signed_tuning_record_is_used(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_AUTOTUNE", "0")
    tuning.save_db(KERNEL_HASH, _record())
    assert tuning.load_db(KERNEL_HASH) == _record()
    cfg, rep = _tune()
    assert cfg == CONFIGS[1] and rep.source == "database" and rep.times_ms["block=64"] == 0.25


def test_forged_tuning_record_is_not_used(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_AUTOTUNE", "0")
    d = root / "autotune"
    d.mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    (d / f"{KERNEL_HASH}.json").write_text(json.dumps(_record()))
    cfg, rep = _tune()
    assert cfg == CONFIGS[0] and rep.source == "default"


MALFORMED: dict[str, dict[str, Any]] = {
    "best_is_a_list": _record(best=["block=64"]),
    "best_not_measured": _record(best="block=32", times_ms={"block=64": 0.1}),
    "time_is_text": _record(times_ms={"block=64": "fast"}),
    "time_is_nan": _record(times_ms={"block=64": float("nan")}),
    "config_block_is_text": _record(configs={"block=64": {"block": "64"}}),
    "config_under_another_name": _record(
        configs={"block=64": {"block": 1024}, "block=32": {"block": 32}}
    ),
    "unknown_record_field": _record(exec="rm -rf /"),
    "huge_reason": _record(failed={"block=32": "x" * (tuning.MAX_TEXT + 1)}),
    "record_under_another_key": {
        **_record(),
        "records": {"n=1|sm_80|1": next(iter(_record()["records"].values()))},
    },
    "records_not_an_object": {"version": tuning.DB_VERSION, "records": [1, 2]},
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_tuning_record_is_ignored(
    root: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Signed (so only the schema can catch it) yet malformed: ignored, never a crash."""
    monkeypatch.setenv("ZYNTAX_AUTOTUNE", "0")
    tuning.save_db(KERNEL_HASH, MALFORMED[kind])
    assert tuning.load_db(KERNEL_HASH)["records"] == {}
    cfg, rep = _tune()
    assert cfg == CONFIGS[0] and rep.source == "default"
    with pytest.raises(zyntax.ZyntaxError):
        tuning.check_db(MALFORMED[kind])


# --------------------------------------------------------------------------- import


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        out = {}
        for m in tar:
            f = tar.extractfile(m)
            assert f is not None
            out[m.name] = f.read()
        return out


def _write(archive: Path, members: dict[str, bytes], extra: Sequence[tarfile.TarInfo] = ()) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.size else None)
    return archive


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    """An archive of a real cache: one PTX entry and one tuning file; (archive, key, PTX)."""
    a = tmp_path / "a"
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(a))
    v = _variant()
    ptx = pipeline.ptx_for(v, ARCH)
    tuning.save_db(KERNEL_HASH, _record())
    archive = tmp_path / "warm.tar.gz"
    assert commands.cache_command(["export", str(archive)]) == 0
    assert sorted(_members(archive)) == sorted(
        [f"ptx_cache/{pipeline.cache_key(v, ARCH)}{s}" for s in (".json", ".ptx", ".zir")]
        + [f"autotune/{KERNEL_HASH}.json"]
    )
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "b"))
    cache._warned.clear()
    return archive, pipeline.cache_key(v, ARCH), ptx


def _imported_nothing(tmp_path: Path) -> bool:
    b = tmp_path / "b"
    return not list(b.glob("ptx_cache/*")) and not list(b.glob("autotune/*"))


def test_import_round_trip(
    exported: tuple[Path, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    archive, _, ptx = exported
    assert commands.cache_command(["import", str(archive)]) == 0
    assert "imported 1 entries and 1 tuning files" in capsys.readouterr().out
    with caplog.at_level(logging.INFO, logger="zyntax"):
        assert pipeline.ptx_for(_variant(), ARCH) == ptx
    assert any(r.getMessage().startswith("reused scale") for r in caplog.records)
    monkeypatch.setenv("ZYNTAX_AUTOTUNE", "0")
    cfg, rep = _tune()
    assert cfg == CONFIGS[1] and rep.source == "database"
    assert commands.cache_command(["verify"]) == 0


def _rewrite(
    exported: tuple[Path, str, str], tmp_path: Path, edit: Callable[[dict[str, bytes], str], None]
) -> Path:
    archive, key, _ = exported
    members = _members(archive)
    edit(members, key)
    return _write(tmp_path / "evil.tar.gz", members)


def _forged_ptx(m: dict[str, bytes], key: str) -> None:
    forged = _fresh_ptx(_variant("3")).encode()
    meta = json.loads(m[f"ptx_cache/{key}.json"])
    meta["ptx_sha256"] = hashlib.sha256(forged).hexdigest()
    m[f"ptx_cache/{key}.ptx"] = forged
    m[f"ptx_cache/{key}.json"] = json.dumps(meta).encode()


def _forged_ptx_and_hir(m: dict[str, bytes], key: str) -> None:
    _forged_ptx(m, key)
    m[f"ptx_cache/{key}.zir"] = _variant("3").hir_text.encode()


def _no_hir(m: dict[str, bytes], key: str) -> None:
    del m[f"ptx_cache/{key}.zir"]


def _cubin(m: dict[str, bytes], key: str) -> None:
    blob = b"\x7fELF" + os.urandom(64)
    m[f"cubin_cache/{key}.cubin"] = blob
    meta = {"key": key, "cubin_sha256": hashlib.sha256(blob).hexdigest()}
    m[f"cubin_cache/{key}.json"] = json.dumps(meta).encode()


def _bad_tuning(m: dict[str, bytes], key: str) -> None:
    m[f"autotune/{KERNEL_HASH}.json"] = json.dumps(_record(best=["block=64"])).encode()


def _deep_tuning(m: dict[str, bytes], key: str) -> None:
    m[f"autotune/{KERNEL_HASH}.json"] = b"[" * 100_000 + b"]" * 100_000


def _oversize_meta(m: dict[str, bytes], key: str) -> None:
    m[f"ptx_cache/{key}.json"] = b" " * (cache.MAX_JSON_BYTES + 1)


def _bad_options(m: dict[str, bytes], key: str) -> None:
    meta = json.loads(m[f"ptx_cache/{key}.json"])
    meta["options"] = {"ptxas_args": ["--evil"]}
    m[f"ptx_cache/{key}.json"] = json.dumps(meta).encode()


#: Archive edit -> the member the refusal names.
EDITS: dict[str, tuple[Callable[[dict[str, bytes], str], None], str]] = {
    "forged_ptx_same_kernel": (_forged_ptx, "ptx_cache/{key}.ptx"),
    "forged_ptx_and_hir_under_the_real_key": (_forged_ptx_and_hir, "ptx_cache/{key}.json"),
    "entry_without_hir": (_no_hir, "ptx_cache/{key}.ptx"),
    "cubin": (_cubin, "cubin_cache/{key}.cubin"),
    "malformed_tuning_record": (_bad_tuning, f"autotune/{KERNEL_HASH}.json"),
    "deeply_nested_tuning_record": (_deep_tuning, f"autotune/{KERNEL_HASH}.json"),
    "oversize_metadata": (_oversize_meta, "ptx_cache/{key}.json"),
    "unknown_compile_options": (_bad_options, "ptx_cache/{key}.json"),
}


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_import_refuses_forged_members(
    exported: tuple[Path, str, str], tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, member = EDITS[kind]
    archive = _rewrite(exported, tmp_path, edit)
    assert commands.cache_command(["import", str(archive)]) == 1
    err = capsys.readouterr().err
    assert f"archive member {member.format(key=exported[1])!r}" in err, err
    assert _imported_nothing(tmp_path)


def _info(name: str, kind: bytes, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


K = "a" * 64
ODD: dict[str, tarfile.TarInfo] = {
    "traversal": _info("../escape.json", tarfile.REGTYPE, 2),
    "traversal_inside": _info(f"ptx_cache/../autotune/{K}.json", tarfile.REGTYPE, 2),
    "absolute": _info(f"/tmp/ptx_cache/{K}.ptx", tarfile.REGTYPE, 2),
    "dot_prefix": _info(f"./ptx_cache/{K}.ptx", tarfile.REGTYPE, 2),
    "double_slash": _info(f"ptx_cache//{K}.ptx", tarfile.REGTYPE, 2),
    "upper_case_key": _info(f"ptx_cache/{K.upper()}.ptx", tarfile.REGTYPE, 2),
    "short_key": _info(f"ptx_cache/{K[:63]}.ptx", tarfile.REGTYPE, 2),
    "trailing_newline": _info(f"ptx_cache/{K}.ptx\n", tarfile.REGTYPE, 2),
    "extra_suffix": _info(f"ptx_cache/{K}.ptx.bak", tarfile.REGTYPE, 2),
    "other_folder": _info(f"autotune/{K}.ptx", tarfile.REGTYPE, 2),
    "symlink": _info(f"ptx_cache/{K}.ptx", tarfile.SYMTYPE, link="/dev/zero"),
    "hardlink": _info(f"ptx_cache/{K}.ptx", tarfile.LNKTYPE, link="/etc/passwd"),
    "char_device": _info(f"ptx_cache/{K}.ptx", tarfile.CHRTYPE),
    "block_device": _info(f"ptx_cache/{K}.ptx", tarfile.BLKTYPE),
    "fifo": _info(f"ptx_cache/{K}.ptx", tarfile.FIFOTYPE),
    "directory": _info(f"autotune/{K}.json", tarfile.DIRTYPE),
}


@pytest.mark.parametrize("kind", sorted(ODD))
def test_import_refuses_odd_members(
    exported: tuple[Path, str, str], tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a genuine entry (so nothing-partially-imported is tested too)."""
    archive = _write(tmp_path / "odd.tar.gz", _members(exported[0]), [ODD[kind]])
    assert commands.cache_command(["import", str(archive)]) == 1
    err = capsys.readouterr().err
    assert f"archive member {ODD[kind].name!r}" in err, err
    assert _imported_nothing(tmp_path)
    assert not (tmp_path / "escape.json").exists()


def test_import_refuses_duplicates_and_giant_headers(
    exported: tuple[Path, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    members = _members(exported[0])
    name = f"ptx_cache/{exported[1]}.ptx"
    dup = _write(tmp_path / "dup.tar.gz", members, [_info(name, tarfile.REGTYPE, 1)])
    assert commands.cache_command(["import", str(dup)]) == 1
    assert f"archive member {name!r}: appears twice" in capsys.readouterr().err
    # A pax header is read whole by tarfile: one larger than any member is refused first.
    monkeypatch.setattr(cache_archive, "MAX_READ_BYTES", 1 << 16)
    big = tmp_path / "pax.tar.gz"
    with tarfile.open(big, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.pax_headers = {"comment": "x" * (1 << 17)}
        tar.addfile(info, io.BytesIO(b""))
    assert commands.cache_command(["import", str(big)]) == 1
    assert "of more than 65536 bytes" in capsys.readouterr().err
    assert _imported_nothing(tmp_path)


def test_import_refuses_non_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "b"))
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"\x1f\x8b" + os.urandom(4096))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (garbage, fifo, Path("/dev/zero"), tmp_path / "missing.tar.gz"):
        with pytest.raises(cache_archive.ArchiveError):
            cache_archive.import_archive(path)
        assert commands.cache_command(["import", str(path)]) == 1
    assert _imported_nothing(tmp_path)


def test_import_skips_entries_of_another_build(
    exported: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def other_build(m: dict[str, bytes], key: str) -> None:
        meta = json.loads(m[f"ptx_cache/{key}.json"])
        meta["toolchain"] = dict(meta["toolchain"], build_id="0" * 16)
        m[f"ptx_cache/{key}.json"] = json.dumps(meta).encode()

    archive = _rewrite(exported, tmp_path, other_build)
    assert commands.cache_command(["import", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "imported 0 entries and 1 tuning files" in out and "1 entries of another" in out
    assert not list((tmp_path / "b").glob("ptx_cache/*"))


@pytest.mark.parametrize("path", sorted(CORPUS.glob("cache_import_*.tar.gz")), ids=lambda p: p.name)
def test_import_refuses_corpus_archives(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "b"))
    with pytest.raises(cache_archive.ArchiveError) as e:
        cache_archive.import_archive(path)
    # A bad member is named; a pax header over the read limit is refused before it is read.
    assert e.value.member is not None or "of more than" in str(e.value)
    assert _imported_nothing(tmp_path)
    assert not (tmp_path.parent / "escape.json").exists()
