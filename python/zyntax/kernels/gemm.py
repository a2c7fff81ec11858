"""Matrix products of the kernel library (re-exported by ``zyntax.kernels``).

``matmul(a, b, out=None, *, bias=None, activation=None, out_dtype=None, variant=None)``
computes ``act(a @ b + bias)`` with a variant chosen by dtype, shape and arch
(see :data:`REGISTRY` and docs/kernels.md). Inputs are zyntax DeviceArrays,
GPU tensors of other libraries (``__cuda_array_interface__`` / DLPack:
PyTorch, CuPy) or numpy arrays (run on the reference interpreter: small
checks only).
"""

from __future__ import annotations

import dataclasses
import operator
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zyntax import _native, targets
from zyntax.errors import ArgumentError
from zyntax.kernels import _tensors as T
from zyntax.kernels import gemm_mma_sync, gemm_simt, gemm_tile
from zyntax.kernels._problem import TYPESTR, Operand, Problem, normalise

__all__ = ["REGISTRY", "Variant", "choose_variant", "grouped_matmul", "matmul"]

grouped_matmul = gemm_tile.grouped_matmul

_DeviceArray = _native.DeviceArray
_Stream = _native.CudaStream


@dataclass(frozen=True)
class Variant:
    """One matmul implementation. ``supports(problem, arch)`` returns None
    when it can run the problem, else the reason it cannot; ``run(problem,
    arch)`` launches it and returns the plan that repeats it on the GPU
    (:class:`_Plan`), or None when calls of this variant are not cached."""

    name: str
    supports: Callable[[Problem, str], str | None]
    run: Callable[[Problem, str], Any]


_lock = threading.Lock()
#: (variant, config, spec, arch, device) -> loaded kernel (or the HIR module on the interpreter).
_modules: dict[tuple[Any, ...], Any] = {}


def _compiled(
    key: tuple[Any, ...], build: Callable[[], Any], backend: str, device: int, source: Any
) -> Any:
    """The kernel for `key`, built and (on the GPU) compiled and loaded once
    per process; on the GPU the PTX is also kept in the disk cache."""
    with _lock:
        got = _modules.get(key)
    if got is not None:
        return got
    got = _load_cuda(key, build, device, source) if backend == "cuda" else build()
    with _lock:
        _modules.setdefault(key, got)
    return got


def _load_cuda(key: tuple[Any, ...], build: Callable[[], Any], device: int, source: Any) -> Any:
    """Loads the kernel of `key` from the PTX disk cache (docs/kernels.md,
    "Cache"), or builds, compiles and stores it. The entry is keyed by the
    key's repr and the kernel module's source, so editing a kernel or its
    specialisation never reuses stale PTX; building the HIR is skipped on a hit."""
    import inspect

    from zyntax import cuda
    from zyntax.compiler import compile as compile_hir
    from zyntax.frontend import cache, pipeline

    arch = key[3]
    ident = repr(key[:4]) + "\0" + inspect.getsource(source)
    ck = cache.cache_key(
        ident,
        arch,
        cache.DEFAULT_PTX.get(arch, ""),
        pipeline.zyntax_version(),
        {"library": "zyntax.kernels"},
    )
    hit = cache.load(ck)
    if hit is not None and isinstance(hit[1].get("signatures"), dict):
        ptx, sigs = hit[0], hit[1]["signatures"]
    else:
        module = build()
        ptx = compile_hir(module, backend="nvptx", arch=arch)
        sigs = {}
        for name in module.kernels:
            params = [str(t) for t in module.signature(name)[0]]
            sigs[name] = {"params": params, "shared_bytes": 0}
        cache.store(ck, ptx, {"signatures": sigs, "arch": arch})
    name = next(iter(sigs))
    return cuda.load_module(ptx, device, signatures=sigs).kernel(name)


#: Pointer arguments of a launch, by slot: filled in on every call (WS and
#: COUNT: split-K's f32 partials and its per-tile arrival counters).
A, B, OUT, BIAS, WS, COUNT = range(6)


@dataclass(frozen=True)
class _Launch:
    """One kernel launch of a matmul: kernel module `source` built as
    ``source.build(cfg, spec)``, its pointer arguments (slots, first) then
    its integer arguments."""

    source: Any
    cfg: Any
    spec: Any
    grid: int | tuple[int, int]
    ptrs: tuple[int, ...]
    ints: tuple[int, ...]


@dataclass(frozen=True)
class _Work:
    """What a variant runs for a problem: launches in order, and the split-K
    workspace they use: f32 partials and u32 counters (elements)."""

    launches: tuple[_Launch, ...]
    workspace: int = 0
    counters: int = 0


def _kernel(p: Problem, arch: str, ln: _Launch) -> Any:
    device = p.device or 0
    key = (ln.source.KERNEL, ln.cfg, ln.spec, arch, device)
    return _compiled(key, lambda: ln.source.build(ln.cfg, ln.spec), p.backend, device, ln.source)


#: The split-K counters of the last interpreter run (tests check that the
#: kernel leaves them zero, as the next launch needs).
last_interp_counters: list[Any] = []


def _run_interp(p: Problem, work: _Work) -> None:
    """Runs `work` on the interpreter (numpy operands; a NaN-poisoned
    workspace, so a partial that is never written shows up in the result)."""
    from zyntax import interp

    ws = np.full(max(1, work.workspace), np.nan, np.float32)
    counters = np.zeros(max(1, work.counters), np.uint32)
    last_interp_counters[:] = [counters]
    bias = p.bias.host if p.bias is not None else np.zeros(1, np.float32)
    vals = (p.a.host, p.b.host, p.out.host, bias, ws, counters)
    for ln in work.launches:
        kern = _kernel(p, "interp", ln)
        args = [vals[i] for i in ln.ptrs] + list(ln.ints)
        interp.launch(kern, ln.grid, ln.cfg.threads, *args, shared_bytes=ln.cfg.shared_bytes)


