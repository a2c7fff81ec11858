"""zyntax.kernels.matmul on the reference interpreter (numpy inputs) and its
argument checks. Every result is compared with the float64 product of fresh
random inputs; outputs are poisoned with NaN first. The GPU versions of these
checks are tests/python/gpu/test_matmul_gpu.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import zyntax.kernels.gemm as zk
from zyntax.errors import ArgumentError, ZyntaxError
from zyntax.kernels import _problem

rng = np.random.default_rng()
GELU_C = 0.7978845608028654


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


def operands(m: int, n: int, k: int, dt: Any, la: str, lb: str) -> tuple[Any, Any]:
    a = rng.standard_normal((m, k)).astype(dt)
    b = rng.standard_normal((k, n)).astype(dt)
    # A column-major operand is the transposed view of a contiguous matrix.
    if la == "col":
        a = np.ascontiguousarray(a.T).T
    if lb == "col":
        b = np.ascontiguousarray(b.T).T
    return a, b


SIZES = [(1, 1, 1), (17, 17, 17), (33, 40, 48), (19, 130, 9)]
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SIZES)
def test_mma_sync_f16_on_interpreter(m: int, n: int, k: int, la: str, lb: str) -> None:
    a, b = operands(m, n, k, np.float16, la, lb)
    assert zk.choose_variant(a, b) == "mma_sync"
    out = np.full((m, n), np.nan, np.float32)
    zk.matmul(a, b, out)
    assert rel_err(out, reference(a, b)) < 1e-3


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", SIZES)
def test_simt_f32_on_interpreter(m: int, n: int, k: int, la: str, lb: str) -> None:
    a, b = operands(m, n, k, np.float32, la, lb)
    assert zk.choose_variant(a, b) == "simt"
    out = np.full((m, n), np.nan, np.float32)
    zk.matmul(a, b, out)
    assert rel_err(out, reference(a, b)) < 1e-5


@pytest.mark.parametrize("dt,tol", [(np.float16, 1e-3), (np.float32, 1e-5)])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
def test_epilogue_bias_activation(dt: Any, tol: float, activation: str | None) -> None:
    m, n, k = 37, 136, 40  # two column blocks, a row tail
    a, b = operands(m, n, k, dt, "row", "row")
    bias = rng.standard_normal(n).astype(dt)
    out = np.full((m, n), np.nan, np.float32)
    zk.matmul(a, b, out, bias=bias, activation=activation)
    assert rel_err(out, reference(a, b, bias, activation)) < tol


def test_output_cast_and_allocation() -> None:
    a, b = operands(33, 40, 48, np.float16, "row", "col")
    got = zk.matmul(a, b)  # allocated like the inputs: numpy f16
    assert isinstance(got, np.ndarray) and got.dtype == np.float16 and got.shape == (33, 40)
    assert rel_err(got, reference(a, b)) < 2e-3
    a32, b32 = operands(17, 24, 8, np.float32, "row", "row")
    got16 = zk.matmul(a32, b32, out_dtype="f16")
    assert got16.dtype == np.float16
    assert rel_err(got16, reference(a32, b32)) < 2e-3


def _bits_bf16(x: Any) -> Any:
    """float32 -> bf16 bit patterns (round to nearest even) as uint16."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def _from_bf16(bits: Any) -> Any:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("la,lb", LAYOUTS)
def test_mma_sync_bf16_on_interpreter(la: str, lb: str) -> None:
    # numpy has no bfloat16: build the problem from uint16 bit patterns.
    m, n, k = 33, 40, 48
    a = _bits_bf16(rng.standard_normal((m, k)))
    b = _bits_bf16(rng.standard_normal((k, n)))
    host_a = a if la == "row" else np.ascontiguousarray(a.T)
    host_b = b if lb == "row" else np.ascontiguousarray(b.T)
    out = np.full((m, n), np.nan, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)

    def op(name: str, rows: int, cols: int, layout: str, host: Any) -> Any:
        ld = cols if layout == "row" else rows
        return _problem.Operand(name, "bf16", rows, cols, layout, ld, 0, None, host)

    p = _problem.Problem(
        m=m,
        n=n,
        k=k,
        a=op("a", m, k, la, host_a),
        b=op("b", k, n, lb, host_b),
        out=_problem.Operand("out", "f32", m, n, "row", n, 0, None, out),
        bias=_problem.Operand("bias", "f32", 1, n, "row", n, 0, None, bias),
        activation="relu",
        backend="interp",
        device=None,
        out_obj=out,
    )
    zk._mma_sync_run(p, "interp")
    ref = reference(_from_bf16(a), _from_bf16(b), bias, "relu")
    assert rel_err(out, ref) < 1e-5  # exact bf16 inputs, f32 accumulation


