"""Issue 17 on the GPU: the program executor (validation, planned
temporaries, warm-up then graph replay, node updates on rebinding, owning its
buffers), managed and registered memory, and profiling traces."""

from __future__ import annotations

import gc
import json
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import cuda, lang

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gpu"))
import ptx_kernels  # tests/gpu/ptx_kernels.py

pytestmark = pytest.mark.gpu
F32 = np.float32
N = 50_000
GRID = (N + 255) // 256
A, B, S = 1.5, -0.25, 0.5


@zyntax.kernel
def affine(x, y, a, b, n):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < n:
        y[i] = x[i] * a + b


def saxpy() -> cuda.Kernel:
    return cuda.load_module(ptx_kernels.SAXPY).kernel("saxpy")


def program(temps: int = 4) -> cuda.Program:
    """x -> t0 -> ... -> y by affine (@zyntax.kernel), then y += S * x (PTX saxpy)."""
    p = cuda.Program()
    prev = p.input("x", N)
    y = p.output("y", N)
    for i in range(temps):
        t = p.temporary(f"t{i}", N)
        p.launch(affine, GRID, 256, prev, t, A, B, N, writes=[t])
        prev = t
    p.launch(affine, GRID, 256, prev, y, A, B, N, writes=[y])
    p.launch(saxpy(), GRID, 256, N, S, p.buffers[0], y, updates=[y])
    return p


def reference(x: np.ndarray, temps: int = 4) -> np.ndarray:
    t = x.astype(np.float64)
    for _ in range(temps + 1):
        t = t * A + B
    return t + S * x


class Holder:
    def __init__(self, arr: cuda.DeviceArray) -> None:
        self.arr = arr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.arr.__cuda_array_interface__  # type: ignore[no-any-return]


def test_program_runs_eagerly_then_replays_a_graph_and_rebinds_in_place() -> None:
    rng = np.random.default_rng()
    p = program()
    plan = p.plan()
    assert len(plan["slot_bytes"]) == 2 and plan["naive_bytes"] == 4 * N * 4
    assert plan["planned_bytes"] == 2 * N * 4
    xh = rng.standard_normal(N).astype(F32)
    x, y = cuda.to_device(xh), cuda.to_device(np.full(N, np.nan, F32))
    ex = p.prepare({"x": x, "y": y}, warmup=2)
    assert ex.plan == plan
    for run in range(4):
        y.copy_from_host(np.full(N, np.nan, F32))
        ex.run()
        ex.synchronize()
        np.testing.assert_allclose(y.to_host(), reference(xh), rtol=1e-5, atol=1e-5)
        assert ex.is_captured == (run >= 2)
    assert ex.counters == (4, 2, 0)
    # New input and output: the graph's nodes are updated, not re-captured.
    x2h = rng.standard_normal(N).astype(F32)
    x2, y2 = cuda.to_device(x2h), cuda.zeros(N, F32)
    ex.bind("x", x2)
    ex.bind("y", y2)
    ex.run()
    ex.synchronize()
    np.testing.assert_allclose(y2.to_host(), reference(x2h), rtol=1e-5, atol=1e-5)
    assert ex.counters == (5, 3, 2)
    assert ex.is_captured


def test_the_executor_owns_its_bindings() -> None:
    rng = np.random.default_rng()
    xh = rng.standard_normal(N).astype(F32)
    x = Holder(cuda.to_device(xh))
    y = Holder(cuda.zeros(N, F32))
    probes = weakref.ref(x), weakref.ref(y)
    ex = program().prepare({"x": x, "y": y}, warmup=0)
    del x, y
    gc.collect()
    assert all(p() is not None for p in probes)
    fresh = [cuda.to_device(np.full(N, 1.0, F32)) for _ in range(4)]
    ex.run(3)
    ex.synchronize()
    for f in fresh:
        assert np.all(f.to_host() == 1.0)
    ykept = probes[1]()
    assert ykept is not None
    np.testing.assert_allclose(ykept.arr.to_host(), reference(xh), rtol=1e-5, atol=1e-5)
    del ykept
    # Rebinding releases the old tensor once the queued runs are done
    # (foreign tensors bind like DeviceArrays).
    ex.bind("y", Holder(cuda.zeros(N, F32)))
    ex.run()
    ex.synchronize()
    ex.bind("x", cuda.zeros(N, F32))
    gc.collect()
    assert probes[1]() is None and probes[0]() is None
    del ex
    gc.collect()