#: Split-K workspaces, one per (device, stream handle, kind): launches on one
#: stream run in order, so every plan of that stream may share them (each
#: launch leaves the counters zero again). Outgrown ones are kept (never
#: freed): a captured CUDA graph may still use them.
_workspaces: dict[tuple[int, int, str], Any] = {}
_outgrown: list[Any] = []


def _workspace(device: int, stream: Any, elems: int, kind: str = "partials") -> Any:
    """At least `elems` f32 partials, or u32 counters (``kind="counters"``,
    zeroed when allocated)."""
    from zyntax import cuda

    key = (device, 0 if stream is None else int(stream.handle), kind)
    with _lock:
        ws = _workspaces.get(key)
        if ws is None or ws.size < elems:
            if ws is not None:
                _outgrown.append(ws)
            # Powers of two (the outgrown ones add up to less than the last),
            # allocated and zeroed in the order of the stream that uses them.
            size = 1 << (elems - 1).bit_length()
            dtype = np.uint32 if kind == "counters" else np.float32
            ws = _workspaces[key] = _capture_pool_array(size, dtype, device, stream)
            if ws is None:
                ws = _workspaces[key] = cuda.empty(size, dtype, device, stream)
            if kind == "counters":
                ws.zero_(stream)
    return ws


def _capture_pool_array(size: int, dtype: Any, device: int, stream: Any) -> Any:
    """A workspace for a stream that PyTorch is capturing (``torch.cuda.graph``
    captures on a stream of its own, where no call ran before): the driver
    refuses cuMemAlloc during a capture, so the memory comes from PyTorch's
    allocator, which serves captures from the graph's private pool (a block
    held by a live tensor is never handed out again). None when `stream` is
    not capturing or torch is not in use (zyntax.cuda.capture: allocate, or
    warm up on the capturing stream, before the capture)."""
    torch = sys.modules.get("torch")
    if stream is None or torch is None or not stream.is_capturing():
        return None
    if not torch.cuda.is_current_stream_capturing():
        return None
    tdt = torch.int32 if dtype == np.uint32 else torch.float32  # 4 bytes; only the address is used
    return _TorchWorkspace(torch.empty(size, dtype=tdt, device=f"cuda:{device}"))


class _TorchWorkspace:
    """A workspace held as a torch tensor, with the DeviceArray attributes the
    plans use. Not a DeviceArray view: making one (DLPack or the array
    interface) orders the legacy default stream after torch's, which a
    capture forbids."""

    def __init__(self, t: Any) -> None:
        self.tensor, self.ptr, self.size = t, t.data_ptr(), t.numel()

    def zero_(self, stream: Any = None) -> None:
        self.tensor.zero_()  # on torch's current stream: the capturing one


class _Plan:
    """A matmul prepared for one call signature (the operands' library,
    dtypes, shapes, strides, devices and 16-byte alignment, the epilogue,
    variant and stream): its launches with validated configurations
    (``Kernel.prepare``), constant integer arguments and workspace. A call
    that matches only reads the pointers, checks that the output overlaps
    no input, and launches."""

    __slots__ = ("alloc", "count_ptr", "has_bias", "spans", "steps", "ws", "ws_ptr")

    def __init__(self, p: Problem, arch: str, work: _Work) -> None:
        device = p.device or 0
        #: Makes the output of calls without `out` (set by matmul).
        self.alloc: Callable[[Any], tuple[Any, int]] | None = None
        self.ws = None  # (partials, counters), kept alive with the plan
        self.ws_ptr = self.count_ptr = 0
        if work.workspace:
            self.ws = (
                _workspace(device, p.stream, work.workspace),
                _workspace(device, p.stream, work.counters, "counters"),
            )
            self.ws_ptr, self.count_ptr = int(self.ws[0].ptr), int(self.ws[1].ptr)
        self.has_bias = p.bias is not None
        # Byte extents (from the start pointer) of out, a, b and bias.
        ext = [op.span()[1] - op.span()[0] if op is not None else 0 for op in (p.out, p.a, p.b)]
        self.spans = (*ext, p.bias.span()[1] - p.bias.ptr if p.bias is not None else 0)
        self.steps = []
        for ln in work.launches:
            kern = _kernel(p, arch, ln)
            shared = ln.cfg.shared_bytes or None
            launcher = kern.prepare(ln.grid, ln.cfg.threads, shared, p.stream)
            # The launch's pointer slots, picked out of (a, b, out, bias, ws, count).
            self.steps.append((launcher, operator.itemgetter(*ln.ptrs), ln.ints, ln.ptrs))

    def __call__(self, pa: int, pb: int, pc: int, pbias: int) -> None:
        _check_overlap(self.spans, pa, pb, pc, pbias)
        vals = (pa, pb, pc, pbias if self.has_bias else pc, self.ws_ptr, self.count_ptr)
        for launcher, pick, ints, _ in self.steps:
            launcher(*pick(vals), *ints)

    def native_launches(self, at: tuple[int, int, int, int]) -> list[Any]:
        """The launches in ``CallPlans.insert``'s form, `at` the value indices
        of (a, b, out, bias) (the workspace addresses are constants: a
        workspace is never freed)."""
        ia, ib, io, ibias = at
        slots = (
            ("ptr", ia),
            ("ptr", ib),
            ("ptr", io),
            ("ptr", ibias if self.has_bias else io),
            ("const", self.ws_ptr),
            ("const", self.count_ptr),
        )
        return [
            (launcher, [slots[s] for s in ptrs] + [("const", i) for i in ints])
            for launcher, _, ints, ptrs in self.steps
        ]


