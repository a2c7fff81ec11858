"""The row kernels as tile programs (``zyntax.kernels.rows_tile``) on the GPU
with PyTorch tensors: softmax, layer_norm, rms_norm and cross-entropy,
forward and backward, at widths 64 to 262144 (every program shape of the
plan table) and many row counts, against float64 PyTorch autograd on fresh
random inputs, outputs poisoned with NaN first. The interpreter versions:
tests/python/test_rows_tile.py."""

from __future__ import annotations

from typing import Any

import pytest

from zyntax import kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
F = torch.nn.functional
DEV = torch.device("cuda")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
#: relative error allowed per dtype (outputs rounded to that dtype).
TOL = {"f32": 1e-5, "bf16": 1e-2, "f16": 2e-3}

#: (rows, width): every plan shape, tails, the issue's widths.
SHAPES = [
    (4096, 64),
    (1000, 65),
    (333, 1000),
    (4096, 1000),
    (17, 1024),
    (9, 1025),
    (130, 4097),
    (64, 8192),
    (7, 16384),
    (5, 16385),
    (3, 50257),
    (2, 128256),
    (1, 262144),
]


def rel_err(out: Any, ref: Any) -> float:
    out64 = out.double()
    assert not torch.isnan(out64).any(), "NaN in the output (an element not written?)"
    return float((out64 - ref).norm() / ref.norm().clamp_min(1e-30))


def poisoned(shape: tuple[int, ...], dtype: Any) -> Any:
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


def leaf(t: Any) -> Any:
    """`t` in float64 as a leaf that records gradients (the reference)."""
    return t.detach().double().requires_grad_(True)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize(("rows", "n"), SHAPES)
def test_softmax(rows: int, n: int, dt: str) -> None:
    x = torch.randn(rows, n, device=DEV, dtype=DTYPES[dt]) * 4
    dy = torch.randn_like(x)
    y = poisoned(x.shape, x.dtype)
    kernels.softmax(x, out=y)
    x64 = leaf(x)
    y64 = torch.softmax(x64, -1)
    assert rel_err(y, y64.detach()) < TOL[dt]
    (g64,) = torch.autograd.grad(y64, x64, dy.double())
    dx = poisoned(x.shape, x.dtype)
    # The backward takes the rounded forward output, as autograd would.
    kernels.softmax_backward(y, dy, out=dx)
    y_r = y.double()
    ref = y_r * (dy.double() - (dy.double() * y_r).sum(-1, keepdim=True))
    assert rel_err(dx, ref) < TOL[dt]
    if dt == "f32":
        assert rel_err(dx, g64) < 1e-4


@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize(("rows", "n"), SHAPES)
def test_norms(rows: int, n: int, dt: str, kind: str) -> None:
    dtype = DTYPES[dt]
    x = torch.randn(rows, n, device=DEV, dtype=dtype) * 2 + 3
    w = torch.randn(n, device=DEV, dtype=dtype)
    b = torch.randn(n, device=DEV, dtype=dtype)
    dy = torch.randn_like(x)
    y = poisoned(x.shape, dtype)
    dx = poisoned(x.shape, dtype)
    x64, w64, b64 = leaf(x), leaf(w), leaf(b)
    if kind == "layer":
        kernels.layer_norm(x, w, b, 1e-5, out=y)
        _, dw, db = kernels.layer_norm_backward(dy, x, w, b, 1e-5, out=dx)
        y64 = F.layer_norm(x64, (n,), w64, b64, 1e-5)
        refs = torch.autograd.grad(y64, (x64, w64, b64), dy.double())
        got = (dx, dw, db)
    else:
        kernels.rms_norm(x, w, 1e-5, out=y)
        _, dw = kernels.rms_norm_backward(dy, x, w, 1e-5, out=dx)
        y64 = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-5) * w64
        refs = torch.autograd.grad(y64, (x64, w64), dy.double())
        got = (dx, dw)
    assert rel_err(y, y64.detach()) < TOL[dt]
    for name, g, r in zip(("dx", "dweight", "dbias"), got, refs, strict=False):
        assert g.dtype == dtype
        assert rel_err(g, r) < 3 * TOL[dt], name


@pytest.mark.parametrize(
    ("rows", "n", "dt"), [(4096, 1000, "f32"), (1000, 4097, "bf16"), (40, 50257, "bf16")]
)
def test_norm_backward_is_deterministic(rows: int, n: int, dt: str) -> None:
    """dweight and dbias bit-identical on reruns: the split path (1000), the
    one-pass whole-row program with a tail tile (4097), chunked rows (50257)."""
    x = torch.randn(rows, n, device=DEV, dtype=DTYPES[dt])
    w, b = torch.randn(n, device=DEV, dtype=x.dtype), torch.randn(n, device=DEV, dtype=x.dtype)
    dy = torch.randn_like(x)
    first = kernels.layer_norm_backward(dy, x, w, b)
    for _ in range(3):
        again = kernels.layer_norm_backward(dy, x, w, b)
        for u, v in zip(first, again, strict=True):
            assert torch.equal(u, v)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize(("rows", "n"), SHAPES)
def test_cross_entropy(rows: int, n: int, dt: str) -> None:
    x = torch.randn(rows, n, device=DEV, dtype=DTYPES[dt]) * 4
    t = torch.randint(0, n, (rows,), device=DEV)
    loss = poisoned((rows,), torch.float32)
    kernels.cross_entropy(x, t, out=loss)
    x64 = leaf(x)
    l64 = F.cross_entropy(x64, t, reduction="none")
    assert rel_err(loss, l64.detach()) < 1e-5
    dl = torch.randn(rows, device=DEV)
    (g64,) = torch.autograd.grad(l64, x64, dl.double())
    dx = poisoned(x.shape, x.dtype)
    kernels.cross_entropy_backward(dl, x, t, out=dx)
    assert rel_err(dx, g64) < TOL[dt]
    m64 = F.cross_entropy(x64, t.int().long(), reduction="mean")
    (gm,) = torch.autograd.grad(m64, x64, torch.tensor(0.5, dtype=torch.float64, device=DEV))
    dxm = kernels.cross_entropy_backward(
        torch.tensor(0.5, device=DEV), x, t.int(), reduction="mean"
    )
    assert rel_err(dxm, gm) < TOL[dt]


def test_strided_and_unaligned_views() -> None:
    """Column-strided rows (the scalar path) and rows starting off a 16-byte
    boundary (the unit-stride program without the alignment promise)."""
    base = torch.randn(300, 2 * 1000 + 1, device=DEV)
    x = base[:, 1:1001]  # 4-byte aligned start
    assert rel_err(kernels.softmax(x), torch.softmax(x.double(), -1)) < 1e-5
    xt = torch.randn(1000, 96, device=DEV).t()  # column stride 96
    assert rel_err(kernels.softmax(xt), torch.softmax(xt.double(), -1)) < 1e-5
    w = torch.randn(1000, device=DEV)
    ref = F.layer_norm(x.double(), (1000,), w.double(), None, 1e-5)
    assert rel_err(kernels.layer_norm(x, w, None, 1e-5), ref) < 1e-5


@pytest.mark.parametrize("dt", ["f32", "bf16", "f16"])
def test_peeled_and_mixed_row_strides(dt: str) -> None:
    """Odd widths peel each row's misaligned head; rows inside a wider array
    (row stride 4100, another misalignment than a dense 4097) are not
    peeled but must give the same values; many rows so the one-pass norm
    backward loops over several rows per program instance."""
    dtype = DTYPES[dt]
    base = torch.randn(600, 4100, device=DEV, dtype=dtype) * 3
    for x in (base[:, :4097].contiguous(), base[:, :4097]):
        x64 = leaf(x)
        y = poisoned(x.shape, dtype)
        kernels.softmax(x, out=y)
        assert rel_err(y, torch.softmax(x64, -1).detach()) < TOL[dt]
        w, b = (
            torch.randn(4097, device=DEV, dtype=dtype),
            torch.randn(4097, device=DEV, dtype=dtype),
        )
        dy = torch.randn(x.shape, device=DEV, dtype=dtype)
        w64, b64 = leaf(w), leaf(b)
        y64 = F.layer_norm(x64, (4097,), w64, b64, 1e-5)
        refs = torch.autograd.grad(y64, (x64, w64, b64), dy.double())
        dx = poisoned(x.shape, dtype)
        got = kernels.layer_norm_backward(dy, x, w, b, 1e-5, out=dx)
        for name, g, r in zip(("dx", "dweight", "dbias"), got, refs, strict=True):
            assert rel_err(g, r) < 3 * TOL[dt], name
        t = torch.randint(0, 4097, (600,), device=DEV)
        loss64 = F.cross_entropy(x64, t, reduction="none")
        assert rel_err(kernels.cross_entropy(x, t), loss64.detach()) < 1e-5
        dl = torch.randn(600, device=DEV)
        (g64,) = torch.autograd.grad(loss64, x64, dl.double())
        assert rel_err(kernels.cross_entropy_backward(dl, x, t), g64) < TOL[dt]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize(("rows", "n"), [(301, 50257), (300, 20000), (37, 128256)])
