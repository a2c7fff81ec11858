"""Every value crossing the Python boundary is type- and range-checked: hostile
arguments to each public entry point raise a `ZyntaxError` subclass naming the
parameter (never OverflowError, TypeError, ValueError, KeyError or
UnicodeEncodeError); read-only numpy inputs that are only read work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import host_latency
import saxpy
import zyntax
from zyntax import _native, cuda, hir, interp

needs_interp = pytest.mark.skipif(
    not hasattr(_native, "interp_launch"), reason="built without the interpreter"
)
needs_llvm = pytest.mark.skipif(not hasattr(_native, "cpu_compile"), reason="built without LLVM")

SURROGATE = "\udc80"
rng = np.random.default_rng()


def _read_only(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a.flags.writeable = False
    return a


def _named(e: BaseException, name: str) -> bool:
    """The parameter is named in the message or in PyO3's note on it."""
    return name in str(e) or any(name in n for n in getattr(e, "__notes__", []))


# (label, call, a word the error must name) for every public entry point.
def _hostile_calls() -> list[tuple[str, Callable[[], object], str]]:
    sm, hm = saxpy.build(), host_latency.build()
    x, y = np.ones(8, np.float32), np.ones(8, np.float32)
    d = np.ones(8, np.float64)
    cm = zyntax.cpu.compile(hm)
    cs = zyntax.cpu.compile(sm)

    def run(*a: Any, **k: Any) -> Callable[[], object]:
        return lambda: interp.launch(sm, "saxpy", *a, **k)

    return [
        ("interp grid 2**32", run(2**32, 1, 8, 2.0, x, y), "grid"),
        ("interp grid 0", run(0, 1, 8, 2.0, x, y), "grid"),
        ("interp grid 'ab'", run("ab", 1, 8, 2.0, x, y), "grid"),
        ("interp grid '12'", run("12", 1, 8, 2.0, x, y), "grid"),
        ("interp grid [1.9]", run([1.9], 1, 8, 2.0, x, y), "grid"),
        ("interp grid 4 dims", run((1, 1, 1, 1), 1, 8, 2.0, x, y), "grid"),
        ("interp block -1", run(1, -1, 8, 2.0, x, y), "block"),
        ("interp block None", run(1, None, 8, 2.0, x, y), "block"),
        ("interp shared_bytes -4", run(1, 8, 8, 2.0, x, y, shared_bytes=-4), "shared_bytes"),
        ("interp shared_bytes 2**70", run(1, 8, 8, 2.0, x, y, shared_bytes=2**70), "shared_bytes"),
        ("interp fuel -1", run(1, 8, 8, 2.0, x, y, fuel=-1), "fuel"),
        ("interp fuel 1.5", run(1, 8, 8, 2.0, x, y, fuel=1.5), "fuel"),
        ("interp arg str", run(1, 8, 8, "2.0", x, y), "args[1]"),
        ("interp arg list", run(1, 8, 8, 2.0, [1.0], y), "args[2]"),
        ("interp arg 2**80", run(1, 8, 2**80, 2.0, x, y), "argument 0"),
        ("interp arg dtype", run(1, 8, 8, 2.0, d, y), "argument 2"),
        ("interp name", lambda: interp.launch(sm, "sax" + SURROGATE, 1, 8, 8, 2.0, x, y), "name"),
        ("interp target", lambda: interp.launch(3, 1, 1), "Module"),
        ("interp call module", lambda: interp.call("m", "dot"), "Module"),
        ("interp call fuel", lambda: interp.call(hm, "dot", d, d, 8, fuel=-2), "fuel"),
        ("cpu getitem nope", lambda: cm["nope"], "@dot"),
        ("cpu getitem int", lambda: cm[3], "str"),
        ("cpu getitem surrogate", lambda: cm["d" + SURROGATE], "Unicode"),
        ("cpu call -1", lambda: cm["dot"](d, d, -1), "argument 2"),
        ("cpu call 2**70", lambda: cm["dot"](d, d, 2**70), "argument 2"),
        ("cpu call str", lambda: cm["dot"](d, d, "8"), "argument 2"),
        ("cpu call float array", lambda: cm["dot"](x, d, 8), "argument 0"),
        ("cpu call arity", lambda: cm["dot"](d), "takes 3"),
        ("cpu call kernel", lambda: cs["saxpy"], "launch"),
        ("cpu time n", lambda: cm["dot"].time(d, d, 8, n=-1), "'n'"),
        ("cpu time batch", lambda: cm["dot"].time(d, d, 8, batch=0), "batch"),
        ("cpu launch grid", lambda: cs.launch("saxpy", "ab", 1, 8, 2.0, x, y), "grid"),
        ("cpu launch grid 2**32", lambda: cs.launch("saxpy", 2**32, 1, 8, 2.0, x, y), "grid"),
        (
            "cpu launch shared",
            lambda: cs.launch("saxpy", 1, 1, 8, 2.0, x, y, shared_bytes=-4),
            "shared_bytes",
        ),
        ("cpu launch nope", lambda: cs.launch("nope", 1, 1), "@nope"),
        ("cpu compile module", lambda: zyntax.cpu.compile("m"), "module"),
        ("cpu compile cpu", lambda: zyntax.cpu.compile(hm, cpu="x" + SURROGATE), "Unicode"),
        ("cpu compile opt", lambda: zyntax.cpu.compile(hm, opt_level=3), "str"),
        ("cpu compile interp_kernels", lambda: zyntax.cpu.compile(hm, interp_kernels=[1]), "str"),
        ("cpu emit kind", lambda: zyntax.cpu.emit(hm, "exe"), "kind"),
        ("cpu emit module", lambda: zyntax.cpu.emit(None), "module"),
        ("compile module", lambda: zyntax.compile("not a module"), "module"),
        ("compile arch int", lambda: zyntax.compile(sm, arch=90), "str"),
        ("compile arch surrogate", lambda: zyntax.compile(sm, arch=SURROGATE), "Unicode"),
        ("compile ptx_version", lambda: zyntax.compile(sm, ptx_version=7.8), "str"),
        ("compile_ptx module", lambda: zyntax.compile_ptx(b"zir"), "module"),
        ("validate_ptx text", lambda: zyntax.validate_ptx(SURROGATE, "sm_80"), "Unicode"),
        ("validate_ptx int", lambda: zyntax.validate_ptx(3, "sm_80"), "str"),
        ("parse_zir surrogate", lambda: hir.parse_zir('module "a' + SURROGATE + '"\n'), "text"),
        ("parse_zir bytes", lambda: hir.parse_zir(b"module"), "text"),
        ("parse_zir filename", lambda: hir.parse_zir('module "a"\n', SURROGATE), "filename"),
        ("type_ surrogate", lambda: hir.type_("f" + SURROGATE), "text"),
    ]


