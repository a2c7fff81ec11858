"""A pre-norm transformer block (bench ``blocks``, metric ``us_per_block``,
lower is better): layer norm, QKV projection with bias, causal attention,
output projection with bias, residual, layer norm, MLP (up projection with
bias and tanh-GELU, down projection with bias), residual; bf16.

Implementations (same run): ``zyntax`` (the block composed from
``zyntax.kernels``: layer_norm, matmul with the bias and GELU fused in its
epilogue, attention; the residual adds and the head transpose are PyTorch),
``zyntax_graph`` (that block captured once with ``torch.cuda.graph`` and
replayed), ``torch`` (PyTorch eager: F.layer_norm, F.linear, SDPA, F.gelu)
and ``torch_graph`` (PyTorch's block in a CUDA graph).

Sizes: ``small`` 1 x 128 tokens, d = 768 (12 heads of 64), and ``medium``
4 x 2048 tokens, d = 1024 (16 heads of 64); MLP width 4d. Each call is timed
alone between CUDA events (median), over 4 rotated input sets (one graph per
set for the graph rows). The zyntax block is checked against PyTorch's
before timing. ``python benches/blocks.py [--quick]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from _common import Results, event_median_ms, optional, parse_args

from zyntax import kernels as zk

SETS = 4
SIZES = {"small": (1, 128, 768, 12), "medium": (4, 2048, 1024, 16)}


class Weights:
    def __init__(self, torch: Any, d: int, dev: Any) -> None:
        bf = torch.bfloat16

        def rnd(*shape: int, scale: float = 1.0) -> Any:
            return (torch.randn(*shape, device=dev) * scale).to(bf)

        self.ln1 = (1 + rnd(d, scale=0.1), rnd(d, scale=0.1))
        self.ln2 = (1 + rnd(d, scale=0.1), rnd(d, scale=0.1))
        # (in, out) matrices for zyntax.kernels.matmul; PyTorch's F.linear takes their transposes.
        self.qkv = (rnd(d, 3 * d, scale=1 / math.sqrt(d)), rnd(3 * d, scale=0.02))
        self.o = (rnd(d, d, scale=1 / math.sqrt(d)), rnd(d, scale=0.02))
        self.up = (rnd(d, 4 * d, scale=1 / math.sqrt(d)), rnd(4 * d, scale=0.02))
        self.down = (rnd(4 * d, d, scale=1 / math.sqrt(4 * d)), rnd(d, scale=0.02))
        self.t = {k: getattr(self, k)[0].t().contiguous() for k in ("qkv", "o", "up", "down")}


def zyntax_block(w: Weights, x: Any, heads: int) -> Any:
    b, s, d = x.shape
    flat = x.view(b * s, d)
    qkv = zk.matmul(zk.layer_norm(flat, *w.ln1), w.qkv[0], bias=w.qkv[1])
    q, k, v = qkv.view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    att = zk.attention(q, k, v, causal=True).transpose(1, 2).reshape(b * s, d)
    x1 = flat + zk.matmul(att, w.o[0], bias=w.o[1])
    hid = zk.matmul(zk.layer_norm(x1, *w.ln2), w.up[0], bias=w.up[1], activation="gelu")
    return (x1 + zk.matmul(hid, w.down[0], bias=w.down[1])).view(b, s, d)


def torch_block(torch: Any, w: Weights, x: Any, heads: int) -> Any:
    F = torch.nn.functional
    b, s, d = x.shape
    flat = x.view(b * s, d)
    qkv = F.linear(F.layer_norm(flat, (d,), *w.ln1), w.t["qkv"], w.qkv[1])
    q, k, v = qkv.view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x1 = flat + F.linear(att.transpose(1, 2).reshape(b * s, d), w.t["o"], w.o[1])
    hid = F.gelu(F.linear(F.layer_norm(x1, (d,), *w.ln2), w.t["up"], w.up[1]), approximate="tanh")
    return (x1 + F.linear(hid, w.t["down"], w.down[1])).view(b, s, d)


def graphs(torch: Any, fn: Callable[[int], Any]) -> list[Any]:
    """One CUDA graph of `fn(i)` per input set i (warmed up on a side stream first)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(SETS):
            fn(i)
    torch.cuda.current_stream().wait_stream(side)
    out = []
    for i in range(SETS):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(i)
        out.append(g)
    return out


def main() -> None:
    args = parse_args(__doc__ or "transformer block bench")
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("blocks bench: needs PyTorch with CUDA")
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    res = Results("blocks", torch.cuda.get_device_name(dev))
    iters = 50 if args.quick else 200
    for size, (b, s, d, heads) in SIZES.items():
        w = Weights(torch, d, dev)
        xs = [torch.randn(b, s, d, device=dev).to(torch.bfloat16) for _ in range(SETS)]
        want = torch_block(torch, w, xs[0], heads).float()
        got = zyntax_block(w, xs[0], heads).float()
        err = ((got - want).abs().max() / want.abs().max()).item()
        res.notes[f"{size}_max_rel_err_vs_torch"] = round(err, 5)
        if not err < 0.05:
            raise SystemExit(f"blocks: the zyntax block differs from PyTorch's by {err} ({size})")
        case = f"block_{size}_b{b}_s{s}_d{d}"

        def zy(i: int, w: Weights = w, heads: int = heads, xs: list[Any] = xs) -> Any:
            return zyntax_block(w, xs[i], heads)

        def tb(i: int, w: Weights = w, heads: int = heads, xs: list[Any] = xs) -> Any:
            return torch_block(torch, w, xs[i], heads)

        impls: dict[str, Callable[[int], Any]] = {"zyntax": zy, "torch": tb}
        for name, fn in (("zyntax_graph", zy), ("torch_graph", tb)):
            try:
                gs = graphs(torch, fn)
                impls[name] = lambda i, gs=gs: gs[i].replay()
            except Exception as e:  # reported, never fatal: the eager rows still count
                print(f"  ({name} capture failed at {size}: {type(e).__name__}: {str(e)[:300]})")
                res.notes[f"{name}_{size}_capture_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        for name, fn in impls.items():
            ms = event_median_ms(fn, SETS, iters)
            res.add(case, name, "us_per_block", ms * 1e3, True, tokens=b * s, d=d, heads=heads)
        del impls
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    res.notes["timing"] = (
        f"median of {iters} CUDA-event timings of one block each, {SETS} input sets rotated"
    )
    res.write(args.out_dir)


if __name__ == "__main__":
    main()
