"""Issue 10 item 7 on the GPU: string parameters of zyntax.cuda objects that
need a live device (a loaded module, a stream, an array, a prepared program)
refuse a lone surrogate with ArgumentError naming the parameter, not
UnicodeEncodeError. (The device-free cases are in tests/python/test_boundary.py.)"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import zyntax
from zyntax import cuda

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "gpu"))
import ptx_kernels  # tests/gpu/ptx_kernels.py

pytestmark = pytest.mark.gpu
S = "\udc80"
N = 256


def _calls() -> list[tuple[str, Callable[[], object], str]]:
    mod = cuda.load_module(ptx_kernels.SAXPY)
    stream = cuda.Stream()
    managed = cuda.managed_empty(N, np.float32)
    p = cuda.Program()
    x, y = p.input("x", N), p.output("y", N)
    p.launch(mod.kernel("saxpy"), 1, N, N, 2.0, x, y, updates=[y])
    ex = p.prepare({"x": cuda.zeros(N), "y": cuda.zeros(N)}, warmup=0)
    return [
        ("Module.kernel", lambda: mod.kernel("saxpy" + S), "name"),
        ("Module.__getattr__", lambda: getattr(mod, "saxpy" + S), "name"),
        ("Stream.begin_capture", lambda: stream.begin_capture(S), "mode"),
        ("advise", lambda: cuda.advise(managed, S), "advice"),
        ("ProgramExec.bind", lambda: ex.bind("x" + S, cuda.zeros(N)), "name"),
        ("ProgramExec.buffer_ptr", lambda: ex.buffer_ptr("x" + S), "name"),
    ]


def test_live_object_string_parameters_refuse_lone_surrogates() -> None:
    for label, call, name in _calls():
        with pytest.raises(zyntax.ArgumentError) as info:
            call()
        notes = " ".join(getattr(info.value, "__notes__", []))
        assert name in str(info.value) + notes, f"{label}: {info.value}"