@needs_interp
@needs_llvm
@pytest.mark.parametrize("case", range(len(_hostile_calls())))
def test_hostile_arguments_raise_typed_errors(case: int) -> None:
    label, call, name = _hostile_calls()[case]
    with pytest.raises(zyntax.ZyntaxError) as info:
        call()
    assert _named(info.value, name), f"{label}: {type(info.value).__name__}: {info.value}"


# --------------------------------------------------------------------------- strings and CUDA args


def _set(obj: Any, attr: str, value: Any) -> Callable[[], object]:
    return lambda: setattr(obj, attr, value)


# A lone surrogate in every string parameter of the bindings, and hostile values
# for the zyntax.cuda entry points that are checked before any driver call
# (so they need no GPU). (label, call, a word the error must name)
def _string_and_cuda_calls() -> list[tuple[str, Callable[[], object], str]]:
    s = SURROGATE
    m = hir.Module("m", targets=["sm_80"])
    m.device_function("g", [hir.f32], [hir.f32])
    b = m.kernel("k", [hir.ptr("global", hir.f32), hir.u32])
    p, n = b.params
    x = np.ones(4, np.float32)
    calls: list[tuple[str, Callable[[], object], str]] = [
        ("Type.parse", lambda: hir.Type.parse("f32" + s), "text"),
        ("Module name", lambda: hir.Module("m" + s), "name"),
        ("Module targets", lambda: hir.Module("m", targets=["sm_80" + s]), "targets"),
        ("Module ptx_version", lambda: hir.Module("m", ptx_version="7." + s), "ptx_version"),
        ("Module.targets =", _set(m, "targets", [s]), "Unicode"),
        ("Module.ptx_version =", _set(m, "ptx_version", s), "Unicode"),
        ("Module.from_json", lambda: hir.Module.from_json("{" + s), "text"),
        ("Module.signature", lambda: m.signature("g" + s), "name"),
        ("Module.kind", lambda: m.kind("g" + s), "name"),
        ("Module.function_zir", lambda: m.function_zir("g" + s), "name"),
        ("Module.kernel name", lambda: m.kernel("k" + s, []), "name"),
        ("Module.kernel arch", lambda: m.kernel("k2", [], arch=s), "arch"),
        ("Module.kernel opt_level", lambda: m.kernel("k3", [], opt_level=s), "opt_level"),
        ("Module.device_function", lambda: m.device_function("d" + s, []), "name"),
        ("Module.device_function opt", lambda: m.device_function("d", [], opt_level=s), "opt"),
        ("Module.host_function", lambda: m.host_function("h" + s, []), "name"),
        ("set_location", lambda: b.set_location("f" + s + ".py"), "file"),
        ("binary op", lambda: b.binary("add" + s, n, n), "op"),
        ("unary op", lambda: b.unary("neg" + s, n), "op"),
        ("cmp op", lambda: b.cmp("lt" + s, n, n), "op"),
        ("fence scope", lambda: b.fence(s), "scope"),
        ("atomic op", lambda: b.atomic(s, p, 1.0), "op"),
        ("atomic scope", lambda: b.atomic("add", p, 1.0, s), "scope"),
        ("atomic_cas scope", lambda: b.atomic_cas(p, 1.0, 2.0, s), "scope"),
        ("atomic_add scope", lambda: b.atomic_add(p, 1.0, s), "scope"),
        ("shfl mode", lambda: b.shfl(s, n, 0), "mode"),
        ("vote mode", lambda: b.vote(s, n), "mode"),
        ("mma_load layout", lambda: b.mma_load(p, p, 16, s), "layout"),
        ("mma_store layout", lambda: b.mma_store(p, p, 16, s), "layout"),
        ("cp_async cache", lambda: b.cp_async(p, p, 16, s), "cache"),
        ("ptr space", lambda: hir.ptr("global" + s, hir.f32), "space"),
        ("frag kind", lambda: hir.frag(s, "m16n16k16", hir.f16, "row"), "kind"),
        ("frag shape", lambda: hir.frag("a", s, hir.f16, "row"), "shape"),
        ("frag layout", lambda: hir.frag("a", "m16n16k16", hir.f16, s), "layout"),
        # zyntax.cuda: argument checks come before the driver is asked.
        ("cuda.Device -1", lambda: cuda.Device(-1), "ordinal"),
        ("cuda.Device str", lambda: cuda.Device("0"), "ordinal"),
        ("cuda.Stream -1", lambda: cuda.Stream(-1), "device"),
        ("cuda.Stream.from_handle", lambda: cuda.Stream.from_handle(-1), "handle"),
        ("cuda.Stream.legacy_default", lambda: cuda.Stream.legacy_default(2**40), "device"),
        ("cuda.Event -1", lambda: cuda.Event(-1), "device"),
        ("cuda.device_arch -1", lambda: cuda.device_arch(-1), "ordinal"),
        ("cuda.synchronize -1", lambda: cuda.synchronize(-1), "device"),
        ("cuda.empty -1", lambda: cuda.empty(-1, np.float32), "shape"),
        ("cuda.empty 2**70", lambda: cuda.empty(2**70, np.float32), "shape"),
        ("cuda.empty (2, -1)", lambda: cuda.empty((2, -1), np.float32), "shape"),
        ("cuda.empty 1.5", lambda: cuda.empty(1.5, np.float32), "shape"),
        ("cuda.empty device", lambda: cuda.empty(4, np.float32, -1), "device"),
        ("cuda.managed_empty", lambda: cuda.managed_empty(-4, np.float32), "shape"),
        ("cuda.to_device device", lambda: cuda.to_device(x, -1), "device"),
        ("cuda.PinnedBuffer", lambda: cuda.PinnedBuffer(-1), "nbytes"),
        ("cuda.pinned_empty", lambda: cuda.pinned_empty(-1), "shape"),
        ("cuda.load_module int", lambda: cuda.load_module(3), "image"),
        ("cuda.load_module hir", lambda: cuda.load_module("ptx", hir=3), "hir"),
        ("cuda.load_module device", lambda: cuda.load_module("ptx", -1), "device"),
        ("cuda.Module.load int", lambda: cuda.Module.load(3), "image"),
        ("cuda.Module.load text", lambda: cuda.Module.load("//" + s), "image"),
        ("cuda.Module.load zir", lambda: cuda.Module.load("//", zir=s), "zir"),
        ("cuda.from_dlpack", lambda: cuda.from_dlpack(3), "obj"),
        ("cuda.from_cuda_array_interface", lambda: cuda.from_cuda_array_interface(3), "obj"),
        ("cuda.Program shape", lambda: cuda.Program().input("x", -1), "shape"),
        ("cuda.Program kernel", lambda: cuda.Program().launch(print, 1, 1), "kernel"),
    ]
    if hasattr(_native, "cli_main"):
        calls.append(("cli_main argv", lambda: _native.cli_main(["zyntax", s]), "argv"))
    return calls


