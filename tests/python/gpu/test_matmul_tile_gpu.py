"""The tile-program matmul (``zyntax.kernels.gemm_tile``) on the GPU: dtypes,
layouts and strides, odd sizes, epilogues, small M (split K), batched with
broadcasting and grouped (MoE) products, each against float64 torch on fresh
random inputs, outputs poisoned with NaN first. Skipped without a GPU."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.gpu
GELU_C = 0.7978845608028654
TOL = {"bf16": 2e-2, "f16": 2e-3, "f32": 1e-5}


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


def tdt(torch: Any, dt: str) -> Any:
    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]


def reference(torch: Any, a: Any, b: Any, bias: Any = None, act: str | None = None) -> Any:
    ref = torch.matmul(a.double(), b.double())
    if bias is not None:
        ref = ref + bias.double()
    if act == "relu":
        ref = ref.clamp_min(0.0)
    elif act == "gelu":
        ref = 0.5 * ref * (1.0 + torch.tanh(GELU_C * (ref + 0.044715 * ref**3)))
    return ref


def check(out: Any, ref: Any, dt: str) -> None:
    got = out.double()
    assert not got.isnan().any(), "an output element was never written"
    err = ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    assert err < TOL[dt], err


def poisoned(torch: Any, shape: tuple[int, ...], dt: Any) -> Any:
    return torch.full(shape, float("nan"), device="cuda", dtype=dt)


def rand(torch: Any, *shape: int, dt: str = "bf16") -> Any:
    return (torch.randn(*shape, device="cuda") / shape[-1] ** 0.25).to(tdt(torch, dt))


@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
@pytest.mark.parametrize(
    "m,n,k", [(1, 4096, 4096), (17, 33, 9), (16, 1000, 4097), (1000, 1000, 1000), (257, 300, 64)]
)
def test_shapes(torch: Any, dt: str, m: int, n: int, k: int) -> None:
    from zyntax.kernels import gemm_tile

    if dt == "f32" and m * n * k > 1e9:
        pytest.skip("f32 runs on FFMA; the large shapes are for tensor cores")
    a, b = rand(torch, m, k, dt=dt), rand(torch, k, n, dt=dt)
    out = poisoned(torch, (m, n), tdt(torch, dt))
    gemm_tile.matmul(a, b, out)
    check(out, reference(torch, a, b), dt)


@pytest.mark.parametrize("layout", ["at", "bt", "atbt", "slice", "odd_ld", "strided"])
def test_layouts(torch: Any, layout: str) -> None:
    from zyntax.kernels import gemm_tile

    m, n, k = 300, 520, 4097
    a = rand(torch, k, m).t() if "at" in layout else rand(torch, m, k)
    b = rand(torch, n, k).t() if "bt" in layout else rand(torch, k, n)
    if layout == "slice":
        a = rand(torch, m, 2 * k + 8)[:, 8 : k + 8]  # a column slice: row stride 2k + 8
    if layout == "odd_ld":
        b = rand(torch, k, n + 3)[:, :n]  # rows not 16-byte multiples
    if layout == "strided":
        a = rand(torch, m, 2 * k)[:, ::2]  # no unit stride at all
    out = poisoned(torch, (m, n), torch.bfloat16)
    gemm_tile.matmul(a, b, out)
    check(out, reference(torch, a, b), "bf16")


@pytest.mark.parametrize("act", [None, "relu", "gelu"])
@pytest.mark.parametrize("m", [1, 64, 1024])
def test_epilogues(torch: Any, act: str | None, m: int) -> None:
    import zyntax.kernels as zk

    a, b, bias = rand(torch, m, 768), rand(torch, 768, 1000), rand(torch, 1000)
    out = poisoned(torch, (m, 1000), torch.float32)
    zk.matmul(a, b, out, bias=bias, activation=act, out_dtype="f32", variant="tile")
    check(out, reference(torch, a, b, bias, act), "bf16")


@pytest.mark.parametrize(
    "sa,sb",
    [((8, 512, 512), (8, 512, 512)), ((3, 17, 100), (100, 33)), ((1, 64, 128), (5, 128, 96)),
     ((4, 70, 72), (4, 72, 40))],
)  # fmt: skip
def test_batched(torch: Any, sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    import zyntax.kernels as zk

    a, b = rand(torch, *sa), rand(torch, *sb)
    got = zk.matmul(a, b)
    assert got.shape == torch.matmul(a, b).shape
    check(got, reference(torch, a, b), "bf16")
    # transposed batches (column-major per batch) and a broadcast view of b
    at = rand(torch, sa[0], sa[2], sa[1]).transpose(1, 2)
    out = poisoned(torch, got.shape, torch.bfloat16)
    zk.matmul(at, b, out)
    check(out, reference(torch, at, b), "bf16")
    bx = rand(torch, 1, *sb[-2:]).expand(sa[0], *sb[-2:])  # batch stride 0
    out = poisoned(torch, (sa[0], sa[1], sb[-1]), torch.bfloat16)
    zk.matmul(a, bx, out)
    check(out, reference(torch, a, bx), "bf16")


@pytest.mark.parametrize("k", [4096, 100])
def test_grouped(torch: Any, k: int) -> None:
    import zyntax.kernels as zk

    sizes = (300, 0, 17, 1024, 1, 700, 64, 129)  # 8 experts, ragged tokens
    a, b = rand(torch, sum(sizes), k), rand(torch, len(sizes), k, 512)
    bias = rand(torch, 512)
    out = poisoned(torch, (sum(sizes), 512), torch.bfloat16)
    zk.grouped_matmul(a, b, sizes, out, bias=bias, activation="relu")
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    parts = zip(starts, sizes, strict=True)
    ref = torch.cat(
        [reference(torch, a[s : s + g], b[i], bias, "relu") for i, (s, g) in enumerate(parts)]
    )
    check(out, ref, "bf16")


def test_repeat_calls_use_the_plan(torch: Any) -> None:
    """Repeated calls (the plan's replay) stay correct on new tensors."""
    import zyntax.kernels as zk

    for _ in range(3):
        a, b = rand(torch, 4, 64, 128), rand(torch, 4, 128, 64)
        check(zk.matmul(a, b), reference(torch, a, b), "bf16")


# The last three: ping-pong (a short K), and decode shapes split along K on
# the warp-specialised pipeline (gemm_tile.WS_SPLIT).
WS_CASES = [(1000, 1000, 1000, "row"), (257, 300, 4097, "row"), (4096, 4096, 4096, "at"),
            (300, 520, 4096, "bt"), (2048, 50304, 768, "row"), (16, 4096, 4096, "row"),
            (1, 2048, 8192, "bt")]  # fmt: skip


@pytest.mark.parametrize("m,n,k,layout", WS_CASES)
def test_warp_specialized(
    torch: Any, monkeypatch: Any, m: int, n: int, k: int, layout: str
) -> None:
    """WARP_SPECIALIZE: the persistent TMA pipeline (on sm_90a; elsewhere the same program)."""
    from zyntax.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "WARP_SPECIALIZE", True)
    for _ in range(2):  # the second call replays the plan: maps rebuilt at the new addresses
        a = rand(torch, k, m).t() if layout == "at" else rand(torch, m, k)
        b = rand(torch, n, k).t() if layout == "bt" else rand(torch, k, n)
        out = poisoned(torch, (m, n), torch.bfloat16)
        gemm_tile.matmul(a, b, out)
        check(out, reference(torch, a, b), "bf16")