def test_bindings_are_validated_by_name() -> None:
    p = program()
    x, y = cuda.zeros(N, F32), cuda.zeros(N, F32)

    def fails(bindings: dict[str, Any], match: str, kind: str = "binding") -> None:
        with pytest.raises(zyntax.CudaError, match=match) as e:
            p.prepare(bindings)
        assert e.value.kind == kind

    fails(
        {"x": cuda.zeros(N + 1, F32), "y": y},
        r"binding 'x': shape \(50001,\) does not match the program's \(50000,\)",
    )
    fails(
        {"x": x, "y": cuda.zeros(N, np.float64)},
        "binding 'y': dtype f64 does not match the program's f32",
    )
    fails({"x": x}, "binding 'y': no tensor bound to this output")
    fails({"x": x, "y": y, "t0": y}, "binding 't0': is a temporary")
    fails({"x": x, "y": y, "z": y}, "binding 'z': the program has no such buffer")
    fails({"x": np.zeros(N, F32), "y": y}, "binding 'x': is a host array")
    wide = cuda.zeros((N, 2), F32)
    cai = dict(wide.__cuda_array_interface__, shape=(N,), strides=(8,))
    strided = type("Strided", (), {"__cuda_array_interface__": cai, "keep": wide})()
    fails({"x": strided, "y": y}, "binding 'x': layout: strides")
    ex = p.prepare({"x": x, "y": y})
    with pytest.raises(zyntax.CudaError, match="binding 'x': shape"):
        ex.bind("x", cuda.zeros(3, F32))
    with pytest.raises(zyntax.CudaError, match="binding 't1': not an input"):
        ex.bind("t1", cuda.zeros(N, F32))
    ex.run()
    ex.synchronize()  # the context is still usable


def test_reading_a_temporary_before_writing_it_is_reported_at_prepare() -> None:
    p = cuda.Program()
    x = p.input("x", N)
    t = p.temporary("acc", N)
    p.launch(saxpy(), GRID, 256, N, S, x, t, updates=[t])
    with pytest.raises(zyntax.CudaError, match=r"launch #0 \(`saxpy`\) reads temporary 'acc'"):
        p.prepare({"x": cuda.zeros(N, F32)})


def test_managed_memory_prefetch_advise_and_the_free_memory_limit() -> None:
    rng = np.random.default_rng()
    k = saxpy()
    xh = rng.random(N, dtype=F32)
    m = cuda.managed_empty(N, F32)
    assert cuda.memory_kind(m) == "managed"
    host = cuda.managed_host_view(m)
    host[:] = 2.0
    cuda.advise(m, "preferred_location", 0)
    cuda.advise(m, "accessed_by", "host")
    cuda.prefetch(m, 0)
    k.launch(GRID, 256, N, 3.0, cuda.to_device(xh), m)
    cuda.prefetch(m, "host")
    cuda.synchronize()
    np.testing.assert_allclose(host, 2.0 + 3.0 * xh, rtol=1e-6)
    free, _ = cuda.Device(0).mem_info()
    with pytest.raises(zyntax.CudaError, match="free memory") as e:
        cuda.managed_empty(free // 4 + (1 << 30), F32)
    assert e.value.kind == "out_of_memory"
    with pytest.raises(zyntax.CudaError, match="needs a managed array"):
        cuda.prefetch(cuda.zeros(4, F32), 0)
    with pytest.raises(zyntax.CudaError, match="unknown memory advice"):
        cuda.advise(m, "fast_please")
    assert np.all(cuda.to_device(np.ones(4, F32)).to_host() == 1)  # context usable


def test_registered_host_memory_is_zero_copy_and_unregistered_on_release() -> None:
    rng = np.random.default_rng()
    k = saxpy()
    xh = rng.random(N, dtype=F32)
    yh = rng.random(N, dtype=F32)
    want = yh + F32(2.0) * xh
    d = cuda.register_host(yh)
    assert cuda.memory_kind(d) == "registered"
    k.launch(GRID, 256, N, 2.0, cuda.to_device(xh), d)
    cuda.synchronize()
    np.testing.assert_allclose(yh, want, rtol=1e-6)  # written in place, no copy back
    del d
    gc.collect()
    # Registering the same memory again only works if the first was released.
    again = cuda.register_host(yh)
    del again
    with pytest.raises(zyntax.CudaError, match="read-only"):
        ro = np.zeros(8, F32)
        ro.flags.writeable = False
        cuda.register_host(ro)


def test_profile_records_launches_with_device_time_copies_and_memory(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    rng = np.random.default_rng()
    with zyntax.profile(path) as prof:
        k = cuda.load_module(ptx_kernels.SAXPY + "\n// profiled\n").kernel("saxpy")
        x = cuda.to_device(rng.random(N, dtype=F32))
        y = cuda.zeros(N, F32)
        for _ in range(3):
            k.launch(GRID, 256, N, 1.0, x, y)
        ex = program().prepare({"x": x, "y": y}, warmup=1)
        ex.run(3)
        y.to_host()
    names = [e["name"] for e in prof.events]
    assert "module load" in names
    assert names.count("launch saxpy") >= 3
    gpu = [e for e in prof.events if e["track"][0] == "device"]
    kernels = [e for e in gpu if e["name"] == "saxpy"]
    assert len(kernels) >= 3 and all(e["dur"] > 0 for e in kernels)
    assert any(e["name"] == "graph replay" for e in gpu)
    assert any(e["name"] == "copy HtoD" for e in prof.events)
    assert any(e["name"] == "copy DtoH" for e in prof.events)
    counters = [e for e in prof.events if e["ph"] == "C"]
    assert counters and all("in_use_bytes" in e["args"] for e in counters)
    doc = json.loads(path.read_text())
    assert any(e.get("args", {}).get("name") == "GPU 0" for e in doc["traceEvents"])
