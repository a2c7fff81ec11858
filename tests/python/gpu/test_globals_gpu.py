"""Module globals on the device (issue 12 item 7): the host writes a
`__constant__` table by name and a kernel reads it; a `__device__` counter
array written by the kernel is read back by name; both against the
interpreter (tests/python/test_globals.py) and numpy on fresh random data.
Skipped without an NVIDIA GPU."""

from __future__ import annotations

import numpy as np
import pytest

import test_globals as cpu
import zyntax
from zyntax import cuda, interp

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("rounds", range(3))
def test_constant_table_written_by_name_and_device_counters_read_back(rounds: int) -> None:
    idx, table = cpu.case(1000)
    m = cpu.table_module()
    mod = cuda.load_hir(m)
    # Loaded modules are cached per image: start from known contents.
    mod.write_global("scale", table)
    mod.write_global("bias", np.array([0.75], np.float32))
    hits0 = cpu.rng.integers(0, 1000, cpu.N, dtype=np.uint32)
    mod.write_global("hits", hits0)
    np.testing.assert_array_equal(mod.read_global("scale"), table)
    out = cuda.to_device(np.full(idx.size, np.nan, np.float32))
    mod.kernel("lookup").launch((idx.size + 127) // 128, 128, cuda.to_device(idx), out, idx.size)
    got_hits = mod.read_global("hits")
    want_out = np.full(idx.size, np.nan, np.float32)
    want_hits = hits0.copy()
    interp.launch(
        m,
        "lookup",
        (idx.size + 127) // 128,
        128,
        idx,
        want_out,
        idx.size,
        globals={"scale": table, "bias": np.array([0.75], np.float32), "hits": want_hits},
    )
    np.testing.assert_array_equal(out.to_host(), want_out)
    np.testing.assert_array_equal(want_out, table[idx] * 2 + np.float32(0.75))
    np.testing.assert_array_equal(got_hits, want_hits)
    np.testing.assert_array_equal(
        got_hits, hits0 + np.bincount(idx, minlength=cpu.N).astype(np.uint32)
    )


def test_initializers_reach_the_device() -> None:
    _, table = cpu.case(1)
    m = cpu.table_module(table)
    mod = cuda.load_hir(m)
    np.testing.assert_array_equal(mod.read_global("scale"), table)
    np.testing.assert_array_equal(mod.read_global("bias"), [0.5])
    np.testing.assert_array_equal(mod.read_global("scale", dtype=np.uint8).view(np.float32), table)


def test_bad_names_sizes_and_dtypes_are_typed_errors() -> None:
    mod = cuda.load_hir(cpu.table_module())
    with pytest.raises(zyntax.CudaError, match="no global `nope`"):
        mod.read_global("nope")
    with pytest.raises(zyntax.ArgumentError, match="256 bytes, the array 252"):
        mod.write_global("scale", np.zeros(cpu.N - 1, np.float32))
    with pytest.raises(zyntax.ArgumentError, match="dtype"):
        mod.write_global("scale", np.zeros(cpu.N, np.int32))
    with pytest.raises(zyntax.ArgumentError):
        mod.write_global("scale", [0.0] * cpu.N)


def test_poly_example_on_device_matches_the_interpreter() -> None:
    import poly_constants

    m = poly_constants.build()
    mod = cuda.load_hir(m)
    x = cpu.rng.uniform(-2, 2, 5000).astype(np.float32)
    coef = cpu.rng.standard_normal(poly_constants.DEGREE + 1).astype(np.float32)
    mod.write_global("coef", coef)
    mod.write_global("evaluated", np.zeros(1, np.uint32))
    out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    mod.kernel("poly").launch((x.size + 255) // 256, 256, cuda.to_device(x), out, x.size)
    want = np.full(x.size, np.nan, np.float32)
    interp.launch(m, "poly", (x.size + 255) // 256, 256, x, want, x.size, globals={"coef": coef})
    np.testing.assert_array_equal(out.to_host(), want)  # fma chain: bit-exact
    np.testing.assert_array_equal(mod.read_global("evaluated"), [x.size])
