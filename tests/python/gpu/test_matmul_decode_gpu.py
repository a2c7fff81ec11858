"""The small-M (decode) path of zyntax.kernels.matmul on the GPU: split-K
against float64 on fresh random inputs (tails, layouts, epilogues, outputs
poisoned first), determinism, and the plan cache of repeated calls (new
pointers each call, aliasing still refused, streams and signatures kept
apart). Skipped without an NVIDIA GPU (conftest marks everything here)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax.kernels.gemm as zk
from test_matmul import reference as cpu_reference
from test_matmul import rel_err as cpu_rel_err
from zyntax import cuda
from zyntax.errors import ArgumentError

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _split_k_on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are what lets split-K run on GPUs by default (it is off
    until they have passed on one): switch it on for them."""
    monkeypatch.setattr(zk, "SPLIT_K_ON_GPU", True)
    zk._plans.clear()


def reference(a: Any, b: Any, bias: Any = None, activation: str | None = None) -> Any:
    host = [None if t is None else t.double().cpu().numpy() for t in (a, b, bias)]
    return cpu_reference(*host, activation)


def rel_err(out: Any, ref: Any) -> float:
    return cpu_rel_err(out.double().cpu().numpy(), ref)


def torch_or_skip() -> Any:
    return pytest.importorskip("torch")


def operands(torch: Any, m: int, n: int, k: int, la: str, lb: str) -> tuple[Any, Any]:
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    if la == "col":
        a = a.t().contiguous().t()
    if lb == "col":
        b = b.t().contiguous().t()
    return a, b


LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]


