"""zdsl programs through the Rust core's nest lowering (issue 26).

A zdsl program (zdsl.py) whose parallel nest computes one output element by
element-wise statements and at most one inner sum::

    compute(A, B, bias, R) @kernel(mm_bias_gelu) @dtype(bf16) {
        for i in 0..M, j in 0..N:
            var sum = 0.0
            for k in 0..K:
                sum += A[i, k] * B[k, j]
            out[i, j] = gelu(sum + bias[j]) + R[i, j]
    }

is, for arrays of known shapes, a :class:`zyntax.tiling.Nest`: the
parallel ranges are its parallel loops, the inner ``for`` its reduction
loop, ``sum``'s update its summed value and the final store's expression
its epilogue. The core recognises it (a contraction here: tensor cores for
bf16/f16 on sm_80+, FFMA for f32, the epilogue fused) and lowers it to a
tile program; a program of another shape keeps zdsl's own lowering
(:func:`zdsl.compile_dsl`), and the returned report says why.

``@dtype(bf16)`` (or f16, f32, f64) declares the arrays' element type
(default f32); the arrays given must have it. Functions: ``exp log sqrt
rsqrt tanh sin cos abs floor ceil``, ``max min``, ``relu`` and ``gelu``
(the tanh approximation).

Command line::

    python examples/dsl/zdsl_tile.py prog.zk --size M=4096 --size N=4096 --size K=4096
        [--arch sm_90] [--emit report|zir|ptx] [--check]   # --check: interpreter vs numpy
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from lark import Token, Tree

import zyntax
from zyntax.tiling import Nest, NestExpr, NestTile, nest_to_tile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zdsl

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
UNARY = ("exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "abs", "floor", "ceil")


class NotANest(Exception):
    """The program is not a nest the tile path takes (the message says why)."""


def tile_program(
    text: str,
    shapes: dict[str, tuple[int, ...]],
    file: str = "<dsl>",
    *,
    arch: str | None = None,
    schedule: Any = None,
) -> tuple[NestTile, list[str]]:
    """Lowers a program for arrays of these `shapes` (inputs and ``out``)
    through the core. Returns the :class:`zyntax.tiling.NestTile` (its
    report says what the core made of it, or why not) and the array names
    in the order its ``run_interp`` / ``launch`` take them."""
    tree = zdsl.parse(text, file)
    try:
        nest, order = _NestOf(tree, shapes, file).build()
    except NotANest as e:
        name = _kernel_name(tree)
        return NestTile(report=f"{name}: not tiled (NotANest): {e}", refusal="NotANest"), []
    return nest_to_tile(nest.spec(), arch=arch, schedule=schedule), order


def dtype_of(text: str, file: str = "<dsl>") -> str:
    """The program's ``@dtype`` (default f32)."""
    return _annotations(zdsl.parse(text, file)).get("dtype", ["f32"])[0]


def _annotations(tree: Tree[Any]) -> dict[str, list[Any]]:
    compute = tree.children[0]
    out: dict[str, list[Any]] = {}
    for c in compute.children:
        if isinstance(c, Tree) and c.data == "annotation":
            key, *vals = c.children
            out[str(key)] = [str(v).strip('"') for v in vals if v is not None]
    return out


def _kernel_name(tree: Tree[Any]) -> str:
    return str(_annotations(tree).get("kernel", ["kernel"])[0])


