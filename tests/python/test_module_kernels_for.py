"""hir.Module.kernels_for(arch): the kernels in the module's code for an arch
(a kernel declared with its own ``arch=`` only in that arch's), what the
pipeline's kernel cache expects in a module's PTX entry."""

from __future__ import annotations

import pytest

import zyntax
from zyntax import hir
from zyntax.frontend import pipeline


def test_kernels_for_an_arch() -> None:
    m = hir.Module("m")
    for name, arch in (("everywhere", None), ("hopper", "sm_90a"), ("ampere", "sm_80")):
        with m.kernel(name, [], arch=arch):
            pass
    assert m.kernels_for("sm_80") == ["everywhere", "ampere"]
    assert m.kernels_for("sm_90a") == ["everywhere", "hopper"]
    assert m.kernels_for("sm_90") == ["everywhere"]
    assert pipeline._kernels_for(m, "sm_90a") == ["everywhere", "hopper"]
    with pytest.raises(zyntax.ZyntaxError, match="unknown arch 'sm_7'"):
        m.kernels_for("sm_7")
