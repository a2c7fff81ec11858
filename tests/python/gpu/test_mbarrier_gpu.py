"""mbarrier on the device: the producer/consumer ring of
tests/python/test_mbarrier.py gives numpy's (and the interpreter's) answer.
Skipped without an NVIDIA GPU; needs sm_90 (H100/H200)."""

from __future__ import annotations

import numpy as np
import pytest

import test_mbarrier as cpu
from zyntax import cuda

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rounds", range(3))
def test_mbarrier_ring_on_device(rounds: int) -> None:
    if cuda.device_arch() not in ("sm_90", "sm_90a"):
        pytest.skip("needs sm_90")
    m = cpu.ring_module()
    x, want, tiles = cpu.ring_case()
    k = cuda.load_hir(m, arch="sm_90").kernel("ring")
    out = cuda.to_device(np.full(want.shape, 0xDEADBEEF, np.uint32))
    k.launch(1, 64, cuda.to_device(x), out, tiles)
    np.testing.assert_array_equal(out.to_host(), want)
