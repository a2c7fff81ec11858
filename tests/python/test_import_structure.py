"""The package's import structure (issue 28): no import cycle in ``python/zyntax``,
no import from the runtime layer upward, and no import of the Python package
from the PyO3 crate. The layers are in docs/architecture.md, "Layers".

The graph is read from the sources with ``ast``, so it holds every import that
can run: module-level and function-level ``import``/``from ... import``,
``importlib.import_module("...")`` and ``__import__("...")`` with a constant
name. Imports under ``if TYPE_CHECKING:`` never run and are left out. An edge
goes to the module imported (as in import-linter's graphs), not to the packages
above it that Python initialises first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "zyntax"
PYO3_SRC = ROOT / "crates" / "zyntax-python" / "src"

#: The bottom layer: the extension module and what every layer may use.
BASE = {
    "zyntax._native",
    "zyntax._providers",
    "zyntax.errors",
    "zyntax.log",
    "zyntax.profiling",
    "zyntax.ptxinfo",
    "zyntax.safeio",
    "zyntax.targets",
}
#: The runtime: the CUDA runtime, the builder, the interpreter and the CPU JIT,
#: thin layers over the native core. They import only the runtime and the base.
RUNTIME = {"zyntax.cuda", "zyntax.hir", "zyntax.interp", "zyntax.cpu", "zyntax._torch_c"}
#: What the runtime must never import (the brief of issue 28, item 3).
ABOVE_RUNTIME = (
    "zyntax.frontend",
    "zyntax.compiler",
    "zyntax.bundle",
    "zyntax.aot",
    "zyntax.kernels",
    "zyntax.fusion",
    "zyntax.tiling",
    "zyntax.tuning",
)

#: Every module's layer, lowest first (docs/architecture.md, "Layers"); a
#: package name stands for its modules. A module imports only from its own
#: layer and those below.
LAYERS: list[tuple[str, set[str]]] = [
    ("base", BASE),
    ("runtime", RUNTIME),
    ("compiler", {"zyntax.compiler", "zyntax._worker"}),
    (
        "front-ends",
        {
            "zyntax.frontend",
            "zyntax.kernels",
            "zyntax.lang",
            "zyntax._lang_ops",
            "zyntax._lang_prims",
            "zyntax.nest",
            "zyntax.nest_builder",
            "zyntax.nest_tile",
            "zyntax.tiling",
            "zyntax.fusion",
            "zyntax.tuning",
            "zyntax.bundle",
            "zyntax.fatbin",
            "zyntax.aot",
            "zyntax.cache_archive",
            "zyntax.tile",
        },
    ),
    ("entry points", {"zyntax", "zyntax.cli", "zyntax.commands"}),
]
#: Upward imports not fixed yet, each with its reason (none left: aot.py
#: called ``zyntax.compile_ptx`` through the package root until it imported
#: ``zyntax.compiler``).
KNOWN_UPWARD: set[tuple[str, str]] = set()

Graph = dict[str, set[str]]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (never executed)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else getattr(t, "attr", None)
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    out.update(id(n) for n in ast.walk(sub))
    return out


def _imported_names(tree: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it or None) for every import that can run."""
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                yield base, alias.name
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
            arg = node.args[0]
            if fname in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                if isinstance(arg.value, str):
                    yield arg.value, None


def import_graph(sources: dict[str, tuple[str, bool]]) -> Graph:
    """The import graph of `sources` (module name -> (source, is a package)),
    edges only between those modules (plus ``zyntax._native``)."""
    known = set(sources) | {"zyntax._native"}

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {m: set() for m in known}
    for mod, (text, is_package) in sources.items():
        package = mod if is_package else mod.rpartition(".")[0]
        for base, name in _imported_names(ast.parse(text), package):
            full = f"{base}.{name}" if name else base
            target = full if full in known else resolve(base)
            if target is None or not target.startswith("zyntax"):
                continue
            graph[mod].add(target)
        graph[mod].discard(mod)
    return graph


def package_sources(root: Path = PACKAGE) -> dict[str, tuple[str, bool]]:
    return {
        module_name(p, root): (p.read_text(encoding="utf-8"), p.name == "__init__.py")
        for p in sorted(root.rglob("*.py"))
    }


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path(graph: Graph, start: str, goal: str) -> list[str]:
    """A shortest import chain from `start` to `goal` (for messages)."""
    prev: dict[str, str] = {}
    todo, seen = [start], {start}
    while todo:
        v = todo.pop(0)
        for w in sorted(graph[v]):
            if w not in seen:
                seen.add(w)
                prev[w] = v
                todo.append(w)
    chain = [goal]
    while chain[-1] != start and chain[-1] in prev:
        chain.append(prev[chain[-1]])
    return chain[::-1]


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(package_sources())


