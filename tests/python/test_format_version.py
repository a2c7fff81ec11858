"""The `.zir` and JSON format version from Python: written by every printer
(the native one and the @zyntax.kernel front-end's), old files still load,
newer ones are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

import zyntax
from conftest import ROOT
from zyntax import hir

FORMAT = ROOT / "tests" / "data" / "format"


def test_writers_carry_the_version() -> None:
    assert hir.FORMAT_VERSION == 2
    m = hir.parse_zir((FORMAT / "v1.zir").read_text())
    assert m.to_zir().startswith(f'module "saxpy" version({hir.FORMAT_VERSION}) ')
    assert json.loads(m.to_json())["format_version"] == hir.FORMAT_VERSION

    @zyntax.kernel
    def twice(a, out):
        i = zyntax.lang.grid(1)
        if i < len(a):
            out[i] = a[i] * 2

    a = np.zeros(4, np.float32)
    assert twice.hir((a, a)).startswith(f'module "twice" version({hir.FORMAT_VERSION})\n')


def test_every_version_loads_to_the_same_module() -> None:
    current = hir.parse_zir((FORMAT / f"v{hir.FORMAT_VERSION}.zir").read_text())
    for v in range(1, hir.FORMAT_VERSION + 1):
        assert hir.parse_zir((FORMAT / f"v{v}.zir").read_text()) == current
        assert hir.Module.from_json((FORMAT / f"v{v}.json").read_text()) == current


def test_newer_versions_are_refused() -> None:
    text = (FORMAT / f"v{hir.FORMAT_VERSION}.zir").read_text()
    newer = text.replace(f"version({hir.FORMAT_VERSION})", f"version({hir.FORMAT_VERSION + 1})")
    with pytest.raises(zyntax.ParseError, match="newer than this zyntax reads"):
        hir.parse_zir(newer)
    data = json.loads((FORMAT / f"v{hir.FORMAT_VERSION}.json").read_text())
    data["format_version"] = hir.FORMAT_VERSION + 1
    with pytest.raises(zyntax.ZyntaxError, match="newer than this zyntax reads"):
        hir.Module.from_json(json.dumps(data))
