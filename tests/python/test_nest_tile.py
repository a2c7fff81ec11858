"""zyntax.tiling.nest_to_tile: loop nests described from Python, recognised
and lowered to tile programs by the Rust core (zyntax_opt::nest_tile), run on
the reference interpreter against float64 numpy on fresh random inputs with
outputs poisoned (NaN) first; refusals carry the core's reason; malformed
descriptions are ArgumentErrors naming the field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import tile
from zyntax.nest_tile import _DeviceWindow
from zyntax.tiling import (
    NestTile,
    NestViewArg,
    load,
    nest_tiling_report,
    nest_to_tile,
)

SEED = np.random.SeedSequence().entropy
print(f"test_nest_tile seed {SEED}")
RNG = np.random.default_rng(SEED)

ROW, COL, RED = 0, 1, 2  # loop positions of the matmul nests (i, j, k)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32)


def un(op: str, a: Any) -> tuple[Any, ...]:
    return ("unary", op, a)


def bin(op: str, a: Any, b: Any) -> tuple[Any, ...]:
    return ("binary", op, a, b)


def const(x: float) -> tuple[Any, ...]:
    return ("const", x)


def buf(name: str, *shape: int, dtype: str = "f32") -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "shape": list(shape)}


def matmul_spec(m: int, n: int, k: int, *, a_transposed: bool = False) -> dict[str, Any]:
    """``C[i,j] = Σ_k A[i,k]·B[k,j]`` (A stored as ``[k, m]`` when transposed)."""
    a = buf("A", k, m) if a_transposed else buf("A", m, k)
    a_ik = load(0, RED, ROW) if a_transposed else load(0, ROW, RED)
    return {
        "name": "matmul",
        "loops": [
            {"name": "i", "extent": m, "kind": "parallel"},
            {"name": "j", "extent": n, "kind": "parallel"},
            {"name": "k", "extent": k, "kind": "reduction"},
        ],
        "buffers": [a, buf("B", k, n), buf("C", m, n)],
        "output": (2, [("affine", [(ROW, 1)], 0), ("affine", [(COL, 1)], 0)]),
        "value": bin("mul", a_ik, load(1, RED, COL)),
    }


def gelu(x: Any) -> Any:
    """The tanh approximation, ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``."""
    cube = bin("mul", x, bin("mul", x, x))
    inner = bin("mul", const(0.7978845608028654), bin("add", x, bin("mul", const(0.044715), cube)))
    return bin("mul", bin("mul", const(0.5), x), bin("add", const(1.0), un("tanh", inner)))


def gelu64(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def fused_spec(m: int, n: int, k: int) -> dict[str, Any]:
    """``C = gelu(A·B + bias[j]) + R[i,j]``."""
    spec = matmul_spec(m, n, k)
    spec["name"] = "matmul_bias_gelu_residual"
    spec["buffers"] += [buf("bias", n), buf("R", m, n)]
    spec["epilogue"] = bin("add", gelu(bin("add", ("reduced",), load(3, COL))), load(4, ROW, COL))
    return spec


def map_spec(m: int, n: int) -> dict[str, Any]:
    """``y[i,j] = exp(x[i,j])·0.5 + b[j]`` (a broadcast of b along i)."""
    return {
        "name": "map",
        "loops": [
            {"name": "i", "extent": m, "kind": "parallel"},
            {"name": "j", "extent": n, "kind": "parallel"},
        ],
        "buffers": [buf("x", m, n), buf("b", n), buf("y", m, n)],
        "output": (2, [("affine", [(0, 1)], 0), ("affine", [(1, 1)], 0)]),
        "value": bin("add", bin("mul", un("exp", load(0, 0, 1)), const(0.5)), load(1, 1)),
    }


def run(spec: dict[str, Any], *buffers: np.ndarray) -> NestTile:
    nt = nest_to_tile(spec)
    assert nt.kernel is not None, nt.report
    assert isinstance(nt.kernel, tile.Kernel)
    assert nt.report == nest_tiling_report(spec)
    nt.run_interp(*buffers)
    return nt


@pytest.mark.parametrize(("m", "n", "k"), [(17, 33, 9), (64, 48, 40)])
@pytest.mark.parametrize("a_transposed", [False, True])
def test_matmul(m: int, n: int, k: int, a_transposed: bool) -> None:
    a = rand(k, m) if a_transposed else rand(m, k)
    b, c = rand(k, n), nan(m, n)
    nt = run(matmul_spec(m, n, k, a_transposed=a_transposed), a, b, c)
    assert nt.kind == "contraction"
    assert "contraction over (i, j)" in nt.report and "reducing k" in nt.report
    a64 = (a.T if a_transposed else a).astype(np.float64)
    want = a64 @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-6 * k)


def test_half_matmul_on_sm90a_takes_the_warp_specialised_pipeline() -> None:
    """f16 operands on sm_90a with TMA-loadable views: the warp-specialised
    persistent pipeline (the tile ws_heuristic picks for 1 SM: 64x128, 6
    stages), run on the interpreter's TMA: a tail in N, K of 7 steps wraps
    the ring, the interpreter's CTAs walk the 1x2 instances; the f32 output
    (rows of 544 bytes) is stored through TMA too, which clips the tail."""
    m, n, k = 64, 136, 448
    spec = matmul_spec(m, n, k)
    for b in spec["buffers"][:2]:
        b["dtype"] = "f16"
    nt = nest_to_tile(spec, arch="sm_90a", sms=1)
    assert nt.kernel is not None, nt.report
    assert len(nt.kernel.tensor_maps) == 3 and nt.kernel.persistent, nt.pipeline
    assert nt.pipeline.startswith("warp-specialised TMA pipeline (64x128"), nt.pipeline
    assert nt.pipeline.endswith("output stored through TMA)"), nt.pipeline
    a, b, c = rand(m, k).astype(np.float16), rand(k, n).astype(np.float16), nan(m, n)
    nt.run_interp(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    # Rows of 447 f16 are not 16-byte aligned: TMA cannot load them, and
    # the report says so (the cp.async wgmma pipeline runs instead).
    spec = matmul_spec(m, n, k - 1)
    for b in spec["buffers"][:2]:
        b["dtype"] = "f16"
    nt = nest_to_tile(spec, arch="sm_90a", sms=1)
    assert not nt.kernel.tensor_maps and "16-byte aligned" in nt.pipeline, nt.pipeline
    assert nest_to_tile(spec).pipeline.startswith("mma.sync")  # sm_80
    with pytest.raises(zyntax.ArgumentError, match="sms"):
        nest_to_tile(spec, arch="sm_90a", sms=0)


@pytest.mark.parametrize("fused", [False, True])
def test_warp_specialised_nest_assembles_without_spills(fused: bool) -> None:
    """The bench's bf16 4096^3 nests (the matmul, and with bias + gelu +
    residual computed in the consumers' registers) on the WS pipeline go
    through ptxas for sm_90a with TMA, mbarriers and wgmma, no spills (the
    fused one on 128x128 over 8 warps: at 128x256 it spilled 776 bytes)."""
    from zyntax import ptxinfo

    spec = fused_spec(4096, 4096, 4096) if fused else matmul_spec(4096, 4096, 4096)
    for b in spec["buffers"]:
        b["dtype"] = "bf16"
    nt = nest_to_tile(spec, arch="sm_90a")
    # With an epilogue 128x128 over 8 warps (64 accumulators a thread).
    tile = "(128x128, K step 64, 8" if fused else "(128x256"
    assert nt.pipeline.startswith(f"warp-specialised TMA pipeline {tile}"), nt.pipeline
    ptx = zyntax.compile(nt.kernel.module, backend="nvptx", arch="sm_90a")
    for needle in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "wgmma.mma_async"):
        assert needle in ptx, needle
    r = ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, "sm_90a").log)[nt.kernel.name]
    assert r["spill_store_bytes"] == 0 and r["stack_bytes"] == 0, r


@pytest.mark.parametrize(("m", "n", "k"), [(17, 33, 9), (64, 48, 40)])
def test_matmul_bias_gelu_residual(m: int, n: int, k: int) -> None:
    a, b, bias, r, c = rand(m, k), rand(k, n), rand(n), rand(m, n), nan(m, n)
    nt = run(fused_spec(m, n, k), a, b, c, bias, r)
    assert nt.kind == "contraction" and "epilogue" in nt.report
    acc = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    want = gelu64(acc) + r.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-6 * k)


def test_accumulate_into_the_output() -> None:
    """``C[i,j] += Σ_k A[i,k]·B[k,j]``: the epilogue reads the output."""
    m, n, k = 23, 41, 19
    spec = matmul_spec(m, n, k)
    spec["epilogue"] = bin("add", ("reduced",), load(2, ROW, COL))
    a, b, c = rand(m, k), rand(k, n), rand(m, n)
    c0 = c.astype(np.float64)
    run(spec, a, b, c)
    want = c0 + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-6 * k)


def test_row_sum_takes_the_reduction_path() -> None:
    """``y[i] = Σ_j exp(x[i,j])``: not a dot, a tile reduce over a tail."""
    m, n = 19, 300
    spec = {
        "name": "rowsum",
        "loops": [
            {"name": "i", "extent": m, "kind": "parallel"},
            {"name": "j", "extent": n, "kind": "reduction"},
        ],
        "buffers": [buf("x", m, n), buf("y", m, 1)],
        "output": (1, [("affine", [(0, 1)], 0), ("affine", [], 0)]),
        "value": un("exp", load(0, 0, 1)),
    }
    x, y = rand(m, n), nan(m, 1)
    nt = run(spec, x, y)
    assert nt.kind == "reduction", nt.report
    want = np.exp(x.astype(np.float64)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize(("m", "n"), [(37, 70), (1, 129), (16, 64)])
def test_map_with_tails(m: int, n: int) -> None:
    x, bias, y = rand(m, n), rand(n), nan(m, n)
    nt = run(map_spec(m, n), x, bias, y)
    assert nt.kind == "map" and "map over (i, j)" in nt.report
    want = np.exp(x.astype(np.float64)) * 0.5 + bias.astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)


def test_strided_map_reads_every_other_element() -> None:
    """``y[i] = x[2·i + 1]``: a strided affine access with a constant."""
    n = 1500
    spec = {
        "name": "odd",
        "loops": [{"name": "i", "extent": n, "kind": "parallel"}],
        "buffers": [buf("x", 2 * n), buf("y", n)],
        "output": (1, [("affine", [(0, 1)], 0)]),
        "value": ("load", 0, [("affine", [(0, 2)], 1)]),
    }
    x, y = rand(2 * n), nan(n)
    run(spec, x, y)
    np.testing.assert_array_equal(y, x[1::2])


def test_refusal_gives_the_reason() -> None:
    spec = map_spec(8, 8)
    spec["value"] = ("load", 0, [("opaque", "idx[i]"), ("affine", [(1, 1)], 0)])
    nt = nest_to_tile(spec)
    assert nt.kernel is None and nt.refusal == "NonAffineIndex"
    assert nt.reason is not None and "idx[i]" in nt.reason
    assert "not tiled (NonAffineIndex)" in nt.report and "idx[i]" in nt.report
    assert nt.report == nest_tiling_report(spec)
    with pytest.raises(zyntax.BuildError, match="not lowered"):
        nt.run_interp(nan(8, 8), nan(8), nan(8, 8))


def test_refusal_of_a_loop_carried_dependence() -> None:
    """``y[0] = x[i]`` for every i: iterations write the same element."""
    spec = map_spec(8, 8)
    spec["output"] = (2, [("affine", [], 0), ("affine", [(1, 1)], 0)])
    nt = nest_to_tile(spec)
    assert nt.refusal == "LoopCarriedDependence", nt.report


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s.pop("loops"), "missing key 'loops'"),
        (lambda s: s["loops"][0].update(extent="8"), r"spec\.loops\[0\]\.extent"),
        (lambda s: s["loops"][1].update(kind="serial"), r"spec\.loops\[1\]\.kind"),
        (lambda s: s["buffers"][1].update(dtype="f33"), r"spec\.buffers\[1\]\.dtype"),
        (lambda s: s["buffers"][0].update(shape=[8, -1]), r"spec\.buffers\[0\]\.shape\[1\]"),
        (lambda s: s.update(value=("unary", "erf", load(0, 0, 1))), r"spec\.value\[1\]"),
        (lambda s: s.update(value=("load", 0)), r"spec\.value"),
        (lambda s: s.update(value=("const", "1")), r"spec\.value\[1\]"),
        (lambda s: s.update(value=("gather", 0)), "expression kind"),
        (lambda s: s.update(output=(2, [("affine", [(0, 1.5)], 0)])), r"spec\.output\.index\[0\]"),
        (lambda s: s.update(loops="ij"), r"spec\.loops"),
        (lambda s: s.update(epilog=("reduced",)), "unknown key 'epilog'"),
        (lambda s: s["loops"][0].update(size=8), r"spec\.loops\[0\]': unknown key 'size'"),
    ],
)
def test_malformed_spec_is_an_argument_error(edit: Any, field: str) -> None:
    spec = map_spec(8, 8)
    edit(spec)
    with pytest.raises(zyntax.ArgumentError, match=field):
        nest_to_tile(spec)


def test_wrong_buffers_are_argument_errors() -> None:
    nt = nest_to_tile(map_spec(8, 8))
    with pytest.raises(zyntax.ArgumentError, match="takes 3 buffers"):
        nt.run_interp(nan(8, 8), nan(8))
    with pytest.raises(zyntax.ArgumentError, match="buffer 'b'"):
        nt.run_interp(nan(8, 8), nan(9), nan(8, 8))
    with pytest.raises(zyntax.ArgumentError, match="buffer 'x'"):
        nt.run_interp(nan(8, 8).astype(np.float64), nan(8), nan(8, 8))


def test_device_window_of_a_view() -> None:
    """The GPU path's view of a device buffer: its pointer moved by the
    view's offset, its strides in bytes, the producer's stream kept."""

    class Fake:
        __cuda_array_interface__ = {  # noqa: RUF012
            "shape": (4, 5),
            "typestr": "<f4",
            "data": (4096, False),
            "strides": None,
            "version": 3,
            "stream": 7,
        }

    w = _DeviceWindow(Fake(), NestViewArg(buffer=0, offset=3, extents=(2, 6), strides=(0, 1)))
    cai = w.__cuda_array_interface__
    assert cai["data"] == (4096 + 3 * 4, False)
    assert cai["shape"] == (2, 6) and cai["strides"] == (0, 4)
    assert cai["typestr"] == "<f4" and cai["stream"] == 7
