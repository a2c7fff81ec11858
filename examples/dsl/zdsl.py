"""zdsl: a small kernel language outside Python syntax, embedding zyntax.

A program is one ``compute`` block::

    compute(A, B) @kernel(matmul) @device("cuda:0") {
        @workgroup(16, 16)
        for i in 0..M, j in 0..N:
            var sum = 0.0
            for k in 0..K:
                sum += A[i, k] * B[k, j]
            out[i, j] = sum
    }

``compute(...)`` names the input arrays (row-major ``f32``, 1-D or 2-D);
``out`` is the output. Upper-case names in ranges (``M``, ``N``, ``K``) are
sizes, inferred from the arrays they index at launch. The outermost ``for`` is
a parallel nest (``@workgroup`` sets its shape; default 256 or 16x16 or
4x8x8), lowered with :func:`zyntax.nest.parallel_for`; inner ``for`` loops are
sequential. Statements: ``var x = e``, ``x = e``, ``x += e`` (also ``-=``,
``*=``), ``out[...] = e``; expressions: float literals, names, ``+ - * /``,
unary ``-``, parentheses, array elements, and the functions ``exp log sqrt
rsqrt tanh sin cos abs floor ceil max min relu gelu``.

This module lowers a program once for any sizes, through the HIR builder, in
f32. ``zdsl_tile.py`` lowers the same programs for given sizes through the
Rust core's nest lowering (tile programs: tensor cores for ``@dtype(bf16)``
matmuls, epilogues fused), falling back to this lowering when the core does
not take the nest.

The parser is `lark <https://github.com/lark-parser/lark>`_ (LALR, with an
indentation post-lexer). Every HIR instruction carries the DSL ``line:col`` it
came from, so zyntax's verifier points into the DSL file; the front-end's own
errors (syntax, unknown names, shapes) are :class:`DslError` with the same
``file:line:col`` format.

Command line::

    python examples/dsl/zdsl.py compile prog.zk [--arch sm_80] [-o out.ptx] [--emit zir|ptx]
    python examples/dsl/zdsl.py run prog.zk     # random inputs, interpreter vs numpy
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from lark import Lark, Token, Tree, UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.indenter import Indenter

import zyntax
from zyntax import hir
from zyntax.nest import launch_grid, parallel_for

GRAMMAR = r"""
start: _NL* compute _NL*
compute: "compute" "(" [NAME ("," NAME)*] ")" annotation* "{" _NL _INDENT stmt+ _DEDENT "}"
annotation: "@" NAME "(" [arg ("," arg)*] ")"
?arg: NAME | STRING | INT
workgroup: "@" "workgroup" "(" INT ("," INT)* ")" _NL

?stmt: pfor | sfor | simple _NL
pfor: workgroup? "for" range ("," range)+ ":" _NL _INDENT stmt+ _DEDENT
    | workgroup "for" range ":" _NL _INDENT stmt+ _DEDENT
sfor: "for" range ":" _NL _INDENT stmt+ _DEDENT
range: NAME "in" bound ".." bound
?bound: INT -> lit_int
      | NAME -> size
?simple: "var" NAME "=" expr -> var
       | NAME AUGOP expr -> augassign
       | NAME "=" expr -> assign
       | element "=" expr -> store

?expr: sum
?sum: product | sum ADDOP product -> binop
?product: unary | product MULOP unary -> binop
?unary: atom | "-" unary -> neg
?atom: NUMBER -> num
     | INT -> num
     | NAME -> name
     | element
     | NAME "(" expr ("," expr)* ")" -> call
     | "(" expr ")"
element: NAME "[" expr ("," expr)* "]"