class _Sm90Plan:
    """The sm90 variant's plan: its prepared launch (``matmul_sm90``'s
    `relaunch`, which takes the tensor maps of new addresses from a cache)
    behind the same overlap check as :class:`_Plan`."""

    __slots__ = ("alloc", "relaunch", "spans")

    def __init__(self, p: Problem, relaunch: Callable[[int, int, int, int], None]) -> None:
        self.alloc: Callable[[Any], tuple[Any, int]] | None = None
        self.relaunch = relaunch
        ext = [op.span()[1] - op.span()[0] for op in (p.out, p.a, p.b)]
        self.spans = (*ext, p.bias.span()[1] - p.bias.ptr if p.bias is not None else 0)

    def __call__(self, pa: int, pb: int, pc: int, pbias: int) -> None:
        _check_overlap(self.spans, pa, pb, pc, pbias)
        self.relaunch(pa, pb, pc, pbias)

    def native_launches(self, at: tuple[int, int, int, int]) -> list[Any]:
        """As :meth:`_Plan.native_launches`: `relaunch` called with the addresses."""
        ia, ib, io, ibias = at
        bias = ("const", 0) if ibias < 0 else ("ptr", ibias)
        return [(self.relaunch, [("ptr", ia), ("ptr", ib), ("ptr", io), bias])]


def _check_overlap(spans: tuple[int, ...], pa: int, pb: int, pc: int, pbias: int) -> None:
    """Raises if the output's bytes overlap an input's (`spans`: the byte
    extents of out, a, b and bias from their start pointers)."""
    no, na, nb, nbias = spans
    end = pc + no
    if (
        (pa < end and pc < pa + na)
        or (pb < end and pc < pb + nb)
        or (nbias and pbias < end and pc < pbias + nbias)
    ):
        for name, lo, n in (("a", pa, na), ("b", pb, nb), ("bias", pbias, nbias)):
            if n and lo < end and pc < lo + n:
                raise ArgumentError(f"argument 'out': overlaps argument '{name}' in memory")


def _run(p: Problem, arch: str, work: _Work) -> _Plan | None:
    """Runs `work`; on the GPU through a plan, which it returns for the cache."""
    if p.backend == "interp":
        _run_interp(p, work)
        return None
    plan = _Plan(p, arch, work)
    plan(p.a.ptr, p.b.ptr, p.out.ptr, p.bias.ptr if p.bias is not None else 0)
    return plan


def _main(
    p: Problem, source: Any, cfg: Any, spec: Any, grid: Any, split_k: bool = False
) -> _Launch:
    """The launch of a GEMM kernel ``(a, b, out, bias, M, N, K, lda, ldb, ldc)``
    (split-K: ``(a, b, out, bias, ws, counters, M, ...)``)."""
    ints = (p.m, p.n, p.k, p.a.ld, p.b.ld, p.out.ld)
    ptrs = (A, B, OUT, BIAS, WS, COUNT) if split_k else (A, B, OUT, BIAS)
    return _Launch(source, cfg, spec, grid, ptrs, ints)


# ------------------------------------------------------------------ mma_sync (sm_80)

#: Tile shapes of the mma_sync variant: large problems, up to 256 rows, up to
#: 32 rows (decode): smaller tiles keep more SMs busy when M is small.
#: The fastest of each ladder in benches/gemm.py on an H100 (8192^3:
#: benches/results/gemm-h100-20261126.json) and of the decode sweep
#: (benches/gemm_decode.py, gemm_decode-h100-20261126-7c34dff.json, without
#: split-K: 128 x 4096 x 4096 in 28.0 us with 32x128 tiles against 35.6 us with
#: 64x64, cuBLAS 29.1; 16 x 4096 x 4096 in 29.2 us with 16x128 against 34.7
#: with 16x32, cuBLAS 40.1 in that sweep's host-inclusive timing).
MMA_SYNC_CONFIG = gemm_mma_sync.Config(
    bm=128, bn=256, bk=64, wm=64, wn=64, stages=3, frag_pipeline=True
)
MMA_SYNC_MID_M_CONFIG = gemm_mma_sync.Config(
    bm=32, bn=128, bk=64, wm=32, wn=32, stages=4, frag_pipeline=True
)
MMA_SYNC_SMALL_M_CONFIG = gemm_mma_sync.Config(
    bm=16, bn=128, bk=64, wm=16, wn=32, stages=4, frag_pipeline=True
)


def _mma_sync_config(m: int) -> gemm_mma_sync.Config:
    if m <= 32:
        return MMA_SYNC_SMALL_M_CONFIG
    return MMA_SYNC_MID_M_CONFIG if m <= 256 else MMA_SYNC_CONFIG


def _even(p: Problem, bm: int, bn: int, bk: int) -> bool:
    """No tails and 16-byte alignment everywhere: the check-free kernel applies."""
    out_ok = p.out.ptr % 16 == 0 and (p.out.ld * p.out.itemsize) % 16 == 0
    tiles = p.m % bm == 0 and p.n % bn == 0 and p.k % bk == 0
    return tiles and p.a.aligned16 and p.b.aligned16 and out_ok


MMA_SYNC_TF32_CONFIG = gemm_mma_sync.Config(
    bm=128, bn=128, bk=16, wm=64, wn=64, stages=4, frag_pipeline=True, elem_bytes=4
)


def _mma_sync_supports(p: Problem, arch: str) -> str | None:
    if p.a.dtype == "f32" and not p.tf32:
        return "mma_sync reads f32 only as tf32 (allow_tf32=True or variant='mma_sync')"
    if p.a.dtype not in ("bf16", "f16", "f32"):
        return f"mma_sync takes bf16, f16 or f32 (tf32) inputs, not {p.a.dtype}"
    if arch != "interp" and targets.ARCHS[arch].compute_capability < (8, 0):
        return f"mma_sync needs sm_80 or newer, the device is {arch}"
    return None


#: Split-K (the small-M path): when the output of an M <= SPLIT_K_MAX_M
#: problem has fewer tiles than SPLIT_K_WAVES x the SMs' count, K is split
#: so that about that many blocks stream B, each over at least
#: SPLIT_K_MIN_TILES K tiles (benches/gemm_decode.py sweeps the waves
#: against the tile configs).
SPLIT_K_WAVES = 4
SPLIT_K_MIN_TILES = 4
SPLIT_K_MAX_M = 128  # = SMALL_M: the problems the registry sends to mma_sync first
#: Split-K on GPUs: off until its kernels have run on one (they are tested on
#: the interpreter, which always splits); the GPU tests and
#: benches/gemm_decode.py switch it on.
SPLIT_K_ON_GPU = False


