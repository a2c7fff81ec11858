"""The reduction of a split-K matrix product (the small-M path of ``matmul``).

The mma_sync kernel with ``Spec.split_k`` writes one f32 partial product per
K split into a workspace ``ws[split][M][N]``; this kernel adds the partials
of each output element in split order (so the result does not depend on
which block finished first: deterministic), adds the bias, applies the
activation, converts to the output dtype and stores the ``M x N`` result.
Each thread owns ``lanes`` consecutive columns of one row, read as one
vector per split when ``lanes > 1`` (N a multiple of ``lanes``).

Written with the HIR builder.
"""

from __future__ import annotations

from dataclasses import dataclass

from zyntax import hir
from zyntax.kernels.gemm_mma_sync import _SCALAR, activation

KERNEL = "gemm_splitk_reduce"


@dataclass(frozen=True)
class Config:
    threads: int = 256
    lanes: int = 4  # columns per thread: 4 (one 16-byte f32 vector per split) or 1

    @property
    def shared_bytes(self) -> int:
        return 0


@dataclass(frozen=True)
class Spec:
    out_dtype: str  # "f32", "bf16", "f16"
    bias_dtype: str | None
    activation: str | None


def build(cfg: Config, spec: Spec) -> hir.Module:
    """The kernel ``gemm_splitk_reduce(ws, out, bias, M, N, splits, ldc)``;
    launch it with :func:`grid` blocks of ``cfg.threads`` threads."""
    out_t = _SCALAR[spec.out_dtype]
    bias_t = _SCALAR[spec.bias_dtype or "f32"]
    uses_bf16 = "bf16" in (spec.out_dtype, spec.bias_dtype)
    m = hir.Module(KERNEL, targets=(["sm_80"] if uses_bf16 else ["sm_70", "sm_80"]) + ["sm_90"])
    params = [hir.ptr("global", hir.f32), hir.ptr("global", out_t), hir.ptr("global", bias_t)]
    params += [hir.u32] * 4
    lanes = cfg.lanes
    with m.kernel(KERNEL, params, max_threads=cfg.threads) as b:
        ws, pc, pbias, dim_m, dim_n, splits, ldc = b.params
        vec_t = hir.vec(hir.f32, lanes)
        zero = b.const(0.0, hir.f32)
        idx = b.block_idx() * cfg.threads + b.thread_idx()
        groups = dim_n // lanes  # column groups per row (N % lanes == 0 when lanes > 1)
        with b.if_(idx < dim_m * groups):
            row, col = idx // groups, (idx % groups) * lanes
            plane = dim_m * dim_n  # elements of one split's partial
            first = row * dim_n + col
            with b.loop(0, splits, carry=[zero] * lanes, type=hir.u32) as lp:
                at = b.ptr_add(ws, lp.index * plane + first)
                acc = list(lp.carried)
                if lanes > 1:
                    v = b.load(b.ptr_cast(at, hir.ptr("global", vec_t)))
                    parts = [b.extract(v, e) for e in range(lanes)]
                else:
                    parts = [b.load(at)]
                lp.next(*[x + y for x, y in zip(acc, parts, strict=True)])
            for e, v in enumerate(lp.results):
                c = col + e
                if spec.bias_dtype is not None:
                    x = b.load(b.ptr_add(pbias, c))
                    v = v + (b.cast(x, hir.f32) if spec.bias_dtype != "f32" else x)
                v = activation(b, v, spec.activation)
                b.store(b.ptr_add(pc, row * ldc + c), b.cast(v, out_t) if out_t != hir.f32 else v)
    return m


def grid(cfg: Config, m: int, n: int) -> int:
    """Blocks for an m x n output."""
    return -(-(m * (n // cfg.lanes)) // cfg.threads)
