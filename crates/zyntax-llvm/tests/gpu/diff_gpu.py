"""Compare random kernels on a GPU with the reference interpreter (bit for bit).

Input: the directory written by `cargo run -p zyntax-llvm --features compute --example diff_kernels -- DIR`.
Usage: python3 diff_gpu.py DIR [results.json]. Exit status 0 iff all agree.
"""

from __future__ import annotations

import json
import sys

import cupy as cp
import numpy as np

OUT_SLOTS = 8


def main() -> int:
    d = sys.argv[1]
    manifest = json.load(open(f"{d}/diff.json"))
    mod = cp.RawModule(path=f"{d}/diff.ptx")
    failures: list[str] = []
    for case in manifest["cases"]:
        k = mod.get_function(case["kernel"])
        inp = cp.asarray(np.frombuffer(bytes.fromhex(case["input"]), np.uint32))
        expected = np.frombuffer(bytes.fromhex(case["expected"]), np.uint64).reshape(-1, OUT_SLOTS)
        out = cp.zeros(expected.size, cp.uint64)
        k(tuple(case["grid"]), tuple(case["block"]), (inp, out))
        got = cp.asnumpy(out).reshape(-1, OUT_SLOTS)
        for j, kind in enumerate(case["slots"]):
            g, e = got[:, j], expected[:, j]
            if kind == "f32":
                gf, ef = g.astype(np.uint32).view(np.float32), e.astype(np.uint32).view(np.float32)
                bad = (g != e) & ~(np.isnan(gf) & np.isnan(ef))
            elif kind == "f64":
                gf, ef = g.view(np.float64), e.view(np.float64)
                bad = (g != e) & ~(np.isnan(gf) & np.isnan(ef))
            else:
                bad = g != e
            if bad.any():
                t = int(np.argmax(bad))
                failures.append(
                    f"{case['kernel']} slot {j} ({kind}): {int(bad.sum())} threads differ, "
                    f"first thread {t}: gpu {int(g[t]):#x} interp {int(e[t]):#x}"
                )
    dev = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    report = {
        "device": dev,
        "arch": manifest["arch"],
        "seed": manifest["seed"],
        "opt": manifest.get("opt", "O3"),
        "kernels": len(manifest["cases"]),
        "failures": failures,
    }
    print(json.dumps(report, indent=2))
    if len(sys.argv) > 2:
        json.dump(report, open(sys.argv[2], "w"), indent=2)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
