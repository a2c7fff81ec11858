"""Autotuning without a GPU: pruning on real ptxas resource reports, the occupancy
arithmetic, buckets and nearest-bucket warm starts, and tables installed from
bundles answering without any compile or measurement. Measuring itself is tested
on the GPU (tests/python/gpu/test_aot_gpu.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import zyntax
from zyntax import hir, ptxinfo, tuning

ROOT = Path(__file__).resolve().parents[2]
SAXPY = (ROOT / "examples" / "saxpy.zir").read_text()
REDUCE = (ROOT / "examples" / "reduce_sum.zir").read_text()
H100 = tuning.Limits()


def _resources(text: str, arch: str = "sm_80") -> dict[str, dict[str, int]]:
    m = hir.parse_zir(text, "k.zir")
    ptx = zyntax.compile_ptx(m, arch).ptx
    return ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, arch).log)


def _saxpy(block: int) -> str:
    return SAXPY.replace("max_threads(256, 1, 1)", f"max_threads({block}, 1, 1)")


def test_occupancy_matches_the_cuda_formula() -> None:
    # 32 registers x 256 threads: 8 blocks by registers and by threads: full occupancy.
    assert tuning.occupancy({"registers": 32}, 256, 0, H100) == 1.0
    # 64 registers: 2048 registers per warp, 4 blocks of 8 warps: half.
    assert tuning.occupancy({"registers": 64}, 256, 0, H100) == 0.5
    # 40 registers round up to 1280 per warp: 65536 // (1280 * 8) = 6 blocks.
    assert tuning.occupancy({"registers": 40}, 256, 0, H100) == 6 * 256 / 2048
    # Shared memory: 100 KiB per block leaves room for 2 blocks of 128 threads.
    assert tuning.occupancy({"registers": 16, "shared_bytes": 100 << 10}, 128, 0, H100) == (
        2 * 128 / 2048
    )
    assert tuning.occupancy({"registers": 255}, 1024, 0, H100) == 0.0


def test_prune_on_real_resource_reports() -> None:
    blocks = (64, 256, 1024)
    cands: dict[str, tuple[dict[str, int], int, int]] = {}
    for b in blocks:
        res = _resources(_saxpy(b))["saxpy"]
        assert res["registers"] > 0
        cands[f"block={b}"] = (res, b, 0)
    keep, pruned = tuning.prune(cands, H100)
    assert keep == list(cands) and pruned == {}
    # A device with a quarter of the registers: the 1024-thread block cannot launch.
    regs = cands["block=1024"][0]["registers"]
    small = tuning.Limits(registers_per_sm=-(-regs * 32 // 256) * 256 * 16)
    keep, pruned = tuning.prune(cands, small)
    assert "block=1024" in pruned and pruned["block=1024"].startswith("cannot launch")
    assert "block=64" in keep
    # 2048 threads is over every device's block limit.
    keep, pruned = tuning.prune({"big": (cands["block=64"][0], 2048, 0)}, H100)
    assert keep == [] and "threads per block" in pruned["big"]


def test_prune_shared_memory_and_spills() -> None:
    res = _resources(REDUCE)
    name, r = next((n, r) for n, r in res.items() if r["shared_bytes"] > 0)
    lim = tuning.Limits(shared_per_block=r["shared_bytes"] - 1)
    keep, pruned = tuning.prune({name: (r, 256, 0)}, lim)
    assert keep == [] and "shared memory" in pruned[name]
    # Dynamic shared memory counts too.
    keep, pruned = tuning.prune({name: (r, 256, H100.shared_per_block)}, H100)
    assert "shared memory" in pruned[name]
    # A spilling config is pruned when another does not spill; kept when all do.
    spilling = dict(r, spill_store_bytes=64, spill_load_bytes=64)
    keep, pruned = tuning.prune({"a": (r, 256, 0), "b": (spilling, 256, 0)}, H100)
    assert keep == ["a"] and "spills 128 bytes" in pruned["b"]
    keep, _ = tuning.prune({"b": (spilling, 256, 0)}, H100)
    assert keep == ["b"]


def test_buckets_and_nearest() -> None:
    assert tuning.bucket({"n": 1000, "k": 64}) == {"k": 64, "n": 1024}
    assert tuning.bucket({"n": 1}) == {"n": 1}
    recs = {
        "a": {"bucket": {"n": 1024}, "arch": "sm_90", "version": "v", "best": "x"},
        "b": {"bucket": {"n": 1 << 20}, "arch": "sm_90", "version": "v", "best": "y"},
        "c": {"bucket": {"n": 1 << 19}, "arch": "sm_80", "version": "v", "best": "z"},
    }
    assert tuning.nearest(recs, {"n": 1 << 18}, "sm_90", "v")["best"] == "y"  # type: ignore[index]
    assert tuning.nearest(recs, {"n": 4096}, "sm_90", "v")["best"] == "x"  # type: ignore[index]
    assert tuning.nearest(recs, {"n": 4096}, "sm_90a", "v") is None
    assert tuning.nearest(recs, {"m": 4096}, "sm_90", "v") is None


def test_installed_table_answers_without_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    cfgs = [tuning.Config(block=b) for b in (64, 128, 256)]
    b = tuning.bucket({"n": 5000})
    table = {
        "h" * 64: {
            "kernel": "k",
            "records": {
                tuning.record_key(b, "sm_90", "0"): {
                    "bucket": b,
                    "arch": "sm_90",
                    "version": "0",
                    "best": "block=128",
                    "configs": {c.name(): c.as_dict() for c in cfgs},
                    "complete": True,
                }
            },
        }
    }
    tuning.install_tables(table)

    def never(*_: Any) -> Any:
        raise AssertionError("a deployed machine must not compile or measure")

    for n in (5000, 100_000):  # exact bucket, then the nearest one
        cfg, rep = tuning.tune(
            kernel="k",
            kernel_hash="h" * 64,
            configs=cfgs,
            key_values={"n": n},
            arch="sm_90",
            version="1",
            prepare=never,
            arg_sets=never,
            warmup=1,
            reps=1,
            limits=never,
            min_occupancy_ratio=0.25,
        )
        assert cfg.block == 128 and rep.source == "table"
    got = tuning.tuned_config(table, "k", "sm_90", n=4097)
    assert got == tuning.Config(block=128)
    assert tuning.tuned_config(table, "k", "sm_80", n=4097) is None


def test_measuring_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ZYNTAX_AUTOTUNE", "0")
    cfgs = [tuning.Config(block=b) for b in (32, 64)]

    def never(*_: Any) -> Any:
        raise AssertionError("ZYNTAX_AUTOTUNE=0 must not compile or measure")

    cfg, rep = tuning.tune(
        kernel="k",
        kernel_hash="e" * 64,
        configs=cfgs,
        key_values={"n": 10},
        arch="sm_80",
        version="1",
        prepare=never,
        arg_sets=never,
        warmup=1,
        reps=1,
        limits=never,
        min_occupancy_ratio=0.25,
    )
    assert cfg == cfgs[0] and rep.source == "default"


def test_progress_bar_on_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from zyntax.log import progress

    monkeypatch.setenv("ZYNTAX_PROGRESS", "1")
    assert list(progress(range(5), total=5, desc="zyntax: test")) == list(range(5))
    assert "zyntax: test" in capsys.readouterr().err
    monkeypatch.setenv("ZYNTAX_PROGRESS", "0")
    assert list(progress(range(3), total=3, desc="quiet")) == [0, 1, 2]
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- the native core


def test_native_mac_is_the_cache_mac() -> None:
    """Tuning files are signed in Rust (zyntax-tune) with the MAC the cache computes in
    Python: floats, non-ASCII text and nesting give the same bytes on both sides."""
    import json
    import random

    from zyntax import _native
    from zyntax.frontend import cache

    rng = random.Random()
    secret = bytes(rng.randrange(256) for _ in range(32))
    for _ in range(20):
        times = {f"block={2**i}": rng.random() * 10 ** rng.randint(-7, 18) for i in range(6)}
        doc = {
            "version": 2,
            "kernel": 'k\u00e9\U0001f600\x7f"\\',
            "records": {"n=8|sm_90|1": {"times_ms": times, "best": None, "complete": False}},
        }
        assert _native.tune_db_mac(secret, "e" * 64, json.dumps(doc)) == cache.mac(
            secret, "autotune", "e" * 64, b"", doc
        )


def test_native_config_names_match_python() -> None:
    import json

    from zyntax import _native

    for c in (
        tuning.Config(block=128),
        tuning.Config(block=256, args={"per_thread": 2, "fast": True, "alpha": 1e-05, "s": "x"}),
        tuning.Config(block=64, args={"v": None}, max_registers=64, min_blocks=2),
    ):
        assert _native.tune_config_name(json.dumps(c.as_dict())) == c.name()
        assert tuning.check_config(c.name(), c.as_dict()) == c


class _FakeGpu:
    """Compiling and timing without a GPU: resources by block, a time table, failures."""

    def __init__(self, times: dict[int, float]) -> None:
        self.times = times
        self.measured: list[int] = []
        self.interrupt_at: int | None = None
        self.current = 0  # the block of the config launched last

    def prepare(self, cfg: tuning.Config) -> Any:
        if cfg.max_registers == 1:
            raise zyntax.CompileError("below the register floor")

        def launch(_: Any) -> None:
            if cfg.block == 96:
                raise zyntax.LaunchError("empty grid")

        return {"registers": 32}, cfg.block, 0, launch

    def measure(self, launch: Any, sets: Any, warmup: int, reps: int) -> float:
        if self.interrupt_at == len(self.measured):
            raise KeyboardInterrupt
        launch(sets[0])
        cfg = self.current
        self.measured.append(cfg)
        return self.times[cfg]


def _fake_tune(gpu: _FakeGpu, cfgs: list[tuning.Config], n: int) -> Any:
    def prepare(cfg: tuning.Config) -> Any:
        res, threads, shared, launch = gpu.prepare(cfg)

        def tracked(a: Any) -> None:
            gpu.current = cfg.block
            launch(a)

        return res, threads, shared, tracked

    return tuning.tune(
        kernel="k",
        kernel_hash="a" * 64,
        configs=cfgs,
        key_values={"n": n},
        arch="sm_90",
        version="1",
        prepare=prepare,
        arg_sets=lambda: [[0]],
        warmup=1,
        reps=1,
        limits=tuning.Limits,
        min_occupancy_ratio=0.25,
    )


def test_search_with_a_fake_timer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The native search loop end to end on the CPU: failures and pruning recorded, the
    record saved signed, reused, warm-started, and re-tuned once forged."""
    import json

    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNTAX_AUTOTUNE", raising=False)
    cfgs = [tuning.Config(block=b) for b in (64, 96, 128, 256, 2048)]
    cfgs.append(tuning.Config(block=128, max_registers=1))
    gpu = _FakeGpu({64: 3.0, 96: 1.0, 128: 2.0, 256: 1.5})
    monkeypatch.setattr(tuning, "measure", gpu.measure)
    cfg, rep = _fake_tune(gpu, cfgs, 1000)
    assert cfg.block == 256 and rep.source == "measured" and rep.best == "block=256"
    assert rep.times_ms == {"block=64": 3.0, "block=128": 2.0, "block=256": 1.5}
    assert rep.failed["block=96"].startswith("launch: LaunchError")
    assert rep.failed["block=128,max_registers=1"].startswith("compile: CompileError")
    assert "threads per block" in rep.pruned["block=2048"]
    assert rep.default_ms == 3.0 and rep.gain == 2.0
    db = json.loads(tuning.db_path("a" * 64).read_text())
    assert len(db["mac"]) == 64 and db["records"][rep.record_key]["complete"]

    gpu.measured.clear()
    assert _fake_tune(gpu, cfgs, 1023)[1].source == "database" and gpu.measured == []
    _, rep2 = _fake_tune(gpu, cfgs, 3000)  # a new bucket starts with the best so far
    assert gpu.measured[0] == 256 and rep2.source == "measured"

    # Forged: the slowest config made best, the MAC kept. Ignored and re-tuned.
    rec = db["records"][rep.record_key]
    rec["best"], rec["times_ms"]["block=64"] = "block=64", 0.001
    tuning.db_path("a" * 64).write_text(json.dumps(db))
    assert tuning.load_db("a" * 64)["records"] == {}
    gpu.measured.clear()
    cfg, rep = _fake_tune(gpu, cfgs, 1000)
    assert cfg.block == 256 and rep.source == "measured" and len(gpu.measured) == 3


def test_interrupted_search_resumes_with_a_fake_timer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("ZYNTAX_AUTOTUNE", raising=False)
    cfgs = [tuning.Config(block=b) for b in (64, 128, 256)]
    gpu = _FakeGpu({64: 3.0, 128: 2.0, 256: 1.5})
    gpu.interrupt_at = 1
    monkeypatch.setattr(tuning, "measure", gpu.measure)
    with pytest.raises(KeyboardInterrupt):
        _fake_tune(gpu, cfgs, 100)
    (rec,) = tuning.load_db("a" * 64)["records"].values()
    assert not rec["complete"] and rec["times_ms"] == {"block=64": 3.0}
    assert rec["best"] == "block=64"
    gpu.interrupt_at = None
    cfg, rep = _fake_tune(gpu, cfgs, 100)
    assert gpu.measured == [64, 128, 256] and cfg.block == 256 and rep.source == "measured"
