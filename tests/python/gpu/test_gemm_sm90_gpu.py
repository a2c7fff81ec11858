"""The sm_90a GEMM on the device (issue 14 item 1): fresh random bf16/f16
operands of odd and large sizes, both B layouts, bias and activations, outputs
poisoned with NaN, compared by relative error norm with a float64 product of
the same (rounded) operands. Needs an sm_90 GPU and PyTorch; skipped otherwise
(conftest marks tests/python/gpu)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from zyntax import cuda

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from zyntax.kernels import gemm_sm90  # noqa: E402

TOL = {"bf16": 1e-2, "f16": 1e-3}
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


@pytest.fixture(autouse=True)
def _needs_sm90() -> None:
    if cuda.Device(0).compute_capability < (9, 0):
        pytest.skip("needs an sm_90 GPU (wgmma, TMA)")


def operands(m: int, n: int, k: int, dtype: str, b_layout: str) -> tuple[object, object]:
    a = torch.randn(m, k, device="cuda").to(TORCH[dtype])
    if b_layout == "row":
        b = torch.randn(k, n, device="cuda").to(TORCH[dtype])
    else:
        b = torch.randn(n, k, device="cuda").to(TORCH[dtype]).t()  # column-major (K, N)
    return a, b


def reference(a, b, bias, activation):  # type: ignore[no-untyped-def]
    ref = a.double() @ b.double()
    if bias is not None:
        ref = ref + bias.double()
    if activation == "relu":
        ref = torch.relu(ref)
    elif activation == "gelu":
        ref = torch.nn.functional.gelu(ref, approximate="tanh")
    return ref


def check(
    m: int,
    n: int,
    k: int,
    dtype: str = "bf16",
    out_dtype: str = "bf16",
    b_layout: str = "col",
    bias: str | None = None,
    activation: str | None = None,
    **kw: object,
) -> None:
    a, b = operands(m, n, k, dtype, b_layout)
    bias_t = torch.randn(n, device="cuda").to(TORCH[bias]) if bias else None
    out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[out_dtype])
    gemm_sm90.matmul_sm90(a, b, out, bias=bias_t, activation=activation, b_layout=b_layout, **kw)
    torch.cuda.synchronize()
    assert torch.isfinite(out).all(), "unwritten (NaN) output elements"
    ref = reference(a, b, bias_t, activation)
    err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    tol = TOL[dtype] if out_dtype != "bf16" else TOL["bf16"]
    assert err < tol, f"relative error {err:.3g} for {m}x{n}x{k} {dtype}->{out_dtype} {b_layout}"


@pytest.mark.parametrize("b_layout", ["col", "row"])
@pytest.mark.parametrize("size", [(1, 1, 1), (17, 17, 17), (1000, 1000, 1000), (4097, 4097, 4097)])
def test_sizes_bf16(size: tuple[int, int, int], b_layout: str) -> None:
    check(*size, b_layout=b_layout)


@pytest.mark.parametrize("b_layout", ["col", "row"])
@pytest.mark.parametrize("size", [(257, 511, 129), (1000, 1000, 1000), (2048, 4096, 1024)])
def test_sizes_f16_to_f32(size: tuple[int, int, int], b_layout: str) -> None:
    check(*size, dtype="f16", out_dtype="f32", b_layout=b_layout)


@pytest.mark.parametrize("out_dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_bias_activation(activation: str | None, out_dtype: str) -> None:
    check(300, 520, 200, dtype="f16", out_dtype=out_dtype, bias="f32", activation=activation)


def test_rectangular_and_odd() -> None:
    check(4097, 1000, 17, b_layout="row", bias="bf16", activation="relu")
    check(16, 4096, 4096)
    check(130, 258, 4097)


def test_persistent_grid_smaller_than_tiles() -> None:
    # 8 blocks walk 64 tiles: the ring's phases carry across tiles
    check(1024, 2048, 512, sms=8)


CLUSTER = gemm_sm90.Config(cluster_m=2)


@pytest.mark.parametrize("b_layout", ["col", "row"])
@pytest.mark.parametrize(
    "size", [(17, 17, 17), (300, 1000, 520), (1000, 1000, 1000), (4097, 4097, 4097)]
)
def test_cluster_multicast_sizes(size: tuple[int, int, int], b_layout: str) -> None:
    # 2-block clusters multicasting B: odd tile-row counts leave a block of
    # the last pair wholly below M
    check(*size, b_layout=b_layout, config=CLUSTER)


def test_cluster_persistent_bias_gelu_f16() -> None:
    # 4 clusters walk 2 x 8 tile pairs: the ring and the remote releases carry across tiles
    check(
        2048, 2048, 1024, dtype="f16", out_dtype="f32", bias="f32", activation="gelu",
        config=CLUSTER, sms=8,
    )  # fmt: skip


def test_cluster_default_config() -> None:
    # the size rule of default_config, both settings, on one large problem
    for cm in (1, 2):
        gemm_sm90.CLUSTER_M = cm
        try:
            assert gemm_sm90.default_config(4096, 4096).cluster_m == cm
            check(4096, 4096, 2048)
        finally:
            gemm_sm90.CLUSTER_M = None


def test_without_setmaxnreg() -> None:
    check(512, 512, 512, config=gemm_sm90.Config(setmaxnreg=False))


def test_bad_input_is_typed() -> None:
    import zyntax

    a, b = operands(64, 64, 32, "bf16", "row")
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(zyntax.ArgumentError, match="inner dimensions"):
        gemm_sm90.matmul_sm90(a, b[:16], out)
    with pytest.raises(zyntax.ArgumentError, match="unsupported combination"):
        gemm_sm90.matmul_sm90(a.float(), b, out)


@pytest.mark.parametrize("size", [(17, 17, 17), (1000, 1000, 1000), (4097, 1000, 4097)])
def test_tf32(size: tuple[int, int, int]) -> None:
    m, n, k = size
    a = torch.randn(m, k, device="cuda")
    bt = torch.randn(n, k, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda")
    gemm_sm90.matmul_sm90(a, bt.t(), out, b_layout="col")
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    ref = a.double() @ bt.double().t()
    err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    assert err < 1e-3, f"tf32 relative error {err:.3g}"


@pytest.mark.parametrize("size", [(16, 4096, 4096), (1000, 1000, 1000), (257, 130, 4097)])
def test_e4m3_scaled_bf16_out(size: tuple[int, int, int]) -> None:
    m, n, k = size
    f8 = torch.float8_e4m3fn
    a = (torch.randn(m, k, device="cuda") * 2).to(f8)
    bt = (torch.randn(n, k, device="cuda") * 2).to(f8)
    bias = torch.randn(n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    sa, sb = 0.75, 1.5
    gemm_sm90.matmul_sm90(
        a.view(torch.uint8),
        bt.view(torch.uint8).t(),
        out,
        b_layout="col",
        bias=bias,
        scale_a=sa,
        scale_b=torch.tensor([sb], device="cuda"),
        dtype="e4m3",
    )
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    ref = (a.double() @ bt.double().t()) * (sa * sb) + bias.double()
    err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    assert err < 1e-2, f"e4m3 relative error {err:.3g}"


class _Named:
    """An operand as zyntax.kernels.matmul hands it over: a plain
    ``__cuda_array_interface__`` plus ``dtype``, the zyntax dtype name."""

    def __init__(self, t, dtype: str, typestr: str) -> None:  # type: ignore[no-untyped-def]
        self.dtype = dtype
        self._keep = t
        isz = t.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape),
            "strides": tuple(s * isz for s in t.stride()),
            "typestr": typestr,
            "data": (t.data_ptr(), False),
            "version": 3,
        }


def test_registry_style_operands_e4m3_and_2d_bias() -> None:
    m, n, k = 300, 200, 96
    f8 = torch.float8_e4m3fn
    a = torch.randn(m, k, device="cuda").to(f8)
    bt = torch.randn(n, k, device="cuda").to(f8)
    bias = torch.randn(1, n, device="cuda")
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_sm90.matmul_sm90(
        _Named(a.view(torch.uint8), "e4m3", "|u1"),
        _Named(bt.view(torch.uint8).t(), "e4m3", "|u1"),
        _Named(out, "bf16", "<V2"),
        bias=_Named(bias, "f32", "<f4"),
        b_layout="col",
        scale_a=2.0,
        scale_b=0.5,
    )
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
    ref = a.double() @ bt.double().t() + bias.double()
    err = float(torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref))
    assert err < 1e-2, f"relative error {err:.3g}"
