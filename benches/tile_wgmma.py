"""The plain tile GEMM (docs/tile.md) on sm_90a, where the compiler lowers its
loop to the wgmma pipeline (crates/zyntax-tile/src/lower/pipeline.rs), against
``torch.matmul`` (cuBLAS) in the same run: bf16 in, bf16 out, f32 accumulation.

Each schedule of ``CONFIGS`` is timed (row ``zyntax_<block>_w<warps>_s<stages>``)
and the best is the ``zyntax`` row. Device time per call from CUDA events,
rotating over input sets (``event_median_ms``); the tile kernel is called
through a prepared launcher with raw pointers so that host cost stays hidden,
as cuBLAS's is. Each schedule's output is checked against torch first, and its
registers and local (spill) bytes are recorded.

``--ncu CASE CONFIG`` launches one case with one schedule a few times (for
Nsight Compute in the device script) and exits. ``TILE_WGMMA_CONFIGS=0,2``
times only those schedules (indices into ``CONFIGS``), for short device runs.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import _common as common

CASES = [(4096, 4096, 4096), (8192, 8192, 8192), (256, 4096, 4096), (2048, 50304, 768)]
#: (block, warps, stages, group): `group` 0 is the plain 2-D grid (program
#: ids along M and N), else a 1-D grid walked in groups of `group` tile rows
#: (Triton's tutorial order, so that tiles running at once share A and B
#: panels in L2).
CONFIGS = [
    ((128, 128), 8, 4, 0),
    ((128, 128), 8, 4, 8),
    ((128, 128), 8, 6, 8),
    ((128, 128), 8, 3, 8),
    ((128, 256), 8, 4, 8),
    ((64, 128), 4, 6, 8),
    ((64, 64), 4, 4, 8),
    ((256, 128), 16, 4, 8),
]


def program(
    block: tuple[int, int], warps: int, stages: int, group: int, dtype: str = "bf16"
) -> Any:
    from zyntax import tile

    s = tile.Schedule(block, k=64, warps=warps, stages=stages, arch="sm_90a")
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm", s)
    a = t.view("a", dtype, 2, unit_stride_dim=1, align_bytes=16)
    b = t.view("b", dtype, 2, unit_stride_dim=1, align_bytes=16)
    c = t.view("c", dtype, 2, unit_stride_dim=1, align_bytes=16)
    if group:

        def div(x: Any, y: Any) -> Any:
            return t.scalar_binary("div", x, y)

        pid = t.program_id(0)
        tiles_m = div(a.dim(0) + (bm - 1), bm)
        tiles_n = div(b.dim(1) + (bn - 1), bn)
        per_group = tiles_n * group
        first_m = div(pid, per_group) * group
        rows = t.scalar_binary("min", tiles_m - first_m, group)
        inner = t.scalar_binary("rem", pid, per_group)
        pm = first_m + t.scalar_binary("rem", inner, rows)
        pn = div(inner, rows)
    else:
        pm, pn = t.program_id(0), t.program_id(1)
    m0, n0 = pm * bm, pn * bn

    def step(t: Any, k0: Any, acc: list[Any]) -> list[Any]:
        x = t.load(a, (m0, k0), (bm, bk))
        y = t.load(b, (k0, n0), (bk, bn))
        return [t.dot(x, y, acc[0])]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc.cast(dtype))
    return t.finish()


Config = tuple[tuple[int, int], int, int, int]


def config_name(cfg: Config) -> str:
    (bm, bn), w, s, g = cfg
    return f"zyntax_{bm}x{bn}_w{w}_s{s}" + (f"_g{g}" if g else "")


class Tiled:
    """A compiled schedule and a fast launcher for it."""

    def __init__(self, cfg: Config) -> None:
        from zyntax import cuda

        self.group = cfg[3]
        self.k = program(*cfg)
        self.kern = cuda.load_hir(self.k.module, 0).kernel(self.k.name)
        self.launchers: dict[tuple[int, int], Any] = {}

    def __call__(self, a: Any, b: Any, c: Any) -> None:
        m, n = c.shape
        lc = self.launchers.get((m, n))
        if lc is None:
            grid = self.k.grid(m, n)
            if self.group:
                grid = (grid[0] * grid[1], 1, 1)
            lc = self.kern.prepare(grid, self.k.block)
            self.launchers[(m, n)] = lc
        args = []
        for x in (a, b, c):
            args += [x.data_ptr(), *x.shape, *x.stride()]
        lc(*args)


def main() -> None:
    # The options first, so --help answers on a machine without a GPU.
    args = None if "--ncu" in sys.argv else common.parse_args(__doc__ or "")
    torch = common.optional("torch")
    if torch is None or not torch.cuda.is_available():
        print("needs torch with CUDA")
        return
    if args is None:
        i = sys.argv.index("--ncu")
        m, n, kk = CASES[int(sys.argv[i + 1])]
        cfg = CONFIGS[int(sys.argv[i + 2])]
        a = torch.randn(m, kk, device="cuda").bfloat16()
        b = torch.randn(kk, n, device="cuda").bfloat16()
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        f = Tiled(cfg)
        for _ in range(3):
            f(a, b, c)
        torch.cuda.synchronize()
        return
    iters = 5 if args.quick else 30
    res = common.Results("tile_wgmma", torch.cuda.get_device_name(0))
    tiled = {}
    pick = os.environ.get("TILE_WGMMA_CONFIGS")
    configs = [CONFIGS[int(i)] for i in pick.split(",")] if pick else CONFIGS
    for cfg in configs:
        try:
            tiled[cfg] = Tiled(cfg)
            kern = tiled[cfg].kern
            res.notes[config_name(cfg)] = {
                "registers": kern.num_regs,
                "local_bytes": kern.local_bytes,
            }
            print(f"{config_name(cfg)}: {kern.num_regs} registers, {kern.local_bytes} local bytes")
        except Exception as e:  # a schedule that fails to build is reported, not fatal
            print(f"{config_name(cfg)}: {type(e).__name__}: {e}")
    for m, n, kk in CASES:
        bench_case(torch, res, tiled, (m, n, kk), iters)
    res.write(args.out_dir)


def bench_case(
    torch: Any, res: Any, tiled: dict[Config, Tiled], shape: tuple[int, int, int], iters: int
) -> None:
    """cuBLAS and every schedule on one shape, over rotating input sets."""
    m, n, kk = shape
    case = f"bf16_m{m}_n{n}_k{kk}"
    flops = 2.0 * m * n * kk
    per_set = 2 * (m * kk + kk * n + m * n)
    sets = max(1, min(8, (200 << 20) // per_set + 1))
    ins = [
        (
            torch.randn(m, kk, device="cuda").bfloat16(),
            torch.randn(kk, n, device="cuda").bfloat16(),
            torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(sets)
    ]
    want = ins[0][0].float() @ ins[0][1].float()

    def run_torch(i: int) -> None:
        a, b, c = ins[i]
        torch.matmul(a, b, out=c)

    ms = common.event_median_ms(run_torch, sets, iters)
    res.add(case, "cublas", "TFLOP_per_s", flops / ms / 1e9, False)
    best = None
    for cfg, f in tiled.items():
        a, b, c = ins[0]
        c.fill_(float("nan"))
        f(a, b, c)
        torch.cuda.synchronize()
        err = ((c.float() - want).abs().max() / want.abs().max()).item()
        if not err <= 2e-2:
            print(f"  {case} {config_name(cfg)}: WRONG, max error {err} relative to max |c|")
            continue

        def run(i: int, f: Any = f) -> None:
            f(*ins[i])

        ms = common.event_median_ms(run, sets, iters)
        tf = flops / ms / 1e9
        res.add(case, config_name(cfg), "TFLOP_per_s", tf, False)
        best = tf if best is None else max(best, tf)
    res.add(case, "zyntax", "TFLOP_per_s", best, False)


if __name__ == "__main__":
    main()
