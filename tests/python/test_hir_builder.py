"""The zyntax.hir builder: every instruction, operand conversion, structured
control flow, locations, verification, text and JSON round trips, bad input."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp

HERE = Path(__file__).resolve()
G_F32 = hir.ptr("global", hir.f32)
G_U32 = hir.ptr("global", hir.u32)
G_I64 = hir.ptr("global", hir.i64)


def lineno_of(marker: str) -> int:
    """Line number of the first line in this file containing `marker`."""
    for n, line in enumerate(HERE.read_text().splitlines(), start=1):
        if marker in line:
            return n
    raise AssertionError(marker)


def kernel_module(
    body: Callable[[hir.FunctionBuilder], None],
    params: list[hir.Type] | None = None,
    targets: tuple[str, ...] = ("sm_90",),
) -> hir.Module:
    m = hir.Module("t", targets=list(targets))
    with m.kernel("k", params if params is not None else [G_F32, G_U32, hir.f32, hir.u32]) as b:
        body(b)
    return m


def last_inst(m: hir.Module) -> str:
    """The last instruction before the final `return` of @k."""
    lines = [ln.strip() for ln in m.function_zir("k").splitlines()]
    insts = [ln for ln in lines if ln and not ln.endswith(":") and ln not in ("}", "return")]
    insts = [ln for ln in insts if not ln.startswith("kernel ")]
    return insts[-1]


# Each case: a builder action and the regex its last instruction must match.
CASES: list[tuple[str, Callable[[hir.FunctionBuilder], object], str]] = [
    ("const", lambda b: b.const(7, hir.i32), r"i32 = const 7"),
    ("fconst", lambda b: b.const(1.5, hir.f32), r"f32 = const 1\.5"),
    ("bconst", lambda b: b.const(True, hir.bool_), r"bool = const true"),
    ("add", lambda b: b.add(b.params[2], 1.0), r"f32 = add v2, v\d+"),
    ("sub", lambda b: b.sub(b.params[3], 1), r"u32 = sub"),
    ("mul", lambda b: b.mul(b.params[3], 3), r"u32 = mul"),
    ("div", lambda b: b.div(b.params[2], 2.0), r"f32 = div"),
    ("rem", lambda b: b.rem(b.params[3], 5), r"u32 = rem"),
    ("min", lambda b: b.min(b.params[2], 0.0), r"f32 = min"),
    ("max", lambda b: b.max(b.params[2], 0.0), r"f32 = max"),
    ("and", lambda b: b.and_(b.params[3], 0xFF), r"u32 = and"),
    ("or", lambda b: b.or_(b.params[3], 1), r"u32 = or"),
    ("xor", lambda b: b.xor(b.params[3], 1), r"u32 = xor"),
    ("shl", lambda b: b.shl(b.params[3], 2), r"u32 = shl"),
    ("shr", lambda b: b.shr(b.params[3], 2), r"u32 = shr"),
    ("binary", lambda b: b.binary("max", b.params[3], 2), r"u32 = max"),
    ("neg", lambda b: b.neg(b.params[2]), r"f32 = neg v2"),
    ("not", lambda b: b.not_(b.params[3]), r"u32 = not v3"),
    ("abs", lambda b: b.abs(b.params[2]), r"f32 = abs v2"),
    ("sqrt", lambda b: b.sqrt(b.params[2]), r"f32 = sqrt v2"),
    ("rsqrt", lambda b: b.rsqrt(b.params[2]), r"f32 = rsqrt v2"),
    ("exp", lambda b: b.exp(b.params[2]), r"f32 = exp v2"),
    ("log", lambda b: b.log(b.params[2]), r"f32 = log v2"),
    ("sin", lambda b: b.sin(b.params[2]), r"f32 = sin v2"),
    ("cos", lambda b: b.cos(b.params[2]), r"f32 = cos v2"),
    ("tanh", lambda b: b.tanh(b.params[2]), r"f32 = tanh v2"),
    ("floor", lambda b: b.floor(b.params[2]), r"f32 = floor v2"),
    ("ceil", lambda b: b.ceil(b.params[2]), r"f32 = ceil v2"),
    ("unary", lambda b: b.unary("exp", b.params[2]), r"f32 = exp v2"),
    ("fma", lambda b: b.fma(b.params[2], 2.0, b.params[2]), r"f32 = fma v2, v\d+, v2"),
    ("eq", lambda b: b.eq(b.params[3], 0), r"bool = cmp\.eq"),
    ("ne", lambda b: b.ne(b.params[3], 0), r"bool = cmp\.ne"),
    ("lt", lambda b: b.lt(b.params[3], 0), r"bool = cmp\.lt"),
    ("le", lambda b: b.le(b.params[3], 0), r"bool = cmp\.le"),
    ("gt", lambda b: b.gt(b.params[3], 0), r"bool = cmp\.gt"),
    ("ge", lambda b: b.ge(b.params[3], 0), r"bool = cmp\.ge"),
    ("cmp", lambda b: b.cmp("le", 1.0, b.params[2]), r"bool = cmp\.le v\d+, v2"),
    ("select", lambda b: b.select(b.params[3] > 1, b.params[2], 0.0), r"f32 = select"),
    ("cast", lambda b: b.cast(b.params[3], hir.f32), r"f32 = cast v3"),
    ("bitcast", lambda b: b.bitcast(b.params[2], hir.u32), r"u32 = bitcast v2"),
    ("load", lambda b: b.load(b.params[0]), r"f32 = load v0"),
    ("store", lambda b: b.store(b.params[1], 5), r"store v1, v\d+"),
    ("ptr_add", lambda b: b.ptr_add(b.params[0], 4), r"ptr<global, f32> = ptr_add v0, v\d+"),
    (
        "ptr_cast",
        lambda b: b.ptr_cast(b.params[0], hir.ptr("generic", hir.f32)),
        r"ptr<generic, f32> = ptr_cast v0",
    ),
    ("alloca", lambda b: b.alloca(hir.f32, 4), r"ptr<local, f32> = alloca f32, 4"),
    ("shared_alloc", lambda b: b.shared_alloc(hir.u32, 64), r"shared_alloc u32, 64"),
    ("dyn_shared", lambda b: b.dyn_shared(hir.f32), r"ptr<shared, f32> = dyn_shared f32"),
    ("thread_idx", lambda b: b.thread_idx("y"), r"u32 = thread_idx\.y"),
    ("block_idx", lambda b: b.block_idx(2), r"u32 = block_idx\.z"),
    ("block_dim", lambda b: b.block_dim(), r"u32 = block_dim\.x"),
    ("grid_dim", lambda b: b.grid_dim("x"), r"u32 = grid_dim\.x"),
    ("lane_id", lambda b: b.lane_id(), r"u32 = lane_id"),
    ("barrier", lambda b: b.barrier(), r"^barrier$"),
    ("fence", lambda b: b.fence("system"), r"^fence\.system$"),
    ("warp_sync", lambda b: b.warp_sync(), r"^warp_sync v\d+$"),
    ("atomic", lambda b: b.atomic("max", b.params[1], 3, "block"), r"atomic\.max\.block v1"),
    ("atomic_add", lambda b: b.atomic_add(b.params[0], 1.0), r"f32 = atomic\.add\.device v0"),
    ("atomic_sub", lambda b: b.atomic_sub(b.params[1], 1), r"atomic\.sub\.device"),
    ("atomic_min", lambda b: b.atomic_min(b.params[1], 1), r"atomic\.min\.device"),
    ("atomic_max", lambda b: b.atomic_max(b.params[1], 1), r"atomic\.max\.device"),
    ("atomic_and", lambda b: b.atomic_and(b.params[1], 1), r"atomic\.and\.device"),
    ("atomic_or", lambda b: b.atomic_or(b.params[1], 1), r"atomic\.or\.device"),
    ("atomic_xor", lambda b: b.atomic_xor(b.params[1], 1, scope="system"), r"atomic\.xor\.system"),
    ("atomic_exch", lambda b: b.atomic_exch(b.params[1], 1), r"atomic\.exch\.device"),
    ("atomic_inc", lambda b: b.atomic_inc(b.params[1], 9), r"atomic\.inc\.device"),
    ("atomic_dec", lambda b: b.atomic_dec(b.params[1], 9), r"atomic\.dec\.device"),
    ("atomic_cas", lambda b: b.atomic_cas(b.params[1], 0, 1), r"u32 = atomic\.cas\.device v1"),
    ("shfl", lambda b: b.shfl("idx", b.params[2], 0), r"f32 = shfl\.idx v\d+, v2, v\d+ width 32"),
    ("shfl_idx", lambda b: b.shfl_idx(b.params[2], 3, width=8), r"shfl\.idx .* width 8"),
    ("shfl_up", lambda b: b.shfl_up(b.params[2], 1), r"shfl\.up"),
    ("shfl_down", lambda b: b.shfl_down(b.params[3], 16), r"u32 = shfl\.down"),
    ("shfl_xor", lambda b: b.shfl_xor(b.params[2], 1, mask=0xFFFF), r"shfl\.xor"),
    ("vote", lambda b: b.vote("any", b.params[3] > 0), r"bool = vote\.any"),
    ("vote_ballot", lambda b: b.vote_ballot(b.params[3] > 0), r"u32 = vote\.ballot"),
    ("vote_any", lambda b: b.vote_any(True), r"bool = vote\.any"),
    ("vote_all", lambda b: b.vote_all(b.params[3] > 0), r"bool = vote\.all"),
    ("match_any", lambda b: b.match_any(b.params[3]), r"u32 = match\.any v\d+, v3"),
    ("match_all", lambda b: b.match_all(b.params[3]), r"u32, v\d+: bool = match\.all"),
    ("cp_async_commit", lambda b: b.cp_async_commit(), r"^cp\.async\.commit$"),
    ("cp_async_wait", lambda b: b.cp_async_wait(2), r"^cp\.async\.wait 2$"),
]


@pytest.mark.parametrize(("name", "action", "pattern"), CASES, ids=[c[0] for c in CASES])
def test_instruction(
    name: str, action: Callable[[hir.FunctionBuilder], object], pattern: str
) -> None:
    m = kernel_module(lambda b: action(b))
    m.verify()
    assert re.search(pattern, last_inst(m)), last_inst(m)
    # The text reads back to the same module.
    assert hir.parse_zir(m.to_zir()) == m


def test_vectors_and_async_copy() -> None:
    f4 = hir.vec(hir.f32, 4)

    def body(b: hir.FunctionBuilder) -> None:
        src, dst = b.params
        buf = b.shared_alloc(f4, 32)
        b.cp_async(b.ptr_add(buf, b.thread_idx()), src, bytes=16, cache="cg")
        b.cp_async(b.ptr_add(buf, 1), src, bytes=16, cache="ca")
        b.cp_async_commit()
        b.cp_async_wait(0)
        b.barrier()
        v = b.load(buf)
        x = b.extract(v, 2)
        b.store(dst, b.insert(v, x * 2.0, 0))

    m = kernel_module(body, [hir.ptr("global", f4), hir.ptr("global", f4)], ("sm_80",))
    m.verify()
    text = m.to_zir()
    assert "cp.async.cg.16" in text and "cp.async.ca.16" in text
    assert re.search(r"f32 = extract v\d+, 2", text)
    assert re.search(r"vec<f32, 4> = insert v\d+, v\d+, 0", text)
    assert hir.parse_zir(text) == m
    # cp.async needs sm_80: the verifier gates it per target.
    old = kernel_module(body, [hir.ptr("global", f4), hir.ptr("global", f4)], ("sm_75",))
    with pytest.raises(zyntax.VerifyError, match="sm_80"):
        old.verify()


def test_mma() -> None:
    fa = hir.frag("a", "m16n16k16", hir.f16, "row")
    fb = hir.frag("b", "m16n16k16", hir.f16, "col")
    facc = hir.frag("acc", "m16n16k16", hir.f32)

    def body(b: hir.FunctionBuilder) -> None:
        a, bb, c = b.params
        x = b.mma_load(fa, a, 16)
        y = b.mma_load(fb, bb, 16)
        z = b.mma_fill(facc, 0.5)
        b.mma_store(c, b.mma(x, y, z), 16, layout="col")

    params = [hir.ptr("global", hir.f16), hir.ptr("global", hir.f16), G_F32]
    m = kernel_module(body, params, ("sm_70", "sm_90"))
    m.verify()
    text = m.to_zir()
    assert "frag<a, m16n16k16, f16, row> = mma.load.row" in text
    assert "frag<acc, m16n16k16, f32> = mma.fill" in text
    assert "mma.store.col" in text
    assert hir.parse_zir(text) == m
    with pytest.raises(zyntax.BuildError, match="accumulator needs layout"):
        kernel_module(lambda b: b.mma_load(facc, b.params[2], 16), params)
    with pytest.raises(zyntax.ArgumentError, match="fragment type"):
        kernel_module(lambda b: b.mma_fill(hir.f32, 0.0), params)


def test_operators_emit_instructions() -> None:
    def body(b: hir.FunctionBuilder) -> None:
        _, _, x, n = b.params
        for v in (x + 1, 1 - x, x * x, x / 2, -x, 2.0 / x):
            assert v.type == hir.f32
        for v in (n // 2, n % 3, n & 1, 1 | n, n ^ n, n << 1, n >> 1, ~n, 3 - n):
            assert v.type == hir.u32
        for v in (n < 1, n <= 1, n > 1, n >= 1, 1 < n):
            assert v.type == hir.bool_

    m = kernel_module(body)
    m.verify()
    text = m.function_zir("k")
    for op in ["add", "sub", "mul", "div", "neg", "rem", "and", "or", "xor", "shl", "shr"]:
        assert f" = {op} " in text, op
    assert "cmp.gt v" in text  # `1 < n` is reflected to `n > 1`


def test_value_identity_and_truthiness() -> None:
    def body(b: hir.FunctionBuilder) -> None:
        x = b.params[2]
        assert x == b.params[2] and x != b.params[3]
        assert len({x, b.params[2], b.params[3]}) == 2
        assert x.name == "v2" and x.function == "k" and x.type == hir.f32
        with pytest.raises(TypeError, match="no truth value"):
            if x:  # a common mistake: Python control flow on a symbolic value
                pass

    kernel_module(body).verify()


def test_literal_conversion_errors() -> None:
    with pytest.raises(zyntax.BuildError, match="does not fit in u8"):
        kernel_module(lambda b: b.const(256, hir.u8))
    with pytest.raises(zyntax.BuildError, match="does not fit in i8"):
        kernel_module(lambda b: b.const(-129, hir.i8))
    with pytest.raises(zyntax.BuildError, match=r"literal 1.5 where a u32"):
        kernel_module(lambda b: b.add(b.params[3], 1.5))
    with pytest.raises(zyntax.ArgumentError, match=r"at least one zyntax.hir.Value"):
        kernel_module(lambda b: b.add(1, 2))
    with pytest.raises(
        zyntax.ArgumentError, match=r"expected a zyntax.hir.Value or a Python number"
    ):
        kernel_module(lambda b: b.add(b.params[3], "1"))
    with pytest.raises(zyntax.ArgumentError, match=r"must be a zyntax.hir.Value"):
        kernel_module(lambda b: b.load(3))
    with pytest.raises(zyntax.BuildError, match="load needs a pointer"):
        kernel_module(lambda b: b.load(b.params[2]))
    # Extremes of the unsigned range keep their bits.
    m = kernel_module(lambda b: b.const(2**64 - 1, hir.u64))
    assert "u64 = const 18446744073709551615" in m.to_zir()


def test_unknown_names() -> None:
    cases: list[tuple[Callable[[hir.FunctionBuilder], object], str]] = [
        (lambda b: b.thread_idx("w"), "unknown dimension 'w'"),
        (lambda b: b.thread_idx(3), "unknown dimension 3"),
        (lambda b: b.fence("galaxy"), "unknown scope 'galaxy'"),
        (lambda b: b.atomic("mul", b.params[1], 1), "unknown atomic op 'mul'"),
        (lambda b: b.shfl("rotate", b.params[2], 1), "unknown shuffle mode"),
        (lambda b: b.vote("some", True), "unknown vote mode"),
        (lambda b: b.binary("pow", b.params[2], 2.0), "unknown binary op 'pow'"),
        (lambda b: b.unary("erf", b.params[2]), "unknown unary op 'erf'"),
        (lambda b: b.cmp("lg", b.params[2], 2.0), "unknown comparison 'lg'"),
        (lambda b: b.cp_async(b.params[0], b.params[0], cache="cs"), "unknown cache hint"),
        (lambda b: b.mma_store(b.params[0], b.params[0], 16, layout="diag"), "unknown layout"),
    ]
    for action, message in cases:
        with pytest.raises(zyntax.BuildError, match=message):
            kernel_module(action)


def test_module_level_bad_input() -> None:
    m = hir.Module("t")
    with pytest.raises(zyntax.BuildError, match="unknown arch 'sm_99'"):
        hir.Module("t", targets=["sm_99"])
    with pytest.raises(zyntax.BuildError, match="invalid PTX version"):
        hir.Module("t", ptx_version="eight")
    with pytest.raises(zyntax.BuildError, match="invalid function name"):
        m.kernel("bad name", [])
    with pytest.raises(zyntax.BuildError, match="unknown opt level 'O9'"):
        m.host_function("f", [], opt_level="O9")
    with pytest.raises(zyntax.ArgumentError, match="sequence of types"):
        m.kernel("k", hir.f32)
    with pytest.raises(zyntax.ArgumentError, match="max_threads"):
        m.kernel("k", [], max_threads=(1, 2, 3, 4))
    with m.kernel("k", []):
        pass
    with pytest.raises(zyntax.BuildError, match="already has a function @k"):
        m.kernel("k", [])


def test_values_are_bound_to_their_function() -> None:
    m = hir.Module("t")
    f = m.device_function("f", [hir.f32], [hir.f32])
    g = m.device_function("g", [hir.f32], [hir.f32])
    with pytest.raises(zyntax.BuildError, match="belongs to function @f, not @g"):
        g.add(f.params[0], 1.0)
    blk = f.block()
    with pytest.raises(zyntax.BuildError, match="belongs to @f, not @g"):
        g.switch_to(blk)
    f.ret(f.params[0])
    g.ret(g.params[0])
    f.finish()
    g.finish()
    m.verify()


def test_closed_builder_and_unfinished_module() -> None:
    m = hir.Module("t")
    b = m.kernel("k", [])
    with pytest.raises(zyntax.BuildError, match="still being built"):
        m.verify()
    b.ret()
    b.finish()
    with pytest.raises(zyntax.BuildError, match="is closed"):
        b.barrier()
    with pytest.raises(zyntax.BuildError, match="already finished"):
        b.finish()
    m.verify()


def test_exception_abandons_function() -> None:
    m = hir.Module("t")
    with pytest.raises(ZeroDivisionError), m.kernel("k", []) as b:
        b.barrier()
        _ = 1 / 0
    assert m.functions == []
    with m.kernel("k", []):  # the name is free again
        pass
    m.verify()


def test_append_after_terminator() -> None:
    def body(b: hir.FunctionBuilder) -> None:
        b.ret()
        b.barrier()

    with pytest.raises(zyntax.BuildError, match="already ends in a terminator"):
        kernel_module(body)


def test_explicit_blocks_and_branches() -> None:
    m = hir.Module("t")
    with m.device_function("clamp0", [hir.i32], [hir.i32]) as b:
        (x,) = b.params
        neg = b.block()
        done = b.block(hir.i32)
        assert len(done.params) == 1 and done.params[0].type == hir.i32
        b.br(x < 0, neg, done, else_args=[x])
        b.switch_to(neg)
        b.jump(done, 0)
        b.switch_to(done)
        assert b.current_block == done
        b.ret(done.params[0])
    m.verify()
    text = m.to_zir()
    assert re.search(r"br v\d+, block1, block2\(v0\)", text)
    assert hir.parse_zir(text) == m


def test_structured_if_else_and_loops() -> None:
    m = hir.Module("t")
    with m.device_function("f", [G_F32, hir.u32], [hir.f32]) as b:
        p, n = b.params
        with b.loop(0, n, carry=[b.const(0.0, hir.f32)]) as lp:
            x = b.load(b.ptr_add(p, lp.index))
            pick = b.if_else(x > 0.0, results=[hir.f32])
            with pick as (pos, nonpos):
                with pos:
                    pos.yield_(x)
                with nonpos:
                    nonpos.yield_(0.0)
            lp.next(lp.carried[0] + pick.results[0])
        with b.for_range(0, 4) as i:
            assert i.type == hir.i32
        with b.if_(n > 3):
            b.ret(1.0)
        b.ret(lp.results[0])
    m.verify()
    text = m.function_zir("f")
    assert text.count("br ") == 4  # loop, if_else, for_range, if_
    assert hir.parse_zir(m.to_zir()) == m


def test_structured_misuse() -> None:
    def yields_missing(b: hir.FunctionBuilder) -> None:
        with b.if_else(b.params[3] > 0, results=[hir.u32]) as (t, e):
            with t:
                pass
            with e:
                e.yield_(1)

    with pytest.raises(zyntax.BuildError, match="must yield 1 value"):
        kernel_module(yields_missing)

    def no_then(b: hir.FunctionBuilder) -> None:
        with b.if_else(b.params[3] > 0):
            pass

    with pytest.raises(zyntax.BuildError, match="needs its then-branch"):
        kernel_module(no_then)

    def out_of_order(b: hir.FunctionBuilder) -> None:
        outer = b.if_(b.params[3] > 0)
        inner = b.for_range(0, 4)
        outer.__enter__()
        inner.__enter__()
        outer.__exit__(None, None, None)

    with pytest.raises(zyntax.BuildError, match="closed out of order"):
        kernel_module(out_of_order)

    def bad_step(b: hir.FunctionBuilder) -> None:
        with b.for_range(0, 4, 0):
            pass

    with pytest.raises(zyntax.BuildError, match="positive step"):
        kernel_module(bad_step)

    def wrong_next(b: hir.FunctionBuilder) -> None:
        with b.loop(0, 4, carry=[b.params[2]]) as lp:
            lp.next()

    with pytest.raises(zyntax.BuildError, match="carries 1 value"):
        kernel_module(wrong_next)

    def reenter(b: hir.FunctionBuilder) -> None:
        scope = b.if_(b.params[3] > 0)
        with scope:
            pass
        with scope:
            pass

    with pytest.raises(zyntax.BuildError, match="only once"):
        kernel_module(reenter)

    m = hir.Module("t")
    b = m.kernel("k", [hir.u32])
    b.if_(b.params[0] > 1).__enter__()
    with pytest.raises(zyntax.BuildError, match="scope\\(s\\) still open"):
        b.finish()


def test_calls() -> None:
    m = hir.Module("t", targets=["sm_80"])
    with m.device_function("sq", [hir.f32], [hir.f32]) as f:
        f.ret(f.params[0] * f.params[0])
    with m.device_function("pair", [hir.u32], [hir.u32, hir.u32]) as f:
        f.ret(f.params[0], 1)
    with m.device_function("nothing", []) as f:
        pass
    with m.kernel("k", [G_F32]) as b:
        (p,) = b.params
        y = b.call("sq", b.load(p))
        a, c = b.call("@pair", 3)
        assert b.call(f) is None
        b.store(p, y)
        assert a.type == hir.u32 and c.type == hir.u32
    m.verify()
    assert "= call @sq v" in m.to_zir()
    assert m.kernels == ["k"]
    with pytest.raises(zyntax.BuildError, match="unknown function @nope"):
        kernel_module(lambda b: b.call("nope"))


def test_locations_point_at_python_source() -> None:
    m = hir.Module("t", targets=["sm_90"])
    with m.kernel("k", [G_F32]) as b:
        bad = b.add(b.params[0], b.params[0])  # LOC-MARKER-1
        b.store(b.params[0], 1.0)
    del bad
    with pytest.raises(zyntax.VerifyError) as info:
        m.verify()
    line = lineno_of("LOC-MARKER-1")
    assert f"{HERE}:{line}:" in str(info.value)
    diags = info.value.diagnostics  # type: ignore[attr-defined]
    assert diags[0]["function"] == "k"
    assert diags[0]["loc"][0] == str(HERE) and diags[0]["loc"][1] == line
    assert "add" in diags[0]["inst_text"]
    # The locations survive JSON; they do not take part in equality.
    insts = json.loads(m.to_json())["functions"][0]["insts"]
    assert insts[0]["loc"]["line"] == line
    assert hir.Module.from_json(m.to_json()) == m


def test_location_override_and_opt_out() -> None:
    m = hir.Module("t")
    with m.kernel("k", []) as b:
        b.set_location("kernel.dsl", 12, 3)
        b.barrier()
        b.set_location(None)
        b.barrier()
    insts = json.loads(m.to_json())["functions"][0]["insts"]
    assert insts[0]["loc"] == {"file": "kernel.dsl", "line": 12, "col": 3}
    assert insts[1]["loc"]["file"] == str(HERE)
    quiet = hir.Module("q", record_locations=False)
    with quiet.kernel("k", []) as b:
        b.barrier()
    assert "loc" not in json.loads(quiet.to_json())["functions"][0]["insts"][0]


def test_kernel_metadata_and_constraints() -> None:
    m = hir.Module("meta", targets=["sm_80", "sm_90"], ptx_version="7.8")
    with m.kernel(
        "k",
        [G_F32],
        max_threads=(128, 2),
        min_blocks=2,
        max_registers=64,
        shared_bytes=1024,
        arch="sm_90",
        no_bounds_check=True,
        opt_level="O2",
    ):
        pass
    with m.host_function(
        "h", [hir.f64], [hir.f64], critical_path=True, no_alloc=True, opt_level="Olatency"
    ) as h:
        h.ret(h.params[0])
    m.verify()
    header = m.function_zir("k").splitlines()[0]
    for part in [
        "max_threads(128, 2, 1)",
        "min_blocks(2)",
        "max_registers(64)",
        "shared_bytes(1024)",
        "arch(sm_90)",
        "no_bounds_check",
        "opt(O2)",
    ]:
        assert part in header, part
    assert "critical_path no_alloc opt(Olatency)" in m.function_zir("h")
    assert m.targets == ["sm_80", "sm_90"] and m.ptx_version == "7.8"
    m.targets = ["sm_70"]
    m.ptx_version = None
    assert "targets(sm_70)" in m.to_zir()
    assert hir.parse_zir(m.to_zir()) == m


def test_verifier_rejects_bad_metadata() -> None:
    m = hir.Module("t")
    with m.kernel("k", [], max_threads=2048):
        pass
    with pytest.raises(zyntax.VerifyError, match="max_threads"):
        m.verify()
    # no_alloc allows bounded stack (a small constant alloca), not an unbounded one.
    m2 = hir.Module("t")
    with m2.host_function("h", [], no_alloc=True) as h:
        h.alloca(hir.f32)
    m2.verify()
    m3 = hir.Module("t")
    with m3.host_function("h", [], no_alloc=True) as h:
        h.alloca(hir.f64, 1 << 20)
    with pytest.raises(zyntax.VerifyError, match="no_alloc function whose stack reaches 8388608"):
        m3.verify()


def test_serialization_round_trips() -> None:
    import reduce_sum

    m = reduce_sum.build()
    again = hir.Module.from_json(m.to_json())
    assert again == m and again.to_zir() == m.to_zir()
    assert pickle.loads(pickle.dumps(m)) == m
    assert m.copy() == m
    assert hir.parse_zir(m.to_zir(), filename="reduce_sum.zir") == m
    assert m != hir.Module("other")
    assert repr(m) == "<zyntax.hir.Module 'reduce_sum' with 1 function(s)>"
    with pytest.raises(zyntax.ParseError, match="invalid module JSON"):
        hir.Module.from_json("{not json")


def test_parse_errors_carry_location() -> None:
    with pytest.raises(zyntax.ParseError) as info:
        hir.parse_zir('module "m"\n\nkernel @k {\nblock0:\n    bogus v1\n}\n', filename="m.zir")
    err = info.value
    assert err.file == "m.zir" and err.line == 5  # type: ignore[attr-defined]
    assert str(err).startswith("m.zir:5:")


def test_json_with_bad_ids_is_rejected_not_crashed() -> None:
    m = kernel_module(lambda b: b.add(b.params[2], 1.0))
    data = json.loads(m.to_json())
    data["functions"][0]["insts"][0]["args"] = [999, 1000]
    # Loading checks every id (Module::check_structure), so nothing downstream
    # ever indexes with a bad one.
    with pytest.raises(zyntax.ParseError, match="refers to v999"):
        hir.Module.from_json(json.dumps(data))


def test_if_else_without_else_branch() -> None:
    def body(b: hir.FunctionBuilder) -> None:
        p, n = b.params[1], b.params[3]
        with b.if_else(n > 2) as (then, _):
            with then:
                b.store(p, n)

    m = kernel_module(body)
    m.verify()
    text = m.function_zir("k")
    # then-branch, empty else-branch and merge: both fall through to the merge block.
    assert text.count("jump ") == 2
    assert hir.parse_zir(m.to_zir()) == m
    # On the interpreter the store in the then-branch happens only when n > 2.
    for n_val, want in ((5, 5), (1, 7)):
        out = np.full(1, 7, np.uint32)
        interp.launch(m, "k", 1, 1, np.zeros(1, np.float32), out, 0.0, n_val)
        assert out[0] == want