def test_wide_and_held_rows(rows: int, n: int, dt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked rows kept whole in registers over several [1, 8192] tiles
    (rows_tile.WIDE, every program that can: softmax and cross-entropy
    forward, cross-entropy backward, the norms' forward; enough rows that
    nothing is split) and the norms' forward with its first tiles held
    (rows_tile.HELD, at 128256); unaligned rows too (a peel), against
    float64 with outputs poisoned."""
    from zyntax.kernels import rows_tile

    monkeypatch.setattr(
        rows_tile, "WIDE", frozenset({"softmax_fwd", "norm_fwd", "ce_fwd", "ce_bwd"})
    )
    monkeypatch.setattr(rows_tile, "HELD", frozenset({"norm_fwd", "rms_fwd"}))
    for f in (kernels.softmax, kernels.layer_norm, kernels.rms_norm, kernels.cross_entropy):
        f.plans.clear()
    kernels.cross_entropy_backward.plans.clear()
    dtype = DTYPES[dt]
    base = torch.randn(rows, n + 1, device=DEV, dtype=dtype) * 3 + 1
    for x in (base[:, :n].contiguous(), base[:, 1:]):
        x64 = x.double()
        y = poisoned(x.shape, dtype)
        kernels.softmax(x, out=y)
        assert rel_err(y, torch.softmax(x64, -1)) < TOL[dt]
        w, b = torch.randn(n, device=DEV, dtype=dtype), torch.randn(n, device=DEV, dtype=dtype)
        y = poisoned(x.shape, dtype)
        kernels.layer_norm(x, w, b, 1e-5, out=y)
        assert rel_err(y, F.layer_norm(x64, (n,), w.double(), b.double(), 1e-5)) < TOL[dt]
        y = poisoned(x.shape, dtype)
        kernels.rms_norm(x, w, 1e-5, out=y)
        ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-5) * w.double()
        assert rel_err(y, ref) < TOL[dt]
        t = torch.randint(0, n, (rows,), device=DEV)
        l64 = leaf(x)
        loss64 = F.cross_entropy(l64, t, reduction="none")
        loss = poisoned((rows,), torch.float32)
        kernels.cross_entropy(x, t, out=loss)
        assert rel_err(loss, loss64.detach()) < 1e-5
        dl = torch.randn(rows, device=DEV)
        (g64,) = torch.autograd.grad(loss64, l64, dl.double())
        dx = poisoned(x.shape, dtype)
        kernels.cross_entropy_backward(dl, x, t, out=dx)
        assert rel_err(dx, g64) < TOL[dt]


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize(
    ("ctas", "warps", "persist"), [(2, 32, 0), (4, 32, 0), (8, 16, 0), (8, 32, 1)]
)
@pytest.mark.parametrize(("rows", "n"), [(300, 50257), (280, 128256)])
def test_cluster_rows(
    rows: int,
    n: int,
    ctas: int,
    warps: int,
    persist: int,
    dt: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunked rows split over a cluster of CTAs (rows_tile.CLUSTER: the
    norms' and softmax forward, the statistics combined through distributed
    shared memory), aligned and unaligned (peeled) rows, against float64
    with outputs poisoned; enough rows that softmax is not split; with
    `persist` (CLUSTER_PERSIST) the clusters loop over rows, loading the
    next row's slices before this row's reductions."""
    from zyntax.kernels import rows_tile

    if ctas == 2 and n > 65536:
        pytest.skip("a 128256-wide row over 2 CTAs holds 63 elements a thread")
    monkeypatch.setattr(rows_tile, "WIDE", frozenset())
    progs = ("softmax_fwd", "norm_fwd", "rms_fwd")
    monkeypatch.setattr(rows_tile, "CLUSTER", dict.fromkeys(progs, ctas))
    monkeypatch.setattr(rows_tile, "CLUSTER_MIN", 0)
    monkeypatch.setattr(rows_tile, "CLUSTER_WARPS", warps)
    monkeypatch.setattr(rows_tile, "CLUSTER_PERSIST", dict.fromkeys(progs, persist))
    plans: list[Any] = []
    real = rows_tile.launch

    def spy(name: str, key: Any, *rest: Any) -> None:
        plans.append((name, key[0]))
        real(name, key, *rest)

    monkeypatch.setattr(rows_tile, "launch", spy)
    for f in (kernels.softmax, kernels.layer_norm, kernels.rms_norm):
        f.plans.clear()
    dtype = DTYPES[dt]
    base = torch.randn(rows, n + 1, device=DEV, dtype=dtype) * 3 + 1
    w, b = torch.randn(n, device=DEV, dtype=dtype), torch.randn(n, device=DEV, dtype=dtype)
    for x in (base[:, :n].contiguous(), base[:, 1:]):
        x64 = x.double()
        y = poisoned(x.shape, dtype)
        kernels.softmax(x, out=y)
        assert rel_err(y, torch.softmax(x64, -1)) < TOL[dt]
        y = poisoned(x.shape, dtype)
        kernels.layer_norm(x, w, b, 1e-5, out=y)
        assert rel_err(y, F.layer_norm(x64, (n,), w.double(), b.double(), 1e-5)) < TOL[dt]
        y = poisoned(x.shape, dtype)
        kernels.rms_norm(x, w, 1e-5, out=y)
        ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-5) * w.double()
        assert rel_err(y, ref) < TOL[dt]
    assert [(p.cluster, p.persist) for _, p in plans] == [(ctas, persist)] * 6, plans


