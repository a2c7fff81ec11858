"""The route kernels.matmul picks for small row-major products on sm_90
(gemm.tile_preferred / MMA_SYNC_M, issue 25: the small transformer block's
projections): the tile program where it runs them swapped (gemm_tile.SWAP,
since session 14), else mma_sync for M in (64, 128] with K up to 1024, the
tile program for the rest of M <= 256 and for a transposed a. Checked through
choose_variant on GPU-looking operands (nothing is launched)."""

from __future__ import annotations

import pytest

import zyntax.kernels.gemm as zk
from test_matmul import FakeGpu


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90a")  # what an H200 reports
    # plain products above 256 rows ask the WS table, which wants the SM count
    monkeypatch.setattr(zk, "_sm_count", lambda p: 132)


def mat(rows: int, cols: int, typestr: str = "<V2") -> FakeGpu:  # bf16, row-major
    return FakeGpu((rows, cols), typestr)


@pytest.mark.parametrize(
    "m,k,n,want",
    [
        (128, 768, 2304, "tile"),  # QKV of the small block: swapped
        (128, 768, 768, "tile"),
        (128, 768, 3072, "tile"),
        (96, 1024, 512, "tile"),
        (128, 3072, 768, "tile"),  # a long K: the tile program measured faster
        (64, 768, 768, "tile"),  # decode rows: not measured on mma_sync, tile as before
        (16, 4096, 4096, "tile"),
        (256, 768, 768, "tile"),
        (1024, 768, 768, "sm90"),
    ],
)
def test_small_m_route(hopper: None, m: int, k: int, n: int, want: str) -> None:
    assert zk.choose_variant(mat(m, k), mat(k, n)) == want


def test_transposed_a_stays_on_the_tile_program(hopper: None) -> None:
    at = FakeGpu((128, 768), "<V2", strides=(2, 256))  # a column-major 128 x 768 view
    assert zk.choose_variant(at, mat(768, 768)) == "tile"


def test_without_the_swapped_form(hopper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk.gemm_tile, "SWAP", False)
    assert zk.choose_variant(mat(128, 768), mat(768, 2304)) == "mma_sync"
    assert zk.choose_variant(mat(96, 1024), mat(1024, 512)) == "mma_sync"
    # operands TMA cannot read (rows of 770 bf16: not 16-byte strides) keep mma_sync
    monkeypatch.setattr(zk.gemm_tile, "SWAP", True)
    assert zk.choose_variant(mat(128, 770), mat(770, 768)) == "mma_sync"


def test_f16_and_a_forced_variant(hopper: None) -> None:
    assert zk.choose_variant(mat(128, 768, "<f2"), mat(768, 768, "<f2")) == "tile"
    assert zk.choose_variant(mat(128, 768), mat(768, 768), variant="tile") == "tile"