def test_the_graph_sees_every_kind_of_import() -> None:
    g = import_graph(
        {
            "zyntax": ("from zyntax import a", True),
            "zyntax.a": ("import zyntax.b.c\n", False),
            "zyntax.b": ("", True),
            "zyntax.b.c": ("def f():\n    from . import d\n", False),
            "zyntax.b.d": (
                "import importlib\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from zyntax import a\n"
                "def g():\n    return importlib.import_module('zyntax.a')\n",
                False,
            ),
        }
    )
    assert g["zyntax"] == {"zyntax.a"}
    assert g["zyntax.a"] == {"zyntax.b.c"}
    assert g["zyntax.b.c"] == {"zyntax.b.d"}  # function level, relative, same package
    assert g["zyntax.b.d"] == {"zyntax.a"}  # importlib; TYPE_CHECKING left out
    assert cycles(g) == [["zyntax.a", "zyntax.b.c", "zyntax.b.d"]]


def test_no_import_cycle(graph: Graph) -> None:
    found = cycles(graph)
    chains = []
    for comp in found:
        first = comp[0]
        nxt = next(m for m in sorted(graph[first]) if m in comp)
        chains.append(" -> ".join([first, *_path(graph, nxt, first)]))
    assert not found, "import cycles:\n" + "\n".join(chains)


def test_the_runtime_imports_only_the_runtime_and_the_base(graph: Graph) -> None:
    assert (RUNTIME | BASE) <= set(graph), "a layer names a module that does not exist"
    allowed = {m: RUNTIME | BASE for m in RUNTIME} | {m: BASE for m in BASE}
    bad = [
        f"{m} imports {t} ({' -> '.join(_path(graph, m, t))})"
        for m, ok in sorted(allowed.items())
        for t in sorted(graph[m] - ok)
    ]
    assert not bad, "\n".join(bad)
    closure = {"zyntax.cuda"}
    todo = ["zyntax.cuda"]
    while todo:
        for t in graph[todo.pop()]:
            if t not in closure:
                closure.add(t)
                todo.append(t)
    upward = sorted(t for t in closure if t.startswith(ABOVE_RUNTIME))
    assert not upward, f"zyntax.cuda reaches {upward}"


def layer_of(module: str) -> int:
    for i, (_, members) in enumerate(LAYERS):
        for m in members:
            if module == m or (m != "zyntax" and module.startswith(m + ".")):
                return i
    raise AssertionError(f"{module} has no layer: add it to LAYERS and docs/architecture.md")


def test_every_import_goes_to_the_same_layer_or_below(graph: Graph) -> None:
    upward = {(m, t) for m in graph for t in graph[m] if layer_of(t) > layer_of(m)}
    shown = [
        f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
        for m, t in sorted(upward - KNOWN_UPWARD)
    ]
    assert not shown, "\n".join(shown)
    assert not KNOWN_UPWARD - upward, "fixed: remove it from KNOWN_UPWARD"


#: An import of the package, or a look-up of one of its modules in
#: ``sys.modules`` (an import by another name).
_PACKAGE_IMPORT = re.compile(r"""\b(?:import(?:_bound)?|get_item)\s*\(\s*(?:py\s*,\s*)?"zyntax\b""")


def test_the_pyo3_crate_imports_nothing_from_the_python_package() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for p in sorted(PYO3_SRC.rglob("*.rs"))
        for text in [p.read_text(encoding="utf-8")]
        for m in _PACKAGE_IMPORT.finditer(text)
    ]
    assert not found, "the PyO3 crate imports the Python package:\n" + "\n".join(found)
    assert _PACKAGE_IMPORT.search('let m = py.import("zyntax.cuda")?;')
    assert _PACKAGE_IMPORT.search('PyModule::import(py, "zyntax")')
    assert not _PACKAGE_IMPORT.search('py.import("numpy")')
    assert _PACKAGE_IMPORT.search('modules.get_item("zyntax.frontend.kernel")')
    assert not _PACKAGE_IMPORT.search('modules.get_item("torch")')
