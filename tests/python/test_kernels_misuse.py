"""Misuse of every public ``zyntax.kernels`` function (issue 29 items 4 and 5).

A table gives each function a good call on tiny numpy inputs (the
interpreter); the tests spoil one argument at a time: scalars that overflow,
are not finite, are bools, complex numbers or arrays; arrays, lists or None
where a flag or a name is expected; wrong dtypes and ranks; broadcast views
whose logical size no machine holds; bad ``out=`` and ``stream=``. Each must
raise a ``ZyntaxError`` subclass whose message names the argument, before
anything is copied or allocated. Results the kernels do give are checked
against numpy in float64 (outputs poisoned first).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import zyntax
from zyntax import kernels


def rng() -> np.random.Generator:
    seed = int(np.random.SeedSequence().entropy or 0) % 2**32
    print("seed", seed)
    return np.random.default_rng(seed)


R = rng()


def f32(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float32)


def f16(*shape: int) -> np.ndarray:
    return R.standard_normal(shape).astype(np.float16)


#: Each public function with a good call (fresh arrays per call).
GOOD: dict[str, tuple[Callable[..., Any], Callable[[], dict[str, Any]]]] = {
    "saxpy": (kernels.saxpy, lambda: {"a": 1.5, "x": f32(8), "y": f32(8)}),
    "softmax": (kernels.softmax, lambda: {"x": f32(3, 8)}),
    "layer_norm": (
        kernels.layer_norm,
        lambda: {"x": f32(3, 8), "weight": f32(8), "bias": f32(8), "eps": 1e-5},
    ),
    "rms_norm": (kernels.rms_norm, lambda: {"x": f32(3, 8), "weight": f32(8), "eps": 1e-6}),
    "reduce_sum": (kernels.reduce_sum, lambda: {"x": f32(3, 8), "axis": -1}),
    "reduce_max": (kernels.reduce_max, lambda: {"x": f32(3, 8), "axis": -1}),
    "cross_entropy": (
        kernels.cross_entropy,
        lambda: {"logits": f32(3, 8), "targets": np.array([0, 7, 3]), "reduction": "none"},
    ),
    "softmax_backward": (kernels.softmax_backward, lambda: {"y": f32(3, 8), "dy": f32(3, 8)}),
    "layer_norm_backward": (
        kernels.layer_norm_backward,
        lambda: {"dy": f32(3, 8), "x": f32(3, 8), "weight": f32(8), "bias": f32(8), "eps": 1e-5},
    ),
    "rms_norm_backward": (
        kernels.rms_norm_backward,
        lambda: {"dy": f32(3, 8), "x": f32(3, 8), "weight": f32(8), "eps": 1e-6},
    ),
    "cross_entropy_backward": (
        kernels.cross_entropy_backward,
        lambda: {
            "dloss": f32(3),
            "logits": f32(3, 8),
            "targets": np.array([0, 7, 3]),
            "reduction": "none",
        },
    ),
    "matmul": (
        kernels.matmul,
        lambda: {"a": f32(4, 8), "b": f32(8, 4), "bias": f32(4), "activation": "relu"},
    ),
    "choose_variant": (kernels.choose_variant, lambda: {"a": f32(4, 8), "b": f32(8, 4)}),
    "grouped_matmul": (
        kernels.grouped_matmul,
        lambda: {"a": f32(4, 8), "b": f32(2, 8, 4), "groups": (3, 1), "bias": f32(4)},
    ),
    "attention": (
        kernels.attention,
        lambda: {
            "q": f16(1, 1, 2, 64),
            "k": f16(1, 1, 3, 64),
            "v": f16(1, 1, 3, 64),
            "scale": 0.125,
            "causal": False,
        },
    ),
    "attention_backward": (
        kernels.attention_backward,
        lambda: {
            "q": f16(1, 1, 2, 64),
            "k": f16(1, 1, 3, 64),
            "v": f16(1, 1, 3, 64),
            "o": f16(1, 1, 2, 64),
            "lse": f32(1, 1, 2),
            "do": f16(1, 1, 2, 64),
            "scale": 0.125,
            "causal": False,
        },
    ),
}


def test_every_public_function_is_in_the_table() -> None:
    public = {n for n in kernels.__all__ if callable(getattr(kernels, n))} - {"Variant"}
    assert public == set(GOOD)


def call(fn: str, **spoiled: Any) -> Any:
    func, good = GOOD[fn]
    return func(**{**good(), **spoiled})


def assert_names(fn: str, arg: str, **spoiled: Any) -> zyntax.ZyntaxError:
    """The call with `spoiled` raises a ZyntaxError naming `arg`."""
    with pytest.raises(zyntax.ZyntaxError) as info:
        call(fn, **spoiled)
    assert f"'{arg}'" in str(info.value), str(info.value)
    return info.value


@pytest.mark.parametrize("fn", sorted(set(GOOD) - {"attention"}))
def test_good_calls_run(fn: str) -> None:
    call(fn)


# ---------------------------------------------------------------- scalars

SCALARS = [
    ("saxpy", "a"),
    ("layer_norm", "eps"),
    ("rms_norm", "eps"),
    ("layer_norm_backward", "eps"),
    ("rms_norm_backward", "eps"),
    ("attention", "scale"),
    ("attention_backward", "scale"),
    ("matmul", "scale_a"),
    ("matmul", "scale_b"),
]
BAD_SCALARS = [
    10**400,
    -(10**400),
    math.nan,
    math.inf,
    -math.inf,
    1e39,  # finite, but not an f32
    np.float64(-4e38),
    True,
    np.bool_(False),
    1 + 2j,
    np.complex64(1),
    np.array([1.0, 2.0]),
    np.array(1.0),
    [1.0],
    "1.0",
    object(),
]


@pytest.mark.parametrize(("fn", "arg"), SCALARS)
@pytest.mark.parametrize("value", BAD_SCALARS, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_bad_scalars_name_the_argument(fn: str, arg: str, value: Any) -> None:
    assert_names(fn, arg, **{arg: value})


@pytest.mark.parametrize(
    ("fn", "arg", "value"),
    [
        ("layer_norm", "eps", -1e-3),
        ("rms_norm", "eps", -0.0 - 1e-30),
        ("attention", "scale", 0.0),
        ("attention", "scale", -0.5),
        ("attention", "scale", 1e-50),  # positive, but 0 in f32
        ("attention", "scale", 3e38),  # scale * log2(e) overflows f32
        ("saxpy", "a", None),
        ("layer_norm", "eps", None),
    ],
)
def test_out_of_range_scalars_name_the_argument(fn: str, arg: str, value: Any) -> None:
    assert_names(fn, arg, **{arg: value})


@pytest.mark.parametrize("a", [3, np.float32(-1.25), np.float64(0.5), np.int64(2)])
def test_numpy_and_int_scalars_are_numbers(a: Any) -> None:
    x, y = f32(37), f32(37)
    want = float(a) * x.astype(np.float64) + y
    kernels.saxpy(a, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- names and flags

NAMES = [
    ("cross_entropy", "reduction"),
    ("cross_entropy_backward", "reduction"),
    ("matmul", "activation"),
    ("matmul", "out_dtype"),
    ("matmul", "variant"),
    ("choose_variant", "variant"),
    ("choose_variant", "out_dtype"),
    ("attention", "variant"),
]
BAD_NAMES = [
    np.array(["none"]),
    np.array("relu"),
    ["relu"],
    ("relu",),
    {"simt": 1},
    b"relu",
    1,
    "bogus",
    object(),
]
FLAGS = [
    ("attention", "causal"),
    ("attention", "return_lse"),
    ("attention_backward", "causal"),
    ("attention_backward", "deterministic"),
    ("matmul", "allow_tf32"),
    ("choose_variant", "allow_tf32"),
]
BAD_FLAGS = [np.array([True, False]), np.array(True), "yes", "False", 2, None, 1.0, [True]]


@pytest.mark.parametrize(("fn", "arg"), NAMES)
@pytest.mark.parametrize("value", BAD_NAMES, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_bad_names_name_the_argument(fn: str, arg: str, value: Any) -> None:
    assert_names(fn, arg, **{arg: value})


def test_reduction_none_is_not_a_name() -> None:
    assert_names("cross_entropy", "reduction", reduction=None)


@pytest.mark.parametrize(("fn", "arg"), FLAGS)
@pytest.mark.parametrize("value", BAD_FLAGS, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_bad_flags_name_the_argument(fn: str, arg: str, value: Any) -> None:
    assert_names(fn, arg, **{arg: value})


@pytest.mark.parametrize("fn", ["reduce_sum", "reduce_max"])
@pytest.mark.parametrize("axis", [np.array([-1]), "-1", 1.0, True, [-1], 0, 2, -2, 2**70])
def test_bad_axes_name_the_argument(fn: str, axis: Any) -> None:
    assert_names(fn, "axis", axis=axis)


STREAMS = sorted(set(GOOD) - {"choose_variant"})


@pytest.mark.parametrize("fn", STREAMS)
@pytest.mark.parametrize("stream", ["s", 5, np.array([1]), object()], ids=repr)
def test_bad_streams_name_the_argument(fn: str, stream: Any) -> None:
    assert_names(fn, "stream", stream=stream)


def test_a_read_only_y_is_refused() -> None:
    assert_names("saxpy", "y", y=_read_only(f32(8)))


# ---------------------------------------------------------------- arrays

ARRAYS = [
    ("saxpy", "x"),
    ("saxpy", "y"),
    ("softmax", "x"),
    ("layer_norm", "x"),
    ("layer_norm", "weight"),
    ("layer_norm", "bias"),
    ("rms_norm", "x"),
    ("rms_norm", "weight"),
    ("reduce_sum", "x"),
    ("reduce_max", "x"),
    ("cross_entropy", "logits"),
    ("cross_entropy", "targets"),
    ("softmax_backward", "y"),
    ("softmax_backward", "dy"),
    ("layer_norm_backward", "dy"),
    ("layer_norm_backward", "x"),
    ("layer_norm_backward", "weight"),
    ("rms_norm_backward", "dy"),
    ("rms_norm_backward", "x"),
    ("rms_norm_backward", "weight"),
    ("cross_entropy_backward", "dloss"),
    ("cross_entropy_backward", "logits"),
    ("cross_entropy_backward", "targets"),
    ("matmul", "a"),
    ("matmul", "b"),
    ("matmul", "bias"),
    ("choose_variant", "a"),
    ("choose_variant", "b"),
    ("attention", "q"),
    ("attention", "k"),
    ("attention", "v"),
    ("attention_backward", "lse"),
    ("attention_backward", "do"),
]


def _spoil(kind: str, good: np.ndarray) -> Any:
    return {
        "float64": lambda: good.astype(np.float64),
        "complex64": lambda: good.astype(np.complex64),
        "int8": lambda: good.astype(np.int8),
        "uint64": lambda: good.astype(np.uint64),
        "bool": lambda: good.astype(bool),
        "object": lambda: good.astype(object),
        "list": lambda: good.tolist(),
        "str": lambda: "x",
        "float": lambda: 1.0,
        "0-d": lambda: np.array(1, good.dtype),
        "huge broadcast": lambda: np.broadcast_to(np.zeros((), good.dtype), (2**23, 2**23)),
        "huge 1-d broadcast": lambda: np.broadcast_to(np.zeros((), good.dtype), (2**46,)),
    }[kind]()


SPOILS = [
    "float64",
    "complex64",
    "int8",
    "uint64",
    "bool",
    "object",
    "list",
    "str",
    "float",
    "0-d",
    "huge broadcast",
    "huge 1-d broadcast",
]


@pytest.mark.parametrize(("fn", "arg"), ARRAYS)
@pytest.mark.parametrize("kind", SPOILS)
def test_bad_arrays_name_the_argument(fn: str, arg: str, kind: str) -> None:
    good = GOOD[fn][1]()[arg]
    if kind in ("float64", "int8", "uint64") and arg == "targets":
        bad = good.astype(np.float32 if kind == "float64" else np.int8)
    else:
        bad = _spoil(kind, good)
    assert_names(fn, arg, **{arg: bad})


@pytest.mark.parametrize(
    ("fn", "arg", "value"),
    [
        ("saxpy", "y", f32(9)),
        ("saxpy", "x", f32(2, 4)),
        ("layer_norm", "weight", f32(7)),
        ("layer_norm", "weight", f32(1, 8)),
        ("layer_norm", "bias", f32(9)),
        ("layer_norm", "bias", f16(8)),
        ("rms_norm", "weight", f16(8)),
        ("cross_entropy", "targets", np.array([0, 1])),
        ("cross_entropy", "targets", np.array([[0, 1, 2]])),
        ("cross_entropy", "logits", f32(3, 0)),
        ("matmul", "b", f32(7, 4)),
        ("matmul", "b", f16(8, 4)),
        ("matmul", "bias", f32(5)),
        ("matmul", "bias", f32(1, 4)),
        ("matmul", "a", f32(2, 2, 4, 8)),
        ("matmul", "b", f32(3, 7, 4)),
        ("grouped_matmul", "groups", (4, 1)),
        ("grouped_matmul", "b", f32(2, 7, 4)),
        ("attention", "q", f16(1, 1, 2, 32)),
        ("attention", "k", f16(1, 2, 3, 64)),
        ("attention", "v", f16(1, 1, 4, 64)),
        ("attention", "k", f32(1, 1, 3, 64)),
    ],
    ids=lambda v: v if isinstance(v, str) else str(getattr(v, "shape", v)),
)
def test_mismatched_arrays_name_the_argument(fn: str, arg: str, value: Any) -> None:
    assert_names(fn, arg, **{arg: value})


def test_an_empty_key_sequence_names_k() -> None:
    assert_names("attention", "k", k=f16(1, 1, 0, 64), v=f16(1, 1, 0, 64))


def test_a_huge_product_is_refused_before_its_output_is_allocated() -> None:
    """(2**23 x 1) @ (1 x 2**23): small inputs, a 2**46-element result (256
    TiB; numpy was asked for it first)."""
    a = np.broadcast_to(np.ones((1, 1), np.float32), (2**23, 1))
    b = np.broadcast_to(np.ones((1, 1), np.float32), (1, 2**23))
    err = assert_names("matmul", "out", a=a, b=b, bias=None)
    assert "2**31" in str(err)


# ---------------------------------------------------------------- out=

OUTS = {
    "softmax": (3, 8),
    "layer_norm": (3, 8),
    "rms_norm": (3, 8),
    "reduce_sum": (3,),
    "reduce_max": (3,),
    "cross_entropy": (3,),
    "softmax_backward": (3, 8),
    "layer_norm_backward": (3, 8),
    "rms_norm_backward": (3, 8),
    "cross_entropy_backward": (3, 8),
    "matmul": (4, 4),
}


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("fn", sorted(OUTS))
@pytest.mark.parametrize(
    "spoil",
    ["shape", "dtype", "strided", "list", "str", "read-only", "broadcast", "huge broadcast", "0-d"],
)
def test_bad_outputs_name_out(fn: str, spoil: str) -> None:
    shape = OUTS[fn]
    out: Any = {
        "shape": lambda: np.empty((*shape[:-1], shape[-1] + 1), np.float32),
        "dtype": lambda: np.empty(shape, np.float64),
        "strided": lambda: np.empty((*shape[:-1], 2 * shape[-1]), np.float32)[..., ::2],
        "list": lambda: np.empty(shape, np.float32).tolist(),
        "str": lambda: "out",
        "read-only": lambda: _read_only(np.empty(shape, np.float32)),
        "broadcast": lambda: np.broadcast_to(np.empty((), np.float32), shape),
        "huge broadcast": lambda: np.broadcast_to(np.empty((), np.float32), (2**23, 2**23)),
        "0-d": lambda: np.empty((), np.float32),
    }[spoil]()
    assert_names(fn, "out", out=out)


# ---------------------------------------------------------------- valid edge cases give true values


def test_non_contiguous_inputs_are_read_right() -> None:
    x = f32(5, 24)[:, ::3]
    out = np.full((5, 8), np.nan, np.float32)
    kernels.softmax(x, out=out)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    a, b = f32(8, 6).T, f32(16, 5)[::2, :3]  # a column-major view, a strided b
    got = kernels.matmul(a, b)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", ["softmax", "layer_norm", "rms_norm", "reduce_sum"])
def test_zero_rows_give_empty_results(fn: str) -> None:
    func, good = GOOD[fn]
    args = {**good(), "x": np.empty((0, 8), np.float32)}
    out = func(**args)
    assert out.shape == ((0,) if fn == "reduce_sum" else (0, 8))


def test_matmul_with_an_empty_inner_dimension_is_the_bias() -> None:
    bias = f32(4)
    out = kernels.matmul(np.empty((3, 0), np.float32), np.empty((0, 4), np.float32), bias=bias)
    np.testing.assert_array_equal(out, np.broadcast_to(bias, (3, 4)))
    out = kernels.matmul(np.empty((3, 0), np.float32), np.empty((0, 4), np.float32))
    np.testing.assert_array_equal(out, np.zeros((3, 4), np.float32))


# ---------------------------------------------------------------- results are never garbage


@pytest.mark.parametrize("shape", [(0, 8), (2, 0, 8)])
def test_cross_entropy_mean_of_no_rows_is_nan(shape: tuple[int, ...]) -> None:
    """As PyTorch: the mean of an empty set of losses is NaN (it returned
    whatever np.empty held)."""
    out = np.full((), 7.0, np.float32)  # poisoned with a plausible loss
    logits, targets = np.empty(shape, np.float32), np.empty(shape[:-1], np.int64)
    got = kernels.cross_entropy(logits, targets, reduction="mean", out=out)
    assert got is out and np.isnan(out)
    assert np.isnan(kernels.cross_entropy(logits, targets, reduction="mean"))
    assert kernels.cross_entropy(logits, targets).shape == shape[:-1]


@pytest.mark.parametrize("n", [1, 7, 33, 4099])
@pytest.mark.parametrize("where", ["first", "last", "middle", "all", "inf and nan"])
def test_reduce_max_propagates_nan_like_numpy(n: int, where: str) -> None:
    """np.max is NaN when any element is; HIR's (and PTX's) max drop a NaN
    operand, so the kernel's combining step must not. Rows and the whole
    tensor (the two-stage grid reduction: the NaN in any block's partial)."""
    x = f32(3, n)
    at = {"first": 0, "last": n - 1, "middle": n // 2}.get(where)
    if where == "all":
        x[1] = np.nan
    elif where == "inf and nan":
        x[1, 0], x[1, -1] = np.inf, np.nan
    else:
        x[1, at] = np.nan
    x[2, n // 3] = np.inf
    out = np.full(3, 5.0, np.float32)
    kernels.reduce_max(x, axis=-1, out=out)
    np.testing.assert_array_equal(out, x.max(-1))
    np.testing.assert_array_equal(kernels.reduce_max(x), x.max())
    np.testing.assert_array_equal(kernels.reduce_max(x[::-1].T), x.max())  # strided: rows first
    clean = np.delete(x, 1, axis=0)  # no NaN: the max is still exact
    np.testing.assert_array_equal(kernels.reduce_max(clean), clean.max())


def test_reduce_max_keeps_negative_infinity_and_signed_zeros() -> None:
    x = np.array([[-np.inf, -np.inf], [-0.0, -0.0], [-1.0, -np.inf]], np.float32)
    np.testing.assert_array_equal(kernels.reduce_max(x, axis=-1), x.max(-1))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(
    "scales", [{"scale_a": 2.0}, {"scale_b": 0.5}, {"scale_a": 2.0, "scale_b": 3.0}]
)
def test_matmul_scales_on_non_fp8_inputs_are_refused(dtype: Any, scales: dict[str, float]) -> None:
    """They were ignored silently on f32 (and applied or not depending on the
    variant on f16): per-tensor scales are fp8's; other dtypes are refused."""
    a, b = f32(4, 8).astype(dtype), f32(8, 4).astype(dtype)
    err = assert_names("matmul", next(iter(scales)), a=a, b=b, bias=None, **scales)
    assert "fp8" in str(err)


def test_outputs_overlapping_what_the_kernel_reads_are_refused() -> None:
    """Another thread would read what one wrote: garbage."""
    buf = f32(5, 8)
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.softmax(buf[1:], out=buf[:-1])
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.reduce_sum(buf, axis=-1, out=buf.reshape(-1)[3:8])
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'weight'"):
        w = np.empty((4, 8), np.float32)
        kernels.rms_norm(f32(4, 8), w[1], out=w)
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'logits'"):
        kernels.cross_entropy(buf, np.zeros(5, np.int64), out=buf.reshape(-1)[2:7])
    line = f32(9)
    with pytest.raises(zyntax.ArgumentError, match="'y': overlaps argument 'x'"):
        kernels.saxpy(2.0, line[1:], line[:-1])


def test_in_place_outputs_are_refused() -> None:
    """The kernels read inputs through the read-only path: exact in-place use
    trapped in the interpreter (no argument named) and may read stale data
    on the GPU."""
    x = f32(4, 37)
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.softmax(x, out=x)
    with pytest.raises(zyntax.ArgumentError, match="'out': overlaps argument 'x'"):
        kernels.layer_norm(x, f32(37), out=x)
    y = f32(11)
    with pytest.raises(zyntax.ArgumentError, match="'y': overlaps argument 'x'"):
        kernels.saxpy(2.0, y, y)
