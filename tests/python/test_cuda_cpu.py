"""zyntax.cuda without a GPU (runs in CI): the package imports, and every
runtime call raises CudaError with a clear reason instead of crashing.

Owned by the cuda helper (the GPU tests are in tests/gpu)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Runs in a child process with the runtime forced into "no driver" mode, so
# the test means the same thing on machines with and without a GPU.
PROBE = r"""
import json
import numpy as np
import zyntax
from zyntax import cuda

out = {"available": cuda.is_available()}
calls = {
    "Device": lambda: cuda.Device(0),
    "device_count": cuda.device_count,
    "to_device": lambda: cuda.to_device(np.arange(4, dtype=np.float32)),
    "empty": lambda: cuda.empty(16, np.float32),
    "load_module": lambda: cuda.load_module(".version 7.0\n.target sm_70\n.address_size 64\n"),
    "Stream": lambda: cuda.Stream(),
    "Event": lambda: cuda.Event(),
    "pinned_empty": lambda: cuda.pinned_empty(8),
    "memory_stats": lambda: cuda.memory_stats(),
}
for name, fn in calls.items():
    try:
        fn()
        out[name] = "no error"
    except zyntax.CudaError as e:
        out[name] = {"type": type(e).__name__, "msg": str(e), "kind": getattr(e, "kind", None),
                     "is_zyntax_error": isinstance(e, zyntax.ZyntaxError)}
    except BaseException as e:  # a crash or a wrong exception type fails the test
        out[name] = {"type": type(e).__name__, "msg": str(e)}
print(json.dumps(out))
"""


def test_runtime_without_driver_raises_cuda_error() -> None:
    env = dict(os.environ, ZYNTAX_DISABLE_CUDA="1")
    r = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.pop("available") is False
    assert len(out) == 9
    for name, res in out.items():
        assert isinstance(res, dict), f"{name}: {res}"
        assert res["type"] == "CudaError", f"{name}: {res}"
        assert res["is_zyntax_error"], name
        assert res["kind"] == "no_driver", f"{name}: {res}"
        assert "CUDA driver not available" in res["msg"], f"{name}: {res['msg']}"
        assert "ZYNTAX_DISABLE_CUDA" in res["msg"], f"{name}: {res['msg']}"


def test_in_process_without_gpu() -> None:
    from zyntax import cuda

    if cuda.is_available():
        pytest.skip("a GPU is present; the subprocess test covers the no-driver path")
    import zyntax

    with pytest.raises(zyntax.CudaError) as e:
        cuda.Device(0)
    assert e.value.kind in ("no_driver", "no_device")
    assert "CUDA" in str(e.value)
    # Still no crash on a second call (the failed init is remembered, not retried).
    with pytest.raises(zyntax.CudaError):
        cuda.to_device([1.0, 2.0])


@pytest.mark.parametrize(
    ("cc", "arch"),
    [
        ((7, 0), "sm_70"),
        ((7, 2), "sm_70"),
        ((8, 6), "sm_86"),
        ((8, 7), "sm_86"),
        ((8, 9), "sm_89"),
        ((9, 0), "sm_90a"),  # wgmma/setmaxnreg run on exactly 9.0
        ((10, 0), "sm_90"),  # arch-specific PTX does not run forward
        ((12, 0), "sm_90"),
    ],
)
def test_arch_for_capability(cc: tuple[int, int], arch: str) -> None:
    from zyntax import cuda

    assert cuda.arch_for_capability(*cc) == arch
