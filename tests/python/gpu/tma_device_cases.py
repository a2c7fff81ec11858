"""TMA on the device (issue 13 item 2), run by test_tma_gpu.py in child
processes: the kernels of tests/python/test_tma.py with tensor maps from
`zyntax.cuda.TensorMap.tiled` give, element by element, the numpy model of
the shared box (every swizzle, boxes crossing the edge with zero and NaN
fill, 1-/3-/5-D), stores and reductions, and 1-D bulk copies and reductions;
the interpreter gives the same. Tensor maps over PyTorch tensors, graph
replay after the map is dropped, the example and its zyntax.lang twin, and
the device-side checks. Needs sm_90 (H100/H200).
"""

from __future__ import annotations

import gc
import subprocess
import sys
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import test_tma as cpu
from zyntax import cuda, interp
from zyntax.errors import ArgumentError, LaunchError

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _sm90() -> None:
    if cuda.device_arch() not in ("sm_90", "sm_90a"):
        pytest.skip("TMA needs sm_90")


def gpu_launch(m: Any, grid: int, block: int, *args: Any, shared_bytes: int) -> np.ndarray:
    """Launches `load` on the device; args[0] is a cuda.TensorMap, args[1] the host output."""
    k = cuda.load_hir(m, arch="sm_90").kernel(m.kernels[0])
    host_out = args[1]
    out = cuda.to_device(host_out)
    k.launch(grid, block, args[0], out, *args[2:], shared_mem=shared_bytes)
    res: np.ndarray = out.to_host()
    return res


def _narrow(elem: str, box: tuple[int, ...], mode: str) -> bool:
    """The inner box is narrower than the swizzle span (64 bytes under 128B):
    the case that faulted on the H100 (docs/gpu-runs.md)."""
    return mode != "none" and box[0] * np.dtype(cpu.NUMPY[elem]).itemsize < cpu.SPAN[mode]


@pytest.mark.parametrize(
    ("elem", "shape", "box", "mode"), [c for c in cpu.LOAD_CASES if not _narrow(c[0], c[2], c[3])]
)
@pytest.mark.parametrize("edge", [False, True])
def test_tile_load_element_by_element(
    elem: str, shape: tuple[int, ...], box: tuple[int, ...], mode: str, edge: bool
) -> None:
    x = cpu.rand(elem, shape)
    coords = cpu.load_case(shape, box, edge, x.itemsize)
    want = cpu.model_load(x, box, coords, mode)
    m = cpu.load_module(elem, 2)
    tm = cuda.TensorMap.tiled(cuda.to_device(x), box, swizzle=mode)
    assert tm.box_bytes == prod(box) * x.itemsize == tm.shared_bytes
    got = cpu.run_load(gpu_launch, m, tm, x, box, coords)
    np.testing.assert_array_equal(got, want)
    itm = interp.TensorMap.tiled(x, box, swizzle=mode)
    np.testing.assert_array_equal(cpu.run_load(cpu.interp_launch, m, itm, x, box, coords), got)


@pytest.mark.parametrize(
    ("elem", "shape", "box", "mode"),
    [c for c in cpu.LOAD_CASES if _narrow(c[0], c[2], c[3])]
    + [("f32", (2 * 3 * 3 * 4, 16), (8, 2), "64B")],
)
def test_narrow_swizzled_box(
    elem: str, shape: tuple[int, ...], box: tuple[int, ...], mode: str
) -> None:
    """A box narrower than its swizzle span, inside the tensor (no edge):
    each row a whole span apart, the bytes between rows left as they were
    (the canary), the kernel's shared size counting them."""
    x = cpu.rand(elem, shape)
    coords = cpu.load_case(shape, box, False, x.itemsize)
    tm = cuda.TensorMap.tiled(cuda.to_device(x), box, swizzle=mode)
    assert tm.shared_bytes == prod(box[1:]) * cpu.SPAN[mode] > tm.box_bytes
    m = cpu.load_module(elem, len(box))
    got = cpu.run_load(gpu_launch, m, tm, x, box, coords)
    np.testing.assert_array_equal(got, cpu.model_load(x, box, coords, mode))
    itm = interp.TensorMap.tiled(x, box, swizzle=mode)
    np.testing.assert_array_equal(cpu.run_load(cpu.interp_launch, m, itm, x, box, coords), got)


