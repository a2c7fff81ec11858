"""The plain tile GEMM on sm_90a: the compiler lowers its loop to the wgmma
pipeline (cp.async into 128-byte-swizzled stages, ``wgmma.mma_async``;
crates/zyntax-tile/src/lower/pipeline.rs) without the program naming it.
Launched through ``zyntax.tile`` on torch tensors (bf16/f16), against a float64
reference of the same rounded inputs, outputs poisoned (NaN) first; tails in
M, N and K, a transposed B and a row-sliced A."""

from __future__ import annotations

from typing import Any

import pytest

from zyntax import tile

torch = pytest.importorskip("torch")


def wgmma_gemm(
    s: tile.Schedule,
    dtype: str = "bf16",
    out: str = "f32",
    b_kmajor: bool = False,
    a_mmajor: bool = False,
) -> tile.Kernel:
    """The tile GEMM of docs/tile.md with 16-byte aligned, unit-stride views."""
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm_wgmma", s)
    a = t.view("a", dtype, 2, unit_stride_dim=0 if a_mmajor else 1, align_bytes=16)
    b = t.view("b", dtype, 2, unit_stride_dim=0 if b_kmajor else 1, align_bytes=16)
    c = t.view("c", out, 2, unit_stride_dim=1, align_bytes=16)
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: Any, acc: list[Any]) -> list[Any]:
        x = t.load(a, (m0, k0), (bm, bk))
        y = t.load(b, (k0, n0), (bk, bn))
        return [t.dot(x, y, acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc if out == "f32" else acc.cast(out))
    return t.finish()


def _sm90() -> None:
    major, _ = torch.cuda.get_device_capability()
    if major != 9:
        pytest.skip("wgmma needs an sm_90 GPU")


TORCH = {"bf16": "bfloat16", "f16": "float16"}


def _check(k: tile.Kernel, a: Any, b: Any, c: Any) -> None:
    c.fill_(float("nan"))
    k.launch(a, b, c, grid=k.grid(a.shape[0], b.shape[1]))
    torch.cuda.synchronize()
    want = a.double() @ b.double()
    got = c.double()
    assert not torch.isnan(got).any()
    # Products of rounded inputs are exact; the f32 sums (K of them) and a
    # bf16 output round.
    kk = a.shape[1]
    if c.dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5 * kk)
    else:
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    ("block", "warps", "stages"), [((64, 64), 4, 2), ((128, 128), 8, 4), ((128, 256), 8, 3)]
)
@pytest.mark.parametrize(("m", "n", "kk"), [(72, 40, 48), (1000, 1000, 1000), (257, 300, 4097)])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_tile_wgmma_gemm(
    block: tuple[int, int], warps: int, stages: int, m: int, n: int, kk: int, dtype: str
) -> None:
    _sm90()
    s = tile.Schedule(block, k=64, warps=warps, stages=stages, arch="sm_90a")
    k = wgmma_gemm(s, dtype)
    assert "wgmma" in k.module.to_zir() and k.module.targets == ["sm_90a"]
    dt = getattr(torch, TORCH[dtype])
    a = torch.randn(m, kk, device="cuda").to(dt)
    b = torch.randn(kk, n, device="cuda").to(dt)
    _check(k, a, b, torch.empty(m, n, device="cuda"))


def test_tile_wgmma_gemm_views_and_bf16_out() -> None:
    """A transposed B (K-major), a transposed A (M-major, trans_a), a column
    slice of A with an odd row stride (its misaligned chunks go element by
    element), and a bf16 output."""
    _sm90()
    s = tile.Schedule((128, 128), k=64, warps=8, stages=3, arch="sm_90a")
    m, n, kk = 300, 200, 520
    a = torch.randn(m, kk, device="cuda").bfloat16()
    bt = torch.randn(n, kk, device="cuda").bfloat16()
    _check(wgmma_gemm(s, b_kmajor=True), a, bt.t(), torch.empty(m, n, device="cuda"))
    at = torch.randn(kk, m + 4, device="cuda").bfloat16()[:, :m]
    b0 = torch.randn(kk, n, device="cuda").bfloat16()
    _check(wgmma_gemm(s, a_mmajor=True), at.t(), b0, torch.empty(m, n, device="cuda"))
    wide = torch.randn(m, kk + 3, device="cuda").bfloat16()
    b = torch.randn(kk, n, device="cuda").bfloat16()
    _check(wgmma_gemm(s), wide[:, :kk], b, torch.empty(m, n, device="cuda"))
    c16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    _check(wgmma_gemm(s, out="bf16"), a, b, c16)
