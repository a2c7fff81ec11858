"""Kernel fusion (zyntax.fusion, planned by zyntax_opt::fusion): fused and
unfused kernels on the interpreter against numpy on fresh random inputs, and
one refusal per legality rule, each reported."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zyntax import fusion, hir
from zyntax.errors import BuildError

F32 = np.float32


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def run(
    f: fusion.Fused, arrays: dict[str, np.ndarray], outputs: list[str]
) -> dict[str, np.ndarray]:
    """Runs `f` on copies of `arrays`, the outputs poisoned first."""
    arrs = {k: v.copy() for k, v in arrays.items()}
    for o in outputs:
        arrs[o][...] = np.nan
    f.run_interp(arrs)
    return {o: arrs[o] for o in outputs}


def chain(n: int, length: int) -> fusion.Sequence:
    """x -> t0 -> ... -> y, each step `v * a_k + b_k`, mixing in x at the odd steps."""
    s = fusion.Sequence("chain")
    x = s.input("x", n)
    prev = x
    for k in range(length):
        out = s.output("y", n) if k == length - 1 else s.temporary(f"t{k}", n)

        def step(e: Any, prev: Any = prev, k: int = k) -> Any:
            v = e[prev] * (1.0 + 0.25 * k) + (0.5 - 0.1 * k)
            return v + e[x] if k % 2 else v

        s.map(f"step{k}", out, step)
        prev = out
    return s


def chain_ref(x: np.ndarray, length: int) -> np.ndarray:
    v = x.astype(np.float64)
    for k in range(length):
        v = v * (1.0 + 0.25 * k) + (0.5 - 0.1 * k)
        if k % 2:
            v = v + x
    return v


def test_an_elementwise_chain_fuses_into_one_kernel() -> None:
    n, length = 1000, 6  # not a multiple of the workgroup: the guard matters
    s = chain(n, length)
    fused, unfused = s.fuse(), s.fuse(enabled=False)
    assert len(fused.kernels) == 1 and len(unfused.kernels) == length
    assert all(d.fused for d in fused.decisions)
    # The fused kernel touches only x and y: the temporaries live in registers.
    assert [b.name for b in fused.kernels[0].buffers] == ["x", "y"]
    assert fused.bytes_moved() == 2 * n * 4
    assert unfused.bytes_moved() == (2 * length + length // 2) * n * 4
    x = rng().standard_normal(n).astype(F32)
    yf = run(fused, {"x": x, "y": np.empty(n, F32)}, ["y"])["y"]
    yu = run(unfused, {"x": x, "y": np.empty(n, F32)}, ["y"])["y"]
    np.testing.assert_array_equal(yf, yu)  # the same f32 operations in the same order
    np.testing.assert_allclose(yf, chain_ref(x, length), rtol=1e-5, atol=1e-5)
    assert "step1 fused into step0" in fused.report()


def gelu(e: Any, v: Any) -> Any:
    u = (v + v * v * v * 0.044715) * 0.7978845608028654
    return v * 0.5 * (e.b.tanh(u) + 1.0)


def gelu_ref(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))


def bias_gelu_rowsum(rows: int, cols: int) -> fusion.Sequence:
    s = fusion.Sequence("bgr")
    x = s.input("x", (rows, cols))
    bias = s.input("bias", cols)
    y = s.output("y", (rows, cols))
    sums = s.output("sums", rows)
    s.map("bias_gelu", y, lambda e: gelu(e, e[x] + e.load(bias, e.point[1])))
    s.reduce("rowsum", sums, cols, lambda e: e[y])
    return s


def test_elementwise_fuses_into_a_row_reduction() -> None:
    rows, cols = 37, 53
    s = bias_gelu_rowsum(rows, cols)
    fused, unfused = s.fuse(), s.fuse(enabled=False)
    assert len(fused.kernels) == 1 and len(unfused.kernels) == 2
    assert fused.decisions[0].fused
    r = rng()
    x = r.standard_normal((rows, cols)).astype(F32)
    bias = r.standard_normal(cols).astype(F32)
    arrays = {"x": x, "bias": bias, "y": np.empty((rows, cols), F32), "sums": np.empty(rows, F32)}
    want_y = gelu_ref(x.astype(np.float64) + bias)
    for f in (fused, unfused):
        got = run(f, arrays, ["y", "sums"])
        np.testing.assert_allclose(got["y"], want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["sums"], want_y.sum(axis=1), rtol=1e-4, atol=1e-4)
    # y is an output: fused, it is still stored once, and read by no one.
    assert fused.bytes_moved() == (2 * rows * cols + cols + rows) * 4


def test_a_consumer_reading_a_neighbour_is_not_fused() -> None:
    n = 300
    s = fusion.Sequence("stencil")
    x, t, y = s.input("x", n), s.temporary("t", n), s.output("y", n)
    s.map("square", t, lambda e: e[x] * e[x])
    # y[i] = t[i] + t[min(i + 1, n - 1)]: another thread's (or block's) t.
    s.map("smooth", y, lambda e: e[t] + e.load(t, e.b.min(e.point[0] + 1, n - 1)))
    f = s.fuse()
    assert len(f.kernels) == 2
    d = f.decisions[0]
    assert not d.fused and d.rule == "dependence" and '"t"' in d.why
    assert "smooth not fused with square: dependence" in f.report()
    xs = rng().standard_normal(n).astype(F32)
    got = run(f, {"x": xs, "y": np.empty(n, F32)}, ["y"])["y"]
    sq = xs.astype(np.float64) ** 2
    np.testing.assert_allclose(got, sq + np.append(sq[1:], sq[-1]), rtol=1e-6)


def test_aliasing_that_hides_a_dependence_is_not_fused() -> None:
    n = 256
    s = fusion.Sequence("alias")
    x = s.input("x", n)
    t = s.temporary("t", n)
    y = s.output("y", n, alias_of=x)  # the caller may pass the same memory
    s.map("reverse", t, lambda e: e.load(x, (n - 1) - e.point[0]))
    s.map("double", y, lambda e: e[t] * 2.0)
    f = s.fuse()
    d = f.decisions[0]
    assert not d.fused and d.rule == "alias" and "aliases" in d.why, d
    # Unfused, in place, it is right: the reverse completes before y overwrites x.
    xs = rng().standard_normal(n).astype(F32)
    buf = xs.copy()
    f.run_interp({"x": buf, "y": buf})
    np.testing.assert_array_equal(buf, xs[::-1] * 2)
    # Without the alias the same pair fuses.
    s2 = fusion.Sequence("noalias")
    x2, t2, y2 = s2.input("x", n), s2.temporary("t", n), s2.output("y", n)
    s2.map("reverse", t2, lambda e: e.load(x2, (n - 1) - e.point[0]))
    s2.map("double", y2, lambda e: e[t2] * 2.0)
    assert s2.fuse().decisions[0].fused


def test_a_reduction_is_never_a_fused_producer() -> None:
    rows, cols = 20, 33
    s = fusion.Sequence("norm")
    x = s.input("x", (rows, cols))
    sums = s.temporary("sums", rows)
    y = s.output("y", rows)
    s.reduce("rowsum", sums, cols, lambda e: e[x])
    s.map("scale", y, lambda e: e[sums] * (1.0 / cols))
    f = s.fuse()
    assert len(f.kernels) == 2 and f.decisions[0].rule == "reduction_producer"
    xs = rng().standard_normal((rows, cols)).astype(F32)
    got = run(f, {"x": xs, "y": np.empty(rows, F32)}, ["y"])["y"]
    np.testing.assert_allclose(got, xs.astype(np.float64).mean(axis=1), rtol=1e-4, atol=1e-5)


def test_different_iteration_spaces_are_not_fused() -> None:
    s = fusion.Sequence("spaces")
    x = s.input("x", 64)
    t = s.temporary("t", 64)
    y = s.output("y", 32)
    s.map("a", t, lambda e: e[x] + 1.0)
    s.map("b", y, lambda e: e.load(t, e.point[0] * 2))
    f = s.fuse()
    assert f.decisions[0].rule == "space"
    xs = rng().standard_normal(64).astype(F32)
    got = run(f, {"x": xs, "y": np.empty(32, F32)}, ["y"])["y"]
    np.testing.assert_array_equal(got, xs[::2] + F32(1))


@pytest.mark.parametrize(
    ("regs", "smem", "rule"),
    [((200, 100), (0, 0), "registers"), ((20, 20), (40_000, 20_000), "shared_memory")],
)
def test_resource_budgets_refuse_fusion(
    regs: tuple[int, int], smem: tuple[int, int], rule: str
) -> None:
    s = fusion.Sequence("budget")
    x, t, y = s.input("x", 100), s.temporary("t", 100), s.output("y", 100)
    s.map("a", t, lambda e: e[x] + 1.0, registers=regs[0], shared_bytes=smem[0])
    s.map("b", y, lambda e: e[t] * 3.0, registers=regs[1], shared_bytes=smem[1])
    f = s.fuse()
    assert f.decisions[0].rule == rule and not f.decisions[0].fused
    assert f"b not fused with a: {rule}" in f.report()
    # A smaller budget refuses what the default one allows.
    s2 = chain(100, 2)
    assert s2.fuse().decisions[0].fused
    assert s2.fuse(budget={"registers": 255, "shared_bytes": 0}).decisions[0].fused


def test_resources_come_from_ptxas_with_an_arch() -> None:
    s = chain(100, 2)
    f = s.fuse(arch="sm_80")
    assert all(st.registers > 0 for st in s.stages)
    assert f.decisions[0].fused
    # Budget below the measured registers: refused, and the report says how many were needed.
    f = s.fuse(arch="sm_80", budget={"registers": 2, "shared_bytes": 49152})
    assert f.decisions[0].rule == "registers" and "registers per thread" in f.decisions[0].why


def test_bad_sequences_raise() -> None:
    s = fusion.Sequence("bad")
    with pytest.raises(BuildError, match="no stages"):
        s.fuse()
    s.input("x", 4)
    with pytest.raises(BuildError, match="already has a buffer"):
        s.input("x", 4)
    with pytest.raises(BuildError, match="op must be"):
        s.reduce("r", s.output("r", 4), 4, lambda e: 0.0, op="mul")


@pytest.mark.parametrize(("cols", "op"), [(72, "add"), (256, "max"), (53, "add")])
def test_row_reductions_take_a_warp_per_row(cols: int, op: str) -> None:
    """Vector runs with a guarded tail (72), whole chunks (256 = 32 lanes x 4
    x 2 steps), and rows too short for aligned vectors (53): each against
    numpy, fused and unfused."""
    rows = 37
    s = fusion.Sequence("rowred")
    x = s.input("x", (rows, cols))
    y = s.output("y", (rows, cols))
    r_out = s.output("r", rows)
    s.map("square", y, lambda e: e[x] * e[x] - 0.5)
    s.reduce("fold", r_out, cols, lambda e: e[y] * 2.0, op=op)
    xs = rng().standard_normal((rows, cols)).astype(F32)
    want_y = xs.astype(np.float64) ** 2 - 0.5
    want_r = (want_y * 2).max(axis=1) if op == "max" else (want_y * 2).sum(axis=1)
    for f in (s.fuse(), s.fuse(enabled=False)):
        assert f.kernels[-1].block == (256, 1, 1) and f.kernels[-1].grid == (5, 1, 1)
        got = run(
            f, {"x": xs, "y": np.empty((rows, cols), F32), "r": np.empty(rows, F32)}, ["y", "r"]
        )
        np.testing.assert_allclose(got["y"], want_y, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["r"], want_r, rtol=1e-5, atol=1e-4)


def test_half_buffers_move_eight_per_vector_and_reduce_in_f32() -> None:
    rows, cols = 9, 48  # f16 rows of 96 bytes: 16-byte aligned, 8 lanes per vector
    s = fusion.Sequence("half")
    x = s.input("x", (rows, cols), hir.f16)
    bias = s.input("bias", cols, hir.f16)
    y = s.output("y", (rows, cols), hir.f16)
    sums = s.output("sums", rows, hir.f16)  # no f16 shuffle: accumulated in f32
    s.map("bias_add", y, lambda e: e[x] + e.load(bias, e.point[1]))
    s.reduce("rowsum", sums, cols, lambda e: e[y])
    r = rng()
    xs = r.standard_normal((rows, cols)).astype(np.float16)
    bs = r.standard_normal(cols).astype(np.float16)
    want_y = xs + bs  # f16 + f16, rounded once: numpy does the same
    for f in (s.fuse(), s.fuse(enabled=False)):
        got = run(
            f,
            {
                "x": xs,
                "bias": bs,
                "y": np.empty((rows, cols), np.float16),
                "sums": np.empty(rows, np.float16),
            },
            ["y", "sums"],
        )
        np.testing.assert_array_equal(got["y"], want_y)
        np.testing.assert_allclose(
            got["sums"], want_y.astype(np.float64).sum(axis=1), rtol=2e-3, atol=2e-2
        )


def test_a_2d_map_chain_with_a_broadcast_runs_vectorised() -> None:
    rows, cols = 13, 40  # 520 points: full runs of 4 and a ragged last block
    s = fusion.Sequence("bcast")
    x = s.input("x", (rows, cols))
    bias = s.input("bias", cols)
    t = s.temporary("t", (rows, cols))
    y = s.output("y", (rows, cols))
    s.map("add", t, lambda e: e[x] + e.load(bias, e.point[1]))
    s.map("scale", y, lambda e: e[t] * (e.b.cast(e.point[0], hir.f32) + 1.0))
    f = s.fuse()
    assert len(f.kernels) == 1 and [b.name for b in f.kernels[0].buffers] == ["x", "bias", "y"]
    r = rng()
    xs = r.standard_normal((rows, cols)).astype(F32)
    bs = r.standard_normal(cols).astype(F32)
    got = run(f, {"x": xs, "bias": bs, "y": np.empty((rows, cols), F32)}, ["y"])["y"]
    want = (xs + bs) * (np.arange(rows, dtype=F32)[:, None] + F32(1))
    np.testing.assert_array_equal(got, want)


def test_the_fused_kernel_is_charged_its_measured_registers() -> None:
    s = chain(100, 4)
    s.fuse(arch="sm_80")
    stage_sum = sum(st.registers for st in s.stages)
    fused_regs, _ = s._resources("sm_80", [0, 1, 2, 3])
    assert 0 < fused_regs < stage_sum, (fused_regs, stage_sum)
    # A budget the fused kernel meets but the stages' sum does not: measured, it fuses.
    f = s.fuse(arch="sm_80", budget={"registers": fused_regs, "shared_bytes": 0})
    assert len(f.kernels) == 1 and all(d.fused for d in f.decisions), f.report()
    # Without measurements the sum is charged (the declared resources).
    for st in s.stages:
        st.registers = fused_regs
    f = s.fuse(budget={"registers": fused_regs, "shared_bytes": 0})
    assert f.decisions[0].rule == "registers" and str(2 * fused_regs) in f.decisions[0].why


def test_the_generated_kernels_use_128_bit_accesses_and_warp_shuffles() -> None:
    """The shapes the bandwidth depends on (docs/fusion.md), checked in the PTX."""
    from zyntax import _native

    def ptx(k: fusion.Kernel) -> str:
        out = _native.compile_ptx(k.module, "sm_90")
        return str(out if isinstance(out, str) else out["ptx"])

    f = chain(1 << 20, 8).fuse()
    text = ptx(f.kernels[0])
    assert text.count("ld.global.v4.f32") == 2 and text.count("st.global.v4.f32") == 2, text
    assert f.kernels[0].grid == ((1 << 20) // (256 * 2 * 4), 1, 1)
    s = bias_gelu_rowsum(64, 256)
    text = ptx(s.fuse().kernels[0])
    # x and the bias row as vectors (two runs of 4 per lane), y stored as vectors,
    # five butterfly shuffles, no per-point scalar load.
    assert text.count("ld.global.v4.f32") == 4 and text.count("st.global.v4.f32") == 2, text
    assert text.count("shfl.sync.bfly") == 5 and "ld.global.f32" not in text, text
