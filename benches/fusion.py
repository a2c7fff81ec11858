"""Kernel fusion (issue 16): a sequence of launches fused by ``zyntax.fusion``
(``zyntax``) against the same sequence one kernel per stage
(``zyntax_unfused``, temporaries through DRAM), PyTorch eager (``torch``) and
``torch.compile`` (``torch_compile``). Metric: GB/s, counting each byte the
fused computation must move once (its inputs read and its outputs written);
every impl is divided into the same byte count, so the numbers compare times.

Cases:

* ``elementwise_chain8_f32_64Mi``: 8 dependent elementwise steps
  ``v = v * a_k + b_k`` (every odd step also adds ``x``) over 64 Mi floats,
  ``x -> y``: 512 MiB moved.
* ``bias_gelu_rowsum_bf16``: ``y = gelu_tanh(x + bias)`` over a 65536 x 1024
  bf16 matrix (computed in f32, stored as bf16) and ``sums = y.sum(1)`` in f32:
  x, bias, y and sums moved once.

Both zyntax impls run as a ``zyntax.cuda.Program`` replayed from a CUDA graph.
Run on a GPU machine: ``python benches/fusion.py [--out-dir DIR] [--quick]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from _common import Results, best_of, optional, parse_args, per_call_us

from zyntax import cuda, fusion, hir

F32 = np.float32
N = 64 * 1024 * 1024
CHAIN = 8
ROWS, COLS = 65536, 1024


def chain_sequence(n: int) -> fusion.Sequence:
    s = fusion.Sequence("chain8")
    x = s.input("x", n)
    prev = x
    for k in range(CHAIN):
        out = s.output("y", n) if k == CHAIN - 1 else s.temporary(f"t{k}", n)

        def step(e: Any, prev: Any = prev, k: int = k) -> Any:
            v = e[prev] * (1.0 + 0.125 * k) + (0.5 - 0.0625 * k)
            return v + e[x] if k % 2 else v

        s.map(f"step{k}", out, step)
        prev = out
    return s


def chain_torch(x: Any) -> Any:
    v = x
    for k in range(CHAIN):
        v = v * (1.0 + 0.125 * k) + (0.5 - 0.0625 * k)
        if k % 2:
            v = v + x
    return v


def chain_ref(x: np.ndarray) -> np.ndarray:
    return np.asarray(chain_torch(x.astype(np.float64)))


def gelu(b: Any, v: Any) -> Any:
    u = (v + v * v * v * 0.044715) * 0.7978845608028654
    return v * 0.5 * (b.tanh(u) + 1.0)


def bgr_sequence() -> fusion.Sequence:
    s = fusion.Sequence("bgr")
    x = s.input("x", (ROWS, COLS), hir.bf16)
    bias = s.input("bias", COLS, hir.bf16)
    y = s.output("y", (ROWS, COLS), hir.bf16)
    sums = s.output("sums", ROWS, hir.f32)
    s.map(
        "bias_gelu",
        y,
        lambda e: gelu(e.b, e.b.cast(e[x], hir.f32) + e.b.cast(e.load(bias, e.point[1]), hir.f32)),
    )
    s.reduce("rowsum", sums, COLS, lambda e: e.b.cast(e[y], hir.f32))
    return s


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even f32 -> bf16, as raw 16-bit patterns."""
    u = a.astype(F32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (b.astype(np.uint32) << 16).view(F32)


def time_program(f: fusion.Fused, binds: dict[str, Any], reps: int, dev: int) -> float:
    ex = f.program(dev).prepare(binds, warmup=0)
    ex.run()
    ex.synchronize()
    return best_of(3, lambda: per_call_us(ex.run, reps, ex.synchronize))


def gbps(nbytes: int, us: float) -> float:
    return nbytes / (us * 1e-6) / 1e9


def main() -> None:
    args = parse_args(__doc__ or "fusion bench")
    reps = 5 if args.quick else 50
    dev = cuda.Device(args.device)
    res = Results("fusion", dev.name)
    rng = np.random.default_rng()
    print(f"fusion bench on {dev.name}, {reps} runs per measurement")

    # ---- elementwise_chain8_f32_64Mi
    cs = chain_sequence(N)
    xh = rng.standard_normal(N, dtype=F32)
    want = chain_ref(xh)
    chain_bytes = 2 * N * 4
    x, y = cuda.to_device(xh, args.device), cuda.empty(N, F32, args.device)
    fused = {"zyntax": cs.fuse(), "zyntax_unfused": cs.fuse(enabled=False)}
    print(fused["zyntax"].report())
    for impl, f in fused.items():
        y.copy_from_host(np.full(N, np.nan, F32))
        us = time_program(f, {"x": x, "y": y}, reps, args.device)
        np.testing.assert_allclose(y.to_host(), want, rtol=1e-4, atol=1e-4)
        res.add(
            "elementwise_chain8_f32_64Mi",
            impl,
            "GB_per_s",
            gbps(chain_bytes, us),
            False,
            kernels=len(f.kernels),
        )
    del x, y

    # ---- bias_gelu_rowsum_bf16
    bs = bgr_sequence()
    xb = to_bf16_bits(rng.standard_normal((ROWS, COLS), dtype=F32))
    bb = to_bf16_bits(rng.standard_normal(COLS, dtype=F32))
    bgr_bytes = (2 * ROWS * COLS + COLS) * 2 + ROWS * 4
    xf, bf = from_bf16_bits(xb).astype(np.float64), from_bf16_bits(bb).astype(np.float64)
    v = xf + bf
    want_y = 0.5 * v * (1.0 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))
    want_sums = from_bf16_bits(to_bf16_bits(want_y.astype(F32))).astype(np.float64).sum(axis=1)
    binds = {
        "x": bf16_device(xb, args.device),
        "bias": bf16_device(bb, args.device),
        "y": cuda.empty((ROWS, COLS), "bf16", args.device),
        "sums": cuda.empty(ROWS, F32, args.device),
    }
    fused = {"zyntax": bs.fuse(), "zyntax_unfused": bs.fuse(enabled=False)}
    print(fused["zyntax"].report())
    for impl, f in fused.items():
        binds["sums"].copy_from_host(np.full(ROWS, np.nan, F32))
        us = time_program(f, binds, reps, args.device)
        got_y = from_bf16_bits(np.asarray(binds["y"].to_host()).view(np.uint16))
        np.testing.assert_allclose(got_y, want_y, rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(binds["sums"].to_host(), want_sums, rtol=1e-3, atol=1e-2)
        res.add(
            "bias_gelu_rowsum_bf16",
            impl,
            "GB_per_s",
            gbps(bgr_bytes, us),
            False,
            kernels=len(f.kernels),
        )
    del binds

    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        try:
            torch_cases(torch, res, reps, xh, want, xb, bb, want_sums, chain_bytes, bgr_bytes)
        except Exception as e:  # a peer failing is reported, never fatal
            print(f"  (torch failed: {type(e).__name__}: {e})")
    res.notes.update(chain_elements=N, chain_steps=CHAIN, bgr_shape=f"{ROWS}x{COLS}")
    res.write(args.out_dir)


def bf16_device(bits: np.ndarray, device: int) -> Any:
    """A bf16 DeviceArray holding these bf16 bit patterns."""
    d = cuda.empty(bits.shape, "bf16", device)
    d.copy_from_host(bits)
    return d


def torch_cases(
    torch: Any,
    res: Results,
    reps: int,
    xh: np.ndarray,
    want: np.ndarray,
    xb: np.ndarray,
    bb: np.ndarray,
    want_sums: np.ndarray,
    chain_bytes: int,
    bgr_bytes: int,
) -> None:
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    tx = torch.from_numpy(xh).to(dev)
    txb = torch.from_numpy(xb.view(np.int16)).to(dev).view(torch.bfloat16)
    tbb = torch.from_numpy(bb.view(np.int16)).to(dev).view(torch.bfloat16)

    def bgr(x: Any, b: Any) -> tuple[Any, Any]:
        y = torch.nn.functional.gelu(x.float() + b.float(), approximate="tanh").to(torch.bfloat16)
        return y, y.float().sum(1)

    impls = {
        "torch": (chain_torch, bgr),
        "torch_compile": (torch.compile(chain_torch), torch.compile(bgr)),
    }
    for impl, (chain_fn, bgr_fn) in impls.items():
        out = chain_fn(tx)
        np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-4, atol=1e-4)
        us = best_of(3, lambda f=chain_fn: per_call_us(lambda: f(tx), reps, sync))
        res.add("elementwise_chain8_f32_64Mi", impl, "GB_per_s", gbps(chain_bytes, us), False)
        _, sums = bgr_fn(txb, tbb)
        np.testing.assert_allclose(sums.cpu().numpy(), want_sums, rtol=1e-3, atol=1e-2)
        us = best_of(3, lambda f=bgr_fn: per_call_us(lambda: f(txb, tbb), reps, sync))
        res.add("bias_gelu_rowsum_bf16", impl, "GB_per_s", gbps(bgr_bytes, us), False)


if __name__ == "__main__":
    main()
