"""AOT bundles without a GPU: the fatbin holds SASS for each listed arch plus PTX,
the manifest's registers are ptxas', every kind of damage is a typed error, and
loading touches neither the compiler nor ptxas.

A missing ptxas or nvFatbin fails these tests; it never skips them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import zyntax
from zyntax import aot, bundle, fatbin, hir, ptxinfo
from zyntax.bundle import BundleError

ROOT = Path(__file__).resolve().parents[2]
SAXPY = (ROOT / "examples" / "saxpy.zir").read_text()
REDUCE = (ROOT / "examples" / "reduce_sum.zir").read_text()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "zcache"))


def _build(tmp_path: Path, archs: list[str], text: str = SAXPY, **kw: object) -> aot.BundleResult:
    m = hir.parse_zir(text, "k.zir")
    return aot.build_bundle(m, archs, tmp_path / "out" / "k.fatbin", **kw)  # type: ignore[arg-type]


def test_fatbin_holds_each_arch_and_ptx(tmp_path: Path) -> None:
    r = _build(tmp_path, ["sm_80", "sm_90a", "sm_86"])
    data = r.image.read_bytes()
    images = fatbin.parse(data)
    assert sorted(i.arch for i in images if i.kind == "cubin") == ["sm_80", "sm_86", "sm_90a"]
    # PTX of the newest arch without `a` (sm_90a PTX would run on sm_90 only).
    assert [i.arch for i in images if i.kind == "ptx"] == ["sm_86"]
    man = json.loads(r.manifest.read_text())
    assert man["sass"] == ["sm_80", "sm_90a", "sm_86"] and man["ptx"] == "sm_86"
    assert man["versions"]["ptx"] == {"sm_80": "7.0", "sm_86": "7.1", "sm_90a": "8.0"}
    assert "release 12." in man["versions"]["ptxas"]
    assert man["versions"]["llvm"].startswith("19.")
    assert man["versions"]["build_id"] not in ("", "unknown")
    k = man["kernels"]["saxpy"]
    assert [p["type"] for p in k["params"]] == [
        "u32",
        "f32",
        "ptr<global, f32>",
        "ptr<global, f32>",
    ]
    assert k["max_threads"] == [256, 1, 1] and k["max_block_threads"] == 256
    # Each image's payload lies inside the file and the cubins are ELF files.
    for i in images:
        assert i.offset + i.size <= len(data)


def test_manifest_resources_are_ptxas(tmp_path: Path) -> None:
    r = _build(tmp_path, ["sm_80", "sm_90"], text=REDUCE)
    man = json.loads(r.manifest.read_text())
    m = hir.parse_zir(REDUCE, "r.zir")
    for arch in ("sm_80", "sm_90"):
        ptx = zyntax.compile_ptx(m, arch).ptx
        want = ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, arch).log)
        for name, res in want.items():
            got = man["kernels"][name]["resources"][arch]
            assert got == res
            assert got["registers"] > 0
    # reduce_sum uses shared memory: ptxas reports it as static shared.
    assert any(man["kernels"][n]["resources"]["sm_80"]["shared_bytes"] > 0 for n in man["kernels"])


def test_cubin_is_one_arch(tmp_path: Path) -> None:
    m = hir.parse_zir(SAXPY, "k.zir")
    r = aot.build_bundle(m, ["sm_80"], tmp_path / "k.cubin", emit="cubin")
    assert r.image.read_bytes().startswith(b"\x7fELF")
    assert json.loads(r.manifest.read_text())["ptx"] is None
    with pytest.raises(zyntax.CompileError, match="one arch"):
        aot.build_bundle(m, ["sm_80", "sm_90"], tmp_path / "k2.cubin", emit="cubin")
    with pytest.raises(zyntax.CompileError, match="unknown arch"):
        aot.build_bundle(m, ["sm_99"], tmp_path / "k3.fatbin")
    with pytest.raises(zyntax.CompileError, match="name of its own"):
        aot.build_bundle(m, ["sm_80"], tmp_path / "k4.json")


def test_no_ptx_bundle(tmp_path: Path) -> None:
    r = _build(tmp_path, ["sm_90a"], ptx=False)
    assert [i.kind for i in fatbin.parse(r.image.read_bytes())] == ["cubin"]


def test_arch_choice_follows_the_driver_rules() -> None:
    assert bundle.choose(["sm_80", "sm_90a"], "sm_80", (9, 0)) == ("sass", "sm_90a")
    assert bundle.choose(["sm_80"], "sm_80", (8, 6)) == ("sass", "sm_80")
    assert bundle.choose(["sm_80", "sm_86"], None, (8, 9)) == ("sass", "sm_86")
    assert bundle.choose(["sm_80"], "sm_80", (9, 0)) == ("ptx", "sm_80")
    assert bundle.choose(["sm_90a"], None, (8, 0)) is None
    assert bundle.choose(["sm_90a"], None, (10, 0)) is None  # `a` code runs on its arch only
    assert bundle.choose(["sm_70"], "sm_90", (8, 9)) is None


def _bundle_files(tmp_path: Path) -> tuple[Path, Path]:
    r = _build(tmp_path, ["sm_80", "sm_90"])
    return r.image, r.manifest


def test_truncated_and_corrupted_images_are_typed_errors(tmp_path: Path) -> None:
    image, manifest = _bundle_files(tmp_path)
    data = image.read_bytes()
    man = json.loads(manifest.read_text())
    with pytest.raises(fatbin.FatbinFormatError, match="truncated"):
        fatbin.parse(data[: len(data) // 2])
    with pytest.raises(fatbin.FatbinFormatError, match="magic"):
        fatbin.parse(b"\0" * 64)
    image.write_bytes(data[:-100])
    with pytest.raises(BundleError, match="truncated or replaced"):
        bundle.check_image(man, image.read_bytes())
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    with pytest.raises(BundleError, match="SHA-256"):
        bundle.check_image(man, bytes(flipped))
    # The right size and hash but a fatbin whose images differ from the manifest's.
    other = _build(tmp_path / "o", ["sm_80"]).image.read_bytes()
    man2 = dict(man, image=dict(man["image"], bytes=len(other)))
    man2["image"]["sha256"] = __import__("hashlib").sha256(other).hexdigest()
    with pytest.raises(BundleError, match="holds SASS"):
        bundle.check_image(man2, other)
    assert issubclass(BundleError, zyntax.CudaError)


def test_damaged_manifests_are_typed_errors(tmp_path: Path) -> None:
    image, manifest = _bundle_files(tmp_path)
    good = manifest.read_text()
    man = json.loads(good)
    cases = {
        "not JSON": "{",
        "deep": "[" * 100_000 + "]" * 100_000,
        "edited": json.dumps(dict(man, sass=["sm_80"])),
        "format": json.dumps(dict(man, format="other")),
    }
    for what, text in cases.items():
        manifest.write_text(text)
        with pytest.raises(BundleError) as ei:
            bundle.load_bundle(image)
        assert ei.value.kind == "bundle", what
    manifest.unlink()
    with pytest.raises(BundleError, match="cannot read"):
        bundle.load_bundle(image)
    manifest.symlink_to("/dev/zero")
    with pytest.raises(BundleError, match="symlink"):
        bundle.load_bundle(image)


LOADER = r"""
import builtins, subprocess, sys
import zyntax, zyntax._native as native

