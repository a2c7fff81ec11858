"""zyntax.tiling.nest_to_tile on the GPU: the nests of
tests/python/test_nest_tile.py at larger sizes, launched through zyntax.cuda
with device arrays, against float64 numpy on fresh random inputs with outputs
poisoned (NaN) first."""

from __future__ import annotations

import numpy as np
import pytest

from test_nest_tile import fused_spec, gelu64, map_spec, matmul_spec, nan, rand  # the CPU suite's
from zyntax.tiling import nest_to_tile

SIZES = [(1000, 1000, 512), (257, 129, 300)]


@pytest.fixture(scope="module")
def cuda():  # type: ignore[no-untyped-def]
    from zyntax import cuda

    return cuda


@pytest.mark.parametrize(("m", "n", "k"), SIZES)
@pytest.mark.parametrize("a_transposed", [False, True])
def test_matmul_gpu(cuda, m: int, n: int, k: int, a_transposed: bool) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(matmul_spec(m, n, k, a_transposed=a_transposed), arch=cuda.device_arch())
    assert nt.kind == "contraction", nt.report
    a = rand(k, m) if a_transposed else rand(m, k)
    b = rand(k, n)
    dc = cuda.to_device(nan(m, n))
    nt.launch(cuda.to_device(a), cuda.to_device(b), dc)
    a64 = (a.T if a_transposed else a).astype(np.float64)
    want = a64 @ b.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize(("m", "n", "k"), SIZES)
def test_matmul_bias_gelu_residual_gpu(cuda, m: int, n: int, k: int) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(fused_spec(m, n, k), arch=cuda.device_arch())
    assert nt.kind == "contraction", nt.report
    a, b, bias, r = rand(m, k), rand(k, n), rand(n), rand(m, n)
    dc = cuda.to_device(nan(m, n))
    ins = [cuda.to_device(x) for x in (a, b)]
    nt.launch(*ins, dc, cuda.to_device(bias), cuda.to_device(r))
    acc = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    want = gelu64(acc) + r.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * k)


@pytest.mark.parametrize(("m", "n"), [(1000, 1000), (257, 129)])
def test_map_with_tails_gpu(cuda, m: int, n: int) -> None:  # type: ignore[no-untyped-def]
    nt = nest_to_tile(map_spec(m, n), arch=cuda.device_arch())
    assert nt.kind == "map", nt.report
    x, bias = rand(m, n), rand(n)
    dy = cuda.to_device(nan(m, n))
    nt.launch(cuda.to_device(x), cuda.to_device(bias), dy)
    want = np.exp(x.astype(np.float64)) * 0.5 + bias.astype(np.float64)
    np.testing.assert_allclose(dy.to_host(), want, rtol=1e-5, atol=1e-6)


def _as_dtype(spec: dict, dtype: str) -> dict:  # type: ignore[type-arg]
    for b in spec["buffers"]:
        b["dtype"] = dtype
    return spec


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize(("m", "n", "k"), [(512, 384, 256), (257, 129, 300)])
def test_half_matmul_on_tensor_cores_gpu(cuda, dtype: str, m: int, n: int, k: int) -> None:  # type: ignore[no-untyped-def]
    """bf16/f16 operands take mma.sync; torch tensors (bf16 has no array
    interface) through NestTile.launch and prepare."""
    torch = pytest.importorskip("torch")
    nt = nest_to_tile(_as_dtype(matmul_spec(m, n, k), dtype), arch=cuda.device_arch())
    assert nt.kind == "contraction" and "mma.sync" in nt.report, nt.report
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    a = torch.from_numpy(rand(m, k)).to("cuda", tdt)
    b = torch.from_numpy(rand(k, n)).to("cuda", tdt)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
    want = a.double() @ b.double()
    nt.launch(a, b, c)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.double().cpu().numpy(), want.cpu().numpy(), rtol=2e-2, atol=2e-2)
    c.fill_(float("nan"))
    call = nt.prepare(a, b, c)
    call()
    call()
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.double().cpu().numpy(), want.cpu().numpy(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(("m", "n", "k"), [(1000, 1016, 520), (2048, 2048, 1024)])
def test_bf16_matmul_warp_specialised_gpu(cuda, m: int, n: int, k: int) -> None:  # type: ignore[no-untyped-def]
    """On sm_90a a bf16 nest with TMA-loadable operands takes the
    warp-specialised persistent pipeline (tensor maps built at launch, about
    one CTA per SM), its output stored through TMA (rows of 2032 / 4096
    bytes): tails in M, K of 520 (9 steps, the ring wraps)."""
    torch = pytest.importorskip("torch")
    arch = cuda.device_arch()
    nt = nest_to_tile(_as_dtype(matmul_spec(m, n, k), "bf16"), arch=arch)
    assert nt.kind == "contraction", nt.report
    if arch == "sm_90a":
        # ping-pong sets ("x 2 sets") keep register stores (docs/tile.md,
        # "Known problems"); the others store through TMA
        maps = 2 if "x 2 sets" in nt.pipeline else 3
        assert len(nt.kernel.tensor_maps) == maps and nt.kernel.persistent, nt.pipeline
    a = torch.from_numpy(rand(m, k)).to("cuda", torch.bfloat16)
    b = torch.from_numpy(rand(k, n)).to("cuda", torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    want = (a.double() @ b.double()).cpu().numpy()
    call = nt.prepare(a, b, c)
    call()
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=2e-2)
    c.fill_(float("nan"))
    nt.launch(a, b, c)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=2e-2)


