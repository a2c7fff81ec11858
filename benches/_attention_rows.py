"""Timing and reporting the rows of one attention case, shared by the forward
(``benches/attention.py``) and backward (``benches/_attention_bwd.py``) cases:
every row checked beforehand is timed in interleaved rounds (each the median
CUDA-event time of `iters` calls; the inputs, tens of MB, exceed L2; a row
keeps its best round), so a clock or temperature drift during the run falls on
every row alike. The ``torch_sdpa[backend]`` rows become one ``torch_sdpa``
row: the fastest backend, named in the row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from _common import Results, event_median_ms

#: (row, call, extra fields of the row)
Row = tuple[str, Callable[[], Any], dict[str, Any]]


def timed_ms(fn: Callable[[], Any], iters: int) -> float:
    """Median CUDA-event time of one call."""
    return event_median_ms(lambda _i: fn(), 1, iters)


def time_rows(
    res: Results, name: str, rows: Sequence[Row], flops: float, iters: int, rounds: int
) -> None:
    """Times `rows` in `rounds` interleaved rounds and adds a TFLOP/s row for
    each (the SDPA backends as one ``torch_sdpa`` row)."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for impl, call, _extra in rows:
            ms = timed_ms(call, iters)
            best[impl] = min(ms, best.get(impl, ms))
    sdpa_best: tuple[float, str] | None = None
    for impl, _call, extra in rows:
        ms = best[impl]
        tflops = flops / (ms * 1e-3) / 1e12
        print(f"  {name} {impl}: {tflops:.1f} TFLOP/s")
        if impl.startswith("torch_sdpa["):
            if sdpa_best is None or ms < sdpa_best[0]:
                sdpa_best = (ms, impl[len("torch_sdpa[") : -1])
            continue
        res.add(name, impl, "TFLOP_per_s", tflops, False, ms=round(ms, 3), **extra)
    if sdpa_best is not None:
        ms, backend = sdpa_best
        tflops = flops / (ms * 1e-3) / 1e12
        res.add(name, "torch_sdpa", "TFLOP_per_s", tflops, False, ms=round(ms, 3), backend=backend)
