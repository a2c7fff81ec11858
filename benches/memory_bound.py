"""Memory-bound kernels of ``zyntax.kernels`` against PyTorch and Triton
(bench ``memory_bound``, metric ``GB_per_s``: the bytes each kernel must read
and write once, over the median of CUDA-event timings).

Cases: row softmax (f32 8192x8192, bf16 8192x32768), LayerNorm and RMSNorm
forward (bf16 8192x8192, with weight and bias), full sum (f32, 256 Mi
elements), cross-entropy forward (bf16 logits 8192 x 128256, int64 targets)
saxpy (f32, 256 Mi), and the row-kernel sweep of issue 24: softmax,
LayerNorm, RMSNorm and cross-entropy, forward and backward (``fwd_``/``bwd_``
cases, bf16, widths 1000, 4097, 50257 and 128256 over 4096 and 16384 rows, and
8192 over 4096; PyTorch's backward runs through autograd, with the norms' weight
and bias requiring grad as zyntax's backward computes dweight and dbias). Each
case has a ``peak`` row: the best device-to-device copy measured in the same run
(PyTorch ``copy_`` of 1 GiB); each row-sweep case also has a ``copy`` row, a
device copy of the case's own bytes (half read, half written) timed the same
way, and an ``of_copy`` field on each of its rows: its GB/s over that copy's
(the ceiling issue 24 judges the row kernels against). Peers: PyTorch's own
ops, and Triton's tutorial kernels (fused softmax, layer norm; RMSNorm is the layer-norm
tutorial without the mean; saxpy the vector-add tutorial) written below.

Inputs are random (never zeros), several sets rotated so that no timing
reads the L2 cache warm from the previous call; each zyntax output is checked
against PyTorch first. ``python benches/memory_bound.py [--quick]``;
``ZYNTAX_BENCH_ONLY=case,case`` runs only those cases, ``ZYNTAX_BENCH_ITERS=n``
times n calls per case, ``ZYNTAX_BENCH_BUDGET_S=s`` starts no case after s
seconds (the JSON's notes name the cases left out), and
``ZYNTAX_BENCH_ROW_VARIANTS=label,label@part`` adds rows ``zyntax_<label>`` to
the row-sweep cases (``@part``: only to those whose name contains it): zyntax
with the knobs of ``ROW_VARIANTS[label]`` set in ``zyntax.kernels.rows_tile``
(each checked against float64 first).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _common import Results, event_median_ms, optional, parse_args

from zyntax import kernels
from zyntax.kernels import elementwise, rows_tile


def triton_kernels() -> dict[str, Any]:
    """The Triton tutorials' kernels (fused softmax, layer norm, vector add)."""
    triton = optional("triton")
    if triton is None:
        return {}
    import triton.language as tl

    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        z = x - tl.max(x, axis=0)
        num = tl.exp(z)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def layer_norm_kernel(
        X, Y, W, B, Mean, Rstd, stride, N, eps, RMS: tl.constexpr, BLOCK: tl.constexpr
    ):
        row = tl.program_id(0)
        Y += row * stride
        X += row * stride
        mean = 0.0
        if not RMS:
            _mean = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
                _mean += a
            mean = tl.sum(_mean, axis=0) / N
        _var = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            x = tl.where(cols < N, x - mean, 0.0)
            _var += x * x
        var = tl.sum(_var, axis=0) / N
        rstd = 1 / tl.sqrt(var + eps)
        if not RMS:
            tl.store(Mean + row, mean)
        tl.store(Rstd + row, rstd)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            w = tl.load(W + cols, mask=mask)
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd * w
            if not RMS:
                y += tl.load(B + cols, mask=mask)
            tl.store(Y + cols, y, mask=mask)

    @triton.jit
    def saxpy_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, a * x + y, mask=mask)

    def softmax(x: Any, out: Any) -> None:
        n = x.shape[1]
        block = triton.next_power_of_2(n)
        warps = 16 if block >= 16384 else 8 if block >= 2048 else 4
        softmax_kernel[(x.shape[0],)](
            out, x, x.stride(0), out.stride(0), n, BLOCK=block, num_warps=warps
        )

    def norm(x: Any, w: Any, b: Any, out: Any, mean: Any, rstd: Any, rms: bool) -> None:
        n = x.shape[1]
        block = min(65536 // x.element_size(), triton.next_power_of_2(n))
        warps = min(max(block // 256, 1), 8)
        layer_norm_kernel[(x.shape[0],)](
            x, out, w, b, mean, rstd, x.stride(0), n, 1e-5, RMS=rms, BLOCK=block, num_warps=warps
        )

    def saxpy(a: float, x: Any, y: Any) -> None:
        n = x.numel()
        saxpy_kernel[(triton.cdiv(n, 1024),)](x, y, a, n, BLOCK=1024)

    return {"softmax": softmax, "norm": norm, "saxpy": saxpy}


class Bench:
    """One run: the peak, the peers, and the rows."""

    def __init__(self, torch: Any, device: int, quick: bool) -> None:
        self.torch = torch
        self.F = torch.nn.functional
        self.dev = torch.device("cuda", device)
        torch.cuda.set_device(self.dev)
        self.res = Results("memory_bound", torch.cuda.get_device_name(self.dev))
        self.iters = int(os.environ.get("ZYNTAX_BENCH_ITERS", 10 if quick else 50))
        self.sets = 2 if quick else 3
        self.scale = 4 if quick else 1
        self.tk = triton_kernels()
        # The ceiling: a large device-to-device copy (bytes read + written).
        src = torch.randn(1 << 28, device=self.dev)
        dst = torch.empty_like(src)
        ms = event_median_ms(lambda i: dst.copy_(src), 1, self.iters)
        self.peak = gbps(2 * src.numel() * 4, ms)
        self.res.add("d2d_copy", "torch", "GB_per_s", self.peak, False, api="Tensor.copy_ (1 GiB)")

    def randn(self, *shape: int, dtype: Any = None, std: float = 1.0) -> Any:
        t = self.torch.randn(*shape, device=self.dev, dtype=dtype or self.torch.float32)
        return t * std if std != 1.0 else t

    def case(
        self,
        name: str,
        nbytes: int,
        impls: dict[str, Callable[[int], Any]],
        sets: int,
        copy: bool = False,
    ) -> None:
        """Times each implementation; with `copy` also a device copy of the
        same bytes (half read, half written; ``copy`` row, same timing), and
        every row gets ``of_copy``: its GB/s over the copy's (issue 24's
        "copy peak", the same way for every case)."""
        if copy:
            half = nbytes // 2 // 2  # bf16 elements of the copy's source
            srcs = [self.randn(half, dtype=self.torch.bfloat16) for _ in range(2)]
            dsts = [self.torch.empty_like(t) for t in srcs]
            impls = {**impls, "copy": lambda i: dsts[i % 2].copy_(srcs[i % 2])}
        times: dict[str, float] = {}
        for impl, fn in impls.items():
            n_sets = sets if impl != "copy" else 2
            try:
                if isinstance(fn, Variant):
                    # Knobs set once around the timing: setting one clears
                    # every call plan (kernels._plans), and a cleared plan
                    # costs each call the full host path.
                    times[impl] = with_knobs(
                        rows_tile, fn.knobs, event_median_ms, fn.fn, n_sets, self.iters
                    )
                else:
                    times[impl] = event_median_ms(fn, n_sets, self.iters)
            except Exception as e:  # a peer that fails is reported, never fatal
                print(f"  ({name} {impl} failed: {type(e).__name__}: {e})")
        ref = times.get("copy")
        for impl, ms in times.items():
            extra: dict[str, Any] = {"ms": round(ms, 4)}
            if ref is not None:
                extra["of_copy"] = round(ref / ms, 3)
            self.res.add(name, impl, "GB_per_s", gbps(nbytes, ms), False, **extra)
        self.res.add(name, "peak", "GB_per_s", self.peak, False, source="d2d_copy")

    def check(self, name: str, got: Any, ref: Any, tol: float) -> None:
        g, r = got.double(), ref.double()
        err = float((g - r).norm() / r.norm().clamp_min(1e-30))
        print(f"  {name}: zyntax vs float64 relative error {err:.2e}")
        if not err < tol:
            raise SystemExit(f"{name}: zyntax output is wrong ({err:.2e} >= {tol})")

    def softmax(self, dt: str, rows: int, n: int) -> None:
        torch = self.torch
        name = f"softmax_{dt}_{rows}x{n}"
        tdt = torch.float32 if dt == "f32" else torch.bfloat16
        xs = [self.randn(rows // self.scale, n, dtype=tdt, std=3.0) for _ in range(self.sets)]
        outs = [torch.empty_like(x) for x in xs]
        ref = torch.softmax(xs[0].double(), -1)
        self.check(name, kernels.softmax(xs[0], out=outs[0]), ref, 1e-2 if dt == "bf16" else 1e-5)
        impls = {
            "zyntax": lambda i: kernels.softmax(xs[i], out=outs[i]),
            "torch": lambda i: torch.softmax(xs[i], -1),
        }
        if self.tk:
            impls["triton"] = lambda i: self.tk["softmax"](xs[i], outs[i])
        self.case(name, 2 * xs[0].numel() * xs[0].element_size(), impls, self.sets)

    def norm(self, rms: bool) -> None:
        torch, F = self.torch, self.F
        name = f"{'rmsnorm' if rms else 'layernorm'}_bf16_8192x8192"
        rows, n = 8192 // self.scale, 8192
        bf = torch.bfloat16
        xs = [self.randn(rows, n, dtype=bf) for _ in range(self.sets)]
        outs = [torch.empty_like(x) for x in xs]
        w, b = self.randn(n, dtype=bf), self.randn(n, dtype=bf)
        mean, rstd = self.randn(rows), self.randn(rows)
        x64 = xs[0].double()
        if rms:
            ref = x64 * torch.rsqrt((x64 * x64).mean(-1, keepdim=True) + 1e-5) * w.double()
            self.check(name, kernels.rms_norm(xs[0], w, 1e-5, out=outs[0]), ref, 1e-2)
            impls = {
                "zyntax": lambda i: kernels.rms_norm(xs[i], w, 1e-5, out=outs[i]),
                "torch": lambda i: F.rms_norm(xs[i], (n,), w, 1e-5),
            }
        else:
            ref = F.layer_norm(x64, (n,), w.double(), b.double(), 1e-5)
            self.check(name, kernels.layer_norm(xs[0], w, b, 1e-5, out=outs[0]), ref, 1e-2)
            impls = {
                "zyntax": lambda i: kernels.layer_norm(xs[i], w, b, 1e-5, out=outs[i]),
                "torch": lambda i: F.layer_norm(xs[i], (n,), w, b, 1e-5),
            }
        if self.tk:
            impls["triton"] = lambda i: self.tk["norm"](xs[i], w, b, outs[i], mean, rstd, rms)
        self.case(name, 2 * xs[0].numel() * 2 + (1 if rms else 2) * n * 2, impls, self.sets)

    def sum(self) -> None:
        torch = self.torch
        n = (1 << 28) // self.scale
        xs = [self.randn(n) for _ in range(self.sets)]
        got = kernels.reduce_sum(xs[0]).reshape(1)
        self.check("sum_f32_256Mi", got, xs[0].double().sum().reshape(1), 1e-5)
        impls = {
            "zyntax": lambda i: kernels.reduce_sum(xs[i]),
            "torch": lambda i: torch.sum(xs[i]),
        }
        self.case("sum_f32_256Mi", n * 4, impls, self.sets)

    def cross_entropy(self) -> None:
        torch, F = self.torch, self.F
        name = "cross_entropy_bf16_8192x128256"
        rows, v = 8192 // self.scale, 128256
        xs = [self.randn(rows, v, dtype=torch.bfloat16, std=4.0) for _ in range(2)]
        ts = [torch.randint(0, v, (rows,), device=self.dev) for _ in range(2)]
        ref = F.cross_entropy(xs[0].double(), ts[0], reduction="none")
        self.check(name, kernels.cross_entropy(xs[0], ts[0]), ref, 1e-4)
        impls = {
            "zyntax": lambda i: kernels.cross_entropy(xs[i], ts[i]),
            "torch": lambda i: F.cross_entropy(xs[i], ts[i], reduction="none"),
        }
        self.case(name, xs[0].numel() * 2 + rows * (8 + 4), impls, 2)

    def rows(self, op: str, direction: str, rows: int, n: int) -> None:
        """A row kernel (issue 24's sweep: bf16, widths 1000 to 128256) forward
        or backward against PyTorch eager (its backward through autograd, as
        training runs it); bytes are each tensor read or written once."""
        torch, F = self.torch, self.F
        bf = torch.bfloat16
        name = f"{direction}_{op}_bf16_{rows // self.scale}x{n}"
        rows //= self.scale
        sets = 2 if rows * n >= 1 << 28 else self.sets
        fwd = direction == "fwd"
        xs = [self.randn(rows, n, dtype=bf, std=3.0) for _ in range(sets)]
        dys = [self.randn(rows, n, dtype=bf) for _ in range(0 if fwd else sets)]
        w, b = self.randn(n, dtype=bf), self.randn(n, dtype=bf)
        ts = [torch.randint(0, n, (rows,), device=self.dev) for _ in range(sets)]
        dls = [self.randn(rows) for _ in range(sets)]
        nbytes = rows * n * 2 * (2 if direction == "fwd" else 3)
        if op == "cross_entropy":
            nbytes = rows * n * 2 * (1 if direction == "fwd" else 2) + rows * 12

        def torch_fwd(i: int, x: Any) -> Any:
            wx, bx = w.to(x.dtype), b.to(x.dtype)  # the float64 reference's are float64
            if op == "softmax":
                return torch.softmax(x, -1)
            if op == "layernorm":
                return F.layer_norm(x, (n,), wx, bx, 1e-5)
            if op == "rmsnorm":
                return F.rms_norm(x, (n,), wx, 1e-5)
            return F.cross_entropy(x, ts[i][: x.shape[0]], reduction="none")

        def zy_fwd(i: int) -> Any:
            if op == "softmax":
                return kernels.softmax(xs[i])
            if op == "layernorm":
                return kernels.layer_norm(xs[i], w, b, 1e-5)
            if op == "rmsnorm":
                return kernels.rms_norm(xs[i], w, 1e-5)
            return kernels.cross_entropy(xs[i], ts[i])

        # The float64 check of the largest cases on their first rows (rows are
        # independent; a float64 copy of 16384 x 128256 is 16 GiB).
        k = min(rows, CHECK_ELEMS // n)
        if fwd:
            ref = torch_fwd(0, xs[0][:k].double())
            self.check(name, zy_fwd(0)[:k], ref, 1e-2)
            impls = {"zyntax": zy_fwd, "torch": lambda i: torch_fwd(i, xs[i])}
            impls.update(self.variants(name, zy_fwd, lambda out: out[:k], ref, 1e-2))
            self.case(name, nbytes, impls, sets, copy=True)
            return
        ys = [kernels.softmax(x) for x in xs] if op == "softmax" else []

        def zy_bwd(i: int) -> Any:
            if op == "softmax":
                return kernels.softmax_backward(ys[i], dys[i])
            if op == "layernorm":
                return kernels.layer_norm_backward(dys[i], xs[i], w, b, 1e-5)[0]
            if op == "rmsnorm":
                return kernels.rms_norm_backward(dys[i], xs[i], w, 1e-5)[0]
            return kernels.cross_entropy_backward(dls[i], xs[i], ts[i])

        # PyTorch: the autograd graph of the forward, kept, replayed per call;
        # the norms' weight and bias require grad too (as in training, and as
        # zyntax's backward computes dweight and dbias).
        leaves = [x.detach().requires_grad_(True) for x in xs]
        params = [w, b] if op == "layernorm" else [w] if op == "rmsnorm" else []
        for p in params:
            p.requires_grad_(True)
        outs = [torch_fwd(i, x) for i, x in enumerate(leaves)]
        raw = dls if op == "cross_entropy" else dys
        grads = [g.to(o.dtype) for g, o in zip(raw, outs, strict=True)]
        x64 = xs[0][:k].double().requires_grad_(True)
        ref = torch.autograd.grad(torch_fwd(0, x64), x64, grads[0][:k].double())[0]
        with torch.no_grad():
            got = zy_bwd(0)[:k]
        self.check(name, got, ref, 2e-2)
        impls = {
            "zyntax": zy_bwd,
            "torch": lambda i: torch.autograd.grad(
                outs[i], [leaves[i], *params], grads[i], retain_graph=True
            ),
        }
        impls.update(self.variants(name, zy_bwd, lambda out: out[:k], ref, 2e-2))
        self.case(name, nbytes, impls, sets, copy=True)

    def variants(
        self,
        name: str,
        fn: Callable[[int], Any],
        first: Callable[[Any], Any],
        ref: Any,
        tol: float,
    ) -> dict[str, Callable[[int], Any]]:
        """Rows ``zyntax_<label>`` of the variants asked for (env
        ``ZYNTAX_BENCH_ROW_VARIANTS``): `fn` with ROW_VARIANTS[label]'s knobs
        of rows_tile set (:class:`Variant`, timed with the knobs set around
        its timing), checked against `ref` first (the rows `first` keeps); a
        wrong or failing variant is reported, not timed."""
        out: dict[str, Callable[[int], Any]] = {}
        for spec in filter(None, os.environ.get("ZYNTAX_BENCH_ROW_VARIANTS", "").split(",")):
            label, _, part = spec.partition("@")
            if part not in name:
                continue
            knobs = ROW_VARIANTS[label]
            run = functools.partial(with_knobs, rows_tile, knobs, fn)
            try:
                with self.torch.no_grad():
                    self.check(f"{name} {label}", first(run(0)), ref, tol)
            except (SystemExit, Exception) as e:  # a wrong variant: reported, never fatal
                print(f"  ({name} {label} not timed: {type(e).__name__}: {e})")
                continue
            out[f"zyntax_{label}"] = Variant(fn, knobs)
        return out

    def saxpy(self) -> None:
        n = (1 << 28) // self.scale
        xs = [self.randn(n) for _ in range(self.sets)]
        ys = [self.randn(n) for _ in range(self.sets)]
        y0 = ys[0].clone()
        kernels.saxpy(0.5, xs[0], ys[0])
        self.check("saxpy_f32_256Mi", ys[0], y0.double() + 0.5 * xs[0].double(), 1e-6)
        impls = {
            "zyntax": lambda i: kernels.saxpy(0.5, xs[i], ys[i]),
            "torch": lambda i: ys[i].add_(xs[i], alpha=0.5),
        }
        if self.tk:
            impls["triton"] = lambda i: self.tk["saxpy"](0.5, xs[i], ys[i])
        # Launch shapes and cache operators of elementwise.py that are not the
        # default (each checked first): the evidence for choosing one.
        ref = ys[1].double() + 0.5 * xs[1].double()
        for row, knobs in SAXPY_VARIANTS.items():
            got = saxpy_with(knobs, 0.5, xs[1], ys[1].clone()).double()
            err = float((got - ref).norm() / ref.norm())
            print(f"  saxpy {row}: relative error {err:.2e}")
            if err < 1e-6:  # a wrong variant is reported and not timed
                impls[row] = lambda i, k=knobs: saxpy_with(k, 0.5, xs[i], ys[i])
        self.case("saxpy_f32_256Mi", 3 * n * 4, impls, self.sets)


#: (rows, width) of the row-kernel sweep (issue 24): cases fwd_/bwd_<op>_bf16_<rows>x<width>.
ROW_SWEEP = [
    (4096, 1000),
    (16384, 1000),
    (4096, 4097),
    (16384, 4097),
    (4096, 8192),
    (4096, 50257),
    (16384, 50257),
    (4096, 128256),
    (16384, 128256),
]
#: Elements of the float64 check of a row case (its first rows).
CHECK_ELEMS = 1 << 27


#: Rows of the saxpy case beyond the default: knobs of zyntax.kernels.elementwise.
SAXPY_VARIANTS: dict[str, dict[str, Any]] = {
    "zyntax_grid_stride": {"GRID_STRIDE": True},
    "zyntax_cover_u4": {"UNROLL": 4},
    "zyntax_cover_u1": {"UNROLL": 1},
    "zyntax_cover_u2_t256": {"THREADS": 256},
    "zyntax_cover_u2_lu_cs": {"CACHE": ("lu", "lu", "cs")},
}


#: Row-kernel variants (ZYNTAX_BENCH_ROW_VARIANTS): label -> knobs of
#: zyntax.kernels.rows_tile. Only knobs a Plan carries (read when the plan is
#: made, so the variant's kernel is another cached kernel): PREFETCH*,
#: WIDE, HELD*, PERSIST, CLUSTER*, CHUNK_OF, ROW_WARPS.
_EVERY = ("softmax_fwd", "softmax_bwd", "norm_fwd", "rms_fwd", "ce_fwd", "ce_bwd")
ROW_VARIANTS: dict[str, dict[str, Any]] = {
    # Narrow rows ([2, 1024] tiles of 4 warps): row blocks looped over with
    # the next block's loads issued before this one's reductions.
    "pfrows8": {"PREFETCH_ROWS": dict.fromkeys(_EVERY, 8)},
    "pfrows4": {"PREFETCH_ROWS": dict.fromkeys(_EVERY, 4)},
    # One-row tiles of 1024 to 8192 columns, every program, 2 or 4 per SM.
    "pf4": {
        "PREFETCH": dict.fromkeys(_EVERY, 4),
        "PREFETCH_MIN_WIDTH": 1024,
        "PREFETCH_MAX_WIDTH": 8192,
    },
    "pf2": {
        "PREFETCH": dict.fromkeys(_EVERY, 2),
        "PREFETCH_MIN_WIDTH": 1024,
        "PREFETCH_MAX_WIDTH": 8192,
    },
    # Chunked rows: one or two instances per SM looping over rows (a row's
    # second read then finds it in L2).
    "persist1": {"PERSIST": {"softmax_fwd": 1, "norm_fwd": 1}},
    "persist2": {"PERSIST": {"softmax_fwd": 2, "norm_fwd": 2}},
    # Wide rows whole in registers for the cross-entropy backward too.
    "wide_ce": {"WIDE": frozenset({"softmax_fwd", "ce_bwd"})},
    # Chunk loops: the next chunk loaded ahead, per-lane state (no block
    # reductions in the loop), or both.
    "ahead": {"CHUNK_AHEAD": frozenset({*_EVERY, "norm_bwd_stats"})},
    "lanes": {"STATE": "lanes"},
    "ahead_lanes": {"CHUNK_AHEAD": frozenset({*_EVERY, "norm_bwd_stats"}), "STATE": "lanes"},
    # The one-pass norm backward of a tailed row on 16 warps (8 elements a
    # thread), then prefetching at one instance per SM.
    "nbwd_w16": {"NORM_BWD_TAIL_WARPS": 16},
    # ... with the weight reloaded per row block (from L1/L2), not held in
    # registers (16 a thread at 4097 columns), on 16 or the default 8 warps.
    "nbwd_w16_reload": {"NORM_BWD_TAIL_WARPS": 16, "NORM_BWD_W_RELOAD": True},
    "nbwd_reload": {"NORM_BWD_W_RELOAD": True},
    # The norm backward of narrow rows in one pass (x and dy read once), one
    # row of 1024 an instance (the split form reads them twice).
    "nbwd_fused_thin": {"NORM_BWD": {"rows": "fused", "row": "fused"}, "NORM_BWD_THIN": True},
    # The RMSNorm forward's loop at 128256 two [1, 4096] tiles a step.
    "rms_u2": {"HELD_FORM": {"rms_fwd": (0, 2, 4096, 8)}},
    # Chunked rows on one 1024-thread instance per SM ([1, 8192] chunks, 32
    # warps: 132 rows in flight, 33 MB, so a row's second read finds L2),
    # with or without the next chunk loaded ahead.
    "c8k32w": {
        "CHUNK_OF": {**rows_tile.CHUNK_OF, "norm_fwd": 2.0},
        "WARPS_OF": {"norm_fwd": 32, "softmax_fwd": 32, "softmax_bwd": 32, "ce_fwd": 32},
        "HELD_FORM": {"rms_fwd": (0, 1, 8192, 32)},
    },
    "c8k32w_ahead": {
        "CHUNK_OF": {**rows_tile.CHUNK_OF, "norm_fwd": 2.0},
        "WARPS_OF": {"norm_fwd": 32, "softmax_fwd": 32, "softmax_bwd": 32, "ce_fwd": 32},
        "HELD_FORM": {"rms_fwd": (0, 1, 8192, 32)},
        "CHUNK_AHEAD": frozenset({*_EVERY, "norm_bwd_stats"}),
    },
    "c8k32w_lanes": {
        "CHUNK_OF": {**rows_tile.CHUNK_OF, "norm_fwd": 2.0},
        "WARPS_OF": {"norm_fwd": 32, "softmax_fwd": 32},
        "HELD_FORM": {"rms_fwd": (0, 1, 8192, 32)},
        "STATE": "lanes",
    },
    # Narrow rows: twice the rows of a [R, W] tile (32 elements a thread).
    "pt32": {"PER_THREAD": 32},
}


@dataclass(frozen=True)
class Variant:
    """A zyntax row case run with rows_tile knobs set (ROW_VARIANTS)."""

    fn: Callable[[int], Any]
    knobs: dict[str, Any]

    def __call__(self, i: int) -> Any:
        return with_knobs(rows_tile, self.knobs, self.fn, i)


def with_knobs(module: Any, knobs: dict[str, Any], fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) with `module`'s knobs set for this call."""
    saved = {k: getattr(module, k) for k in knobs}
    for k, v in knobs.items():
        setattr(module, k, v)
    try:
        return fn(*args)
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def saxpy_with(knobs: dict[str, Any], a: float, x: Any, y: Any) -> Any:
    """kernels.saxpy with elementwise.py's module knobs set for this call."""
    return with_knobs(elementwise, knobs, kernels.saxpy, a, x, y)


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def main() -> None:
    args = parse_args(__doc__ or "memory-bound bench")
    torch = optional("torch")
    if torch is None or not torch.cuda.is_available():
        raise SystemExit("memory_bound bench: needs PyTorch with CUDA")
    bench = Bench(torch, args.device, args.quick)
    only = os.environ.get("ZYNTAX_BENCH_ONLY")
    cases: dict[str, Callable[[], None]] = {
        "softmax_f32_8192x8192": lambda: bench.softmax("f32", 8192, 8192),
        "softmax_bf16_8192x32768": lambda: bench.softmax("bf16", 8192, 32768),
        "layernorm_bf16_8192x8192": lambda: bench.norm(False),
        "rmsnorm_bf16_8192x8192": lambda: bench.norm(True),
        "sum_f32_256Mi": bench.sum,
        "cross_entropy_bf16_8192x128256": bench.cross_entropy,
        "saxpy_f32_256Mi": bench.saxpy,
    }
    for op in ("softmax", "layernorm", "rmsnorm", "cross_entropy"):
        for rows, n in ROW_SWEEP:
            for direction in ("fwd", "bwd"):
                case = f"{direction}_{op}_bf16_{rows}x{n}"
                cases[case] = functools.partial(bench.rows, op, direction, rows, n)
    budget = float(os.environ.get("ZYNTAX_BENCH_BUDGET_S", "inf"))
    start, left_out = time.monotonic(), []
    for name, run in cases.items():
        if only is None or name in only.split(","):
            if time.monotonic() - start > budget:
                left_out.append(name)
                continue
            run()
            torch.cuda.empty_cache()
    if left_out:
        bench.res.notes["left_out"] = f"past ZYNTAX_BENCH_BUDGET_S={budget:g}: " + ", ".join(
            left_out
        )
    bench.res.notes["timing"] = (
        f"median of {bench.iters} CUDA-event timings after warm-up, input sets rotated"
    )
    bench.res.write(args.out_dir)


if __name__ == "__main__":
    main()