@pytest.mark.parametrize("case", range(len(_string_and_cuda_calls())))
def test_strings_and_cuda_arguments_raise_argument_errors(case: int) -> None:
    label, call, name = _string_and_cuda_calls()[case]
    with pytest.raises(zyntax.ArgumentError) as info:
        call()
    assert _named(info.value, name), f"{label}: {type(info.value).__name__}: {info.value}"


# --------------------------------------------------------------------------- read-only arrays


def _saxpy_args(n: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], float]:
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return x, y, float(rng.uniform(0.5, 2.0))


@needs_interp
def test_interp_reads_read_only_inputs_and_rejects_writing_them() -> None:
    n = 300
    x, y, a = _saxpy_args(n)
    want = (np.float32(a) * x.astype(np.float64) + y).astype(np.float32)
    yy = y.copy()
    interp.launch(saxpy.build(), "saxpy", 3, 128, n, a, _read_only(x.copy()), yy)
    np.testing.assert_allclose(yy, want, rtol=1e-6)
    # y is written: a read-only y is an error naming the argument, and y is unchanged.
    ro_y = _read_only(y.copy())
    with pytest.raises(zyntax.ArgumentError, match=r"argument 3.*read-only"):
        interp.launch(saxpy.build(), "saxpy", 3, 128, n, a, x, ro_y)
    assert np.array_equal(ro_y, y)


