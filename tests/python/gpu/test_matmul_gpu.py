"""zyntax.kernels.matmul on the GPU: every variant, dtype and layout against
float64 on fresh random inputs, odd sizes, epilogues, outputs poisoned first.
Skipped without an NVIDIA GPU (conftest marks everything under tests/python/gpu)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax.kernels.gemm as zk
from zyntax import cuda

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()
GELU_C = 0.7978845608028654
TOL = {"bf16": 1e-2, "f16": 1e-3, "f32": 1e-5, "tf32": 1e-3}


def reference(a: Any, b: Any, bias: Any = None, activation: str | None = None) -> Any:
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    if bias is not None:
        ref = ref + np.asarray(bias, np.float64)
    if activation == "relu":
        ref = np.maximum(ref, 0.0)
    elif activation == "gelu":
        ref = 0.5 * ref * (1.0 + np.tanh(GELU_C * (ref + 0.044715 * ref**3)))
    return ref


def rel_err(out: Any, ref: Any) -> float:
    out = np.asarray(out, np.float64)
    assert not np.isnan(out).any(), "an output element was never written"
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def torch_or_skip() -> Any:
    return pytest.importorskip("torch")


def torch_operands(
    torch: Any, m: int, n: int, k: int, dt: Any, la: str, lb: str
) -> tuple[Any, Any]:
    a = torch.randn(m, k, device="cuda").to(dt)
    b = torch.randn(k, n, device="cuda").to(dt)
    if la == "col":
        a = a.t().contiguous().t()
    if lb == "col":
        b = b.t().contiguous().t()
    return a, b


SIZES = [(1, 1, 1), (17, 17, 17), (1000, 1000, 1000), (4097, 257, 1031), (129, 4097, 64)]
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]


@pytest.mark.parametrize("variant", ["mma_sync", None])
@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SIZES)
@pytest.mark.parametrize("name", ["bf16", "f16"])
def test_half_inputs_torch(
    name: str, m: int, n: int, k: int, la: str, lb: str, variant: str | None
) -> None:
    torch = torch_or_skip()
    dt = torch.bfloat16 if name == "bf16" else torch.float16
    a, b = torch_operands(torch, m, n, k, dt, la, lb)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    got = zk.matmul(a, b, out, variant=variant)
    assert got is out
    torch.cuda.synchronize()
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy())
    assert rel_err(out.cpu().numpy(), ref) < TOL[name]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SIZES)
def test_f32_simt_device_arrays(m: int, n: int, k: int, la: str, lb: str) -> None:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    # Column-major operands: the transposed view of the transpose's device copy.
    da = (
        cuda.to_device(a) if la == "row" else _transposed(cuda.to_device(np.ascontiguousarray(a.T)))
    )
    db = (
        cuda.to_device(b) if lb == "row" else _transposed(cuda.to_device(np.ascontiguousarray(b.T)))
    )
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    zk.matmul(da, db, out, variant="simt")
    assert rel_err(out.to_host(), reference(a, b)) < TOL["f32"]


class _transposed:
    """The transpose of a row-major DeviceArray, as a strided CUDA array view."""

    def __init__(self, arr: Any) -> None:
        self.arr = arr
        r, c = arr.shape
        self.device = arr.device
        iface = dict(arr.__cuda_array_interface__)
        iface["shape"] = (c, r)
        iface["strides"] = (arr.itemsize, c * arr.itemsize)
        self.__cuda_array_interface__ = iface


def test_device_array_inputs_give_a_device_array() -> None:
    a = rng.standard_normal((100, 72)).astype(np.float16)
    b = rng.standard_normal((72, 40)).astype(np.float16)
    got = zk.matmul(cuda.to_device(a), cuda.to_device(b), out_dtype="f32")
    assert isinstance(got, cuda.DeviceArray) and got.shape == (100, 40)
    assert rel_err(got.to_host(), reference(a, b)) < TOL["f16"]


@pytest.mark.parametrize("out_name", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("variant", ["mma_sync", "simt", None])
def test_epilogues(variant: str | None, activation: str | None, out_name: str) -> None:
    torch = torch_or_skip()
    m, n, k = 1000, 1000, 1000
    in_dt = torch.float32 if variant == "simt" else torch.bfloat16
    a, b = torch_operands(torch, m, n, k, in_dt, "row", "row")
    bias = torch.randn(n, device="cuda", dtype=in_dt)
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[out_name]
    got = zk.matmul(a, b, bias=bias, activation=activation, out_dtype=out_name, variant=variant)
    assert isinstance(got, torch.Tensor) and got.dtype == tdt and got.shape == (m, n)
    ref = reference(
        a.float().cpu().numpy(), b.float().cpu().numpy(), bias.float().cpu().numpy(), activation
    )
    tol = max(
        TOL["bf16" if in_dt == torch.bfloat16 else "f32"],
        TOL["bf16" if out_name == "bf16" else "f16"] if out_name != "f32" else 0,
    )
    assert rel_err(got.float().cpu().numpy(), ref) < tol


def test_sm90_variant_when_present() -> None:
    torch = torch_or_skip()
    if cuda.device_arch() not in ("sm_90", "sm_90a") or zk._sm90_module() is None:
        pytest.skip("needs an sm_90 device and the sm90 module")
    for m, n, k in [(17, 17, 17), (1000, 1000, 1000), (4097, 257, 1031)]:
        a, b = torch_operands(torch, m, n, k, torch.bfloat16, "row", "row")
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        zk.matmul(a, b, out, variant="sm90")
        ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy())
        assert rel_err(out.float().cpu().numpy(), ref) < TOL["bf16"]


def test_fresh_inputs_each_call_and_results_match_torch() -> None:
    torch = torch_or_skip()
    for _ in range(3):
        a, b = torch_operands(torch, 512, 768, 256, torch.float16, "row", "col")
        got = zk.matmul(a, b, out_dtype="f32")
        want = a.double() @ b.double()
        err = ((got.double() - want).norm() / want.norm()).item()
        assert err < TOL["f16"]


@pytest.mark.parametrize("out_name", ["f32", "bf16"])
@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (128, 4096, 512), (16, 4096, 512)])
def test_whole_tiles_check_free_kernel(
    m: int, n: int, k: int, la: str, lb: str, out_name: str
) -> None:
    # Multiples of every tile config (large, mid and small M): the even kernel.
    torch = torch_or_skip()
    a, b = torch_operands(torch, m, n, k, torch.bfloat16, la, lb)
    bias = torch.randn(n, device="cuda", dtype=torch.float32)
    tdt = torch.float32 if out_name == "f32" else torch.bfloat16
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
    zk.matmul(a, b, out, bias=bias, activation="gelu", variant="mma_sync")
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy(), bias.cpu().numpy(), "gelu")
    assert rel_err(out.float().cpu().numpy(), ref) < TOL["bf16"]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize(
    "m,n,k", [(17, 17, 17), (1000, 1000, 1000), (4097, 257, 1031), (1024, 1024, 1024)]
)
def test_tf32(m: int, n: int, k: int, la: str, lb: str) -> None:
    torch = torch_or_skip()
    a, b = torch_operands(torch, m, n, k, torch.float32, la, lb)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    zk.matmul(a, b, out, allow_tf32=True)
    ref = reference(a.cpu().numpy(), b.cpu().numpy())
    assert rel_err(out.cpu().numpy(), ref) < TOL["tf32"]


LARGE_CONFIGS = [
    dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4, frag_pipeline=True),
    dict(bm=128, bn=128, bk=64, wm=64, wn=64, stages=3, frag_pipeline=True),
    dict(bm=128, bn=256, bk=32, wm=64, wn=64, stages=3, frag_pipeline=True),
    dict(bm=256, bn=128, bk=32, wm=64, wn=64, stages=3, frag_pipeline=True),
    dict(bm=128, bn=128, bk=32, wm=64, wn=32, stages=4, frag_pipeline=True),
    dict(bm=128, bn=256, bk=64, wm=64, wn=64, stages=3, frag_pipeline=True),  # the default
    dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4),  # no fragment pipeline
]


@pytest.mark.parametrize("la,lb", [("row", "row"), ("col", "col")])
@pytest.mark.parametrize("m,n,k", [(1000, 1000, 1000), (777, 1031, 515), (1024, 1024, 1024)])
@pytest.mark.parametrize("cfg", LARGE_CONFIGS, ids=lambda c: "x".join(str(v) for v in c.values()))
def test_large_tile_configs(
    cfg: dict[str, Any], m: int, n: int, k: int, la: str, lb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every config the benchmark's ladder may pick, on tails, unaligned and whole tiles.
    torch = torch_or_skip()
    monkeypatch.setattr(zk, "_mma_sync_config", lambda m: zk.gemm_mma_sync.Config(**cfg))
    a, b = torch_operands(torch, m, n, k, torch.bfloat16, la, lb)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    zk.matmul(a, b, out, variant="mma_sync")
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy())
    assert rel_err(out.cpu().numpy(), ref) < TOL["bf16"]


def test_runs_on_torch_current_stream() -> None:
    torch = torch_or_skip()
    s = torch.cuda.Stream()
    a, b = torch_operands(torch, 1000, 1000, 1000, torch.bfloat16, "row", "row")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        assert zk._stream_for(a, 0, None).handle == s.cuda_stream
        out = torch.full((1000, 1000), float("nan"), device="cuda")
        zk.matmul(a, b, out)
        got = out.cpu()  # ordered after the matmul on s
    ref = reference(a.float().cpu().numpy(), b.float().cpu().numpy())
    assert rel_err(got.numpy(), ref) < TOL["bf16"]


# wgmma reads tf32 K-major only: no row-major B for tf32.
@pytest.mark.parametrize(
    "dtype,lb", [("bf16", "row"), ("bf16", "col"), ("f16", "row"), ("f16", "col"), ("tf32", "col")]
)
def test_sm90_repeated_calls_reuse_the_plan_with_new_operands(dtype: str, lb: str) -> None:
    # The second and later calls of one signature take the plan (new tensor
    # maps for the new addresses, from the cache); each result is checked.
    torch = torch_or_skip()
    if cuda.device_arch() not in ("sm_90", "sm_90a") or zk._sm90_module() is None:
        pytest.skip("needs an sm_90 device and the sm90 module")
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32}[dtype]
    zk._plans.clear()
    for _ in range(3):
        a, b = torch_operands(torch, 300, 520, 264, tdt, "row", lb)
        out = torch.full((300, 520), float("nan"), device="cuda", dtype=tdt)
        zk.matmul(a, b, out, variant="sm90", allow_tf32=dtype == "tf32")
        ref = reference(a.double().cpu().numpy(), b.double().cpu().numpy())
        assert rel_err(out.double().cpu().numpy(), ref) < TOL[dtype]
    assert any(isinstance(p, zk._Sm90Plan) for p in zk._plans.values())
