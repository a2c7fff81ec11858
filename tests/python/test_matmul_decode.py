"""The small-M (decode) path of zyntax.kernels.matmul without a GPU: split-K
on the reference interpreter against float64 (fresh random inputs, tails in
every dimension, both layouts, epilogues, NaN-poisoned outputs and
workspace), and the plan cache of repeated GPU calls with the launches
recorded instead of run. The GPU versions: tests/python/gpu/test_matmul_decode_gpu.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import zyntax.kernels.gemm as zk
from test_matmul import reference, rel_err  # the float64 reference of every matmul test
from zyntax.errors import ArgumentError
from zyntax.kernels import _problem

rng = np.random.default_rng()


def operands(m: int, n: int, k: int, la: str, lb: str) -> tuple[Any, Any]:
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    if la == "col":
        a = np.ascontiguousarray(a.T).T
    if lb == "col":
        b = np.ascontiguousarray(b.T).T
    return a, b


LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize(
    "m,n,k",
    [
        (16, 40, 600),  # a column tail and a K tail (600 = 9 x 64 + 24)
        (5, 36, 520),  # a row tail; N % 4 == 0: the vector reduction
        (16, 64, 1024),  # whole tiles: the check-free kernel writes the partials
    ],
)
def test_split_k_on_interpreter(m: int, n: int, k: int, la: str, lb: str) -> None:
    a, b = operands(m, n, k, la, lb)
    p = _problem.normalise(a, b)
    splits = zk._splits(p, zk._mma_sync_config(m))
    assert splits > 1  # the interpreter counts as a 4-SM machine
    work = zk._mma_sync_work(p, "interp")
    (launch,) = work.launches  # one kernel: the last block of a tile reduces
    assert launch.grid[1] == splits and work.workspace == splits * m * n
    assert work.counters == launch.grid[0]  # one arrival counter per output tile
    out = np.full((m, n), np.nan, np.float32)
    zk.matmul(a, b, out)
    assert rel_err(out, reference(a, b)) < 1e-3
    # Every counter is back at zero for the next launch.
    assert zk.last_interp_counters[0].shape == (launch.grid[0],)
    assert not zk.last_interp_counters[0].any()


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("out_dtype,tol", [("f32", 1e-3), ("f16", 2e-3)])
def test_split_k_epilogues(activation: str | None, out_dtype: str, tol: float) -> None:
    m, n, k = 9, 44, 640
    a, b = operands(m, n, k, "row", "row")
    bias = rng.standard_normal(n).astype(np.float16)
    got = zk.matmul(a, b, bias=bias, activation=activation, out_dtype=out_dtype)
    assert got.dtype == (np.float32 if out_dtype == "f32" else np.float16)
    assert rel_err(got, reference(a, b, bias, activation)) < tol


def test_split_k_is_deterministic_and_matches_the_unsplit_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m, n, k = 16, 32, 768
    a, b = operands(m, n, k, "row", "col")
    runs = [zk.matmul(a, b, out_dtype="f32") for _ in range(2)]
    assert np.array_equal(runs[0], runs[1])
    monkeypatch.setattr(zk, "SPLIT_K_WAVES", 0)  # no split
    p = _problem.normalise(a, b)
    assert len(zk._mma_sync_work(p, "interp").launches) == 1
    whole = zk.matmul(a, b, out_dtype="f32")
    # Same products, summed in another order: equal to f32 rounding.
    assert rel_err(runs[0], np.asarray(whole, np.float64)) < 1e-6
    assert rel_err(runs[0], reference(a, b)) < 1e-3


def test_split_count_never_leaves_a_split_empty() -> None:
    cfg = zk._mma_sync_config(16)
    for k in range(64, 64 * 80, 64 * 3 + 5):
        p = _problem.normalise(*operands(16, 32, k, "row", "row"))
        s = zk._splits(p, cfg)
        ktiles = -(-k // cfg.bk)
        per = -(-ktiles // s)
        assert (s - 1) * per < ktiles, (k, s)  # the last split has a tile
        assert s == 1 or per >= zk.SPLIT_K_MIN_TILES
    # Only the small-M path splits.
    big = _problem.normalise(*operands(zk.SPLIT_K_MAX_M + 1, 32, 4096, "row", "row"))
    assert zk._splits(big, zk._mma_sync_config(big.m)) == 1


# ------------------------------------------------------------------ the plan cache


class FakeDev:
    """Stands in for zyntax.cuda.DeviceArray (monkeypatched as its type):
    what the plan-cache key and the argument checks read."""

    def __init__(self, shape: tuple[int, int], ptr: int, typestr: str = "<f2") -> None:
        self.shape, self.ptr, self.typestr, self.device = shape, ptr, typestr, 0
        item = 4 if typestr == "<f4" else 2
        self.strides = (shape[1] * item, item)  # bytes, as DeviceArray's
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": self.strides,
            "data": (ptr, False),
            "version": 3,
        }


class Recorder:
    """A loaded kernel whose prepared launches are recorded, not run."""

    def __init__(self, name: str, log: list[tuple[Any, ...]]) -> None:
        self.name, self.log = name, log

    def prepare(self, grid: Any, block: Any, shared: Any, stream: Any) -> Any:
        return lambda *args: self.log.append((self.name, grid, block, args))


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Any:
    log: list[tuple[Any, ...]] = []
    normalised: list[int] = []
    monkeypatch.setattr(zk, "_DeviceArray", FakeDev)
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_80")
    monkeypatch.setattr(zk, "_sm_count", lambda p: 132)
    monkeypatch.setattr(zk, "SPLIT_K_ON_GPU", True)  # what the GPU tests switch on
    monkeypatch.setattr(zk, "_compiled", lambda key, *a: Recorder(key[0], log))
    monkeypatch.setattr(
        zk,
        "_workspace",
        lambda dev, stream, n, kind="partials": FakeDev(
            (1, 1), 1 << 40 if kind == "partials" else 1 << 41, "<f4"
        ),
    )
    real = zk.normalise

    def counting(*a: Any, **kw: Any) -> Any:
        normalised.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(zk, "normalise", counting)
    monkeypatch.setattr(zk, "_plans", {})
    return log, normalised


def test_repeated_calls_reuse_the_plan_with_new_pointers(fake_gpu: Any) -> None:
    log, normalised = fake_gpu
    m, n, k = 16, 4096, 4096
    a, b, out = FakeDev((m, k), 1 << 30), FakeDev((k, n), 1 << 32), FakeDev((m, n), 1 << 34)
    zk.matmul(a, b, out)
    assert len(normalised) == 1 and len(zk._plans) == 1
    (main,) = log  # split-K in one launch
    assert main[0] == "gemm_mma_sync" and main[1][1] > 1  # (tiles, splits)
    # (a, b, out, bias: out when there is none, partials, counters, M, N, K, lda, ldb, ldc)
    assert main[3] == (1 << 30, 1 << 32, 1 << 34, 1 << 34, 1 << 40, 1 << 41, m, n, k, k, n, n)
    # Same signature, other addresses: no normalisation, the new pointers.
    a2, b2, out2 = FakeDev((m, k), 3 << 30), FakeDev((k, n), 3 << 32), FakeDev((m, n), 3 << 34)
    assert zk.matmul(a2, b2, out2) is out2
    assert len(normalised) == 1
    assert log[1][3][:6] == (3 << 30, 3 << 32, 3 << 34, 3 << 34, 1 << 40, 1 << 41)
    # Another shape, dtype, alignment or epilogue is another plan.
    zk.matmul(a, b, FakeDev((m, n), (1 << 34) + 8))
    zk.matmul(a, b, out, activation="relu")
    assert len(normalised) == 3 and len(zk._plans) == 3


def test_cached_calls_still_check_aliasing_and_arguments(fake_gpu: Any) -> None:
    log, _ = fake_gpu
    m, n, k = 16, 256, 512
    a, b, out = FakeDev((m, k), 1 << 30), FakeDev((k, n), 1 << 32), FakeDev((m, n), 1 << 34)
    zk.matmul(a, b, out)
    launches = len(log)
    # An output inside a's memory, with the cached signature: refused, nothing launched.
    inside = FakeDev((m, n), (1 << 30) + 64)
    with pytest.raises(ArgumentError, match="argument 'out': overlaps argument 'a'"):
        zk.matmul(a, b, inside)
    inside_b = FakeDev((m, n), (1 << 32) + 4096)
    with pytest.raises(ArgumentError, match="argument 'out': overlaps argument 'b'"):
        zk.matmul(a, b, inside_b)
    assert len(log) == launches
    # Bad arguments never reach a plan: the full checks name them.
    with pytest.raises(ArgumentError, match="argument 'b': inner dimensions"):
        zk.matmul(a, FakeDev((k + 1, n), 1 << 32), out)
    with pytest.raises(ArgumentError, match="argument 'activation'"):
        zk.matmul(a, b, out, activation="tanh")
    with pytest.raises(ArgumentError, match="argument 'stream'"):
        zk.matmul(a, b, out, stream=7)
    assert len(log) == launches


def test_calls_without_out_reuse_the_plan_and_allocate_each_time(
    fake_gpu: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, normalised = fake_gpu
    m, n, k = 16, 512, 1024
    addrs = iter(range(1 << 36, 1 << 37, 1 << 20))
    made: list[FakeDev] = []

    def fresh(*_: Any) -> FakeDev:
        made.append(FakeDev((m, n), next(addrs)))
        return made[-1]

    monkeypatch.setattr(_problem, "_alloc_out", fresh)
    monkeypatch.setattr(zk, "_allocator", lambda p: lambda a: (o := fresh(), o.ptr))
    a, b = FakeDev((m, k), 1 << 30), FakeDev((k, n), 1 << 32)
    outs = [zk.matmul(a, b) for _ in range(3)]
    assert outs == made and len({o.ptr for o in outs}) == 3  # a new output each call
    assert len(normalised) == 1  # one full check, then the plan
    assert [entry[3][2] for entry in log] == [o.ptr for o in outs]


def test_workspaces_per_stream_grow_by_powers_of_two_and_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zyntax import cuda

    made: list[tuple[int, Any]] = []

    class Buf:
        def __init__(self, size: int, dtype: Any, device: int, stream: Any) -> None:
            self.size, self.dtype, self.zeroed = size, dtype, None
            made.append((size, stream))

        def zero_(self, stream: Any) -> None:
            self.zeroed = stream

    class S:
        handle = 77

    monkeypatch.setattr(cuda, "empty", Buf)
    monkeypatch.setattr(zk, "_workspaces", {})
    monkeypatch.setattr(zk, "_outgrown", [])
    w1 = zk._workspace(0, None, 1000)
    assert w1.size == 1024 and zk._workspace(0, None, 1024) is w1  # reused
    w2 = zk._workspace(0, None, 1025)
    assert w2.size == 2048 and zk._outgrown == [w1]  # the outgrown one is kept
    s = S()
    w3 = zk._workspace(0, s, 10)
    assert w3 is not w2 and made[-1] == (16, s)  # another stream: its own, in its order
    assert w1.zeroed is None  # partials are written before they are read
    c = zk._workspace(0, s, 100, "counters")
    assert c is not w3 and c.size == 128 and c.dtype == np.uint32 and c.zeroed is s


# ------------------------------------------------------------------ PTX (no GPU)


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("la,lb", [("row", "row"), ("col", "col")])
def test_split_k_kernels_assemble(even: bool, la: str, lb: str) -> None:
    import zyntax
    from zyntax import ptxinfo

    cfg = zk._mma_sync_config(16)
    spec = zk.gemm_mma_sync.Spec("bf16", la, lb, True, True, "bf16", "bf16", "gelu", even, True)
    for module in (zk.gemm_mma_sync.build(cfg, spec),):
        for arch in ("sm_80", "sm_90"):
            ptx = zyntax.compile(module, backend="nvptx", arch=arch)
            res = ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, arch).log)
            for kernel, r in res.items():
                # ptxas settles the tail-checked kernels at 128 registers
                # (sm_80 always, sm_90 for 16x128 tiles with column-major
                # operands), where split-K adds a spilled word; whole-tile
                # kernels spill nothing.
                limit = 0 if even else 8
                assert r["spill_store_bytes"] <= limit, (kernel, arch, r)
            assert "%nctaid.y" in ptx and "%ctaid.y" in ptx  # the split index
            assert "atom.gpu.global.add.u32" in ptx  # the arrival counters
            assert "fence.acq_rel.gpu" in ptx and "ld.global.cg.f32" in ptx  # partials via L2