# ------------------------------------------------------------------ bad input


class FakeGpu:
    """A GPU matrix as far as the argument checks can tell (never launched)."""

    def __init__(
        self, shape: tuple[int, ...], typestr: str = "<f2", strides: Any = None, device: int = 0
    ) -> None:
        self.device = device
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (1 << 20, False),
            "version": 3,
        }


class FakeTorch:
    """Looks like a CUDA torch tensor of an fp8 dtype to the checks."""

    __module__ = "torch.fake"

    def __init__(self, shape: tuple[int, int], dtype: str) -> None:
        self.shape, self.dtype, self.is_cuda = shape, dtype, True
        self.device = type("dev", (), {"index": 0, "type": "cuda"})()

    def stride(self) -> tuple[int, int]:
        return (self.shape[1], 1)

    def data_ptr(self) -> int:
        return 1 << 20


def bad(match: str, *args: Any, **kw: Any) -> None:
    with pytest.raises(ArgumentError, match=match):
        zk.matmul(*args, **kw)


def test_bad_input_is_a_typed_error_naming_the_argument() -> None:
    a16, b16 = operands(8, 8, 8, np.float16, "row", "row")
    bad("argument 'b': inner dimensions", a16, np.zeros((9, 8), np.float16))
    bad("argument 'b': dtype f32 does not match a's f16", a16, b16.astype(np.float32))
    bad("argument 'activation': unknown activation 'tanh'", a16, b16, activation="tanh")
    bad("argument 'out_dtype'", a16, b16, out_dtype="f64")
    bad(r"argument 'bias': shape \(7,\)", a16, b16, bias=np.zeros(7, np.float16))
    bad(r"argument 'bias': shape \(8, 1\)", a16, b16, bias=np.zeros((8, 1), np.float16))
    bad("argument 'a': dtype float64", a16.astype(np.float64), b16)
    bad("argument 'a': dtype int32", np.zeros((8, 8), np.int32), b16)
    bad("argument 'a': expected a 2-D or 3-D tensor", np.zeros((2, 2, 8, 8), np.float16), b16)
    bad("argument 'variant': unknown variant 'cutlass'", a16, b16, variant="cutlass")
    bad("argument 'variant': no matmul variant runs f16", a16, b16, variant="simt")
    bad("argument 'out': shape", a16, b16, np.zeros((8, 9), np.float32))
    bad(
        "argument 'out': dtype f16 differs", a16, b16, np.zeros((8, 8), np.float16), out_dtype="f32"
    )
    bad("argument 'a': expected a zyntax DeviceArray", [[1.0]], b16)
    bad("argument 'b': a and b must both be numpy", FakeGpu((8, 8)), b16)


def test_bad_gpu_inputs_are_rejected_before_any_launch() -> None:
    a = FakeGpu((64, 32))
    bad("argument 'b': is on device 1, a on device 0", a, FakeGpu((32, 16), device=1))
    # Neither rows nor columns contiguous (every other column of a matrix).
    bad(
        "argument 'a': strides .* neither row- nor column-major",
        FakeGpu((64, 32), strides=(256, 4)),
        FakeGpu((32, 16)),
    )
    bad("argument 'a': dtype '<i4'", FakeGpu((64, 32), "<i4"), FakeGpu((32, 16), "<i4"))
    o = FakeGpu((64, 16), "<f4", device=1)
    bad("argument 'out': is on device 1", a, FakeGpu((32, 16)), o)
    bad(
        "argument 'out': must be row-major",
        a,
        FakeGpu((32, 16)),
        FakeGpu((64, 16), "<f4", strides=(4, 256)),
    )


