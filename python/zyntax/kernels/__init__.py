"""zyntax's kernel library: fast kernels written with zyntax's own front-ends
(the HIR builder and ``@zyntax.kernel``; docs/kernels.md).

Inputs are zyntax DeviceArrays, GPU tensors of other libraries
(``__cuda_array_interface__`` / DLPack: PyTorch, CuPy) or numpy arrays (run on
the reference interpreter: small checks only).
"""

from __future__ import annotations

import sys as _sys

from . import (
    _plans,
    gemv_tile,  # noqa: F401 (sets gemm_tile.GEMV, the few-rows route)
)
from . import gemm as _gemm_module
from . import gemm_tile as _gemm_tile

# gemm.py: matrix products (registry, variants, epilogues); the rest: attention
# and the memory-bound kernels.
from .attention import attention
from .attention_bwd import attention_backward
from .elementwise import saxpy
from .gemm import REGISTRY, Variant, choose_variant, grouped_matmul, matmul
from .loss import cross_entropy, cross_entropy_backward
from .norm import layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from .reduce import reduce_max, reduce_sum
from .softmax import softmax, softmax_backward

# Knobs (module-level switches) change kernels without changing arguments:
# setting one clears every call plan and the caches that read knobs
# (``_plans.watch``; submodules imported later are watched on import).
for _name, _module in list(_sys.modules.items()):
    if _name == __name__ or _name.startswith(__name__ + "."):
        _plans.watch(_module)
_plans.on_knob_change(_gemm_module._plans.clear, _gemm_tile.ws_schedule.cache_clear)
del _name, _module

__all__ = [
    "REGISTRY",
    "Variant",
    "attention",
    "attention_backward",
    "choose_variant",
    "cross_entropy",
    "cross_entropy_backward",
    "grouped_matmul",
    "layer_norm",
    "layer_norm_backward",
    "matmul",
    "reduce_max",
    "reduce_sum",
    "rms_norm",
    "rms_norm_backward",
    "saxpy",
    "softmax",
    "softmax_backward",
]
