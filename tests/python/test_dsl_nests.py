"""examples/dsl through the Rust core's nest lowering (zdsl_tile.py, issue
26): the seed's matmul program and the fused matmul + bias + gelu + residual
program lowered to tile programs and run on the interpreter against float64
numpy on fresh random inputs (outputs poisoned with NaN); zdsl's own
lowering of the same programs (function calls included); programs the core
does not take say why."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import EXAMPLES
from zyntax import interp

pytest.importorskip("lark", reason="lark is a test dependency (scripts/deps.sh)")
sys.path.insert(0, str(EXAMPLES / "dsl"))
import zdsl
import zdsl_tile

DSL = EXAMPLES / "dsl"
MATMUL = (DSL / "matmul.zk").read_text()
FUSED = (DSL / "matmul_bias_gelu_residual.zk").read_text()
SEED = np.random.SeedSequence().entropy
print(f"test_dsl_nests seed {SEED}")
RNG = np.random.default_rng(SEED)


def gelu64(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def arrays(shapes: dict[str, tuple[int, ...]], dtype: type) -> dict[str, np.ndarray]:
    out = {n: RNG.uniform(-1.0, 1.0, s).astype(dtype) for n, s in shapes.items()}
    out["out"] = np.full(shapes["out"], np.nan, dtype)
    return out


def fused_want(a: dict[str, np.ndarray]) -> np.ndarray:
    f = {n: v.astype(np.float64) for n, v in a.items()}
    return gelu64(f["A"] @ f["B"] + f["bias"]) + f["R"]


@pytest.mark.parametrize(("m", "n", "k"), [(45, 33, 20), (64, 48, 32)])
def test_seed_matmul_program_as_a_tile_program(m: int, n: int, k: int) -> None:
    shapes = zdsl_tile.shapes_of(MATMUL, {"M": m, "N": n, "K": k})
    assert shapes == {"A": (m, k), "B": (k, n), "out": (m, n)}
    nt, order = zdsl_tile.tile_program(MATMUL, shapes, "matmul.zk")
    assert nt.kind == "contraction" and "FFMA" in nt.report, nt.report
    a = arrays(shapes, np.float32)
    nt.run_interp(*(a[x] for x in order))
    want = a["A"].astype(np.float64) @ a["B"].astype(np.float64)
    np.testing.assert_allclose(a["out"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("dtype", "np_dtype", "tol"), [("f32", np.float32, 1e-5), ("f16", np.float16, 1e-2)]
)
def test_fused_program_as_a_tile_program(dtype: str, np_dtype: type, tol: float) -> None:
    text = FUSED.replace("@dtype(bf16)", f"@dtype({dtype})")
    shapes = zdsl_tile.shapes_of(text, {"M": 37, "N": 50, "K": 24})
    assert shapes["bias"] == (50,) and shapes["R"] == (37, 50)
    nt, order = zdsl_tile.tile_program(text, shapes)
    assert nt.kind == "contraction" and "epilogue" in nt.report, nt.report
    assert ("mma.sync" in nt.report) == (dtype == "f16")
    a = arrays(shapes, np_dtype)
    nt.run_interp(*(a[x] for x in order))
    np.testing.assert_allclose(a["out"].astype(np.float64), fused_want(a), rtol=tol, atol=tol)


def test_bf16_program_takes_tensor_cores_and_only_the_tile_path() -> None:
    shapes = zdsl_tile.shapes_of(FUSED, {"M": 4096, "N": 4096, "K": 4096})
    nt, _ = zdsl_tile.tile_program(FUSED, shapes, arch="sm_90")
    assert nt.kernel is not None
    assert "bf16 operands, mma.sync" in nt.report and "epilogue" in nt.report, nt.report
    with pytest.raises(zdsl.DslError, match="zdsl_tile"):
        zdsl.compile_dsl(FUSED, "fused.zk")


def test_zdsl_own_lowering_of_the_fused_program() -> None:
    """The fallback path takes the same functions (gelu here)."""
    p = zdsl.compile_dsl(FUSED.replace("@dtype(bf16)", ""), "fused.zk")
    a = arrays(
        {"A": (21, 9), "B": (9, 30), "bias": (30,), "R": (21, 30), "out": (21, 30)}, np.float32
    )
    _, grid, block = p.launch_config(a)
    interp.launch(p.module, p.name, grid, block, *p.args(a))
    np.testing.assert_allclose(a["out"], fused_want(a), rtol=1e-5, atol=1e-5)


def test_programs_the_core_does_not_take_say_why() -> None:
    src = """compute(a) @kernel(weighted) {
    for i in 0..R, j in 0..C:
        var s = 0.0
        for k in 0..3:
            s += a[i, j] * k
        out[i, j] = s
}
"""
    shapes = zdsl_tile.shapes_of(src.replace("0..3", "0..C"), {"R": 4, "C": 5})
    nt, order = zdsl_tile.tile_program(src, shapes, "weighted.zk")
    assert nt.refusal == "NotANest" and order == []
    assert "weighted.zk:5:" in nt.report and "`k`" in nt.report, nt.report
    bad = MATMUL.replace("A[i, k]", "A[i * k, k]")
    nt, _ = zdsl_tile.tile_program(bad, {"A": (8, 8), "B": (8, 8), "out": (8, 8)}, "bad.zk")
    assert nt.refusal == "NotANest" and "not affine" in nt.report, nt.report


def test_unknown_function_is_a_dsl_error() -> None:
    with pytest.raises(zdsl.DslError, match=r"erf.zk:7:20: error: unknown function `erf`"):
        zdsl.compile_dsl(MATMUL.replace("sum += A[i, k]", "sum += erf(A[i, k])"), "erf.zk")


def test_command_line_check(capsys: pytest.CaptureFixture[str]) -> None:
    rc = zdsl_tile.main(
        [str(DSL / "matmul.zk"), "--size", "M=20", "--size", "N=18", "--size", "K=7", "--check"]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "contraction" in out and "max abs difference" in out
