"""zyntax.kernels on the GPU with PyTorch tensors: memory-bound kernels and
attention against float64 references on fresh random inputs (odd sizes,
extreme values, rows of -inf, causal masks), outputs poisoned first, plus the
sizes the benches time and the typed errors for tensors on the wrong device.
The interpreter versions: tests/python/test_kernels_memory.py and
tests/python/test_kernels_attention.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from zyntax import ArgumentError, cuda, kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
F = torch.nn.functional
DEV = torch.device("cuda")
BF16, F32 = torch.bfloat16, torch.float32


def rel_err(out: Any, ref: Any) -> float:
    out64 = out.double()
    assert not torch.isnan(out64).any(), "NaN in the output (an element not written?)"
    return float((out64 - ref).norm() / ref.norm().clamp_min(1e-30))


def poisoned(shape: tuple[int, ...], dtype: Any) -> Any:
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize(
    "shape", [(7, 300), (3, 1), (64, 8192), (5, 32771), (2, 70000), (4, 3, 96)]
)
def test_softmax(dtype: Any, shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, device=DEV, dtype=dtype) * 5
    out = poisoned(shape, dtype)
    kernels.softmax(x, out=out)
    tol = 1e-5 if dtype == F32 else 1e-2
    assert rel_err(out, torch.softmax(x.double(), -1)) < tol
    assert kernels.softmax(x).dtype == dtype


def test_softmax_extremes_and_views() -> None:
    x = torch.randn(33, 1027, device=DEV) * 40 + 1e4
    x[3, ::2] = -math.inf
    x[4, 7] = 3e38
    out = poisoned(x.shape, F32)
    kernels.softmax(x, out=out)
    assert rel_err(out, torch.softmax(x.double(), -1)) < 1e-5
    assert torch.isnan(kernels.softmax(torch.full((2, 50), -math.inf, device=DEV))).all()
    xt = torch.randn(96, 40, device=DEV).t()  # column stride 40: the scalar path
    assert rel_err(kernels.softmax(xt), torch.softmax(xt.double(), -1)) < 1e-5


@pytest.mark.parametrize("n", [37, 1024, 8192, 40000])
def test_layer_norm_and_rms_norm(n: int) -> None:
    x = torch.randn(9, n, device=DEV, dtype=BF16) * 3 + 20
    w = torch.randn(n, device=DEV, dtype=BF16)
    b = torch.randn(n, device=DEV, dtype=BF16)
    out = poisoned(x.shape, BF16)
    kernels.layer_norm(x, w, b, 1e-5, out=out)
    x64 = x.double()
    assert rel_err(out, F.layer_norm(x64, (n,), w.double(), b.double(), 1e-5)) < 1e-2
    out = poisoned(x.shape, BF16)
    kernels.rms_norm(x, w, 1e-6, out=out)
    ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-6) * w.double()
    assert rel_err(out, ref) < 1e-2
    xf = torch.randn(5, n, device=DEV)
    wf, bf = torch.randn(n, device=DEV), torch.randn(n, device=DEV)
    ref = F.layer_norm(xf.double(), (n,), wf.double(), bf.double(), 1e-5)
    assert rel_err(kernels.layer_norm(xf, wf, bf), ref) < 1e-5


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_reductions(dtype: Any) -> None:
    for n in (1, 1001, 1 << 20, (1 << 24) + 3):
        x = torch.randn(n, device=DEV, dtype=dtype)
        x[n // 2] = 9.0
        s = kernels.reduce_sum(x)
        ref = x.double().sum()
        assert abs(float(s) - float(ref)) <= 1e-5 * float(x.double().abs().sum()) + 1e-6
        assert float(kernels.reduce_max(x)) == float(x.max())
    x = torch.randn(37, 5003, device=DEV, dtype=dtype)
    out = poisoned((37,), F32)
    kernels.reduce_sum(x, axis=-1, out=out)
    assert rel_err(out, x.double().sum(-1)) < 1e-5
    assert torch.equal(kernels.reduce_max(x, axis=-1), x.float().max(-1).values)
    xt = x.t()  # not contiguous: rows first, then their sums
    assert abs(float(kernels.reduce_sum(xt)) - float(x.double().sum())) < 1e-2


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("vocab", [11, 32000, 128256])
def test_cross_entropy(dtype: Any, vocab: int) -> None:
    rows = 65
    x = (torch.randn(rows, vocab, device=DEV) * 6).to(dtype)
    x[1, : vocab // 2] = -math.inf
    t = torch.randint(0, vocab, (rows,), device=DEV)
    t[1] = vocab - 1
    out = poisoned((rows,), F32)
    kernels.cross_entropy(x, t, out=out)
    ref = F.cross_entropy(x.double(), t, reduction="none")
    assert rel_err(out, ref) < 1e-5
    mean = kernels.cross_entropy(x, t.int(), reduction="mean")
    assert abs(float(mean) - float(ref.mean())) < 1e-4 * float(ref.mean().abs())


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_saxpy(dtype: Any) -> None:
    for n in (1, 37, 1 << 20, (1 << 22) + 5):
        x = torch.randn(n, device=DEV, dtype=dtype)
        y = torch.randn(n, device=DEV, dtype=dtype)
        ref = y.double() + 0.75 * x.double()
        kernels.saxpy(0.75, x, y)
        assert rel_err(y, ref) < (1e-6 if dtype == F32 else 1e-2)
    # An offset view: not 16-byte aligned, so the scalar path.
    base = torch.randn(1001, device=DEV)
    x, y = base[1:], torch.randn(1000, device=DEV)
    ref = y.double() + 2 * x.double()
    kernels.saxpy(2.0, x, y)
    assert rel_err(y, ref) < 1e-6


@pytest.mark.parametrize(
    "knobs",
    [
        {"GRID_STRIDE": True},
        {"CACHE": ("lu", "lu", "cs")},
        {"CACHE": ("evict_first", "evict_first", "evict_first")},
        {"UNROLL": 4},
        {"UNROLL": 1, "THREADS": 256},
    ],
)
def test_saxpy_variants(knobs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The launch shapes and cache operators benches/memory_bound.py times."""
    ew = __import__("zyntax.kernels.elementwise", fromlist=["CACHE"])
    for k, v in knobs.items():
        monkeypatch.setattr(ew, k, v)
    for n in (37, (1 << 22) + 5, 3 << 20):
        x = torch.randn(n, device=DEV)
        y = torch.randn(n, device=DEV)
        ref = y.double() + 0.75 * x.double()
        kernels.saxpy(0.75, x, y)
        assert rel_err(y, ref) < 1e-6