def _sm_count(p: Problem) -> int:
    if p.backend == "interp":
        return 4  # a small machine: the interpreter tests exercise split-K
    return T.sm_count(p.device or 0)


def _splits(p: Problem, cfg: gemm_mma_sync.Config) -> int:
    """K splits for `p` with tile config `cfg` (1: no split)."""
    if p.m > SPLIT_K_MAX_M or (p.backend != "interp" and not SPLIT_K_ON_GPU):
        return 1
    tiles = gemm_mma_sync.grid(cfg, p.m, p.n)
    ktiles = -(-p.k // cfg.bk)
    want = -(-SPLIT_K_WAVES * _sm_count(p) // tiles)
    splits = max(1, min(want, ktiles // SPLIT_K_MIN_TILES))
    if splits == 1 or p.m * p.n * splits >= 2**31:
        return 1
    per = -(-ktiles // splits)
    return -(-ktiles // per)  # no empty split


def _mma_sync_work(p: Problem, arch: str) -> _Work:
    cfg = MMA_SYNC_TF32_CONFIG if p.tf32 else _mma_sync_config(p.m)
    splits = 1 if p.tf32 else _splits(p, cfg)
    spec = gemm_mma_sync.Spec(
        dtype="tf32" if p.tf32 else p.a.dtype,
        a_layout=p.a.layout,
        b_layout=p.b.layout,
        a_aligned=p.a.aligned16,
        b_aligned=p.b.aligned16,
        out_dtype=p.out.dtype,
        bias_dtype=None if p.bias is None else p.bias.dtype,
        activation=p.activation,
        even=_even(p, cfg.bm, cfg.bn, cfg.bk),
        split_k=splits > 1,
    )
    tiles = gemm_mma_sync.grid(cfg, p.m, p.n)
    if splits == 1:
        return _Work((_main(p, gemm_mma_sync, cfg, spec, tiles),))
    main = _main(p, gemm_mma_sync, cfg, spec, (tiles, splits), split_k=True)
    return _Work((main,), workspace=splits * p.m * p.n, counters=tiles)


def _mma_sync_run(p: Problem, arch: str) -> _Plan | None:
    return _run(p, arch, _mma_sync_work(p, arch))


# ------------------------------------------------------------------ simt (fp32 FFMA)

SIMT_CONFIG = gemm_simt.Config()


def _simt_supports(p: Problem, arch: str) -> str | None:
    if p.a.dtype != "f32":
        return f"simt takes f32 inputs, not {p.a.dtype}"
    return None


def _simt_run(p: Problem, arch: str) -> _Plan | None:
    cfg = SIMT_CONFIG
    spec = gemm_simt.Spec(
        a_layout=p.a.layout,
        b_layout=p.b.layout,
        a_aligned=p.a.aligned16,
        b_aligned=p.b.aligned16,
        out_dtype=p.out.dtype,
        bias_dtype=None if p.bias is None else p.bias.dtype,
        activation=p.activation,
    )
    return _run(p, arch, _Work((_main(p, gemm_simt, cfg, spec, gemm_simt.grid(cfg, p.m, p.n)),)))


# ------------------------------------------------------------------ sm90 (H14-hopper's module)


_sm90: list[Any] = []  # [module or None] once looked up


def _sm90_module() -> Any:
    """H14-hopper's ``gemm_sm90`` module, or None in builds without it (looked
    up once: a failing import costs ~0.1 ms, more than a launch)."""
    if not _sm90:
        found: Any
        try:
            from zyntax.kernels import gemm_sm90 as found
        except ImportError:
            found = None
        _sm90.append(found)
    return _sm90[0]


def _sm90_supports(p: Problem, arch: str) -> str | None:
    mod = _sm90_module()
    if mod is None:
        return "the sm90 variant is not part of this build"
    if not targets.has_feature(arch, "wgmma"):
        return f"sm90 needs wgmma (an sm_90a device), the device is {arch}"
    if p.a.dtype == "f32" and not p.tf32:
        return "sm90 reads f32 only as tf32 (allow_tf32=True or variant='sm90')"
    ok = mod.sm90_supports(p.a.dtype, p.b.dtype, p.out.dtype, p.a.layout, p.b.layout)
    return None if ok else "sm90 does not support this dtype/layout combination"


def _sm90_run(p: Problem, arch: str) -> _Sm90Plan | None:
    mod = _sm90_module()
    relaunch = mod.matmul_sm90(
        _cai(p.a),
        _cai(p.b),
        _cai(p.out),
        bias=None if p.bias is None else _cai(p.bias),
        activation=p.activation,
        a_layout=p.a.layout,
        b_layout=p.b.layout,
        scale_a=p.scale_a,
        scale_b=p.scale_b,
        stream=p.stream,
    )
    return None if relaunch is None else _Sm90Plan(p, relaunch)


class _CudaArray:
    """An operand as a plain ``__cuda_array_interface__`` object for the sm90
    variant: its logical shape (rows, cols) and strides (a column-major
    operand has the strides of a transposed view), and ``dtype`` the zyntax
    dtype name ("bf16", "f16", "e4m3", "f32")."""

    def __init__(self, op: Operand) -> None:
        isz = op.itemsize
        strides = (op.ld * isz, isz) if op.layout == "row" else (isz, op.ld * isz)
        self.dtype = op.dtype
        self.layout = op.layout
        self.__cuda_array_interface__ = {
            "shape": (op.rows, op.cols),
            "strides": strides,
            "typestr": TYPESTR[op.dtype],
            "data": (op.ptr, False),
            "version": 3,
        }


def _cai(op: Operand) -> _CudaArray:
    return _CudaArray(op)


# ------------------------------------------------------------------ tile (the tile program)


def _tile_supports(p: Problem, arch: str) -> str | None:
    if p.a.dtype not in ("bf16", "f16", "f32", "e4m3"):
        return f"the tile program takes bf16, f16, f32 or e4m3, not {p.a.dtype}"
    if _tensor_core_inputs(p):
        return _tile_tc_unfit(p, arch)
    return None


def _tensor_core_inputs(p: Problem) -> bool:
    """Whether the tile program reads `p`'s operands as fp8 or tf32 (wgmma only)."""
    return p.a.dtype == "e4m3" or (p.tf32 and p.a.dtype == "f32")


def _tile_tc_unfit(p: Problem, arch: str) -> str | None:
    """Why the tile program cannot run the fp8 or tf32 product `p`, if not:
    it reads them on wgmma (sm_90a; FFMA on the interpreter), both operands
    K-major as wgmma reads 8- and 32-bit inputs (the same rule everywhere),
    scales as numbers."""
    what = "fp8 (e4m3)" if p.a.dtype == "e4m3" else "tf32"
    if arch != "interp" and not targets.has_feature(arch, "wgmma"):
        return f"the tile program runs {what} on wgmma (sm_90a) only; the device is {arch}"
    if p.a.layout != "row" or (p.b.layout != "col" and p.n > 1):
        return (
            f"the tile program reads {what} operands K-major only (wgmma): a row-major and b "
            f"column-major (a transposed view of an N x K matrix), got a {p.a.layout}-major "
            f"and b {p.b.layout}-major"
        )
    if any(x is not None and not isinstance(x, float) for x in (p.scale_a, p.scale_b)):
        return "the tile program takes fp8 scales as numbers, not device arrays"
    return None


def _tile_run(p: Problem, arch: str) -> None:
    raise AssertionError("matmul calls gemm_tile.matmul itself")  # see _TILE


def tile_preferred(p: Problem, arch: str) -> bool:
    """Whether the registry runs `p` on the tile program before the
    hand-written variants: where it was measured faster on an H200 (B1,
    TFLOP/s, docs/kernels.md "The tile program"): bf16/f16 on sm_90 with M up
    to 256 (1x4096x4096: 1.10 against 0.37; 256x4096x4096: 238 against 189)
    or a transposed `a` (4096^3: 672 against 553, the sm90 variant copies
    it). Larger row-major products with a bias or an activation run it where
    its warp-specialised pipeline takes them (BIAS_ON_TILE,
    ACTIVATION_ON_TILE), and without an epilogue on tiles of 128 rows or
    more (PLAIN_ON_TILE, PLAIN_MIN_TILE_ROWS)."""
    hopper = targets.has_feature(arch, "wgmma")
    if hopper and _tensor_core_inputs(p):
        on = FP8_ON_TILE if p.a.dtype == "e4m3" else TF32_ON_TILE
        return on and _tile_tc_unfit(p, arch) is None
    if not hopper or p.a.dtype not in ("bf16", "f16") or p.tf32:
        return False
    if p.a.layout == "col":
        return True
    if MMA_SYNC_M[0] < p.m <= MMA_SYNC_M[1] and p.k <= MMA_SYNC_MAX_K and not _tile_swaps(p):
        return False  # mma_sync's small tiles (see MMA_SYNC_M), where not swapped
    if p.m > TILE_MAX_M:
        if p.activation is not None:
            on = ACTIVATION_ON_TILE
        elif p.bias is not None:
            on = BIAS_ON_TILE
        else:
            return PLAIN_ON_TILE and _tile_ws_fits(p, PLAIN_MIN_TILE_ROWS)
        return on and _tile_ws_fits(p)
    return True


#: Up to this M the registry prefers the tile program on sm_90 (tile_preferred).
TILE_MAX_M = 256
#: fp8 e4m3 (with per-tensor scales as numbers) runs the tile program (wgmma
#: .e4m3, both operands K-major) before the hand-written sm90 variant: session
#: 12 B1 on an H200, TFLOP/s, tile / sm90 / torch._scaled_mm: 4096^3 1208 /
#: 842 / 1348, 8192^3 1362 / 1292 / 1453 (bf16 output).
FP8_ON_TILE = True
#: f32 read as tf32 stays on sm90: B1 4096^3 tile 388 / sm90 393 / cuBLAS 407.
TF32_ON_TILE = False
#: Larger products with a bias (no activation) run the tile program where its
#: warp-specialised pipeline takes them (:func:`_tile_ws_fits`), the output
#: tile stored through shared memory and TMA (``gemm_tile.TMA_STORE``).
#: Session 12 B1 on an H200, TFLOP/s, tile / sm90 / cuBLAS: QKV
#: 8192x3072x1024 556 / 462 / 688 (128x128 ping-pong, 5 stages; the crate's
#: table takes 6: 551), down 8192x1024x4096 725 / 686 / 779 (128x256). With
#: register stores (session 11 B2) down lost, 660 / 687.
BIAS_ON_TILE = True
#: The same with an activation: B1, MLP up 8192x4096x1024 + bias + GELU 523
#: (TMA store, GELU on tanh.approx: ``gemm_tile.GELU_APPROX``) against sm90's
#: 343 (cuBLAS addmm + GELU 504, cuBLASLt fused 645).
ACTIVATION_ON_TILE = True
#: Without an epilogue too, where the crate's WS table gives tiles of
#: PLAIN_MIN_TILE_ROWS rows or more. Session 13 B1 on an H200 (TFLOP/s, tile
#: / sm90 / cuBLAS, same run, the output stored through TMA): 8192^3 810 /
#: 777 / 809 (128x256), 4096^3 792 / 728 / 801, 8192x3072x1024 593 / 530 /
#: 607 on ping-pong 128x128 (673 on the 256x128 layer tile the crate takes
#: since). Before the TMA store sm90 led: 785 against 771 at 8192^3 (session
#: 11 B1).
PLAIN_ON_TILE = True
#: Plain products whose WS tile has fewer rows (64x128: outputs of about
#: 1024 rows) stay on sm90 until measured.
PLAIN_MIN_TILE_ROWS = 128


def _tile_swaps(p: Problem) -> bool:
    """Whether ``gemm_tile.launch`` runs the 2-D product `p` swapped
    (``gemm_tile.launch_swapped``, where ``gemm_tile.SWAP`` is on): the
    crate's swapped schedule applies and TMA takes both operands."""
    if not gemm_tile.SWAP or any(op.ptr % 16 or (op.ld * op.itemsize) % 16 for op in (p.a, p.b)):
        return False
    return gemm_tile.swap_schedule(p.a.dtype, p.m, p.n, p.k, "sm_90a", _sm_count(p)) is not None


def _tile_ws_fits(p: Problem, min_rows: int = 0) -> bool:
    """Whether ``gemm_tile.launch`` runs the 2-D product `p` (M above
    TILE_MAX_M: never split) on its warp-specialised pipeline: 16-byte aligned
    operands and row strides (TMA), enough output tiles and K steps for the
    crate's WS table, on a tile of `min_rows` rows or more."""
    if any(op.ptr % 16 or (op.ld * op.itemsize) % 16 for op in (p.a, p.b)):
        return False
    got = gemm_tile.ws_schedule(p.m, p.n, p.k, _sm_count(p))
    return got is not None and p.k >= got[0][2] * got[0][4] and got[0][0] >= min_rows


#: Row-major products with M in (lo, hi] and K up to MMA_SYNC_MAX_K run
#: mma_sync before the tile program on sm_90: the small transformer block's
#: projections (M = 128, K = 768, in a CUDA graph, H200, session 10 B2, us):
#: N = 2304 6.5 against 7.9, N = 768 6.4 against 6.8, N = 3072 with GELU 8.6
#: against 10.8; at K = 3072 the tile program wins (11.5 against 16.6), and
#: decode rows (M <= 64) were not measured there, so they stay on the tile.
MMA_SYNC_M = (64, 128)
MMA_SYNC_MAX_K = 1024


#: The variants in order of preference; the first that supports a problem runs
#: it (``tile`` only where :func:`tile_preferred` says, or when asked for).
REGISTRY: list[Variant] = [
    Variant("sm90", _sm90_supports, _sm90_run),
    Variant("mma_sync", _mma_sync_supports, _mma_sync_run),
    Variant("simt", _simt_supports, _simt_run),
    Variant("tile", _tile_supports, _tile_run),
]


#: Up to this M the registry tries ``mma_sync`` (its 16/64-row tiles) before
#: ``sm90`` (128-row tiles): on the H100 at 840c6a8 sm90 ran M = 16 and M = 128
#: (N = K = 4096) at 3.1 and 18.4 TFLOP/s, mma_sync at 5.7 and 46.1 (186c63d).
SMALL_M = 128


def _preferred_order(p: Problem, arch: str) -> list[Variant]:
    if tile_preferred(p, arch):
        return sorted(REGISTRY, key=lambda v: v.name != "tile")
    if p.m > SMALL_M:
        return REGISTRY
    return sorted(REGISTRY, key=lambda v: v.name != "mma_sync")


_archs: dict[int, str] = {}


def _arch_of(p: Problem) -> str:
    if p.backend == "interp":
        return "interp"
    device = p.device or 0
    arch = _archs.get(device)
    if arch is None:
        from zyntax import cuda

        arch = _archs[device] = cuda.device_arch(device)
    return arch


def _choose(p: Problem, variant: str | None) -> tuple[Variant, str]:
    arch = _arch_of(p)
    if p.a.dtype == "e4m3" and arch != "interp" and targets.ARCHS[arch].compute_capability < (8, 9):
        raise ArgumentError(f"argument 'a': fp8 (e4m3) needs sm_89 or newer; the device is {arch}")
    names = [v.name for v in REGISTRY]
    if variant is not None and variant not in names:
        raise ArgumentError(
            f"argument 'variant': unknown variant {variant!r} (expected one of {names})"
        )
    reasons = []
    for v in _preferred_order(p, arch):
        if variant is not None and v.name != variant:
            continue
        why = v.supports(p, arch)
        if why is None:
            return v, arch
        reasons.append(why)
    raise ArgumentError(
        f"argument '{'variant' if variant else 'a'}': no matmul variant runs "
        f"{p.a.dtype} x {p.b.dtype} -> {p.out.dtype} on {arch}: " + "; ".join(reasons)
    )


def _options(variant: Any, allow_tf32: Any) -> bool:
    """Checks `variant` and `allow_tf32`; whether f32 may be read as tf32."""
    T.choice(variant, "variant", [None, *(v.name for v in REGISTRY)], "variant")
    return T.flag(allow_tf32, "allow_tf32") or variant in ("mma_sync", "sm90")


#: A plan-cache entry: calls of this signature run the tile program.
_TILE = object()


def _ndim(x: Any) -> int:
    return len(getattr(x, "shape", ()))


def choose_variant(
    a: Any,
    b: Any,
    *,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    variant: str | None = None,
    allow_tf32: bool = False,
) -> str:
    """The name of the variant :func:`matmul` would run for these inputs."""
    tf32 = _options(variant, allow_tf32)
    if max(_ndim(a), _ndim(b)) > 2 or variant == "tile":
        return "tile"
    p = normalise(
        a, b, None, bias=bias, activation=activation, out_dtype=out_dtype, tf32=tf32,
        allocate=False,
    )  # fmt: skip
    return _choose(p, variant)[0].name


@T.planned  # a repeated call: one native call on every route (_store)
def matmul(
    a: Any,
    b: Any,
    out: Any = None,
    *,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    variant: str | None = None,
    scale_a: float | None = None,
    scale_b: float | None = None,
    allow_tf32: bool = False,
    stream: Any = None,
) -> Any:
    """``out = activation(a @ b + bias)`` with f32 accumulation.

    `a` (M x K) and `b` (K x N) are bf16, f16 or f32 (fp8 e4m3 on the sm90
    variant, with per-tensor `scale_a`/`scale_b`), each row- or
    column-major (a transposed view of a contiguous matrix is column-major);
    `bias` has N elements; `activation` is None, ``"relu"`` or ``"gelu"``
    (tanh form); `out_dtype` (f32, bf16, f16) defaults to the input dtype
    (bf16 for fp8). `out`, when given, must be row-major; otherwise it is
    allocated like the inputs (a torch tensor for torch inputs, a zyntax
    DeviceArray for other GPU inputs, numpy for numpy). `variant` forces
    ``"sm90"``, ``"mma_sync"``, ``"simt"`` or ``"tile"`` (the tile program,
    ``gemm_tile``: any strides). Batched operands (3-D, broadcast as
    ``torch.matmul`` does: a batch of 1 or a 2-D operand is shared) run on
    the tile program. f32 inputs run exact fp32
    (``simt``) unless `allow_tf32` is set or a tensor-core variant is forced:
    then they are read as tf32 (rounded to nearest). Launches go to `stream`
    (a ``zyntax.cuda.Stream``); by default to PyTorch's current stream for
    torch inputs, else the legacy default stream. Launches go to the legacy
    default stream and are asynchronous. Bad input raises a ZyntaxError
    subclass naming the argument before anything is launched.
    """
    fast = scale_a is None and scale_b is None
    key = _call_key(a, b, out, bias, stream) if fast else None
    if key is not None:
        sig, pa, pb, pc, pbias = key
        full = (sig, activation, out_dtype, variant, allow_tf32)
        try:
            plan = _plans.get(full)
        except TypeError:  # an unhashable option (a list, an array): the full path names it
            plan, key = None, None
        if plan is _TILE:
            return gemm_tile.matmul(
                a, b, out, bias=bias, activation=activation, out_dtype=out_dtype, stream=stream
            )
        if plan is not None and out is not None:
            plan(pa, pb, pc, pbias)
            _store(plan, a, b, out, bias)
            return out
        if plan is not None and plan.alloc is not None:
            new, pc = plan.alloc(a)
            if pc & 15 == 0:  # as aligned as the output the plan was made with
                plan(pa, pb, pc, pbias)
                _store(plan, a, b, None, bias)
                return new
    tf32 = _options(variant, allow_tf32)
    T.stream_arg(stream)
    batched = max(_ndim(a), _ndim(b)) > 2
    # 2-D fp8 (scales) and tf32 products reach the tile program through the
    # normalised problem below (gemm_tile.problem_matmul).
    plain = fast and not tf32 and "float8" not in str(getattr(a, "dtype", ""))
    if batched or (variant == "tile" and plain):  # batched: only the tile program
        if variant not in (None, "tile") or tf32 or not fast:
            raise ArgumentError(
                "argument 'a': batched (3-D) operands and variant='tile' run on the tile "
                "program only (no other variant, allow_tf32 or fp8 scales)"
            )
        return gemm_tile.matmul(
            a, b, out, bias=bias, activation=activation, out_dtype=out_dtype, stream=stream
        )
    p = normalise(
        a,
        b,
        out,
        bias=bias,
        activation=activation,
        out_dtype=out_dtype,
        scale_a=scale_a,
        scale_b=scale_b,
        tf32=tf32,
    )
    v, arch = _choose(p, variant)
    if v.name == "tile" and _tensor_core_inputs(p):
        if p.m and p.n:
            if p.backend == "cuda":
                p = dataclasses.replace(p, stream=_stream_for(a, p.device or 0, stream))
            gemm_tile.problem_matmul(p, arch, _sm_count(p))
        return p.out_obj
    if v.name == "tile":
        if key is not None:
            _plans[full] = _TILE
        return gemm_tile.matmul(
            a, b, out, bias=bias, activation=activation, out_dtype=out_dtype, stream=stream
        )
    plan = None
    if p.m and p.n:
        if p.backend == "cuda":
            p = dataclasses.replace(p, stream=_stream_for(a, p.device or 0, stream))
        plan = v.run(p, arch)
        if plan is not None and key is not None and p.k:
            if out is None:
                plan.alloc = _allocator(p)
            if len(_plans) >= PLAN_CACHE_SIZE:
                _plans.clear()
            _plans[full] = plan
        else:
            plan = None
    _store(plan, a, b, out, bias)
    return p.out_obj


# ------------------------------------------------------------------ the plan cache

#: Plans of the GPU calls seen so far, keyed by :func:`_call_key`'s signature
#: and the keyword arguments (cleared when it reaches PLAN_CACHE_SIZE).


class _PlanCache(dict):  # type: ignore[type-arg]
    """The Python plans. Clearing them clears matmul's native table too: it
    replays these plans (and the tile route's), so a cleared cache means a
    full path on the next call of every signature, as before the table."""

    def clear(self) -> None:
        super().clear()
        native = getattr(matmul, "plans", None)
        if native is not None:
            native.clear()


_plans: dict[tuple[Any, ...], Any] = _PlanCache()  # a _Plan, or _TILE
PLAN_CACHE_SIZE = 512
_tensor_types: list[Any] = []  # [torch.Tensor] once torch is imported


def _torch_tensor_type() -> Any:
    if not _tensor_types:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        _tensor_types.append(torch.Tensor)
    return _tensor_types[0]


def _operand_key(obj: Any) -> tuple[Any, int] | None:
    """(what the checks of `obj` depend on besides its address, its address)
    for PyTorch tensors and DeviceArrays; None for anything else (which takes
    the full path every call). The key holds the library's own dtype, shape,
    strides and device (a CPU tensor never matches a CUDA one)."""
    t = type(obj)
    if t is _DeviceArray:
        ptr = obj.ptr
        return (t, obj.typestr, obj.shape, obj.strides, obj.device, ptr & 15), ptr
    if t is _torch_tensor_type() and t is not None:
        ptr = obj.data_ptr()
        # get_device(): an int (-1 for a CPU tensor), cheaper than a torch.device.
        return (obj.dtype, obj.shape, obj.stride(), obj.get_device(), ptr & 15), ptr
    return None


def _allocator(p: Problem) -> Callable[[Any], tuple[Any, int]]:
    """Allocates a fresh output like the one the full path allocated for `p`
    (a torch tensor for torch inputs, made with the call's `a.new_empty`: no
    device argument to parse; else a DeviceArray): (it, its address)."""
    shape, device = (p.m, p.n), p.device or 0
    if type(p.out_obj) is _DeviceArray:
        from zyntax import cuda

        dtype = "bfloat16" if p.out.dtype == "bf16" else TYPESTR[p.out.dtype]

        def device_array(_a: Any) -> tuple[Any, int]:
            got = cuda.empty(shape, dtype, device)
            return got, got.ptr

        return device_array
    tdt = p.out_obj.dtype

    def tensor(a: Any) -> tuple[Any, int]:
        got = a.new_empty(shape, dtype=tdt)
        return got, got.data_ptr()

    tensor.torch_alloc = (shape, tdt)  # type: ignore[attr-defined]  # made natively (_store)
    return tensor


def _store(plan: Any, a: Any, b: Any, out: Any, bias: Any) -> None:
    """Hands `plan` (a hand-written variant's, launched outside ``_tensors``)
    to the recording of this matmul call, which stores it in matmul's native
    table (``T.planned``): a repeated call is then one native call, as on the
    tile route. Inside another entry function's recording (or without a
    plan) the recording only learns that it cannot replay this call."""
    rec = T.recording()
    if rec is None:
        return
    rec.ok = False  # these launches are not noted: no recorded plan
    if plan is None or rec.fn is not matmul.__wrapped__:  # type: ignore[attr-defined]
        return
    at = [rec.index(x) if x is not None else -1 for x in (a, b, out, bias)]
    if None in at or (out is None and plan.alloc is None):
        return
    ia, ib, io, ibias = (int(i) for i in at if i is not None)
    n = len(rec.values)
    allocs: list[tuple[Any, ...]] = []
    if out is None:
        io = n  # the first (only) new output
        torch_alloc = getattr(plan.alloc, "torch_alloc", None)
        if torch_alloc is not None:
            allocs.append(("torch", ia, *torch_alloc))
        else:
            allocs.append(("call", ia, plan.alloc))
    no, na, nb, nbias = plan.spans
    srcs, extents = [io, ia, ib], [(0, no, "out"), (0, na, "a"), (0, nb, "b")]
    if ibias >= 0:
        srcs.append(ibias)
        extents.append((0, nbias, "bias"))
    launches = plan.native_launches((ia, ib, io, ibias))
    # A torch output made through libtorch's C functions where they are on
    # (``_torch_c``: ~0.5 us against new_empty's ~2.2 on the H200).
    fast = _aten_alloc(a, ia, getattr(plan.alloc, "torch_alloc", None)) if out is None else None

    def insert(plans: Any, key: Any) -> None:
        if fast is not None:
            try:
                plans.insert(key, n, [fast], [(srcs, extents)], launches, [io], False)
                return
            except ArgumentError:  # turned off since: the plain allocation
                pass
        plans.insert(key, n, allocs, [(srcs, extents)], launches, [io], False)

    rec.native_plan = insert


def _aten_alloc(a: Any, ia: int, torch_alloc: Any) -> tuple[Any, ...] | None:
    """The native plans' ``("aten", ...)`` allocation of a C-order torch output
    ``a.new_empty(shape, dtype=)`` (`torch_alloc`: (shape, dtype or None)), or
    None where libtorch's C functions are off."""
    from zyntax._torch_c import torch_c_codes

    if torch_alloc is None or not torch_c_codes:
        return None
    shape, tdt = torch_alloc
    code = torch_c_codes.get(a.dtype if tdt is None else tdt)
    dev = a.get_device()
    if code is None or dev < 0:
        return None
    return ("aten", ia, (tuple(shape), T._c_strides(tuple(shape)), code, dev))


def _call_key(a: Any, b: Any, out: Any, bias: Any, stream: Any) -> Any:
    """(signature, a, b, out and bias addresses) of a call, or None when
    one of its operands has no cheap signature. The stream is part of the
    signature: the caller's zyntax Stream, else PyTorch's current stream
    (by handle) for torch inputs."""
    ka, kb = _operand_key(a), _operand_key(b)
    ko = (None, 0) if out is None else _operand_key(out)  # None: allocated per call
    if ka is None or kb is None or ko is None:
        return None
    kbias: Any = (None, 0)
    if bias is not None:
        kbias = _operand_key(bias)
        if kbias is None:
            return None
    if stream is not None:
        if type(stream) is not _Stream:
            return None  # the full path names the bad argument
        skey: Any = stream
    elif type(a) is _DeviceArray:
        skey = None
    else:
        skey = _raw_torch_stream(a.get_device())
    sig = (ka[0], kb[0], ko[0], kbias[0], skey)
    return sig, ka[1], kb[1], ko[1], kbias[1]


_raw_stream_fn: list[Callable[[int], int]] = []


def _raw_torch_stream(device: int) -> int:
    """PyTorch's current stream on `device` as a raw handle (0: the legacy
    default stream), without building a torch Stream object (~5 us)."""
    if not _raw_stream_fn:
        import torch  # type: ignore[import-not-found,unused-ignore]

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # another torch: its public (slower) spelling
            raw = lambda d: torch.cuda.current_stream(d).cuda_stream  # noqa: E731
        _raw_stream_fn.append(raw)
    return int(_raw_stream_fn[0](device))


_foreign_streams: dict[tuple[int, int], Any] = {}


def _stream_for(a: Any, device: int, stream: Any) -> Any:
    """The zyntax stream to launch on: `stream`, else PyTorch's current
    stream for torch inputs (wrapped once per handle), else None."""
    from zyntax import cuda

    if stream is not None:
        if not isinstance(stream, cuda.Stream):
            raise ArgumentError(
                f"argument 'stream': expected a zyntax.cuda.Stream, got {type(stream).__name__}"
            )
        return stream
    if not type(a).__module__.startswith("torch"):
        return None
    import torch  # type: ignore[import-not-found,unused-ignore]

    handle = torch.cuda.current_stream(device).cuda_stream
    if handle == 0:  # the legacy default stream
        return None
    got = _foreign_streams.get((device, handle))
    if got is None:
        got = _foreign_streams[(device, handle)] = cuda.Stream.from_handle(handle, device)
    return got
