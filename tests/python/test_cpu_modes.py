"""The CPU backend's block-runner modes on the bench's kernels (issue 27,
docs/cpu.md, crates/zyntax-llvm/src/host/mode.rs): each mode the compiler
may choose per kernel — rows of SIMD lanes running K iterations per pass, row
walks interchanged as rows, threads as SIMD lanes — forced here through the
environment (on this machine's CPU, whatever it is), natively against the
interpreter on fresh random inputs with poisoned outputs. Every thread keeps
its own order in every mode, so the results equal the plain mode's bit for
bit; against the interpreter integers are bit-exact and floats within a few
ulp (``rsqrt`` and ``exp`` come from LLVM's libm natively)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zyntax import _native, cpu, hir

pytestmark = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="this build has no interpreter binding"
)

ROOT = Path(__file__).resolve().parents[2]
_ALL = (ROOT / "tests" / "data" / "cpu_bench_kernels.zir").read_text().split("\nkernel @")
#: The module header and the four kernels these tests run (a smaller module
#: compiles faster).
_USED = ("reduce_sum", "histogram", "layernorm", "softmax")
TEXT = "\nkernel @".join([_ALL[0]] + [k for k in _ALL[1:] if k.split(" ", 1)[0] in _USED])
rng = np.random.default_rng()
F32 = np.float32

#: name -> ZYNTAX_CPU_* settings, read when a module compiles.
MODES = {
    "plain": {"VECTOR": "0", "AFFINE": "0", "WALKS": "0", "ITERS": "1"},
    "rows_k1": {"VECTOR": "0", "AFFINE": "1", "WALKS": "1", "ITERS": "1"},
    # The AVX-512 defaults (host/mode.rs): reduce_sum's, layernorm's and
    # softmax's, histogram's.
    "rows_k8_lanes": {"VECTOR": "1", "AFFINE": "1", "WALKS": "1", "ITERS": "8"},
    "rows_k8": {"VECTOR": "0", "AFFINE": "1", "WALKS": "1", "ITERS": "8"},
    "k8_lanes": {"VECTOR": "1", "AFFINE": "0", "WALKS": "0", "ITERS": "8"},
}


#: One module per mode name, compiled (with its settings) at its first launch.
_MODULES: dict[str, Any] = {}


def run_all(mode: str | None, name: str, data: dict[str, np.ndarray]) -> dict:
    """Every case natively in mode `name` (its settings in the environment
    when its module first compiles), or on the interpreter
    (`mode="interp"`); outputs start poisoned."""
    m = _MODULES.setdefault(name, hir.parse_zir(TEXT))
    x, w, b = data["x"], data["w"], data["b"]
    rows, n = x.shape
    outs = {
        "layernorm": np.full_like(x, np.nan),
        "softmax": np.full_like(x, np.nan),
        "hist": np.zeros(256, np.uint32),
        "gsum": np.zeros(1, F32),
    }
    flat = data["flat"]
    k = "native" if mode is None else mode

    def go(name: str, grid: int, block: int, *args: object) -> None:
        assert cpu.launch(m, name, grid, block, *args, mode=k) == ("cpu" if mode is None else mode)

    ln = outs["layernorm"]
    go("layernorm", rows, 256, x, rows, n, n, 1, w, n, 1, b, n, 1, ln, rows, n, n, 1, F32(1e-5))
    sm = outs["softmax"]
    go("softmax", rows, 256, x, rows, n, n, 1, sm, rows, n, n, 1)
    go("histogram", data["grid"], 256, data["bytes"], len(data["bytes"]), 1, outs["hist"], 256, 1)
    go("reduce_sum", data["grid"], 256, flat, len(flat), 1, outs["gsum"], 1, 1)
    return outs


@pytest.mark.parametrize("name", [k for k in MODES if k != "plain"])
def test_modes_match_the_plain_mode_and_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    rows, n = int(rng.integers(1, 4)), int(rng.integers(1, 1500))
    data = {
        "x": rng.standard_normal((rows, n)).astype(F32),
        "w": rng.standard_normal(n).astype(F32),
        "b": rng.standard_normal(n).astype(F32),
        "bytes": rng.integers(0, 256, int(rng.integers(1, 20_000))).astype(np.uint8),
        # One block: reduce_sum's atomic then adds one partial (exact order).
        "grid": 1,
        "flat": rng.random(int(rng.integers(1, 20_000))).astype(F32),
    }
    results = {}
    for label in ("plain", name):
        for key, value in MODES[label].items():
            monkeypatch.setenv(f"ZYNTAX_CPU_{key}", value)
        results[label] = run_all(None, label, data)
    want = run_all("interp", "interp", data)
    got, plain = results[name], results["plain"]
    for case in got:
        # Every thread keeps its own order: bit for bit the plain mode's.
        assert np.array_equal(got[case], plain[case], equal_nan=True), case
    assert np.array_equal(got["hist"], want["hist"])
    assert np.array_equal(got["hist"], np.bincount(data["bytes"], minlength=256))
    assert np.array_equal(got["gsum"], want["gsum"])
    for case in ("layernorm", "softmax"):
        assert not np.isnan(got[case]).any(), case
        np.testing.assert_allclose(got[case], want[case], rtol=4e-7, atol=4e-7 * 4)
    x64 = data["x"].astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5) * data["w"] + data["b"]
    np.testing.assert_allclose(got["layernorm"], ref, rtol=1e-3, atol=1e-3)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got["softmax"], e / e.sum(axis=1, keepdims=True), atol=1e-6)
    assert (
        abs(float(got["gsum"][0]) - data["flat"].astype(np.float64).sum())
        < 1e-3 * len(data["flat"]) ** 0.5
    )