def test_fp8_needs_an_arch_with_fp8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_80")
    a, b = FakeTorch((64, 32), "torch.float8_e4m3fn"), FakeTorch((32, 16), "torch.float8_e4m3fn")
    out = FakeGpu((64, 16), "<V2")  # bf16, the fp8 output dtype
    out.__cuda_array_interface__["data"] = (1 << 24, False)  # apart from the inputs
    with pytest.raises(ArgumentError, match=r"argument 'a': fp8 .* needs sm_89"):
        zk.matmul(a, b, out)
    # On sm_90 only the sm90 variant runs fp8; without it the error says why.
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90")
    monkeypatch.setattr(zk, "_sm90_module", lambda: None)
    with pytest.raises(ZyntaxError, match="no matmul variant runs e4m3"):
        zk.matmul(a, b, out)


def test_registry_order_and_variant_forcing() -> None:
    assert [v.name for v in zk.REGISTRY] == ["sm90", "mma_sync", "simt", "tile"]
    a, b = operands(4, 4, 4, np.float16, "row", "row")
    # On the interpreter sm90 never applies; mma_sync is the choice and can be forced.
    assert zk.choose_variant(a, b) == "mma_sync"
    assert zk.choose_variant(a, b, variant="mma_sync") == "mma_sync"
    with pytest.raises(ArgumentError, match="sm90"):
        zk.choose_variant(a, b, variant="sm90")


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("out_dtype", ["f32", "f16"])
def test_mma_sync_even_tiles_have_no_checks_and_vector_stores(
    la: str, lb: str, out_dtype: str
) -> None:
    # M, N, K multiples of the tile (and 16-byte aligned): the check-free kernel.
    m, n, k = 128, 128, 64
    a, b = operands(m, n, k, np.float16, la, lb)
    p = _problem.normalise(a, b, out_dtype=out_dtype)
    cfg = zk._mma_sync_config(m)
    assert zk._even(p, cfg.bm, cfg.bn, cfg.bk)
    bias = rng.standard_normal(n).astype(np.float32)
    got = zk.matmul(a, b, bias=bias, activation="gelu", out_dtype=out_dtype)
    assert rel_err(got, reference(a, b, bias, "gelu")) < (1e-3 if out_dtype == "f32" else 2e-3)


@pytest.mark.parametrize(
    "cfg",
    [
        dict(bm=128, bn=128, bk=64, wm=64, wn=64, stages=3),
        dict(bm=64, bn=128, bk=32, wm=32, wn=64, stages=4),
        dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4, frag_pipeline=True),
        dict(bm=64, bn=64, bk=64, wm=32, wn=32, stages=3, frag_pipeline=True),
        dict(bm=128, bn=128, bk=32, wm=64, wn=64, stages=4),  # the large-M default
    ],
)
@pytest.mark.parametrize("la,lb", [("row", "row"), ("col", "col")])
def test_mma_sync_other_tile_configs(
    cfg: dict[str, Any], la: str, lb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zk, "_mma_sync_config", lambda m: zk.gemm_mma_sync.Config(**cfg))
    for m, n, k in [(128, 128, 128), (70, 130, 72), (64, 64, 16)]:
        a, b = operands(m, n, k, np.float16, la, lb)
        out = np.full((m, n), np.nan, np.float32)
        zk.matmul(a, b, out)
        assert rel_err(out, reference(a, b)) < 1e-3


def test_gpu_modules_come_from_the_disk_cache_on_the_second_process(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The GPU path compiles once, stores the PTX keyed by (variant, config,
    # spec, arch) and the kernel's source; a later process skips the builder.
    from zyntax import cuda

    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    loaded: list[tuple[str, Any]] = []

    class FakeModule:
        def kernel(self, name: str) -> str:
            return name

    def fake_load(ptx: str, device: int = 0, *, signatures: Any = None, **_: Any) -> Any:
        loaded.append((ptx, signatures))
        return FakeModule()

    monkeypatch.setattr(cuda, "load_module", fake_load)
    builds: list[int] = []
    cfg = zk.gemm_simt.Config()
    spec = zk.gemm_simt.Spec("row", "col", True, True, "f32", None, "relu")

    def build() -> Any:
        builds.append(1)
        return zk.gemm_simt.build(cfg, spec)

    key = ("gemm_simt", cfg, spec, "sm_80", 0)
    assert zk._load_cuda(key, build, 0, zk.gemm_simt) == "gemm_simt"
    assert zk._load_cuda(key, build, 0, zk.gemm_simt) == "gemm_simt"
    assert len(builds) == 1  # the second load was a cache hit
    assert loaded[0] == loaded[1] and ".entry gemm_simt" in loaded[0][0]
    assert loaded[0][1]["gemm_simt"]["params"][0] == "ptr<global, f32>"
    # Another spec is another entry.
    other = (
        "gemm_simt",
        cfg,
        spec.__class__("row", "row", True, True, "f32", None, None),
        "sm_80",
        0,
    )
    zk._load_cuda(other, lambda: zk.gemm_simt.build(cfg, other[2]), 0, zk.gemm_simt)
    assert loaded[2][0] != loaded[0][0]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 17, 17), (33, 40, 48), (130, 140, 70)])