class _NestOf:
    def __init__(self, tree: Tree[Any], shapes: dict[str, tuple[int, ...]], file: str) -> None:
        self.tree, self.shapes, self.file = tree, shapes, file
        self.ann = _annotations(tree)
        self.dtype = str(self.ann.get("dtype", ["f32"])[0])
        self.nest = Nest(_kernel_name(tree))
        self.buffers: dict[str, Any] = {}
        self.loops: dict[str, Any] = {}
        self.env: dict[str, NestExpr] = {}

    def where(self, node: Tree[Any] | Token) -> str:
        line, col = zdsl._pos(node)
        return f"{self.file}:{line}:{col}"

    def build(self) -> tuple[Nest, list[str]]:
        compute = self.tree.children[0]
        names = [str(t) for t in compute.children if isinstance(t, Token)]
        body = [c for c in compute.children if isinstance(c, Tree) and c.data != "annotation"]
        if self.dtype not in ("f32", "f64", "f16", "bf16"):
            raise NotANest(f"@dtype({self.dtype}): the tile path takes f32, f64, f16 and bf16")
        if len(body) != 1 or body[0].data not in ("pfor", "sfor"):
            raise NotANest("the compute block is not one `for` nest")
        order = [*names, "out"]
        for n in order:
            if n not in self.shapes:
                raise NotANest(f"no shape given for array `{n}`")
            self.buffers[n] = self.nest.buffer(n, self.dtype, self.shapes[n])
        pfor = body[0]
        ranges = [c for c in pfor.children if isinstance(c, Tree) and c.data == "range"]
        for r in ranges:
            lo, extent = self.bound(r.children[1]), self.bound(r.children[2])
            if lo != 0:
                raise NotANest(f"{self.where(r)}: parallel ranges start at 0")
            self.loops[str(r.children[0])] = self.nest.parallel(str(r.children[0]), extent)
        stmts = [
            c for c in pfor.children if isinstance(c, Tree) and c.data not in ("range", "workgroup")
        ]
        *head, last = stmts
        for s in head:
            self.statement(s)
        if last.data != "store":
            raise NotANest(f"{self.where(last)}: the nest does not end storing `out[...]`")
        el, e = last.children
        if str(el.children[0]) != "out":
            raise NotANest(f"{self.where(el)}: the nest stores to `{el.children[0]}`, not `out`")
        try:
            self.nest.store(self.load(el), self.expr(e))
        except zyntax.BuildError as err:
            raise NotANest(f"{self.where(last)}: {err}") from None
        return self.nest, order

    def bound(self, node: Tree[Any] | Token) -> int:
        b = zdsl._bound(node)
        if isinstance(b, int):
            return b
        for (array, dim), size in self._size_sources().items():
            if size == b:
                return int(self.shapes[array][dim])
        raise NotANest(f"{self.where(node)}: size `{b}` indexes no array")

    def _size_sources(self) -> dict[tuple[str, int], str]:
        """(array, dim) -> the size name of the loop that indexes it there."""
        ranges: dict[str, str] = {}
        for r in self.tree.iter_subtrees_topdown():
            if r.data == "range" and isinstance(zdsl._bound(r.children[2]), str):
                ranges[str(r.children[0])] = str(zdsl._bound(r.children[2]))
        out: dict[tuple[str, int], str] = {}
        for el in self.tree.iter_subtrees_topdown():
            if el.data == "element":
                array, *idx = el.children
                for d, e in enumerate(idx):
                    if isinstance(e, Tree) and e.data == "name" and str(e.children[0]) in ranges:
                        out.setdefault((str(array), d), ranges[str(e.children[0])])
        return out

    def statement(self, s: Tree[Any]) -> None:
        if s.data == "var":
            name, e = s.children
            self.env[str(name)] = self.expr(e)
        elif s.data == "assign":
            name, e = s.children
            self.env[str(name)] = self.expr(e)
        elif s.data == "augassign":
            name, op, e = s.children
            if str(name) not in self.env:
                raise NotANest(f"{self.where(name)}: `{name}` is not defined")
            a, b = self.env[str(name)], self.expr(e)
            self.env[str(name)] = {"+=": a + b, "-=": a - b, "*=": a * b}[str(op)]
        elif s.data == "sfor":
            self.reduction(s)
        else:
            raise NotANest(f"{self.where(s)}: a `{s.data}` statement before the store")

    def reduction(self, s: Tree[Any]) -> None:
        """``for k in 0..K: acc += e`` (one statement): acc = init + sum(e)."""
        r, *body = s.children
        k = str(r.children[0])
        if self.bound(r.children[1]) != 0:
            raise NotANest(f"{self.where(r)}: the summed range does not start at 0")
        update = body[0] if len(body) == 1 else None
        if update is None or update.data != "augassign" or str(update.children[1]) != "+=":
            raise NotANest(f"{self.where(s)}: the inner `for` is not one `acc += ...`")
        acc = str(update.children[0])
        if acc not in self.env:
            raise NotANest(f"{self.where(update)}: `{acc}` is not defined before the sum")
        self.loops[k] = self.nest.reduction(k, self.bound(r.children[2]))
        summand = self.expr(update.children[2])
        del self.loops[k]
        init = self.env[acc]
        total = Nest.sum(summand)
        self.env[acc] = total if init.spec == ("const", 0.0) else init + total

    def load(self, el: Tree[Any]) -> NestExpr:
        name, *idx = el.children
        if str(name) not in self.buffers:
            raise NotANest(f"{self.where(name)}: unknown array `{name}`")
        return self.buffers[str(name)][tuple(self.index(i) for i in idx)]

    def index(self, e: Tree[Any]) -> Any:
        if e.data == "num" and e.children[0].type == "INT":
            return int(e.children[0])
        if e.data == "name" and str(e.children[0]) in self.loops:
            return self.loops[str(e.children[0])]
        if e.data == "binop" and str(e.children[1]) in "+-*":
            a, op, b = e.children
            x, y = self.index(a), self.index(b)
            if str(op) == "*" and not (isinstance(x, int) or isinstance(y, int)):
                raise NotANest(f"{self.where(op)}: an index product of two loops is not affine")
            return {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y}[str(op)]()
        raise NotANest(f"{self.where(e)}: indices are loop variables, integers, `+ - *`")

    def expr(self, e: Tree[Any]) -> NestExpr:
        if e.data == "num":
            return NestExpr.of(float(e.children[0]))
        if e.data == "name":
            n = str(e.children[0])
            if n in self.env:
                return self.env[n]
            raise NotANest(f"{self.where(e)}: `{n}` is not a value the nest knows")
        if e.data == "neg":
            return -self.expr(e.children[0])
        if e.data == "binop":
            a, op, b = e.children
            x, y = self.expr(a), self.expr(b)
            return {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[str(op)]
        if e.data == "element":
            return self.load(e)
        if e.data == "call":
            f, *args = e.children
            vals = [self.expr(a) for a in args]
            name = str(f)
            if name in UNARY and len(vals) == 1:
                return Nest.unary(name, vals[0])
            if name in ("max", "min") and len(vals) == 2:
                return Nest.max(*vals) if name == "max" else Nest.min(*vals)
            if name == "relu" and len(vals) == 1:
                return Nest.max(vals[0], 0.0)
            if name == "gelu" and len(vals) == 1:
                return Nest.gelu(vals[0])
            raise NotANest(f"{self.where(f)}: unknown function `{name}`/{len(vals)}")
        raise NotANest(f"{self.where(e)}: unsupported expression {e.data}")


def _numpy_dtype(dtype: str) -> Any:
    if dtype == "bf16":
        raise SystemExit("--check runs f32, f64 and f16 programs (numpy has no bf16)")
    return DTYPES[dtype]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="zdsl_tile", description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--size", action="append", default=[], help="NAME=VALUE")
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--emit", choices=["report", "zir", "ptx"], default="report")
    ap.add_argument("--check", action="store_true", help="interpreter vs numpy, random inputs")
    args = ap.parse_args(argv)
    path = Path(args.file)
    text = path.read_text()
    sizes = dict(s.split("=", 1) for s in args.size)
    try:
        shapes = shapes_of(text, {k: int(v) for k, v in sizes.items()}, str(path))
        nt, order = tile_program(text, shapes, str(path), arch=args.arch)
    except (zdsl.DslError, zyntax.ZyntaxError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1
    print(nt.report)
    if nt.kernel is None:
        return 1
    if args.emit == "zir":
        print(nt.kernel.module.to_zir())
    elif args.emit == "ptx":
        print(zyntax.compile(nt.kernel.module, arch=args.arch))
    if args.check:
        dt = _numpy_dtype(dtype_of(text, str(path)))
        r = np.random.default_rng()
        arrays = {n: r.uniform(-1, 1, shapes[n]).astype(dt) for n in order}
        arrays["out"] = np.full(shapes["out"], np.nan, dt)
        nt.run_interp(*(arrays[n] for n in order))
        p = zdsl.compile_dsl(text, str(path))
        want = {n: a.astype(np.float32) for n, a in arrays.items()}
        want["out"] = np.full(shapes["out"], np.nan, np.float32)
        _, grid, block = p.launch_config(want)
        zyntax.interp.launch(p.module, p.name, grid, block, *p.args(want))
        err = float(np.max(np.abs(arrays["out"].astype(np.float64) - want["out"])))
        print(
            f"tile program vs zdsl's own lowering on the interpreter: max abs difference {err:.3g}"
        )
    return 0


def shapes_of(text: str, sizes: dict[str, int], file: str = "<dsl>") -> dict[str, tuple[int, ...]]:
    """Each array's shape from the size names' values (each array dim that a
    loop over ``0..S`` indexes has extent S)."""
    tree = zdsl.parse(text, file)
    nest = _NestOf(tree, {}, file)
    compute = tree.children[0]
    names = [str(t) for t in compute.children if isinstance(t, Token)] + ["out"]
    dims: dict[str, dict[int, int]] = {n: {} for n in names}
    for (array, d), size in nest._size_sources().items():
        if size not in sizes:
            raise ValueError(f"--size {size}=... is missing")
        dims.setdefault(array, {})[d] = sizes[size]
    out: dict[str, tuple[int, ...]] = {}
    for n in names:
        rank = 1 + max(dims[n], default=0)
        if sorted(dims[n]) != list(range(rank)):
            raise ValueError(f"array `{n}`: the extent of some dim is not known from a loop")
        out[n] = tuple(dims[n][d] for d in range(rank))
    return out


if __name__ == "__main__":
    sys.exit(main())
