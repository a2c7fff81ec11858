"""Errors say what actually went wrong: the worker process for untrusted
compiles, the GPU probe, bad string annotations, and type errors whose
suggested fix compiles."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import saxpy
import zyntax
from zyntax import _native, hir
from zyntax.frontend import pipeline

needs_llvm = pytest.mark.skipif(not hasattr(_native, "compile_ptx"), reason="built without LLVM")
needs_interp = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="built without the interpreter"
)


# --------------------------------------------------------------------------- worker process


@needs_llvm
def test_isolated_compile_gives_the_same_ptx_and_ir() -> None:
    m = saxpy.build()
    assert zyntax.compile(m, arch="sm_80", isolate=True) == zyntax.compile(m, arch="sm_80")
    ir = zyntax.compile(m, arch="sm_90", emit="llvm", isolate=True)
    assert ir == zyntax.compile(m, arch="sm_90", emit="llvm")
    res = zyntax.compile_ptx(m, "sm_80", isolate=True)
    assert res.kernels == ["saxpy"] and res.arch == "sm_80"


@needs_llvm
def test_an_abort_in_the_worker_is_a_compile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test hook makes the worker abort, as LLVM does on a fatal error: this
    process gets a CompileError naming the signal and keeps working."""
    m = saxpy.build()
    monkeypatch.setenv("ZYNTAX_WORKER_TEST_ABORT", "1")
    with pytest.raises(
        zyntax.CompileError, match=r"killed the compiler worker process \(SIGABRT\)"
    ):
        zyntax.compile(m, arch="sm_80", isolate=True)
    # The hook is read by the worker only: in-process compiles ignore it.
    assert ".entry saxpy" in zyntax.compile(m, arch="sm_80")


@needs_llvm
def test_worker_errors_keep_their_class() -> None:
    m = hir.Module("bad", targets=["sm_80"])
    with m.kernel("k", [hir.ptr("global", hir.f32)]) as b:
        b.add(b.params[0], b.params[0])  # the verifier rejects pointer arithmetic by add
    with pytest.raises(zyntax.VerifyError) as direct:
        zyntax.compile(m, arch="sm_80")
    with pytest.raises(zyntax.VerifyError) as isolated:
        zyntax.compile(m, arch="sm_80", isolate=True)
    assert str(isolated.value) == str(direct.value)
    with pytest.raises(zyntax.ArgumentError, match="module"):
        zyntax.compile("not a module", isolate=True)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- gpu_available


class _FakeCuda:
    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.calls = 0

    def device_count(self) -> int:
        self.calls += 1
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return int(self.outcome)


def _cuda_error(kind: str) -> zyntax.CudaError:
    e = zyntax.CudaError(f"fake CUDA failure ({kind})")
    e.kind = kind  # type: ignore[attr-defined]
    return e


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> Any:
    import zyntax.cuda as real

    def install(outcome: Any) -> _FakeCuda:
        fake = _FakeCuda(outcome)
        monkeypatch.setattr(real, "device_count", fake.device_count)
        pipeline.gpu_available.cache_clear()
        return fake

    yield install
    pipeline.gpu_available.cache_clear()


@pytest.mark.skipif(not hasattr(_native, "cuda_device_count"), reason="built without CUDA")
@pytest.mark.parametrize("kind", ["no_driver", "no_device"])
def test_no_driver_or_device_means_no_gpu(fake_cuda: Any, kind: str) -> None:
    fake_cuda(_cuda_error(kind))
    assert pipeline.gpu_available() is False


@pytest.mark.skipif(not hasattr(_native, "cuda_device_count"), reason="built without CUDA")
@pytest.mark.parametrize(
    "failure", [_cuda_error("driver"), RuntimeError("a bug"), MemoryError()], ids=str
)
def test_other_gpu_probe_failures_propagate_and_are_not_cached(
    fake_cuda: Any, failure: BaseException
) -> None:
    fake_cuda(failure)
    with pytest.raises(type(failure)):
        pipeline.gpu_available()
    # Nothing wrong was cached: once the driver works, the GPU is seen.
    fake = fake_cuda(2)
    assert pipeline.gpu_available() is True and fake.calls == 1


# --------------------------------------------------------------------------- annotations


def test_a_bad_string_annotation_is_an_error_naming_it() -> None:
    src = (
        "import zyntax\n"
        "@zyntax.kernel\n"
        "def k(x: 'zyntax.Array[zyntax.f32, 1]', n: 'zyntax.nosuch'):\n"
        "    pass\n"
    )
    ns: dict[str, Any] = {}
    with pytest.raises(zyntax.KernelError, match=r"'zyntax\.nosuch' of parameter 'n'") as info:
        exec(compile(src, "<bad-annotation>", "exec", dont_inherit=True), ns)
    assert isinstance(info.value, zyntax.ZyntaxError)
    assert "AttributeError" in str(info.value)


def test_good_string_annotations_still_work() -> None:
    src = (
        "import zyntax\n"
        "@zyntax.kernel\n"
        "def k(x: 'zyntax.Array[zyntax.f32, 1]', n: 'zyntax.u32'):\n"
        "    pass\n"
    )
    ns: dict[str, Any] = {}
    exec(compile(src, "<good-annotation>", "exec", dont_inherit=True), ns)
    assert ns["k"].signature_specs() is not None


# --------------------------------------------------------------------------- u64 + i32


@needs_interp
def test_the_u64_plus_i32_error_suggests_conversions_that_compile() -> None:
    @zyntax.kernel
    def mixed(out: zyntax.Array[zyntax.u64, 1], a: zyntax.u64, b: zyntax.i32) -> None:
        out[0] = a + b

    with pytest.raises(zyntax.KernelError) as info:
        mixed.run_cpu(np.zeros(1, np.uint64), np.uint64(5), np.int32(7), grid=1, block=1)
    msg = str(info.value)
    assert "zyntax.u64(b)" in msg and "zyntax.i64(a)" in msg, msg

    # Both suggestions compile and compute the sum.
    @zyntax.kernel
    def as_u64(out: zyntax.Array[zyntax.u64, 1], a: zyntax.u64, b: zyntax.i32) -> None:
        out[0] = a + zyntax.u64(b)

    @zyntax.kernel
    def as_i64(out: zyntax.Array[zyntax.i64, 1], a: zyntax.u64, b: zyntax.i32) -> None:
        out[0] = zyntax.i64(a) + b

    rng = np.random.default_rng()
    a, b = int(rng.integers(1, 2**40)), int(rng.integers(0, 2**30))
    o1 = np.zeros(1, np.uint64)
    as_u64.run_cpu(o1, np.uint64(a), np.int32(b), grid=1, block=1)
    o2 = np.zeros(1, np.int64)
    as_i64.run_cpu(o2, np.uint64(a), np.int32(b), grid=1, block=1)
    assert int(o1[0]) == a + b == int(o2[0])