@pytest.mark.parametrize(
    ("elem", "box", "mode"), [("f32", (16, 8), "128B"), ("f16", (16, 8), "64B")]
)
def test_narrow_swizzled_box_store(elem: str, box: tuple[int, int], mode: str) -> None:
    """A store of a narrow box reads its rows a whole span apart."""
    x = cpu.rand(elem, (16, 128))
    dx = cuda.to_device(x)
    tm = cuda.TensorMap.tiled(dx, box, swizzle=mode)
    img = cpu.rand(elem, (tm.shared_bytes // x.itemsize,))
    coords = [32, 4]
    want = cpu.model_store(x, img, box, coords, mode)
    k = cuda.load_hir(cpu.store_module(elem, 2), arch="sm_90").kernel("store")
    k.launch(1, 128, tm, cuda.to_device(img), img.size, *coords, shared_mem=cpu.BOX_AT + img.nbytes)
    np.testing.assert_array_equal(dx.to_host(), want)


@pytest.mark.parametrize(("es", "box", "coords"), cpu.NAN_FILL_CASES)
def test_nan_fill_and_element_strides(
    es: tuple[int, int], box: tuple[int, int], coords: tuple[int, int]
) -> None:
    x = cpu.rand("f32", (12, 40))
    tm = cuda.TensorMap.tiled(cuda.to_device(x), box, element_strides=es, oob_fill="nan")
    m = cpu.load_module("f32", 2)
    got = cpu.run_load(gpu_launch, m, tm, x, box, coords, es)
    want = cpu.model_load(x, box, coords, "none", es, fill=np.nan)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    itm = interp.TensorMap.tiled(x, box, element_strides=es, oob_fill="nan")
    np.testing.assert_array_equal(cpu.run_load(cpu.interp_launch, m, itm, x, box, coords, es), got)


@pytest.mark.parametrize("rank", [1, 3, 5])
def test_other_ranks(rank: int) -> None:
    """Rank 5's box (8 f32 = 32 bytes under 64B swizzle) is also narrow."""
    shape = {1: (300,), 3: (5, 6, 40), 5: (2, 3, 3, 4, 16)}[rank]
    box = {1: (64,), 3: (16, 4, 3), 5: (8, 2, 2, 2, 2)}[rank]
    mode = "64B" if rank > 1 else "none"
    x = cpu.rand("f32", shape)
    coords = cpu.load_case(shape, box, edge=True)
    tm = cuda.TensorMap.tiled(cuda.to_device(x), box, swizzle=mode)
    got = cpu.run_load(gpu_launch, cpu.load_module("f32", rank), tm, x, box, coords)
    np.testing.assert_array_equal(got, cpu.model_load(x, box, coords, mode))


#: Where the stored box lies in the (20, 96) tensor, innermost coordinate
#: first (a box starting before the tensor faults: test_store_before_the_start_faults).
STORE_PLACES = {
    "inside": lambda box: [16, 8],
    "past_the_end": lambda box: [96 - box[0] // 2, 20 - box[1] // 2],
}


@pytest.mark.parametrize("place", sorted(STORE_PLACES))
@pytest.mark.parametrize("op", [None, "add", "min", "max"])
@pytest.mark.parametrize("mode", ["none", "128B"])
def test_store_and_reduce(place: str, op: str | None, mode: str) -> None:
    elem = "f16" if op in ("min", "max") else "f32"
    x = cpu.rand(elem, (20, 96))
    box = (32, 8) if elem == "f32" else (64, 8)  # 128-byte rows: the 128B span
    n = prod(box)
    img = cpu.rand(elem, (n,))
    coords = STORE_PLACES[place](box)
    want = cpu.model_store(x, img, box, coords, mode, op)
    dx = cuda.to_device(x)
    tm = cuda.TensorMap.tiled(dx, box, swizzle=mode)
    k = cuda.load_hir(cpu.store_module(elem, 2, op), arch="sm_90").kernel("store")
    k.launch(1, 128, tm, cuda.to_device(img), n, *coords, shared_mem=cpu.BOX_AT + img.nbytes)
    got = dx.to_host()
    if op == "add":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def _store_child(op: str, x0: int, y0: int) -> None:
    """Run by test_store_before_the_start_faults in its own process: one
    store (op "none") or reduction at (x0, y0), then a synchronising copy."""
    elem = "f16" if op == "max" else "f32"
    x = cpu.rand(elem, (20, 96))
    box = (64, 8) if elem == "f16" else (32, 8)
    img = cpu.rand(elem, (prod(box),))
    dx = cuda.to_device(x)
    tm = cuda.TensorMap.tiled(dx, box)
    k = cuda.load_hir(cpu.store_module(elem, 2, None if op == "none" else op), arch="sm_90")
    k.kernel("store").launch(
        1, 128, tm, cuda.to_device(img), img.size, x0, y0, shared_mem=cpu.BOX_AT + img.nbytes
    )
    dx.to_host()


@pytest.mark.parametrize("op", ["none", "add", "max"])
@pytest.mark.parametrize("coords", [(-8, 4), (16, -2)])
def test_store_before_the_start_faults(op: str, coords: tuple[int, int]) -> None:
    """The rule the interpreter traps on (test_tma.py): a store or reduction
    box starting before the tensor is an illegal instruction on the device.
    In a child process: the fault leaves its CUDA context unusable."""
    code = (
        "import sys; sys.path[:0] = sys.argv[1:3]; import tma_device_cases as t; "
        "t._store_child(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))"
    )
    here = Path(__file__).parent
    r = subprocess.run(
        [sys.executable, "-c", code, str(here), str(here.parent), op, *map(str, coords)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "CUDA_ERROR_ILLEGAL_INSTRUCTION" in out, out[-3000:]


def test_bulk_copy() -> None:
    src = cpu.rand("f32", (96,))
    dst = cuda.to_device(np.full_like(src, -1))
    k = cuda.load_hir(cpu.bulk_module(), arch="sm_90").kernel("bulk")
    k.launch(1, 32, cuda.to_device(src), dst, src.nbytes, shared_mem=cpu.BOX_AT + src.nbytes)
    np.testing.assert_array_equal(dst.to_host(), src)


@pytest.mark.parametrize(("op", "elem"), cpu.BULK_REDUCE_CASES)
def test_bulk_reduce(op: str, elem: str) -> None:
    src, dst, want = cpu.bulk_reduce_case(op, elem)
    d = cuda.to_device(dst)
    k = cuda.load_hir(cpu.bulk_reduce_module(op, elem), arch="sm_90").kernel("red")
    k.launch(1, 32, cuda.to_device(src), d, src.nbytes, shared_mem=cpu.BOX_AT + src.nbytes)
    np.testing.assert_array_equal(d.to_host(), want)


def test_foreign_tensors_and_graph_keepalive() -> None:
    """A map over a PyTorch tensor; a captured launch replays after the caller
    dropped both the map and the tensor (a same-size tensor allocated since
    would take its memory if the map did not keep it)."""
    torch = pytest.importorskip("torch")
    x = cpu.rand("f32", (40, 72))
    box, coords = (32, 8), [8, 16]
    t = torch.from_numpy(x).cuda()
    tm = cuda.TensorMap.tiled(t, box, swizzle="128B")
    k = cuda.load_hir(cpu.load_module("f32", 2), arch="sm_90").kernel("load")
    n = prod(box)
    out = cuda.to_device(np.zeros(n, np.float32))
    s = cuda.Stream()
    with cuda.capture(s) as cap:
        k.launch(1, 96, tm, out, n, n * 4, *coords, shared_mem=cpu.BOX_AT + n * 4, stream=s)
    ex = cap.graph.instantiate()
    del tm, t, cap
    gc.collect()
    junk = torch.full((40, 72), -5.0, device="cuda")
    ex.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(out.to_host(), cpu.model_load(x, box, coords, "128B"))
    del junk


def test_foreign_bf16_tensor() -> None:
    """A bf16 PyTorch tensor (no __cuda_array_interface__: DLPack) loads bit for bit."""
    torch = pytest.importorskip("torch")
    bits = cpu.rng.integers(0, 2**16, (16, 64), dtype=np.uint16)
    bits[(bits & 0x7F80) == 0x7F80] = 0x3F80  # no NaN/inf patterns
    t = torch.from_numpy(bits.view(np.int16)).cuda().view(torch.bfloat16)
    tm = cuda.TensorMap.tiled(t, (64, 8), swizzle="128B")
    assert tm.dtype == "bf16"
    x = bits.view(np.float16)  # same size: the model moves bits
    coords = [0, 8]
    got = cpu.run_load(gpu_launch, cpu.load_module("f16", 2), tm, x, (64, 8), coords)
    np.testing.assert_array_equal(
        got.view(np.uint16), cpu.model_load(x, (64, 8), coords, "128B").view(np.uint16)
    )


def test_device_checks() -> None:
    x = cuda.to_device(np.zeros((8, 64), np.float32))
    with pytest.raises(ArgumentError, match=r"box\[1\]"):
        cuda.TensorMap.tiled(x, (32, 300))
    with pytest.raises(ArgumentError, match="swizzle"):
        cuda.TensorMap.tiled(x, (64, 8), swizzle="128B")
    with pytest.raises(ArgumentError, match="must be a GPU tensor"):
        cuda.TensorMap.tiled(np.zeros((8, 64), np.float32), (32, 8))
    with pytest.raises(ArgumentError, match=r"element_strides\[0\]"):
        cuda.TensorMap.tiled(x, (32, 8), element_strides=(2, 1))
    k = cuda.load_hir(cpu.load_module("f32", 2), arch="sm_90").kernel("load")
    with pytest.raises(LaunchError, match="expected a tensor map"):
        k.launch(1, 32, x, x, 1, 4, 0, 0, shared_mem=2048)
    torch = pytest.importorskip("torch")
    t = torch.zeros((8, 64), device="cuda")[:, ::2]
    with pytest.raises(ArgumentError, match=r"strides\[0\]"):
        cuda.TensorMap.tiled(t, (16, 8))
    with pytest.raises(ArgumentError, match="address"):
        cuda.TensorMap.tiled(torch.zeros(65, device="cuda")[1:], (16,))


def test_tma_copy_example() -> None:
    import tma_copy  # examples/tma_copy.py

    x, grid, want_raw = cpu.tma_copy_case()
    src = cuda.to_device(x)
    dst = cuda.to_device(np.full_like(x, np.nan))
    raw = cuda.to_device(np.full_like(want_raw, np.nan))
    k = cuda.load_hir(tma_copy.build(), arch="sm_90").kernel("tma_copy")
    k.launch(
        grid,
        128,
        cuda.TensorMap.tiled(src, tma_copy.BOX, swizzle="128B"),
        cuda.TensorMap.tiled(dst, tma_copy.BOX, swizzle="128B"),
        raw,
        shared_mem=tma_copy.SHARED_BYTES,
    )
    np.testing.assert_array_equal(dst.to_host(), x)
    np.testing.assert_array_equal(raw.to_host(), want_raw)


def test_lang_tma_copy_on_device() -> None:
    """The zyntax.lang twin of the example, with cuda.TensorMap arguments."""
    x, grid, want_raw = cpu.tma_copy_case()
    src = cuda.to_device(x)
    dst = cuda.to_device(np.full_like(x, np.nan))
    raw = cuda.to_device(np.full_like(want_raw, np.nan))
    cpu.lang_tma_copy.launch(
        cuda.TensorMap.tiled(src, (64, 8), swizzle="128B"),
        cuda.TensorMap.tiled(dst, (64, 8), swizzle="128B"),
        raw,
        grid=grid,
        block=128,
        shared_mem=1024,
        device="gpu",
    )
    np.testing.assert_array_equal(dst.to_host(), x)
    np.testing.assert_array_equal(raw.to_host(), want_raw)


def test_lang_bulk_copies_on_device() -> None:
    src, acc = cpu.rand("f32", (64,)), cpu.rand("f32", (64,))
    want = acc + src
    d_dst = cuda.to_device(np.full_like(src, np.nan))
    d_acc = cuda.to_device(acc)
    cpu.lang_bulk.launch(
        cuda.to_device(src),
        d_dst,
        d_acc,
        np.uint32(64),
        grid=1,
        block=32,
        shared_mem=256,
        device="gpu",
    )
    np.testing.assert_array_equal(d_dst.to_host(), src)
    np.testing.assert_array_equal(d_acc.to_host(), want)
