"""Per-kernel device times of ``benches/blocks.py``'s transformer block,
zyntax against PyTorch eager (``torch.profiler``, CUDA activity): which
kernel of the zyntax block loses, and to which of PyTorch's.

``python benches/blocks_profile.py [small|medium] [--reps N]`` prints, per
implementation, every kernel's device time per block (microseconds, summed
over its launches in one block) and the block's total. A diagnostic: it
writes no results JSON (``benches/blocks.py`` is the bench).
"""

from __future__ import annotations

import argparse
from typing import Any

import blocks
from _common import optional


def kernel_times(torch: Any, fn: Any, reps: int) -> list[tuple[str, float, int]]:
    """(kernel name, device us per call of `fn`, launches per call), slowest first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):  # compile, load, plan
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", None)
        if us is None:  # older torch spelling
            us = e.cuda_time_total
        if us > 0 and e.count:
            rows.append((e.key, us / reps, e.count // reps))
    return sorted(rows, key=lambda r: -r[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("size", nargs="?", default="medium", choices=sorted(blocks.SIZES))
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("blocks_profile: needs PyTorch with CUDA")
    dev = torch.device("cuda", 0)
    b, s, d, heads = blocks.SIZES[args.size]
    w = blocks.Weights(torch, d, dev)
    x = torch.randn(b, s, d, device=dev).to(torch.bfloat16)
    impls = {
        "zyntax": lambda: blocks.zyntax_block(w, x, heads),
        "torch": lambda: blocks.torch_block(torch, w, x, heads),
    }
    print(f"block {args.size}: b={b} s={s} d={d} heads={heads}, {args.reps} blocks profiled")
    for name, fn in impls.items():
        rows = kernel_times(torch, fn, args.reps)
        total = sum(r[1] for r in rows)
        print(f"\n{name}: {total:.1f} us of kernels per block")
        for key, us, n in rows:
            print(f"  {us:9.1f} us  x{n:<3d} {key[:110]}")


if __name__ == "__main__":
    main()
