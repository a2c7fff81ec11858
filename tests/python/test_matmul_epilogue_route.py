"""The route kernels.matmul picks for large row-major products with an
epilogue on sm_90 (gemm.tile_preferred, issue 30): a bias or an activation
runs the tile program where its warp-specialised pipeline takes the product
(session 12 B1, the output stored through TMA: QKV 556 TFLOP/s against the
hand-written sm90's 462, down 725 / 686, MLP up with GELU 523 / 343), no
epilogue (PLAIN_ON_TILE) as measured. Checked through choose_variant on
GPU-looking operands (nothing launched)."""

from __future__ import annotations

import pytest

import zyntax.kernels.gemm as zk
from test_matmul import FakeGpu


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90a")  # what an H200 reports
    monkeypatch.setattr(zk, "_sm_count", lambda p: 132)


def mat(*shape: int) -> FakeGpu:  # bf16, row-major
    return FakeGpu(shape, "<V2")


@pytest.mark.parametrize("m,k,n", [(8192, 1024, 3072), (8192, 1024, 1024), (1024, 1024, 4096)])
def test_bias_runs_the_tile_program(hopper: None, m: int, k: int, n: int) -> None:
    assert zk.BIAS_ON_TILE
    assert zk.choose_variant(mat(m, k), mat(k, n), bias=mat(n)) == "tile"
    want = "tile" if zk.ACTIVATION_ON_TILE else "sm90"
    assert zk.choose_variant(mat(m, k), mat(k, n), bias=mat(n), activation="gelu") == want
    want = "tile" if zk.PLAIN_ON_TILE else "sm90"
    assert zk.choose_variant(mat(m, k), mat(k, n)) == want


def test_bias_on_128x256_tiles_runs_the_tile_program(hopper: None) -> None:
    # 8192x1024x4096 takes 128x256 tiles: with the TMA store 725 against 686 (B1)
    assert zk.choose_variant(mat(8192, 4096), mat(4096, 1024), bias=mat(1024)) == "tile"


def test_too_few_tiles_or_short_k_stay_on_sm90(hopper: None) -> None:
    # 512x512 output: too few tiles for the crate's WS table; K = 64: less than the ring
    assert zk.choose_variant(mat(512, 4096), mat(4096, 512), bias=mat(512)) == "sm90"
    assert zk.choose_variant(mat(8192, 64), mat(64, 4096), bias=mat(4096)) == "sm90"


def test_misaligned_rows_stay_on_sm90(hopper: None) -> None:
    # K = 1001: a's rows are not 16-byte multiples, TMA cannot read them
    assert zk.choose_variant(mat(4096, 1001), mat(1001, 4096), bias=mat(4096)) == "sm90"


@pytest.mark.parametrize("m,k,n", [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 1024, 3072)])
def test_plain_products_on_large_tiles_run_the_tile_program(
    hopper: None, m: int, k: int, n: int
) -> None:
    # Session 13 B1 (TMA store): 8192^3 810 against sm90's 777, 4096^3 792 / 728,
    # 8192x3072x1024 593 / 530; products on 64x128 WS tiles (about 1024 rows)
    # stay on sm90 until measured (PLAIN_MIN_TILE_ROWS).
    assert zk.PLAIN_ON_TILE
    assert zk.choose_variant(mat(m, k), mat(k, n)) == "tile"
    assert zk.choose_variant(mat(1024, 768), mat(768, 768)) == "sm90"