def test_fused_bf16_epilogue_warp_specialised_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """gelu(A·B + bias) + R in bf16 at a size the WS pipeline takes on
    sm_90a: the epilogue computed in the consumers' registers (its bias and
    residual loaded in the accumulator's layout), the output stored through
    shared memory and TMA (the default since session 14), tails in M."""
    torch = pytest.importorskip("torch")
    m, n, k = 1000, 1016, 520
    arch = cuda.device_arch()
    nt = nest_to_tile(_as_dtype(fused_spec(m, n, k), "bf16"), arch=arch)
    if arch == "sm_90a":
        assert len(nt.kernel.tensor_maps) == 3 and nt.kernel.persistent, nt.pipeline
    a, b, bias, r = (
        torch.from_numpy(x).to("cuda", torch.bfloat16)
        for x in (rand(m, k), rand(k, n), rand(n), rand(m, n))
    )
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nt.prepare(a, b, c, bias, r)()
    torch.cuda.synchronize()
    acc = (a.double() @ b.double() + bias.double()).cpu().numpy()
    want = gelu64(acc) + r.double().cpu().numpy()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=3e-2)


def test_fused_bf16_epilogue_plain_stores_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """The fused nest on the WS schedule a fused epilogue takes (128x128 over
    8 warps) with plain (masked) stores, asked for (Schedule.tma_store off;
    the default stores through TMA), tails in M and N."""
    torch = pytest.importorskip("torch")
    from zyntax import tile

    arch = cuda.device_arch()
    if arch != "sm_90a":
        pytest.skip(f"the warp-specialised pipeline needs sm_90a, not {arch}")
    m, n, k = 1000, 1016, 512
    sched = tile.Schedule(
        (128, 128),
        k=64,
        warps=8,
        stages=4,
        arch=arch,
        warp_specialize=True,
        persistent=True,
        tma_store=False,
    )
    nt = nest_to_tile(_as_dtype(fused_spec(m, n, k), "bf16"), arch=arch, schedule=sched)
    assert len(nt.kernel.tensor_maps) == 2, nt.pipeline
    a, b, bias, r = (
        torch.from_numpy(x).to("cuda", torch.bfloat16)
        for x in (rand(m, k), rand(k, n), rand(n), rand(m, n))
    )
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nt.prepare(a, b, c, bias, r)()
    torch.cuda.synchronize()
    acc = (a.double() @ b.double() + bias.double()).cpu().numpy()
    want = gelu64(acc) + r.double().cpu().numpy()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=3e-2)


def test_fused_bf16_epilogue_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """gelu(A·B + bias) + R, bf16 everywhere, the epilogue in f32 registers."""
    torch = pytest.importorskip("torch")
    m, n, k = 300, 260, 200
    nt = nest_to_tile(_as_dtype(fused_spec(m, n, k), "bf16"), arch=cuda.device_arch())
    a, b, bias, r = (
        torch.from_numpy(x).to("cuda", torch.bfloat16)
        for x in (rand(m, k), rand(k, n), rand(n), rand(m, n))
    )
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nt.launch(a, b, c, bias, r)
    torch.cuda.synchronize()
    acc = (a.double() @ b.double() + bias.double()).cpu().numpy()
    want = gelu64(acc) + r.double().cpu().numpy()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=3e-2)


