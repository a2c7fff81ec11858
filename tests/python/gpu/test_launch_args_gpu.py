"""Launch shapes and shared-memory sizes given to ``zyntax.cuda`` kernels are
type- and range-checked as everywhere else (ArgumentError naming the
parameter); a zero dimension stays the launch check's LaunchError. The kernel
is the hand-written saxpy of tests/data/ptx/."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from conftest import ROOT

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def saxpy() -> Any:
    from zyntax import cuda

    return cuda.load_module((ROOT / "tests" / "data" / "ptx" / "saxpy.ptx").read_text()).kernel(
        "saxpy"
    )


@pytest.mark.parametrize(
    ("grid", "block", "shared", "name"),
    [
        ("ab", 256, None, "grid"),
        ("12", 256, None, "grid"),
        ([1.9], 256, None, "grid"),
        (2**32, 256, None, "grid"),
        (1, -1, None, "block"),
        (1, (32, 2.0), None, "block"),
        (1, 256, -4, "shared_mem"),
    ],
)
def test_bad_launch_arguments_are_argument_errors(
    saxpy: Any, grid: Any, block: Any, shared: Any, name: str
) -> None:
    from zyntax import cuda

    rng = np.random.default_rng()
    y0 = rng.standard_normal(256).astype(np.float32)
    x, y = cuda.to_device(rng.standard_normal(256).astype(np.float32)), cuda.to_device(y0)
    with pytest.raises(zyntax.ArgumentError) as info:
        saxpy.launch(grid, block, 256, 2.0, x, y, shared_mem=shared)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert name in str(info.value) + notes
    with pytest.raises(zyntax.ArgumentError):
        saxpy[grid, block, shared]
    # Nothing was launched.
    np.testing.assert_array_equal(y.to_host(), y0)


def test_zero_grid_is_still_a_launch_error(saxpy: Any) -> None:
    from zyntax import cuda

    x = cuda.to_device(np.ones(4, np.float32))
    with pytest.raises(zyntax.LaunchError, match="grid x"):
        saxpy.launch(0, 4, 4, 1.0, x, x)


def test_read_only_numpy_inputs_on_the_gpu() -> None:
    @zyntax.kernel(device="gpu")
    def scale(x, out, s):  # type: ignore[no-untyped-def]
        i = zyntax.lang.grid(1)
        if i < len(x):
            out[i] = x[i] * s

    rng = np.random.default_rng()
    x = rng.standard_normal(300).astype(np.float32)
    x.flags.writeable = False
    out = np.full(300, np.nan, np.float32)
    scale[3, 128](x, out, np.float32(2.5))
    np.testing.assert_allclose(out, x * np.float32(2.5), rtol=1e-6)
    ro_out = np.full(300, np.nan, np.float32)
    ro_out.flags.writeable = False
    with pytest.raises(zyntax.ZyntaxError, match=r"argument 1 .*read-only"):
        scale[3, 128](x, ro_out, np.float32(2.5))
