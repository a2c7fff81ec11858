"""Renders the GEMM plot (docs/gemm.png) from a ``benches/gemm.py --sweep`` JSON:
TFLOP/s against the square size for each impl (zyntax, cuBLAS, Triton), bf16.

Usage: ``python benches/plot_gemm.py benches/results/gemm-h100-<date>.json docs/gemm.png``
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

STYLE = {"zyntax": ("#2ca02c", "o"), "cublas": ("#4c72b0", "s"), "triton": ("#dd8452", "^")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results", type=Path)
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = json.loads(a.results.read_text())
    series: dict[str, list[tuple[int, float]]] = {}
    variant = ""
    for r in doc["results"]:
        m = re.fullmatch(r"sweep_bf16_(\d+)", r["case"])
        if m:
            series.setdefault(r["impl"], []).append((int(m.group(1)), r["value"]))
            variant = r.get("variant", variant) if r["impl"] == "zyntax" else variant
    if not series:
        raise SystemExit(f"{a.results}: no sweep_bf16_<n> cases (run benches/gemm.py --sweep)")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for impl, pts in sorted(series.items()):
        pts.sort()
        color, marker = STYLE.get(impl, ("#777777", "x"))
        label = f"zyntax ({variant})" if impl == "zyntax" and variant else impl
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOP/s (bf16 in, f32 accumulate)")
    ax.set_title(f"GEMM on {doc['device']} (commit {doc.get('commit', '?')[:7]})")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
