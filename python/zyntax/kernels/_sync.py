"""Synchronisation building blocks shared by the sm_90 kernels (GEMM and
attention). The wait loop itself is the Rust builder's
(`FunctionBuilder::mbarrier_wait_parity`, which the tile layer's pipelines
use too), so every spin on an mbarrier is the same code."""

from __future__ import annotations

from typing import Any

from zyntax import hir


def wait_parity(b: hir.FunctionBuilder, bar: hir.Value, parity: Any, hint: Any = None) -> None:
    """Spin on `try_wait.parity` until the phase of `parity` of `bar` has
    completed; `hint` is try_wait's suspend-time hint in nanoseconds (None:
    the hardware's default)."""
    b.mbarrier_wait_parity(bar, parity, hint)