ADDOP: "+" | "-"
MULOP: "*" | "/"
AUGOP: "+=" | "-=" | "*="
NUMBER: /\d+\.\d*([eE][-+]?\d+)?/ | /\d+[eE][-+]?\d+/
%import common.CNAME -> NAME
%import common.INT
%import common.ESCAPED_STRING -> STRING
%declare _INDENT _DEDENT
%ignore /[\t ]+/
%ignore /#[^\n]*/
_NL: /(\r?\n[\t ]*)+/
"""


class _Indent(Indenter):
    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]  # noqa: RUF012 - lark's Indenter interface
    CLOSE_PAREN_types = ["RPAR", "RSQB"]  # noqa: RUF012
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 4


_PARSER = Lark(GRAMMAR, parser="lalr", postlex=_Indent(), propagate_positions=True)

_TOKEN_NAMES = {
    "NAME": "a name",
    "INT": "an integer",
    "NUMBER": "a number",
    "STRING": "a string",
    "_NL": "end of line",
    "_INDENT": "an indented block",
    "_DEDENT": "the end of the block",
    "LPAR": "`(`",
    "RPAR": "`)`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "COLON": "`:`",
    "COMMA": "`,`",
    "EQUAL": "`=`",
    "AT": "`@`",
    "ADDOP": "`+` or `-`",
    "MULOP": "`*` or `/`",
    "AUGOP": "`+=`",
    "MINUS": "`-`",
    "$END": "end of file",
}


class DslError(zyntax.ZyntaxError):
    """An error in a DSL program, at ``file:line:col``."""

    def __init__(self, file: str, line: int, col: int, message: str) -> None:
        super().__init__(f"{file}:{line}:{col}: error: {message}")
        self.file, self.line, self.col, self.message = file, line, col, message


def _token_name(t: str) -> str:
    if t in _TOKEN_NAMES:
        return _TOKEN_NAMES[t]
    try:  # anonymous terminals: their literal text
        pattern = _PARSER.get_terminal(t).pattern
        return f"`{pattern.value}`" if pattern.type == "str" else t
    except KeyError:
        return t


def _expected(tokens: set[str]) -> str:
    names = sorted({_token_name(t) for t in tokens})
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def parse(text: str, file: str = "<dsl>") -> Tree[Any]:
    """The syntax tree of a program; syntax errors are :class:`DslError`."""
    try:
        return _PARSER.parse(text if text.endswith("\n") else text + "\n")
    except UnexpectedToken as e:
        found = "end of file" if e.token.type == "$END" else f"`{e.token}`"
        if e.token.type in ("_NL", "_DEDENT", "_INDENT"):
            found = _TOKEN_NAMES[e.token.type]
        raise DslError(
            file, e.line, e.column, f"expected {_expected(e.expected)}, found {found}"
        ) from None
    except UnexpectedCharacters as e:
        raise DslError(file, e.line, e.column, f"unexpected character `{e.char}`") from None
    except UnexpectedInput as e:  # pragma: no cover - lark's other input errors
        raise DslError(file, e.line, e.column, str(e).splitlines()[0]) from None


# --------------------------------------------------------------------------- lowering


@dataclass
class Program:
    """A compiled program: its HIR and how to launch it."""

    name: str
    module: hir.Module
    inputs: list[str]
    #: The rank of each array (inputs, then ``out``).
    ranks: dict[str, int]
    #: Size names in parameter order, and where each is read from: (array, dim).
    sizes: list[str]
    size_source: dict[str, tuple[str, int]]
    #: The parallel nest: its size names/literals (outermost first) and workgroup.
    nest: list[str | int]
    workgroup: tuple[int, ...]
    device: str = "cuda:0"
    annotations: dict[str, list[Any]] = field(default_factory=dict)

    def launch_config(
        self, arrays: dict[str, np.ndarray]
    ) -> tuple[dict[str, int], tuple[int, int, int], tuple[int, int, int]]:
        """Size values from the arrays' shapes, and ``(grid, block)``."""
        sizes = {s: int(arrays[a].shape[d]) for s, (a, d) in self.size_source.items()}
        space = [sizes[n] if isinstance(n, str) else n for n in self.nest]
        grid, block = launch_grid(space, self.workgroup)
        return sizes, grid, block

    def args(self, arrays: dict[str, np.ndarray]) -> list[Any]:
        sizes, _, _ = self.launch_config(arrays)
        return [*(arrays[a] for a in [*self.inputs, "out"]), *(sizes[s] for s in self.sizes)]

    def run_cpu(self, arrays: dict[str, np.ndarray], mode: str | None = None) -> np.ndarray:
        """Runs the program on this CPU as native code (``zyntax.cpu``; ``mode="interp"``:
        the reference interpreter) and returns ``arrays["out"]``, updated in place."""
        _, grid, block = self.launch_config(arrays)
        zyntax.cpu.launch(self.module, self.name, grid, block, *self.args(arrays), mode=mode)
        return arrays["out"]


