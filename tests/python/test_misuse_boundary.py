"""Misuse of the public surfaces (issue 29, items 4 and 5): every argument of
the wrong type or out of range raises a typed ``zyntax.ZyntaxError`` that
names the argument (PyO3's own ``TypeError``/``OverflowError`` never
escape), before any work proportional to the input; and no result is garbage:
``fusion.run_interp`` refuses arrays of the wrong shape or dtype and memory
shared where the kernels were planned for distinct buffers, and a module
whose block layout leaves part of a function out no longer verifies.

Every case here runs without a GPU: arguments are checked before any driver
call."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import bundle, fusion, hir, interp

try:
    from zyntax import cuda
except ImportError:  # built without the CUDA runtime
    cuda = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz_corpus"
G_F32 = hir.ptr("global", hir.f32)


def raises_naming(
    action: Callable[[], object], name: str, error: type = zyntax.ArgumentError
) -> None:
    """`action` raises `error` (a ZyntaxError) whose message or PyO3 note names `name`."""
    with pytest.raises(error) as info:
        action()
    assert isinstance(info.value, zyntax.ZyntaxError)
    shown = str(info.value) + " ".join(getattr(info.value, "__notes__", []))
    assert name in shown, shown


# ---------------------------------------------------------------- the PyO3 boundary


def builder() -> hir.FunctionBuilder:
    m = hir.Module("t", targets=["sm_90a"])
    return m.kernel("k", [G_F32, hir.u32, hir.ptr("shared", hir.u64)])


def module() -> hir.Module:
    return hir.Module("t")


PYO3_CASES: list[tuple[str, str, Callable[[], object]]] = [
    # (case, the argument the error must name, the call)
    ("targets str", "targets", lambda: hir.Module("m", targets="sm_80")),
    ("targets array", "targets", lambda: hir.Module("m", targets=np.array(["sm_80"]))),
    ("targets int item", "targets", lambda: hir.Module("m", targets=["sm_80", 80])),
    ("targets setter str", "targets", lambda: setattr(module(), "targets", "sm_80")),
    ("record_locations str", "record_locations", lambda: hir.Module("m", record_locations="no")),
    ("record_locations int", "record_locations", lambda: hir.Module("m", record_locations=1)),
    ("kernel flag", "critical_path", lambda: module().kernel("k", [G_F32], critical_path="yes")),
    ("device flag", "no_alloc", lambda: module().device_function("f", [], no_alloc=np.ones(2))),
    ("host flag", "inline_always", lambda: module().host_function("f", [], inline_always=None)),
    ("kernel single type", "single type", lambda: module().kernel("k", hir.f32)),
    ("global space", "space", lambda: module().global_var("g", hir.f32, space=3)),
    ("ptr pointee", "zyntax.hir.Type", lambda: hir.ptr("global", 3)),
    ("switch_to name", "block", lambda: builder().switch_to("block1")),
    ("jump int", "block", lambda: builder().jump(1)),
    ("br names", "then_block", lambda: builder().br(True, "a", "b")),
    ("ldmatrix trans", "trans", lambda: (b := builder()).ldmatrix(b.params[0], trans="yes")),
    ("cluster_arrive", "relaxed", lambda: builder().cluster_arrive(relaxed=1)),
    ("bulk_wait_group", "read", lambda: builder().bulk_wait_group(0, read="no")),
    ("setmaxnreg", "increase", lambda: builder().setmaxnreg(240, increase=0)),
    ("interp checks", "checks", lambda: interp_saxpy(checks="yes")),
    (
        "cpu interp_kernels str",
        "interp_kernels",
        lambda: zyntax.cpu.compile(module(), interp_kernels="k"),
    ),
]


def interp_saxpy(**kw: Any) -> object:
    m = hir.Module("s")
    with m.kernel("k", [G_F32]) as b:
        b.store(b.params[0], 1.0)
    return interp.launch(m, "k", 1, 1, np.zeros(1, np.float32), **kw)


@pytest.mark.parametrize(
    ("name", "action"), [c[1:] for c in PYO3_CASES], ids=[c[0] for c in PYO3_CASES]
)
def test_pyo3_arguments_of_the_wrong_kind_raise_argument_error(
    name: str, action: Callable[[], object]
) -> None:
    raises_naming(action, name)


def test_the_right_kinds_still_work() -> None:
    m = hir.Module("m", targets=("sm_80", "sm_90"), record_locations=np.bool_(False))
    assert m.targets == ["sm_80", "sm_90"]
    m.targets = ["sm_75"]
    assert m.targets == ["sm_75"]
    with m.kernel("k", [G_F32], critical_path=True, no_alloc=np.bool_(True)) as b:
        b.store(b.params[0], 2.0)
    m.verify()
    out = np.full(1, np.nan, np.float32)
    interp.launch(m, "k", 1, 1, out, checks=False)
    assert out[0] == 2.0


CUDA_CASES: list[tuple[str, str, Callable[[], object]]] = [
    ("Stream non_blocking", "non_blocking", lambda: cuda.Stream(non_blocking="yes")),
    ("Event timing", "timing", lambda: cuda.Event(timing=1)),
    ("to_device sync", "sync", lambda: cuda.to_device(np.zeros(2), sync="no")),
    (
        "signatures not a dict",
        "signatures",
        lambda: cuda.load_module(".version 8.0", signatures=[("k", {})]),  # type: ignore[arg-type]
    ),
    (
        "signature params str",
        "params",
        lambda: cuda.load_module(".version 8.0", signatures={"k": {"params": "u32"}}),
    ),
    (
        "signature max_threads",
        "max_threads",
        lambda: cuda.load_module(
            ".version 8.0", signatures={"k": {"params": [], "max_threads": [2**40]}}
        ),
    ),
    (
        "signature grid_sync",
        "grid_sync",
        lambda: cuda.load_module(
            ".version 8.0", signatures={"k": {"params": [], "grid_sync": "yes"}}
        ),
    ),
]


@pytest.mark.parametrize(
    ("name", "action"), [c[1:] for c in CUDA_CASES], ids=[c[0] for c in CUDA_CASES]
)
def test_cuda_arguments_are_checked_before_the_driver(
    name: str, action: Callable[[], object]
) -> None:
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    raises_naming(action, name)


# ---------------------------------------------------------------- Module.from_json

LAYOUT_CASES = [
    "json_layout_omits_entry_block.json",
    "json_layout_starts_past_entry_block.json",
    "json_inst_outside_layout.json",
]


@pytest.mark.parametrize("name", LAYOUT_CASES)
def test_a_layout_that_leaves_part_of_a_function_out_does_not_verify(name: str) -> None:
    """These verified once, and the kernel's parameters (or a store) were
    silently lost on the way through .zir."""
    m = hir.Module.from_json((CORPUS / name).read_text())
    with pytest.raises(zyntax.VerifyError, match=r"not in the layout|not placed in any block"):
        m.verify()


def test_a_verified_module_round_trips_through_json_and_zir_unchanged() -> None:
    m = hir.Module("m", targets=["sm_80"])
    with m.kernel("k", [G_F32, hir.u32]) as b:
        x, n = b.params
        with b.if_(b.lt(n, 4)):
            b.store(x, 1.0)
    m.verify()
    back = hir.Module.from_json(m.to_json())
    assert back == m and back.signature("k") == m.signature("k")
    assert hir.parse_zir(m.to_zir()) == m


# ---------------------------------------------------------------- fusion.run_interp


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


def reverse_double(n: int, alias: bool) -> fusion.Fused:
    """t = reverse(x); y = 2 t: fused unless y is declared to alias x."""
    s = fusion.Sequence("rd")
    x = s.input("x", n)
    t = s.temporary("t", n)
    y = s.output("y", n, alias_of=x if alias else None)
    s.map("reverse", t, lambda e: e.load(x, (n - 1) - e.point[0]))
    s.map("double", y, lambda e: e[t] * 2.0)
    return s.fuse()


def test_memory_shared_by_buffers_not_declared_to_alias_is_refused() -> None:
    """The fused kernel reads x[n-1-i] after other threads wrote y = x in
    place: passing one array for both once returned garbage."""
    n = 256
    f = reverse_double(n, alias=False)
    assert len(f.kernels) == 1
    buf = rng().standard_normal(n).astype(np.float32)
    with pytest.raises(zyntax.ArgumentError, match="'x' and 'y' share memory"):
        f.run_interp({"x": buf, "y": buf})
    with pytest.raises(zyntax.ArgumentError, match="share memory"):
        f.run_interp({"x": buf, "y": buf[:]})  # a view is the same memory
    # Distinct memory gives the right answer.
    xs = buf.copy()
    ys = np.full(n, np.nan, np.float32)
    f.run_interp({"x": xs, "y": ys})
    np.testing.assert_array_equal(ys, buf[::-1] * 2)


def test_declared_aliases_share_one_memory() -> None:
    n = 128
    f = reverse_double(n, alias=True)
    xs = rng().standard_normal(n).astype(np.float32)
    buf = xs.copy()
    f.run_interp({"x": buf, "y": buf[:]})  # the same memory through another view object
    np.testing.assert_array_equal(buf, xs[::-1] * 2)
    with pytest.raises(zyntax.ArgumentError, match="pass the same array"):
        f.run_interp({"x": buf[::-1], "y": buf})


def scale(n: int) -> fusion.Fused:
    s = fusion.Sequence("scale")
    x = s.input("x", n)
    y = s.output("y", n)
    s.map("scale", y, lambda e: e[x] * 3.0)
    return s.fuse()


RUN_CASES: list[tuple[str, Callable[[int], dict[str, Any]], str]] = [
    (
        "longer output",
        lambda n: {"x": np.ones(n, np.float32), "y": np.ones(2 * n, np.float32)},
        "'y'",
    ),
    ("2-d input", lambda n: {"x": np.ones((n, 1), np.float32), "y": np.ones(n, np.float32)}, "'x'"),
    ("f64 input", lambda n: {"x": np.ones(n), "y": np.ones(n, np.float32)}, "'x'"),
    ("list input", lambda n: {"x": [1.0] * n, "y": np.ones(n, np.float32)}, "'x'"),
    (
        "unknown name",
        lambda n: {"x": np.ones(n, np.float32), "y": np.ones(n, np.float32), "z": 1},
        "'z'",
    ),
    ("array as name", lambda n: {("x",): np.ones(n, np.float32)}, "('x',)"),
]


@pytest.mark.parametrize(
    ("make", "named"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES]
)
def test_run_interp_refuses_arrays_that_do_not_match_the_buffers(
    make: Callable[[int], dict[str, Any]], named: str
) -> None:
    n = 64
    arrays = make(n)
    before = copy.deepcopy(arrays)
    with pytest.raises(zyntax.ArgumentError, match=r"argument 'arrays'") as info:
        scale(n).run_interp(arrays)
    assert named in str(info.value)
    for k, v in arrays.items():  # nothing was written
        np.testing.assert_array_equal(np.asarray(v), np.asarray(before[k]))


def test_run_interp_refuses_a_list_of_arrays() -> None:
    with pytest.raises(zyntax.ArgumentError, match="expected a dict"):
        scale(4).run_interp([np.ones(4, np.float32)])  # type: ignore[arg-type]


SEQUENCE_CASES: list[tuple[str, str, Callable[[fusion.Sequence], object]]] = [
    ("float extent", "shape", lambda s: s.input("x", 2.5)),
    ("str extent", "shape", lambda s: s.input("x", "8")),
    ("bool extent", "shape", lambda s: s.input("x", (True, 4))),
    ("array name", "name", lambda s: s.input(np.array(["x"]), 4)),
    ("bad dtype", "dtype", lambda s: s.input("x", 4, "complex64")),
    ("alias of a name", "alias_of", lambda s: s.output("y", 4, alias_of="x")),
    ("out not a buffer", "out", lambda s: s.map("m", "y", lambda e: 1.0)),
    ("body not callable", "body", lambda s: s.map("m", s.output("y", 4), 1.0)),
    (
        "registers str",
        "registers",
        lambda s: s.map("m", s.output("y", 4), lambda e: 1.0, registers="8"),
    ),
    ("cols float", "shape", lambda s: s.reduce("r", s.output("y", 4), 2.5, lambda e: 1.0)),
]


@pytest.mark.parametrize(
    ("name", "action"), [c[1:] for c in SEQUENCE_CASES], ids=[c[0] for c in SEQUENCE_CASES]
)
def test_sequence_arguments_are_checked(
    name: str, action: Callable[[fusion.Sequence], object]
) -> None:
    raises_naming(lambda: action(fusion.Sequence("s")), name)


# ---------------------------------------------------------------- the program executor


def program() -> tuple[Any, Any, Any, Any]:
    p = cuda.Program()
    return p, p.input("x", 16), p.temporary("t", 16), p.output("y", 16)


PROGRAM_CASES: list[tuple[str, str, Callable[[], object]]] = [
    ("device str", "device", lambda: cuda.Program("0")),
    ("device negative", "device", lambda: cuda.Program(-1)),
    ("name array", "name", lambda: cuda.Program().input(np.array(["x"]), 4)),
    ("name int", "name", lambda: cuda.Program().output(3, 4)),
    ("shape float", "shape", lambda: cuda.Program().input("x", 2.5)),
    ("shape negative", "shape", lambda: cuda.Program().input("x", (4, -1))),
    ("dtype nonsense", "dtype", lambda: cuda.Program().input("x", 4, "nonsense")),
    ("dtype object", "dtype", lambda: cuda.Program().input("x", 4, object)),
    (
        "writes name",
        "writes",
        lambda: (lambda p, x, t, y: p.launch(print, 1, 1, x, y, writes="y"))(*program()),
    ),
    (
        "writes array",
        "writes",
        lambda: (lambda p, x, t, y: p.launch(print, 1, 1, x, y, writes=[np.ones(3)]))(*program()),
    ),
    (
        "writes not an arg",
        "writes",
        lambda: (lambda p, x, t, y: p.launch(print, 1, 1, x, writes=[y]))(*program()),
    ),
    (
        "writes and updates",
        "updates",
        lambda: (lambda p, x, t, y: p.launch(print, 1, 1, y, writes=y, updates=[y]))(*program()),
    ),
    (
        "shared_mem float",
        "shared_mem",
        lambda: (lambda p, x, t, y: p.launch(print, 1, 1, y, shared_mem=1.5))(*program()),
    ),
    ("bindings list", "bindings", lambda: program()[0].prepare([("x", np.ones(16))])),
    ("binding key array", "bindings", lambda: program()[0].prepare({1: np.ones(16)})),
]


@pytest.mark.parametrize(
    ("name", "action"), [c[1:] for c in PROGRAM_CASES], ids=[c[0] for c in PROGRAM_CASES]
)
def test_program_arguments_are_checked_before_the_device(
    name: str, action: Callable[[], object]
) -> None:
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    raises_naming(action, name)


BINDING_CASES: list[tuple[str, dict[Any, Any], str]] = [
    ("unknown name", {"z": np.ones(16)}, "binding 'z': the program has no such buffer"),
    ("temporary", {"t": np.ones(16)}, "binding 't': is a temporary"),
    ("a name as the array", {"x": "y"}, "binding 'x': is a str, not a device array"),
    ("None as the array", {"x": None}, "binding 'x': is a NoneType"),
]


@pytest.mark.parametrize(
    ("bindings", "message"), [c[1:] for c in BINDING_CASES], ids=[c[0] for c in BINDING_CASES]
)
def test_bad_bindings_are_the_executors_binding_errors_without_a_device(
    bindings: dict[Any, Any], message: str
) -> None:
    """The same CudaError (``kind == "binding"``) the executor raises on a GPU."""
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    with pytest.raises(zyntax.CudaError, match=message) as info:
        program()[0].prepare(bindings)
    assert info.value.kind == "binding"  # type: ignore[attr-defined]


def test_a_single_buffer_is_taken_as_writes() -> None:
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    p, x, _t, y = program()
    with pytest.raises(zyntax.ArgumentError, match=r"takes a zyntax\.cuda\.Kernel"):
        p.launch(print, 1, 1, x, y, writes=y)  # the writes are fine: the kernel is not


# ---------------------------------------------------------------- bundle manifests

SAXPY = ROOT / "tests" / "data" / "bundle" / "saxpy.json"


def forged(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The saxpy bundle with its manifest edited and its content hash
    recomputed (the hash catches accidents, not forgery)."""
    m = json.loads(SAXPY.read_text())
    edit(m)
    m["content_sha256"] = bundle._content_hash(m)
    shutil.copy(SAXPY.with_suffix(".fatbin"), tmp_path / "saxpy.fatbin")
    path = tmp_path / "saxpy.json"
    path.write_text(json.dumps(m))
    return path


