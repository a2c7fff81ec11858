"""The ``kern[grid, block](*args)`` hot path on the GPU: real DeviceArrays and
prepared native launches (tests/python/test_kernel_launch_fast.py checks the
same path against the slow one with the driver replaced)."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import lang
from zyntax.frontend import errors

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def test_alternating_dtypes_and_scalars_on_the_hot_path() -> None:
    from zyntax import cuda

    @zyntax.kernel
    def axpb(a, out, s, n):  # type: ignore[no-untyped-def]
        i = lang.grid(1)
        if i < n:
            out[i] = a[i] * s + a[i]

    n = 1000
    launch = axpb[(n + 127) // 128, 128]
    for it in range(12):
        dt = [np.float32, np.float64, np.int32][it % 3]
        h = rng.uniform(1, 50, size=n).astype(dt)
        s = int(rng.integers(2, 9)) if dt is np.int32 else float(rng.uniform(0.5, 2))
        a, out = cuda.to_device(h), cuda.zeros(n, dt)
        m = int(rng.integers(n // 2, n))
        launch(a, out, s, m)
        got = out.to_host()
        want = np.zeros(n, dt)
        if dt is np.float64:
            want[:m] = h[:m] * np.float32(s) + h[:m]  # float s is an f32 argument
            np.testing.assert_allclose(got, want, rtol=1e-6)
        elif dt is np.float32:
            want[:m] = h[:m] * np.float32(s) + h[:m]
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:
            want[:m] = h[:m] * s + h[:m]
            np.testing.assert_array_equal(got, want)
    assert len(axpb.signatures) == 3
    # Wrong arguments after the hot path was installed: still the friendly error.
    with pytest.raises(errors.KernelArgumentError) as info:
        launch(a, out, 2)
    assert "takes 4 argument(s)" in str(info.value) and "^" in str(info.value)