#: The programs of the rows_tile schedule switches below.
_PROGRAMS = ("softmax_fwd", "softmax_bwd", "norm_fwd", "rms_fwd", "ce_fwd", "ce_bwd")
#: Schedule switches of rows_tile with every program that takes them on:
#: whole rows looped over with the next row (block) loaded ahead (PREFETCH
#: for one-row tiles of 1024 to 8192 columns, PREFETCH_ROWS for several
#: narrow rows an instance), chunk loops loading the next chunk ahead with
#: per-lane state (CHUNK_AHEAD, STATE), chunked rows on one 1024-thread
#: instance ([1, 8192] chunks on 32 warps), the one-pass norm backward of a
#: tailed row on 16 warps (prefetching at one instance per SM).
SWITCHES: dict[str, dict[str, Any]] = {
    "prefetch": {
        "PREFETCH": dict.fromkeys(_PROGRAMS, 4),
        "PREFETCH_MIN_WIDTH": 1024,
        "PREFETCH_MAX_WIDTH": 8192,
        "PREFETCH_ROWS": dict.fromkeys(_PROGRAMS, 8),
    },
    "ahead": {"CHUNK_AHEAD": frozenset({*_PROGRAMS, "norm_bwd_stats"}), "STATE": "lanes"},
    "chunks_32_warps": {
        "CHUNK_OF": {
            "softmax_fwd": 2.0,
            "norm_bwd_stats": 2.0,
            "norm_bwd_chunks": 0.5,
            "norm_fwd": 2.0,
        },
        "WARPS_OF": {"norm_fwd": 32, "softmax_fwd": 32},
        "HELD_FORM": {"rms_fwd": (0, 1, 8192, 32)},
        "CHUNK_AHEAD": frozenset({*_PROGRAMS, "norm_bwd_stats"}),
    },
    "norm_bwd_16_warps": {"NORM_BWD_TAIL_WARPS": 16},
}


@pytest.mark.parametrize(
    ("switch", "rows", "n"),
    [
        ("prefetch", 4099, 64),
        ("prefetch", 2053, 1000),
        ("prefetch", 1031, 4097),
        ("ahead", 67, 50257),
        ("ahead", 33, 128256),
        ("chunks_32_warps", 67, 50257),
        ("chunks_32_warps", 33, 128256),
        ("norm_bwd_16_warps", 1031, 4097),
    ],
)
def test_schedule_switches(rows: int, n: int, switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every program (softmax, the norms, cross-entropy, forward and
    backward) under each switch at the issue's widths where it applies,
    bf16, rows enough that the looping instances take several rows (blocks)
    and a partial one, against float64 as the tests above."""
    from zyntax.kernels import rows_tile

    for k, v in SWITCHES[switch].items():
        monkeypatch.setattr(rows_tile, k, v)
    test_softmax(rows, n, "bf16")
    test_norms(rows, n, "bf16", "layer")
    test_norms(rows, n, "bf16", "rms")
    test_cross_entropy(rows, n, "bf16")
