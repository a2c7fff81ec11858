"""`FunctionBuilder.inst` (one instruction by its `.zir` mnemonic, the op from
the instruction table), `finish(prune=True)` and `Module.kernel(exact_threads=)`:
the entry points `@zyntax.kernel`'s translator builds HIR through. Functions
built with them run on the interpreter against numpy; bad mnemonics and
immediates raise typed errors."""

from __future__ import annotations

import time

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp


@pytest.fixture
def rng() -> tuple[np.random.Generator, int]:
    seed = time.time_ns() % (1 << 32)
    return np.random.default_rng(seed), seed


def clamp_shuffle_module() -> hir.Module:
    """out[t] = min(max(x[t ^ 1], lo), hi) through shfl.xor, with a local
    array (alloca) holding the bounds: every op through `inst`."""
    m = hir.Module("inst", targets=["sm_80"], record_locations=False)
    f32, u32 = hir.f32, hir.u32
    f32p = hir.ptr("global", f32)
    b = m.kernel("clamp_shfl", [f32p, f32p, f32, f32], exact_threads=(32, 1, 1))
    x, out, lo, hi = b.params
    b.set_location("clamp.py", 7, 5)
    (t,) = b.inst("thread_idx.x", [], [u32])
    (p,) = b.inst("ptr_add", [x, t], [f32p])
    (v,) = b.inst("load", [p], [f32])
    mask, one, width = b.const(0xFFFFFFFF, u32), b.const(1, u32), 32
    (w,) = b.inst("shfl.xor", [mask, v, one], [f32], {"width": width})
    (bounds,) = b.inst("alloca", [], [hir.ptr("local", f32)], {"elem": "f32", "count": 2})
    b.inst("store", [bounds, lo], [])
    (hi_p,) = b.inst("ptr_add", [bounds, one], [hir.ptr("local", f32)])
    b.inst("store", [hi_p, hi], [])
    (lo_v,) = b.inst("load", [bounds], [f32])
    (hi_v,) = b.inst("load", [hi_p], [f32])
    (c,) = b.inst("max", [w, lo_v], [f32])
    (c,) = b.inst("min", [c, hi_v], [f32])
    (q,) = b.inst("ptr_add", [out, t], [f32p])
    b.inst("store", [q, c], [])
    b.ret()
    # Code after the return, as a translator emits it for `return; x = ...`:
    dead = b.block()
    b.switch_to(dead)
    b.inst("store", [q, c], [])
    b.ret()
    b.finish(prune=True)
    return m


def test_inst_builds_the_table_ops(rng: tuple[np.random.Generator, int]) -> None:
    gen, seed = rng
    m = clamp_shuffle_module()
    m.verify()
    text = m.to_zir()
    assert "exact_threads(32, 1, 1)" in text
    assert "shfl.xor" in text and "width 32" in text
    assert text.count("return") == 1, "the unreachable block was not pruned"
    x = gen.uniform(-2.0, 2.0, 32).astype(np.float32)
    lo, hi = np.float32(gen.uniform(-1.0, 0.0)), np.float32(gen.uniform(0.0, 1.0))
    out = np.full(32, np.nan, np.float32)
    interp.launch(m, "clamp_shfl", 1, 32, x, out, lo, hi)
    want = np.minimum(np.maximum(x[np.arange(32) ^ 1], lo), hi)
    np.testing.assert_array_equal(out, want, err_msg=f"seed {seed}")


def test_inst_checks_the_table_signature_when_built() -> None:
    m = hir.Module("bad", targets=["sm_80"], record_locations=False)
    b = m.kernel("k", [hir.f32, hir.i32, hir.u32])
    a, i, u = b.params
    with pytest.raises(zyntax.BuildError, match="`add` operands must have the same type"):
        b.inst("add", [a, i], [hir.f32])
    with pytest.raises(zyntax.BuildError, match=r"`redux\.add` works on u32 or i32, got f32"):
        b.inst("redux.add", [u, a], [hir.f32])
    with pytest.raises(zyntax.BuildError, match="takes 2 operand"):
        b.inst("add", [a], [hir.f32])


def test_inst_location_reaches_verifier_errors() -> None:
    # popc's integer rule is the verifier's own (not a table signature): it
    # reports at verify, at the location set when the instruction was built.
    m = hir.Module("bad", targets=["sm_80"], record_locations=False)
    b = m.kernel("k", [hir.f32])
    (a,) = b.params
    b.set_location("kernel_src.py", 12, 9)
    b.inst("popc", [a], [hir.f32])
    b.finish()
    with pytest.raises(zyntax.VerifyError) as info:
        m.verify()
    d = info.value.diagnostics[0]
    assert d["loc"] == ("kernel_src.py", 12, 9)
    assert "`popc` takes an integer, got f32" in d["message"]


def test_inst_bad_input_raises_typed_errors() -> None:
    m = hir.Module("bad2", targets=["sm_80"], record_locations=False)
    b = m.kernel("k", [hir.u32])
    (n,) = b.params
    with pytest.raises(zyntax.BuildError, match="unknown instruction `frobnicate`"):
        b.inst("frobnicate", [n], [hir.u32])
    with pytest.raises(zyntax.ArgumentError, match="no immediate `lanes`"):
        b.inst("shfl.idx", [n, n, n], [hir.u32], {"lanes": 32})
    with pytest.raises(zyntax.ArgumentError, match="at most"):
        b.inst("cp.async.wait", [], [], {"pending": 1 << 40})
    with pytest.raises(zyntax.BuildError, match="unknown instruction `jump`"):
        b.inst("jump", [], [])  # branches have their own methods (jump, br)


def test_abandon_frees_the_name() -> None:
    # The translator abandons a function it must translate again (a widened variable).
    m = hir.Module("again", targets=["sm_80"], record_locations=False)
    b = m.kernel("k", [hir.f32])
    b.inst("neg", [b.params[0]], [hir.f32])
    b.abandon()
    assert m.functions == []
    b2 = m.kernel("k", [hir.f64])
    b2.finish()
    assert m.signature("k")[0][0] == hir.f64
