"""``saxpy``: ``y = a * x + y`` in place with 16-byte loads and stores.

A grid that covers the array once: each thread has UNROLL vectors of x and
of y in flight, then the remaining vectors and the last elements one at a
time (or, GRID_STRIDE, one wave of blocks in a grid-stride loop). f32, bf16
or f16 data (f32 arithmetic). The launch shape is measured in
docs/performance.md ("Memory-bound kernels").
"""

from __future__ import annotations

from typing import Any

from zyntax import hir
from zyntax.errors import ArgumentError

from . import _tensors as T
from ._rows import archs_for, load_f32, store_f32, vec_ptr, vector

__all__ = ["saxpy"]

#: Threads per block and vectors in flight per thread (the knobs of a sweep):
#: on the H100, 2 vectors 3045 GB/s, 4 vectors 3029 (PyTorch 3041).
THREADS = 512
UNROLL = 2
#: Cache operators of the main loop's x load, y load and y store (`load_cached` /
#: `store_cached`; None: a plain access, x through the read-only path). f32 only.
CACHE: tuple[str | None, str | None, str | None] = (None, None, None)
#: True: one wave of blocks in a grid-stride loop; False: a grid that covers
#: the array once (each thread its UNROLL vectors, as PyTorch's kernel),
#: 5 % faster on the H100 (3029 against 2888 GB/s).
GRID_STRIDE = False


def _build(
    dtype: str,
    lanes: int,
    threads: int,
    unroll: int,
    cache: tuple[str | None, str | None, str | None] = (None, None, None),
) -> hir.Module:
    elem = T.HIR_TYPE[dtype]
    if lanes > 4:  # load_cached moves at most 4-element vectors (ptxas fails on .v8.b16)
        cache = (None, None, None)
    tag = "".join(f"_{c}" if c else "_" for c in cache) if any(cache) else ""
    # L2 eviction hints need sm_80 and PTX 7.4: cache operators pin the module to sm_90.
    archs = ["sm_90"] if any(cache) else archs_for(dtype)
    m = hir.Module(f"saxpy_{dtype}_v{lanes}_t{threads}_u{unroll}{tag}", targets=archs)
    xspace = "global" if cache[0] else "constant"
    params = [hir.f32, hir.ptr(xspace, elem), hir.ptr("global", elem), hir.u32, hir.u32]
    with m.kernel("saxpy", params, max_threads=threads) as b:
        a, x, y, n, nv = b.params
        gt = b.block_idx() * threads + b.thread_idx()
        stride = b.grid_dim() * threads
        xv, yv = vec_ptr(b, x, xspace, elem, lanes), vec_ptr(b, y, "global", elem, lanes)

        def vload(p: hir.Value, i: hir.Value, cop: str | None) -> list[hir.Value]:
            if cop is None or lanes == 1:
                return load_f32(b, p, i, elem, lanes)
            v = b.load_cached(b.ptr_add(p, i), cop)
            vals = [b.extract(v, j) for j in range(lanes)]
            return vals if elem == hir.f32 else [b.cast(q, hir.f32) for q in vals]

        def vstore(i: hir.Value, vals: list[hir.Value]) -> None:
            if cache[2] is None or lanes == 1:
                store_f32(b, yv, i, vals, elem, lanes)
                return
            conv = vals if elem == hir.f32 else [b.cast(q, elem) for q in vals]
            b.store_cached(b.ptr_add(yv, i), vector(b, hir.vec(elem, lanes), conv), cache[2])

        def one(i: hir.Value, xp: hir.Value, yp: hir.Value, w: int) -> None:
            xs, ys = load_f32(b, xp, i, elem, w), load_f32(b, yp, i, elem, w)
            store_f32(b, yp, i, [b.fma(a, p, q) for p, q in zip(xs, ys, strict=True)], elem, w)

        chunk = stride * unroll
        full = b.div(nv, chunk)
        with b.for_range(0, full, type=hir.u32) as j:
            at = [j * chunk + gt + u * stride for u in range(unroll)]
            xs = [vload(xv, i, cache[0]) for i in at]
            ys = [vload(yv, i, cache[1]) for i in at]
            for i, p, q in zip(at, xs, ys, strict=True):
                vstore(i, [b.fma(a, s, t) for s, t in zip(p, q, strict=True)])
        with b.for_range(full * chunk + gt, nv, stride, type=hir.u32) as i:
            one(i, xv, yv, lanes)
        if lanes > 1:
            with b.for_range(nv * lanes + gt, n, stride, type=hir.u32) as i:
                one(i, x, y, 1)
    return m


@T.planned
def saxpy(a: float, x: Any, y: Any, *, stream: Any = None) -> Any:
    """``y = a * x + y`` elementwise (1-D contiguous `x` and `y` of one
    dtype); returns `y`."""
    a = T.real(a, "a")
    T.stream_arg(stream)
    tx, ty = T.tensor(x, "x"), T.tensor(y, "y")
    T.same_place(tx, ty)
    T.want_dtype(tx, ("f32", "bf16", "f16"))
    if ty.dtype != tx.dtype:
        raise ArgumentError(f"argument 'y': dtype {ty.dtype}, expected {tx.dtype} (x's)")
    for t in (tx, ty):
        if len(t.shape) != 1 or (t.shape[0] > 1 and t.strides[0] != 1):
            raise ArgumentError(f"argument '{t.name}': expected a contiguous 1-D array")
    T.want_shape(ty, tx.shape, "x's shape")
    T.check_overlap(ty, [tx])  # x is read through the read-only path
    if not ty.on_gpu and ty.arr is not y:
        raise ArgumentError("argument 'y': a numpy y must be C-contiguous (it is updated in place)")
    if not ty.on_gpu and not y.flags.writeable:
        raise ArgumentError("argument 'y': a read-only array (it is updated in place)")
    n = tx.shape[0]
    if n >= 1 << 31:
        raise ArgumentError(f"argument 'x': {n} elements; at most 2**31 - 1 are supported")
    if n == 0:
        return y
    lanes = T.vector_lanes(tx.dtype, tx, ty)
    key = (tx.dtype, lanes, THREADS, UNROLL, CACHE)
    cover = -(-n // (THREADS * UNROLL * lanes))
    if not tx.on_gpu:
        most = 2
    elif GRID_STRIDE:
        most = T.one_wave(_build, key, "saxpy", tx.device, THREADS)
    else:
        most = cover
    grid = max(1, min(most, cover))
    args = [a, tx, ty, n, n // lanes]
    T.launch(_build, key, "saxpy", grid, THREADS, args, tx, stream)
    return y
