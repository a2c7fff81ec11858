"""zyntax's kernel library: fast kernels written with zyntax's own front-ends
(the HIR builder and ``@zyntax.kernel``; docs/kernels.md).

Inputs are zyntax DeviceArrays, GPU tensors of other libraries
(``__cuda_array_interface__`` / DLPack: PyTorch, CuPy) or numpy arrays (run on
the reference interpreter: small checks only).
"""

from __future__ import annotations

# gemm.py: matrix products (registry, variants, epilogues); the rest: attention
# and the memory-bound kernels.
from .attention import attention
from .elementwise import saxpy
from .gemm import REGISTRY, Variant, choose_variant, matmul
from .loss import cross_entropy
from .norm import layer_norm, rms_norm
from .reduce import reduce_max, reduce_sum
from .softmax import softmax

__all__ = [
    "REGISTRY",
    "Variant",
    "attention",
    "choose_variant",
    "cross_entropy",
    "layer_norm",
    "matmul",
    "reduce_max",
    "reduce_sum",
    "rms_norm",
    "saxpy",
    "softmax",
]
