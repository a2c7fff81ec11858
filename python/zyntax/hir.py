"""Build zyntax HIR from Python.

A `Module` holds functions; `Module.kernel()`, `device_function()` and
`host_function()` return a `FunctionBuilder` with one method per HIR
instruction. Structured control flow uses context managers::

    from zyntax import hir

    m = hir.Module("demo", targets=["sm_80"])
    with m.kernel("fill", [hir.ptr("global", hir.f32), hir.u32], max_threads=256) as b:
        out, n = b.params
        i = b.block_idx() * b.block_dim() + b.thread_idx()
        with b.if_(i < n):
            b.store(b.ptr_add(out, i), 1.0)
    m.verify()
    print(m.to_zir())

Operands may be `Value`s or Python numbers; numbers become constants of the
type the other operands (or the instruction) imply. Every instruction records
the calling Python file:line, so verifier errors point at your code.

Variables (`declare_var`, `def_var`, `use_var`) let a front-end assign and
read names in any block; the builder constructs SSA form (block parameters
where paths join), also inside `if_`/`for_range` scopes, so loops need no
carried values (see docs/python.md, "Variables and SSA construction").
"""

from __future__ import annotations

from zyntax._native import (
    FORMAT_VERSION,
    FULL_MASK,
    ForRange,
    FunctionBuilder,
    IfBranch,
    IfElse,
    IfScope,
    Loop,
    Module,
    Type,
    array,
    bf16,
    bool_,
    f16,
    f32,
    f64,
    frag,
    i8,
    i16,
    i32,
    i64,
    ptr,
    tensormap,
    u8,
    u16,
    u32,
    u64,
    vec,
)
from zyntax._native import Block as Block
from zyntax._native import Value as Value
from zyntax._native import Var as Var
from zyntax._native import parse_zir as _parse_zir
from zyntax.errors import ArgumentError

#: Scalar types by `.zir` name.
SCALARS: dict[str, Type] = {
    str(t): t for t in (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64)
}


def check_text(value: object, name: str) -> str:
    """`value` as text zyntax can read: a `str` without lone surrogates (which
    cannot become UTF-8), else an `ArgumentError` naming the parameter."""
    if not isinstance(value, str):
        raise ArgumentError(f"argument '{name}': expected a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgumentError(
            f"argument '{name}': text is not valid Unicode (a lone surrogate at character "
            f"{e.start}); zyntax reads UTF-8 text only"
        ) from None
    return value


def parse_zir(text: str, filename: str | None = None) -> Module:
    """Parses a module from `.zir` text; `filename` names it in error locations."""
    check_text(text, "text")
    if filename is not None:
        check_text(filename, "filename")
    return _parse_zir(text, filename)


def type_(text: str) -> Type:
    """Parses a type from its `.zir` spelling, e.g. ``type_("ptr<shared, f32>")``."""
    return Type.parse(check_text(text, "text"))


__all__ = [
    "FORMAT_VERSION",
    "FULL_MASK",
    "SCALARS",
    "Block",
    "ForRange",
    "FunctionBuilder",
    "IfBranch",
    "IfElse",
    "IfScope",
    "Loop",
    "Module",
    "Type",
    "Value",
    "Var",
    "array",
    "bf16",
    "bool_",
    "f16",
    "f32",
    "f64",
    "frag",
    "i8",
    "i16",
    "i32",
    "i64",
    "parse_zir",
    "ptr",
    "tensormap",
    "type_",
    "u8",
    "u16",
    "u32",
    "u64",
    "vec",
]
