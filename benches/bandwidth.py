"""Memory bandwidth of saxpy (y = a*x + y, f32, 256 Mi elements): the kernel
zyntax compiles from examples/saxpy.py, launched through zyntax.cuda, against
CuPy (ElementwiseKernel) and PyTorch (add_), with a ``peak`` row: the best
device-to-device copy bandwidth measured (CuPy / PyTorch memcpy). A
``d2d_copy`` case compares zyntax's own device-to-device copy with theirs.

Bytes counted: saxpy reads x and y and writes y (12 bytes per element); a
copy reads and writes once (8 bytes per element).

Cases ``h2d`` and ``d2h``: host-to-device and device-to-host copies of
256 MiB from pageable numpy memory, pinned memory (``cuda.pinned_empty``),
a registered numpy array (``cuda.register_host``) and managed memory
(``cuda.managed_empty``, moved with ``cuda.prefetch``).

Run on a GPU machine: ``python benches/bandwidth.py [--out-dir DIR] [--quick]``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import Results, best_of, optional, parse_args, per_call_us, ptx_kernels

from zyntax import cuda

F32 = np.float32


def gbps(nbytes: int, us: float) -> float:
    return nbytes / (us * 1e-6) / 1e9


def zyntax_saxpy(dev: int) -> tuple[Any, str]:
    """The compiled example kernel; the hand-written PTX only if the compiler is missing."""
    try:
        import saxpy  # examples/saxpy.py

        return cuda.load_hir(saxpy.build(), dev).kernel(
            "saxpy"
        ), "zyntax.compile(examples/saxpy.py)"
    except Exception as e:
        print(f"  (zyntax compiler unavailable: {type(e).__name__}: {e}; using hand-written PTX)")
        return cuda.load_module(ptx_kernels.SAXPY, dev).kernel("saxpy"), "hand-written PTX"


def vector_copy_module() -> Any:
    """examples/vector_copy.py's module (the examples are scripts, not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "vector_copy.py"
    spec = importlib.util.spec_from_file_location("vector_copy", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build()


def main() -> None:
    args = parse_args(__doc__ or "bandwidth bench")
    n = (1 << 24) if args.quick else (1 << 28)
    reps = 5 if args.quick else 20
    saxpy_bytes = 3 * n * 4
    copy_bytes = 2 * n * 4
    dev = cuda.Device(args.device)
    res = Results("bandwidth", dev.name)
    res.notes["elements"] = n
    print(f"bandwidth bench on {dev.name}: {n} f32 elements, {reps} repetitions")
    peaks: list[tuple[float, str]] = []

    # ---- zyntax
    k, source = zyntax_saxpy(args.device)
    legacy = cuda.Stream.legacy_default(args.device)
    x, y = cuda.empty(n, F32, args.device), cuda.empty(n, F32, args.device)
    x.copy_from_host(np.full(n, 1.0, F32))
    y.copy_from_host(np.full(n, 2.0, F32))
    launcher = k.prepare(n // 256, 256)
    step = functools.partial(launcher, n, 0.5, x, y)
    us = best_of(3, lambda: per_call_us(step, reps, legacy.synchronize))
    res.add("saxpy_f32", "zyntax", "GB_per_s", gbps(saxpy_bytes, us), False, kernel=source)
    # Sanity: every launch added 0.5 to y; check a sample against the count.
    runs = 3 * (reps + max(reps // 10, 1))
    sample = y.to_host()[:: max(n // 4096, 1)]
    expect = 2.0 + 0.5 * runs
    if not np.allclose(sample, expect):
        raise SystemExit(f"zyntax saxpy produced wrong values: {sample[:4]} (expected {expect})")
    copy = functools.partial(y.copy_from, x)
    us = best_of(3, lambda: per_call_us(copy, reps, legacy.synchronize))
    res.add(
        "d2d_copy", "zyntax", "GB_per_s", gbps(copy_bytes, us), False, api="DeviceArray.copy_from"
    )
    # A copy kernel written with zyntax (examples/vector_copy.py): 16-byte
    # loads through the read-only path, 16-byte stores, grid-stride.
    kv = cuda.load_hir(vector_copy_module()).kernel("copy_v4")
    grid = dev.sm_count * 8
    vstep = functools.partial(kv.prepare(grid, 256), y, x, n // 4)
    us = best_of(3, lambda: per_call_us(vstep, reps, legacy.synchronize))
    if not np.array_equal(x.to_host()[:: max(n // 4096, 1)], y.to_host()[:: max(n // 4096, 1)]):
        raise SystemExit("zyntax vector copy produced wrong values")
    res.add(
        "copy_kernel_f32x4",
        "zyntax",
        "GB_per_s",
        gbps(copy_bytes, us),
        False,
        kernel="examples/vector_copy.py copy_v4",
    )
    del x, y, launcher, step, copy
    cuda.empty_cache(args.device)

    # ---- CuPy
    cp = optional("cupy")
    if cp is not None:
        try:
            cx, cy = cp.ones(n, dtype=F32), cp.ones(n, dtype=F32)
            kern = cp.ElementwiseKernel(
                "float32 a, float32 x", "float32 y", "y = a * x + y", "saxpy"
            )
            a = F32(0.5)
            step = functools.partial(kern, a, cx, cy)
            sync = cp.cuda.Stream.null.synchronize
            us = best_of(3, lambda: per_call_us(step, reps, sync))
            res.add(
                "saxpy_f32",
                "cupy",
                "GB_per_s",
                gbps(saxpy_bytes, us),
                False,
                api="ElementwiseKernel",
            )
            copy = functools.partial(cy.data.copy_from_device_async, cx.data, n * 4)
            us = best_of(3, lambda: per_call_us(copy, reps, sync))
            bw = gbps(copy_bytes, us)
            res.add(
                "d2d_copy",
                "cupy",
                "GB_per_s",
                bw,
                False,
                api="MemoryPointer.copy_from_device_async",
            )
            peaks.append((bw, "cupy device-to-device memcpy"))
            del cx, cy
            cp.get_default_memory_pool().free_all_blocks()
        except Exception as e:
            print(f"  (cupy failed: {type(e).__name__}: {e})")

    # ---- PyTorch
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            tx = torch.ones(n, dtype=torch.float32, device="cuda")
            ty = torch.ones(n, dtype=torch.float32, device="cuda")
            step = functools.partial(ty.add_, tx, alpha=0.5)
            sync = torch.cuda.current_stream().synchronize
            us = best_of(3, lambda: per_call_us(step, reps, sync))
            res.add(
                "saxpy_f32",
                "torch",
                "GB_per_s",
                gbps(saxpy_bytes, us),
                False,
                api="Tensor.add_(x, alpha=a)",
            )
            copy = functools.partial(ty.copy_, tx)
            us = best_of(3, lambda: per_call_us(copy, reps, sync))
            bw = gbps(copy_bytes, us)
            res.add("d2d_copy", "torch", "GB_per_s", bw, False, api="Tensor.copy_")
            peaks.append((bw, "torch device-to-device copy"))
            del tx, ty
            torch.cuda.empty_cache()
        except Exception as e:
            print(f"  (torch failed: {type(e).__name__}: {e})")

    if peaks:
        bw, what = max(peaks)
        res.add("saxpy_f32", "peak", "GB_per_s", bw, False, source=what)
        res.add("copy_kernel_f32x4", "peak", "GB_per_s", bw, False, source=what)
    host_copies(res, args.device, (32 << 20) if args.quick else (256 << 20), reps)
    res.write(args.out_dir)


def timed_gbps(nbytes: int, reps: int, setup: Callable[[], Any], op: Callable[[], Any]) -> float:
    """Best bandwidth of `op` (which must wait for its copy) over `reps` runs."""
    best = float("inf")
    for _ in range(reps):
        setup()
        t0 = time.perf_counter()
        op()
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9


def host_copies(res: Results, dev: int, nbytes: int, reps: int) -> None:
    """H2D/D2H bandwidth for each kind of host memory (copies wait for completion)."""
    n = nbytes // 4
    d = cuda.empty(n, F32, dev)
    sync = functools.partial(cuda.synchronize, dev)
    kinds: dict[str, Any] = {
        "pageable": np.ones(n, F32),
        "pinned": cuda.pinned_empty(n, F32, dev),
    }
    reg_host = np.ones(n, F32)
    kinds["registered"] = reg_host
    registration = cuda.register_host(reg_host, dev)  # pins reg_host while alive
    for name, h in kinds.items():
        h[:] = 1.0
        res.add(
            "h2d",
            name,
            "GB_per_s",
            timed_gbps(nbytes, reps, sync, lambda h=h: d.copy_from_host(h)),
            False,
        )
        res.add(
            "d2h",
            name,
            "GB_per_s",
            timed_gbps(nbytes, reps, sync, lambda h=h: d.copy_to_host(h)),
            False,
        )
    # Zero-copy check: the registered array's device view reads the host memory.
    assert float(registration.to_host()[:4].sum()) == 4.0
    del registration
    try:
        m = cuda.managed_empty(n, F32, dev)
    except cuda.CudaError as e:
        print(f"  (managed memory unavailable: {e})")
        return
    cuda.managed_host_view(m)[:] = 1.0

    def to(where: Any) -> None:
        cuda.prefetch(m, where)
        sync()

    res.add(
        "h2d",
        "managed",
        "GB_per_s",
        timed_gbps(nbytes, reps, lambda: to("host"), lambda: to(dev)),
        False,
        api="prefetch",
    )
    res.add(
        "d2h",
        "managed",
        "GB_per_s",
        timed_gbps(nbytes, reps, lambda: to(dev), lambda: to("host")),
        False,
        api="prefetch",
    )


if __name__ == "__main__":
    try:
        main()
    except cuda.CudaError as e:
        raise SystemExit(f"bandwidth bench: {e}") from None
