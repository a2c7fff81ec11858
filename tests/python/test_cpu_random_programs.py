"""The random expression programs of test_random_programs.py as GPU kernels
(each thread loads its operands, runs the program, stores its result) run
natively on the CPU (``zyntax.cpu.launch(mode="native")``), bit for bit
equal to the reference interpreter and to the Python model of HIR's
semantics, on random per-thread inputs, several blocks of a partial last
warp (issue 27 item 4)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from test_random_programs import FLOAT_OPS, INT_OPS, Op, Program, model, programs
from zyntax import cpu, hir

THREADS, BLOCKS = 40, 3  # 120 threads: a partial warp in every block


def build_kernel(prog: Program, ops: list[Op], ty: hir.Type, n_params: int) -> hir.Module:
    """out[gid] = prog(p0[gid], ..., p{n-1}[gid])."""
    m = hir.Module("randk")
    g = hir.ptr("global", ty)
    with m.kernel("k", [g] * (n_params + 1)) as b:
        gid = b.add(b.mul(b.block_idx("x"), b.block_dim("x")), b.thread_idx("x"))
        vals = [b.load(b.ptr_add(b.params[k], gid)) for k in range(n_params)]
        for i, args in prog:
            vals.append(getattr(b, ops[i].name)(*(vals[a] for a in args)))
        b.store(b.ptr_add(b.params[n_params], gid), vals[-1])
        b.ret()
    return m


def run_both(m: hir.Module, inputs: list[np.ndarray], poison: object) -> np.ndarray:
    outs = []
    for mode in ("native", "interp"):
        out = np.full(THREADS * BLOCKS, poison, inputs[0].dtype)
        where = cpu.launch(m, "k", BLOCKS, THREADS, *inputs, out, mode=mode)
        assert where == ("cpu" if mode == "native" else "interp")
        outs.append(out)
    assert np.array_equal(outs[0], outs[1], equal_nan=outs[0].dtype.kind == "f")
    return outs[0]


@settings(max_examples=25, deadline=None)
@given(prog=programs(INT_OPS, 3), seed=st.integers(0, 2**32 - 1))
def test_random_i32_kernels(prog: Program, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = THREADS * BLOCKS
    inputs = [rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32) for _ in range(3)]
    got = run_both(build_kernel(prog, INT_OPS, hir.i32, 3), inputs, -7)
    for t in range(0, n, 17):  # the model is Python: a sample of the threads
        assert got[t] == model(prog, INT_OPS, [int(a[t]) for a in inputs]), t


@settings(max_examples=25, deadline=None)
@given(prog=programs(FLOAT_OPS, 3), seed=st.integers(0, 2**32 - 1))
def test_random_f64_kernels(prog: Program, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = THREADS * BLOCKS
    inputs = [rng.uniform(-1e3, 1e3, n) for _ in range(3)]
    got = run_both(build_kernel(prog, FLOAT_OPS, hir.f64, 3), inputs, np.nan)
    for t in range(0, n, 17):
        assert got[t] == model(prog, FLOAT_OPS, [float(a[t]) for a in inputs]), t
