"""Per-kernel device times of ``benches/blocks.py``'s transformer block,
zyntax against PyTorch eager (``torch.profiler``, CUDA activity): which
kernel of the zyntax block loses, and to which of PyTorch's.

``python benches/blocks_profile.py [small|medium|train] [--reps N]`` prints,
per implementation, every kernel's device time per block (microseconds,
summed over its launches in one block) and the block's total. ``train``
profiles ``benches/blocks.py``'s training step (forward and backward,
4 x 512 tokens, d = 768) instead: per implementation the step's wall time
with and without a synchronize (how long the host takes to enqueue it), its
kernels, the host-side ops that copy (``aten::copy_``, ``contiguous``,
``to``, ...) and the autograd Functions per step, and the Python functions
that take the host's time (``cProfile``, zyntax only). ``--graph`` instead
times each op of the block alone, zyntax's against PyTorch's (and each
matmul route of zyntax's), as the best per-call time of a CUDA graph of
`reps` calls: no profiler (whose start-up did not fit the device slots of
session 11). ``train --timing`` times the training step as blocks.py does
(the spread of event and host times, with and without the garbage
collector, call-plan misses and tensor maps made per step) and each of its
matrix products alone (the route's variant, zyntax against cuBLAS on the
same transposed views). A diagnostic: it writes no results JSON (``benches/blocks.py``
is the bench).
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import blocks
from _common import optional


def kernel_times(torch: Any, fn: Any, reps: int) -> list[tuple[str, float, int]]:
    """(kernel name, device us per call of `fn`, launches per call), slowest first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):  # compile, load, plan
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:  # older torch spelling
            us = e.cuda_time_total
        if us > 0 and e.count:
            rows.append((e.key, us / reps, e.count // reps))
    return sorted(rows, key=lambda r: -r[1])


#: Host-side ops that copy or convert a tensor (counted per training step).
COPIES = ("aten::copy_", "aten::contiguous", "aten::clone", "aten::to", "aten::_to_copy")


def train_profile(torch: Any, reps: int) -> None:
    """The training step of ``benches/blocks.py``, zyntax's and PyTorch's:
    wall time, kernels, copies and autograd nodes per step (see the module
    documentation)."""
    import cProfile
    import pstats

    from torch.profiler import ProfilerActivity, profile

    b, s, d, heads = blocks.TRAIN
    dev = torch.device("cuda", 0)
    w = blocks.Weights(torch, d, dev, grad=True)
    x = torch.randn(b, s, d, device=dev).to(torch.bfloat16)
    up = torch.randn(b, s, d, device=dev)
    impls = {
        "zyntax": lambda x: blocks.zyntax_train_block(torch, w, x, heads),
        "torch": lambda x: blocks.torch_block(torch, w, x, heads),
    }
    print(f"training step: b={b} s={s} d={d} heads={heads}, {reps} steps profiled")
    for name, block in impls.items():

        def step(block: Any = block) -> None:
            for p in w.params():
                p.grad = None
            (block(x).float() * up).sum().backward()

        for _ in range(3):  # compile, load, plan
            step()
        torch.cuda.synchronize()
        enqueue, wall = [], []
        for _ in range(10):
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            enqueue.append(t1 - t0)
            wall.append(time.perf_counter() - t0)
        print(
            f"\n{name}: step {min(wall) * 1e6:.0f} us wall (synchronized), "
            f"host enqueues it in {min(enqueue) * 1e6:.0f} us",
            flush=True,
        )
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                step()
            torch.cuda.synchronize()
        kernels, host = [], []
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", None)
            if us is None:  # older torch spelling
                us = e.cuda_time_total
            kind = str(getattr(e, "device_type", ""))
            if "CUDA" in kind and us > 0 and e.count:
                kernels.append((e.key, us / reps, e.count / reps))
            elif e.key in COPIES or "Backward" in e.key or "Function" in e.key:
                host.append((e.key, e.count / reps, e.cpu_time_total / reps))
        total = sum(r[1] for r in kernels)
        print(f"  {total:.1f} us of kernels per step, {sum(r[2] for r in kernels):.0f} launches")
        for key, us, n in sorted(kernels, key=lambda r: -r[1]):
            print(f"  {us:9.1f} us  x{n:<5.1f} {key[:110]}")
        print("  host ops per step (count, CPU us incl. children):")
        for key, n, us in sorted(host, key=lambda r: -r[2])[:30]:
            print(f"    x{n:<5.1f} {us:9.1f} us  {key[:100]}")
        if name == "zyntax":
            prof_py = cProfile.Profile()
            prof_py.enable()
            for _ in range(reps):
                step()
            prof_py.disable()
            torch.cuda.synchronize()
            print(f"  Python functions, {reps} steps (cProfile, by own time):")
            pstats.Stats(prof_py).sort_stats("tottime").print_stats(25)


def train_timing(torch: Any, steps: int) -> None:
    """The training step timed as ``benches/blocks.py`` times it (an event
    pair around each step, no synchronize between steps, 4 input sets):
    the spread of the event times and of the host's enqueue time per step,
    with and without Python's garbage collector, and zyntax's recordings
    (call-plan misses) and tensor maps made per step."""
    import gc
    import statistics

    from zyntax.kernels import _plans

    b, s, d, heads = blocks.TRAIN
    dev = torch.device("cuda", 0)
    w = blocks.Weights(torch, d, dev, grad=True)
    xs = [torch.randn(b, s, d, device=dev).to(torch.bfloat16) for _ in range(blocks.SETS)]
    ups = [torch.randn(b, s, d, device=dev) for _ in range(blocks.SETS)]
    impls = {
        "zyntax": lambda x: blocks.zyntax_train_block(torch, w, x, heads),
        "torch": lambda x: blocks.torch_block(torch, w, x, heads),
    }
    misses = [0]
    record = _plans._record

    def counted(*a: Any, **k: Any) -> Any:
        misses[0] += 1
        return record(*a, **k)

    _plans._record = counted  # type: ignore[assignment]

    def q(v: list[float]) -> str:
        v = sorted(v)
        return (
            f"min {v[0]:7.0f} med {statistics.median(v):7.0f} "
            f"p90 {v[int(0.9 * (len(v) - 1))]:7.0f} max {v[-1]:7.0f}"
        )

    print(f"\ntraining step timing ({steps} steps as blocks.py times them)")
    for name, block in impls.items():
        for collect in (True, False):

            def step(i: int, block: Any = block) -> float:
                """The step; returns when its forward was enqueued."""
                for p in w.params():
                    p.grad = None
                loss = (block(xs[i]).float() * ups[i]).sum()
                t = time.perf_counter()
                loss.backward()
                return t

            for i in range(blocks.SETS):
                step(i)
            torch.cuda.synchronize()
            if not collect:
                gc.disable()
            misses[0], maps0 = 0, _plans.tensor_map_at.cache_info().misses
            pairs, host, fwd = [], [], []
            for i in range(steps):
                e0, e1 = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                t0 = time.perf_counter()
                e0.record()
                t1 = step(i % blocks.SETS)
                e1.record()
                host.append((time.perf_counter() - t0) * 1e6)
                fwd.append((t1 - t0) * 1e6)
                pairs.append((e0, e1))
            torch.cuda.synchronize()
            gc.enable()
            ev = [a.elapsed_time(z) * 1e3 for a, z in pairs]
            maps = _plans.tensor_map_at.cache_info().misses - maps0
            print(
                f"  {name:6s} gc {'on ' if collect else 'off'} events {q(ev)} | host {q(host)}"
                f" | plan misses {misses[0] / steps:.2f}/step, maps made {maps / steps:.2f}/step"
                f"\n         host forward {q(fwd)}",
                flush=True,
            )
    _plans._record = record  # type: ignore[assignment]


def train_gemms(torch: Any, reps: int) -> None:
    """Each matrix product of the training step (forward, the GELU's
    pre-activation recomputed in f32, and the backward's dX = dY Wᵀ and
    dW = Xᵀ dY on transposed views, as torch_ops runs them), alone: the
    variant zyntax's route picks, its device time against PyTorch's
    (cuBLAS) for the same views, as graph replays."""
    from zyntax import kernels as zk

    bf = torch.bfloat16
    b, s, d, _ = blocks.TRAIN
    m = b * s

    def rnd(*shape: int) -> Any:
        return (torch.randn(*shape, device="cuda") * shape[0] ** -0.5).to(bf)

    print(f"\ntraining step's products (M = {m} tokens), us per call (CUDA graph of {reps})")
    total = {"zyntax": 0.0, "torch": 0.0}
    for layer, kk, n, act in (
        ("qkv", d, 3 * d, None),
        ("o", d, d, None),
        ("up", d, 4 * d, "gelu"),
        ("down", 4 * d, d, None),
    ):
        x, wm, bias, g = rnd(m, kk), rnd(kk, n), rnd(n), rnd(m, n)
        cases: list[tuple[str, Any, Any, dict[str, Any]]] = [
            (f"{layer} fwd {m}x{kk}x{n}", x, wm, {"bias": bias, "activation": act}),
            (f"{layer} dX {m}x{n}x{kk} (W.t())", g, wm.t(), {}),
            (f"{layer} dW {kk}x{m}x{n} (X.t())", x.t(), g, {}),
        ]
        if act:
            pre = {"bias": bias, "out_dtype": "f32"}
            cases.insert(1, (f"{layer} pre f32 {m}x{kk}x{n}", x, wm, pre))
        for name, a, bb, kw in cases:
            variant = zk.choose_variant(a, bb, **kw)

            def ours(a: Any = a, bb: Any = bb, kw: Any = kw) -> Any:
                return zk.matmul(a, bb, **kw)

            def theirs(a: Any = a, bb: Any = bb, kw: Any = kw) -> Any:
                y = a @ bb if kw.get("bias") is None else torch.addmm(kw["bias"], a, bb)
                if kw.get("out_dtype") == "f32":
                    y = y.float()
                if kw.get("activation"):
                    y = torch.nn.functional.gelu(y, approximate="tanh")
                return y

            zt, tt = graph_us(torch, ours, reps), graph_us(torch, theirs, reps)
            total["zyntax"] += zt
            total["torch"] += tt
            print(f"  {name:34s} {variant:9s} zyntax {zt:7.2f} torch {tt:7.2f}", flush=True)
    print(f"  total: zyntax {total['zyntax']:.1f} us, torch {total['torch']:.1f} us")


def graph_us(torch: Any, fn: Any, reps: int) -> float:
    """Best device time per call of `fn` over 5 replays of a CUDA graph of `reps` calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # compile, load, plan
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / reps)
    return best


def op_times(torch: Any, size: str, reps: int) -> None:
    """Prints each op of the block alone: zyntax's and PyTorch's device time (us)."""
    from zyntax import kernels as zk

    F = torch.nn.functional
    bf = torch.bfloat16
    b, s, d, heads = blocks.SIZES[size]
    rows = b * s

    def rnd(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, device="cuda") * scale).to(bf)

    def row(name: str, fns: dict[str, Any]) -> None:
        cells = []
        for impl, fn in fns.items():
            try:
                cells.append(f"{impl} {graph_us(torch, fn, reps):7.2f}")
            except Exception as e:  # a route that refuses the shape is reported
                cells.append(f"{impl} failed ({type(e).__name__}: {str(e)[:80]})")
        print(f"  {name:34s} " + " | ".join(cells), flush=True)

    x, w, bias = rnd(rows, d), 1 + rnd(d, scale=0.1), rnd(d, scale=0.1)
    row(
        f"layer_norm {rows}x{d}",
        {
            "zyntax": lambda: zk.layer_norm(x, w, bias),
            "torch": lambda: F.layer_norm(x, (d,), w, bias),
        },
    )
    q, k, v = (rnd(b, s, heads, d // heads).transpose(1, 2) for _ in range(3))
    row(
        f"attention {b}x{heads}x{s}x{d // heads} causal",
        {
            "zyntax": lambda: zk.attention(q, k, v, causal=True),
            "torch": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        },
    )
    for kk, n, act in ((d, 3 * d, None), (d, d, None), (d, 4 * d, "gelu"), (4 * d, d, None)):
        a, wm, bb = rnd(rows, kk), rnd(kk, n, scale=kk**-0.5), rnd(n, scale=0.02)
        wt = wm.t().contiguous()
        fns: dict[str, Any] = {
            "torch": (lambda a=a, wt=wt, bb=bb: F.gelu(F.linear(a, wt, bb), approximate="tanh"))
            if act
            else (lambda a=a, wt=wt, bb=bb: F.linear(a, wt, bb))
        }
        for var in (None, "tile", "mma_sync"):
            fns[f"zyntax {var or 'route'}"] = lambda a=a, wm=wm, bb=bb, var=var, act=act: zk.matmul(
                a, wm, bias=bb, activation=act, variant=var
            )
        row(f"matmul {rows}x{kk}x{n}{' gelu' if act else ''} + bias", fns)
    y = rnd(rows, d)
    row("residual add (PyTorch in both)", {"torch": lambda: x + y})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("size", nargs="?", default="medium", choices=[*sorted(blocks.SIZES), "train"])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--graph", action="store_true", help="each op alone in a CUDA graph")
    p.add_argument(
        "--timing",
        action="store_true",
        help="train: the step's time spread and each product's route instead of the profile",
    )
    args = p.parse_args()
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("blocks_profile: needs PyTorch with CUDA")
    if args.size == "train":
        if args.timing:
            train_timing(torch, 40)
            train_gemms(torch, args.reps)
        else:
            train_profile(torch, args.reps)
        return
    if args.graph:
        print(f"block {args.size}: each op alone, us per call (CUDA graph of {args.reps})")
        op_times(torch, args.size, args.reps)
        return
    dev = torch.device("cuda", 0)
    b, s, d, heads = blocks.SIZES[args.size]
    w = blocks.Weights(torch, d, dev)
    x = torch.randn(b, s, d, device=dev).to(torch.bfloat16)
    impls = {
        "zyntax": lambda: blocks.zyntax_block(w, x, heads),
        "torch": lambda: blocks.torch_block(torch, w, x, heads),
    }
    print(f"block {args.size}: b={b} s={s} d={d} heads={heads}, {args.reps} blocks profiled")
    for name, fn in impls.items():
        rows = kernel_times(torch, fn, args.reps)
        total = sum(r[1] for r in rows)
        print(f"\n{name}: {total:.1f} us of kernels per block")
        for key, us, n in rows:
            print(f"  {us:9.1f} us  x{n:<3d} {key[:110]}")


if __name__ == "__main__":
    main()
