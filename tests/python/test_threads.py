"""The extension declares itself free-threading safe (gil_used = false):
builders of one module used from several threads at once stay consistent."""

from __future__ import annotations

import threading

import numpy as np

from zyntax import hir, interp


def test_concurrent_builders_share_a_module() -> None:
    m = hir.Module("threads")
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(k: int) -> None:
        try:
            start.wait()
            with m.host_function(f"f{k}", [hir.i64], [hir.i64]) as b:
                x = b.params[0]
                for _ in range(200):
                    x = x + k
                b.ret(x)
        except BaseException as e:  # reported below; a thread must not die silently
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(m.functions) == sorted(f"f{k}" for k in range(8))
    m.verify()
    for k in range(8):
        assert interp.call(m, f"f{k}", 5) == 5 + 200 * k


def test_concurrent_interpreter_runs() -> None:
    import saxpy

    m = saxpy.build()
    results: list[bool] = []

    def run(seed: int) -> None:
        rng = np.random.default_rng(seed)
        x = rng.uniform(1, 2, 300).astype(np.float32)
        y = rng.uniform(1, 2, 300).astype(np.float32)
        want = (np.float64(3.0) * x + y).astype(np.float32)
        interp.launch(m, "saxpy", 2, 256, 300, 3.0, x, y)
        results.append(bool(np.array_equal(y, want)))

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4
