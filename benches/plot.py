"""Renders one PNG bar chart per bench results JSON (docs/performance.md).

``python benches/plot.py benches/results/memory_bound-h100-20261126.json
[more.json ...] [--out-dir docs/img] [--impls zyntax,torch_sdpa,...]``: one
group of bars per case, one bar per implementation (zyntax first, the
``peak`` row drawn as a line; ``--impls``: only those), the metric on the y
axis, the device and commit in the title. Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def plot(doc: dict[str, Any], out: Path, only: list[str] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["results"]
    cases = list(dict.fromkeys(r["case"] for r in rows if r["impl"] != "peak"))
    impls = list(dict.fromkeys(r["impl"] for r in rows if r["impl"] != "peak"))
    impls = [i for i in impls if not only or i in only]
    impls.sort(key=lambda i: (i != "zyntax", i))
    value = {(r["case"], r["impl"]): r["value"] for r in rows}
    width = 0.8 / max(1, len(impls))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(cases)), 4.5))
    for k, impl in enumerate(impls):
        xs = [i + (k - (len(impls) - 1) / 2) * width for i in range(len(cases))]
        ys = [value.get((c, impl), 0.0) for c in cases]
        ax.bar(xs, ys, width, label=impl)
    for i, c in enumerate(cases):
        if (c, "peak") in value:
            ax.hlines(value[c, "peak"], i - 0.45, i + 0.45, colors="k", linestyles="--")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(rows[0]["metric"] if rows else "")
    commit = str(doc.get("commit", ""))[:10]
    ax.set_title(f"{doc['bench']} on {doc['device']} ({doc['date']}, {commit}); dashed: peak")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    p.add_argument("--impls", help="comma-separated implementations to draw (default: all)")
    args = p.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for f in args.files:
        doc = json.loads(f.read_text())
        out = args.out_dir / (f.stem + ".png")
        plot(doc, out, args.impls.split(",") if args.impls else None)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
