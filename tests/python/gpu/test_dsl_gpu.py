"""examples/dsl programs on the GPU against numpy (ragged sizes)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import zyntax.cuda as cuda
from conftest import EXAMPLES

pytestmark = pytest.mark.gpu
pytest.importorskip("lark", reason="lark is a test dependency (scripts/deps.sh)")
sys.path.insert(0, str(EXAMPLES / "dsl"))
import zdsl  # noqa: E402

rng = np.random.default_rng()


def test_matmul_program_on_gpu() -> None:
    p = zdsl.compile_dsl((EXAMPLES / "dsl" / "matmul.zk").read_text(), "matmul.zk")
    m, n, k = 333, 250, 97
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    arrays = {"A": a, "B": b, "out": out}
    _, grid, block = p.launch_config(arrays)
    mod = cuda.load_hir(p.module)
    dev = {name: cuda.to_device(v) for name, v in arrays.items()}
    mod.kernel("matmul").launch(grid, block, *p.args(dev))
    cuda.synchronize()
    np.testing.assert_allclose(dev["out"].to_host(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
