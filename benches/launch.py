"""Kernel launch overhead: zyntax.cuda against CuPy, PyTorch, Triton,
cuda-bindings and a C loop calling cuLaunchKernel (the floor).

Cases (JSON format: docs/performance.md):
  empty_kernel/us_per_launch        async launches of an empty 1x1 kernel, back to back
  empty_kernel_sync/us_per_roundtrip launch + synchronize, one at a time
  graph_replay/us_per_kernel        a captured graph of 100 empty kernels, replayed

Run on a GPU machine: ``python benches/launch.py [--out-dir DIR] [--quick]``.
Peers that fail to import are skipped.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, Results, best_of, optional, parse_args, per_call_us, ptx_kernels

from zyntax import cuda

EMPTY_CU = 'extern "C" __global__ void empty() {}'
GRAPH_KERNELS = 100


def bench_zyntax(res: Results, dev: int, iters: int, replays: int) -> None:
    k = cuda.load_module(ptx_kernels.EMPTY, dev).kernel("empty")
    legacy = cuda.Stream.legacy_default(dev)
    launcher = k.prepare(1, 1)  # validated once; each call only launches
    res.add(
        "empty_kernel",
        "zyntax",
        "us_per_launch",
        best_of(3, lambda: per_call_us(launcher, iters, legacy.synchronize)),
        True,
        api="Kernel.prepare(1, 1)()",
    )
    # The validating entry point, for reference (not a separate case).
    launch = functools.partial(k.launch, 1, 1)
    res.notes["zyntax_kernel_launch_us_per_launch"] = round(
        best_of(3, lambda: per_call_us(launch, iters, legacy.synchronize)), 4
    )

    def roundtrip() -> None:
        launcher()
        legacy.synchronize()

    res.add(
        "empty_kernel_sync",
        "zyntax",
        "us_per_roundtrip",
        best_of(3, lambda: per_call_us(roundtrip, iters // 10, legacy.synchronize)),
        True,
    )
    s = cuda.Stream(dev)
    on_s = k.prepare(1, 1, stream=s)
    with cuda.capture(s) as cap:
        for _ in range(GRAPH_KERNELS):
            on_s()
    ex = cap.graph.instantiate()
    replay = functools.partial(ex.launch, s)
    res.add(
        "graph_replay",
        "zyntax",
        "us_per_kernel",
        best_of(3, lambda: per_call_us(replay, replays, s.synchronize)) / GRAPH_KERNELS,
        True,
        kernels_per_graph=GRAPH_KERNELS,
    )


def bench_cupy(res: Results, iters: int) -> None:
    cp = optional("cupy")
    if cp is None:
        return
    try:
        fn = cp.RawKernel(EMPTY_CU, "empty")
        fn((1,), (1,), ())
        api = "RawKernel"
    except Exception as e:  # no NVRTC: load our PTX instead (same launch path)
        print(f"  (cupy RawKernel failed: {e}; using RawModule with PTX)")
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx_kernels.EMPTY)
        fn = cp.RawModule(path=f.name).get_function("empty")
        api = "RawModule.get_function"
    launch = functools.partial(fn, (1,), (1,), ())
    sync = cp.cuda.Stream.null.synchronize
    res.add(
        "empty_kernel",
        "cupy",
        "us_per_launch",
        best_of(3, lambda: per_call_us(launch, iters, sync)),
        True,
        api=api,
    )

    def roundtrip() -> None:
        launch()
        sync()

    res.add(
        "empty_kernel_sync",
        "cupy",
        "us_per_roundtrip",
        best_of(3, lambda: per_call_us(roundtrip, iters // 10, sync)),
        True,
    )


def _torch_empty(torch: Any) -> tuple[Any, str]:
    """The cheapest kernel launch PyTorch offers: its 1x1 spin kernel with 0 cycles."""
    if hasattr(torch.cuda, "_sleep"):
        return functools.partial(torch.cuda._sleep, 0), "torch.cuda._sleep(0)"
    t = torch.zeros(1, device="cuda")
    return t.zero_, "Tensor.zero_ (1 element)"


def bench_torch(res: Results, iters: int, replays: int) -> None:
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        return
    launch, api = _torch_empty(torch)
    sync = torch.cuda.current_stream().synchronize
    res.add(
        "empty_kernel",
        "torch",
        "us_per_launch",
        best_of(3, lambda: per_call_us(launch, iters, sync)),
        True,
        api=api,
    )

    def roundtrip() -> None:
        launch()
        sync()

    res.add(
        "empty_kernel_sync",
        "torch",
        "us_per_roundtrip",
        best_of(3, lambda: per_call_us(roundtrip, iters // 10, sync)),
        True,
    )
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                launch()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(GRAPH_KERNELS):
                launch()
        torch.cuda.synchronize()
        res.add(
            "graph_replay",
            "torch",
            "us_per_kernel",
            best_of(3, lambda: per_call_us(g.replay, replays, torch.cuda.synchronize))
            / GRAPH_KERNELS,
            True,
            api=f"torch.cuda.CUDAGraph of {api}",
            kernels_per_graph=GRAPH_KERNELS,
        )
    except Exception as e:
        print(f"  (torch graph capture failed: {type(e).__name__}: {e})")


def bench_triton(res: Results, iters: int) -> None:
    triton = optional("triton")
    torch = optional("torch")
    if triton is None or torch is None:
        return
    try:

        @triton.jit
        def empty_triton():  # type: ignore[no-untyped-def]
            pass

        launch = empty_triton[(1,)]
        launch()
        sync = torch.cuda.current_stream().synchronize
        sync()
        res.add(
            "empty_kernel",
            "triton",
            "us_per_launch",
            best_of(3, lambda: per_call_us(launch, iters // 4, sync)),
            True,
        )
    except Exception as e:
        print(f"  (triton failed: {type(e).__name__}: {e})")


def bench_cuda_bindings(res: Results, dev: int, iters: int) -> None:
    drv = optional("cuda.bindings.driver")
    if drv is None:
        legacy = optional("cuda.cuda")  # cuda-python < 12.6 spelling
        drv = legacy
    if drv is None:
        return

    def ok(out: Any) -> Any:
        err = out[0] if isinstance(out, tuple) else out
        if int(getattr(err, "value", err)) != 0:
            raise RuntimeError(f"cuda-bindings call failed: {err}")
        return out[1] if isinstance(out, tuple) and len(out) > 1 else None

    try:
        ok(drv.cuInit(0))
        d = ok(drv.cuDeviceGet(dev))
        ctx = ok(drv.cuDevicePrimaryCtxRetain(d))
        ok(drv.cuCtxSetCurrent(ctx))
        mod = ok(drv.cuModuleLoadData(ptx_kernels.EMPTY.encode() + b"\0"))
        fn = ok(drv.cuModuleGetFunction(mod, b"empty"))
        launch = functools.partial(drv.cuLaunchKernel, fn, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0)
        ok(launch())
        sync = functools.partial(drv.cuStreamSynchronize, 0)
        res.add(
            "empty_kernel",
            "cuda-bindings",
            "us_per_launch",
            best_of(3, lambda: per_call_us(launch, iters, sync)),
            True,
            api="cuLaunchKernel",
        )

        def roundtrip() -> None:
            launch()
            sync()

        res.add(
            "empty_kernel_sync",
            "cuda-bindings",
            "us_per_roundtrip",
            best_of(3, lambda: per_call_us(roundtrip, iters // 10, sync)),
            True,
        )
    except Exception as e:
        print(f"  (cuda-bindings failed: {type(e).__name__}: {e})")


def bench_c_floor(res: Results, iters: int) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        print("  (skipping c_cuLaunchKernel: no C compiler)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "launch_floor"
        ptx = Path(tmp) / "empty.ptx"
        ptx.write_text(ptx_kernels.EMPTY)
        src = ROOT / "benches" / "c" / "launch_floor.c"
        cc = subprocess.run(
            [gcc, "-O2", "-o", str(exe), str(src), "-ldl"], capture_output=True, text=True
        )
        if cc.returncode != 0:
            print(f"  (skipping c_cuLaunchKernel: build failed: {cc.stderr.strip()})")
            return
        best: dict[str, float] = {}
        for _ in range(3):
            run = subprocess.run(
                [str(exe), str(ptx), str(iters)], capture_output=True, text=True, timeout=600
            )
            if run.returncode != 0:
                print(f"  (c_cuLaunchKernel failed: {run.stderr.strip()})")
                return
            out = json.loads(run.stdout)
            for k in ("us_per_launch", "us_per_roundtrip"):
                best[k] = min(best.get(k, float("inf")), float(out[k]))
    res.add(
        "empty_kernel",
        "c_cuLaunchKernel",
        "us_per_launch",
        best["us_per_launch"],
        True,
        source="benches/c/launch_floor.c",
    )
    res.add(
        "empty_kernel_sync",
        "c_cuLaunchKernel",
        "us_per_roundtrip",
        best["us_per_roundtrip"],
        True,
        source="benches/c/launch_floor.c",
    )


def main() -> None:
    args = parse_args(__doc__ or "launch bench")
    iters = 20_000 if args.quick else 200_000
    replays = 50 if args.quick else 500
    dev = cuda.Device(args.device)
    res = Results("launch", dev.name)
    print(f"launch bench on {dev.name} ({dev.arch}), {iters} launches per measurement")
    bench_zyntax(res, args.device, iters, replays)
    bench_c_floor(res, iters)
    bench_cuda_bindings(res, args.device, iters)
    bench_cupy(res, iters)
    bench_torch(res, iters, replays)
    bench_triton(res, iters)
    floor = next(
        (
            r["value"]
            for r in res.rows
            if r["impl"] == "c_cuLaunchKernel" and r["case"] == "empty_kernel"
        ),
        None,
    )
    ours = next(
        (r["value"] for r in res.rows if r["impl"] == "zyntax" and r["case"] == "empty_kernel"),
        None,
    )
    if floor and ours:
        res.notes["zyntax_over_c_floor"] = round(ours / floor, 3)
    res.write(args.out_dir)


if __name__ == "__main__":
    try:
        main()
    except cuda.CudaError as e:
        raise SystemExit(f"launch bench: {e}") from None
