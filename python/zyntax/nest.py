"""Parallel loop nests for the HIR builder.

A 1- to 3-D parallel iteration space with a workgroup shape, written as a
loop nest instead of thread and block indices::

    m = hir.Module("mm")
    with m.kernel("mm", params, max_threads=(16, 16)) as b:
        with parallel_for(b, (M, N), workgroup=(16, 16)) as (i, j):
            ...                                   # the body runs once per (i, j)

The nest is lowered as it is built: the last index runs along ``x`` (so that
consecutive ``j`` are consecutive threads and their accesses coalesce), the one
before along ``y``, the first of three along ``z``; each index is
``block_idx * block_dim + thread_idx`` of its dimension, and the body is guarded
by ``index < size`` in every dimension, so any grid that covers the sizes is
correct. :func:`launch_grid` gives that grid from the sizes at launch time.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

from zyntax import _native
from zyntax.errors import BuildError

__all__ = ["MAX_WORKGROUP", "MAX_WORKGROUP_THREADS", "launch_grid", "parallel_for"]

#: The largest workgroup extent per dimension (x, y, z) and in total that every
#: CUDA device zyntax targets (sm_70 and newer) allows.
MAX_WORKGROUP = (1024, 1024, 64)
MAX_WORKGROUP_THREADS = 1024
#: The largest grid extent per dimension (x, y, z) of every CUDA device.
MAX_GRID = (2**31 - 1, 65535, 65535)
#: Nest indices are ``u32``: a constant size must be below this.
MAX_SIZE = 2**32

_DIMS = ("x", "y", "z")


def _ints(xs: Any, what: str) -> list[int]:
    """`xs` as a list of Python ints (numpy integers accepted; bools, floats,
    strings and arrays are a BuildError naming `what`)."""
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Sequence):
        raise BuildError(f"{what} must be a tuple of ints, got {type(xs).__name__}")
    out = []
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, numbers.Integral):
            raise BuildError(f"{what} {tuple(xs)!r} holds a {type(x).__name__}, not an int")
        out.append(int(x))
    return out


def _is_value(x: Any) -> bool:
    return hasattr(x, "id") and hasattr(x, "type")


def check_sizes(sizes: Any, what: str = "nest size") -> list[Any]:
    """The sizes of a nest (or the bounds of its reductions, `what`): builder
    values (``u32``), or ints in [0, 2**32)."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise BuildError(f"the nest sizes must be a tuple, got {type(sizes).__name__}")
    for s in sizes:
        if _is_value(s):
            continue
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            kind = type(s).__name__
            raise BuildError(f"{what} {s!r} is a {kind}; expected an int or a u32 value")
        if not 0 <= int(s) < MAX_SIZE:
            raise BuildError(f"{what} {s} is outside [0, 2**32) (indices are u32)")
    return list(sizes)


def _block_shape(workgroup: Sequence[int]) -> tuple[int, int, int]:
    """The ``(x, y, z)`` block shape of a workgroup given outermost first
    (the limits are the Rust core's, ``zyntax_opt::nest::block_shape``)."""
    dims = _ints(workgroup, "workgroup")
    xyz: tuple[int, int, int] = _native.nest_block_shape(dims)
    return xyz


def launch_grid(
    sizes: Sequence[int], workgroup: Sequence[int]
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(grid, block)`` covering the iteration space `sizes` (outermost
    first) with `workgroup` threads per block, in ``(x, y, z)`` order
    (``zyntax_opt::nest::launch_grid``: grids past the device limits are
    refused)."""
    dims = _ints(workgroup, "workgroup")
    int_sizes = _ints(sizes, "iteration space")
    if any(s < 0 for s in int_sizes):
        raise BuildError(f"iteration space {tuple(sizes)} has a negative size")
    # Sizes past u64 need more blocks than any grid holds either way.
    wide = [min(s, 2**64 - 1) for s in int_sizes]
    grid, block = _native.nest_launch_grid(wide, dims)
    return grid, block


@contextlib.contextmanager
def parallel_for(
    b: Any, sizes: Sequence[Any], workgroup: Sequence[int]
) -> Iterator[tuple[Any, ...]]:
    """Open a parallel loop nest over `sizes` (``u32`` values or ints,
    outermost first) in kernel builder `b`; yields the indices (``u32``),
    outermost first. The kernel should declare ``max_threads=workgroup``
    (reversed to ``(x, y, z)`` it is the block shape :func:`launch_grid` uses)."""
    sizes = check_sizes(sizes)
    _block_shape(workgroup)
    if len(sizes) != len(workgroup):
        raise BuildError(
            f"the nest has {len(sizes)} dimensions but the workgroup {tuple(workgroup)} "
            f"has {len(workgroup)}"
        )
    n = len(sizes)
    indices = []
    inside = None
    for k in range(n):
        dim = _DIMS[n - 1 - k]
        i = b.block_idx(dim) * b.block_dim(dim) + b.thread_idx(dim)
        indices.append(i)
        below = i < sizes[k]
        inside = below if inside is None else b.and_(inside, below)
    with b.if_(inside):
        yield tuple(indices)