@needs_interp
def test_interp_call_reads_read_only_inputs() -> None:
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    got = interp.call(host_latency.build(), "dot", _read_only(a.copy()), _read_only(b.copy()), 50)
    assert got == pytest.approx(float(a @ b), rel=1e-12)


@needs_llvm
def test_cpu_backend_reads_read_only_inputs_and_rejects_writing_them() -> None:
    cm = zyntax.cpu.compile(host_latency.build())
    a, b = rng.standard_normal(64), rng.standard_normal(64)
    assert cm["dot"](_read_only(a.copy()), _read_only(b.copy()), 64) == pytest.approx(
        float(a @ b), rel=1e-12
    )
    # A kernel writing y: read-only x works natively, a read-only y is refused.
    cs = zyntax.cpu.compile(saxpy.build())
    n = 200
    x, y, s = _saxpy_args(n)
    yy = y.copy()
    cs.launch("saxpy", 2, 128, n, s, _read_only(x.copy()), yy)
    np.testing.assert_allclose(yy, (np.float32(s) * x.astype(np.float64) + y), rtol=1e-6)
    with pytest.raises(zyntax.ArgumentError, match="argument 3: array is read-only"):
        cs.launch("saxpy", 2, 128, n, s, x, _read_only(y.copy()))


@needs_interp
def test_kernel_run_cpu_reads_read_only_inputs_and_rejects_writing_them() -> None:
    @zyntax.kernel
    def scale(x, out, s):  # type: ignore[no-untyped-def]
        i = zyntax.lang.grid(1)
        if i < len(x):
            out[i] = x[i] * s

    x = rng.standard_normal(100).astype(np.float32)
    out = np.full(100, np.nan, np.float32)
    scale.run_cpu(_read_only(x.copy()), out, np.float32(3.0), grid=1, block=128)
    np.testing.assert_allclose(out, x * np.float32(3.0), rtol=1e-6)
    with pytest.raises(zyntax.ZyntaxError, match=r"argument 1 .*read-only"):
        scale.run_cpu(x, _read_only(np.full(100, np.nan, np.float32)), 3.0, grid=1, block=128)


