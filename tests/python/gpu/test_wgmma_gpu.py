"""Warpgroup MMA on the device (issue 13 item 1): the tile products of
tests/python/test_wgmma.py (each swizzle, every input family, A from
registers) run on the GPU (sm_90a) and on the interpreter from the same fresh
random inputs, compared with each other and with numpy float64; plus
`elect.sync` and `setmaxnreg`. Skipped without an NVIDIA GPU (conftest marks
tests/python/gpu); the sm_90a forms need a Hopper GPU."""

from __future__ import annotations

import numpy as np
import pytest

from test_wgmma import ACC, SMEM, Form, build, expected, inputs  # tests/python is on sys.path
from zyntax import cuda, hir, interp

pytestmark = pytest.mark.gpu


def hopper() -> None:
    if cuda.device_arch() not in ("sm_90", "sm_90a"):
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")


FORMS = [
    Form("bf16", "f32", 64, "128B"),
    Form("bf16", "f32", 256, "128B"),
    Form("bf16", "f32", 64, "none"),
    Form("f16", "f32", 128, "64B"),
    Form("f16", "f32", 32, "32B"),
    Form("f16", "f16", 64, "128B"),
    Form("f16", "f32", 64, "128B", trans=True),
    Form("bf16", "f32", 64, "none", trans=True),
    Form("tf32", "f32", 64, "128B"),
    Form("tf32", "f32", 16, "none"),
    Form("e4m3", "f32", 64, "128B"),
    Form("e4m3", "f16", 32, "none", b_type="e5m2"),
    Form("s8", "i32", 64, "128B"),
    Form("u8", "i32", 32, "none"),
    Form("bf16", "f32", 64, "128B", a_regs=True),
    Form("s8", "i32", 48, "none", a_regs=True),
]


@pytest.mark.parametrize("form", FORMS, ids=str)
def test_wgmma_matches_interpreter_and_numpy(form: Form) -> None:
    hopper()
    m = build(form)
    k = cuda.load_hir(m, arch="sm_90a").kernel("k")
    _, np_t = ACC[form.acc]
    for again in (False, True):
        a, bb, img, frag = inputs(form)
        want = expected(form, a, bb, again)
        cpu = np.full(want.shape, 77, np_t)
        interp.launch(m, "k", 1, 128, img, frag, cpu, again, shared_bytes=SMEM)
        np.testing.assert_array_equal(cpu, want)
        out = cuda.to_device(np.full(want.shape, 77, np_t))
        k.launch(1, 128, cuda.to_device(img), cuda.to_device(frag), out, again, shared_mem=SMEM)
        got = out.to_host()
        if form.acc == "i32":
            np.testing.assert_array_equal(got, want)
            continue
        # Tensor cores accumulate with a little error of their own (the
        # interpreter rounds once); bound it by the result's scale. fp8 inputs
        # accumulate in about 13 mantissa bits even into f32 (measured on an
        # H100: 2^-12 relative), hence the looser f32 bound.
        scale = float(np.max(np.abs(want.astype(np.float64)))) + 1.0
        fp8 = form.a_type in ("e4m3", "e5m2")
        tol = {"f32": 1e-3 if fp8 else 4e-6, "f16": 4e-3}[form.acc] * scale
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tol)


def test_elect_sync_and_setmaxnreg() -> None:
    hopper()
    m = hir.Module("elect", targets=["sm_90a"])
    with m.kernel("k", [hir.ptr("global", hir.u32)], max_threads=256, min_blocks=1) as b:
        t = b.thread_idx()
        with b.if_(b.lt(t, 128)):
            b.setmaxnreg(240, increase=True)
        with b.if_(b.ge(t, 128)):
            b.setmaxnreg(40, increase=False)
        with b.if_(b.ne(b.and_(t, 64), 0)):
            one = b.elect_sync()
            b.store(b.ptr_add(b.params[0], t), b.cast(one, hir.u32))
    k = cuda.load_hir(m, arch="sm_90a").kernel("k")
    out = cuda.to_device(np.full(256, 9, np.uint32))
    k.launch(1, 256, out)
    cpu = np.full(256, 9, np.uint32)
    interp.launch(m, "k", 1, 256, cpu)
    np.testing.assert_array_equal(out.to_host(), cpu)
    assert cpu.sum() == 9 * 128 + 4  # one elected lane in each of warps 2, 3, 6, 7
