"""The kernel cache against hostile or broken entries (issue 10 item 9), its key, its
log events, and the ``zyntax cache`` command.

Each class of bad entry is planted in a fresh cache directory, then a real
``@zyntax.kernel`` compile must neither hang, exhaust memory, raise, nor load
the bad content: it rebuilds the entry, after which the entry is good.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import zyntax
from zyntax import Array, f32, i32
from zyntax.frontend import cache, pipeline
from zyntax.safeio import RejectedFile, loads_bounded, read_bounded


def _kernel() -> zyntax.frontend.kernel.Kernel:
    # A fresh kernel object per test: no PTX memoised in memory.
    @zyntax.kernel
    def scale(x: Array[f32, 1], n: i32) -> None:
        i = zyntax.lang.grid(1)
        if i < n:
            x[i] = x[i] * 2.0

    return scale


def _other_kernel() -> zyntax.frontend.kernel.Kernel:
    @zyntax.kernel
    def shift(x: Array[f32, 1], n: i32) -> None:
        i = zyntax.lang.grid(1)
        if i < n:
            x[i] = x[i] + 1.0

    return shift


def _variant(k: zyntax.frontend.kernel.Kernel) -> zyntax.frontend.kernel.Variant:
    specs = k.signature_specs()
    assert specs is not None
    return k.variant(tuple(specs))


@pytest.fixture
def cdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    return tmp_path / "ptx_cache"


def _compile_fresh(arch: str = "sm_80") -> tuple[str, str]:
    v = _variant(_kernel())
    return pipeline.ptx_for(v, arch), pipeline.cache_key(v, arch)


def _plant(cdir: Path) -> str:
    """Compile once so the entry exists; return its key."""
    _, key = _compile_fresh()
    assert (cdir / f"{key}.json").is_file()
    return key


def _assert_repaired(cdir: Path, key: str) -> None:
    ptx, key2 = _compile_fresh()
    assert key2 == key and ".entry scale" in ptx
    assert cache.load(key) is not None  # the rebuilt entry is good
    assert (cdir / f"{key}.json").is_file() and not (cdir / f"{key}.json").is_symlink()


def test_symlink_to_dev_zero_is_not_read(cdir: Path) -> None:
    key = _plant(cdir)
    for suffix in (".json", ".ptx"):
        p = cdir / f"{key}{suffix}"
        p.unlink()
        p.symlink_to("/dev/zero")
        assert cache.load(key) is None  # returns at once, reads nothing
        _assert_repaired(cdir, key)


def test_fifo_does_not_block(cdir: Path) -> None:
    key = _plant(cdir)
    p = cdir / f"{key}.ptx"
    p.unlink()
    os.mkfifo(p)
    # In a child process with a timeout: the old code blocked here forever.
    code = f"import sys; from zyntax.frontend import cache; print(cache.load({key!r}))"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stderr
    _assert_repaired(cdir, key)


def test_deeply_nested_json_is_repaired(cdir: Path) -> None:
    key = _plant(cdir)
    (cdir / f"{key}.json").write_text("[" * 200_000 + "]" * 200_000)
    assert cache.load(key) is None
    _assert_repaired(cdir, key)
    with pytest.raises(RejectedFile, match="nested deeper"):
        loads_bounded('{"a": ' * 40 + "1" + "}" * 40)
    # Brackets inside strings do not count.
    assert loads_bounded(json.dumps({"s": "[[[[" * 100})) == {"s": "[[[[" * 100}


def test_oversized_files_are_refused(cdir: Path, tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(os.urandom(4096))
    with pytest.raises(RejectedFile, match="limit"):
        read_bounded(big, 1024)
    assert read_bounded(big, 4096) == big.read_bytes()
    with pytest.raises(RejectedFile, match="not a regular file"):
        read_bounded(tmp_path, 10)


def test_another_kernels_ptx_under_a_rewritten_key_is_rejected(cdir: Path) -> None:
    key = _plant(cdir)
    # Another kernel's entry, relabelled: key and checksum rewritten to match.
    other = _variant(_other_kernel())
    other_ptx = pipeline.ptx_for(other, "sm_80")
    meta = json.loads((cdir / f"{key}.json").read_text())
    (cdir / f"{key}.ptx").write_text(other_ptx)
    meta["ptx_sha256"] = __import__("hashlib").sha256(other_ptx.encode()).hexdigest()
    meta["kernels"] = ["shift"]
    meta["launch"] = {"shift": meta["launch"]["scale"]}
    (cdir / f"{key}.json").write_text(json.dumps(meta))
    # Self-consistent: unsigned (as in the bundled ptx_cache/), only the HIR-derived
    # expectation catches it; in the user cache its MAC does not verify either.
    assert cache.check_entry(cdir, key)[0] == other_ptx
    with pytest.raises(RejectedFile, match="not the expected"):
        cache.check_entry(cdir, key, expect={"scale": _variant(_kernel()).param_types})
    assert cache.load(key) is None
    _assert_repaired(cdir, key)


def test_signature_mismatch_is_rejected(cdir: Path) -> None:
    key = _plant(cdir)
    _, meta = cache.check_entry(cdir, key)
    types = meta["params"]
    assert cache.load(key, expect={"scale": types}) is not None
    wrong = list(types)
    wrong[-1] = "i64" if wrong[-1] != "i64" else "i32"
    assert cache.load(key, expect={"scale": wrong}) is None
    assert cache.load(key, expect={"scale": types[:-1]}) is None


def test_key_covers_toolchain_arch_suffix_and_ptxas() -> None:
    base = cache.cache_key("module m", "sm_90", "7.8", "0.1.0", {})
    assert cache.cache_key("module m", "sm_90a", "7.8", "0.1.0", {}) != base
    with_ptxas = cache.cache_key("module m", "sm_90", "7.8", "0.1.0", {}, ptxas_version="12.9")
    assert with_ptxas != base
    assert with_ptxas != cache.cache_key(
        "module m", "sm_90", "7.8", "0.1.0", {}, ptxas_version="12.8"
    )
    tc = cache.toolchain()
    assert tc["llvm"].startswith("19.") and len(tc["build_id"]) == 16
    info = zyntax.build_info()
    assert info["build_id"] == tc["build_id"]


def test_compile_and_cache_events_are_logged(cdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="zyntax"):
        _compile_fresh()
        _compile_fresh()
        key = pipeline.cache_key(_variant(_kernel()), "sm_80")
        (cdir / f"{key}.ptx").write_text("garbage")
        _compile_fresh()
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("compiled scale for sm_80") for m in msgs)
    assert any(m.startswith("reused scale for sm_80") for m in msgs)
    assert any("is bad (PTX does not match its checksum)" in m for m in msgs)


def test_zyntax_log_env_prints_to_stderr(tmp_path: Path) -> None:
    code = (
        "import zyntax\n"
        "@zyntax.kernel\n"
        "def k(x: zyntax.Array[zyntax.f32, 1]) -> None:\n"
        "    x[0] = 1.0\n"
        "from zyntax.frontend import pipeline\n"
        "pipeline.ptx_for(k.variant(tuple(k.signature_specs())), 'sm_80')\n"
    )
    f = tmp_path / "k.py"
    f.write_text(code)
    env = dict(os.environ, ZYNTAX_CACHE_DIR=str(tmp_path / "c"), ZYNTAX_LOG="info")
    r = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "zyntax: INFO: compiled k for sm_80" in r.stderr
    env["ZYNTAX_LOG"] = ""
    r = subprocess.run([sys.executable, str(f)], capture_output=True, text=True, env=env)
    assert r.stderr == ""


# --------------------------------------------------------------------------- zyntax cache


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zyntax.cli", "cache", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cache_cli_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = tmp_path / "a"
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(a))
    ptx, key = _compile_fresh("sm_80")
    pipeline.ptx_for(_variant(_other_kernel()), "sm_90a")
    env = dict(os.environ, ZYNTAX_CACHE_DIR=str(a))
    ls = _cli("list", "--json", env=env)
    assert ls.returncode == 0, ls.stderr
    listed = {e["key"]: e for e in json.loads(ls.stdout)}
    assert len(listed) == 2 and listed[key]["kernels"] == ["scale"]
    assert sorted(e["arch"] for e in listed.values()) == ["sm_80", "sm_90a"]
    assert _cli("verify", env=env).returncode == 0

    archive = tmp_path / "warm.tar.gz"
    assert _cli("export", str(archive), env=env).returncode == 0
    b_env = dict(os.environ, ZYNTAX_CACHE_DIR=str(tmp_path / "b"))
    imp = _cli("import", str(archive), env=b_env)
    assert imp.returncode == 0 and "imported 2 entries" in imp.stdout, imp.stderr
    for suffix in (".ptx", ".zir"):
        assert (tmp_path / "b" / "ptx_cache" / f"{key}{suffix}").read_bytes() == (
            a / "ptx_cache" / f"{key}{suffix}"
        ).read_bytes()
    # The same metadata, signed with b's own key (a's MAC means nothing there).
    meta_a = json.loads((a / "ptx_cache" / f"{key}.json").read_text())
    meta_b = json.loads((tmp_path / "b" / "ptx_cache" / f"{key}.json").read_text())
    assert meta_a.pop("mac") != meta_b.pop("mac") and meta_a == meta_b
    assert _cli("verify", env=b_env).returncode == 0

    # A bad entry: verify finds it (exit 1), --repair removes it, export skips it.
    (a / "ptx_cache" / f"{key}.ptx").write_text(ptx + "// edited\n")
    v = _cli("verify", env=env)
    assert v.returncode == 1 and key in v.stdout and "checksum" in v.stdout
    assert _cli("verify", "--repair", env=env).returncode == 0
    assert not (a / "ptx_cache" / f"{key}.ptx").exists()
    assert _cli("verify", env=env).returncode == 0

    clr = _cli("clear", env=env)
    assert clr.returncode == 0 and not (a / "ptx_cache").exists()
    assert json.loads(_cli("list", "--json", env=env).stdout) == []


def test_cache_import_refuses_hostile_archives(tmp_path: Path) -> None:
    import io
    import tarfile

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (
            ("../escape.json", b"{}"),
            ("ptx_cache/" + "a" * 64 + ".json", b"[" * 100_000),
            ("ptx_cache/" + "a" * 64 + ".ptx", b"x"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("ptx_cache/" + "b" * 64 + ".ptx")
        link.type = tarfile.SYMTYPE
        link.linkname = "/dev/zero"
        tar.addfile(link)
    env = dict(os.environ, ZYNTAX_CACHE_DIR=str(tmp_path / "c"))
    r = _cli("import", str(archive), env=env)
    # Refused as a whole, naming the first bad member (test_cache_forgery.py: every kind).
    assert r.returncode == 1 and "'../escape.json'" in r.stderr, r.stderr
    assert not (tmp_path / "escape.json").exists()
    assert not list((tmp_path / "c").rglob("*.ptx"))