@needs_interp
@pytest.mark.parametrize(
    ("grid", "shared"),
    [(2**32, 0), ("ab", 0), ("12", 0), ([1.9], 0), (True, 0), (1, -4), (1, 2**40)],
)
def test_kernel_launch_shapes_and_shared_memory_are_checked(grid: Any, shared: int) -> None:
    x = np.ones(4, np.float32)

    @zyntax.kernel
    def copy(x, out):  # type: ignore[no-untyped-def]
        i = zyntax.lang.grid(1)
        if i < len(x):
            out[i] = x[i]

    with pytest.raises(zyntax.ZyntaxError, match=r"grid|shared"):
        copy.run_cpu(x, x.copy(), grid=grid, block=4, shared_mem=shared)


# --------------------------------------------------------------------------- builder finish


def test_finish_without_with_terminates_the_function() -> None:
    """docs/python.md: without `with`, `b.finish()` is the equivalent."""
    m = hir.Module("f", targets=["sm_80"])
    b = m.kernel("k", [hir.ptr("global", hir.f32), hir.u32])
    out, n = b.params
    i = b.thread_idx()
    with b.if_(i < n):
        b.store(b.ptr_add(out, i), 2.5)
    b.finish()
    m.verify()
    assert "return" in m.to_zir()
    if hasattr(_native, "interp_launch"):
        o = np.full(40, np.nan, np.float32)
        interp.launch(m, "k", 1, 64, o, 33)
        assert np.all(o[:33] == 2.5) and np.all(np.isnan(o[33:]))


# --------------------------------------------------------------------------- @zyntax.kernel surface


def _kernel_hostile_calls() -> list[tuple[str, Callable[[], object]]]:
    @zyntax.kernel
    def k(x, out):  # type: ignore[no-untyped-def]
        i = zyntax.lang.grid(1)
        if i < len(x):
            out[i] = x[i]

    x = np.ones(4, np.float32)
    return [
        ("kernel device", lambda: zyntax.kernel(device="tpu")(lambda a: None)),
        ("kernel max_threads", lambda: zyntax.kernel(max_threads="12")(lambda a: None)),
        ("launch device", lambda: k.launch(x, x, grid=1, block=4, device="tpu")),
        ("launch config", lambda: k[1]),
        ("launch grid str", lambda: k["a", 1]),
        ("hir sig int", lambda: k.hir(sig=3)),  # type: ignore[arg-type]
        ("ptx sig str", lambda: k.ptx(sig="f32")),
        ("Array dtype", lambda: zyntax.Array[3, 1]),
        ("Array ndim", lambda: zyntax.Array[zyntax.f32, 1.5]),
        ("f32[str]", lambda: zyntax.f32["2"]),
        ("f32 cast", lambda: zyntax.f32("a")),
        ("u8 cast", lambda: zyntax.u8(2**80)),
    ]


@pytest.mark.parametrize("case", range(len(_kernel_hostile_calls())))
def test_kernel_surface_raises_typed_errors(case: int) -> None:
    label, call = _kernel_hostile_calls()[case]
    with pytest.raises(zyntax.ZyntaxError) as info:
        call()
    assert not isinstance(info.value, (ValueError, OverflowError)), label
