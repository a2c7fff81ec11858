"""Products of a few rows (decode: up to the tile crate's ``GEMV_MAX_M``) as a tile program
without tensor cores: each program instance streams a [BK, BN] slab of `b`
per K step with vector loads, multiplies it by the row's K slice of `a`
broadcast across the slab (FFMA into a [BK, BN] f32 accumulator, so each
thread keeps many independent sums and loads in flight), and reduces the K
axis once at the end. Row `m` is grid axis 0, the N tile axis 1, the K
split axis 2; each split writes f32 partials that ``gemm_tile.finish``
sums (bias, activation and the output cast there).

At M = 1 a product reads each weight once: the time is the weights' bytes
over memory bandwidth, and the tensor-core route pads the row to 64 (wgmma
tiles) for nothing. docs/kernels.md, "Small M", has the measurements.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from typing import Any

from zyntax import _native, hir, tile

from . import _tensors as T
from . import gemm_tile

#: Off: every small-M product stays on the tensor-core split route (benches).
GEMV_ON = True
#: ((bk, bn, warps), instances per SM) that replaces the tile crate's choice
#: (``zyntax_tile::schedule::gemv_schedule``) for every call (benches; clear
#: ``gemm_tile.matmul.plans`` after setting it); 0 instances: K not split.
GEMV_FORCE: tuple[tuple[int, int, int], int] | None = None
#: The program's loop loads the next K step's slab before this step's FMAs
#: (``Spec.prefetch``).
GEMV_PREFETCH = False


@dataclass(frozen=True)
class Spec:
    """What one compiled gemv program specialises on. `a_unit`/`b_unit`:
    the unit-stride dim of the [K, M] view of a and the [K, N] view of b
    (0, 1 or None); `aligned`: 16-byte aligned bases of a and b."""

    dtype: str
    a_unit: int | None
    b_unit: int | None
    aligned: tuple[bool, bool]
    schedule: tuple[int, int, int, str]  # bk, bn, warps, arch
    #: the loop carries the next K step's slab, loaded before this step's FMAs
    prefetch: bool = False
    #: K is not split: the program applies this spec's epilogue (bias,
    #: activation, the output's dtype) and stores the output itself, with
    #: no finishing pass
    fused: gemm_tile.Spec | None = None


def program(s: Spec) -> tile.Kernel:
    """``ws[z, m, n0:n0+BN] = sum over the z-th K split of a[m, k] * b[k, n0:n0+BN]``
    (with `s.fused`: ``c[m, n0:n0+BN] = act(sum over K ... + bias)``)."""
    bk, bn, warps, arch = s.schedule
    t = tile.Builder("gemv", tile.Schedule((1, bn), k=bk, warps=warps, arch=arch))

    def view(name: str, unit: int | None, aligned: bool) -> tile.View:
        align = 16 if aligned and unit is not None else None
        return t.view(name, s.dtype, 2, unit_stride_dim=unit, align_bytes=align)

    a = view("a", s.a_unit, s.aligned[0])  # [K, M]: a's K runs down the rows
    b = view("b", s.b_unit, s.aligned[1])  # [K, N]
    m, n0, z = t.program_id(0), t.program_id(1) * bn, t.program_id(2)
    if s.fused is not None:
        c = t.view("c", s.fused.out_dtype, 3, unit_stride_dim=2)  # [1, M, N]
        bias = gemm_tile._bias_view(t, s.fused)
        k_lo, k_hi = t.constant("u32", 0), t.scalar_param("k", "u32")
    else:
        ws = t.view("ws", "f32", 3, unit_stride_dim=2, align_bytes=16)  # [splits, M, N]
        kk, kps = t.scalar_param("k", "u32"), t.scalar_param("kps", "u32")
        k_lo = z * kps
        k_hi = t.scalar_binary("min", k_lo + kps, kk)

    def f32(x: tile.Tile) -> tile.Tile:
        return x if s.dtype == "f32" else x.cast("f32")

    def slab(k0: tile.Scalar) -> list[Any]:
        return [t.load(a, (k0, m), (bk, 1)), t.load(b, (k0, n0), (bk, bn))]

    def fma(x: tile.Tile, y: tile.Tile, acc: tile.Tile) -> tile.Tile:
        return t.fma(f32(x).broadcast((bk, bn)), f32(y), acc)

    def step(t: tile.Builder, k0: tile.Scalar, st: list[Any]) -> list[Any]:
        if not s.prefetch:
            x, y = slab(k0)
            return [fma(x, y, st[0])]
        # The next step's slab is in flight while this one's FMAs run (the
        # last step's read past the split is in bounds or masked, and unused).
        return [*slab(k0 + bk), fma(st[0], st[1], st[2])]

    init = [*slab(k_lo), t.zeros((bk, bn))] if s.prefetch else [t.zeros((bk, bn))]
    acc = t.for_range(k_lo, k_hi, bk, init, step)[-1]
    if s.fused is not None:
        out = gemm_tile._epilogue(t, s.fused, t.sum(acc, 0), bias, n0)  # type: ignore[arg-type]
        t.store(c, (0, m, n0), out)
    else:
        t.store(ws, (z, m, n0), t.sum(acc, 0))  # type: ignore[arg-type]
    return t.finish()


@functools.cache
def _kernel(s: Spec) -> tile.Kernel:
    return program(s)


def _module(s: Spec) -> hir.Module:
    return _kernel(s).module


#: A gemv schedule: ((bk, bn, warps), K splits, the next slab loaded ahead).
GemvSchedule = tuple[tuple[int, int, int], int, bool]


def schedule(m: int, n: int, k: int, arch: str, sms: int) -> GemvSchedule | None:
    """((bk, bn, warps), K splits, prefetch) of an M x N x K product for `sms`
    SMs (the tile crate's ``gemv_schedule``; prefetch: its stages > 1, or
    ``GEMV_PREFETCH``), or None where the crate keeps it off this
    program (more than ``GEMV_MAX_M`` rows there)."""
    kw: dict[str, Any] = {}
    if GEMV_FORCE is not None:
        kw = {"tile": list(GEMV_FORCE[0]), "ctas_per_sm": max(1, GEMV_FORCE[1])}
    got = _native.tile_gemv_schedule(m, n, k, arch=arch, sms=sms, **kw)
    if got is None:
        return None
    s, splits = got
    if GEMV_FORCE is not None and GEMV_FORCE[1] == 0:
        splits = 1  # K not split
    return (s.k, s.block[1], s.warps), splits, s.stages > 1 or GEMV_PREFETCH


def applies(m: int, batches: tuple[int, int, int], groups: Any) -> bool:
    """Whether ``gemm_tile.launch`` runs a product of `m` rows and (a, b, c)
    batch counts on this program: 2-D products of the rows the tile crate
    gives a gemv schedule (``GEMV_MAX_M`` there)."""
    if not GEMV_ON or batches != (1, 1, 1) or groups:
        return False
    return _native.tile_gemv_schedule(m, 1, 1) is not None


def launch(
    a: gemm_tile.Operand,
    b: gemm_tile.Operand,
    c: gemm_tile.Operand,
    bias: T.Tensor | None,
    activation: str | None,
    *,
    arch: str,
    sms: int,
    stream: Any = None,
) -> bool:
    """``c = act(a @ b + bias)`` for 2-D operands (batch 1) where the tile
    crate gives the product a gemv schedule; False (nothing launched) where not."""
    (ta, ash, ast), (tb, _, bst), (tc, csh, _) = a, b, c
    _, m, n = csh
    kk = ash[2]
    got = schedule(m, n, kk, arch, sms) if GEMV_ON else None
    if got is None:
        return False
    (bk, bn, warps), nsplit, prefetch = got
    kps = -(-kk // nsplit // bk) * bk if kk else bk  # whole K steps; no split is empty
    nsplit = max(1, -(-kk // kps))

    def unit(strides: tuple[int, int], shape: tuple[int, int]) -> int | None:
        return 0 if strides[0] == 1 or shape[0] == 1 else 1 if strides[1] == 1 else None

    # a's [K, M] view: its (M, K) strides swapped.
    a_view = [kk, m, ast[2], ast[1]]
    b_view = [kk, n, bst[1], bst[2]]
    # The epilogue (bias, activation, cast): gemm_tile's finishing pass, or
    # this program's own when K is not split.
    fin_spec = gemm_tile.Spec(
        ta.dtype,
        tc.dtype,
        None if bias is None else bias.dtype,
        activation,
        2,
        2,
        None,
        None,
        (False, False, tc.ptr % 16 == 0),
        0,
        True,
        (1, 1, 16, 4, 1, arch),
        bias_vec=bias is not None and bias.strides[0] == 1 and bias.ptr % 8 == 0,
    )
    spec = Spec(
        ta.dtype,
        unit((ast[2], ast[1]), (kk, m)),
        1 if bst[2] == 1 or n == 1 else 0 if bst[1] == 1 or kk == 1 else None,
        (ta.ptr % 16 == 0, tb.ptr % 16 == 0),
        (bk, bn, warps, arch),
        prefetch,
        fin_spec if nsplit == 1 else None,
    )
    grid = (m, -(-n // bn), nsplit)
    if nsplit == 1:
        bias_args = [] if bias is None else [bias, 1, n, 0, bias.strides[0]]
        args = [ta, *a_view, tb, *b_view, tc, *csh, *c[2], *bias_args, kk]
        T.launch(_module, (spec,), "gemv", grid, warps * 32, args, tc, stream)
        return True
    wt = T.tensor(T.empty_like(tc, (nsplit, m, n), "f32"), "workspace")
    ws_view = [nsplit, m, n, m * n, n, 1]
    args = [ta, *a_view, tb, *b_view, wt, *ws_view, kk, kps]
    T.launch(_module, (spec,), "gemv", grid, warps * 32, args, tc, stream)
    gemm_tile.finish_launch(fin_spec, wt, nsplit, c, bias, stream)
    return True


gemm_tile.GEMV = sys.modules[__name__]