def boom(*a, **k):
    raise AssertionError("the compiler or ptxas was touched")

for name in ("compile_ptx", "emit_llvm", "ptxas_assemble"):
    setattr(native, name, boom)
zyntax.compile_ptx = zyntax.validate_ptx = zyntax.compile = boom
subprocess.Popen = boom
real_import = builtins.__import__
def guarded(name, *a, **k):
    blocked = ("zyntax.frontend", "zyntax.aot", "zyntax.commands")
    if name.startswith(blocked) and name not in sys.modules:
        raise AssertionError(f"imported {name}")
    return real_import(name, *a, **k)
builtins.__import__ = guarded

from zyntax import cuda
try:
    b = cuda.load_bundle(sys.argv[1])
except zyntax.CudaError as e:
    print("CudaError", e.kind)
else:
    print("loaded", b.loaded_from, b.image_arch, b.kernel_names)
"""


def test_loading_never_touches_the_compiler(tmp_path: Path) -> None:
    image, _ = _bundle_files(tmp_path)
    env = dict(os.environ, ZYNTAX_PTXAS="/nonexistent/ptxas", PATH="/nonexistent")
    env.pop("ZYNTAX_NVFATBIN", None)
    out = subprocess.run(
        [sys.executable, "-c", LOADER, str(image)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # Without a GPU the bundle is fully checked, then the driver is missing.
    if "loaded" not in out.stdout:
        assert out.stdout.strip() in ("CudaError no_driver", "CudaError no_device"), out.stdout


ZYNTAX = [sys.executable, "-m", "zyntax.cli"]


def test_cli_builds_a_bundle(tmp_path: Path) -> None:
    src = tmp_path / "saxpy.zir"
    src.write_text(SAXPY)
    out = tmp_path / "b" / "saxpy.fatbin"
    r = subprocess.run(
        [
            *ZYNTAX,
            "compile",
            "--backend",
            "nvptx",
            "--emit",
            "fatbin",
            "--arch",
            "sm_80",
            "--arch",
            "sm_90a",
            str(src),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(out), str(out.with_suffix(".json"))]
    assert {i.arch for i in fatbin.parse(out.read_bytes())} == {"sm_80", "sm_90a"}
    bad = subprocess.run(
        [
            *ZYNTAX,
            "compile",
            "--emit",
            "fatbin",
            "--arch",
            "sm_99",
            str(src),
            "-o",
            str(tmp_path / "x.fatbin"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 1 and "unknown arch" in bad.stderr


def test_python_kernel_file_bundles(tmp_path: Path) -> None:
    src = ROOT / "examples" / "kernels" / "vector_add.py"
    r = subprocess.run(
        [*ZYNTAX, "compile", "--emit", "fatbin", "--arch", "sm_80", str(src), "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    fatbins = sorted(tmp_path.glob("*.fatbin"))
    assert fatbins
    for f in fatbins:
        man = json.loads(f.with_suffix(".json").read_text())
        assert list(man["kernels"]) == [f.stem]


def test_cubins_are_cached_by_ptxas_version(tmp_path: Path) -> None:
    _build(tmp_path, ["sm_80"])
    cached = sorted((tmp_path / "zcache" / "cubin_cache").glob("*.cubin"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    _build(tmp_path / "again", ["sm_80"])
    assert cached[0].stat().st_mtime_ns == stamp  # reused, not reassembled


# ------------------------------------------------------------ no user file overwritten


#: Files a user may keep where a manifest would go: none of them is a zyntax manifest.
USER_FILES = {
    "text": b"my notes\n",
    "package": b'{"name": "my-package", "version": "1.0.0"}\n',
    "other-format": b'{"format": "not-zyntax", "version": 1}\n',
    "binary": b"\xff\xfe\x00garbage",
    "deep": b"[" * 10_000,
}


def test_manifest_never_replaces_a_user_file(tmp_path: Path) -> None:
    """`build_bundle` writes OUTPUT.json; a file there that zyntax did not write is
    refused (ArgumentError naming it, nothing written) unless overwrite=True."""
    m = hir.parse_zir(SAXPY, "k.zir")
    for name, data in USER_FILES.items():
        out = tmp_path / name / "package.fatbin"
        out.parent.mkdir()
        mine = out.with_suffix(".json")
        mine.write_bytes(data)
        with pytest.raises(zyntax.ArgumentError, match="overwrite=True") as e:
            aot.build_bundle(m, ["sm_80"], out)
        assert str(mine) in str(e.value)
        assert mine.read_bytes() == data
        assert sorted(out.parent.iterdir()) == [mine], name  # no image either
    # A symlink (even to a manifest) and a directory are not ours to replace.
    first = aot.build_bundle(m, ["sm_80"], tmp_path / "real" / "k.fatbin")
    link_dir = tmp_path / "link"
    link_dir.mkdir()
    (link_dir / "k.json").symlink_to(first.manifest)
    (tmp_path / "dir" / "k.json").mkdir(parents=True)
    for d in (link_dir, tmp_path / "dir"):
        with pytest.raises(zyntax.ArgumentError):
            aot.build_bundle(m, ["sm_80"], d / "k.fatbin")
        assert not (d / "k.fatbin").exists()
    # overwrite=True replaces the user's file with a manifest that loads.
    out = tmp_path / "package" / "package.fatbin"
    r = aot.build_bundle(m, ["sm_80"], out, overwrite=True)
    assert bundle.read_manifest(r.manifest)["kernels"].keys() == {"saxpy"}
    # A manifest zyntax wrote (even another module's) is replaced without asking.
    r2 = aot.build_bundle(hir.parse_zir(REDUCE, "r.zir"), ["sm_80"], out)
    assert set(bundle.read_manifest(r2.manifest)["kernels"]) == set(
        hir.parse_zir(REDUCE, "r.zir").kernels
    )


def _zyntax(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ZYNTAX, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def test_cli_never_replaces_a_user_json(tmp_path: Path) -> None:
    """`-o package.fatbin` and the default output of `model.zir` (model.fatbin) put
    the manifest at package.json / model.json: a user's file there is kept, the
    command fails with one line naming it and writes nothing; --force replaces it."""
    (tmp_path / "model.zir").write_text(SAXPY)
    mine = b'{"name": "my-package", "scripts": {}}\n'
    for out_args, json_name in ((["-o", "package.fatbin"], "package.json"), ([], "model.json")):
        (tmp_path / json_name).write_bytes(mine)
        before = sorted(p.name for p in tmp_path.iterdir())
        cmd = ["compile", "--emit", "fatbin", "--arch", "sm_80", "model.zir", *out_args]
        p = _zyntax(tmp_path, *cmd)
        assert p.returncode == 1, p.stderr
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("model.zir: error: "), p.stderr
        assert json_name in p.stderr and "--force" in p.stderr
        assert p.stdout == ""
        assert (tmp_path / json_name).read_bytes() == mine
        assert sorted(p.name for p in tmp_path.iterdir()) == before
        p = _zyntax(tmp_path, *cmd, "--force")
        assert p.returncode == 0, p.stderr
        assert bundle.read_manifest(tmp_path / json_name)["image"]["kind"] == "fatbin"
        # Built again: the manifest is zyntax's now, replaced without --force.
        assert _zyntax(tmp_path, *cmd).returncode == 0


def test_python_kernel_bundles_never_replace_a_user_json(tmp_path: Path) -> None:
    src = ROOT / "examples" / "kernels" / "vector_add.py"
    (tmp_path / "saxpy.json").write_text("[1, 2, 3]\n")
    p = _zyntax(tmp_path, "compile", "--emit", "cubin", "--arch", "sm_80", src, "-o", tmp_path)
    assert p.returncode == 1, p.stderr
    assert "saxpy.json exists and is not a zyntax bundle manifest" in p.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["saxpy.json"]
    assert (tmp_path / "saxpy.json").read_text() == "[1, 2, 3]\n"
    p = _zyntax(
        tmp_path, "compile", "--emit", "cubin", "--arch", "sm_80", src, "-o", tmp_path, "--force"
    )
    assert p.returncode == 0, p.stderr
    assert list(bundle.read_manifest(tmp_path / "saxpy.json")["kernels"]) == ["saxpy"]