def test_prepare_rejects_wrong_buffers_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    import zyntax

    nt = nest_to_tile(matmul_spec(64, 64, 32), arch=cuda.device_arch())
    a, b = cuda.to_device(rand(64, 32)), cuda.to_device(rand(32, 64))
    with pytest.raises(zyntax.ArgumentError, match="buffer 'C'"):
        nt.prepare(a, b, cuda.to_device(nan(64, 65)))
    with pytest.raises(zyntax.ArgumentError, match="device"):
        nt.prepare(a, b, cuda.to_device(nan(64, 64)), device=-1)


def test_launch_prange_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """A prange matmul goes through the core's tile program; a prange kernel
    the core does not take (a branch) through the kernel's own lowering."""
    from test_nest_builder import branchy_kernel, load_example
    from zyntax.tiling import launch_prange

    m, n, k = 300, 257, 129
    a, b = rand(m, k), rand(k, n)
    dc = cuda.to_device(nan(m, n))
    kn = launch_prange(load_example().mm, cuda.to_device(a), cuda.to_device(b), dc)
    assert kn.tile.kind == "contraction", kn.report
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(dc.to_host(), want, rtol=1e-4, atol=1e-5 * k)
    x = rand(40, 70)
    dy = cuda.to_device(np.zeros((40, 70), np.float32))
    kn = launch_prange(branchy_kernel, cuda.to_device(x), dy)
    assert kn.tile.refusal == "NotANest", kn.report
    cuda.synchronize()
    np.testing.assert_array_equal(dy.to_host(), np.where(x > 0, x, 0.0).astype(np.float32))


def test_fused_nests_on_the_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """matmul -> bias+gelu -> residual fused by the core into one kernel,
    measured by ptxas, run in bf16 over torch tensors."""
    torch = pytest.importorskip("torch")
    from test_nest_builder import chain
    from zyntax.tiling import fuse_nests

    m, n, k = 384, 320, 200
    nests = chain(m, n, k)
    specs = [_as_dtype(x.spec(), "bf16") for x in nests]
    f = fuse_nests(specs, ["T", "U"], arch=cuda.device_arch())
    assert len(f.nests) == 1 and "ptxas" in f.report, f.report
    (nt,) = f.lower(arch=cuda.device_arch())
    assert nt.kind == "contraction", nt.report
    a, b, bias, r = (
        torch.from_numpy(x).to("cuda", torch.bfloat16)
        for x in (rand(m, k), rand(k, n), rand(n), rand(m, n))
    )
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nt.launch(a, b, bias, r, c)
    torch.cuda.synchronize()
    acc = (a.double() @ b.double() + bias.double()).cpu().numpy()
    want = gelu64(acc) + r.double().cpu().numpy()
    np.testing.assert_allclose(c.double().cpu().numpy(), want, rtol=2e-2, atol=3e-2)


def test_prologue_bf16_gpu(cuda) -> None:  # type: ignore[no-untyped-def]
    """C = Σ_k gelu(A[i,k]) · B[k,j] with a ragged K: the prologue runs on
    each loaded tile (mma.sync: not the plain wgmma loop)."""
    torch = pytest.importorskip("torch")
    from zyntax.tiling import Nest

    m, n, k = 300, 200, 130
    nb = Nest("prologue")
    i, j, kk = nb.parallel("i", m), nb.parallel("j", n), nb.reduction("k", k)
    a, b = nb.buffer("A", "bf16", (m, k)), nb.buffer("B", "bf16", (k, n))
    c = nb.buffer("C", "f32", (m, n))
    nb.store(c[i, j], nb.sum(Nest.gelu(a[i, kk]) * b[kk, j]))
    nt = nb.lower(arch=cuda.device_arch())
    assert nt.kind == "contraction" and "prologue" in nt.report, nt.report
    ta = torch.from_numpy(rand(m, k)).to("cuda", torch.bfloat16)
    tb = torch.from_numpy(rand(k, n)).to("cuda", torch.bfloat16)
    tc = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    nt.launch(ta, tb, tc)
    torch.cuda.synchronize()
    ga = gelu64(ta.double().cpu().numpy())
    want = ga @ tb.double().cpu().numpy()
    np.testing.assert_allclose(tc.double().cpu().numpy(), want, rtol=2e-2, atol=2e-2)