def kernel(m: dict[str, Any]) -> dict[str, Any]:
    k: dict[str, Any] = m["kernels"]["saxpy"]
    return k


MANIFEST_CASES: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("image bytes str", "image.bytes", lambda m: m["image"].update(bytes="9560")),
    ("image bytes huge", "image.bytes", lambda m: m["image"].update(bytes=10**30)),
    ("image bytes bool", "image.bytes", lambda m: m["image"].update(bytes=True)),
    ("image file dotdot", "image.file", lambda m: m["image"].update(file="..")),
    ("image file nested", "image.file", lambda m: m["image"].update(file=["saxpy.fatbin"])),
    ("image sha256 int", "image.sha256", lambda m: m["image"].update(sha256=5)),
    ("sass garbage arch", "sass", lambda m: m.update(sass=["x"])),
    ("sass nested", "sass", lambda m: m.update(sass=[["sm_80"]])),
    ("ptx int", "ptx", lambda m: m.update(ptx=80)),
    ("kernel name", "kernels", lambda m: m["kernels"].update({"a b": kernel(m)})),
    ("kernel list", "kernels.saxpy", lambda m: m["kernels"].update(saxpy=[kernel(m)])),
    ("params dict", "kernels.saxpy.params", lambda m: kernel(m).update(params={"type": "u32"})),
    (
        "param nested",
        "kernels.saxpy.params[0]",
        lambda m: kernel(m)["params"].__setitem__(0, [kernel(m)["params"][0]]),
    ),
    ("param type int", "kernels.saxpy.params[1]", lambda m: kernel(m)["params"][1].update(type=4)),
    ("max_threads str", "kernels.saxpy.max_threads", lambda m: kernel(m).update(max_threads="256")),
    (
        "max_threads huge",
        "kernels.saxpy.max_threads[0]",
        lambda m: kernel(m).update(max_threads=[2**64]),
    ),
    (
        "max_threads 4 dims",
        "kernels.saxpy.max_threads",
        lambda m: kernel(m).update(max_threads=[1, 1, 1, 1]),
    ),
    (
        "shared bytes negative",
        "dynamic_shared_bytes",
        lambda m: kernel(m).update(dynamic_shared_bytes=-1),
    ),
    (
        "shared bytes float",
        "dynamic_shared_bytes",
        lambda m: kernel(m).update(dynamic_shared_bytes=1.5),
    ),
    ("cluster str", "cluster_dims", lambda m: kernel(m).update(cluster_dims="2")),
    ("grid_sync str", "grid_sync", lambda m: kernel(m).update(grid_sync="false")),
    ("resources list", "resources", lambda m: kernel(m).update(resources=[])),
    (
        "registers str",
        "registers",
        lambda m: kernel(m)["resources"]["sm_80"].update(registers="16"),
    ),
    ("tuning list", "tuning", lambda m: m.update(tuning=[])),
]


