"""The GEMM programs `benches/gemm.py` times beside cuBLAS: the zyntax tile
program (issue 30: the short program the tile layer lowers, docs/tile.md) and
Triton's tutorial matmul (the grouped-order kernel of Triton's
``03-matrix-multiplication`` tutorial, autotuned over the tutorial's configs
plus the Hopper configs of its persistent-matmul tutorial), written here as
Triton users write them so the peer runs at its best.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Tile schedules tried for the zyntax tile GEMM: (BM, BN, BK, warps, stages).
#: The best per case is reported (as Triton's autotuner does for Triton).
TILE_CONFIGS = [
    (128, 256, 64, 8, 4),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 8, 3),
    (64, 128, 64, 4, 6),
    (64, 64, 64, 4, 4),
    (64, 128, 32, 4, 1),
]


def tile_gemm(tile: Any, dt: str, block: tuple[int, int], k: int, warps: int, stages: int,
              arch: str, a_unit: int = 1) -> Any:  # fmt: skip
    """The tile GEMM ``c = a @ b`` with `dt` operands and output (f32
    accumulation): the same 12-line program for every shape; the schedule
    alone changes. The views promise what the tensors are (as a call plan
    keyed by layout would): unit stride along dim `a_unit` of `a` (1:
    row-major or a column slice, 0: `a` is a transpose) and along dim 1 of `b`
    and `c`, bases 16-byte aligned, so the copies may be 16-byte vectors.
    Raises a ZyntaxError when the schedule does not fit."""
    s = tile.Schedule(block, k=k, warps=warps, stages=stages, arch=arch)
    bm, bn = block
    t = tile.Builder("gemm", s)
    a = t.view("a", dt, 2, unit_stride_dim=a_unit, align_bytes=16)
    b, c = (t.view(n, dt, 2, unit_stride_dim=1, align_bytes=16) for n in "bc")
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: Any, k0: Any, acc: list[Any]) -> list[Any]:
        x, y = t.load(a, (m0, k0), (bm, k)), t.load(b, (k0, n0), (k, bn))
        return [t.dot(x, y, acc[0])]

    (acc,) = t.for_range(0, a.dim(1), k, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc.cast(dt))
    return t.finish()


def triton_tutorial_matmul(triton: Any, tl: Any) -> Callable[[Any, Any, Any], None]:
    """Triton's tutorial matmul (grouped program order, masked K tail),
    autotuned per (M, N, K) over the tutorials' configs."""
    cfg = triton.Config
    configs = [
        cfg({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=st, num_warps=w)
        for bm, bn, bk, st, w in [
            # 03-matrix-multiplication (CUDA configs)
            (128, 256, 64, 3, 8),
            (64, 256, 32, 4, 4),
            (128, 128, 32, 4, 4),
            (128, 64, 32, 4, 4),
            (64, 128, 32, 4, 4),
            (128, 32, 32, 4, 4),
            (64, 32, 32, 5, 2),
            (32, 64, 32, 5, 2),
            # 09-persistent-matmul (Hopper configs)
            (128, 128, 64, 3, 8),
            (128, 256, 64, 4, 8),
            (128, 128, 128, 3, 8),
            # skinny M (decode)
            (16, 128, 128, 4, 4),
            (16, 64, 256, 4, 4),
        ]
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(
        a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP * tiles_n
        first = (pid // per_group) * GROUP
        size = min(tiles_m - first, GROUP)
        pm = first + ((pid % per_group) % size)
        pn = (pid % per_group) // size
        rm = (pm * BM + tl.arange(0, BM)) % M
        rn = (pn * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ks in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=rk[None, :] < K - ks * BK, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - ks * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK * sak
            b_ptrs += BK * sbk
        cm = pm * BM + tl.arange(0, BM)
        cn = pn * BN + tl.arange(0, BN)
        tl.store(
            c_ptr + cm[:, None] * scm + cn[None, :] * scn,
            acc.to(c_ptr.dtype.element_ty),
            mask=(cm[:, None] < M) & (cn[None, :] < N),
        )

    def run(a: Any, b: Any, c: Any) -> None:
        m, k = a.shape
        n = b.shape[1]

        def grid(meta: dict[str, int]) -> tuple[int]:
            return (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)

        kernel[grid](
            a, b, c, m, n, k,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        )  # fmt: skip

    run.kernel = kernel  # type: ignore[attr-defined]
    return run
