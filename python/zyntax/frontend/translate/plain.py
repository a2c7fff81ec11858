"""``zyntax.lang`` primitives that are one HIR instruction on the call's own
operands, declared instead of written: a line of :data:`PLAIN` names the
instruction's ``.zir`` mnemonic and the primitive's parameters. Everything
else comes from the op table's row: the operand types literals become
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

from zyntax import hir
from zyntax.frontend.emit import Value
from zyntax.frontend.hirtypes import SCALAR_NAMES, Scalar, scalar
from zyntax.frontend.translate.operands import Lit, Operand, Ref, TupleVal

if TYPE_CHECKING:
    from zyntax.frontend.translate.exprs import ExprTranslator

#: ``lang`` name -> ``"mnemonic(params) [-> type]"``. A parameter may have a
#: literal default; ``-> i32`` casts the result (the language's ids are i32).
PLAIN: dict[str, str] = {
    # bit ops (issue 12)
    "popc": "popc(x)",
    "clz": "clz(x)",
    "brev": "brev(x)",
    "bfind": "bfind(x)",
    "bfe": "bfe(a, pos, length)",
    "bfi": "bfi(a, b, pos, length)",
    "prmt": "prmt(a, b, sel)",
    "shf_l_wrap": "shf.l.wrap(lo, hi, n)",
    "shf_l_clamp": "shf.l.clamp(lo, hi, n)",
    "shf_r_wrap": "shf.r.wrap(lo, hi, n)",
    "shf_r_clamp": "shf.r.clamp(lo, hi, n)",
    "ex2_approx": "ex2.approx(x)",
    "rcp_approx": "rcp.approx(x)",
    "tanh_approx": "tanh.approx(x)",
    # warps
    "lane_id": "lane_id() -> i32",
    "syncwarp": "warp_sync(mask=0xFFFFFFFF)",
    "reduce_add_sync": "redux.add(mask, value)",
    "reduce_min_sync": "redux.min(mask, value)",
    "reduce_max_sync": "redux.max(mask, value)",
    "reduce_and_sync": "redux.and(mask, value)",
    "reduce_or_sync": "redux.or(mask, value)",
    "reduce_xor_sync": "redux.xor(mask, value)",
    "match_any_sync": "match.any(mask, value)",
    "elect_sync": "elect.sync()",
    # barriers and fences
    "syncthreads": "barrier()",
    "threadfence_block": "fence.block()",
    "threadfence": "fence.device()",
    "threadfence_system": "fence.system()",
    "compiler_fence": "compiler_fence()",
    "fence_proxy_async": "fence.proxy_async()",
    "fence_mbarrier_init": "fence.mbarrier_init()",
    # async groups (cp.async, bulk copies, wgmma)
    "async_commit": "cp.async.commit()",
    "bulk_commit_group": "bulk.commit_group()",
    "wgmma_fence": "wgmma.fence()",
    "wgmma_commit_group": "wgmma.commit_group()",
    # clusters and grids (h13-cluster)
    "cluster_ctarank": "cluster_ctarank() -> i32",
    "cluster_nctarank": "cluster_nctarank() -> i32",
    "cluster_arrive": "cluster_barrier.arrive()",
    "cluster_wait": "cluster_barrier.wait()",
    "griddepcontrol_wait": "griddepcontrol.wait()",
    "griddepcontrol_launch_dependents": "griddepcontrol.launch_dependents()",
    "grid_sync": "grid_sync()",
}

_SPEC = re.compile(r"([\w.]+)\(([^)]*)\)(?:\s*->\s*(\w+))?")


@dataclass(frozen=True)
class Plain:
    """A parsed line of :data:`PLAIN`."""

    mnemonic: str
    signature: inspect.Signature
    #: What each operand asks for (``FunctionBuilder.operand_types``).
    wants: tuple[str, ...]
    cast: Scalar | None


@cache
def plain(name: str) -> Plain | None:
    """The declaration of ``zyntax.lang.<name>`` if it is a plain instruction."""
    spec = PLAIN.get(name)
    if spec is None:
        return None
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
