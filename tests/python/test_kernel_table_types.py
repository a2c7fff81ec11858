"""`@zyntax.kernel` primitives whose operand types the instruction table
declares: a wrong type raises KernelTypeError with the table's message at the
kernel's source line (the translator builds through FunctionBuilder.inst,
which checks the row's signature), not a Python copy of the rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zyntax
from zyntax import hir, lang
from zyntax.frontend.errors import KernelTypeError


@zyntax.kernel
def reduce_floats(x, out):
    i = lang.grid(1)
    out[i] = lang.reduce_add_sync(0xFFFFFFFF, x[i])


@zyntax.kernel
def bfe_floats(x, out):
    i = lang.grid(1)
    out[i] = lang.bfe(x[i], 0, 4)


@pytest.mark.parametrize(
    ("kern", "message", "needle"),
    [
        (reduce_floats, "`redux.add` works on u32 or i32, got f32", "reduce_add_sync"),
        (bfe_floats, "`bfe` works on i32, u32, i64 or u64, got f32", "lang.bfe("),
    ],
)
def test_table_type_rule_at_the_kernel_line(kern, message, needle) -> None:  # type: ignore[no-untyped-def]
    f = np.zeros(8, np.float32)
    with pytest.raises(KernelTypeError) as info:
        kern.hir((f, f))
    err = info.value
    assert message in err.message
    assert err.file is not None and Path(err.file).resolve() == Path(__file__).resolve()
    src = Path(__file__).read_text().splitlines()
    assert err.line is not None and needle in src[err.line - 1]


def test_integer_operands_still_translate() -> None:
    u = np.zeros(8, np.uint32)
    text = reduce_floats.hir((u, u))
    assert "redux.add" in text
    text = bfe_floats.hir((u, u))
    assert "bfe" in text


def test_inst_without_results_takes_the_rows_types() -> None:
    # The result types come from the row (signature, scalar family or fixed
    # type), the operands are checked against it when built.
    m = hir.Module("infer", targets=["sm_80"], record_locations=False)
    b = m.kernel("k", [hir.u64, hir.f32, hir.u32, hir.i32])
    x, f, u, i = b.params
    assert [str(v.type) for v in b.inst("popc", [x])] == ["u64"]
    assert [str(v.type) for v in b.inst("redux.add", [u, i])] == ["i32"]
    assert [str(v.type) for v in b.inst("match.all", [u, x])] == ["u32", "bool"]
    assert [str(v.type) for v in b.inst("lane_id", [])] == ["u32"]
    assert b.inst("barrier", []) == []
    with pytest.raises(zyntax.BuildError, match="`popc` takes an integer, got f32"):
        b.inst("popc", [f])
    with pytest.raises(zyntax.ArgumentError, match="does not determine the result types"):
        b.inst("cast", [x])
    ops = hir.FunctionBuilder.operand_types
    assert ops("prmt") == ["u32", "u32", "u32"]
    assert ops("bfi") == ["T", "T", "u32", "u32"]
    assert ops("popc") is None  # a scalar family: the operand's own type


def test_every_plain_primitive_is_declared_against_a_row() -> None:
    from zyntax.frontend.translate.plain import plain
    from zyntax.frontend.translator import FunctionTranslator

    prims = [p for p in vars(lang).values() if isinstance(p, lang.Primitive) and p.inst]
    assert len(prims) >= 40
    for prim in prims:
        p = plain(prim)  # the mnemonic is a row, its operand count the row's
        assert p is not None and len(p.wants) == len(p.signature.parameters), prim
        # Declared once: no hand-written handler shadows the declaration.
        assert not hasattr(FunctionTranslator, "prim_" + prim.qualname), prim


@zyntax.kernel
def plain_calls(x: zyntax.u64[1], out: zyntax.u64[1], lanes: zyntax.i32[1]) -> None:
    i = lang.grid(1)
    if i < x.shape[0]:
        out[2 * i] = lang.bfe(x[i], pos=4, length=12)  # keywords, T bound by x: u64
        out[2 * i + 1] = lang.bfi(0xAB, x[i], 8, 8)  # the literal takes b's type
        lanes[i] = lang.lane_id()  # u32 lane id cast to the language's i32
    lang.syncwarp()  # the mask's default (every lane of the warp reaches it)


def test_plain_primitives_match_numpy() -> None:
    rng = np.random.default_rng()
    n = int(rng.integers(100, 300))
    x = rng.integers(0, 1 << 63, n, dtype=np.uint64)
    out = np.full(2 * n, 0xDEADBEEF, np.uint64)
    lanes = np.full(n, -7, np.int32)
    plain_calls.run_cpu(x, out, lanes, grid=(n + 63) // 64, block=64)
    np.testing.assert_array_equal(out[0::2], (x >> np.uint64(4)) & np.uint64(0xFFF))
    want = (x & ~np.uint64(0xFF00)) | np.uint64(0xAB00)
    np.testing.assert_array_equal(out[1::2], want)
    np.testing.assert_array_equal(lanes, np.arange(n, dtype=np.int32) % 32)


def test_a_plain_primitive_called_wrongly_names_itself() -> None:
    @zyntax.kernel
    def missing(x: zyntax.u32[1]) -> None:
        x[0] = lang.prmt(x[0], x[0])

    with pytest.raises(KernelTypeError, match=r"zyntax\.lang\.prmt\(\): missing .*'sel'"):
        missing.hir()
