"""Semantics of the reference interpreter from Python: every shuffle mode and
width against a numpy model of CUDA's definition, an MMA-tiled GEMM against
numpy, recursion, and deliberate bugs (missing barrier, divergent barrier,
off-by-one) caught with the right trap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zyntax
from conftest import EXAMPLES
from zyntax import hir, interp

SHFL_ZIR = """\
module "shfl" targets(sm_80)

kernel @k {{
block0(v0: ptr<global, u32>, v1: ptr<global, u32>, v2: ptr<global, u32>):
    v3: u32 = thread_idx.x
    v4: ptr<global, u32> = ptr_add v1, v3
    v5: u32 = load v4
    v6: ptr<global, u32> = ptr_add v2, v3
    v7: u32 = load v6
    v8: u32 = const 4294967295
    v9: u32 = shfl.{mode} v8, v5, v7 width {width}
    v10: ptr<global, u32> = ptr_add v0, v3
    store v10, v9
    return
}}
"""


def shfl_model(mode: str, width: int, vals: np.ndarray, b: np.ndarray) -> np.ndarray:
    """CUDA's __shfl*_sync(full mask, v, b, width), with b taken modulo 32 as PTX does."""
    out = np.empty(32, np.uint32)
    for lane in range(32):
        d = int(b[lane]) & 31
        start = lane // width * width
        end = start + width - 1
        if mode == "idx":
            src = start + d % width
        elif mode == "up":
            src = lane - d if lane - d >= start else lane
        elif mode == "down":
            src = lane + d if lane + d <= end else lane
        else:  # xor: earlier segments reachable, later ones give the own value
            src = lane ^ d if (lane ^ d) <= end else lane
        out[lane] = vals[src]
    return out


@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
@pytest.mark.parametrize("width", [32, 16, 8, 4, 2, 1])
def test_shuffle_modes_and_widths(mode: str, width: int) -> None:
    rng = np.random.default_rng(width * 10 + len(mode))
    m = hir.parse_zir(SHFL_ZIR.format(mode=mode, width=width), "shfl.zir")
    for _ in range(3):
        vals = rng.integers(1, 2**32, 32, dtype=np.uint32)
        b = rng.integers(0, 40, 32, dtype=np.uint32)
        out = np.zeros(32, np.uint32)
        interp.launch(m, "k", 1, 32, out, vals, b)
        np.testing.assert_array_equal(out, shfl_model(mode, width, vals, b))


GEMM_ZIR_PATH = Path(__file__).resolve().parents[1] / "data" / "mma_gemm.zir"