@pytest.fixture(autouse=True)
def hand_written_small_m(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about mma_sync's split K: on sm_90 the registry would
    prefer the tile program at small M (tests/python/gpu/test_matmul_tile_gpu.py)."""
    monkeypatch.setattr(zk, "tile_preferred", lambda p, arch: False)


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize(
    "m,n,k",
    [(16, 4096, 4096), (1, 4097, 1031), (17, 1000, 4097), (128, 4096, 4096), (77, 333, 2000)],
)
def test_small_m_split_k(m: int, n: int, k: int, la: str, lb: str) -> None:
    torch = torch_or_skip()
    a, b = operands(torch, m, n, k, la, lb)
    assert zk.choose_variant(a, b) == "mma_sync"
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    zk.matmul(a, b, out)
    assert rel_err(out, reference(a, b)) < 1e-2


def test_decode_shapes_split_k() -> None:
    torch = torch_or_skip()
    for m, n, k in [(16, 4096, 4096), (16, 14336, 4096), (128, 4096, 4096)]:
        a, b = operands(torch, m, n, k, "row", "row")
        p = zk.normalise(a, b)
        cfg = zk._mma_sync_config(m)
        print(m, n, k, "splits", zk._splits(p, cfg), cfg)
        if m == 16:
            assert zk._splits(p, cfg) > 1


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("out_dtype", ["f32", "bf16", "f16"])
def test_split_k_epilogues(activation: str | None, out_dtype: str) -> None:
    torch = torch_or_skip()
    m, n, k = 16, 1030, 3000
    a, b = operands(torch, m, n, k, "row", "row")
    bias = torch.randn(n, device="cuda").bfloat16()
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[out_dtype]
    out = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
    zk.matmul(a, b, out, bias=bias, activation=activation)
    tol = 1e-3 if out_dtype == "f32" else (1e-2 if out_dtype == "bf16" else 2e-3)
    assert rel_err(out, reference(a, b, bias, activation)) < tol


def test_split_k_is_deterministic() -> None:
    torch = torch_or_skip()
    a, b = operands(torch, 16, 4096, 4096, "row", "row")
    outs = []
    for _ in range(3):
        out = torch.full((16, 4096), float("nan"), device="cuda")
        zk.matmul(a, b, out)
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_plan_cache_new_pointers_each_call() -> None:
    torch = torch_or_skip()
    m, n, k = 16, 2048, 4096
    zk._plans.clear()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(4):  # fresh inputs (new addresses) with one signature
        a, b = operands(torch, m, n, k, "row", "row")
        out.fill_(float("nan"))
        zk.matmul(a, b, out)
        assert rel_err(out, reference(a, b)) < 1e-2
    assert len(zk._plans) == 1
    # Aliasing is checked on the cached path too, before any launch.
    big = torch.empty(m * 2, k, device="cuda", dtype=torch.bfloat16)
    a = big[:m]
    a.copy_(torch.randn(m, k, device="cuda"))
    zk.matmul(a, b, out)  # caches a's signature (strides of the big buffer)
    alias = big[m:].view(-1)[: m * n].view(m, n)  # inside big, not a: fine
    zk.matmul(a, b, alias)
    with pytest.raises(ArgumentError, match="argument 'out': overlaps argument 'a'"):
        zk.matmul(a, b, big.view(-1)[: m * n].view(m, n))  # a's first rows


def test_plan_cache_without_out_allocates_each_call() -> None:
    torch = torch_or_skip()
    m, n, k = 16, 1536, 2048
    results = []
    for _ in range(3):  # the second and third calls take the plan
        a, b = operands(torch, m, n, k, "row", "col")
        got = zk.matmul(a, b, out_dtype="f32")
        assert got.dtype == torch.float32 and got.shape == (m, n)
        results.append((got, reference(a, b)))
    assert len({got.data_ptr() for got, _ in results}) == 3  # all alive: distinct
    for got, ref in results:
        assert rel_err(got, ref) < 1e-3
    ha = np.random.default_rng().standard_normal((m, k)).astype(np.float16)
    hb = np.random.default_rng().standard_normal((k, n)).astype(np.float16)
    href = ha.astype(np.float64) @ hb.astype(np.float64)
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    for _ in range(2):
        dgot = zk.matmul(da, db)
        assert isinstance(dgot, cuda.DeviceArray) and dgot.shape == (m, n)
        host = dgot.to_host().astype(np.float64)
        assert np.linalg.norm(host - href) / np.linalg.norm(href) < 2e-3


def test_plan_cache_keeps_streams_and_device_arrays_apart() -> None:
    torch = torch_or_skip()
    m, n, k = 16, 1024, 2048
    a, b = operands(torch, m, n, k, "row", "row")
    ref = reference(a, b)
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
        zk.matmul(a, b, out)
        got = out.cpu()
    assert rel_err(got, ref) < 1e-2
    out2 = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    zk.matmul(a, b, out2)  # the default stream: another plan
    assert rel_err(out2, ref) < 1e-2
    # zyntax DeviceArrays on a zyntax stream (fresh f16 inputs).
    rng = np.random.default_rng()
    ha = rng.standard_normal((m, k)).astype(np.float16)
    hb = rng.standard_normal((k, n)).astype(np.float16)
    href = ha.astype(np.float64) @ hb.astype(np.float64)
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dout = cuda.empty((m, n), np.float32)
    zs = cuda.Stream()
    for _ in range(2):  # the second call is the cached plan's
        dout.copy_from_host(np.full((m, n), np.nan, np.float32))
        zk.matmul(da, db, dout, stream=zs)
        zs.synchronize()
        got_d = dout.to_host()
        assert not np.isnan(got_d).any()
        assert np.linalg.norm(got_d - href) / np.linalg.norm(href) < 1e-3


def test_repeated_calls_reuse_one_plan() -> None:
    # The host time of a cached call is measured by benches/gemm_decode.py;
    # here: repeated calls with fresh tensors of one signature share a plan
    # and stay correct.
    torch = torch_or_skip()
    zk._plans.clear()
    for _ in range(3):
        a, b = operands(torch, 16, 4096, 4096, "row", "row")
        out = torch.full((16, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
        zk.matmul(a, b, out)
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        err = torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)
        assert err < 1e-2
    assert len(zk._plans) == 1


def test_prepared_launch_takes_raw_addresses() -> None:
    # The plan cache launches with int device addresses (the launch path's
    # fast conversion): same result as a DeviceArray; a negative int is refused.
    from zyntax import hir
    from zyntax.errors import ZyntaxError

    m = hir.Module("raw_ptr", targets=["sm_80", "sm_90"])
    with m.kernel("iota", [hir.ptr("global", hir.f32), hir.u32]) as b:
        p, n = b.params
        i = b.thread_idx()
        with b.if_(i < n):
            b.store(b.ptr_add(p, i), b.cast(i, hir.f32) * 3.0)
    k = cuda.load_hir(m).kernel("iota")
    launch = k.prepare(1, 64)
    for arg in ("array", "int"):
        arr = cuda.to_device(np.full(64, np.nan, np.float32))
        launch(arr if arg == "array" else int(arr.ptr), 50)
        got = arr.to_host()
        assert np.array_equal(got[:50], np.arange(50, dtype=np.float32) * 3.0)
        assert np.isnan(got[50:]).all()
    with pytest.raises(ZyntaxError, match="not a device address"):
        launch(-16, 50)
