"""Host cost of a call (bench ``host_overhead``, metric ``us_per_call``,
lower is better): microseconds per back-to-back asynchronous call from Python
at sizes where the host decides (issue 25), the final synchronize included.

Cases and peers (same run):

- ``kernel_launch_torch_1arg``: a ``@zyntax.kernel`` ``x[i] += 1`` over 256
  f32 of a torch tensor; PyTorch ``x.add_(1)``, a ``@triton.jit`` kernel,
  Numba-CUDA ``@cuda.jit`` (torch tensor argument), CuPy ``RawKernel`` (its
  own array).
- ``kernel_launch_torch_4args``: ``out = a + b * c`` (4 tensors); PyTorch
  ``torch.addcmul(a, b, c, out=out)``, Triton, Numba, CuPy.
- ``kernel_launch_devicearray``: the 1-arg kernel on a zyntax DeviceArray;
  peers as the 1-arg case (Numba with its own device array).
- ``matmul_small`` (bf16 128x128x128), ``attention_small`` (bf16 1x4x128x64),
  ``layer_norm_small``, ``softmax_small``, ``rms_norm_small`` (bf16 64x1024),
  ``cross_entropy_small`` (bf16 64x1024 logits, int64 targets, per-row
  losses): ``zyntax.kernels`` on torch tensors (output allocated per call, as
  PyTorch's op does), ``zyntax_op`` the same through its ``torch.ops.zyntax``
  custom op (the dispatcher and the op's autograd wrapper: what a compiled
  graph calls), ``zyntax_torch_ops`` through ``zyntax.kernels.torch_ops``'
  function (which goes straight to the kernel in plain eager mode),
  PyTorch's op, and a Triton kernel of the same work (written below). CuPy
  and Numba time the launch cases only (their library peers would be
  hand-written kernels of ours, not the libraries' own).

Each callable rotates over 4 input sets (fresh random values), so that a plan
cache keyed by address is exercised as a model would. ``python
benches/host_overhead.py [--quick] [--no-numba] [--only CASE ...]``; peers
that do not import are skipped. ``--probe`` instead prints each small call's
host time (enqueue rate) against its device time (a CUDA graph's replay):
which side bounds it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from _common import Results, best_of, optional, parse_args, per_call_us

import zyntax
from zyntax import cuda, lang
from zyntax import kernels as zk

SETS = 4
N_LAUNCH = 256


@zyntax.kernel
def add1(x):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < len(x):
        x[i] = x[i] + 1.0


@zyntax.kernel
def addcmul(a, b, c, out):  # type: ignore[no-untyped-def]
    i = lang.grid(1)
    if i < len(out):
        out[i] = a[i] + b[i] * c[i]


def rotate(fns: list[Callable[[], Any]]) -> Callable[[], Any]:
    """One callable that runs the next of `fns` at each call."""
    state = [0]

    def call() -> Any:
        i = state[0] = (state[0] + 1) % len(fns)
        return fns[i]()

    return call


# ------------------------------------------------------------------ Triton peers


def triton_kernels() -> dict[str, Any]:
    triton = optional("triton")
    if triton is None:
        return {}
    import triton.language as tl

    @triton.jit
    def add1_k(x, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x + offs, tl.load(x + offs, mask=m) + 1.0, mask=m)

    @triton.jit
    def addcmul_k(a, b, c, out, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < n
        va, vb, vc = tl.load(a + offs, mask=m), tl.load(b + offs, mask=m), tl.load(c + offs, mask=m)
        tl.store(out + offs, va + vb * vc, mask=m)

    @triton.jit
    def matmul_k(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm, rn, rk = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN), tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            ta = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
            tb = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(ta, tb)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty))

    @triton.jit
    def attention_k(q, k, v, o, S, scale, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        pm, bh = tl.program_id(0), tl.program_id(1)
        base = bh * S * D
        rm, rd = pm * BM + tl.arange(0, BM), tl.arange(0, D)
        tq = tl.load(q + base + rm[:, None] * D + rd[None, :])
        m_i = tl.full((BM,), -float("inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for n0 in range(0, S, BN):
            rn = n0 + tl.arange(0, BN)
            tk = tl.load(k + base + rn[:, None] * D + rd[None, :])
            s = tl.dot(tq, tl.trans(tk)) * scale
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            tv = tl.load(v + base + rn[:, None] * D + rd[None, :])
            acc = acc * alpha[:, None] + tl.dot(p.to(tv.dtype), tv)
            m_i = m_new
        tl.store(
            o + base + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(o.dtype.element_ty)
        )

    @triton.jit
    def row_k(x, w, bias, y, N, eps, KIND: tl.constexpr, BLOCK: tl.constexpr):
        # KIND 0: softmax, 1: layer norm (weight, bias), 2: rms norm (weight)
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        m = offs < N
        if KIND == 0:
            v = tl.load(x + row * N + offs, mask=m, other=-float("inf")).to(tl.float32)
            e = tl.exp(v - tl.max(v, 0))
            out = e / tl.sum(e, 0)
        else:
            v = tl.load(x + row * N + offs, mask=m, other=0.0).to(tl.float32)
            if KIND == 1:
                v = tl.where(m, v - tl.sum(v, 0) / N, 0.0)
            rstd = 1.0 / tl.sqrt(tl.sum(v * v, 0) / N + eps)
            out = v * rstd * tl.load(w + offs, mask=m).to(tl.float32)
            if KIND == 1:
                out += tl.load(bias + offs, mask=m).to(tl.float32)
        tl.store(y + row * N + offs, out.to(y.dtype.element_ty), mask=m)

    @triton.jit
    def cross_entropy_k(x, t, loss, N, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        v = tl.load(x + row * N + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
        mx = tl.max(v, 0)
        lse = mx + tl.log(tl.sum(tl.exp(v - mx), 0))
        tgt = tl.load(t + row)
        tl.store(loss + row, lse - tl.load(x + row * N + tgt).to(tl.float32))

    import torch

    def add1(x: Any) -> None:
        add1_k[(1,)](x, x.numel(), BLOCK=N_LAUNCH)

    def addcmul(a: Any, b: Any, c: Any, out: Any) -> None:
        addcmul_k[(1,)](a, b, c, out, out.numel(), BLOCK=N_LAUNCH)

    def matmul(a: Any, b: Any) -> Any:
        (m, k), n = a.shape, b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        matmul_k[(m // 64, n // 64)](a, b, c, m, n, k, BM=64, BN=64, BK=32)
        return c

    def attention(q: Any, k: Any, v: Any) -> Any:
        bsz, h, s, d = q.shape
        o = torch.empty_like(q)
        attention_k[(s // 64, bsz * h)](q, k, v, o, s, 1.0 / math.sqrt(d), D=d, BM=64, BN=64)
        return o

    def rows(kind: int) -> Callable[..., Any]:
        def run(x: Any, w: Any = None, bias: Any = None) -> Any:
            y = torch.empty_like(x)
            n = x.shape[-1]
            row_k[(x.shape[0],)](
                x, w, bias, y, n, 1e-5, KIND=kind, BLOCK=triton.next_power_of_2(n), num_warps=4
            )
            return y

        return run

    def cross_entropy(x: Any, t: Any) -> Any:
        loss = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        n = x.shape[1]
        cross_entropy_k[(x.shape[0],)](x, t, loss, n, BLOCK=triton.next_power_of_2(n))
        return loss

    return {
        "add1": add1,
        "addcmul": addcmul,
        "matmul": matmul,
        "attention": attention,
        "softmax": rows(0),
        "layer_norm": rows(1),
        "rms_norm": rows(2),
        "cross_entropy": cross_entropy,
    }


# ------------------------------------------------------------------ CuPy and Numba peers

CUPY_SOURCE = r"""
extern "C" __global__ void add1(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" __global__ void addcmul(const float* a, const float* b, const float* c, float* out,
                                   int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i] * c[i];
}
"""


def cupy_peer() -> Any:
    cp = optional("cupy")
    if cp is None:
        return None
    try:
        mod = cp.RawModule(code=CUPY_SOURCE)
        return cp, mod.get_function("add1"), mod.get_function("addcmul")
    except Exception as e:  # no NVRTC on the machine
        print(f"  (skipping cupy: {type(e).__name__}: {e})")
        return None


def numba_peer() -> Any:
    nb = optional("numba.cuda")
    if nb is None:
        return None
    try:

        @nb.jit
        def add1_nb(x):  # type: ignore[no-untyped-def]
            i = nb.grid(1)
            if i < x.size:
                x[i] += 1.0

        @nb.jit
        def addcmul_nb(a, b, c, out):  # type: ignore[no-untyped-def]
            i = nb.grid(1)
            if i < out.size:
                out[i] = a[i] + b[i] * c[i]

        return nb, add1_nb, addcmul_nb
    except Exception as e:
        print(f"  (skipping numba: {type(e).__name__}: {e})")
        return None


# ------------------------------------------------------------------ the bench


class Bench:
    def __init__(self, torch: Any, device: int, quick: bool, out_dir: Any, numba: bool) -> None:
        self.torch = torch
        self.dev = torch.device("cuda", device)
        torch.cuda.set_device(self.dev)
        self.device = device
        self.iters = 2000 if quick else 20000
        self.res = Results("host_overhead", torch.cuda.get_device_name(self.dev))
        self.tk = triton_kernels()
        self.cupy = cupy_peer()
        self.numba = numba_peer() if numba else None
        self.out_dir = out_dir
        self.only: list[str] = []  # --only: these cases alone

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def time(self, case: str, impl: str, fns: list[Callable[[], Any]], **extra: Any) -> None:
        if self.only and case not in self.only:
            return
        call = rotate(fns)
        try:
            for _ in range(3):  # compile, load, plan
                call()
            self.sync()
            us = best_of(3, lambda: per_call_us(call, self.iters, self.sync))
        except Exception as e:  # a peer that fails is reported and skipped, never fatal
            print(f"  ({case}/{impl} failed: {type(e).__name__}: {str(e)[:300]})")
            return
        self.res.add(case, impl, "us_per_call", us, True, **extra)

    def randn(self, *shape: int, dtype: Any = None) -> Any:
        return self.torch.randn(*shape, device=self.dev, dtype=dtype or self.torch.float32)

    # -------------------------------------------------------------- launches

    def launches(self) -> None:
        torch, n = self.torch, N_LAUNCH
        xs = [self.randn(n) for _ in range(SETS)]
        quads = [[self.randn(n) for _ in range(4)] for _ in range(SETS)]
        case1, case4, cased = (
            "kernel_launch_torch_1arg",
            "kernel_launch_torch_4args",
            "kernel_launch_devicearray",
        )
        self.time(case1, "zyntax", [lambda x=x: add1[1, n](x) for x in xs])
        self.time(case1, "torch", [lambda x=x: x.add_(1) for x in xs], api="Tensor.add_(1)")
        self.time(case4, "zyntax", [lambda q=q: addcmul[1, n](*q) for q in quads])
        self.time(
            case4,
            "torch",
            [lambda q=q: torch.addcmul(q[0], q[1], q[2], out=q[3]) for q in quads],
            api="torch.addcmul(a, b, c, out=out)",
        )
        das = [cuda.to_device(x.cpu().numpy(), self.device) for x in xs]
        self.time(cased, "zyntax", [lambda d=d: add1[1, n](d) for d in das])
        self.time(cased, "torch", [lambda x=x: x.add_(1) for x in xs], api="Tensor.add_(1)")
        if self.tk:
            add1_t, addcmul_t = self.tk["add1"], self.tk["addcmul"]
            self.time(case1, "triton", [lambda x=x: add1_t(x) for x in xs])
            self.time(case4, "triton", [lambda q=q: addcmul_t(*q) for q in quads])
            self.time(cased, "triton", [lambda x=x: add1_t(x) for x in xs], note="torch tensor")
        if self.numba is not None:
            nb, add1_nb, addcmul_nb = self.numba
            self.time(case1, "numba", [lambda x=x: add1_nb[1, n](x) for x in xs])
            self.time(case4, "numba", [lambda q=q: addcmul_nb[1, n](*q) for q in quads])
            nbs = [nb.to_device(x.cpu().numpy()) for x in xs]
            self.time(cased, "numba", [lambda d=d: add1_nb[1, n](d) for d in nbs])
        if self.cupy is not None:
            cp, add1_c, addcmul_c = self.cupy
            cxs = [cp.asarray(x.cpu().numpy()) for x in xs]
            cqs = [[cp.asarray(t.cpu().numpy()) for t in q] for q in quads]
            n32 = cp.int32(n)
            for case in (case1, cased):
                self.time(
                    case,
                    "cupy",
                    [lambda c=c: add1_c((1,), (n,), (c, n32)) for c in cxs],
                    note="cupy array",
                )
            self.time(
                case4,
                "cupy",
                [lambda q=q: addcmul_c((1,), (n,), (*q, n32)) for q in cqs],
                note="cupy arrays",
            )

    # -------------------------------------------------------------- library kernels

    def library(self) -> None:
        torch = self.torch
        F = torch.nn.functional
        bf = torch.bfloat16
        from zyntax.kernels import torch_ops as zt

        ops = zt.register()  # torch.ops.zyntax
        tk = self.tk

        def run(case: str, impls: dict[str, list[Callable[[], Any]]], **extra: Any) -> None:
            for impl, fns in impls.items():
                self.time(case, impl, fns, **extra)
            self.res.write(self.out_dir)  # after each case: a cut-short run keeps its rows

        # matmul 128^3 bf16
        mats = [
            (self.randn(128, 128, dtype=bf), self.randn(128, 128, dtype=bf)) for _ in range(SETS)
        ]
        impls = {
            "zyntax": [lambda p=p: zk.matmul(*p) for p in mats],
            "zyntax_op": [lambda p=p: ops.matmul(*p) for p in mats],
            "zyntax_torch_ops": [lambda p=p: zt.matmul(*p) for p in mats],
            "torch": [lambda p=p: p[0] @ p[1] for p in mats],
        }
        if tk:
            impls["triton"] = [lambda p=p: tk["matmul"](*p) for p in mats]
        run("matmul_small", impls, shape="bf16 128x128x128")

        # attention 1x4x128x64 bf16, not causal
        qkv = [[self.randn(1, 4, 128, 64, dtype=bf) for _ in range(3)] for _ in range(SETS)]
        impls = {
            "zyntax": [lambda t=t: zk.attention(*t) for t in qkv],
            "zyntax_op": [lambda t=t: ops.attention(*t) for t in qkv],
            "zyntax_torch_ops": [lambda t=t: zt.attention(*t) for t in qkv],
            "torch": [lambda t=t: F.scaled_dot_product_attention(*t) for t in qkv],
        }
        if tk:
            impls["triton"] = [lambda t=t: tk["attention"](*t) for t in qkv]
        run("attention_small", impls, shape="bf16 1x4x128x64", torch_api="SDPA")

        # rows: 64 x 1024 bf16
        xs = [self.randn(64, 1024, dtype=bf) for _ in range(SETS)]
        w, b = self.randn(1024, dtype=bf), self.randn(1024, dtype=bf)
        impls = {
            "zyntax": [lambda x=x: zk.layer_norm(x, w, b) for x in xs],
            "zyntax_op": [lambda x=x: ops.layer_norm(x, w, b) for x in xs],
            "zyntax_torch_ops": [lambda x=x: zt.layer_norm(x, w, b) for x in xs],
            "torch": [lambda x=x: F.layer_norm(x, (1024,), w, b) for x in xs],
        }
        if tk:
            impls["triton"] = [lambda x=x: tk["layer_norm"](x, w, b) for x in xs]
        run("layer_norm_small", impls, shape="bf16 64x1024")

        impls = {
            "zyntax": [lambda x=x: zk.softmax(x) for x in xs],
            "zyntax_op": [lambda x=x: ops.softmax(x) for x in xs],
            "zyntax_torch_ops": [lambda x=x: zt.softmax(x) for x in xs],
            "torch": [lambda x=x: torch.softmax(x, -1) for x in xs],
        }
        if tk:
            impls["triton"] = [lambda x=x: tk["softmax"](x) for x in xs]
        run("softmax_small", impls, shape="bf16 64x1024")

        impls = {
            "zyntax": [lambda x=x: zk.rms_norm(x, w) for x in xs],
            "zyntax_op": [lambda x=x: ops.rms_norm(x, w) for x in xs],
            "zyntax_torch_ops": [lambda x=x: zt.rms_norm(x, w) for x in xs],
        }
        if hasattr(F, "rms_norm"):
            impls["torch"] = [lambda x=x: F.rms_norm(x, (1024,), w, 1e-6) for x in xs]
        if tk:
            impls["triton"] = [lambda x=x: tk["rms_norm"](x, w) for x in xs]
        run("rms_norm_small", impls, shape="bf16 64x1024")

        ts = [torch.randint(0, 1024, (64,), device=self.dev) for _ in range(SETS)]
        pairs = list(zip(xs, ts, strict=True))
        impls = {
            "zyntax": [lambda p=p: zk.cross_entropy(*p) for p in pairs],
            "zyntax_op": [lambda p=p: ops.cross_entropy(*p) for p in pairs],
            "zyntax_torch_ops": [lambda p=p: zt.cross_entropy(*p) for p in pairs],
            "torch": [lambda p=p: F.cross_entropy(p[0], p[1], reduction="none") for p in pairs],
        }
        if tk:
            impls["triton"] = [lambda p=p: tk["cross_entropy"](*p) for p in pairs]
        run("cross_entropy_small", impls, shape="bf16 64x1024, per-row losses")

    def check(self) -> None:
        """The zyntax results against PyTorch once (a bench of wrong answers is no bench)."""
        torch = self.torch
        F = torch.nn.functional
        x = self.randn(64, 1024, dtype=torch.bfloat16)
        w, b = self.randn(1024, dtype=torch.bfloat16), self.randn(1024, dtype=torch.bfloat16)
        checks = {
            "layer_norm": (
                zk.layer_norm(x, w, b),
                F.layer_norm(x.float(), (1024,), w.float(), b.float()),
            ),
            "softmax": (zk.softmax(x), torch.softmax(x.float(), -1)),
        }
        if self.tk:
            checks["triton_layer_norm"] = (self.tk["layer_norm"](x, w, b), checks["layer_norm"][1])
            q = [self.randn(1, 4, 128, 64, dtype=torch.bfloat16) for _ in range(3)]
            ref = F.scaled_dot_product_attention(*(t.float() for t in q))
            checks["triton_attention"] = (self.tk["attention"](*q), ref)
            checks["zyntax_attention"] = (zk.attention(*q), ref)
        for name, (got, want) in checks.items():
            err = (got.float() - want.float()).abs().max().item()
            self.res.notes[f"max_abs_err_{name}"] = round(err, 5)
            if not err < 0.1:
                raise SystemExit(f"host_overhead: {name} differs from PyTorch by {err}")

    # -------------------------------------------------------------- where a call's time goes

    def host_us(self, fn: Callable[[], Any], calls: int = 200) -> float:
        """Host microseconds per call: `calls` calls enqueued without a
        synchronize (fewer than the launch queue holds), best of 5."""
        import time

        best = math.inf
        for _ in range(5):
            self.sync()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, time.perf_counter() - t0)
        self.sync()
        return best / calls * 1e6

    def device_us(self, fn: Callable[[], Any], calls: int = 20) -> float:
        """Device microseconds per call: a CUDA graph of `calls` calls, best of 5 replays."""
        from blocks_profile import graph_us

        return float(graph_us(self.torch, fn, calls))

    def probe(self) -> None:
        """Prints, per call, host time (enqueue rate) and device time (graph
        replay) of the small cases and their parts: a case is host-bound
        where the host time is the larger. A diagnostic: no JSON rows."""
        torch = self.torch
        F = torch.nn.functional
        bf = torch.bfloat16
        q, k, v = (self.randn(1, 4, 128, 64, dtype=bf) for _ in range(3))
        x = self.randn(64, 1024, dtype=bf)
        w, b = self.randn(1024, dtype=bf), self.randn(1024, dtype=bf)
        a, m = self.randn(128, 128, dtype=bf), self.randn(128, 128, dtype=bf)
        calls: dict[str, Callable[[], Any]] = {
            "attention": lambda: zk.attention(q, k, v),
            "attention return_lse": lambda: zk.attention(q, k, v, return_lse=True),
            "attention variant=sm80": lambda: zk.attention(q, k, v, variant="sm80"),
            "attention variant=tile": lambda: zk.attention(q, k, v, variant="tile"),
            "SDPA": lambda: F.scaled_dot_product_attention(q, k, v),
            "layer_norm": lambda: zk.layer_norm(x, w, b),
            "softmax": lambda: zk.softmax(x),
            "matmul": lambda: zk.matmul(a, m),
            "torch.empty_like(q)": lambda: torch.empty_like(q),
            "q.new_empty((1, 4, 128))": lambda: q.new_empty((1, 4, 128), dtype=torch.float32),
            "x.add_(1)": lambda: x.add_(1),
        }
        if self.tk:
            calls["triton attention"] = lambda: self.tk["attention"](q, k, v)
        print("probe: us per call, host (enqueue) / device (graph replay)")
        for name, fn in calls.items():
            try:
                for _ in range(3):
                    fn()
                host = self.host_us(fn)
                dev = self.device_us(fn) if "empty" not in name else 0.0
                print(f"  {name:28s} host {host:7.2f}  device {dev:7.2f}", flush=True)
            except Exception as e:  # a variant that refuses the shape is reported
                print(f"  {name:28s} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


def main() -> None:
    def options(p: Any) -> None:
        p.add_argument("--no-numba", action="store_true", help="skip the Numba-CUDA peer")
        p.add_argument("--only", action="append", default=[], help="time only this case")
        p.add_argument("--probe", action="store_true", help="host vs device time per call only")

    args = parse_args(__doc__ or "host overhead bench", options)
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("host_overhead bench: needs PyTorch with CUDA")
    bench = Bench(torch, args.device, args.quick, args.out_dir, not args.no_numba)
    bench.only = args.only
    if args.probe:
        bench.probe()
        return
    bench.check()
    bench.res.notes["timing"] = (
        f"best of 3 loops of {bench.iters} back-to-back calls (4 input sets rotated), "
        "microseconds per call including the final synchronize"
    )
    bench.launches()
    bench.res.write(args.out_dir)  # written after each part: a cut-short run keeps its rows
    bench.library()
    bench.res.write(args.out_dir)


if __name__ == "__main__":
    main()
