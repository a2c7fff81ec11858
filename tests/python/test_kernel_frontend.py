"""@zyntax.kernel front-end: AST -> HIR translation, types, dispatch, errors, cache.

These tests need no backend: the HIR the front-end prints is parsed and verified
by the native core (zyntax.hir.parse_zir + verify), so every kernel here is a
module the verifier accepts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import kernel_defs as kd
import zyntax
from conftest import ROOT
from zyntax import hir, lang
from zyntax.frontend import cache, errors
from zyntax.frontend.kernel import spec_of_value

EXAMPLES = ROOT / "examples" / "kernels"
F32 = np.float32


def load_example(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"zk_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def verified(text: str) -> hir.Module:
    m = hir.parse_zir(text, "<test>")
    m.verify()
    # The front-end's printer matches the native printer exactly (canonical form).
    assert m.to_zir() == text
    return m


# --------------------------------------------------------------------------- translation


def test_vector_add_hir_is_exact() -> None:
    @zyntax.kernel
    def add1(a, out):
        i = lang.grid(1)
        if i < len(a):
            out[i] = a[i] + 1

    a = np.zeros(8, F32)
    assert add1.hir((a, a)) == (
        'module "add1" version(2)\n'
        "\n"
        "kernel @add1 {\n"
        "block0(v0: ptr<global, f32>, v1: i64, v2: i64, v3: ptr<global, f32>, v4: i64, v5: i64):\n"
        "    v6: u32 = block_idx.x\n"
        "    v7: i32 = cast v6\n"
        "    v8: u32 = block_dim.x\n"
        "    v9: i32 = cast v8\n"
        "    v10: u32 = thread_idx.x\n"
        "    v11: i32 = cast v10\n"
        "    v12: i32 = mul v7, v9\n"
        "    v13: i32 = add v12, v11\n"
        "    v14: i64 = cast v13\n"
        "    v15: bool = cmp.lt v14, v1\n"
        "    br v15, block1, block2\n"
        "block1:\n"
        "    v16: i64 = cast v13\n"
        "    v17: ptr<global, f32> = ptr_add v0, v16\n"
        "    v18: f32 = load v17\n"
        "    v19: f32 = const 1.0\n"
        "    v20: f32 = add v18, v19\n"
        "    v21: i64 = cast v13\n"
        "    v22: ptr<global, f32> = ptr_add v3, v21\n"
        "    store v22, v20\n"
        "    jump block2\n"
        "block2:\n"
        "    return\n"
        "}\n"
    )
    verified(add1.hir((a, a)))


@pytest.mark.parametrize(
    ("kernel", "sig"),
    [
        (kd.arith, ("i32[1]",) * 2 + ("f32[1]", "i32[1]", "i32[1]")),
        (kd.control, ("i32[1]", "i32[2]", "i32")),
        (kd.mathk, ("f32[1]", "f32[2]")),
        (kd.widen, None),
        (kd.strided2d, ("f32[2]", "f32[2]")),
    ],
)
def test_kernels_verify(kernel: zyntax.frontend.Kernel, sig: tuple[str, ...] | None) -> None:
    def entry(s: str) -> object:
        if "[" in s:
            name, nd = s[:-1].split("[")
            return zyntax.Array[getattr(zyntax, name), int(nd)]
        return getattr(zyntax, s)

    text = kernel.hir(None if sig is None else tuple(entry(s) for s in sig))
    verified(text)


@pytest.mark.parametrize(
    "name", ["vector_add", "transpose", "sgemm", "reduction", "scan", "histogram", "softmax"]
)
def test_examples_translate_and_verify(name: str) -> None:
    mod = load_example(name)
    n = 0
    for obj in vars(mod).values():
        if isinstance(obj, zyntax.frontend.Kernel):
            sig = obj.signature_specs()
            if sig is None:
                nd = 2 if name in ("transpose", "sgemm", "softmax") else 1
                dt = zyntax.i32 if name == "histogram" else zyntax.f32
                params = list(obj._sig.parameters)
                sig = [zyntax.Array[dt, nd] for _ in params]
                if name == "histogram":
                    sig = [zyntax.Array[zyntax.i32, 1], zyntax.Array[zyntax.u32, 1]]
            verified(obj.hir(tuple(sig)))
            n += 1
    assert n >= 1


def test_widening_makes_accumulator_float() -> None:
    text = kd.widen.hir()
    # The loop header carries (induction variable, accumulator) and the accumulator is f32.
    assert re.search(r"block1\(v\d+: i64, v\d+: f32\):", text), text
    assert "const 0.0" in text


def test_loop_carried_values_use_block_params_not_memory() -> None:
    text = kd.control.hir((zyntax.Array[zyntax.i32, 1], zyntax.Array[zyntax.i32, 2], zyntax.i32))
    assert "alloca" not in text
    verified(text)


def test_device_functions_are_specialised_per_signature() -> None:
    a = np.ones(4, np.int32)
    f = np.ones(4, F32)
    before = len(kd.arith.signatures)
    text = kd.arith.hir((a, a, f, a, a))
    assert "device @divmod_py__i32_i32 -> i32, i32 {" in text
    assert "device @clamp__f32_f32_f32 -> f32 {" in text
    text64 = kd.arith.hir((a.astype(np.int64), a.astype(np.int64), f, a, a))
    assert "device @divmod_py__i64_i64 -> i64, i64 {" in text64
    assert len(kd.arith.signatures) - before <= 2
    n = len(kd.arith.signatures)
    kd.arith.hir((a, a, f, a, a))  # the same signature again: no new variant
    assert len(kd.arith.signatures) == n


def test_dispatch_specs_from_arguments() -> None:
    assert str(spec_of_value(3)) == "i32"
    assert str(spec_of_value(2**40)) == "i64"
    assert str(spec_of_value(1.5)) == "f32"
    assert str(spec_of_value(True)) == "bool"
    assert str(spec_of_value(np.float64(1))) == "f64"
    assert str(spec_of_value(np.zeros((3, 4), np.float16))) == "array(f16, 2, C)"
    assert str(spec_of_value(np.zeros((3, 4), F32).T)) == "array(f32, 2)"


def test_signatures_as_strings() -> None:
    a = np.zeros(4, np.int32)
    f = np.zeros(4, F32)
    by_value = kd.arith.hir((a, a, f, a, a))
    assert (
        kd.arith.hir(("i32[1, C]", "i32[1, C]", "f32[1, C]", "i32[1, C]", "i32[1, C]")) == by_value
    )
    assert kd.widen.hir(("f32[1]", "f32[1]")) == kd.widen.hir()
    with pytest.raises(zyntax.KernelError, match="cannot read the type"):
        kd.widen.hir(("float32", "f32[1]"))


def test_c_layout_folds_the_last_stride() -> None:
    @zyntax.kernel
    def copy2(a, b):
        r, c = lang.grid(2)
        b[r, c] = a[r, c]

    c_text = copy2.hir((np.zeros((2, 2), F32), np.zeros((2, 2), F32)))
    a_text = copy2.hir((np.zeros((2, 2), F32).T, np.zeros((2, 2), F32).T))
    assert c_text.count("mul") < a_text.count("mul")
    verified(c_text)
    verified(a_text)


def test_gpu_primitives_lower_to_hir_ops() -> None:
    @zyntax.kernel
    def prims(x: zyntax.Array[zyntax.f32, 1], h: zyntax.Array[zyntax.u32, 1]):
        t = lang.thread_idx.x + lang.block_dim.y + lang.grid_dim.z + lang.block_idx.x
        sm = lang.shared.array((4, 8), zyntax.f32)
        dyn = lang.shared.dynamic(zyntax.f32)
        sm[0, t % 8] = x[t]
        dyn[t] = 1.0
        lang.syncthreads()
        lang.threadfence()
        lang.threadfence_block()
        lang.threadfence_system()
        v = lang.shfl_down_sync(0xFFFFFFFF, sm[0, 1], 1)
        v += lang.shfl_xor_sync(0xFFFFFFFF, v, 4, 16)
        v += lang.shfl_sync(0xFFFFFFFF, v, 0) + lang.shfl_up_sync(0xFFFFFFFF, v, 2)
        b = lang.vote_ballot_sync(0xFFFFFFFF, v > 0.0)
        if lang.vote_any_sync(0xFFFFFFFF, v > 1.0) and lang.vote_all_sync(0xFFFFFFFF, v < 9.0):
            lang.atomic.add(h, 0, b, scope="block")
        m = lang.match_any_sync(0xFFFFFFFF, t)
        m2, same = lang.match_all_sync(0xFFFFFFFF, t)
        old = lang.atomic.cas(h, 1, m, m2)
        lang.atomic.max(h, 2, old, scope="system")
        lang.atomic.inc(h, 3, zyntax.u32(7))
        lang.atomic.exch(h, 4, zyntax.u32(1) if same else zyntax.u32(2))
        lang.syncwarp()
        x[lang.lane_id()] = v

    text = prims.hir()
    for op in [
        "thread_idx.x",
        "block_dim.y",
        "grid_dim.z",
        "shared_alloc f32, 32",
        "dyn_shared f32",
        "barrier",
        "fence.device",
        "fence.block",
        "fence.system",
        "shfl.down",
        "width 16",
        "shfl.idx",
        "shfl.up",
        "vote.ballot",
        "vote.any",
        "vote.all",
        "atomic.add.block",
        "match.any",
        "match.all",
        "atomic.cas.device",
        "atomic.max.system",
        "atomic.inc.device",
        "atomic.exch.device",
        "warp_sync",
        "lane_id",
    ]:
        assert op in text, op
    verified(text)


def test_mma_and_async_copy_lower_to_hir_ops() -> None:
    @zyntax.kernel
    def tile(a: zyntax.Array[zyntax.f16, 1], c: zyntax.Array[zyntax.f32, 1]):
        sa = lang.shared.array(256, zyntax.f16)
        lang.async_copy(sa, lang.thread_idx.x * 8, a, lang.thread_idx.x * 8, 16, "cg")
        lang.async_commit()
        lang.async_wait(0)
        lang.syncthreads()
        fa = lang.mma.load_a(sa, 16)
        fb = lang.mma.load_b(sa, 16, layout="col")
        acc = lang.mma.fill(0.0)
        acc = lang.mma.mma(fa, fb, acc)
        lang.mma.store(c, acc, 16)

    text = tile.hir()
    for op in [
        "cp.async.cg.16",
        "cp.async.commit",
        "cp.async.wait 0",
        "frag<a, m16n16k16, f16, row> = mma.load.row",
        "frag<b, m16n16k16, f16, col> = mma.load.col",
        "frag<acc, m16n16k16, f32> = mma.fill",
        "= mma v",
        "mma.store.row",
    ]:
        assert op in text, op
    m = hir.parse_zir(text, "<t>")
    m.targets = ["sm_80"]
    m.verify()


def test_compile_time_constants_and_folding() -> None:
    @zyntax.kernel
    def consts(out: zyntax.Array[zyntax.i32, 1]):
        n = 4 * 8 + 1  # folded
        if n > 100:  # constant condition: the branch is not translated
            out[0] = n // 0
        out[0] = n

    text = consts.hir()
    assert "const 33" in text
    assert "br " not in text
    verified(text)


def test_kernel_launch_bounds_attributes() -> None:
    @zyntax.kernel(max_threads=256, min_blocks=2, max_registers=64)
    def bounded(out: zyntax.Array[zyntax.f32, 1]):
        out[lang.thread_idx.x] = 1.0

    text = bounded.hir()
    assert "kernel @bounded max_threads(256, 1, 1) min_blocks(2) max_registers(64) {" in text
    verified(text)


# --------------------------------------------------------------------------- errors


def _raise(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    with pytest.raises(zyntax.ZyntaxError) as info:
        fn(*args, **kwargs)
    return info


def _check_points_at(err: errors.KernelError, needle: str) -> None:
    msg = str(err)
    here = Path(__file__).resolve()
    assert err.file is not None and Path(err.file).resolve() == here
    assert err.line is not None
    line = here.read_text().splitlines()[err.line - 1]
    assert needle in line
    assert f"{err.file}:{err.line}:{err.col}: " in msg
    # The excerpt shows the source line and a caret under the column.
    lines = msg.splitlines()
    assert lines[1].strip() == line.strip()
    caret = lines[2]
    assert caret.index("^") - 4 == err.col - 1
    assert line[err.col - 1 :].startswith(needle)


def test_unsupported_construct_error() -> None:
    @zyntax.kernel
    def bad(out):
        vals = [k for k in range(3)]
        out[0] = vals[0]

    info = _raise(bad.hir, (np.zeros(2, F32),))
    assert isinstance(info.value, errors.KernelSyntaxError)
    assert "a list comprehension is not supported in kernels" in str(info.value)
    _check_points_at(info.value, "[k for k in range(3)]")


def test_with_statement_error() -> None:
    @zyntax.kernel
    def bad2(out):
        with open("x"):
            out[0] = 1

    info = _raise(bad2.hir, (np.zeros(2, F32),))
    assert "'with' statements are not supported" in str(info.value)
    _check_points_at(info.value, "with open")


def test_type_mismatch_error() -> None:
    @zyntax.kernel
    def bad3(out):
        x = zyntax.u64(1) + zyntax.i64(2)
        out[0] = x

    info = _raise(bad3.hir, (np.zeros(2, F32),))
    assert isinstance(info.value, errors.KernelTypeError)
    assert isinstance(info.value, TypeError)
    assert "u64 and i64" in str(info.value)
    _check_points_at(info.value, "zyntax.u64(1) + zyntax.i64(2)")


def test_undefined_name_error() -> None:
    @zyntax.kernel
    def bad4(out):
        out[0] = not_defined_anywhere + 1  # type: ignore[name-defined] # noqa: F821

    info = _raise(bad4.hir, (np.zeros(2, F32),))
    assert isinstance(info.value, errors.KernelNameError)
    assert "name 'not_defined_anywhere' is not defined" in str(info.value)
    _check_points_at(info.value, "not_defined_anywhere")


def test_possibly_undefined_local_error() -> None:
    @zyntax.kernel
    def bad5(out, n):
        if n > 0:
            y = 1.0
        out[0] = y

    info = _raise(bad5.hir, (np.zeros(2, F32), 1))
    assert "'y' might be used before it is assigned" in str(info.value)
    _check_points_at(info.value, "y")


def test_wrong_argument_at_launch_points_at_parameter() -> None:
    @zyntax.kernel
    def typed(x: zyntax.Array[zyntax.f32, 1], n: zyntax.i32):
        x[0] = n

    info = _raise(typed.run_cpu, np.zeros(3, np.float64), 3, grid=1, block=1)
    assert isinstance(info.value, errors.KernelArgumentError)
    assert "argument 'x' should be array(f32, 1) but got array(f64, 1, C)" in str(info.value)
    _check_points_at(info.value, "x: zyntax.Array")
    info = _raise(typed.run_cpu, np.zeros(3, F32), grid=1, block=1)
    assert "takes 2 argument(s) (x, n) but 1 were given" in str(info.value)
    _check_points_at(info.value, "def typed(")


def test_traceback_is_trimmed_of_internal_frames() -> None:
    @zyntax.kernel
    def bad6(out):
        out[0] = 1 @ 2

    try:
        bad6.hir((np.zeros(2, F32),))
    except errors.KernelError as e:
        frames = traceback.extract_tb(e.__traceback__)
        pkg = str(Path(zyntax.__file__).parent)
        # Only the public entry point (Kernel.hir) remains of zyntax's own frames.
        internal = [f for f in frames if f.filename.startswith(pkg)]
        assert [f.name for f in internal] == ["hir"], frames
        assert e.__cause__ is None and e.__suppress_context__
    else:
        pytest.fail("no error raised")


def test_primitives_outside_a_kernel_raise() -> None:
    for call in (
        lambda: lang.syncthreads(),
        lambda: lang.grid(1),
        lambda: lang.shared.array(4, zyntax.f32),
        lambda: lang.atomic.add(None, 0, 1),
        lambda: lang.thread_idx.x,
        lambda: kd.clamp(1, 2, 3),
        lambda: kd.widen(np.zeros(1, F32), np.zeros(1, F32)),
    ):
        with pytest.raises(
            zyntax.ZyntaxError, match=r"inside a @zyntax\.kernel|launched with a grid"
        ):
            call()
    # Scalar types still convert on the host.
    assert zyntax.f32(1.5) == np.float32(1.5)


def test_kernel_errors_are_zyntax_errors() -> None:
    assert issubclass(errors.KernelError, zyntax.ZyntaxError)
    for cls in (errors.KernelTypeError, errors.KernelNameError, errors.KernelSyntaxError):
        assert issubclass(cls, errors.KernelError)


# --------------------------------------------------------------------------- cache


def test_cache_key_covers_every_input() -> None:
    base = ("module m", "sm_80", "7.0", "0.1.0", {"opt": "O3"})
    k0 = cache.cache_key(*base)
    for i, alt in enumerate(("module n", "sm_90", "7.8", "0.2.0", {"opt": "O2"})):
        args = list(base)
        args[i] = alt
        assert cache.cache_key(*args) != k0  # type: ignore[arg-type]
    assert cache.cache_key(*base) == k0


def test_cache_store_load_and_corruption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path))
    key = cache.cache_key("module x", "sm_80", "7.0", "0")
    assert cache.load(key) is None
    ptx = "// PTX\n.version 7.0\n.visible .entry x()\n{ ret; }\n" + "".join(
        f"// {i}\n" for i in np.random.default_rng().integers(0, 9, 5)
    )
    p = cache.store(key, ptx, {"kernels": ["x"]})
    assert p == tmp_path / "ptx_cache" / f"{key}.ptx"
    got = cache.load(key)
    assert got is not None and got[0] == ptx and got[1]["kernels"] == ["x"]
    assert sorted(os.listdir(tmp_path / "ptx_cache")) == sorted([f"{key}.ptx", f"{key}.json"])
    # Truncated PTX: detected by its checksum, not loaded.
    (tmp_path / "ptx_cache" / f"{key}.ptx").write_text(ptx[:-3])
    assert cache.load(key) is None
    # Garbage metadata.
    cache.store(key, ptx, {})
    (tmp_path / "ptx_cache" / f"{key}.json").write_text("{not json")
    assert cache.load(key) is None
    # Metadata of another key.
    cache.store(key, ptx, {})
    meta = json.loads((tmp_path / "ptx_cache" / f"{key}.json").read_text())
    meta["key"] = "0" * 64
    (tmp_path / "ptx_cache" / f"{key}.json").write_text(json.dumps(meta))
    assert cache.load(key) is None
    monkeypatch.setenv("ZYNTAX_CACHE", "0")
    assert cache.store(key, ptx, {}) is None and cache.load(key) is None
