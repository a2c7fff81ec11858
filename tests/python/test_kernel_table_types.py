"""`@zyntax.kernel` primitives whose operand types the instruction table
declares: a wrong type raises KernelTypeError with the table's message at the
kernel's source line (the translator builds through FunctionBuilder.inst,
which checks the row's signature), not a Python copy of the rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zyntax
from zyntax import lang
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
