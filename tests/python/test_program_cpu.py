"""The program executor's planning and checks, the memory kinds and the
profiler without a GPU (issue 17): liveness planning, read-before-write,
recording errors, the no-driver behaviour and the Chrome-trace format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zyntax
from zyntax import _native, cuda, hir

F32 = "float32"


def chain(n: int, size: int = 1000) -> tuple[list, list]:
    """x -> t0 -> ... -> t{n-1} -> y: each launch reads the previous buffer."""
    buffers = [("x", "input", F32, [size])]
    buffers += [(f"t{i}", "temporary", F32, [size]) for i in range(n)]
    buffers.append(("y", "output", F32, [size]))
    steps = [(f"k{i}", [(i, "read"), (i + 1, "write")]) for i in range(n + 1)]
    return buffers, steps


@pytest.mark.parametrize("n", [2, 5, 80])
def test_a_chain_of_temporaries_fits_two_allocations(n: int) -> None:
    plan = _native.cuda_program_plan(*chain(n))
    assert plan["slot_bytes"] == [4000, 4000]
    assert plan["planned_bytes"] == 8000
    assert plan["naive_bytes"] == 4000 * n
    # Neighbours in the chain are live together, so they never share.
    a = plan["assignment"]
    assert all(a[f"t{i}"] != a[f"t{i + 1}"] for i in range(n - 1))
    assert "x" not in a and "y" not in a


def test_random_programs_never_share_memory_between_live_temporaries() -> None:
    rng = np.random.default_rng()
    for _ in range(100):
        nb = int(rng.integers(2, 10))
        buffers = [("in", "input", F32, [8])]
        buffers += [
            (
                f"t{i}",
                "temporary",
                rng.choice(["float32", "float64", "int8"]),
                [int(rng.integers(1, 900))],
            )
            for i in range(nb)
        ]
        steps = [
            (
                f"s{s}",
                [(int(rng.integers(0, nb + 1)), "write") for _ in range(int(rng.integers(1, 4)))],
            )
            for s in range(int(rng.integers(1, 12)))
        ]
        plan = _native.cuda_program_plan(buffers, steps)
        life: dict[str, tuple[int, int]] = {}
        for s, (_, uses) in enumerate(steps):
            for b, _acc in uses:
                name = buffers[b][0]
                lo, _hi = life.get(name, (s, s))
                life[name] = (lo, s)
        a = plan["assignment"]
        assert set(a) == {n for n in life if n != "in"}
        for x in a:
            size = (
                np.dtype(buffers[[b[0] for b in buffers].index(x)][2]).itemsize
                * buffers[[b[0] for b in buffers].index(x)][3][0]
            )
            assert plan["slot_bytes"][a[x]] >= size
            for y in a:
                if x < y and a[x] == a[y]:
                    (lx, hx), (ly, hy) = life[x], life[y]
                    assert hx < ly or hy < lx, f"{x}{life[x]} and {y}{life[y]} share"
        assert plan["planned_bytes"] == sum(plan["slot_bytes"]) <= plan["naive_bytes"]


def test_reading_a_temporary_before_it_is_written_names_the_launch() -> None:
    buffers = [("x", "input", F32, [4]), ("acc", "temporary", F32, [4])]
    with pytest.raises(zyntax.CudaError, match=r"launch #0 \(`accumulate`\) reads temporary 'acc'"):
        _native.cuda_program_check(buffers, [("accumulate", [(0, "read"), (1, "readwrite")])])
    _native.cuda_program_check(buffers, [("init", [(1, "write")]), ("acc", [(1, "readwrite")])])
    with pytest.raises(zyntax.CudaError, match="already has a buffer named 'x'"):
        _native.cuda_program_plan([*buffers, ("x", "output", F32, [4])], [])
    with pytest.raises(zyntax.CudaError, match="role must be"):
        _native.cuda_program_plan([("x", "scratch", F32, [4])], [])
    with pytest.raises(zyntax.CudaError, match="no zero extent"):
        _native.cuda_program_plan([("x", "input", F32, [4, 0])], [])
    with pytest.raises(zyntax.ArgumentError, match="access must be"):
        _native.cuda_program_plan(buffers, [("k", [(0, "sometimes")])])


def test_program_recording_without_a_gpu() -> None:
    p = cuda.Program()
    x = p.input("x", 16)
    t = p.temporary("t", (4, 4), np.float64)
    p.output("y", 16)
    assert (x.shape, t.shape, t.strides) == ((16,), (4, 4), (32, 8))
    with pytest.raises(zyntax.CudaError, match="already has a buffer named 'x'"):
        p.parameter("x", 3)
    with pytest.raises(zyntax.ArgumentError, match=r"takes a zyntax\.cuda\.Kernel"):
        p.launch(print, 1, 1, x)
    other = cuda.Program().input("x", 16)
    with pytest.raises(zyntax.CudaError, match="not a buffer of this program"):
        p.launch(print, 1, 1, x, writes=[other])
    plan = p.plan()  # nothing launched: nothing to allocate
    assert plan["slot_bytes"] == [] and plan["naive_bytes"] == 0
    p.check()


PROBE = r"""
import json, numpy as np, zyntax
from zyntax import cuda
out = {}
def run(name, fn):
    try:
        fn(); out[name] = "no error"
    except zyntax.CudaError as e:
        out[name] = getattr(e, "kind", None)
p = cuda.Program()
p.input("x", 4)
run("prepare", lambda: p.prepare({"x": cuda.empty(4, np.float32)}))
run("prepare_host", lambda: p.prepare({"x": np.zeros(4, np.float32)}))
run("managed_empty", lambda: cuda.managed_empty(16, np.float32))
run("register_host", lambda: cuda.register_host(np.zeros(16, np.float32)))
print(json.dumps(out))
"""


def test_memory_kinds_and_prepare_without_a_driver_are_cuda_errors() -> None:
    env = dict(os.environ, ZYNTAX_DISABLE_CUDA="1")
    r = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out == {
        "prepare": "no_driver",
        "prepare_host": "binding",
        "managed_empty": "no_driver",
        "register_host": "no_driver",
    }


def saxpy_module() -> hir.Module:
    import saxpy  # examples/saxpy.py

    m: hir.Module = saxpy.build()
    return m


def test_profile_writes_a_chrome_trace_of_compiles_per_stage(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    with zyntax.profile(path) as prof:
        zyntax.compile(saxpy_module(), arch="sm_80")
    doc = json.loads(path.read_text())
    assert doc["otherData"]["producer"] == "zyntax.profile"
    events = doc["traceEvents"]
    for e in events:
        assert {"ph", "name", "pid"} <= set(e)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0 and "tid" in e
    spans = [e for e in events if e["ph"] == "X" and e["cat"] == "compile"]
    names = [e["name"] for e in spans]
    assert "compile sm_80" in names
    stages = [n for n in names if n.startswith("compile sm_80: ")]
    assert {"compile sm_80: optimize", "compile sm_80: codegen"} <= set(stages), names
    whole = next(e for e in spans if e["name"] == "compile sm_80")
    assert sum(e["dur"] for e in spans if e["name"] in stages) <= whole["dur"] * 1.05 + 50
    assert any(e["ph"] == "M" and e["args"].get("name") == "host (zyntax)" for e in events)
    assert prof.events and all(
        a["ts"] <= b["ts"] for a, b in zip(prof.events, prof.events[1:], strict=False)
    )
    # Outside the block nothing is recorded, and profiles do not nest.
    assert zyntax.profiling.current() is None
    with zyntax.profile(), pytest.raises(RuntimeError, match="already running"):
        zyntax.profile().__enter__()
