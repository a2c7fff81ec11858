"""zyntax.tiling.Nest (nests written with Python operators) and the
lang.prange route (kernel_nest: a @zyntax.kernel's prange nest described for
concrete arguments and lowered by the Rust core), on the reference
interpreter against float64 numpy on fresh random inputs with outputs
poisoned (NaN) first; kernels of other shapes are refused with the reason."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import lang
from zyntax.tiling import Nest, fuse_nests, kernel_nest, nest_tiling_report

SEED = np.random.SeedSequence().entropy
print(f"test_nest_builder seed {SEED}")
RNG = np.random.default_rng(SEED)
ROOT = Path(__file__).resolve().parents[2]

F32C = zyntax.Array[zyntax.f32, 2, "C"]
F32V = zyntax.Array[zyntax.f32, 1, "C"]


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32)


def gelu64(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def f64(*xs: np.ndarray) -> list[np.ndarray]:
    return [x.astype(np.float64) for x in xs]


# ------------------------------------------------------------------ Nest


def fused_nest(m: int, n: int, k: int) -> Nest:
    nb = Nest("fused")
    i, j, kk = nb.parallel("i", m), nb.parallel("j", n), nb.reduction("k", k)
    a, b = nb.buffer("A", "f32", (m, k)), nb.buffer("B", "f32", (k, n))
    bias, r, c = (
        nb.buffer("bias", "f32", (n,)),
        nb.buffer("R", "f32", (m, n)),
        nb.buffer("C", "f32", (m, n)),
    )
    nb.store(c[i, j], Nest.gelu(nb.sum(a[i, kk] * b[kk, j]) + bias[j]) + r[i, j])
    return nb


@pytest.mark.parametrize(("m", "n", "k"), [(19, 37, 11), (64, 32, 48)])
def test_builder_fused_matmul(m: int, n: int, k: int) -> None:
    nb = fused_nest(m, n, k)
    spec = nb.spec()
    assert spec["value"][0] == "binary" and "epilogue" in spec
    nt = nb.lower()
    assert nt.kind == "contraction" and "epilogue" in nt.report
    assert nt.report == nb.report() == nest_tiling_report(spec)
    a, b, bias, r, c = rand(m, k), rand(k, n), rand(n), rand(m, n), nan(m, n)
    nt.run_interp(a, b, bias, r, c)
    a6, b6, bias6, r6 = f64(a, b, bias, r)
    np.testing.assert_allclose(c, gelu64(a6 @ b6 + bias6) + r6, rtol=1e-5, atol=1e-5)


def test_builder_map_strided_and_accumulate() -> None:
    m, n = 13, 29
    nb = Nest("map")
    i, j = nb.parallel("i", m), nb.parallel("j", n)
    x, y = nb.buffer("x", "f32", (m, 2 * n + 1)), nb.buffer("y", "f32", (m, n))
    nb.store(y[i, j], Nest.max(x[i, 2 * j + 1] * 3.0 - 1.0, -x[i, j]) / 2.0, accumulate=True)
    nt = nb.lower()
    assert nt.kind == "map", nt.report
    xs, ys = rand(m, 2 * n + 1), rand(m, n)
    want = ys.astype(np.float64) + np.maximum(xs[:, 1::2] * 3.0 - 1.0, -xs[:, :n]) / 2.0
    nt.run_interp(xs, ys)
    np.testing.assert_allclose(ys, want, rtol=1e-6, atol=1e-6)


def test_builder_misuse() -> None:
    nb = Nest("bad")
    i, k = nb.parallel("i", 8), nb.reduction("k", 8)
    x, y = nb.buffer("x", "f32", (8, 8)), nb.buffer("y", "f32", (8,))
    with pytest.raises(zyntax.ArgumentError, match="rank 2"):
        x[i]
    with pytest.raises(zyntax.ArgumentError, match="index"):
        x[i, 0.5]
    with pytest.raises(zyntax.ArgumentError, match="unknown unary op 'erf'"):
        Nest.unary("erf", x[i, k])
    with pytest.raises(zyntax.BuildError, match="exactly one sum"):
        nb.store(y[i], x[i, k])
    with pytest.raises(zyntax.BuildError, match="a sum inside a sum"):
        nb.store(y[i], nb.sum(nb.sum(x[i, k])))
    with pytest.raises(zyntax.BuildError, match="stores nothing"):
        nb.spec()
    with pytest.raises(zyntax.ArgumentError, match="extent"):
        nb.parallel("j", 0)
    nb.store(y[i], nb.sum(x[i, k]))
    with pytest.raises(zyntax.BuildError, match="stores once"):
        nb.store(y[i], nb.sum(x[i, k]))


def test_builder_opaque_index_is_refused_with_its_text() -> None:
    nb = Nest("gather")
    i, j = nb.parallel("i", 8), nb.parallel("j", 8)
    x, y = nb.buffer("x", "f32", (64,)), nb.buffer("y", "f32", (8, 8))
    nb.store(y[i, j], x[i * j])
    nt = nb.lower()
    assert nt.refusal == "NonAffineIndex" and nt.kernel is None, nt.report
    assert "`i * j`" in nt.report, nt.report


# ------------------------------------------------------------------ lang.prange kernels


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "prange_matmul", ROOT / "examples" / "kernels" / "prange_matmul.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@zyntax.kernel(workgroup=(16, 16))
def fused_kernel(a: F32C, b: F32C, bias: F32V, r: F32C, c: F32C, scale: zyntax.f32):  # type: ignore[no-untyped-def]
    """c = tanh(scale * (a @ b) + bias) + r."""
    for i, j in lang.prange(c.shape[0], c.shape[1]):
        acc = zyntax.f32(0)
        for k in range(a.shape[1]):
            acc += a[i, k] * b[k, j]
        t = scale * acc + bias[j]
        c[i, j] = lang.tanh(t) + r[i, j]


@zyntax.kernel(workgroup=(16, 16))
def map_kernel(x: F32C, y: F32C, n: zyntax.i32):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(y.shape[0], n):
        y[i, j] = lang.exp(x[i, 2 * j]) - x[i, j + 1]


@zyntax.kernel(workgroup=(16, 16))
def branchy_kernel(x: F32C, y: F32C):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(y.shape[0], y.shape[1]):
        if x[i, j] > 0:
            y[i, j] = x[i, j]


@zyntax.kernel(workgroup=(16, 16))
def product_index_kernel(x: F32V, y: F32C):  # type: ignore[no-untyped-def]
    for i, j in lang.prange(y.shape[0], y.shape[1]):
        y[i, j] = x[i * j]


@pytest.mark.parametrize(("m", "n", "k"), [(23, 17, 31), (48, 64, 16)])
def test_prange_matmul_example_through_the_core(m: int, n: int, k: int) -> None:
    mm = load_example().mm
    a, b, c = rand(m, k), rand(k, n), nan(m, n)
    kn = kernel_nest(mm, a, b, c)
    assert kn.tile.kind == "contraction", kn.report
    assert kn.sizes == (m, n) and kn.positions == (0, 1, 2)
    kn.tile.run_interp(*kn.buffers([a, b, c]))
    a6, b6 = f64(a, b)
    np.testing.assert_allclose(c, a6 @ b6, rtol=1e-5, atol=1e-6 * k)


def test_prange_fused_kernel_with_a_scalar() -> None:
    m, n, k = 21, 34, 19
    a, b, bias, r, c = rand(m, k), rand(k, n), rand(n), rand(m, n), nan(m, n)
    args = (a, b, bias, r, c, 0.75)
    kn = kernel_nest(fused_kernel, *args)
    assert kn.tile.kind == "contraction" and "epilogue" in kn.report, kn.report
    assert kn.positions == (0, 1, 2, 3, 4)
    kn.tile.run_interp(*kn.buffers(args))
    a6, b6, bias6, r6 = f64(a, b, bias, r)
    np.testing.assert_allclose(c, np.tanh(0.75 * (a6 @ b6) + bias6) + r6, rtol=1e-5, atol=1e-5)


def test_prange_map_with_strides_and_an_int_size() -> None:
    m, n = 9, 40
    x, y = rand(m, 2 * n), nan(m, n)
    kn = kernel_nest(map_kernel, x, y, n)
    assert kn.tile.kind == "map", kn.report
    kn.tile.run_interp(*kn.buffers([x, y, n]))
    want = np.exp(x[:, ::2].astype(np.float64)) - x[:, 1 : n + 1]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_prange_kernels_the_core_does_not_take_say_why() -> None:
    x, y = rand(8, 8), nan(8, 8)
    kn = kernel_nest(branchy_kernel, x, y)
    assert kn.tile.refusal == "NotANest" and kn.tile.kernel is None
    assert "x[i, j] > 0" in kn.report and kn.sizes == (8, 8)
    kn = kernel_nest(product_index_kernel, rand(64), y)
    assert kn.tile.refusal == "NonAffineIndex" and "i * j" in kn.report, kn.report
    kn = kernel_nest(map_kernel, x.astype(np.int32), y, 4)
    assert kn.tile.refusal == "NotANest" and "int32" in kn.report, kn.report
    with pytest.raises(zyntax.ArgumentError, match="takes 3 arguments"):
        kernel_nest(map_kernel, x, y)


def test_builder_index_text_names_the_loops() -> None:
    nb = Nest("t")
    i, j = nb.parallel("i", 4), nb.parallel("j", 4)
    assert str(2 * i + j + 1) == "2*i + j + 1"
    assert str((i + 1) * j) == "(i + 1) * j"


# ------------------------------------------------------------------ fuse_nests


def chain(m: int, n: int, k: int) -> list[Nest]:
    """T = A·B; U = gelu(T + bias); C = U + R, as three nests."""
    mm = Nest("mm")
    i, j, kk = mm.parallel("i", m), mm.parallel("j", n), mm.reduction("k", k)
    a, b, t = (
        mm.buffer("A", "f32", (m, k)),
        mm.buffer("B", "f32", (k, n)),
        mm.buffer("T", "f32", (m, n)),
    )
    mm.store(t[i, j], mm.sum(a[i, kk] * b[kk, j]))
    act = Nest("act")
    r, c = act.parallel("r", m), act.parallel("c", n)
    t2, bias, u = (
        act.buffer("T", "f32", (m, n)),
        act.buffer("bias", "f32", (n,)),
        act.buffer("U", "f32", (m, n)),
    )
    act.store(u[r, c], Nest.gelu(t2[r, c] + bias[c]))
    res = Nest("res")
    i, j = res.parallel("i", m), res.parallel("j", n)
    u2, rr, out = (
        res.buffer("U", "f32", (m, n)),
        res.buffer("R", "f32", (m, n)),
        res.buffer("C", "f32", (m, n)),
    )
    res.store(out[i, j], u2[i, j] + rr[i, j])
    return [mm, act, res]


def test_fuse_nests_into_one_contraction() -> None:
    m, n, k = 27, 40, 13
    seen: list[str] = []

    def measure(module: Any, name: str) -> tuple[int, int]:
        # gelu's `1 + tanh(v)` lowers as 2·rsqrt(1 + exp(-2v))² (nest_tile::lower)
        assert isinstance(module, zyntax.hir.Module) and "rsqrt" in module.to_zir()
        seen.append(name)
        return (64, 4096)

    f = fuse_nests(chain(m, n, k), ["T", "U"], measure=measure)
    assert len(f.nests) == 1 and f.members == [["mm", "act", "res"]], f.report
    assert all(d["fused"] for d in f.decisions) and len(seen) == 2
    assert "64 registers" in f.report
    assert [b["name"] for b in f.nests[0]["buffers"]] == ["A", "B", "bias", "R", "C"]
    (nt,) = f.lower()
    assert nt.kind == "contraction" and "epilogue" in nt.report, nt.report
    a, b, bias, r, c = rand(m, k), rand(k, n), rand(n), rand(m, n), nan(m, n)
    nt.run_interp(a, b, bias, r, c)
    a6, b6, bias6, r6 = f64(a, b, bias, r)
    np.testing.assert_allclose(c, gelu64(a6 @ b6 + bias6) + r6, rtol=1e-5, atol=1e-5)


def test_fuse_nests_refusals() -> None:
    f = fuse_nests(chain(8, 8, 8), ["U"], measure=False)  # T is read after the sequence
    assert len(f.nests) == 2 and f.decisions[0]["rule"] == "live_out", f.report
    f = fuse_nests(chain(8, 8, 8), ["T", "U"], measure=lambda module, name: (300, 0))
    assert len(f.nests) == 3, f.report
    assert {d["rule"] for d in f.decisions} == {"registers"}
    assert "300 registers" in f.report


def test_fuse_nests_misuse() -> None:
    def boom(module: Any, name: str) -> Any:
        raise RuntimeError("measure failed")

    with pytest.raises(RuntimeError, match="measure failed"):
        fuse_nests(chain(8, 8, 8), ["T", "U"], measure=boom)
    with pytest.raises(zyntax.ArgumentError, match="must return"):
        fuse_nests(chain(8, 8, 8), ["T", "U"], measure=lambda module, name: "many")
    specs: list[Any] = [n.spec() for n in chain(8, 8, 8)]
    specs[1]["loops"][0]["kind"] = "serial"
    with pytest.raises(zyntax.ArgumentError, match=r"specs\[1\]"):
        fuse_nests(specs, ["T"], measure=False)


def test_builder_prologue_and_its_fusion() -> None:
    """C = Σ_k exp(A[i,k]/2)·B[k,j] (a prologue on a factor, ragged K), and a
    map X2 = gelu(X) fused into X2·W as the prologue by fuse_nests."""
    m, n, k = 20, 30, 13
    nb = Nest("pro")
    i, j, kk = nb.parallel("i", m), nb.parallel("j", n), nb.reduction("k", k)
    a, b, c = (
        nb.buffer("A", "f32", (m, k)),
        nb.buffer("B", "f32", (k, n)),
        nb.buffer("C", "f32", (m, n)),
    )
    nb.store(c[i, j], nb.sum(Nest.unary("exp", a[i, kk] / 2.0) * b[kk, j]))
    nt = nb.lower()
    assert nt.kind == "contraction" and "prologue" in nt.report, nt.report
    xa, xb, xc = rand(m, k), rand(k, n), nan(m, n)
    nt.run_interp(xa, xb, xc)
    a6, b6 = f64(xa, xb)
    np.testing.assert_allclose(xc, np.exp(a6 / 2.0) @ b6, rtol=1e-5, atol=1e-5)

    act = Nest("act")
    r, q = act.parallel("r", m), act.parallel("q", k)
    x, x2 = act.buffer("X", "f32", (m, k)), act.buffer("X2", "f32", (m, k))
    act.store(x2[r, q], Nest.gelu(x[r, q]))
    mm = Nest("mm")
    i, j, kk = mm.parallel("i", m), mm.parallel("j", n), mm.reduction("k", k)
    x2b, w, t = (
        mm.buffer("X2", "f32", (m, k)),
        mm.buffer("W", "f32", (k, n)),
        mm.buffer("T", "f32", (m, n)),
    )
    mm.store(t[i, j], mm.sum(x2b[i, kk] * w[kk, j]))
    f = fuse_nests([act, mm], ["X2"], measure=False)
    assert len(f.nests) == 1 and "prologue" in f.report, f.report
    (fused,) = f.lower()
    assert [bb[0] for bb in fused.buffers] == ["W", "T", "X"]
    xx, ww, tt = rand(m, k), rand(k, n), nan(m, n)
    fused.run_interp(ww, tt, xx)
    x6, w6 = f64(xx, ww)
    np.testing.assert_allclose(tt, gelu64(x6) @ w6, rtol=1e-5, atol=1e-5)