def test_mma_tiled_gemm_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    m = hir.parse_zir(GEMM_ZIR_PATH.read_text(), str(GEMM_ZIR_PATH))
    for n in (32, 64):
        a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
        c = np.zeros((n, n), np.float32)
        interp.launch(m, "gemm", (n // 16, n // 16), 32, a, b, c, n)
        # Exact products summed in f64, rounded to f32 once per 16-wide k step.
        want = np.zeros((n, n), np.float32)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        for k in range(0, n, 16):
            want = (want.astype(np.float64) + a64[:, k : k + 16] @ b64[k : k + 16, :]).astype(
                np.float32
            )
        np.testing.assert_allclose(c, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(c, a64 @ b64, rtol=1e-5, atol=1e-4)


REDUCE_ZIR = """\
module "reduce" targets(sm_80)

kernel @k {{
block0(v0: ptr<global, u32>, v1: ptr<global, u32>):
    v2: ptr<shared, u32> = shared_alloc u32, 256
    v3: u32 = thread_idx.x
    v4: ptr<global, u32> = ptr_add v0, v3
    v5: u32 = load v4
    v6: ptr<shared, u32> = ptr_add v2, v3
    store v6, v5
    barrier
    v7: u32 = const 128
    v8: bool = cmp.lt v3, v7
    br v8, block1, block2
block1:
    v9: u32 = add v3, v7
    v10: ptr<shared, u32> = ptr_add v2, v9
    v11: u32 = load v6
    v12: u32 = load v10
    v13: u32 = add v11, v12
    store v6, v13
    jump block2
block2:
    {maybe_barrier}
    v14: u32 = const 64
    v15: bool = cmp.lt v3, v14
    br v15, block3, block4
block3:
    v16: u32 = add v3, v14
    v17: ptr<shared, u32> = ptr_add v2, v16
    v18: u32 = load v6
    v19: u32 = load v17
    v20: u32 = add v18, v19
    store v6, v20
    v21: ptr<global, u32> = ptr_add v1, v3
    store v21, v20
    jump block4
block4:
    return
}}
"""


def test_missing_barrier_is_reported_as_a_race() -> None:
    rng = np.random.default_rng(8)
    x = rng.integers(1, 1000, 256, dtype=np.uint32)
    want = x[0:64] + x[64:128] + x[128:192] + x[192:256]
    good = hir.parse_zir(REDUCE_ZIR.format(maybe_barrier="barrier"), "good.zir")
    out = np.zeros(64, np.uint32)
    interp.launch(good, "k", 1, 256, x, out)
    np.testing.assert_array_equal(out, want)
    bad = hir.parse_zir(REDUCE_ZIR.format(maybe_barrier=""), "bad.zir")
    with pytest.raises(zyntax.TrapError, match="race") as info:
        interp.launch(bad, "k", 1, 256, x, np.zeros(64, np.uint32))
    assert info.value.kind == "shared memory data race"  # type: ignore[attr-defined]
    # checks=False: no report (the result is whatever the schedule gives).
    interp.launch(bad, "k", 1, 256, x, np.zeros(64, np.uint32), checks=False)


DIVERGENT_ZIR = """\
module "div" targets(sm_80)

kernel @k {
block0(v0: ptr<global, u32>):
    v1: u32 = thread_idx.x
    v2: u32 = const 16
    v3: bool = cmp.lt v1, v2
    br v3, block1, block2
block1:
    barrier
    jump block2
block2:
    barrier
    return
}
"""


def test_divergent_barrier_is_reported() -> None:
    m = hir.parse_zir(DIVERGENT_ZIR, "div.zir")
    with pytest.raises(zyntax.TrapError, match="divergent barrier") as info:
        interp.launch(m, "k", 2, 64, np.zeros(1, np.uint32))
    assert list(info.value.block) == [0, 0, 0]  # type: ignore[attr-defined]
    assert "barrier" in info.value.inst  # type: ignore[attr-defined]


def test_off_by_one_names_thread_block_and_index() -> None:
    text = (EXAMPLES / "saxpy.zir").read_text().replace("cmp.lt", "cmp.le")
    m = hir.parse_zir(text, "saxpy_bug.zir")
    n = 1000
    rng = np.random.default_rng(9)
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    y = rng.uniform(0.5, 2.0, n).astype(np.float32)
    with pytest.raises(zyntax.TrapError, match="element index 1000") as info:
        interp.launch(m, "saxpy", 4, 256, n, 2.0, x, y)
    err = info.value
    assert err.kind == "out-of-bounds access"  # type: ignore[attr-defined]
    assert list(err.block) == [3, 0, 0]  # type: ignore[attr-defined]
    assert list(err.thread) == [232, 0, 0]  # type: ignore[attr-defined]


FIB_ZIR = """\
module "rec"

host @fib -> u64 {
block0(v0: u64):
    v1: u64 = const 2
    v2: bool = cmp.lt v0, v1
    br v2, block1, block2
block1:
    return v0
block2:
    v3: u64 = const 1
    v4: u64 = sub v0, v3
    v5: u64 = call @fib v4
    v6: u64 = sub v0, v1
    v7: u64 = call @fib v6
    v8: u64 = add v5, v7
    return v8
}
"""


def test_recursion_and_division_by_zero() -> None:
    m = hir.parse_zir(FIB_ZIR, "fib.zir")
    fib = [0, 1]
    while len(fib) < 20:
        fib.append(fib[-1] + fib[-2])
    for n in (0, 1, 5, 19):
        assert interp.call(m, "fib", n) == fib[n]
    div = hir.parse_zir(
        'module "d"\n\nhost @q -> u32 {\nblock0(v0: u32, v1: u32):\n'
        "    v2: u32 = div v0, v1\n    return v2\n}\n",
        "d.zir",
    )
    assert interp.call(div, "q", 7, 2) == 3
    with pytest.raises(zyntax.TrapError, match="division by zero"):
        interp.call(div, "q", 7, 0)
