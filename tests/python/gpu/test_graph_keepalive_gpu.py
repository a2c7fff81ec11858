"""Graphs own the memory they replay on (issue 10, item 1): arrays captured
into a graph or bound with ``set_kernel_args`` stay allocated for as long as
the graph or its executable can replay, so the pool never hands their blocks
to new arrays that a replay would then overwrite."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zyntax import cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gpu"))
import ptx_kernels  # tests/gpu/ptx_kernels.py

pytestmark = pytest.mark.gpu
F32 = np.float32
N = 65_536
GRID = N // 256


def saxpy() -> cuda.Kernel:
    return cuda.load_module(ptx_kernels.SAXPY).kernel("saxpy")


class Holder:
    """A foreign array (weak-referenceable) exporting a DeviceArray's memory."""

    def __init__(self, arr: cuda.DeviceArray) -> None:
        self.arr = arr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.arr.__cuda_array_interface__  # type: ignore[no-any-return]


def fresh_arrays(count: int) -> list[cuda.DeviceArray]:
    return [cuda.to_device(np.full(N, 1.0, F32)) for _ in range(count)]


def assert_untouched(arrays: list[cuda.DeviceArray]) -> None:
    for i, a in enumerate(arrays):
        got = a.to_host()
        assert np.all(got == 1.0), f"array {i} was written by a replay: {got[:4]}"


def test_replay_after_captured_arrays_are_dropped_writes_no_new_array() -> None:
    """The scenario of the issue: capture y += 5*x, drop x and y, allocate new
    arrays of the same size (which the pool would serve from the freed blocks),
    replay: the new arrays must not change."""
    rng = np.random.default_rng()
    k = saxpy()
    s = cuda.Stream()
    x = cuda.to_device(rng.random(N, dtype=F32) + F32(0.5))
    y = cuda.to_device(np.full(N, 1.0, F32))
    with cuda.capture(s) as cap:
        k.launch(GRID, 256, N, 5.0, x, y, stream=s)
    ex = cap.graph.instantiate()
    assert cap.graph.num_owners >= 2
    del x, y
    gc.collect()
    fresh = fresh_arrays(6)
    for _ in range(3):
        ex.launch(s)
    s.synchronize()
    assert_untouched(fresh)


def test_captured_owner_lives_as_long_as_the_executable() -> None:
    rng = np.random.default_rng()
    k = saxpy()
    s = cuda.Stream()
    xh = rng.random(N, dtype=F32) + F32(0.5)
    x = cuda.to_device(xh)
    y = Holder(cuda.to_device(np.zeros(N, F32)))
    probe = weakref.ref(y)
    with cuda.capture(s) as cap:
        k.launch(GRID, 256, N, 2.0, x, y, stream=s)
    ex = cap.graph.instantiate()
    del cap, y
    gc.collect()
    assert probe() is not None, "the graph dropped a captured array"
    ex.launch(s)
    ex.launch(s)
    s.synchronize()
    kept = probe()
    assert kept is not None
    np.testing.assert_allclose(kept.arr.to_host(), (F32(2.0) * xh) * 2, rtol=1e-6)
    del kept, ex
    gc.collect()
    assert probe() is None, "the array outlived its graph"


def test_set_kernel_args_keeps_new_arrays_and_releases_replaced_ones() -> None:
    rng = np.random.default_rng()
    k = saxpy()
    s = cuda.Stream()
    x = cuda.to_device(rng.random(N, dtype=F32))
    y0 = cuda.zeros(N, F32)  # (pool allocations cannot happen inside a capture)
    with cuda.capture(s) as cap:
        k.launch(GRID, 256, N, 1.0, x, y0, stream=s)
    del y0
    ex = cap.graph.instantiate()
    s.synchronize()
    xh = rng.random(N, dtype=F32) + F32(0.5)
    y1 = Holder(cuda.to_device(np.zeros(N, F32)))
    p1 = weakref.ref(y1)
    ex.set_kernel_args(0, k, N, 3.0, cuda.to_device(xh), y1)
    del y1
    gc.collect()
    assert p1() is not None, "set_kernel_args did not keep its array"
    fresh = fresh_arrays(4)
    ex.launch(s)
    s.synchronize()
    assert_untouched(fresh)
    kept = p1()
    assert kept is not None
    np.testing.assert_allclose(kept.arr.to_host(), F32(3.0) * xh, rtol=1e-6)
    del kept
    # Rebinding the node replaces its kept set; the replay above has
    # completed, so the old array is released.
    y2 = cuda.zeros(N, F32)
    ex.set_kernel_args(0, k, N, 1.0, x, y2)
    gc.collect()
    assert p1() is None, "the replaced array is still kept"
    ex.launch(s)
    s.synchronize()
    np.testing.assert_allclose(y2.to_host(), x.to_host(), rtol=1e-6)


def test_captured_copies_keep_both_sides() -> None:
    s = cuda.Stream()
    src = Holder(cuda.to_device(np.arange(N, dtype=F32)))
    probe = weakref.ref(src)
    dst = cuda.zeros(N, F32)
    with cuda.capture(s) as cap:
        dst.copy_from(src.arr, stream=s)
    ex = cap.graph.instantiate()
    arr_probe = src.arr
    del src
    gc.collect()
    assert probe() is None  # the holder itself was not captured...
    del arr_probe
    gc.collect()
    fresh = fresh_arrays(4)
    ex.launch(s)
    s.synchronize()
    assert_untouched(fresh)  # ...but its memory was
    np.testing.assert_array_equal(dst.to_host(), np.arange(N, dtype=F32))


def test_unowned_raw_addresses_show_the_scenario_detects_block_reuse() -> None:
    """The negative control of the first test: raw integer addresses are not
    owned (documented), so dropping their arrays lets the pool hand the
    blocks to new arrays, which the replay then overwrites. This is what
    every captured array suffered before graphs owned their memory."""
    rng = np.random.default_rng()
    k = saxpy()
    s = cuda.Stream()
    x = cuda.to_device(rng.random(N, dtype=F32) + F32(0.5))
    y = cuda.to_device(np.full(N, 1.0, F32))
    with cuda.capture(s) as cap:
        k.launch(GRID, 256, N, 5.0, x.ptr, y.ptr, stream=s)
    ex = cap.graph.instantiate()
    assert cap.graph.num_owners == 0
    del x, y
    gc.collect()
    fresh = fresh_arrays(6)
    ex.launch(s)
    s.synchronize()
    changed = [i for i, a in enumerate(fresh) if not np.all(a.to_host() == 1.0)]
    assert changed, (
        "the pool did not reuse the freed blocks: the scenario would not detect anything"
    )