@pytest.mark.parametrize(
    ("field", "edit"), [c[1:] for c in MANIFEST_CASES], ids=[c[0] for c in MANIFEST_CASES]
)
def test_malformed_manifests_raise_bundle_error_naming_the_field(
    tmp_path: Path, field: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    path = forged(tmp_path, edit)
    with pytest.raises(bundle.BundleError) as info:
        bundle.read_manifest(path)
    assert isinstance(info.value, zyntax.ZyntaxError)
    assert field in str(info.value), str(info.value)


def test_the_manifest_as_written_still_reads(tmp_path: Path) -> None:
    m = bundle.read_manifest(forged(tmp_path, lambda m: None))
    assert list(m["kernels"]) == ["saxpy"] and m["image"]["kind"] == "fatbin"


# ---------------------------------------------------------------- ptx_cache entries (load_cached)

GOOD_META: dict[str, Any] = {
    "launch": {"k": {"params": [{"type": "u32"}], "max_threads": [128], "dynamic_shared_bytes": 0}}
}

CACHED_CASES: list[tuple[str, Any, str]] = [
    ("metadata a list", [GOOD_META], "the metadata"),
    ("launch a list", {"launch": [1]}, "launch"),
    ("entry a str", {"launch": {"k": "u32"}}, "launch.k"),
    ("params a dict", {"launch": {"k": {"params": {"type": "u32"}}}}, "launch.k.params"),
    ("param nested", {"launch": {"k": {"params": [[{"type": "u32"}]]}}}, "launch.k.params[0]"),
    ("param type int", {"launch": {"k": {"params": [{"type": 4}]}}}, "launch.k.params[0]"),
    ("max_threads str", {"launch": {"k": {"params": [], "max_threads": "128"}}}, "max_threads"),
    ("max_threads huge", {"launch": {"k": {"params": [], "max_threads": [2**70]}}}, "max_threads"),
    ("shared bytes negative", {"launch": {"k": {"dynamic_shared_bytes": -1}}}, "shared_bytes"),
]


@pytest.mark.parametrize(
    ("meta", "field"), [c[1:] for c in CACHED_CASES], ids=[c[0] for c in CACHED_CASES]
)
def test_malformed_cache_metadata_is_refused_before_the_device(
    tmp_path: Path, meta: Any, field: str
) -> None:
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    (tmp_path / "e.ptx").write_text(".version 8.0\n.target sm_80\n")
    (tmp_path / "e.json").write_text(json.dumps(meta))
    raises_naming(lambda: cuda.load_cached(tmp_path / "e"), field)


def test_cache_entry_files_are_read_bounded(tmp_path: Path) -> None:
    if cuda is None:
        pytest.skip("built without the CUDA runtime")
    (tmp_path / "e.ptx").write_bytes(b"\xff\xfe not text")
    (tmp_path / "e.json").write_text(json.dumps(GOOD_META))
    raises_naming(lambda: cuda.load_cached(tmp_path / "e.json"), "not UTF-8")
    (tmp_path / "e.json").write_text("[" * 100_000)
    with pytest.raises(zyntax.ZyntaxError):
        cuda.load_cached(tmp_path / "e")
