"""``zyntax.lang`` primitives that are one HIR instruction on the call's own
operands, declared instead of written: the primitive's line in ``lang.py``
names the instruction's ``.zir`` mnemonic and the primitive's parameters
(``popc = Primitive("popc", "popc(x)")``, :attr:`zyntax.lang.Primitive.inst`).
Everything else comes from the op table's row: the operand types literals become
(``FunctionBuilder.operand_types``: ``u32`` for a mask, the type variable
several operands share), the type checks and their messages, and the result
types (``FunctionBuilder.inst`` without ``results``). Primitives with
language-level meaning (tuples of dims, array views, mbarrier arrays,
literal-only arguments, several instructions) stay ``prim_*`` methods.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from zyntax import hir, lang
from zyntax.frontend.emit import Value
from zyntax.frontend.hirtypes import SCALAR_NAMES, Scalar, scalar
from zyntax.frontend.translate.operands import Lit, Operand, Ref, TupleVal

if TYPE_CHECKING:
    from zyntax.frontend.translate.exprs import ExprTranslator

_SPEC = re.compile(r"([\w.]+)\(([^)]*)\)(?:\s*->\s*(\w+))?")


@dataclass(frozen=True)
class Plain:
    """A parsed :attr:`zyntax.lang.Primitive.inst`."""

    mnemonic: str
    signature: inspect.Signature
    #: What each operand asks for (``FunctionBuilder.operand_types``).
    wants: tuple[str, ...]
    cast: Scalar | None


def plain(prim: lang.Primitive) -> Plain | None:
    """The declaration of ``prim`` if it is a plain instruction."""
    return None if prim.inst is None else _parse(prim.inst)


@cache
def _parse(spec: str) -> Plain:
    m = _SPEC.fullmatch(spec)
    assert m is not None, spec
    mnemonic, params, cast = m.groups()
    ps = []
    for p in filter(None, (s.strip() for s in params.split(","))):
        pname, _, default = p.partition("=")
        ps.append(
            inspect.Parameter(
                pname,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=Lit(int(default, 0)) if default else inspect.Parameter.empty,
            )
        )
    # A row without a signature is a scalar family: every operand shares its type.
    wants = hir.FunctionBuilder.operand_types(mnemonic) or ["T"] * len(ps)
    assert len(wants) == len(ps), (spec, wants)
    return Plain(mnemonic, inspect.Signature(ps), tuple(wants), scalar(cast) if cast else None)


def emit_plain(
    tr: ExprTranslator, p: Plain, e: ast.AST, args: list[Operand], kwargs: dict[str, Operand]
) -> Operand:
    """``p`` on the call's operands (a ``TypeError`` for a wrong call, as a
    ``prim_*`` method raises it)."""
    bound = p.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    ops = list(bound.arguments.values())
    # A type variable takes the type of the first value bound to it; literals follow.
    var_types: dict[str, Scalar] = {}
    for x, want in zip(ops, p.wants, strict=True):
        if want.isupper() and isinstance(x, Value) and want not in var_types:
            var_types[want] = tr.scalar_type(x, e)
    vals = []
    for x, want in zip(ops, p.wants, strict=True):
        t = var_types.get(want) if want.isupper() else _scalar(want)
        vals.append(tr.value(x, e, t))
    rs = tr.fn.emit(p.mnemonic, vals)
    if not rs:
        return Ref(None)
    if len(rs) > 1:
        return TupleVal(list(rs))
    return rs[0] if p.cast is None else tr.fn.emit1("cast", [rs[0]], p.cast)


def _scalar(want: str) -> Scalar | None:
    return scalar(want) if want in SCALAR_NAMES else None
