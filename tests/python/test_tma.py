"""TMA and bulk copies (issue 13 item 2) on the interpreter: tile loads of
1-5-D boxes with every swizzle, boxes crossing the tensor's edge (zero and NaN
fill), stores and reductions back, 1-D bulk copies, against an independent
numpy model of the shared-memory box on fresh random data; the builder's
typed errors; every tensor-map check as an `ArgumentError` naming its field.
The device twin is tests/python/gpu/test_tma_gpu.py (same kernels, same model).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import cuda, hir, interp, lang
from zyntax.errors import ArgumentError, BuildError, TrapError, VerifyError
from zyntax.frontend.errors import KernelTypeError

rng = np.random.default_rng()
SU64 = hir.ptr("shared", hir.u64)
#: The box starts here in dynamic shared memory (one 128B-swizzle repeat); the barrier is at 0.
BOX_AT = 1024
NUMPY = {
    "f32": np.float32,
    "f16": np.float16,
    "i32": np.int32,
    "u32": np.uint32,
    "f64": np.float64,
}
SPAN = {"none": 0, "32B": 32, "64B": 64, "128B": 128}


# ---------------------------------------------------------------- the numpy model


def swizzle(o: np.ndarray, mode: str) -> np.ndarray:
    """Byte offset `o` of a box after the swizzle: the 16-byte chunk index
    within each 128-byte line XORed with the line index (mod the span's chunks)."""
    m = {"none": 0, "32B": 1, "64B": 3, "128B": 7}[mode]
    return o ^ (((o >> 7) & m) << 4)


def box_elems(box: Sequence[int], es: Sequence[int]) -> list[int]:
    return [-(-b // e) for b, e in zip(box, es, strict=True)]


def row_pitch(inner_bytes: int, mode: str) -> int:
    """Bytes between box rows in shared memory: a row narrower than its
    swizzle span still takes a whole span (the H100's canary dump)."""
    return max(inner_bytes, SPAN[mode])


def box_offsets(n: Sequence[int], itemsize: int, mode: str) -> np.ndarray:
    """Shared byte offset of each box element (innermost index fastest):
    rows at `row_pitch`, then the swizzle."""
    total = prod(n)
    lin = np.arange(total, dtype=np.int64)
    pitch = row_pitch(n[0] * itemsize, mode)
    return swizzle(lin // n[0] * pitch + lin % n[0] * itemsize, mode)


def shared_bytes(n: Sequence[int], itemsize: int, mode: str) -> int:
    """Bytes a box of n elements per dimension spans in shared memory."""
    return prod(n[1:]) * row_pitch(n[0] * itemsize, mode)


def model_load(
    x: np.ndarray,
    box: Sequence[int],
    coords: Sequence[int],
    mode: str,
    es: Sequence[int] | None = None,
    fill: float = 0,
) -> np.ndarray:
    """The shared-memory image (as elements of x's dtype) a tile load leaves."""
    es = es or [1] * x.ndim
    n = box_elems(box, es)
    img = np.full(shared_bytes(n, x.itemsize, mode) // x.itemsize, CANARY, x.dtype)
    img = img.view(np.uint8)
    # Box index grids, innermost first; global coordinates and in-bounds mask.
    idx = np.indices(n[::-1]).reshape(x.ndim, -1)[::-1]
    g = [coords[k] + idx[k] * es[k] for k in range(x.ndim)]
    dims = x.shape[::-1]
    inb = np.all([(g[k] >= 0) & (g[k] < dims[k]) for k in range(x.ndim)], axis=0)
    vals = np.full(idx.shape[1], fill, dtype=x.dtype)
    gi = tuple(np.where(inb, g[k], 0) for k in reversed(range(x.ndim)))
    vals[inb] = x[gi][inb]
    off = box_offsets(n, x.itemsize, mode)
    raw = vals.view(np.uint8).reshape(-1, x.itemsize)
    for b in range(x.itemsize):
        img[off + b] = raw[:, b]
    return img.view(x.dtype)


def model_store(
    out: np.ndarray,
    img: np.ndarray,
    box: Sequence[int],
    coords: Sequence[int],
    mode: str,
    op: str | None = None,
) -> np.ndarray:
    """`out` after storing (or reducing) the shared image `img` at `coords`."""
    want = out.copy()
    n = box_elems(box, [1] * out.ndim)
    raw = img.view(np.uint8)
    offs = box_offsets(n, out.itemsize, mode)
    for lin, idx in enumerate(np.ndindex(*n[::-1])):
        g = [coords[k] + idx[::-1][k] for k in range(out.ndim)]
        if not all(0 <= g[k] < out.shape[::-1][k] for k in range(out.ndim)):
            continue
        o = int(offs[lin])
        v = raw[o : o + out.itemsize].view(out.dtype)[0]
        at = tuple(g[::-1])
        if op == "add":
            want[at] = want[at] + v
        elif op == "min":
            want[at] = min(want[at], v)
        elif op == "max":
            want[at] = max(want[at], v)
        else:
            want[at] = v
    return want


# ---------------------------------------------------------------- kernels


def _wait(b: hir.FunctionBuilder, bar: hir.Value) -> None:
    """Spin on phase 0 of `bar`."""
    spin, done = b.block(), b.block()
    b.jump(spin)
    b.switch_to(spin)
    ok = b.mbarrier_try_wait_parity(bar, 0, 1000)
    b.br(ok, done, spin)
    b.switch_to(done)


def _smem(b: hir.FunctionBuilder, elem: hir.Type) -> tuple[hir.Value, hir.Value]:
    """(barrier, box) in dynamic shared memory: the barrier at 0, the box at BOX_AT."""
    base = b.dyn_shared(hir.u8)
    bar = b.ptr_cast(base, SU64)
    box = b.ptr_cast(b.ptr_add(base, BOX_AT), hir.ptr("shared", elem))
    return bar, box


def _strided_copy(b: hir.FunctionBuilder, dst: hir.Value, src: hir.Value, n: hir.Value) -> None:
    """dst[i] = src[i] for i in tid, tid + blockDim, ... < n."""
    tid, bd = b.thread_idx(), b.block_dim()
    with b.for_range(tid, n, bd, type=hir.u32) as i:
        b.store(b.ptr_add(dst, i), b.load(b.ptr_add(src, i)))


#: What shared memory holds before a load: the bytes a load leaves untouched keep it.
CANARY = -1


def load_module(elem: str, rank: int, arch: str = "sm_90") -> hir.Module:
    """`load(tmap, out, n, bytes, c0..)`: the threads fill n elements of
    shared memory with CANARY; thread 0 loads the box at the coordinates
    through an mbarrier expecting `bytes`; every thread then copies the raw
    shared image (n elements) to out."""
    t = hir.SCALARS[elem]
    m = hir.Module(f"tma_load_{elem}_{rank}d", targets=[arch])
    params = [hir.tensormap, hir.ptr("global", t), hir.u32, hir.u32] + [hir.i32] * rank
    with m.kernel("load", params) as b:
        tmap, out, n, nbytes, *coords = b.params
        bar, box = _smem(b, t)
        with b.for_range(b.thread_idx(), n, b.block_dim(), type=hir.u32) as i:
            b.store(b.ptr_add(box, i), b.const(CANARY, t))
        b.fence_proxy_async()  # the fill before the copy engine's writes
        first = b.eq(b.thread_idx(), 0)
        with b.if_(first):
            b.prefetch_tensormap(tmap)
            b.mbarrier_init(bar, 1)
            b.fence_mbarrier_init()
        b.barrier()
        with b.if_(first):
            b.mbarrier_arrive_expect_tx(bar, nbytes)
            b.tma_load(box, tmap, coords, bar)
        _wait(b, bar)
        _strided_copy(b, out, box, n)
        b.ret()
    m.verify()
    return m


def store_module(elem: str, rank: int, op: str | None = None) -> hir.Module:
    """`store(tmap, img, n, c0..)`: the threads write the raw shared image
    `img` (n elements) into the box; thread 0 stores (or reduces) it."""
    t = hir.SCALARS[elem]
    m = hir.Module(f"tma_store_{elem}_{rank}d_{op}", targets=["sm_90"])
    params = [hir.tensormap, hir.ptr("global", t), hir.u32] + [hir.i32] * rank
    with m.kernel("store", params) as b:
        tmap, img, n, *coords = b.params
        _, box = _smem(b, t)
        _strided_copy(b, box, img, n)
        b.fence_proxy_async()
        b.barrier()
        with b.if_(b.eq(b.thread_idx(), 0)):
            if op is None:
                b.tma_store(tmap, coords, box)
            else:
                b.tma_reduce(op, tmap, coords, box)
            b.bulk_commit_group()
            b.bulk_wait_group(0, read=True)
            b.bulk_wait_group(0)
        b.ret()
    m.verify()
    return m


def bulk_module() -> hir.Module:
    """`bulk(src, dst, bytes)`: src -> shared -> dst with the non-tensor bulk copies."""
    m = hir.Module("bulk_copy", targets=["sm_90"])
    g = hir.ptr("global", hir.f32)
    with m.kernel("bulk", [g, g, hir.u32]) as b:
        src, dst, nbytes = b.params
        bar, box = _smem(b, hir.f32)
        with b.if_(b.eq(b.thread_idx(), 0)):
            b.mbarrier_init(bar, 1)
            b.fence_mbarrier_init()
            b.mbarrier_arrive_expect_tx(bar, nbytes)
            b.bulk_copy_g2s(box, src, nbytes, bar)
            _wait(b, bar)
            b.bulk_copy_s2g(dst, box, nbytes)
            b.bulk_commit_group()
            b.bulk_wait_group(0)
        b.ret()
    m.verify()
    return m


# ---------------------------------------------------------------- cases (shared with the GPU test)


def rand(elem: str, shape: Sequence[int]) -> np.ndarray:
    dt = NUMPY[elem]
    if np.issubdtype(dt, np.floating):
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(-1000, 1000, shape).astype(dt)


#: (dtype, tensor shape (numpy order), box (innermost first), swizzle)
LOAD_CASES = [
    ("f32", (40, 72), (32, 8), "128B"),
    ("f16", (24, 136), (64, 8), "128B"),
    ("f32", (20, 48), (16, 16), "128B"),
    ("f32", (33, 40), (16, 8), "64B"),
    ("f16", (16, 40), (16, 12), "32B"),
    ("f32", (17, 24), (8, 5), "none"),
    ("i32", (9, 20), (4, 4), "none"),
    # Rows narrower than the swizzle span: the H100's canary cases.
    ("f32", (24, 40), (8, 8), "64B"),
    ("f16", (16, 72), (32, 8), "128B"),
]


def load_case(
    shape: Sequence[int], box: Sequence[int], edge: bool, itemsize: int = 4, before: bool = True
) -> list[int]:
    """Coordinates (innermost first) inside the tensor, or crossing its edges
    (the far edges only unless `before`: a store box must not start before
    the tensor); the innermost one on a 16-byte boundary, as the hardware requires."""
    dims = list(shape)[::-1]
    if edge:
        c = [
            int(
                rng.choice([-int(rng.integers(1, b)), d - int(rng.integers(1, b))])
                if before
                else max(0, d - int(rng.integers(1, b)))
            )
            for d, b in zip(dims, box, strict=True)
        ]
    else:
        c = [int(rng.integers(0, max(1, d - b + 1))) for d, b in zip(dims, box, strict=True)]
    a = max(1, 16 // itemsize)
    c[0] = c[0] // a * a
    return c


def run_load(
    launch: Any,
    m: hir.Module,
    tm: Any,
    x: np.ndarray,
    box: Sequence[int],
    coords: Sequence[int],
    es: Sequence[int] | None = None,
) -> np.ndarray:
    """Launches `load` with `launch(m, grid, block, *args, shared_bytes=)` and
    returns the shared image: the box's whole footprint (padding included)."""
    n = box_elems(box, es or [1] * x.ndim)
    size = shared_bytes(n, x.itemsize, tm.swizzle)
    out = np.full(size // x.itemsize, 77, x.dtype)
    out = launch(
        m,
        1,
        96,
        tm,
        out,
        size // x.itemsize,
        prod(n) * x.itemsize,
        *coords,
        shared_bytes=BOX_AT + size,
    )
    return out


def interp_launch(
    m: hir.Module, grid: int, block: int, *args: Any, shared_bytes: int
) -> np.ndarray:
    interp.launch(m, grid, block, *args, shared_bytes=shared_bytes)
    out: np.ndarray = args[1]
    return out


# ---------------------------------------------------------------- interpreter tests


@pytest.mark.parametrize(("elem", "shape", "box", "mode"), LOAD_CASES)
@pytest.mark.parametrize("edge", [False, True])
def test_tile_load_matches_the_model(
    elem: str, shape: tuple[int, ...], box: tuple[int, ...], mode: str, edge: bool
) -> None:
    x = rand(elem, shape)
    coords = load_case(shape, box, edge, x.itemsize)
    tm = interp.TensorMap.tiled(x, box, swizzle=mode)
    got = run_load(interp_launch, load_module(elem, 2), tm, x, box, coords)
    np.testing.assert_array_equal(got, model_load(x, box, coords, mode))


#: (element_strides, box, coords) of NaN-filled f32 loads from a 12 x 40
#: tensor; element_strides[0] is 1 (the only value the hardware honours).
NAN_FILL_CASES = [
    ((1, 3), (16, 6), (32, -2)),
    ((1, 2), (8, 5), (4, 9)),
    ((1, 4), (16, 8), (-8, 3)),
]


@pytest.mark.parametrize(("es", "box", "coords"), NAN_FILL_CASES)
def test_nan_fill_and_element_strides(
    es: tuple[int, int], box: tuple[int, int], coords: tuple[int, int]
) -> None:
    x = rand("f32", (12, 40))
    tm = interp.TensorMap.tiled(x, box, element_strides=es, oob_fill="nan")
    got = run_load(interp_launch, load_module("f32", 2), tm, x, box, coords, es)
    want = model_load(x, box, coords, "none", es, fill=np.nan)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_innermost_element_stride_is_refused() -> None:
    """The driver ignores element_strides[0] without interleave (an H100
    loaded a 16-element row for element_strides (2, 3)): refused by name."""
    x = rand("f32", (12, 40))
    with pytest.raises(ArgumentError, match=r"element_strides\[0\]: 2: .*must be 1"):
        interp.TensorMap.tiled(x, (16, 6), element_strides=(2, 3))


def test_narrow_box_layout_is_the_h100s() -> None:
    """What the H100's canary dump showed for an f32 8 x 8 box under 64B
    swizzle (docs/gpu-runs.md): row r at byte 64 r, its two 16-byte chunks
    at chunk index c ^ (r // 2 % 4) of the row's 64-byte line pair, the
    other 32 bytes of each 64 left as they were; 512 bytes in all."""
    x = rand("f32", (8, 8))
    tm = interp.TensorMap.tiled(x, (8, 8), swizzle="64B")
    assert (tm.box_bytes, tm.shared_bytes) == (256, 512)
    got = run_load(interp_launch, load_module("f32", 2), tm, x, (8, 8), [0, 0])
    want = np.full(128, CANARY, np.float32)
    for r in range(8):
        line, half = divmod(r, 2)  # 128-byte line r // 2, its half r % 2
        for j in range(8):
            chunk = (half * 4 + j // 4) ^ (line % 4)  # 16-byte chunk in the line
            want[line * 32 + chunk * 4 + j % 4] = x[r, j]
    np.testing.assert_array_equal(got, want)
    assert np.count_nonzero(got == CANARY) == 64


def test_narrow_box_store_reads_span_pitched_rows() -> None:
    x = rand("f32", (16, 64))
    box, mode = (16, 8), "128B"  # 64-byte rows under the 128-byte span
    tm = interp.TensorMap.tiled(x, box, swizzle=mode)
    img = rand("f32", (tm.shared_bytes // 4,))
    coords = [16, 4]
    want = model_store(x, img, box, coords, mode)
    interp.launch(
        store_module("f32", 2), 1, 128, tm, img, img.size, *coords, shared_bytes=BOX_AT + img.nbytes
    )
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("rank", [1, 3, 4, 5])
def test_other_ranks(rank: int) -> None:
    shape = {1: (300,), 3: (5, 6, 40), 4: (3, 4, 5, 24), 5: (2, 3, 3, 4, 16)}[rank]
    box = {1: (64,), 3: (16, 4, 3), 4: (8, 3, 2, 2), 5: (8, 2, 2, 2, 2)}[rank]
    x = rand("f32", shape)
    coords = load_case(shape, box, edge=True)
    tm = interp.TensorMap.tiled(x, box, swizzle="64B" if rank > 1 else "none")
    got = run_load(interp_launch, load_module("f32", rank), tm, x, box, coords)
    np.testing.assert_array_equal(got, model_load(x, box, coords, tm.swizzle))


@pytest.mark.parametrize("op", [None, "add", "min", "max"])
@pytest.mark.parametrize("mode", ["none", "128B"])
def test_store_and_reduce(op: str | None, mode: str) -> None:
    elem = "f16" if op in ("min", "max") else "f32"
    x = rand(elem, (20, 48))
    box = (64, 8) if elem == "f16" else (32, 8)
    n = prod(box)
    img = rand(elem, (n,))
    tm = interp.TensorMap.tiled(x, box, swizzle=mode)
    coords = load_case(x.shape, box, True, x.itemsize, before=False)
    want = model_store(x, img, box, coords, mode, op)
    interp.launch(
        store_module(elem, 2, op), 1, 128, tm, img, n, *coords, shared_bytes=BOX_AT + img.nbytes
    )
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("op", [None, "add", "max"])
@pytest.mark.parametrize("coords", [(-8, 4), (16, -1), (-16, -2)])
def test_store_before_the_start_traps(op: str | None, coords: tuple[int, int]) -> None:
    """An H100 raises an illegal instruction for a store or reduction box
    that starts before the tensor; the interpreter traps, naming it."""
    elem = "f16" if op == "max" else "f32"
    x = rand(elem, (20, 48))
    box = (64, 8) if elem == "f16" else (32, 8)
    img = rand(elem, (prod(box),))
    before = x.copy()
    tm = interp.TensorMap.tiled(x, box)
    k = next(i for i, c in enumerate(coords) if c < 0)
    mn = "tma.store" if op is None else f"tma.reduce.{op}"
    with pytest.raises(TrapError, match=rf"{mn}: coordinate {k} is {coords[k]}: ") as e:
        interp.launch(
            store_module(elem, 2, op),
            1,
            32,
            tm,
            img,
            img.size,
            *coords,
            shared_bytes=BOX_AT + img.nbytes,
        )
    assert e.value.kind == "invalid TMA use"
    np.testing.assert_array_equal(x, before)


def test_bulk_copy() -> None:
    src = rand("f32", (96,))
    dst = np.full_like(src, -1)
    interp.launch(bulk_module(), 1, 32, src, dst, src.nbytes, shared_bytes=BOX_AT + src.nbytes)
    np.testing.assert_array_equal(dst, src)


def bulk_reduce_module(op: str, elem: str) -> hir.Module:
    """`red(src, dst, bytes)`: src -> shared (bulk copy), then reduced into dst."""
    t = hir.SCALARS[elem]
    m = hir.Module(f"bulk_reduce_{op}_{elem}", targets=["sm_90"])
    g = hir.ptr("global", t)
    with m.kernel("red", [g, g, hir.u32]) as b:
        src, dst, nbytes = b.params
        bar, box = _smem(b, t)
        with b.if_(b.eq(b.thread_idx(), 0)):
            b.mbarrier_init(bar, 1)
            b.fence_mbarrier_init()
            b.mbarrier_arrive_expect_tx(bar, nbytes)
            b.bulk_copy_g2s(box, src, nbytes, bar)
            _wait(b, bar)
            b.bulk_reduce(op, dst, box, nbytes)
            b.bulk_commit_group()
            b.bulk_wait_group(0)
        b.ret()
    m.verify()
    return m


BULK_REDUCE_CASES = [("add", "f32"), ("add", "i32"), ("min", "f16"), ("max", "u32")]


def bulk_reduce_case(op: str, elem: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src, dst = rand(elem, (64,)), rand(elem, (64,))
    fn = {"add": np.add, "min": np.minimum, "max": np.maximum}[op]
    return src, dst, fn(dst, src).astype(dst.dtype)


@pytest.mark.parametrize(("op", "elem"), BULK_REDUCE_CASES)
def test_bulk_reduce(op: str, elem: str) -> None:
    src, dst, want = bulk_reduce_case(op, elem)
    m = bulk_reduce_module(op, elem)
    interp.launch(m, 1, 32, src, dst, src.nbytes, shared_bytes=BOX_AT + src.nbytes)
    np.testing.assert_array_equal(dst, want)


def test_bulk_reduce_type_is_checked() -> None:
    with pytest.raises(VerifyError, match="PTX has no bulk min reduction of f32"):
        bulk_reduce_module("min", "f32")


def test_bulk_copy_size_must_be_a_multiple_of_16() -> None:
    src = rand("f32", (96,))
    dst = np.zeros_like(src)
    with pytest.raises(TrapError, match="not a multiple of 16") as e:
        interp.launch(bulk_module(), 1, 32, src, dst, 20, shared_bytes=BOX_AT + src.nbytes)
    assert e.value.kind == "invalid TMA use"


def test_unaligned_innermost_coordinate_traps() -> None:
    """Hopper raises an illegal instruction for an innermost coordinate off a
    16-byte boundary; the interpreter traps, naming it."""
    x = rand("f16", (8, 64))
    tm = interp.TensorMap.tiled(x, (64, 8), swizzle="128B")
    with pytest.raises(TrapError, match="multiple of 16 bytes") as e:
        run_load(interp_launch, load_module("f16", 2), tm, x, (64, 8), [4, 0])
    assert e.value.kind == "invalid TMA use"


def test_misaligned_swizzled_box_traps() -> None:
    m = hir.Module("misaligned", targets=["sm_90"])
    with m.kernel("k", [hir.tensormap]) as b:
        (tmap,) = b.params
        base = b.dyn_shared(hir.u8)
        bar = b.ptr_cast(base, SU64)
        box = b.ptr_cast(b.ptr_add(base, 512), hir.ptr("shared", hir.f32))
        b.mbarrier_init(bar, 1)
        b.mbarrier_arrive_expect_tx(bar, 1024)
        b.tma_load(box, tmap, [0, 0], bar)
        b.ret()
    x = rand("f32", (8, 32))
    tm = interp.TensorMap.tiled(x, (32, 8), swizzle="128B")
    with pytest.raises(TrapError, match="1024-byte aligned"):
        interp.launch(m, 1, 1, tm, shared_bytes=4096)


def test_zir_round_trip_and_ptx() -> None:
    for m in (load_module("f32", 2), store_module("f32", 3, "add"), bulk_module()):
        text = m.to_zir()
        assert hir.parse_zir(text) == m
        ptx = zyntax.compile(m, backend="nvptx", arch="sm_90")
        assert ".param .align 64 .b8" in ptx or "bulk" in m.name
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile" in zyntax.compile(
        load_module("f32", 2), backend="nvptx", arch="sm_90"
    )


# ---------------------------------------------------------------- errors


def test_builder_and_verifier_errors() -> None:
    m = hir.Module("bad", targets=["sm_90"])
    with m.kernel("k", [hir.tensormap, hir.ptr("global", hir.f32)]) as b:
        tmap, g = b.params
        bar, box = _smem(b, hir.f32)
        with pytest.raises(BuildError, match="unknown TMA reduction"):
            b.tma_reduce("mul", tmap, [0], box)
        b.tma_load(g, tmap, [0, 0], bar)
        b.ret()
    with pytest.raises(VerifyError, match="the destination must be a pointer to shared"):
        m.verify()
    old = hir.Module("old", targets=["sm_80"])
    with old.kernel("k", [hir.tensormap]) as b:
        b.prefetch_tensormap(b.params[0])
        b.ret()
    with pytest.raises(VerifyError, match="tma needs sm_90"):
        old.verify()
    dev = hir.Module("dev", targets=["sm_90"])
    with dev.device_function("d", [hir.tensormap]) as b:
        b.ret()
    with pytest.raises(VerifyError, match="only be a kernel parameter"):
        dev.verify()


def _tm(x: np.ndarray, box: Sequence[int], **kw: Any) -> interp.TensorMap:
    return interp.TensorMap.tiled(x, box, **kw)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: _tm(np.zeros((2,) * 6, np.float32), [1] * 6), "rank"),
        (lambda: _tm(np.zeros((8, 32), np.float32), (0, 8)), "box[0]"),
        (lambda: _tm(np.zeros((300, 32), np.float32), (32, 257)), "box[1]"),
        (lambda: _tm(np.zeros((8, 32), np.float32), (3, 8)), "box[0]"),
        (lambda: _tm(np.zeros((8, 33), np.float32), (32, 8)), "strides[1]"),
        (lambda: _tm(np.zeros((8, 64), np.float32), (64, 8), swizzle="128B"), "swizzle"),
        (lambda: _tm(np.zeros((8, 64), np.float32), (16, 8), swizzle="16B"), "swizzle"),
        (lambda: _tm(np.zeros((8, 32), np.int32), (32, 8), oob_fill="nan"), "oob_fill"),
        (lambda: _tm(np.zeros((8, 32), np.bool_), (32, 8)), "dtype"),
        (
            lambda: _tm(np.zeros((8, 32), np.float32), (32, 8), element_strides=(9, 1)),
            "element_strides[0]",
        ),
        (lambda: _tm(np.zeros((8, 64), np.float32)[:, ::2], (32, 8)), "array"),
        (
            lambda: _tm(np.zeros((8, 32), np.float32), (32, 8), element_strides=(2, 1)),
            "element_strides[0]",
        ),
        (lambda: _tm(np.zeros((8, 64), np.float32), (32, 8), interleave="16B"), "interleave"),
        (lambda: _tm(np.zeros((8, 64), np.float32), (32, 8), l2_promotion="1K"), "l2_promotion"),
    ],
)
def test_every_tensor_map_check_names_its_field(make: Any, field: str) -> None:
    with pytest.raises(ArgumentError, match=field.replace("[", r"\[").replace("]", r"\]")):
        make()


def test_cuda_tensor_map_of_a_host_array_names_the_argument() -> None:
    """No GPU needed: a host array is refused before the driver is asked."""
    with pytest.raises(
        ArgumentError, match=r"'tensor': must be a GPU tensor.*ndarray lives in host memory"
    ):
        cuda.TensorMap.tiled(np.zeros((8, 64), np.float32), (32, 8))
    with pytest.raises(ArgumentError, match=r"'obj': must be a GPU tensor.*host memory"):
        cuda.from_dlpack(np.zeros(4, np.float32))


class _OpaqueInterface:
    """What a PyTorch bf16 tensor shows: an array interface whose typestr is
    the opaque '<V2', and DLPack (here on the host, so the reader stops at
    the device check without touching the driver)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": (8, 64), "typestr": "<V2", "data": (0x1000, False), "version": 2}

    def __dlpack__(self, **kw: object) -> object:
        raise AssertionError("not consumed: the device check comes first")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


def test_cuda_tensor_map_reads_opaque_dtypes_through_dlpack() -> None:
    """The '<V2' array interface is not read (it cannot say bf16); DLPack
    is, and here reports host memory."""
    with pytest.raises(ArgumentError, match=r"'tensor': must be a GPU tensor.*device type 1"):
        cuda.TensorMap.tiled(_OpaqueInterface(), (64, 8))


def test_tensormap_argument_must_be_a_tensor_map() -> None:
    m = load_module("f32", 2)
    out = np.zeros(8, np.float32)
    with pytest.raises(ArgumentError, match=r"takes a zyntax\.interp\.TensorMap"):
        interp.launch(m, 1, 32, out, out, 8, 32, 0, 0, shared_bytes=2048)


# ---------------------------------------------------------------- examples/tma_copy.py


def tma_copy_case() -> tuple[np.ndarray, tuple[int, int], np.ndarray]:
    """A random f16 tensor of whole 64 x 8 tiles, the grid, and the raw shared
    images the example must write (each tile through the 128B swizzle model)."""
    import tma_copy  # examples/tma_copy.py

    gx, gy = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x = rand("f16", (gy * tma_copy.BOX[1], gx * tma_copy.BOX[0]))
    raw = np.concatenate(
        [
            model_load(x, tma_copy.BOX, (bx * tma_copy.BOX[0], by * tma_copy.BOX[1]), "128B")
            for by in range(gy)
            for bx in range(gx)
        ]
    )
    return x, (gx, gy), raw


def test_tma_copy_example() -> None:
    import tma_copy

    x, grid, want_raw = tma_copy_case()
    dst = np.full_like(x, np.nan)
    raw = np.full_like(want_raw, np.nan)
    src_map = interp.TensorMap.tiled(x, tma_copy.BOX, swizzle="128B")
    dst_map = interp.TensorMap.tiled(dst, tma_copy.BOX, swizzle="128B")
    interp.launch(
        tma_copy.build(), grid, 128, src_map, dst_map, raw, shared_bytes=tma_copy.SHARED_BYTES
    )
    np.testing.assert_array_equal(dst, x)
    np.testing.assert_array_equal(raw, want_raw)
    # The swizzle moved data: the raw image is not the row-major tile.
    assert not np.array_equal(raw[: tma_copy.TILE], x[:8, :64].reshape(-1))


# ---------------------------------------------------------------- zyntax.lang


@zyntax.kernel
def lang_tma_copy(src: lang.TensorMap, dst: lang.TensorMap, raw: zyntax.f16[1]) -> None:
    """examples/tma_copy.py in zyntax.lang (the box at the start of dynamic shared memory)."""
    tid = lang.thread_idx.x
    bars = lang.shared.array(1, zyntax.u64)
    tile = lang.shared.dynamic(zyntax.f16)
    x = zyntax.i32(lang.block_idx.x * 64)
    y = zyntax.i32(lang.block_idx.y * 8)
    if tid == 0:
        lang.prefetch_tensormap(src)
        lang.mbarrier_init(bars, 0, 1)
        lang.fence_mbarrier_init()
    lang.syncthreads()
    if tid == 0:
        lang.mbarrier_arrive_expect_tx(bars, 0, 1024)
        lang.tma_load(tile, src, (x, y), bars, 0)
    while not lang.mbarrier_try_wait_parity(bars, 0, 0, 1000):
        pass
    blk = lang.block_idx.y * lang.grid_dim.x + lang.block_idx.x
    for i in range(tid, 512, lang.block_dim.x):
        raw[blk * 512 + i] = tile[i]
    if tid == 0:
        lang.tma_store(dst, (x, y), tile)
        lang.bulk_commit_group()
        lang.bulk_wait_group(0, True)
        lang.bulk_wait_group(0)


def test_lang_tma_copy_on_interpreter() -> None:
    x, grid, want_raw = tma_copy_case()
    dst = np.full_like(x, np.nan)
    raw = np.full_like(want_raw, np.nan)
    lang_tma_copy.run_cpu(
        interp.TensorMap.tiled(x, (64, 8), swizzle="128B"),
        interp.TensorMap.tiled(dst, (64, 8), swizzle="128B"),
        raw,
        grid=grid,
        block=128,
        shared_mem=1024,
    )
    np.testing.assert_array_equal(dst, x)
    np.testing.assert_array_equal(raw, want_raw)
    text = lang_tma_copy.hir((lang.TensorMap, lang.TensorMap, zyntax.Array[zyntax.f16, 1]))
    assert "tma.load" in text and "tensormap" in text and "bulk.wait_group.read 0" in text


def test_lang_tma_needs_a_tensor_map() -> None:
    @zyntax.kernel
    def bad(x: zyntax.f32[1]) -> None:
        lang.prefetch_tensormap(x)

    with pytest.raises(KernelTypeError, match="tensor map parameter"):
        bad.run_cpu(np.zeros(4, np.float32), grid=1, block=1)


@zyntax.kernel
def lang_bulk(src: zyntax.f32[1], dst: zyntax.f32[1], acc: zyntax.f32[1], n: zyntax.u32) -> None:
    """src -> shared -> dst with the non-tensor bulk copies, and acc += src."""
    bars = lang.shared.array(1, zyntax.u64)
    buf = lang.shared.dynamic(zyntax.f32)
    if lang.thread_idx.x == 0:
        lang.mbarrier_init(bars, 0, 1)
        lang.fence_mbarrier_init()
        lang.mbarrier_arrive_expect_tx(bars, 0, n * 4)
        lang.bulk_copy_g2s(buf, 0, src, 0, n * 4, bars, 0)
        while not lang.mbarrier_try_wait_parity(bars, 0, 0, 1000):
            pass
        lang.bulk_copy_s2g(dst, 0, buf, 0, n * 4)
        lang.bulk_reduce("add", acc, 0, buf, 0, n * 4)
        lang.bulk_commit_group()
        lang.bulk_wait_group(0)


def test_lang_bulk_copies_on_interpreter() -> None:
    src, acc = rand("f32", (64,)), rand("f32", (64,))
    want = acc + src
    dst = np.full_like(src, np.nan)
    lang_bulk.run_cpu(src, dst, acc, np.uint32(64), grid=1, block=32, shared_mem=256)
    np.testing.assert_array_equal(dst, src)
    np.testing.assert_array_equal(acc, want)
