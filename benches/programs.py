"""Programs of kernels (issue 17): a whole sequence of launches run by
zyntax's program executor, eagerly (``zyntax``: the executor's launches from
Rust, no graph) and replayed from a CUDA graph (``zyntax_graph``), against
PyTorch eager (``torch``) and a PyTorch CUDA graph of the same work
(``torch_cuda_graph``). Metric: microseconds per run of the whole program.

Cases:

* ``chain80_elementwise``: 80 dependent elementwise launches
  ``t[i+1] = a * t[i] + b`` over 16 Ki floats (launch-bound). zyntax runs a
  ``@zyntax.kernel``; PyTorch one ``torch.add(bfull, t, alpha=a, out=...)``
  per step (one kernel each).
* ``mlp3_step``: three ``relu(x @ W + b)`` layers (the last without relu),
  batch 64, width 256, f32. zyntax runs a ``lang.prange`` matmul nest
  auto-tiled through shared memory, bias and activation fused;
  PyTorch ``addmm`` + ``relu_`` (cuBLAS).

Also reported: the executor's planned temporary memory against one
allocation per temporary (``bytes``, impls ``planned`` / ``naive``).

Run on a GPU machine: ``python benches/programs.py [--out-dir DIR] [--quick]``.
With ``ZYNTAX_BENCH_TRACE=trace.json`` it also writes a ``zyntax.profile``
trace of building, preparing and running the chain program (compiles,
eager runs, capture, replays; see ``benches/render_trace.py``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from _common import Results, best_of, optional, parse_args, per_call_us

import zyntax
from zyntax import cuda, lang

F32 = np.float32
CHAIN = 80
N = 1 << 14
A, B = 0.999, 0.001
BATCH, WIDTH = 64, 256


def _affine(x, y, a, b, n):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < n:
        y[i] = x[i] * a + b


affine = zyntax.kernel(_affine)


def _linear(x, w, bias, out, relu):  # type: ignore[no-untyped-def]
    # A prange nest: the tiler stages x and w through shared memory
    # (docs/tiling.md); bias and activation are the nest's epilogue.
    for row, col in lang.prange(out.shape[0], out.shape[1]):
        acc = zyntax.f32(0)
        for kk in range(x.shape[1]):
            acc = lang.fma(x[row, kk], w[kk, col], acc)
        acc = acc + bias[col]
        if relu != 0:
            acc = max(acc, zyntax.f32(0))
        out[row, col] = acc


#: Workgroups (rows x cols) the bench tries for the layer; a 64 x 256 output
#: is only 64 blocks of 16 x 16 on a 132-SM H100, so smaller ones may win.
MLP_WORKGROUPS = [(16, 16), (8, 16), (8, 32), (4, 32)]
linears = {wg: zyntax.kernel(_linear, workgroup=wg) for wg in MLP_WORKGROUPS}
linear = linears[MLP_WORKGROUPS[0]]


def chain_program(dev: int, kernel: Any = affine) -> cuda.Program:
    p = cuda.Program(dev)
    prev = p.input("x", N)
    grid = (N + 255) // 256
    for i in range(CHAIN):
        nxt = p.output("y", N) if i == CHAIN - 1 else p.temporary(f"t{i}", N)
        p.launch(kernel, grid, 256, prev, nxt, A, B, N, writes=[nxt])
        prev = nxt
    return p


def mlp_program(dev: int, linear: Any = linear) -> cuda.Program:
    p = cuda.Program(dev)
    h = p.input("x", (BATCH, WIDTH))
    grid, block = linear.launch_grid(BATCH, WIDTH)
    for layer in range(3):
        w = p.parameter(f"w{layer}", (WIDTH, WIDTH))
        b = p.parameter(f"b{layer}", WIDTH)
        last = layer == 2
        out = p.output("y", (BATCH, WIDTH)) if last else p.temporary(f"h{layer}", (BATCH, WIDTH))
        p.launch(linear, grid, block, h, w, b, out, 0 if last else 1, writes=[out])
        h = out
    return p


def chain_ref(x: np.ndarray) -> np.ndarray:
    t = x.astype(np.float64)
    for _ in range(CHAIN):
        t = t * A + B
    return t


def mlp_ref(x: np.ndarray, params: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < 2:
            h = np.maximum(h, 0)
    return h


def time_exec(ex: Any, reps: int) -> float:
    return best_of(3, lambda: per_call_us(ex.run, reps, ex.synchronize))


def main() -> None:
    args = parse_args(__doc__ or "programs bench")
    reps = 50 if args.quick else 1000
    dev = cuda.Device(args.device)
    res = Results("programs", dev.name)
    res.notes.update(chain_len=CHAIN, chain_elements=N, mlp=f"{BATCH}x{WIDTH}, 3 layers")
    rng = np.random.default_rng()
    print(f"programs bench on {dev.name}, {reps} runs per measurement")

    # ---- chain80_elementwise
    xh = rng.random(N, dtype=F32)
    x, y = cuda.to_device(xh, args.device), cuda.empty(N, F32, args.device)
    prog = chain_program(args.device)
    plan = prog.plan()
    for impl, warm in (("zyntax", None), ("zyntax_graph", 0)):
        y.copy_from_host(np.full(N, np.nan, F32))
        ex = prog.prepare({"x": x, "y": y}, warmup=warm)
        ex.run()
        ex.synchronize()
        np.testing.assert_allclose(y.to_host(), chain_ref(xh), rtol=1e-4)
        res.add("chain80_elementwise", impl, "us_per_iteration", time_exec(ex, reps), True)
        assert ex.is_captured == (warm is not None)
        del ex
    res.add("chain80_elementwise", "planned", "bytes", plan["planned_bytes"], True)
    res.add("chain80_elementwise", "naive", "bytes", plan["naive_bytes"], True)

    # ---- mlp3_step
    params = [
        (
            (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(F32),
            rng.standard_normal(WIDTH).astype(F32) * F32(0.1),
        )
        for _ in range(3)
    ]
    mx = rng.standard_normal((BATCH, WIDTH)).astype(F32)
    binds: dict[str, Any] = {"x": cuda.to_device(mx, args.device)}
    for i, (w, b) in enumerate(params):
        binds[f"w{i}"] = cuda.to_device(w, args.device)
        binds[f"b{i}"] = cuda.to_device(b, args.device)
    my = cuda.empty((BATCH, WIDTH), F32, args.device)
    binds["y"] = my
    # Each workgroup's graph replay is timed; both zyntax rows report the best.
    graph_us: dict[tuple[int, int], float] = {}
    for wg, k in linears.items():
        my.copy_from_host(np.full((BATCH, WIDTH), np.nan, F32))
        ex = mlp_program(args.device, k).prepare(binds, warmup=0)
        ex.run()
        ex.synchronize()
        np.testing.assert_allclose(my.to_host(), mlp_ref(mx, params), rtol=1e-3, atol=1e-4)
        graph_us[wg] = time_exec(ex, reps)
        del ex
    best = min(graph_us, key=graph_us.__getitem__)
    res.notes["mlp3_workgroup_graph_us"] = {f"{r}x{c}": t for (r, c), t in graph_us.items()}
    mprog = mlp_program(args.device, linears[best])
    mplan = mprog.plan()
    for impl, warm in (("zyntax", None), ("zyntax_graph", 0)):
        my.copy_from_host(np.full((BATCH, WIDTH), np.nan, F32))
        ex = mprog.prepare(binds, warmup=warm)
        ex.run()
        ex.synchronize()
        np.testing.assert_allclose(my.to_host(), mlp_ref(mx, params), rtol=1e-3, atol=1e-4)
        us = time_exec(ex, reps)
        res.add("mlp3_step", impl, "us_per_iteration", us, True, workgroup=list(best))
        del ex
    res.add("mlp3_step", "planned", "bytes", mplan["planned_bytes"], True)
    res.add("mlp3_step", "naive", "bytes", mplan["naive_bytes"], True)

    # ---- PyTorch
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            torch_cases(torch, res, reps, xh, mx, params)
        except Exception as e:  # a peer failing is reported, never fatal
            print(f"  (torch failed: {type(e).__name__}: {e})")
    trace = os.environ.get("ZYNTAX_BENCH_TRACE")
    if trace:
        write_trace(trace, args.device, xh)
    res.write(args.out_dir)


def write_trace(path: str, dev: int, xh: np.ndarray) -> None:
    """A profile of a fresh chain program: compile, prepare, 3 eager runs,
    capture, replays, a rebind and the copies around them."""
    import tempfile

    # A fresh kernel object and an empty PTX cache: the compile is traced too.
    os.environ["ZYNTAX_CACHE_DIR"] = tempfile.mkdtemp()
    with zyntax.profile(path):
        prog = chain_program(dev, zyntax.kernel(_affine))
        x = cuda.to_device(xh, dev)
        y = cuda.empty(N, F32, dev)
        ex = prog.prepare({"x": x, "y": y}, warmup=3)
        ex.run(8)
        ex.bind("x", cuda.to_device(xh * 2, dev))
        ex.run(4)
        y.to_host()
    print(f"wrote {path}")


def torch_cases(
    torch: Any,
    res: Results,
    reps: int,
    xh: np.ndarray,
    mx: np.ndarray,
    params: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    dev = torch.device("cuda")
    tx = torch.from_numpy(xh).to(dev)
    bfull = torch.full_like(tx, B)
    bufs = [torch.empty_like(tx) for _ in range(CHAIN)]

    def chain() -> None:
        prev = tx
        for t in bufs:
            torch.add(bfull, prev, alpha=A, out=t)
            prev = t

    mxt = torch.from_numpy(mx).to(dev)
    ws = [(torch.from_numpy(w).to(dev), torch.from_numpy(b).to(dev)) for w, b in params]
    hs = [torch.empty(BATCH, WIDTH, device=dev) for _ in range(3)]

    def mlp() -> None:
        h = mxt
        for i, ((w, b), out) in enumerate(zip(ws, hs, strict=True)):
            torch.addmm(b, h, w, out=out)
            if i < 2:
                out.relu_()
            h = out

    # TF32 would make cuBLAS faster and less exact than the zyntax kernel.
    torch.backends.cuda.matmul.allow_tf32 = False
    sync = torch.cuda.synchronize

    def measure(f: Any) -> float:
        return best_of(3, lambda: per_call_us(f, reps, sync))

    for case, fn, check in (
        ("chain80_elementwise", chain, lambda: (bufs[-1], chain_ref(xh), 1e-4, 0.0)),
        ("mlp3_step", mlp, lambda: (hs[-1], mlp_ref(mx, params), 1e-3, 1e-4)),
    ):
        fn()
        sync()
        got, want, rtol, atol = check()
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=rtol, atol=atol)
        res.add(case, "torch", "us_per_iteration", measure(fn), True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        us = measure(g.replay)
        res.add(case, "torch_cuda_graph", "us_per_iteration", us, True)


if __name__ == "__main__":
    try:
        main()
    except cuda.CudaError as e:
        raise SystemExit(f"programs bench: {e}") from None
