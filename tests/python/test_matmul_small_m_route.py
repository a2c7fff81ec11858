"""The route kernels.matmul picks for small row-major products on sm_90
(gemm.tile_preferred / MMA_SYNC_M, issue 25: the small transformer block's
projections): mma_sync for M in (64, 128] with K up to 1024, the tile program
for the rest of M <= 256 and for a transposed a. Checked through
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
        (128, 768, 2304, "mma_sync"),  # QKV of the small block
        (128, 768, 768, "mma_sync"),
        (128, 768, 3072, "mma_sync"),
        (96, 1024, 512, "mma_sync"),
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


def test_f16_and_a_forced_variant(hopper: None) -> None:
    assert zk.choose_variant(mat(128, 768, "<f2"), mat(768, 768, "<f2")) == "mma_sync"
    assert zk.choose_variant(mat(128, 768), mat(768, 768), variant="tile") == "tile"
