"""zyntax.tile on the reference interpreter: tile programs written in Python,
lowered to HIR and run against float64 numpy references on fresh random
inputs, with outputs poisoned (NaN) first; bad input gets typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import zyntax
from zyntax import tile

SEED = np.random.SeedSequence().entropy
print(f"test_tile seed {SEED}")
RNG = np.random.default_rng(SEED)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32)


# ---------------------------------------------------------------- programs


def copy(s: tile.Schedule) -> tile.Kernel:
    """y[i, j] = x[i, j], one [BM, BN] box per program instance."""
    bm, bn = s.block
    t = tile.Builder("copy", s)
    x, y = t.view("x", "f32", 2), t.view("y", "f32", 2)
    origin = (t.program_id(0) * bm, t.program_id(1) * bn)
    t.store(y, origin, t.load(x, origin, (bm, bn)))
    return t.finish()


def axpb(s: tile.Schedule) -> tile.Kernel:
    """z = x * y + v (v a column, broadcast along rows) - alpha."""
    bm, bn = s.block
    t = tile.Builder("axpb", s)
    x, y, v, z = (t.view(n, "f32", 2) for n in ("x", "y", "v", "z"))
    alpha = t.scalar_param("alpha", "f32")
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn
    a, b = t.load(x, (m0, n0), (bm, bn)), t.load(y, (m0, n0), (bm, bn))
    col = t.load(v, (m0, 0), (bm, 1)).broadcast((bm, bn))
    t.store(z, (m0, n0), a * b + col - t.splat((bm, bn), alpha))
    return t.finish()


def softmax(s: tile.Schedule) -> tile.Kernel:
    """Row softmax; a program instance holds BM whole rows (BN >= columns)."""
    bm, bn = s.block
    t = tile.Builder("softmax", s)
    x, y = t.view("x", "f32", 2), t.view("y", "f32", 2)
    m0 = t.program_id(0) * bm
    v = t.load(x, (m0, 0), (bm, bn), other=float("-inf"))
    e = (v - v.max(1).broadcast((bm, bn))).exp()
    t.store(y, (m0, 0), e / e.sum(1).broadcast((bm, bn)))
    return t.finish()


def reduce(s: tile.Schedule, op: str, axis: int) -> tile.Kernel:
    """`op` along `axis` of the whole [BM, BN] tile (one program instance)."""
    bm, bn = s.block
    t = tile.Builder(f"{op}_{axis}", s)
    x, out = t.view("x", "f32", 2), t.view("out", "f32", 2)
    v = t.load(x, (0, 0), (bm, bn), other=0.0 if op == "sum" else float("-inf"))
    t.store(out, (0, 0), t.reduce(v, axis, op))
    return t.finish()


def gemm(s: tile.Schedule) -> tile.Kernel:
    (bm, bn), bk = s.block, s.k
    t = tile.Builder("gemm", s)
    a, b, c = (t.view(n, "f32", 2) for n in "abc")
    m0, n0 = t.program_id(0) * bm, t.program_id(1) * bn

    def step(t: tile.Builder, k0: tile.Scalar, acc: list[tile.Value]) -> list[tile.Value]:
        x, y = t.load(a, (m0, k0), (bm, bk)), t.load(b, (k0, n0), (bk, bn))
        return [t.dot(x, y, acc[0])]  # type: ignore[arg-type]

    (acc,) = t.for_range(0, a.dim(1), bk, [t.zeros((bm, bn))], step)
    t.store(c, (m0, n0), acc)  # type: ignore[arg-type]
    return t.finish()


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("warps", [1, 2, 4])
@pytest.mark.parametrize("shape", [(1, 1), (17, 33), (33, 17), (1, 33), (33, 1)])
def test_copy_tails(shape: tuple[int, int], warps: int) -> None:
    k = copy(tile.Schedule((16, 16), warps=warps))
    assert k.block == (warps * 32, 1, 1)
    assert [p.name for p in k.params] == ["x", "y"]
    x = rand(*shape)
    # A NaN guard band around y: nothing outside the view may be written.
    band = nan(shape[0] + 2, shape[1] + 3)
    y = band[1 : 1 + shape[0], 1 : 1 + shape[1]]
    k.run_interp(x, y, grid=k.grid(*shape))
    np.testing.assert_array_equal(y, x)
    inside = np.zeros(band.shape, dtype=bool)
    inside[1 : 1 + shape[0], 1 : 1 + shape[1]] = True
    assert np.isnan(band[~inside]).all()


def test_copy_strided_and_transposed_views() -> None:
    k = copy(tile.Schedule((16, 16), warps=2))
    big = rand(70, 100)
    x = big[3::2, 1::3]  # strides (200, 3) elements
    y = nan(x.shape[1], x.shape[0]).T  # transposed: strides (1, rows)
    k.run_interp(x, y, grid=k.grid(*x.shape))
    np.testing.assert_array_equal(y, x)
    # The input is untouched.
    assert not np.isnan(big).any()


# ---------------------------------------------------------------- compute


def test_elementwise_broadcast_and_scalar_param() -> None:
    k = axpb(tile.Schedule((16, 32), warps=2))
    m, n = 37, 45
    x, y, v = rand(m, n), rand(m, n), rand(m, 1)
    z = nan(m, n)
    k.run_interp(x, y, v, z, 0.25, grid=k.grid(m, n))
    want = x.astype(np.float64) * y + v - 0.25
    np.testing.assert_allclose(z, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("rows", "cols", "block", "warps"), [(17, 33, (4, 64), 4), (5, 128, (2, 128), 2)]
)
def test_row_softmax(rows: int, cols: int, block: tuple[int, int], warps: int) -> None:
    k = softmax(tile.Schedule(block, warps=warps))
    x = rand(rows, cols) * 8
    y = nan(rows, cols)
    k.run_interp(x, y, grid=k.grid(rows, 1))
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("warps", [1, 4])
def test_reduce_each_axis(op: str, axis: int, warps: int) -> None:
    k = reduce(tile.Schedule((32, 64), warps=warps), op, axis)
    m, n = 29, 45
    x = rand(m, n)
    out = nan(1, n) if axis == 0 else nan(m, 1)
    k.run_interp(x, out, grid=1)
    ref = getattr(x.astype(np.float64), op)(axis=axis, keepdims=True)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("m", "n", "kk", "schedule"),
    [
        (17, 33, 9, tile.Schedule((16, 16), k=8, warps=2)),
        (64, 64, 64, tile.Schedule((64, 64), k=16, warps=4)),
    ],
)
def test_gemm(m: int, n: int, kk: int, schedule: tile.Schedule) -> None:
    k = gemm(schedule)
    a, b, c = rand(m, kk), rand(kk, n), nan(m, n)
    k.run_interp(a, b, c, grid=k.grid(m, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_gemm_transposed_a() -> None:
    k = gemm(tile.Schedule((16, 16), k=8, warps=2))
    m, n, kk = 19, 21, 13
    at = rand(kk, m)
    b, c = rand(kk, n), nan(m, n)
    k.run_interp(at.T, b, c, grid=k.grid(m, n))
    np.testing.assert_allclose(c, at.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_kernel_is_hir() -> None:
    k = copy(tile.Schedule((16, 16)))
    assert isinstance(k.module, zyntax.hir.Module)
    k.module.verify()
    assert k.name in str(k.module)
    assert k.params == (tile.Param("view", "x", "f32", 2), tile.Param("view", "y", "f32", 2))


# ---------------------------------------------------------------- bad input


def test_shape_mismatch_is_a_build_error_naming_the_operand() -> None:
    t = tile.Builder("bad", tile.Schedule((16, 16)))
    x = t.view("x", "f32", 2)
    a, b = t.load(x, (0, 0), (16, 16)), t.load(x, (0, 0), (16, 8))
    t.store(x, (0, 0), a + b)
    with pytest.raises(zyntax.BuildError, match=r"map: operand `b` has shape \[16, 8\]"):
        t.finish()


def test_dot_dtype_pair_is_named() -> None:
    t = tile.Builder("bad", tile.Schedule((16, 16)))
    x, h = t.view("x", "f32", 2), t.view("h", "f16", 2)
    acc = t.dot(t.load(x, (0, 0), (16, 16)), t.load(h, (0, 0), (16, 16)), t.zeros((16, 16)))
    t.store(x, (0, 0), acc)
    with pytest.raises(zyntax.BuildError, match="dot: operand `b`"):
        t.finish()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"warps": 3}, "warps"),
        ({"k": 12}, "k"),
        ({"stages": 0}, "stages"),
        ({"cluster": 2}, "cluster"),
    ],
)
def test_bad_schedule_names_the_field(kwargs: dict[str, int], field: str) -> None:
    s = tile.Schedule((16, 16), **kwargs)
    with pytest.raises(zyntax.ArgumentError, match=f"`{field}`"):
        s.validate()
    with pytest.raises(zyntax.ArgumentError, match=f"`{field}`"):
        copy(s)


def test_gemm_schedule_that_does_not_fit() -> None:
    with pytest.raises(zyntax.ArgumentError, match="does not fit"):
        tile.Schedule((256, 256), k=64, warps=1).validate_gemm(4)
    assert tile.heuristic(17, 33, 9).block == [16, 16]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda t, x: t.load(x, (0, 0), "16"), "'shape'"),
        (lambda t, x: t.load(x, (0, 0), (16, -1)), "'shape'"),
        (lambda t, x: t.load(x, (0, 0.5), (16, 16)), "'origin'"),
        (lambda t, x: t.load(x, (0, 0), (16, 16), other="0"), "'other'"),
        (lambda t, x: t.load("x", (0, 0), (16, 16)), "'view'"),
        (lambda t, x: t.binary("pow", t.zeros((16, 16)), t.zeros((16, 16))), "'op'"),
        (lambda t, x: t.reduce(t.zeros((16, 16)), 0, "mean"), "'op'"),
        (lambda t, x: t.full((16, 16), "complex", 0.0), "complex"),
        (lambda t, x: t.constant("u32", 1.5), "'value'"),
        (lambda t, x: t.program_id(True), "integer"),
        (lambda t, x: t.zeros((4, 4)) + "1", "'other'"),
        (lambda t, x: t.for_range(0, 4, 1, [t.zeros((4, 4))], 5), "'body'"),
        (lambda t, x: t.for_range(0, 4, 1, t.zeros((4, 4)), lambda *a: []), "'inits'"),
    ],
)
def test_bad_arguments_are_argument_errors(call, match: str) -> None:  # type: ignore[no-untyped-def]
    t = tile.Builder("bad", tile.Schedule((16, 16)))
    x = t.view("x", "f32", 2)
    with pytest.raises(zyntax.ZyntaxError, match=match):
        call(t, x)


def test_handles_of_another_builder_are_refused() -> None:
    t1, t2 = (tile.Builder(n, tile.Schedule((16, 16))) for n in ("one", "two"))
    a = t1.zeros((16, 16))
    with pytest.raises(zyntax.ArgumentError, match="another builder"):
        t2.exp(a)
    with pytest.raises(zyntax.ArgumentError, match="'name'"):
        tile.Builder("not a name", tile.Schedule((16, 16)))
    with pytest.raises(zyntax.ArgumentError, match="'arch'"):
        tile.Schedule((16, 16), arch="sm_99x")
    with pytest.raises(zyntax.ArgumentError, match="'block'"):
        tile.Schedule("16x16")


def test_loop_yield_mismatch_and_body_errors() -> None:
    t = tile.Builder("loop", tile.Schedule((16, 16)))
    x = t.view("x", "f32", 2)
    (r,) = t.for_range(0, 4, 1, [t.zeros((16, 16))], lambda t, i, c: [t.zeros((16, 8))])
    t.store(x, (0, 0), r)  # type: ignore[arg-type]
    with pytest.raises(zyntax.BuildError, match="for_range: operand `yields`"):
        t.finish()

    t = tile.Builder("loop", tile.Schedule((16, 16)))

    def body(t: tile.Builder, i: tile.Scalar, c: list[tile.Value]) -> list[tile.Value]:
        raise KeyError("in the body")

    with pytest.raises(KeyError, match="in the body"):
        t.for_range(0, 4, 1, [t.zeros((16, 16))], body)
    with pytest.raises(zyntax.BuildError, match="closed"):
        t.finish()


def test_finish_inside_a_loop_body_is_refused() -> None:
    t = tile.Builder("f", tile.Schedule((16, 16)))

    def body(t: tile.Builder, i: tile.Scalar, c: list[tile.Value]) -> list[tile.Value]:
        t.finish()
        return c

    with pytest.raises(zyntax.BuildError, match="inside a for_range body"):
        t.for_range(0, 2, 1, [t.zeros((16, 16))], body)


def test_nested_loops() -> None:
    t = tile.Builder("nest", tile.Schedule((16, 16), warps=2))
    x, y = t.view("x", "f32", 2), t.view("y", "f32", 2)
    v = t.load(x, (0, 0), (16, 16))

    def outer(t: tile.Builder, i: tile.Scalar, c: list[tile.Value]) -> list[tile.Value]:
        return t.for_range(0, 3, 1, c, lambda t, j, d: [d[0] + v])

    (r,) = t.for_range(0, 2, 1, [t.zeros((16, 16))], outer)
    t.store(y, (0, 0), r)  # type: ignore[arg-type]
    k = t.finish()
    a, b = rand(5, 7), nan(5, 7)
    k.run_interp(a, b, grid=1)
    np.testing.assert_allclose(b, 6 * a.astype(np.float64), rtol=1e-6)


def test_finish_twice_and_use_after_finish() -> None:
    k = tile.Builder("x", tile.Schedule((16, 16)))
    k.view("x", "f32", 1)
    k.finish()
    with pytest.raises(zyntax.BuildError, match="closed"):
        k.finish()
    with pytest.raises(zyntax.BuildError, match="closed"):
        k.program_id(0)


def test_run_interp_checks_arrays() -> None:
    k = copy(tile.Schedule((16, 16)))
    x, y = rand(4, 4), nan(4, 4)
    with pytest.raises(zyntax.ArgumentError, match="takes 2 arguments"):
        k.run_interp(x, grid=1)
    with pytest.raises(zyntax.ArgumentError, match=r"'y'.*float64"):
        k.run_interp(x, y.astype(np.float64), grid=1)
    with pytest.raises(zyntax.ArgumentError, match=r"'x'.*rank 2"):
        k.run_interp(x.ravel(), y, grid=1)
    with pytest.raises(zyntax.ArgumentError, match=r"'x'.*strides"):
        k.run_interp(x[::-1], y, grid=1)
    with pytest.raises(zyntax.ArgumentError, match=r"'x'.*numpy array"):
        k.run_interp([[1.0]], y, grid=1)
    with pytest.raises(zyntax.ArgumentError, match=r"'y'.*shares memory"):
        k.run_interp(x, x, grid=1)
    kp = axpb(tile.Schedule((16, 16)))
    with pytest.raises(zyntax.ArgumentError, match="'alpha'"):
        kp.run_interp(x, x.copy(), rand(4, 1), y, "0.5", grid=1)
    assert np.isnan(y).all()
