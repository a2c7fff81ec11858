"""How ``@zyntax.kernel`` reads a kernel's source: by indentation, without
the tokenizer ``inspect.getsourcelines`` uses (whose regular expressions were
most of a fresh process's first translation), and through ``inspect`` where
the indentation alone does not give a function."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import zyntax
from conftest import ROOT
from zyntax import lang
from zyntax.frontend.translate import operands


def _example_functions() -> list[object]:
    found = []
    for path in sorted((ROOT / "examples" / "kernels").glob("*.py")):
        key = f"zk_src_{path.stem}"
        spec = importlib.util.spec_from_file_location(key, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
        for obj in vars(mod).values():
            if getattr(obj, "zyntax_role", None) is not None and hasattr(obj, "pyfunc"):
                found.append(obj.pyfunc)
    return found


def test_indentation_scan_agrees_with_inspect_on_every_example_kernel() -> None:
    funcs = _example_functions()
    assert len(funcs) >= 8
    for f in funcs:
        got = operands._def_by_indentation(f)
        assert got is not None, f.__name__
        _lines, first, tree = got
        want_lines, want_first = inspect.getsourcelines(f)
        assert first == want_first, f.__name__
        want = ast.parse(textwrap.dedent("".join(want_lines)))
        assert ast.dump(tree, include_attributes=True) == ast.dump(want, include_attributes=True)


def test_a_shallow_continuation_falls_back_to_inspect() -> None:
    # fmt: off
    @zyntax.kernel
    def tagged(out: zyntax.Array[zyntax.f32, 1]):
        out[lang.thread_idx.x] = (
    2.0)  # a bracket continued at the def's indentation ends the scan early
    # fmt: on

    assert operands._def_by_indentation(tagged.pyfunc) is None
    out = np.full(4, np.nan, np.float32)
    tagged.run_cpu(out, grid=1, block=4)
    assert np.array_equal(out, np.full(4, 2.0, np.float32))
    line = tagged.source().line_offset + 1
    assert Path(__file__).read_text().splitlines()[line - 1].strip() == "@zyntax.kernel"


def test_source_not_in_a_file_is_a_kernel_error() -> None:
    ns: dict[str, object] = {"zyntax": zyntax}
    exec("@zyntax.kernel\ndef k(x: zyntax.f32):\n    pass\n", ns)
    with pytest.raises(zyntax.KernelError, match="cannot read the source"):
        ns["k"].hir()  # type: ignore[attr-defined]
