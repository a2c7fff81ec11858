"""The swapped small-M form of the tile-program matmul (``gemm_tile.launch_swapped``:
``c^T = b^T a^T``, weight rows as the program's M, tokens as a narrow N tile,
``c`` stored transposed, the bias a per-row broadcast, a split K's partials
stored transposed for the plain finishing pass) on numpy inputs, forced with
``SWAP_FORCE`` (the host never picks it itself): the reference interpreter
(mma.sync code, and the wgmma pipeline's narrow N when the host runs sm_90a
code) against float64 on fresh random inputs, outputs poisoned with NaN
first. The GPU versions: tests/python/gpu/test_gemm_swapped_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from test_matmul_tile import check, nan, rand, ref_mm
from zyntax.kernels import gemm_tile


@pytest.fixture(autouse=True)
def fresh_plans() -> Any:
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    yield
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]


def launched(monkeypatch: Any) -> list[Any]:
    """The specs of the products launched from now on."""
    seen: list[Any] = []
    real = gemm_tile.launch_swapped

    def spy(*args: Any, **kw: Any) -> bool:
        ran = real(*args, **kw)
        seen.append(ran)
        return ran

    monkeypatch.setattr(gemm_tile, "launch_swapped", spy)
    return seen


@pytest.mark.parametrize(
    "force,m,n,k",
    [
        (((32, 8, 16, 4, 1), 1), 3, 37, 50),  # tails in every dim
        (((16, 16, 32, 4, 1), 1), 17, 40, 64),  # two token tiles, the second one row
        (((32, 8, 16, 4, 1), 3), 5, 33, 100),  # K split in 3: partials stored transposed
        (((16, 8, 16, 4, 1), 2), 1, 21, 70),  # one row: a^T still K-major
    ],
)
@pytest.mark.parametrize("layouts", [("row", "row"), ("row", "col"), ("col", "row")])
def test_swapped_on_interpreter(
    monkeypatch: Any, force: Any, m: int, n: int, k: int, layouts: tuple[str, str]
) -> None:
    monkeypatch.setattr(gemm_tile, "SWAP_FORCE", force)
    ran = launched(monkeypatch)
    a, b = rand(m, k, dt=np.float16), rand(k, n, dt=np.float16)
    if layouts[0] == "col":
        a = np.ascontiguousarray(a.T).T
    if layouts[1] == "col":  # an (N, K) weight read as b = w.T
        b = np.ascontiguousarray(b.T).T
    bias = rand(n, dt=np.float16)
    for act in (None, "gelu"):
        out = nan(m, n, dt=np.float16)
        gemm_tile.matmul(a, b, out, bias=bias, activation=act)
        check(out, ref_mm(a, b, bias, act), np.float16)
    out32 = nan(m, n)
    gemm_tile.matmul(a, b, out32)
    check(out32, ref_mm(a, b), np.float16)
    assert ran and all(ran)


def test_swapped_narrow_wgmma_on_interpreter(monkeypatch: Any) -> None:
    """sm_90a code on the host: the wgmma pipeline with an 8-token N tile of
    a K-major b (the swapped a^T), 3 stages, a K tail."""
    monkeypatch.setattr(gemm_tile, "HOST_ARCH", "sm_90a")
    monkeypatch.setattr(gemm_tile, "SWAP_FORCE", ((64, 8, 64, 4, 3), 1))
    a, b, bias = rand(3, 200, dt=np.float16), rand(200, 70, dt=np.float16), rand(70, dt=np.float16)
    out = nan(3, 70, dt=np.float16)
    gemm_tile.matmul(a, b, out, bias=bias)
    check(out, ref_mm(a, b, bias), np.float16)


def test_swapped_views_are_k_major(monkeypatch: Any) -> None:
    """a^T is read K-major wherever its strides allow: a row-major a of one
    row too (its a^T would count as unit-stride along M, which
    keeps wgmma's narrow N off the TMA pipeline); the token tiles are the
    grid's fastest axis."""
    monkeypatch.setattr(gemm_tile, "SWAP_FORCE", ((16, 8, 16, 4, 1), 1))
    specs: list[Any] = []
    real = gemm_tile.T.launch

    def spy(build: Any, key: Any, name: str, grid: Any, *args: Any) -> None:
        specs.append((key[0], grid))
        real(build, key, name, grid, *args)

    monkeypatch.setattr(gemm_tile.T, "launch", spy)
    a, w = rand(1, 40, dt=np.float16), rand(20, 40, dt=np.float16)
    out = nan(1, 20, dt=np.float16)
    gemm_tile.matmul(a, w.T, out)
    check(out, ref_mm(a, w.T), np.float16)
    (spec, grid), *_ = specs
    assert spec.swap and spec.b_unit == 0
    assert grid == (1, 2, 1)  # (token tiles, weight tiles, splits)


def test_host_never_swaps_unforced(monkeypatch: Any) -> None:
    ran = launched(monkeypatch)
    a, b = rand(2, 40), rand(40, 30)
    out = nan(2, 30)
    gemm_tile.matmul(a, b, out)
    check(out, ref_mm(a, b), np.float32)
    assert ran == [False]
