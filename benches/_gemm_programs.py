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


#: 09-persistent-matmul's Hopper configs (BM 128; BN, BK, stages, warps,
#: epilogue subtiling), before pruning by shared memory.
TMA_PERSISTENT_CONFIGS = [
    (128, bn, bk, s, w, sub)
    for bn in (128, 256)
    for bk in (64, 128)
    for s in (2, 3, 4)
    for w in (4, 8)
    for sub in (True, False)
]
#: An H100/H200 CTA's shared memory (227 KiB).
SHARED_BYTES = 232448


def triton_tma_persistent_matmul(triton: Any, tl: Any) -> Callable[..., None]:
    """Triton's persistent TMA matmul (the tensor-descriptor kernel of the
    ``09-persistent-matmul`` tutorial: one program per SM, grouped tile order,
    TMA loads and stores, optional epilogue subtiling), autotuned per shape
    over the tutorial's Hopper configs that fit shared memory (the rest would
    fail to launch) and hold the accumulator in at most 128 registers a
    thread. B may be row-major (K x N, read as ``[BK, BN]`` boxes) or K-major
    (the tutorial's form: an N x K tensor's transpose), so Triton reads the
    same tensors as the other peers; fp8 e4m3 operands need the K-major form
    (wgmma's). ``ws=True`` asks for Triton's warp specialisation of the tile
    loop (compiled only where Triton supports it)."""

    def prune(configs: list[Any], named_args: dict[str, Any], **_: Any) -> list[Any]:
        ein = named_args["a_ptr"].element_size()
        eout = named_args["c_ptr"].element_size()
        kept = []
        for c in configs:
            bm, bn, bk = c.kwargs["BM"], c.kwargs["BN"], c.kwargs["BK"]
            store = bm * (bn // 2 if c.kwargs["SUBTILE"] else bn) * eout
            # 4 warps would hold a 128x256 f32 accumulator in 256 registers a thread
            spills = bm * bn // (c.num_warps * 32) > 128
            if c.num_stages * (bm + bn) * bk * ein + store <= SHARED_BYTES and not spills:
                kept.append(c)
        return kept

    configs = [
        triton.Config(
            {"BM": bm, "BN": bn, "BK": bk, "GROUP": 8, "SUBTILE": sub}, num_stages=s, num_warps=w
        )
        for bm, bn, bk, s, w, sub in TMA_PERSISTENT_CONFIGS
    ]

    @triton.autotune(
        configs=configs,
        key=["M", "N", "K", "B_KMAJOR", "WS"],
        prune_configs_by={"early_config_prune": prune},
    )
    @triton.jit
    def kernel(
        a_ptr, b_ptr, c_ptr, M, N, K, sam, sb, scm,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
        SUBTILE: tl.constexpr, SMS: tl.constexpr, B_KMAJOR: tl.constexpr, WS: tl.constexpr,
    ):  # fmt: skip
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [sam, 1], [BM, BK])
        if B_KMAJOR:
            b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [sb, 1], [BN, BK])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [sb, 1], [BK, BN])
        c_desc = tl.make_tensor_descriptor(
            c_ptr, [M, N], [scm, 1], [BM, BN // 2 if SUBTILE else BN]
        )
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        per_group = GROUP * tiles_n
        for tile in tl.range(
            tl.program_id(0), tiles_m * tiles_n, SMS, flatten=True, warp_specialize=WS
        ):
            first = (tile // per_group) * GROUP
            size = min(tiles_m - first, GROUP)
            om = (first + (tile % size)) * BM
            on = ((tile % per_group) // size) * BN
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for ks in range(tl.cdiv(K, BK)):
                a = a_desc.load([om, ks * BK])
                if B_KMAJOR:
                    acc = tl.dot(a, b_desc.load([on, ks * BK]).T, acc)
                else:
                    acc = tl.dot(a, b_desc.load([ks * BK, on]), acc)
            if SUBTILE:
                halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
                c0, c1 = tl.split(halves)
                c_desc.store([om, on], c0.to(c_ptr.dtype.element_ty))
                c_desc.store([om, on + BN // 2], c1.to(c_ptr.dtype.element_ty))
            else:
                c_desc.store([om, on], acc.to(c_ptr.dtype.element_ty))

    import torch

    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def scratch(size: int, alignment: int, stream: Any) -> Any:
        # global memory for the descriptors made on the device
        return torch.empty(size, device="cuda", dtype=torch.int8)

    triton.set_allocator(scratch)

    def run(a: Any, b: Any, c: Any, ws: bool = False) -> None:
        """c = a @ b; `a` and `c` with unit column stride, `b` row-major or
        K-major."""
        m, k = a.shape
        n = b.shape[1]
        kmajor = b.stride(0) == 1 and b.stride(1) != 1
        if a.stride(1) != 1 or c.stride(1) != 1 or (not kmajor and b.stride(1) != 1):
            raise ValueError("the TMA kernel needs unit-stride rows")

        def grid(meta: dict[str, int]) -> tuple[int]:
            return (min(sms, triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"])),)

        kernel[grid](
            a, b, c, m, n, k, a.stride(0), b.stride(1) if kmajor else b.stride(0), c.stride(0),
            SMS=sms, B_KMAJOR=kmajor, WS=ws,
        )  # fmt: skip

    run.kernel = kernel  # type: ignore[attr-defined]
    return run
