"""Renders a ``zyntax.profile`` trace (Chrome-trace JSON) as a timeline PNG
with matplotlib: one row per host thread and per GPU stream, spans coloured
by category, and the memory pool's bytes below.

Usage: ``python benches/render_trace.py trace.json out.png [--from-ms A --to-ms B]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

COLORS = {
    "compile": "#4c72b0",
    "module": "#8172b2",
    "launch": "#55a868",
    "kernel": "#2ca02c",
    "graph": "#dd8452",
    "copy": "#c44e52",
    "memory": "#937860",
    "cache": "#da8bc3",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("trace", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--from-ms", type=float, default=None)
    ap.add_argument("--to-ms", type=float, default=None)
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = json.loads(a.trace.read_text())
    events: list[dict[str, Any]] = doc["traceEvents"]
    names: dict[tuple[int, int | None], str] = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[(e["pid"], None)] = e["args"]["name"]
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    lo = a.from_ms * 1e3 if a.from_ms is not None else -1e18
    hi = a.to_ms * 1e3 if a.to_ms is not None else 1e18
    spans = [e for e in events if e["ph"] == "X" and lo <= e["ts"] <= hi]
    counters = [e for e in events if e["ph"] == "C" and lo <= e["ts"] <= hi]
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    fig, (ax, mem) = plt.subplots(
        2, 1, figsize=(14, 2 + 0.6 * len(rows)), sharex=True, height_ratios=[3, 1]
    )
    for y, (pid, tid) in enumerate(rows):
        for e in spans:
            if (e["pid"], e["tid"]) != (pid, tid):
                continue
            ax.barh(
                y,
                max(e["dur"], 0.5) / 1e3,
                left=e["ts"] / 1e3,
                height=0.6,
                color=COLORS.get(e["cat"], "#999999"),
                edgecolor="none",
            )
    labels = [
        f"{names.get((pid, None), pid)} / {names.get((pid, tid), f'thread {tid}')}"
        for pid, tid in rows
    ]
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.legend(
        handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()],
        labels=list(COLORS),
        loc="upper right",
        ncol=4,
        fontsize=8,
    )
    ax.set_title(f"zyntax.profile: {a.trace.name}")
    if counters:
        ts = [e["ts"] / 1e3 for e in counters]
        mem.step(
            ts, [e["args"]["in_use_bytes"] / 2**20 for e in counters], where="post", label="in use"
        )
        mem.step(
            ts, [e["args"]["cached_bytes"] / 2**20 for e in counters], where="post", label="cached"
        )
        mem.legend(loc="upper left", fontsize=8)
    mem.set_ylabel("pool MiB")
    mem.set_xlabel("ms since the profile started")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
