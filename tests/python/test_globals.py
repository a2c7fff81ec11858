"""Module globals (issue 12 item 7): `__constant__` and `__device__` variables
declared with `Module.global_var`, reached with `FunctionBuilder.global_addr`,
run on the interpreter against numpy on fresh random data; the `.zir` round
trip; bad input is a typed error. The device twin is
tests/python/gpu/test_globals_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp

rng = np.random.default_rng()
N = 64
G32 = hir.ptr("global", hir.f32)


def table_module(table: np.ndarray | None = None) -> hir.Module:
    """Kernel `lookup(idx, out, n)`: out[i] = scale[idx[i]] * 2 + bias, where
    `scale` is a constant table of N f32 and `bias` a constant scalar; each
    thread also adds 1 to `hits[idx[i]]`, a device global of N u32."""
    m = hir.Module("globals")
    m.global_var("scale", hir.f32, N, init=None if table is None else [float(x) for x in table])
    m.global_var("bias", hir.f32, 1, init=[0.5])
    m.global_var("hits", hir.u32, N, space="global")
    with m.kernel("lookup", [hir.ptr("global", hir.u32), G32, hir.u32]) as b:
        idx, out, n = b.params
        i = b.block_idx() * b.block_dim() + b.thread_idx()
        with b.if_(b.lt(i, n)):
            k = b.load(b.ptr_add(idx, i))
            s = b.load(b.ptr_add(b.global_addr("scale"), k))
            bias = b.load(b.global_addr("bias"))
            b.store(b.ptr_add(out, i), s * 2.0 + bias)
            b.atomic_add(b.ptr_add(b.global_addr("hits"), k), 1)
        b.ret()
    m.verify()
    return m


def case(n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(0, N, n, dtype=np.uint32), rng.standard_normal(N).astype(np.float32)


def test_initialized_table_and_device_counters_on_the_interpreter() -> None:
    idx, table = case(200)
    m = table_module(table)
    out = np.full(idx.size, np.nan, np.float32)
    hits = np.full(N, 0xDEADBEEF, np.uint32)
    interp.launch(m, "lookup", 4, 64, idx, out, idx.size, globals={"hits": hits})
    # hits was written in from the poisoned array, so the counts start there.
    np.testing.assert_array_equal(out, table[idx] * 2 + np.float32(0.5))
    want = 0xDEADBEEF + np.bincount(idx, minlength=N)  # < 2**32: 200 hits at most
    np.testing.assert_array_equal(hits, want.astype(np.uint32))


def test_host_writes_the_constant_table_by_name() -> None:
    idx, table = case(100)
    m = table_module()  # zero-filled table
    out = np.full(idx.size, np.nan, np.float32)
    hits = np.zeros(N, np.uint32)
    bias = np.array([-1.25], np.float32)
    interp.launch(
        m, "lookup", 2, 64, idx, out, idx.size, globals={"scale": table, "bias": bias, "hits": hits}
    )
    np.testing.assert_array_equal(out, table[idx] * 2 - np.float32(1.25))
    np.testing.assert_array_equal(hits, np.bincount(idx, minlength=N))
    np.testing.assert_array_equal(bias, [-1.25])


def test_zir_round_trip_keeps_globals() -> None:
    _, table = case(1)
    m = table_module(table)
    text = m.to_zir()
    assert "global @scale : constant f32, 64 = [" in text
    assert "global @hits : global u32, 64\n" in text
    assert "global_addr @scale" in text
    again = hir.parse_zir(text)
    assert again.to_zir() == text
    assert again.globals == ["scale", "bias", "hits"]


def test_vector_and_integer_globals() -> None:
    m = hir.Module("vec")
    vals = rng.integers(-(2**15), 2**15, 8).tolist()
    m.global_var("pairs", hir.vec(hir.i16, 2), 4, init=vals)
    with m.kernel("k", [hir.ptr("global", hir.i32)]) as b:
        (out,) = b.params
        t = b.thread_idx()
        v = b.load(b.ptr_add(b.global_addr("pairs"), t))
        lo = b.cast(b.extract(v, 0), hir.i32)
        hi = b.cast(b.extract(v, 1), hir.i32)
        b.store(b.ptr_add(out, t), lo * 65536 + hi)
        b.ret()
    m.verify()
    out = np.full(4, -7, np.int32)
    interp.launch(m, "k", 1, 4, out)
    v = np.array(vals, np.int64).reshape(4, 2)
    np.testing.assert_array_equal(out, (v[:, 0] * 65536 + v[:, 1]).astype(np.int32))


def test_bad_input_is_a_typed_error() -> None:
    m = hir.Module("bad")
    with pytest.raises(zyntax.ArgumentError, match="space"):
        m.global_var("a", hir.f32, 1, space="shared")
    with pytest.raises(zyntax.ArgumentError, match="numeric"):
        m.global_var("a", hir.bool_, 1)
    with pytest.raises(zyntax.ArgumentError, match="3 values"):
        m.global_var("a", hir.f32, 2, init=[1.0, 2.0, 3.0])
    with pytest.raises(zyntax.ArgumentError, match=r"0\.\.=255"):
        m.global_var("a", hir.u8, 1, init=[256])
    with pytest.raises(zyntax.ArgumentError, match="count"):
        m.global_var("a", hir.f32, -1)
    m.global_var("a", hir.f32, 4)
    with pytest.raises(zyntax.BuildError, match="already declared"):
        m.global_var("a", hir.f32, 4)
    with m.kernel("k", [G32]) as b:
        with pytest.raises(zyntax.BuildError, match="unknown global @nope"):
            b.global_addr("nope")
        p = b.global_addr("a")
        assert str(p.type) == "ptr<constant, f32>"
        b.store(b.params[0], b.load(p))
        b.ret()
    m.verify()
    big = hir.Module("big")
    big.global_var("t", hir.f32, 16385)
    with pytest.raises(zyntax.VerifyError, match="65536"):
        big.verify()
    out = np.zeros(1, np.float32)
    with pytest.raises(zyntax.LaunchError, match="16 bytes, got 12"):
        interp.launch(m, "k", 1, 1, out, globals={"a": np.zeros(3, np.float32)})
    with pytest.raises(zyntax.LaunchError, match="no global @b"):
        interp.launch(m, "k", 1, 1, out, globals={"b": np.zeros(4, np.float32)})
    with pytest.raises(zyntax.ArgumentError, match="numpy array"):
        interp.launch(m, "k", 1, 1, out, globals={"a": [1.0, 2.0, 3.0, 4.0]})  # type: ignore[dict-item]


def test_poly_example_reads_its_constant_table() -> None:
    import poly_constants

    m = poly_constants.build()
    x = rng.uniform(-2, 2, 300).astype(np.float32)
    out = np.full(x.size, np.nan, np.float32)
    coef = rng.standard_normal(poly_constants.DEGREE + 1).astype(np.float32)
    evaluated = np.array([5], np.uint32)
    interp.launch(m, "poly", 2, 256, x, out, x.size, globals={"coef": coef, "evaluated": evaluated})
    want = np.polyval(coef[::-1].astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert evaluated[0] == 5 + x.size
    # Without a host write the table holds the initializer: exp(x)'s Taylor terms.
    interp.launch(m, "poly", 2, 256, x, out, x.size)
    taylor = np.polyval(np.float32(poly_constants.COEF[::-1]), x.astype(np.float64))
    np.testing.assert_allclose(out, taylor, rtol=1e-5, atol=1e-5)
