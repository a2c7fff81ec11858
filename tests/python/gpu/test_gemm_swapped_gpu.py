"""The swapped small-M form of the tile-program matmul on the GPU
(``gemm_tile.launch_swapped``: ``c^T = b^T a^T`` on the warp-specialised TMA
pipeline, weight rows on wgmma's M side, 8-32 tokens as its N, deep rings,
the bias a per-row broadcast, a split K's partials stored transposed and
summed by the finishing pass) at M in {1, 3, 16, 17, 64, 128, 200, 256}
(above the crate's SWAP_MAX_M the form declines and the other routes run),
odd N and K, a row-major ``[K, N]`` weight and an ``(N, K)`` one read
transposed, bias and GELU, against float64 torch on fresh random inputs,
outputs poisoned with NaN first. Skipped without a GPU."""

from __future__ import annotations

from typing import Any

import pytest
from test_gemm_smallm_gpu import check, gelu, rand, tdt, torch  # noqa: F401 (fixture)

pytestmark = pytest.mark.gpu


@pytest.fixture
def swapped(monkeypatch: Any) -> list[bool]:
    """SWAP on, fresh plans; the list of launch_swapped's answers."""
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "SWAP", True)
    seen: list[bool] = []
    real = gemm_tile.launch_swapped

    def spy(*args: Any, **kw: Any) -> bool:
        seen.append(real(*args, **kw))
        return seen[-1]

    monkeypatch.setattr(gemm_tile, "launch_swapped", spy)
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]
    yield seen
    gemm_tile.matmul.plans.clear()  # type: ignore[attr-defined]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("m", [1, 3, 16, 17, 64, 128, 200, 256])
@pytest.mark.parametrize("n,k,wt", [(1000, 3000, False), (1031, 776, True), (4097, 1000, False)])
def test_swapped_route(
    torch: Any,  # noqa: F811
    swapped: list[bool],
    dt: str,
    m: int,
    n: int,
    k: int,
    wt: bool,
) -> None:
    from zyntax.kernels import gemm_tile

    a = rand(torch, m, k, dt=dt)
    w = rand(torch, n, k, dt=dt) if wt else rand(torch, k, n, dt=dt)
    b = w.t() if wt else w
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt(torch, dt))
    gemm_tile.matmul(a, b, out)
    ref = a.double() @ b.double()
    check(out, ref, dt)
    # TMA needs 16-byte row strides: a row-major b of an odd N declines
    assert swapped == [m <= 128 and (wt or n % 8 == 0)]
    out.fill_(float("nan"))
    gemm_tile.matmul(a, b, out)  # the repeated call replays its plan
    check(out, ref, dt)


@pytest.mark.parametrize("m", [1, 17, 128])
@pytest.mark.parametrize("act", [None, "gelu"])
def test_swapped_epilogues(
    torch: Any,  # noqa: F811
    swapped: list[bool],
    m: int,
    act: str | None,
) -> None:
    """The bias as a per-row broadcast of c^T (and GELU) in the swapped
    program's epilogue, or in the finishing pass after a split."""
    from zyntax.kernels import gemm_tile

    n, k = 2305, 768 if m == 128 else 4104
    a, w, bias = rand(torch, m, k), rand(torch, n, k), rand(torch, n)
    b = w.t()  # an (N, K) weight: N odd
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_tile.matmul(a, b, out, bias=bias, activation=act)
    r = a.double() @ b.double() + bias.double()
    check(out, gelu(torch, r) if act else r, "bf16")
    assert swapped == [True]


@pytest.mark.parametrize(
    "force",
    [
        ((64, 8, 64, 4, 16), 1),  # a ring deeper than the K loop
        ((128, 16, 64, 4, 6), 3),  # split in 3 (partials transposed)
        ((64, 32, 64, 4, 12), 1),
        ((128, 8, 64, 4, 4), 7),
    ],
)
def test_swapped_schedules(
    torch: Any,  # noqa: F811
    swapped: list[bool],
    monkeypatch: Any,
    force: Any,
) -> None:
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "SWAP_FORCE", force)
    m, n, k = 19, 1001, 64 * 4 * 7 + 24
    a, w, bias = rand(torch, m, k), rand(torch, n, k), rand(torch, n)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_tile.matmul(a, w.t(), out, bias=bias, activation="relu")
    check(out, (a.double() @ w.double().t() + bias.double()).clamp_min(0), "bf16")
    assert swapped == [True]


def test_swapped_is_deterministic(torch: Any, swapped: list[bool]) -> None:  # noqa: F811
    """No atomics: split or not, two runs give the same bits."""
    from zyntax.kernels import gemm_tile

    for m, n, k in [(1, 4096, 4096), (128, 768, 768)]:
        a, b = rand(torch, m, k), rand(torch, k, n)
        runs = [gemm_tile.matmul(a, b) for _ in range(2)]
        assert torch.equal(runs[0], runs[1])