def test_device_array_and_errors() -> None:
    x = cuda.to_device(np.random.default_rng().standard_normal((4, 64)).astype(np.float32))
    out = kernels.softmax(x)
    assert isinstance(out, cuda.DeviceArray)
    e = np.exp(x.to_host().astype(np.float64))
    assert np.allclose(out.to_host(), e / e.sum(-1, keepdims=True), rtol=1e-5)
    with pytest.raises(ArgumentError, match="'x'"):
        kernels.softmax(torch.randn(3, 4))  # a CPU tensor
    with pytest.raises(ArgumentError, match="'weight'"):
        kernels.rms_norm(torch.randn(3, 4, device=DEV), np.ones(4, np.float32))
    with pytest.raises(ArgumentError, match="'k'"):
        q = torch.randn(1, 1, 8, 64, device=DEV, dtype=BF16)
        kernels.attention(q, q.half(), q)
    with pytest.raises(ArgumentError, match="head dim"):  # 96 runs (the tile program)
        q = torch.randn(1, 1, 8, 80, device=DEV, dtype=BF16)
        kernels.attention(q, q, q)


def ref_attention(q: Any, k: Any, v: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        sq, sk = s.shape[-2:]
        # aligned bottom-right (the tile program's convention for Sq != Sk)
        mask = torch.ones(sq, sk, dtype=torch.bool, device=DEV).tril(sk - sq)
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v.double(), lse


@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq_sk", [(1, 1), (100, 100), (257, 257), (64, 200), (1000, 1000)])
def test_attention(dtype: Any, d: int, causal: bool, sq_sk: tuple[int, int]) -> None:
    sq, sk = sq_sk
    q = torch.randn(2, 3, sq, d, device=DEV, dtype=dtype)
    k = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    v = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    scale = 1 / math.sqrt(d)
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True)
    ref, ref_lse = ref_attention(q, k, v, causal, scale)
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


def test_attention_large_logits_and_layouts() -> None:
    # (B, S, H, D) storage viewed as (B, H, S, D), as transformer code does.
    q = (torch.randn(1, 300, 4, 128, device=DEV, dtype=BF16) * 8).transpose(1, 2)
    k = (torch.randn(1, 300, 4, 128, device=DEV, dtype=BF16) * 8).transpose(1, 2)
    v = torch.randn(1, 4, 300, 128, device=DEV, dtype=BF16)
    out = kernels.attention(q, k, v, causal=True, scale=0.3)
    ref, _ = ref_attention(q, k, v, True, 0.3)
    assert rel_err(out, ref) < 2e-2