def test_mma_sync_tf32_on_interpreter(m: int, n: int, k: int, la: str, lb: str) -> None:
    a, b = operands(m, n, k, np.float32, la, lb)
    assert zk.choose_variant(a, b) == "simt"  # exact fp32 unless tf32 is allowed
    assert zk.choose_variant(a, b, allow_tf32=True) == "mma_sync"
    out = np.full((m, n), np.nan, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    zk.matmul(a, b, out, bias=bias, activation="relu", allow_tf32=True)
    # Exactly the product of the inputs rounded to nearest tf32, summed in f32 ...
    assert rel_err(out, reference(_tf32(a), _tf32(b), bias, "relu")) < 1e-5
    # ... which is ~3e-4 from the f32 product on random data (one element can
    # flip sign under the ReLU: no tolerance is meaningful there).
    if m > 1:
        assert rel_err(out, reference(a, b, bias, "relu")) < 1e-3


def _tf32(x: Any) -> Any:
    """f32 -> tf32 rounded to nearest, ties away (cvt.rna.tf32.f32), as f32."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def test_out_may_not_alias_an_input(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = operands(8, 8, 8, np.float16, "row", "row")
    bad("argument 'out': overlaps argument 'a'", a, b, a)
    bad("argument 'out': overlaps argument 'b'", a, b, b)
    big = np.zeros((16, 8), np.float16)
    bad("argument 'out': overlaps argument 'a'", big[:8], b, big[4:12])
    zk.matmul(a, b, big[8:])  # adjacent, not overlapping: fine
    bad(
        "argument 'out': a numpy output must be C-contiguous",
        a,
        b,
        np.zeros((8, 16), np.float32)[:, ::2],
    )
    # GPU operands: by address range (a at 1 MiB, 64 x 32 f16 = 4 KiB).
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90")
    a_gpu = FakeGpu((64, 32))
    inside = FakeGpu((64, 16))
    inside.__cuda_array_interface__["data"] = ((1 << 20) + 2048, False)
    bad("argument 'out': overlaps argument 'a'", a_gpu, FakeGpu((32, 16)), inside)


def test_stream_must_be_a_zyntax_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90")
    out = FakeGpu((64, 16), "<f4")
    out.__cuda_array_interface__["data"] = (1 << 24, False)
    a, b = FakeGpu((64, 32)), FakeGpu((32, 16))
    b.__cuda_array_interface__["data"] = (1 << 22, False)
    bad("argument 'stream': expected a zyntax.cuda.Stream, got int", a, b, out, stream=7)


def test_sm90_variant_is_called_with_the_normalised_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The contract with gemm_sm90: sm90_supports(dtypes, layouts) and
    # matmul_sm90(a, b, out, ...) over plain CUDA-array-interface objects.
    calls: list[tuple[Any, ...]] = []

    class FakeSm90:
        @staticmethod
        def sm90_supports(a_dt: str, b_dt: str, out_dt: str, la: str, lb: str) -> bool:
            return a_dt in ("bf16", "f16", "e4m3", "f32")

        @staticmethod
        def matmul_sm90(a: Any, b: Any, out: Any, **kw: Any) -> None:
            calls.append((a, b, out, kw))

    # What cuda.device_arch gives on an H100/H200 (wgmma needs sm_90a).
    monkeypatch.setattr(zk, "_arch_of", lambda p: "sm_90a")
    monkeypatch.setattr(zk, "_sm90_module", lambda: FakeSm90)
    monkeypatch.setattr(zk, "SMALL_M", 0)  # M = 64 counts as large here
    monkeypatch.setattr(zk, "TILE_MAX_M", 0)  # and the tile program is not preferred
    # (an epilogue goes to the tile program where its WS pipeline fits: not here)
    monkeypatch.setattr(zk, "ACTIVATION_ON_TILE", False)
    monkeypatch.setattr(zk, "PLAIN_ON_TILE", False)  # nor a plain product (both ask the SMs)
    a = FakeGpu((64, 32), "<V2")  # bf16, row-major
    b = FakeGpu((16, 32), "<V2", strides=None)  # stored 16 x 32: b is its transpose
    b_iface = b.__cuda_array_interface__
    b_iface["data"] = (1 << 22, False)
    bt = FakeGpu((32, 16), "<V2", strides=(2, 64))  # the column-major 32 x 16 view
    bt.__cuda_array_interface__["data"] = (1 << 22, False)
    out = FakeGpu((64, 16), "<f4")
    out.__cuda_array_interface__["data"] = (1 << 24, False)
    assert zk.choose_variant(a, bt) == "sm90"
    zk.matmul(a, bt, out, activation="gelu")
    (ca, cb, co, kw) = calls[0]
    assert (ca.dtype, ca.layout, cb.dtype, cb.layout, co.dtype) == (
        "bf16",
        "row",
        "bf16",
        "col",
        "f32",
    )
    assert cb.__cuda_array_interface__["shape"] == (32, 16)
    assert cb.__cuda_array_interface__["strides"] == (2, 64)
    assert cb.__cuda_array_interface__["data"][0] == 1 << 22
    assert kw["activation"] == "gelu" and kw["a_layout"] == "row" and kw["b_layout"] == "col"
    # f32 goes to sm90 only as tf32.
    a32, b32 = FakeGpu((64, 32), "<f4"), FakeGpu((32, 16), "<f4")
    b32.__cuda_array_interface__["data"] = (1 << 22, False)
    assert zk.choose_variant(a32, b32) == "simt"
    assert zk.choose_variant(a32, b32, allow_tf32=True) == "sm90"
    # Up to SMALL_M rows the registry tries mma_sync's small tiles first.
    monkeypatch.setattr(zk, "SMALL_M", 64)
    assert zk.choose_variant(a, bt) == "mma_sync"
    assert zk.choose_variant(a, bt, variant="sm90") == "sm90"


def test_sm90_calls_are_planned_on_their_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sm90 variant returns a plan like the others (a repeated call only
    # checks aliasing and relaunches), and launches on the problem's stream.
    seen: list[Any] = []

    class FakeSm90:
        @staticmethod
        def sm90_supports(*_: Any) -> bool:
            return True

        @staticmethod
        def matmul_sm90(a: Any, b: Any, out: Any, **kw: Any) -> Any:
            seen.append(("first", kw["stream"], a.__cuda_array_interface__["data"][0]))
            return lambda *ptrs: seen.append(("again", *ptrs))

    monkeypatch.setattr(zk, "_sm90_module", lambda: FakeSm90)
    a, b = FakeGpu((64, 32)), FakeGpu((32, 16))
    out = FakeGpu((64, 16))
    out.__cuda_array_interface__["data"] = (1 << 24, False)
    stream = object()
    p = dataclasses.replace(zk.normalise(a, b, out), stream=stream)
    plan = zk._sm90_run(p, "sm_90")
    assert seen == [("first", stream, 1 << 20)] and isinstance(plan, zk._Sm90Plan)
    plan(1 << 20, 1 << 21, 1 << 24, 0)
    assert seen[-1] == ("again", 1 << 20, 1 << 21, 1 << 24, 0)
    with pytest.raises(ArgumentError, match="argument 'out': overlaps argument 'b'"):
        plan(1 << 20, 1 << 21, (1 << 21) + 64, 0)
    assert len(seen) == 2  # nothing launched
    # Padded operand copies or fp8 scales: no plan, every call takes the full path.
    FakeSm90.matmul_sm90 = staticmethod(lambda *a, **kw: None)  # type: ignore[method-assign]
    assert zk._sm90_run(p, "sm_90") is None
