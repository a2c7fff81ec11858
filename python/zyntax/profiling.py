"""``zyntax.profile``: record what the compiler and the CUDA runtime do and
write a Chrome-trace / Perfetto JSON file::

    with zyntax.profile("trace.json") as prof:
        mod = cuda.load_hir(module)          # compile (per stage), module load
        k[grid, block](n, x, y)              # launch: host span + kernel on the GPU track
        y.to_host()                          # copy
    print(len(prof.events))

Open the file in https://ui.perfetto.dev or ``chrome://tracing``. Recorded:
compiles with one span per stage (parse, verify, lower, optimize, codegen),
PTX cache hits, module loads and module-cache hits, kernel launches (host
time, and device time from CUDA events on a per-stream GPU track), graph
replays, host/device copies, driver allocations, and the memory pool's
in-use and cached bytes as a counter track (the memory timeline). While a
profile runs, the same host operations are NVTX ranges when
``libnvToolsExt.so.1`` can be loaded (Nsight Systems shows them); without
it nothing changes. Profiling adds two CUDA events per launch; outside a
``with zyntax.profile`` block it costs one atomic load per launch.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from zyntax import _native

__all__ = ["Profile", "current", "instant", "profile", "span_from"]

_lock = threading.Lock()
#: Host track ids of events recorded from Python (above the runtime's small thread numbers).
_PY_TID_BASE = 1_000_000
_current: Profile | None = None


def current() -> Profile | None:
    """The running profile, if any (a cheap check for hooks)."""
    return _current


class Profile:
    """A recording; use through :func:`profile`."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._py_events: list[dict[str, Any]] = []
        self._native = hasattr(_native, "cuda_profile_start")
        self._t0 = 0.0
        self.nvtx = False

    def now(self) -> float:
        """Microseconds on the trace's clock."""
        if self._native:
            t: float = _native.cuda_profile_now_us()
            return t
        return (time.perf_counter() - self._t0) * 1e6

    def add(self, event: dict[str, Any]) -> None:
        self._py_events.append(event)

    def __enter__(self) -> Profile:
        global _current
        with _lock:
            if _current is not None:
                raise RuntimeError("a zyntax.profile is already running")
            _current = self
        self._t0 = time.perf_counter()
        if self._native:
            _native.cuda_profile_start()
            self.nvtx = bool(_native.cuda_profile_nvtx())
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        native = _native.cuda_profile_stop() if self._native else []
        with _lock:
            _current = None
        self.events = sorted(native + self._py_events, key=lambda e: float(e["ts"]))
        if self.path is not None:
            with open(self.path, "w") as f:
                json.dump(self.chrome_trace(), f)

    def chrome_trace(self) -> dict[str, Any]:
        """The recording in the Chrome trace-event format (Perfetto reads it)."""
        out: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "host (zyntax)"}},
            {"ph": "M", "name": "process_sort_index", "pid": 0, "args": {"sort_index": 0}},
        ]
        gpus: set[int] = set()
        streams: dict[tuple[int, int], int] = {}
        host_threads: set[int] = set()
        for e in self.events:
            track = e["track"]
            if track[0] == "device":
                ordinal, stream = int(track[1]), int(track[2])
                pid = 1 + ordinal
                if ordinal not in gpus:
                    gpus.add(ordinal)
                    out.append(
                        {
                            "ph": "M",
                            "name": "process_name",
                            "pid": pid,
                            "args": {"name": f"GPU {ordinal}"},
                        }
                    )
                    out.append(
                        {
                            "ph": "M",
                            "name": "process_sort_index",
                            "pid": pid,
                            "args": {"sort_index": pid},
                        }
                    )
                tid = streams.get((ordinal, stream), 0)
                if not tid:
                    tid = streams[(ordinal, stream)] = len(streams) + 1
                    label = "legacy stream" if stream == 0 else f"stream {stream:#x}"
                    out.append(
                        {
                            "ph": "M",
                            "name": "thread_name",
                            "pid": pid,
                            "tid": tid,
                            "args": {"name": label},
                        }
                    )
            else:
                pid, tid = 0, int(track[1])
                if tid not in host_threads:
                    host_threads.add(tid)
                    # Runtime threads are numbered from 1; Python's are thread idents.
                    label = f"runtime thread {tid}" if tid < _PY_TID_BASE else "Python"
                    out.append(
                        {
                            "ph": "M",
                            "name": "thread_name",
                            "pid": 0,
                            "tid": tid,
                            "args": {"name": label},
                        }
                    )
            ev: dict[str, Any] = {
                "name": e["name"],
                "cat": e["cat"],
                "ph": e["ph"],
                "ts": round(float(e["ts"]), 3),
                "pid": pid,
                "tid": tid,
                "args": e.get("args", {}),
            }
            if e["ph"] == "X":
                ev["dur"] = round(float(e["dur"]), 3)
            elif e["ph"] == "i":
                ev["s"] = "t"
            out.append(ev)
        return {
            "traceEvents": out,
            "displayTimeUnit": "ms",
            "otherData": {"producer": "zyntax.profile", "nvtx": self.nvtx},
        }


def profile(path: str | os.PathLike[str] | None = None) -> Profile:
    """A context manager recording a trace; written to `path` (Chrome-trace
    JSON) on exit when given. The events stay in ``.events``."""
    return Profile(path)


def instant(cat: str, name: str, **args: Any) -> None:
    """Records an instant event in the running profile (no-op without one)."""
    p = _current
    if p is not None:
        thread = _PY_TID_BASE + threading.get_ident() % 100_000
        p.add(
            {
                "ph": "i",
                "cat": cat,
                "name": name,
                "ts": p.now(),
                "dur": 0.0,
                "track": ("host", thread),
                "args": args,
            }
        )


def span_from(
    cat: str, name: str, start_us: float, stages: dict[str, float] | None = None, **args: Any
) -> None:
    """Records a span from `start_us` to now, with optional sub-spans laid out
    one after another (`stages`: name → seconds, e.g. a compile's timings)."""
    p = _current
    if p is None:
        return
    end = p.now()
    thread = _PY_TID_BASE + threading.get_ident() % 100_000
    p.add(
        {
            "ph": "X",
            "cat": cat,
            "name": name,
            "ts": start_us,
            "dur": max(end - start_us, 0.0),
            "track": ("host", thread),
            "args": args,
        }
    )
    t = start_us
    for stage, secs in (stages or {}).items():
        dur = float(secs) * 1e6
        p.add(
            {
                "ph": "X",
                "cat": cat,
                "name": f"{name}: {stage}",
                "ts": t,
                "dur": dur,
                "track": ("host", thread),
                "args": {},
            }
        )
        t += dur