class _Lowering:
    def __init__(self, tree: Tree[Any], file: str) -> None:
        self.file = file
        self.tree = tree
        self.b: Any = None
        self.arrays: dict[str, Any] = {}
        self.size_values: dict[str, Any] = {}
        #: The size name of each (array, dimension) that a loop index ranges over.
        self.dims: dict[tuple[str, int], str] = {}

    def error(self, node: Tree[Any] | Token, message: str) -> DslError:
        line, col = _pos(node)
        return DslError(self.file, line, col, message)

    def at(self, node: Tree[Any] | Token) -> None:
        line, col = _pos(node)
        self.b.set_location(self.file, line, col)

    def program(self) -> Program:
        compute = self.tree.children[0]
        names = [str(t) for t in compute.children if isinstance(t, Token)]
        annotations: dict[str, list[Any]] = {}
        body: list[Tree[Any]] = []
        for c in compute.children:
            if isinstance(c, Tree) and c.data == "annotation":
                key, *vals = c.children
                annotations[str(key)] = [_literal(v) for v in vals if v is not None]
            elif isinstance(c, Tree):
                body.append(c)
        if "out" in names:
            raise self.error(compute, "`out` is the output; it cannot be an input")
        kname = str(annotations.get("kernel", ["kernel"])[0])
        if str(annotations.get("dtype", ["f32"])[0]) != "f32":
            raise self.error(
                compute,
                "this lowering takes f32 arrays; @dtype(...) programs go through "
                "zdsl_tile.py (the Rust core's nest lowering)",
            )
        # The outermost `for` is the parallel nest, with or without `,` / @workgroup.
        pfors = [s for s in body if s.data in ("pfor", "sfor")]
        if len(body) != 1 or len(pfors) != 1:
            raise self.error(
                body[0] if body else compute,
                "the compute block holds exactly one parallel `for` nest",
            )
        ranks, size_source = self.infer_shapes(pfors[0], names)
        sizes = sorted(size_source)
        module = hir.Module(kname)
        params = [hir.ptr("global", hir.f32)] * (len(names) + 1) + [hir.u32] * len(sizes)
        nest_ranges = [c for c in pfors[0].children if isinstance(c, Tree) and c.data == "range"]
        wg_tree = next(
            (c for c in pfors[0].children if isinstance(c, Tree) and c.data == "workgroup"), None
        )
        default_wg = {1: (256,), 2: (16, 16), 3: (4, 8, 8)}[min(len(nest_ranges), 3)]
        workgroup = tuple(int(t) for t in wg_tree.children) if wg_tree is not None else default_wg
        if len(workgroup) != len(nest_ranges):
            raise self.error(
                wg_tree or pfors[0],
                f"@workgroup has {len(workgroup)} extents for a {len(nest_ranges)}-D nest",
            )
        try:
            block = launch_grid([0] * len(workgroup), workgroup)[1]  # checks device limits
        except zyntax.BuildError as e:
            raise self.error(wg_tree or pfors[0], str(e)) from None
        with module.kernel(kname, params, max_threads=block) as b:
            self.b = b
            for k, n in enumerate([*names, "out"]):
                self.arrays[n] = b.params[k]
            for k, s in enumerate(sizes):
                self.size_values[s] = b.params[len(names) + 1 + k]
            self.pfor(pfors[0], ranks, workgroup)
        module.verify()  # diagnostics carry the DSL locations set above
        nest: list[str | int] = [_bound(r.children[2]) for r in nest_ranges]
        return Program(
            kname,
            module,
            names,
            ranks,
            sizes,
            size_source,
            nest,
            workgroup,
            str(annotations.get("device", ["cuda:0"])[0]),
            annotations,
        )

    def infer_shapes(
        self, pfor: Tree[Any], inputs: list[str]
    ) -> tuple[dict[str, int], dict[str, tuple[str, int]]]:
        """Each array's rank, and for each size name an (array, dim) it equals:
        an index that is a loop variable ranging over ``0..S`` gives dim S."""
        ranges: dict[str, str | int] = {}
        for r in pfor.iter_subtrees_topdown():
            if r.data == "range":
                ranges[str(r.children[0])] = _bound(r.children[2])
        ranks: dict[str, int] = {}
        source: dict[str, tuple[str, int]] = {}
        for el in pfor.iter_subtrees_topdown():
            if el.data != "element":
                continue
            name, *idx = el.children
            array = str(name)
            if array not in inputs and array != "out":
                raise self.error(name, f"unknown array `{array}` (inputs: {', '.join(inputs)})")
            if len(idx) > 2:
                raise self.error(el, "arrays have 1 or 2 dimensions")
            if ranks.setdefault(array, len(idx)) != len(idx):
                raise self.error(
                    el, f"`{array}` is indexed with {len(idx)} and {ranks[array]} indices"
                )
            for d, e in enumerate(idx):
                if isinstance(e, Tree) and e.data == "name":
                    bound = ranges.get(str(e.children[0]))
                    if isinstance(bound, str):
                        source.setdefault(bound, (array, d))
                        self.dims.setdefault((array, d), bound)
        for r in pfor.iter_subtrees_topdown():
            if r.data == "range":
                for bnd in (r.children[1], r.children[2]):
                    s = _bound(bnd)
                    if isinstance(s, str) and s not in source:
                        raise self.error(
                            bnd, f"size `{s}` indexes no array, so its value is unknown at launch"
                        )
        for a in inputs:
            if a not in ranks:
                ranks[a] = 1
        return ranks, source

    def bound(self, node: Tree[Any] | Token) -> Any:
        v = _bound(node)
        return self.b.const(v, hir.u32) if isinstance(v, int) else self.size_values[v]

    def row_len(self, array: str, node: Tree[Any]) -> Any:
        """The number of columns of a 2-D array: a size whose source is (array, 1)."""
        size = self.dims.get((array, 1))
        if size is None:
            raise self.error(node, f"cannot infer the row length of `{array}`")
        return self.size_values[size]

    def pfor(self, node: Tree[Any], ranks: dict[str, int], workgroup: tuple[int, ...]) -> None:
        self.ranks = ranks
        ranges = [c for c in node.children if isinstance(c, Tree) and c.data == "range"]
        for r in ranges:
            if _bound(r.children[1]) != 0:
                raise self.error(r.children[1], "parallel ranges start at 0")
        self.at(node)
        sizes = [self.bound(r.children[2]) for r in ranges]
        env: dict[str, Any] = {}
        with parallel_for(self.b, sizes, workgroup=workgroup) as idx:
            for r, i in zip(ranges, idx, strict=True):
                env[str(r.children[0])] = i
            self.block(
                [
                    c
                    for c in node.children
                    if isinstance(c, Tree) and c.data != "range" and c.data != "workgroup"
                ],
                env,
            )

    def block(self, stmts: list[Tree[Any]], env: dict[str, Any]) -> None:
        for s in stmts:
            self.stmt(s, env)

    def stmt(self, s: Tree[Any], env: dict[str, Any]) -> None:
        b = self.b
        if s.data == "var":
            name, e = s.children
            if str(name) in env:
                raise self.error(name, f"`{name}` is already defined")
            env[str(name)] = self.expr(e, env)
        elif s.data in ("assign", "augassign"):
            name = s.children[0]
            if str(name) not in env or env[str(name)] is None:
                raise self.error(name, f"assignment to undefined variable `{name}`")
            value = self.expr(s.children[-1], env)
            if s.data == "augassign":
                self.at(s.children[1])
                op = {"+=": b.add, "-=": b.sub, "*=": b.mul}[str(s.children[1])]
                value = op(env[str(name)], value)
            env[str(name)] = value
        elif s.data == "store":
            el, e = s.children
            value = self.expr(e, env)
            self.at(el)
            b.store(self.address(el, env), value)
        elif s.data == "sfor":
            self.sfor(s, env)
        elif s.data == "pfor":
            raise self.error(s, "a parallel `for` (with `,` or @workgroup) must be outermost")
        else:  # pragma: no cover - the grammar has no other statements
            raise self.error(s, f"unsupported statement {s.data}")

    def sfor(self, s: Tree[Any], env: dict[str, Any]) -> None:
        r = s.children[0]
        var = str(r.children[0])
        body = s.children[1:]
        # Variables of the enclosing scope that the body assigns are carried.
        assigned = {
            str(t.children[0])
            for t in Tree("body", body).iter_subtrees()
            if t.data in ("assign", "augassign")
        }
        carried = [v for v in env if v in assigned]
        self.at(s)
        start, stop = self.bound(r.children[1]), self.bound(r.children[2])
        with self.b.loop(start, stop, carry=[env[v] for v in carried]) as lp:
            inner = dict(env)
            inner[var] = lp.index
            for v, c in zip(carried, lp.carried, strict=True):
                inner[v] = c
            self.block(list(body), inner)
            lp.next(*[inner[v] for v in carried])
        for v, res in zip(carried, lp.results, strict=True):
            env[v] = res

    def address(self, el: Tree[Any], env: dict[str, Any]) -> Any:
        name, *idx = el.children
        base = self.arrays[str(name)]
        ix = [self.index(e, env) for e in idx]
        self.at(el)
        flat = ix[0] if len(ix) == 1 else ix[0] * self.row_len(str(name), el) + ix[1]
        return self.b.ptr_add(base, flat)

    def index(self, e: Tree[Any] | Token, env: dict[str, Any]) -> Any:
        """An array index: loop variables, integer literals, `+ - *` (``u32``)."""
        b = self.b
        assert isinstance(e, Tree)
        if e.data == "num" and e.children[0].type == "INT":
            self.at(e)
            return b.const(int(e.children[0]), hir.u32)
        if e.data == "name":
            v = env.get(str(e.children[0]))
            if v is None or v.type != hir.u32:
                raise self.error(e, f"`{e.children[0]}` is not a loop variable (indices are)")
            return v
        if e.data == "binop" and str(e.children[1]) in "+-*":
            lhs, op, rhs = e.children
            a, c = self.index(lhs, env), self.index(rhs, env)
            self.at(op)
            return {"+": b.add, "-": b.sub, "*": b.mul}[str(op)](a, c)
        raise self.error(e, "array indices are loop variables, integers, `+`, `-` and `*`")

    def expr(self, e: Tree[Any] | Token, env: dict[str, Any]) -> Any:
        b = self.b
        assert isinstance(e, Tree)
        if e.data == "num":
            self.at(e)
            return b.const(float(e.children[0]), hir.f32)
        if e.data == "name":
            n = str(e.children[0])
            if n not in env:
                raise self.error(e, f"undefined name `{n}`")
            v = env[n]
            if v.type != hir.f32:  # a loop index used as a number
                self.at(e)
                v = b.cast(v, hir.f32)
            return v
        if e.data == "neg":
            x = self.expr(e.children[0], env)
            self.at(e)
            return b.neg(x)
        if e.data == "binop":
            lhs, op, rhs = e.children
            a, c = self.expr(lhs, env), self.expr(rhs, env)
            self.at(op)
            return {"+": b.add, "-": b.sub, "*": b.mul, "/": b.div}[str(op)](a, c)
        if e.data == "element":
            p = self.address(e, env)
            return b.load(p)
        if e.data == "call":
            return self.call(e, env)
        raise self.error(e, f"unsupported expression {e.data}")  # pragma: no cover

    def call(self, e: Tree[Any], env: dict[str, Any]) -> Any:
        """``exp log sqrt rsqrt tanh sin cos abs floor ceil``, ``max min``,
        ``relu`` and ``gelu`` (the tanh approximation), as in zdsl_tile.py."""
        b = self.b
        f, *args = e.children
        xs = [self.expr(a, env) for a in args]
        name, arity = str(f), {"max": 2, "min": 2}.get(str(f), 1)
        known = {*_UNARY, "max", "min", "relu", "gelu"}
        if name not in known:
            raise self.error(f, f"unknown function `{name}` (known: {', '.join(sorted(known))})")
        if len(xs) != arity:
            raise self.error(f, f"`{name}` takes {arity} argument(s), got {len(xs)}")
        self.at(f)
        if name == "relu":
            return b.max(xs[0], b.const(0.0, hir.f32))
        if name == "gelu":
            x = xs[0]
            c = lambda v: b.const(v, hir.f32)  # noqa: E731
            inner = b.mul(
                c(0.7978845608028654), b.add(x, b.mul(c(0.044715), b.mul(x, b.mul(x, x))))
            )
            return b.mul(b.mul(c(0.5), x), b.add(c(1.0), b.tanh(inner)))
        return getattr(b, name)(*xs)


