"""The plain tile GEMM (docs/tile.md) on sm_90a, where the compiler lowers its
loop to the wgmma pipeline (crates/zyntax-tile/src/lower/pipeline.rs, cp.async
into the stages) or, with a warp-specialised schedule, to TMA loads by a
producer warpgroup through mbarrier rings (lower/pipeline_ws.rs, optionally
persistent), against ``torch.matmul`` (cuBLAS) in the same run: bf16 in, bf16
out, f32 accumulation; ``A.T @ B`` cases read a transposed ``a`` view.

Each schedule of ``CONFIGS`` is timed (row ``zyntax_<block>_w<warps>_s<stages>``
with ``_g<group>`` for a grouped 1-D grid written in the program, ``_ws`` for
warp specialisation, ``_wsp`` persistent too) and the best is the ``zyntax``
row. Device time per call from CUDA events, rotating over input sets
(``event_median_ms``); the tile kernel is called through a prepared launcher
with raw pointers (and cached tensor maps) so that host cost stays hidden, as
cuBLAS's is. Each schedule's output is checked against torch first, and its
registers and local (spill) bytes are recorded.

``--ncu CASE CONFIG[,CONFIG..]`` launches one case with each schedule (an
index, or ``cublas`` for ``torch.matmul``) once, in turn (for Nsight
Compute in the device script) and exits. ``TILE_WGMMA_CONFIGS=0,2``
times only those schedules (indices into ``CONFIGS``), ``TILE_WGMMA_CASES=0,1``
only those cases, for short device runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import _common as common

#: (m, n, k, a transposed): ``a`` is (m, k), stored (k, m) when transposed.
CASES = [
    (4096, 4096, 4096, False),
    (8192, 8192, 8192, False),
    (256, 4096, 4096, False),
    (2048, 50304, 768, False),
    (4096, 4096, 4096, True),
]
#: (block, warps, stages, group, mode): `group` 0 is the plain 2-D grid
#: (program ids along M and N), else a 1-D grid walked in groups of `group`
#: tile rows (Triton's tutorial order, so that tiles running at once share A
#: and B panels in L2). `mode` "" is the cp.async pipeline, "ws" the
#: warp-specialised TMA pipeline (`warps` consumer warps plus a producer
#: warpgroup), "wsp" that and persistent (the lowering's grouped order),
#: "wsp0" that with no wgmma group in flight across K steps
#: (`wgmma_in_flight=0`: each stage handed back at once), "wspp" persistent with
#: two consumer sets of `warps` warps taking the instances in turn (ping-pong,
#: one wgmma group in flight), "wspp0" that with none in flight. A suffix
#: "_c2" runs clusters of 2 CTAs along M sharing the `b` tile by TMA
#: multicast, "_c2n" along N sharing `a` (``Schedule(cluster=2, cluster_n=)``).
CONFIGS = [
    ((128, 128), 8, 4, 0, ""),
    ((128, 128), 8, 4, 8, ""),
    ((128, 256), 8, 4, 8, ""),
    ((64, 128), 4, 6, 8, ""),
    ((128, 256), 8, 4, 0, "wsp"),
    ((128, 256), 8, 3, 0, "wsp"),
    ((128, 256), 8, 4, 0, "ws"),
    ((128, 128), 8, 5, 0, "wsp"),
    ((128, 128), 4, 5, 0, "wsp"),
    ((64, 256), 4, 4, 0, "wsp"),
    ((64, 128), 4, 6, 0, "wsp"),
    ((128, 256), 8, 4, 0, "wsp0"),
    ((128, 128), 8, 5, 0, "wsp0"),
    ((64, 128), 4, 6, 0, "wsp0"),
    ((64, 256), 4, 4, 0, "wsp0"),
    ((128, 128), 4, 6, 0, "wspp"),
    ((128, 128), 4, 6, 0, "wspp0"),
    ((128, 128), 4, 5, 0, "wspp"),
    ((64, 256), 4, 5, 0, "wspp"),
    ((128, 256), 8, 4, 0, "wsp_c2"),
    ((128, 256), 8, 4, 0, "wsp_c2n"),
    ((128, 256), 8, 4, 0, "wsp0_c2"),
    ((128, 128), 4, 6, 0, "wspp_c2"),
    ((128, 128), 4, 6, 0, "wspp_c2n"),
]


def program(
    block: tuple[int, int],
    warps: int,
    stages: int,
    group: int,
    mode: str = "",
    a_trans: bool = False,
    dtype: str = "bf16",
) -> Any:
    from zyntax import tile

    mode, _, cl = mode.partition("_c")
    s = tile.Schedule(
        block,
        k=64,
        warps=warps,
        stages=stages,
        arch="sm_90a",
        warp_specialize=mode.startswith("ws"),
        persistent=mode.startswith("wsp"),
        wgmma_in_flight=0 if mode.endswith("0") else 1,
        **({"pingpong": True} if mode.startswith("wspp") else {}),
        **({"cluster": int(cl.rstrip("n")), "cluster_n": cl.endswith("n")} if cl else {}),
    )
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm", s)
    a = t.view("a", dtype, 2, unit_stride_dim=0 if a_trans else 1, align_bytes=16)
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


Config = tuple[tuple[int, int], int, int, int, str]


def config_name(cfg: Config) -> str:
    (bm, bn), w, s, g, mode = cfg
    return f"zyntax_{bm}x{bn}_w{w}_s{s}" + (f"_g{g}" if g else "") + (f"_{mode}" if mode else "")


class Tiled:
    """A compiled schedule and a fast launcher for it."""

    def __init__(self, cfg: Config, a_trans: bool = False) -> None:
        from zyntax import cuda

        self.group = cfg[3]
        self.k = program(*cfg, a_trans=a_trans)
        self.kern = cuda.load_hir(self.k.module, 0).kernel(self.k.name)
        self.launchers: dict[tuple[int, int], Any] = {}
        self.extra: dict[tuple[int, int], list[int]] = {}
        self.maps: dict[tuple[int, ...], list[Any]] = {}

    def __call__(self, a: Any, b: Any, c: Any) -> None:
        m, n = c.shape
        lc = self.launchers.get((m, n))
        if lc is None:
            from zyntax.kernels._tensors import sm_count

            grid: Any = self.k.grid(m, n)
            if self.group:
                grid = (grid[0] * grid[1], 1, 1)
            # a persistent kernel: one CTA per SM (whole clusters, as many as
            # fit), the program's grid as arguments
            ctas = self.k.resident_ctas(0) if self.k.cluster > 1 else sm_count(0)
            grid, self.extra[(m, n)] = self.k.launch_grid(grid, ctas)
            lc = self.kern.prepare(tuple(grid), self.k.block)
            self.launchers[(m, n)] = lc
        args: list[Any] = []
        for x in (a, b, c):
            args += [x.data_ptr(), *x.shape, *x.stride()]
        if self.k.tensor_maps:
            # the maps of each input set, built once (as a library caches them)
            key = (a.data_ptr(), b.data_ptr(), m, n, a.shape[1])
            maps = self.maps.get(key)
            if maps is None:
                maps = self.maps[key] = self.k.tensor_map_args(a, b, c)
            args += maps
        lc(*args, *self.extra[(m, n)])


def main() -> None:
    # The options first, so --help answers on a machine without a GPU.
    args = None if "--ncu" in sys.argv else common.parse_args(__doc__ or "")
    torch = common.optional("torch")
    if torch is None or not torch.cuda.is_available():
        print("needs torch with CUDA")
        return
    if args is None:
        # --ncu CASE CONFIG[,CONFIG..]: each schedule (or `cublas`) once, in turn
        # (Nsight Compute replays each launch it profiles: `-c <number of configs>`).
        i = sys.argv.index("--ncu")
        m, n, kk, a_trans = CASES[int(sys.argv[i + 1])]
        a, b, c = inputs(torch, m, n, kk, a_trans)
        for name in sys.argv[i + 2].split(","):
            if name == "cublas":
                f: Any = lambda a, b, c: torch.matmul(a, b, out=c)  # noqa: E731
            else:
                f = Tiled(CONFIGS[int(name)], a_trans)
            f(a, b, c)
            torch.cuda.synchronize()
        return
    iters = 5 if args.quick else 30
    res = common.Results("tile_wgmma", torch.cuda.get_device_name(0))
    pick = os.environ.get("TILE_WGMMA_CONFIGS")
    configs = [CONFIGS[int(i)] for i in pick.split(",")] if pick else CONFIGS
    pick = os.environ.get("TILE_WGMMA_CASES")
    cases = [CASES[int(i)] for i in pick.split(",")] if pick else CASES
    tiled: dict[tuple[Config, bool], Tiled] = {}
    for a_trans in sorted({c[3] for c in cases}):
        for cfg in configs:
            name = config_name(cfg) + ("_at" if a_trans else "")
            try:
                tiled[(cfg, a_trans)] = f = Tiled(cfg, a_trans)
                res.notes[name] = {
                    "registers": f.kern.num_regs,
                    "local_bytes": f.kern.local_bytes,
                    "threads": f.k.block[0],
                }
                print(f"{name}: {f.kern.num_regs} registers, {f.kern.local_bytes} local bytes")
            except Exception as e:  # a schedule that fails to build is reported, not fatal
                print(f"{name}: {type(e).__name__}: {e}")
    triton = None if os.environ.get("TILE_WGMMA_NO_TRITON") else triton_peer()
    for shape in cases:
        bench_case(torch, res, tiled, shape, iters, triton)
    res.write(args.out_dir)


def triton_peer() -> Any:
    """Triton's tutorial matmul autotuned over its Hopper configs
    (benches/_gemm_programs.py), or None without Triton."""
    triton = common.optional("triton")
    if triton is None:
        return None
    import _gemm_programs

    tl = importlib.import_module("triton.language")
    return _gemm_programs.triton_tutorial_matmul(triton, tl)


def handwritten() -> Any:
    """The hand-written sm_90a GEMM (``kernels/gemm_sm90.py``: TMA, warp
    specialisation, persistent), relaunched with raw pointers as its
    ``matmul_sm90`` prepares it (row-major operands)."""
    from zyntax.kernels import gemm_sm90

    relaunch: dict[tuple[int, int, int], Any] = {}

    def run(a: Any, b: Any, c: Any) -> None:
        key = (a.shape[0], a.shape[1], b.shape[1])
        r = relaunch.get(key)
        if r is None:
            relaunch[key] = gemm_sm90.matmul_sm90(a, b, c)
        else:
            r(a.data_ptr(), b.data_ptr(), c.data_ptr(), 0)

    return run


def inputs(torch: Any, m: int, n: int, k: int, a_trans: bool) -> tuple[Any, Any, Any]:
    """Fresh random bf16 (a, b, c): `a` (m, k), a transposed view of a (k, m)
    tensor when `a_trans`."""
    a = torch.randn(k, m, device="cuda").bfloat16().t() if a_trans else None
    if a is None:
        a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def bench_case(
    torch: Any,
    res: Any,
    tiled: dict[tuple[Config, bool], Tiled],
    shape: tuple[int, int, int, bool],
    iters: int,
    triton: Any,
) -> None:
    """cuBLAS, Triton and every schedule on one shape, over rotating input sets."""
    m, n, kk, a_trans = shape
    case = f"bf16_{'at_' if a_trans else ''}m{m}_n{n}_k{kk}"
    flops = 2.0 * m * n * kk
    per_set = 2 * (m * kk + kk * n + m * n)
    sets = max(1, min(8, (200 << 20) // per_set + 1))
    ins = [inputs(torch, m, n, kk, a_trans) for _ in range(sets)]
    want = ins[0][0].float() @ ins[0][1].float()

    def check(name: str, f: Any) -> bool:
        a, b, c = ins[0]
        c.fill_(float("nan"))
        f(a, b, c)
        torch.cuda.synchronize()
        err = ((c.float() - want).abs().max() / want.abs().max()).item()
        if not err <= 2e-2:
            print(f"  {case} {name}: WRONG, max error {err} relative to max |c|")
        return bool(err <= 2e-2)

    def time(name: str, f: Any) -> float:
        ms = common.event_median_ms(lambda i: f(*ins[i]), sets, iters)
        tf = flops / ms / 1e9
        res.add(case, name, "TFLOP_per_s", tf, False)
        print(f"  {case} {name}: {tf:.0f} TFLOP/s")
        return tf

    time("cublas", lambda a, b, c: torch.matmul(a, b, out=c))
    if not a_trans and not os.environ.get("TILE_WGMMA_NO_HANDWRITTEN"):
        try:
            hand = handwritten()
            if check("handwritten", hand):
                time("handwritten", hand)
        except Exception as e:  # the peer failing is reported, not fatal
            print(f"  {case} handwritten: {type(e).__name__}: {str(e)[:200]}")
    if triton is not None:
        try:
            if check("triton", triton):
                time("triton", triton)
        except Exception as e:  # the peer failing is reported, not fatal
            print(f"  {case} triton: {type(e).__name__}: {str(e)[:200]}")
    best = None
    for (cfg, at), f in tiled.items():
        if at != a_trans or not check(config_name(cfg), f):
            continue
        tf = time(config_name(cfg), f)
        best = tf if best is None else max(best, tf)
    res.add(case, "zyntax", "TFLOP_per_s", best, False)


if __name__ == "__main__":
    main()
