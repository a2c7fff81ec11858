"""AOT bundles and autotuning on a GPU: load_bundle launches against numpy, the
SASS-or-JIT report, bundles the device cannot run, manifests that do not match
the image, and autotuning end to end (pruning, failures, persistence, warm start,
interruption, tables shipped in bundles).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import Array, aot, cuda, f32, hir, i32, lang, tuning
from zyntax.bundle import BundleError, _content_hash

ROOT = Path(__file__).resolve().parents[3]
SAXPY = (ROOT / "examples" / "saxpy.zir").read_text()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "zcache"))


def _dev() -> tuple[str, tuple[int, int]]:
    cc = tuple(cuda.Device(0).compute_capability)
    return f"sm_{cc[0]}{cc[1]}", (int(cc[0]), int(cc[1]))


def _saxpy_bundle(tmp_path: Path, archs: list[str], **kw: Any) -> Path:
    m = hir.parse_zir(SAXPY, "saxpy.zir")
    return aot.build_bundle(m, archs, tmp_path / "saxpy.fatbin", **kw).image


def _run_saxpy(b: Any) -> None:
    rng = np.random.default_rng()
    n = 10_000
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    a = float(rng.random())
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    b.saxpy[(n + 255) // 256, 256](n, a, dx, dy)
    np.testing.assert_allclose(dy.to_host(), np.float32(a) * x + y, rtol=1e-6)


def test_load_bundle_runs_sass(tmp_path: Path) -> None:
    arch, _ = _dev()
    target = cuda.device_arch(0)
    image = _saxpy_bundle(tmp_path, ["sm_80", target])
    b = cuda.load_bundle(image)
    assert b.loaded_from == "sass" and not b.jit
    assert b.image_arch == target and b.device_arch == arch
    man = json.loads(image.with_suffix(".json").read_text())
    assert b.saxpy.num_regs == man["kernels"]["saxpy"]["resources"][target]["registers"]
    _run_saxpy(b)
    # Arguments are checked against the manifest's parameter types.
    with pytest.raises(zyntax.LaunchError):
        b.saxpy[1, 32](10, 1.0, cuda.zeros(10, np.float32))
    with pytest.raises(zyntax.LaunchError):
        b.saxpy[1, 32](10, 1.0, cuda.zeros(10, np.int32), cuda.zeros(10, np.float32))
    with pytest.raises(zyntax.LaunchError):
        b.saxpy[1, 512](10, 1.0, cuda.zeros(10, np.float32), cuda.zeros(10, np.float32))


def test_ptx_only_match_is_jit_compiled(tmp_path: Path) -> None:
    _, cc = _dev()
    # SASS for an older major version that the found ptxas has (CUDA 13's has no
    # sm_70): only the PTX can run here.
    older = [a for a in aot.ptxas_archs() if int(a[3]) < cc[0]]
    if not older:
        pytest.skip(f"ptxas has no arch of a major version below this GPU's {cc}")
    other = older[0]
    image = _saxpy_bundle(tmp_path, [other])
    b = cuda.load_bundle(image)
    assert b.loaded_from == "ptx" and b.jit and b.image_arch == other
    _run_saxpy(b)


def test_bundle_for_other_archs_without_ptx(tmp_path: Path) -> None:
    arch, cc = _dev()
    other = "sm_80" if cc[0] != 8 else "sm_90a"
    image = _saxpy_bundle(tmp_path, [other], ptx=False)
    with pytest.raises(zyntax.CudaError) as ei:
        cuda.load_bundle(image)
    assert ei.value.kind == "no_image"
    assert other in str(ei.value) and arch in str(ei.value) and "no PTX" in str(ei.value)


def _rewrite(manifest: Path, edit: Any) -> None:
    man = json.loads(manifest.read_text())
    edit(man)
    man["content_sha256"] = _content_hash(man)
    manifest.write_text(json.dumps(man))


def test_manifest_not_matching_the_image(tmp_path: Path) -> None:
    target = cuda.device_arch(0)
    image = _saxpy_bundle(tmp_path, [target])
    manifest = image.with_suffix(".json")
    good = manifest.read_text()

    def more_regs(m: dict[str, Any]) -> None:
        m["kernels"]["saxpy"]["resources"][target]["registers"] += 7

    _rewrite(manifest, more_regs)
    with pytest.raises(BundleError, match="registers"):
        cuda.load_bundle(image)
    manifest.write_text(good)

    def renamed(m: dict[str, Any]) -> None:
        m["kernels"]["saxpy2"] = m["kernels"].pop("saxpy")

    _rewrite(manifest, renamed)
    with pytest.raises(BundleError, match="lacks"):
        cuda.load_bundle(image)
    manifest.write_text(good)
    assert cuda.load_bundle(image).loaded_from == "sass"


def test_loader_process_without_compiler(tmp_path: Path) -> None:
    from test_aot_bundle import LOADER  # tests/python is on sys.path (its conftest)

    image = _saxpy_bundle(tmp_path, [cuda.device_arch(0)])
    env = dict(os.environ, ZYNTAX_PTXAS="/nonexistent/ptxas", PATH="/nonexistent")
    r = subprocess.run(
        [sys.executable, "-c", LOADER, str(image)], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("loaded sass"), r.stdout


# --------------------------------------------------------------------------- autotune

N = 1 << 20


def _scale_kernel() -> Any:
    @zyntax.kernel
    def scale_pt(x: Array[f32, 1], y: Array[f32, 1], n: i32, per_thread: i32) -> None:
        base = lang.grid(1) * per_thread
        for j in range(per_thread):
            i = base + j
            if i < n:
                y[i] = x[i] * 3.0 + 1.0

    return scale_pt


def _grid(a: dict[str, Any], cfg: tuning.Config) -> int:
    if cfg.block == 96:
        return 0  # an invalid grid: this config fails at launch
    per = cfg.block * int(cfg.args["per_thread"])
    return (int(a["n"]) + per - 1) // per


CONFIGS = [
    tuning.Config(block=128, args={"per_thread": 1}),
    tuning.Config(block=256, args={"per_thread": 2}),
    tuning.Config(block=512, args={"per_thread": 4}),
    # More threads per block than any GPU allows: pruned (or rejected by the compiler).
    tuning.Config(block=2048, args={"per_thread": 1}),
    # Fails at launch (its grid is empty).
    tuning.Config(block=96, args={"per_thread": 1}),
    # Fails to compile: below the verifier's register floor.
    tuning.Config(block=128, args={"per_thread": 1}, max_registers=1),
]


def test_autotune_end_to_end(tmp_path: Path) -> None:
    k = zyntax.autotune(configs=CONFIGS, key=["n"], grid=_grid, warmup=2, reps=5)(_scale_kernel())
    rng = np.random.default_rng()
    x = cuda.to_device(rng.random(N, dtype=np.float32))
    y = cuda.to_device(np.full(N, np.nan, np.float32))
    k(x, y, N)
    np.testing.assert_allclose(y.to_host(), x.to_host() * 3.0 + 1.0, rtol=1e-6)
    rep = k.last_report
    assert rep is not None and rep.source == "measured"
    assert set(rep.times_ms) <= {c.name() for c in CONFIGS[:3]} and rep.best in rep.times_ms
    assert all(t > 0 for t in rep.times_ms.values())
    assert "block=2048,per_thread=1" in rep.failed | rep.pruned
    assert rep.failed["block=96,per_thread=1"].startswith("launch:")
    assert any("max_registers=1" in n for n in rep.failed)
    assert rep.gain is not None and rep.gain >= 1.0
    db = json.loads(tuning.db_path(k.hash).read_text())
    (rec,) = db["records"].values()
    assert rec["complete"] and rec["best"] == rep.best and rec["arch"] == _dev()[0]

    # Same bucket (N - 5 rounds up to N): from the database, nothing measured.
    k2 = zyntax.autotune(configs=CONFIGS, key=["n"], grid=_grid, warmup=2, reps=5)(_scale_kernel())
    assert k2.hash == k.hash
    k2(x, y, N - 5)
    assert k2.last_report is not None and k2.last_report.source == "database"

    # A new bucket warm-starts from the nearest tuned one.
    small = N // 4
    k2(x, y, small)
    db = json.loads(tuning.db_path(k.hash).read_text())
    rec4 = next(r for r in db["records"].values() if r["bucket"] == {"n": small})
    assert rec4["warm_start"] == rep.best and rec4["complete"]


def test_autotune_interrupted_keeps_best_so_far(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = zyntax.autotune(configs=CONFIGS[:3], key=["n"], grid=_grid, warmup=1, reps=3)(
        _scale_kernel()
    )
    x = cuda.to_device(np.random.default_rng().random(N, dtype=np.float32))
    y = cuda.zeros(N, np.float32)
    real = tuning.measure
    calls = {"n": 0}

    def interrupted(*a: Any, **kw: Any) -> float:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(tuning, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        k(x, y, N)
    db = json.loads(tuning.db_path(k.hash).read_text())
    (rec,) = db["records"].values()
    assert not rec["complete"] and len(rec["times_ms"]) == 1 and rec["best"] in rec["times_ms"]
    monkeypatch.setattr(tuning, "measure", real)
    k(x, y, N)  # resumes: measures only the two configs left
    db = json.loads(tuning.db_path(k.hash).read_text())
    (rec,) = db["records"].values()
    assert rec["complete"] and len(rec["times_ms"]) == 3


def _saxpy_for(cfg: tuning.Config) -> Any:
    return hir.parse_zir(
        SAXPY.replace("max_threads(256, 1, 1)", f"max_threads({cfg.block}, 1, 1)"), "s.zir"
    )


def test_builder_tuner_table_ships_in_a_bundle(tmp_path: Path) -> None:
    cfgs = [tuning.Config(block=b) for b in (64, 128, 256)]
    t = tuning.Tuner(
        "saxpy",
        cfgs,
        kernel="saxpy",
        build=_saxpy_for,
        grid=lambda kv, cfg: (kv["n"] + cfg.block - 1) // cfg.block,
        key=["n"],
        reps=5,
    )
    n = N
    x = cuda.to_device(np.random.default_rng().random(n, dtype=np.float32))
    y = cuda.zeros(n, np.float32)
    best = t.best([n, 2.0, x, y], {"n": n})
    assert t.last_report is not None and t.last_report.source == "measured"
    assert len(t.last_report.times_ms) == 3
    table = t.table()
    image = aot.build_bundle(
        _saxpy_for(best), [cuda.device_arch(0)], tmp_path / "s.fatbin", tuning=table
    ).image
    # A fresh process with an empty cache: the bundle's table answers, nothing is measured.
    code = (
        "import sys, zyntax\nfrom zyntax import cuda, tuning\n"
        "b = cuda.load_bundle(sys.argv[1])\n"
        "arch = b.device_arch\n"
        "c = tuning.tuned_config(b.tuning, 'saxpy', arch, n=int(sys.argv[2]))\n"
        "print(c.block)\n"
    )
    env = dict(os.environ, ZYNTAX_CACHE_DIR=str(tmp_path / "deployed"))
    r = subprocess.run(
        [sys.executable, "-c", code, str(image), str(n)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == best.block
    assert not (tmp_path / "deployed" / "autotune").exists()