#: The one-argument functions of expressions (builder ops of the same name).
_UNARY = ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "abs", "floor", "ceil")


def _pos(node: Tree[Any] | Token) -> tuple[int, int]:
    if isinstance(node, Token):
        return node.line or 1, node.column or 1
    meta = node.meta
    return (getattr(meta, "line", 1), getattr(meta, "column", 1))


def _bound(node: Tree[Any] | Token) -> str | int:
    tok = node.children[0] if isinstance(node, Tree) else node
    return int(tok) if tok.type == "INT" else str(tok)


def _literal(t: Token) -> Any:
    if t.type == "STRING":
        return t[1:-1]
    return int(t) if t.type == "INT" else str(t)


def compile_dsl(text: str, file: str = "<dsl>") -> Program:
    """Parse and lower a program to a verified HIR module."""
    return _Lowering(parse(text, file), file).program()


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="zdsl", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a program to .zir or PTX")
    c.add_argument("file")
    c.add_argument("--arch", default="sm_80")
    c.add_argument("--emit", choices=["zir", "ptx"], default="ptx")
    c.add_argument("-o", "--output")
    r = sub.add_parser("show", help="print the HIR of a program")
    r.add_argument("file")
    args = ap.parse_args(argv)
    path = Path(args.file)
    try:
        program = compile_dsl(path.read_text(), str(path))
        if args.cmd == "show" or args.emit == "zir":
            out = program.module.to_zir()
        else:
            out = zyntax.compile(program.module, arch=args.arch)
    except DslError as e:
        print(e, file=sys.stderr)
        return 1
    except zyntax.VerifyError as e:
        print(e, file=sys.stderr)  # one diagnostic per line, at DSL locations
        return 1
    except (OSError, zyntax.ZyntaxError) as e:
        print(f"{path}: error: {e}", file=sys.stderr)
        return 1
    if getattr(args, "output", None):
        Path(args.output).write_text(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
