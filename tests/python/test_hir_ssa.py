"""Variables in the Python builder: `declare_var`/`def_var`/`use_var` and
sealed blocks, SSA construction done by the Rust builder. Functions built with
variables run on the interpreter against numpy / plain Python; misuse raises
typed errors naming the variable and the line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp

RNG_SEED = 20261129


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(RNG_SEED)


def row_sums_module() -> hir.Module:
    """Thread t < n: acc = 0; negatives = 0; for j in range(m): v = x[t*m + j];
    if v < 0: acc += v / 2; negatives += 1; else: acc += v — two variables
    carried through a loop and an if, no carried values threaded by hand."""
    m = hir.Module("ssa", targets=["sm_80"])
    f32p, u32p = hir.ptr("global", hir.f32), hir.ptr("global", hir.u32)
    with m.kernel("row_sums", [f32p, f32p, u32p, hir.u32, hir.u32]) as b:
        x, sums, negs, n, cols = b.params
        acc = b.declare_var(hir.f32, "acc")
        negatives = b.declare_var(hir.u32, "negatives")
        t = b.thread_idx()
        with b.if_(t < n):
            b.def_var(acc, 0.0)
            b.def_var(negatives, 0)
            base = t * cols
            with b.for_range(0, cols, type=hir.u32) as j:
                v = b.load(b.ptr_add(x, base + j))
                with b.if_else(v < 0.0) as (then, else_):
                    with then:
                        b.def_var(acc, b.use_var(acc) + v * 0.5)
                        b.def_var(negatives, b.use_var(negatives) + 1)
                    with else_:
                        b.def_var(acc, b.use_var(acc) + v)
            b.store(b.ptr_add(sums, t), b.use_var(acc))
            b.store(b.ptr_add(negs, t), b.use_var(negatives))
    return m


def test_loop_carried_sum_with_variables(rng: np.random.Generator) -> None:
    m = row_sums_module()
    m.verify()
    n, cols = 40, 13
    x = rng.uniform(-1.0, 1.0, n * cols).astype(np.float32)
    sums = np.full(64, np.nan, np.float32)  # poisoned: every row must be written
    negs = np.full(64, 0xFFFFFFFF, np.uint32)
    interp.launch(m, "row_sums", 1, 64, x, sums, negs, n, cols)
    rows = x.reshape(n, cols)
    want = np.zeros(n, np.float32)
    for j in range(cols):  # in the kernel's order, in float32
        col = rows[:, j]
        want += np.where(col < 0, col * np.float32(0.5), col)
    np.testing.assert_array_equal(sums[:n], want)
    np.testing.assert_array_equal(negs[:n], (rows < 0).sum(axis=1))
    assert np.isnan(sums[n:]).all() and (negs[n:] == 0xFFFFFFFF).all()


def fib_module() -> hir.Module:
    """a, b, s = 0, 1, 0; for i in range(n): s += i * a; a, b = b, a + b; return s."""
    m = hir.Module("fib")
    with m.host_function("fib_sum", [hir.i64], [hir.i64]) as b:
        (n,) = b.params
        va, vb, vs = (b.declare_var(hir.i64, name) for name in ("a", "b", "s"))
        b.def_var(va, 0)
        b.def_var(vb, 1)
        b.def_var(vs, 0)
        with b.for_range(0, n) as i:
            a, bb = b.use_var(va), b.use_var(vb)
            b.def_var(vs, b.use_var(vs) + i * a)
            b.def_var(va, bb)
            b.def_var(vb, a + bb)
        b.ret(b.use_var(vs))
    return m


def fib_sum_ref(n: int) -> int:
    a, b, s = 0, 1, 0
    for i in range(n):
        s += i * a
        a, b = b, a + b
    return s


def test_host_function_with_variables() -> None:
    m = fib_module()
    for n in (0, 1, 2, 7, 40):
        assert interp.call(m, "fib_sum", n) == fib_sum_ref(n)


def test_raw_blocks_and_sealing() -> None:
    """A while loop from raw blocks: the read in the unsealed header becomes a
    block parameter whose arguments are filled in at seal_block."""
    m = hir.Module("w")
    with m.host_function("collatz_steps", [hir.u64], [hir.u32]) as b:
        (x0,) = b.params
        x, steps = b.declare_var(hir.u64, "x"), b.declare_var(hir.u32, "steps")
        b.def_var(x, x0)
        b.def_var(steps, 0)
        header, body, done = b.block(), b.block(), b.block()
        b.jump(header)
        b.switch_to(header)
        assert not b.is_sealed(header)
        cur = b.use_var(x)
        assert header.params == [cur]
        b.br(cur > 1, body, done)
        b.seal_block(body)
        b.switch_to(body)
        with b.if_else(b.eq(cur & 1, 0)) as (even, odd):
            with even:
                b.def_var(x, cur >> 1)
            with odd:
                b.def_var(x, cur * 3 + 1)
        b.def_var(steps, b.use_var(steps) + 1)
        b.jump(header)
        b.seal_block(header)
        b.seal_block(done)
        assert b.is_sealed(header)
        b.switch_to(done)
        b.ret(b.use_var(steps))
    m.verify()

    def ref(v: int) -> int:
        n = 0
        while v > 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            n += 1
        return n

    for v in (1, 2, 3, 7, 27, 97):
        assert interp.call(m, "collatz_steps", v) == ref(v)


def test_every_instruction_keeps_its_location() -> None:
    m = row_sums_module()
    funcs = json.loads(m.to_json())["functions"]
    insts = funcs[0]["insts"]
    assert insts
    for inst in insts:
        loc = inst.get("loc")
        assert loc is not None and loc["file"].endswith("test_hir_ssa.py"), inst


# ---------------------------------------------------------------- errors


def test_definitions_of_another_type_are_build_errors() -> None:
    m = hir.Module("e")
    with m.host_function("f", [hir.i32], []) as b:
        acc = b.declare_var(hir.f32, "acc")
        mistyped = r"variable `acc` \(var0\) is f32 but v0 is i32"
        with pytest.raises(zyntax.BuildError, match=mistyped):
            b.def_var(acc, b.params[0])
        with pytest.raises(zyntax.BuildError, match="cannot use the Python literal"):
            b.def_var(b.declare_var(hir.i32), 1.5)
        b.def_var(acc, 2)  # an int literal becomes an f32 constant


def test_undefined_reads_are_build_errors_naming_variable_and_line() -> None:
    m = hir.Module("e")
    with m.host_function("f", [hir.i32], [hir.i32]) as b:
        t = b.declare_var(hir.i32, "t")
        with b.for_range(0, b.params[0]) as i:
            b.def_var(t, i)
        undefined = (
            r"variable `t` \(var0\) \(i32\) is used at .*test_hir_ssa.py:\d+:\d+ "
            r"in block\d+ before any definition"
        )
        with pytest.raises(zyntax.BuildError, match=undefined) as info:
            b.use_var(t)
        assert "the entry block0 reaches it without one" in str(info.value)
        # Nothing was changed by the failed read: the function still finishes.
        b.ret(b.params[0])
    m.verify()


def test_a_pending_read_fails_when_its_block_is_sealed() -> None:
    m = hir.Module("e")
    b = m.host_function("f", [hir.bool_], [])
    late = b.declare_var(hir.bool_, "late")
    header, done = b.block(), b.block()
    b.jump(header)
    b.switch_to(header)
    cond = b.use_var(late)  # the header is unsealed: decided at seal time
    b.def_var(late, b.params[0])
    b.br(cond, header, done)
    with pytest.raises(zyntax.BuildError, match="variable `late`"):
        b.seal_block(header)
    with pytest.raises(zyntax.BuildError, match="variable `late`"):
        b.finish()


def test_misuse_is_typed() -> None:
    m = hir.Module("e")
    with m.host_function("g", [hir.i32], []) as other:
        foreign = other.declare_var(hir.i32)
    with m.host_function("f", [hir.i32], []) as b:
        with pytest.raises(zyntax.BuildError, match="belongs to @g, not @f"):
            b.use_var(foreign)
        with pytest.raises(zyntax.ArgumentError, match=r"expected a zyntax\.hir\.Var"):
            b.use_var(3)  # type: ignore[arg-type]
        with pytest.raises(zyntax.ArgumentError):
            b.declare_var(42)
        with pytest.raises(zyntax.ArgumentError):
            b.declare_var(hir.i32, name=7)  # type: ignore[arg-type]
        blk = b.block()
        b.seal_block(blk)
        with pytest.raises(zyntax.BuildError, match="which is sealed"):
            b.jump(blk)
        with pytest.raises(zyntax.BuildError, match="entry block block0, which cannot be branch"):
            b.jump(b.entry)
    assert repr(foreign).startswith("<Var var0: i32 in @g>")