@pytest.mark.parametrize("case", [(4096, 128, False), (16384, 128, True), (16384, 64, False)])
def test_attention_bench_sizes(case: tuple[int, int, bool]) -> None:
    """The bench shapes, checked against PyTorch's SDPA (float64 is too big here)."""
    s, d, causal = case
    q, k, v = (torch.randn(1, 2, s, d, device=DEV, dtype=BF16) for _ in range(3))
    out = kernels.attention(q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    assert rel_err(out, ref.double()) < 1e-2


def test_runs_on_torch_current_stream() -> None:
    """PyTorch tensors launch on PyTorch's current stream, so work queued
    there before (the fill) and after (the read) is ordered with the kernel."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(512, 4096, device=DEV)
        x.mul_(3.0)
        out = kernels.softmax(x)
        total = out.double().sum(-1)
    s.synchronize()
    assert torch.allclose(total, torch.ones_like(total), atol=1e-5)
    assert rel_err(out, torch.softmax(x.double(), -1)) < 1e-5


def test_explicit_stream_and_cupy() -> None:
    """`stream=` orders the kernel on that stream; CuPy arrays come back as CuPy arrays."""
    s = cuda.Stream()
    x = torch.randn(64, 1000, device=DEV, dtype=BF16)
    w = torch.randn(1000, device=DEV, dtype=BF16)
    torch.cuda.synchronize()
    out = kernels.rms_norm(x, w, 1e-6, stream=s)
    s.synchronize()
    x64 = x.double()
    ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-6) * w.double()
    assert rel_err(out, ref) < 1e-2
    cp = pytest.importorskip("cupy")
    xc = cp.asarray(np.random.default_rng().standard_normal((33, 517)).astype(np.float32))
    got = kernels.softmax(xc)
    assert isinstance(got, cp.ndarray)
    e = np.exp(cp.asnumpy(xc).astype(np.float64))
    assert np.allclose(cp.asnumpy(got), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-9)
    lse = kernels.reduce_max(xc, axis=-1)
    assert np.array_equal(cp.asnumpy(lse), cp.asnumpy(xc).max(-1))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_reduce_max_propagates_nan_as_torch(dtype: Any) -> None:
    """torch.amax (and np.max) are NaN when any element is; the kernels'
    max dropped NaN (PTX max.f32 returns the other operand)."""
    for n in (1, 1001, (1 << 20) + 3):
        x = torch.randn(n, device=DEV, dtype=dtype)
        x[n // 3] = math.nan
        assert math.isnan(float(kernels.reduce_max(x)))
        x[n // 3] = math.inf
        assert float(kernels.reduce_max(x)) == math.inf
    x = torch.randn(37, 5003, device=DEV, dtype=dtype)
    x[::3, 4999] = math.nan  # in the tail after the last whole vector
    out = poisoned((37,), F32)
    kernels.reduce_max(x, axis=-1, out=out)
    assert torch.equal(out.isnan(), x.float().amax(-1).isnan())
    assert torch.equal(out.nan_to_num(), x.float().amax(-1).nan_to_num())


def test_cross_entropy_mean_of_no_rows_is_nan() -> None:
    x = torch.empty(0, 32000, device=DEV)
    t = torch.empty(0, dtype=torch.int64, device=DEV)
    assert torch.isnan(F.cross_entropy(x, t, reduction="mean"))  # what PyTorch gives
    out = torch.full((), 7.0, device=DEV)
    kernels.cross_entropy(x, t, reduction="mean", out=out)
    assert torch.isnan(out)
    assert torch.isnan(kernels.cross_entropy(x, t, reduction="mean"))


def test_bad_scalars_flags_and_streams_with_torch_tensors() -> None:
    x = torch.randn(3, 64, device=DEV)
    w = torch.ones(64, device=DEV)
    q = torch.randn(1, 1, 8, 64, device=DEV, dtype=BF16)
    for bad in (10**400, math.nan, 1e39, True, np.array([1e-5])):
        with pytest.raises(ArgumentError, match="'eps'"):
            kernels.rms_norm(x, w, bad)
        with pytest.raises(ArgumentError, match="'scale'"):
            kernels.attention(q, q, q, scale=bad)
    with pytest.raises(ArgumentError, match="'causal'"):
        kernels.attention(q, q, q, causal=torch.tensor([True, False]))
    with pytest.raises(ArgumentError, match="'stream'"):
        kernels.softmax(x, stream=torch.cuda.current_stream())
    with pytest.raises(ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.softmax(x, out=x)
    with pytest.raises(ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.reduce_sum(x, axis=-1, out=x[0, :3])
    a = torch.randn(64, 32, device=DEV, dtype=BF16)
    b = torch.randn(32, 16, device=DEV, dtype=BF16)
    out = torch.empty(64, 16, device=DEV, dtype=BF16)
    kernels.matmul(a, b, out)  # a cached plan for this signature
    with pytest.raises(ArgumentError, match="'activation'"):
        kernels.matmul(a, b, out, activation=["relu"])  # unhashable: past the plan cache
    with pytest.raises(ArgumentError, match=r"'scale_a'.*fp8"):
        kernels.matmul(a, b, out, scale_a=2.0, scale_b=2.0)
