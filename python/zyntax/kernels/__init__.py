"""Ready-made GPU kernels written with zyntax's own front-ends (docs/kernels.md)."""

from __future__ import annotations

# --- issue 15: memory-bound kernels and the sm_80 attention path (docs/kernels.md,
# "Library kernels: memory-bound" and "Library kernels: attention")
from .attention import attention
from .elementwise import saxpy
from .loss import cross_entropy
from .norm import layer_norm, rms_norm
from .reduce import reduce_max, reduce_sum
from .softmax import softmax

# --- end of issue 15's imports

__all__ = [
    # issue 15
    "attention",
    "cross_entropy",
    "layer_norm",
    "reduce_max",
    "reduce_sum",
    "rms_norm",
    "saxpy",
    "softmax",
]
