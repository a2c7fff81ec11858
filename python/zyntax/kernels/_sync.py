"""Synchronisation building blocks shared by the sm_90 kernels (GEMM and
attention), written once so that every spin on an mbarrier looks the same."""

from __future__ import annotations

from typing import Any

from zyntax import hir


def wait_parity(b: hir.FunctionBuilder, bar: hir.Value, parity: Any, hint: Any = None) -> None:
    """Spin on `try_wait.parity` until the phase of `parity` of `bar` has
    completed; `hint` is try_wait's suspend-time hint in nanoseconds (None:
    the hardware's default)."""
    spin = b.block()
    done = b.block()
    b.jump(spin)
    b.switch_to(spin)
    b.br(b.mbarrier_try_wait_parity(bar, parity, hint), done, spin)
    b.switch_to(done)
