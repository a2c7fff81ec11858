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
