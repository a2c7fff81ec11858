"""popc/clz/brev/bfind and lang.bitcast on the device agree with numpy (the
CPU twin is tests/python/test_bit_ops.py). Skipped without an NVIDIA GPU."""

from __future__ import annotations

import numpy as np
import pytest

import test_bit_ops as cpu

pytestmark = pytest.mark.gpu


def test_lang_bit_ops_on_device() -> None:
    n = int(cpu.rng.integers(1000, 5000))
    x = cpu.random_ints(np.uint32, n)
    f = cpu.rng.standard_normal(n).astype(np.float32)
    out = np.full(4 * n, 0xDEADBEEF, np.uint32)
    fb = np.full(n, 0x5A5A5A5A, np.int32)
    cpu.lang_bits.launch(x, f, out, fb, grid=(n + 127) // 128, block=128, device="gpu")
    want = np.stack([cpu.reference(op, x) for op in cpu.OPS], axis=1).reshape(-1)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(fb, f.view(np.int32))
