"""A pre-norm transformer block (bench ``blocks``, metric ``us_per_block``,
lower is better): layer norm, QKV projection with bias, causal attention,
output projection with bias, residual, layer norm, MLP (up projection with
bias and tanh-GELU, down projection with bias), residual; bf16.

Implementations (same run): ``zyntax`` (the block composed from
``zyntax.kernels``: layer_norm, matmul with the bias and GELU fused in its
epilogue, attention; the residual adds are PyTorch, and the head transpose
a view: attention's output is in q's memory order, as SDPA's),
``zyntax_graph`` (that block captured once with ``torch.cuda.graph`` and
replayed), ``torch`` (PyTorch eager: F.layer_norm, F.linear, SDPA, F.gelu)
and ``torch_graph`` (PyTorch's block in a CUDA graph).

Sizes: ``small`` 1 x 128 tokens, d = 768 (12 heads of 64), and ``medium``
4 x 2048 tokens, d = 1024 (16 heads of 64); MLP width 4d.

A training step (case ``train_gpt2small_...``, 4 x 512 tokens, d = 768):
forward and backward of the block (``(out * up).sum().backward()``, the
gradients of every weight and bias), ``zyntax`` through the autograd of
``zyntax.kernels.torch_ops`` (layer norms, matmuls with bias and GELU,
attention with its backward kernel; PyTorch's SDPA in a tree without one:
the row's ``attention`` says which) against PyTorch eager. Each call is timed
alone between CUDA events (median), over 4 rotated input sets (one graph per
set for the graph rows). The zyntax block is checked against PyTorch's
before timing. ``python benches/blocks.py [--quick] [--size small] [--no-train]
[--train-only]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from _common import Results, event_median_ms, optional, parse_args

from zyntax import kernels as zk

SETS = 4
SIZES = {"small": (1, 128, 768, 12), "medium": (4, 2048, 1024, 16)}
TRAIN = (4, 512, 768, 12)


class Weights:
    def __init__(self, torch: Any, d: int, dev: Any, grad: bool = False) -> None:
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
        if grad:  # leaves: the zyntax block's (in, out) matrices, PyTorch's transposes
            for t in self.params():
                t.requires_grad_()

    def params(self) -> list[Any]:
        return [*self.ln1, *self.ln2, *self.qkv, *self.o, *self.up, *self.down, *self.t.values()]


def zyntax_block(w: Weights, x: Any, heads: int) -> Any:
    b, s, d = x.shape
    flat = x.view(b * s, d)
    qkv = zk.matmul(zk.layer_norm(flat, *w.ln1), w.qkv[0], bias=w.qkv[1])
    q, k, v = qkv.view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    att = zk.attention(q, k, v, causal=True).transpose(1, 2).reshape(b * s, d)
    x1 = flat + zk.matmul(att, w.o[0], bias=w.o[1])
    hid = zk.matmul(zk.layer_norm(x1, *w.ln2), w.up[0], bias=w.up[1], activation="gelu")
    return (x1 + zk.matmul(hid, w.down[0], bias=w.down[1])).view(b, s, d)


def zyntax_train_block(torch: Any, w: Weights, x: Any, heads: int) -> Any:
    """The block through zyntax.kernels.torch_ops (differentiable ops)."""
    from zyntax.kernels import torch_ops as zt

    b, s, d = x.shape
    flat = x.view(b * s, d)
    qkv = zt.matmul(zt.layer_norm(flat, *w.ln1), w.qkv[0], w.qkv[1])
    q, k, v = qkv.view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
    if zt.backward_kernel("attention") is not None:
        att = zt.attention(q, k, v, causal=True)
    else:
        att = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    x1 = flat + zt.matmul(att.transpose(1, 2).reshape(b * s, d), w.o[0], w.o[1])
    hid = zt.matmul(zt.layer_norm(x1, *w.ln2), w.up[0], w.up[1], "gelu")
    return (x1 + zt.matmul(hid, w.down[0], w.down[1])).view(b, s, d)


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


def bench_forward(torch: Any, res: Results, iters: int, size: str, dev: Any) -> None:
    b, s, d, heads = SIZES[size]
    w = Weights(torch, d, dev)
    xs = [torch.randn(b, s, d, device=dev).to(torch.bfloat16) for _ in range(SETS)]
    want = torch_block(torch, w, xs[0], heads).float()
    got = zyntax_block(w, xs[0], heads).float()
    err = ((got - want).abs().max() / want.abs().max()).item()
    res.notes[f"{size}_max_rel_err_vs_torch"] = round(err, 5)
    if not err < 0.05:
        raise SystemExit(f"blocks: the zyntax block differs from PyTorch's by {err} ({size})")
    case = f"block_{size}_b{b}_s{s}_d{d}"
    impls: dict[str, Callable[[int], Any]] = {
        "zyntax": lambda i: zyntax_block(w, xs[i], heads),
        "torch": lambda i: torch_block(torch, w, xs[i], heads),
    }
    for name, eager in (("zyntax_graph", impls["zyntax"]), ("torch_graph", impls["torch"])):
        try:
            gs = graphs(torch, eager)
            impls[name] = lambda i, gs=gs: gs[i].replay()
        except Exception as e:  # reported, never fatal: the eager rows still count
            print(f"  ({name} capture failed at {size}: {type(e).__name__}: {str(e)[:300]})")
            res.notes[f"{name}_{size}_capture_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    for name, fn in impls.items():
        ms = event_median_ms(fn, SETS, iters)
        res.add(case, name, "us_per_block", ms * 1e3, True, tokens=b * s, d=d, heads=heads)


def bench_train(torch: Any, res: Results, iters: int, dev: Any) -> None:
    from zyntax.kernels import torch_ops as zt

    b, s, d, heads = TRAIN
    w = Weights(torch, d, dev, grad=True)
    xs = [torch.randn(b, s, d, device=dev).to(torch.bfloat16) for _ in range(SETS)]
    ups = [torch.randn(b, s, d, device=dev) for _ in range(SETS)]
    blocks = {
        "zyntax": lambda x: zyntax_train_block(torch, w, x, heads),
        "torch": lambda x: torch_block(torch, w, x, heads),
    }

    def step(block: Callable[[Any], Any], i: int) -> None:
        for p in w.params():
            p.grad = None
        (block(xs[i]).float() * ups[i]).sum().backward()

    grads = {}
    for name, block in blocks.items():
        step(block, 0)
        grads[name] = w.up[0].grad.float() if name == "zyntax" else w.t["up"].grad.t().float()
    err = ((grads["zyntax"] - grads["torch"]).abs().max() / grads["torch"].abs().max()).item()
    res.notes["train_max_rel_err_dW_up_vs_torch"] = round(err, 5)
    if not err < 0.05:
        raise RuntimeError(f"the zyntax training step's gradient differs by {err}")
    attention = "zyntax" if zt.backward_kernel("attention") is not None else "torch SDPA"
    case = f"train_gpt2small_b{b}_s{s}_d{d}"
    for name, block in blocks.items():
        ms = event_median_ms(lambda i, block=block: step(block, i), SETS, iters)
        res.add(case, name, "us_per_step", ms * 1e3, True, tokens=b * s, attention=attention)


def main() -> None:
    def sizes(p: Any) -> None:
        p.add_argument("--size", choices=sorted(SIZES), action="append", help="only these sizes")
        p.add_argument("--no-train", action="store_true", help="skip the training step")
        p.add_argument("--train-only", action="store_true", help="the training step alone")

    args = parse_args(__doc__ or "transformer block bench", sizes)
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("blocks bench: needs PyTorch with CUDA")
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    res = Results("blocks", torch.cuda.get_device_name(dev))
    iters = 50 if args.quick else 200
    res.notes["timing"] = (
        f"median of {iters} CUDA-event timings of one block each ({iters // 2} for the "
        f"training step), {SETS} input sets rotated"
    )
    for size in [] if args.train_only else args.size or SIZES:
        bench_forward(torch, res, iters, size, dev)
        res.write(args.out_dir)  # written after each part: a cut-short run keeps its rows
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    if args.no_train:
        return
    try:
        bench_train(torch, res, iters // 2, dev)
    except Exception as e:  # a missing backward is reported, never fatal
        print(f"  (training step failed: {type(e).__name__}: {str(e)[:300]})")
        res.notes["train_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    res.write(args.out_dir)


if __name__ == "__main__":
    main()
