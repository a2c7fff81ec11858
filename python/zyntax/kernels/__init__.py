"""Ready-made GPU kernels written with zyntax's own front-ends (docs/kernels.md)."""

from __future__ import annotations

# Memory-bound kernels (issue 15): softmax, normalisation, reductions, loss, saxpy.
# Attention, sm_80 path (issue 15).
from .attention import attention
from .elementwise import saxpy
from .loss import cross_entropy
from .norm import layer_norm, rms_norm
from .reduce import reduce_max, reduce_sum
from .softmax import softmax

__all__ = [
    "attention",
    "cross_entropy",
    "layer_norm",
    "reduce_max",
    "reduce_sum",
    "rms_norm",
    "saxpy",
    "softmax",
]
