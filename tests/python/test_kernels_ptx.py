"""The zyntax.kernels modules at the shapes the benches run assemble with
``ptxas -Werror`` for sm_80 and sm_90, with the resource use their speed
depends on (measured on the H100, docs/performance.md): no local memory for
the memory-bound kernels, 16-byte global accesses, at most a few spilled
bytes for attention. No GPU needed."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

import zyntax
from zyntax import ptxinfo

rows_tile = importlib.import_module("zyntax.kernels.rows_tile")
reduce = importlib.import_module("zyntax.kernels.reduce")
elementwise = importlib.import_module("zyntax.kernels.elementwise")
attention = importlib.import_module("zyntax.kernels.attention")


def _rows(name: str, n: int, dtype: str, *extra: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A row tile program at width `n`, views promised unit-stride and aligned."""
    return rows_tile._module, (name, rows_tile.plan(n), dtype, 16, *extra)


_N = 50257
_WIDE = rows_tile.wide(
    "softmax_fwd",
    rows_tile.peeled("softmax", rows_tile.plan(_N, 2), "bf16", 16, _N, _N),
    _N,
    "bf16",
)
# The softmax forward of a peeled, tailed 4097-wide bf16 row looping over rows
# with the next row loaded ahead (rows_tile.prefetching); the RMSNorm
# forward's chunk loop at 128256 (rows_tile.held with HELD_FORM).
_PREFETCHED = rows_tile.prefetching(
    "softmax_fwd",
    rows_tile.tailed(
        "softmax",
        rows_tile.peeled("softmax", rows_tile.plan(4097, 2), "bf16", 16, 4097),
        4097,
        "bf16",
    ),
)
_RMS_LOOP = rows_tile.held(
    "rms_fwd", rows_tile.chunked("norm_fwd", rows_tile.plan(128256, 2)), 128256
)
MEMORY_BOUND: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "softmax_f32_8192": _rows("softmax_fwd", 8192, "f32"),
    "softmax_bf16_1000": _rows("softmax_fwd", 1000, "bf16"),
    "softmax_chunks_bf16": _rows("softmax_fwd", 50257, "bf16"),
    # the wide plan the softmax forward runs at 50257 (rows_tile.wide, the
    # peel of a contiguous bf16 tensor): 64 registers, 1024 threads, no spills
    "softmax_wide_bf16": (rows_tile._module, ("softmax_fwd", _WIDE, "bf16", 16)),
    "softmax_prefetched_bf16_4097": (
        rows_tile._module,
        ("softmax_fwd", _PREFETCHED, "bf16", 16),
    ),
    "rms_norm_loop_bf16_128256": (rows_tile._module, ("norm_fwd", _RMS_LOOP, "bf16", 16, "rms")),
    "softmax_bwd_bf16_4097": _rows("softmax_bwd", 4097, "bf16"),
    "layer_norm_bf16_8192": _rows("norm_fwd", 8192, "bf16", "layer"),
    "layer_norm_bwd_bf16_1000": _rows("norm_bwd", 1000, "bf16", "layer"),
    "rms_norm_bf16_8192": _rows("norm_fwd", 8192, "bf16", "rms"),
    "sum_f32": (reduce._build_flat, ("sum", "f32", 4)),
    "cross_entropy_bf16": _rows("ce_fwd", 128256, "bf16", "i64"),
    "cross_entropy_bwd_bf16": _rows("ce_bwd", 50257, "bf16", "i64"),
    "saxpy_f32": (elementwise._build, ("f32", 4, 512, 4)),
}


def resources(module: Any, arch: str) -> tuple[str, dict[str, dict[str, int]]]:
    ptx = zyntax.compile(module, backend="nvptx", arch=arch)
    return ptx, ptxinfo.ptxas_resources(zyntax.validate_ptx(ptx, arch).log)


@pytest.mark.parametrize("name", sorted(MEMORY_BOUND))
def test_memory_bound_kernels_assemble_without_local_memory(name: str) -> None:
    build, key = MEMORY_BOUND[name]
    ptx, res = resources(build(*key), "sm_90")
    assert res, "ptxas reported no kernel"
    for kernel, r in res.items():
        assert r["stack_bytes"] == 0 and r["spill_store_bytes"] == 0, (kernel, r)
    assert ".v4." in ptx  # 16-byte accesses


@pytest.mark.parametrize(("d", "causal"), sorted(attention.SHAPES))
def test_attention_assembles(d: int, causal: bool) -> None:
    atoms, bn = attention.SHAPES[d, causal]
    module = attention._build("bf16", d, causal, atoms, bn)
    for arch in ("sm_80", "sm_90"):
        ptx, res = resources(module, arch)
        r = res["attention"]
        assert r["spill_store_bytes"] <= 64, r
        assert ptx.count("mma.sync") >= 2 * (d // 16) * 8
        assert "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx
