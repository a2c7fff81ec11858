"""The compile pipeline: HIR to PTX through the kernel cache, and launches.

:func:`cached_ptx` is the one path from HIR to PTX for every front-end:
memory, then the disk cache (:mod:`zyntax.frontend.cache`), then
``zyntax.compile`` (LLVM NVPTX), with the result stored and the compile hooks
told. :func:`ptx_for` takes a translated ``@zyntax.kernel``
:class:`~zyntax.frontend.kernel.Variant` through it, :func:`ptx_for_module` a
``zyntax.hir.Module`` (``zyntax.cuda.load_hir`` uses it, docs/runtime.md).

The front-end builds its HIR through the native builder (a ``zyntax.hir.Module``,
see :mod:`zyntax.frontend.emit`); it is verified there, and is compiled, run by
``zyntax.interp`` (the reference interpreter) or loaded and launched by
``zyntax.cuda``. The CUDA runtime is looked up when first needed,
so the front-end imports on any build.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from zyntax import _native, compiler, profiling, targets
from zyntax.errors import ArgumentError, InternalError
from zyntax.frontend import cache
from zyntax.frontend.errors import KernelArgumentError, KernelError
from zyntax.log import logger

if TYPE_CHECKING:
    from zyntax.frontend.kernel import Variant

Dim3 = tuple[int, int, int]

#: Default arch when no GPU is present and none is named (``ZYNTAX_ARCH``
#: overrides): the target table's (``Arch::DEFAULT``, docs/lowering.md).
DEFAULT_ARCH = targets.DEFAULT_ARCH

# Hooks: tests and tools count compilations through these (``zyntax.frontend.compile_hooks``).
compile_hooks: list[Callable[[dict[str, Any]], None]] = []


def zyntax_version() -> str:
    return str(_native.__version__)


# --------------------------------------------------------------------------- native module


def native_module(v: Variant) -> Any:
    """The variant's module (``zyntax.hir.Module``), verified once.

    The translator built it through the native builder with the kernel's
    Python file:line:column on every instruction, so verifier diagnostics
    become :class:`KernelError` at that line (:func:`located_errors`).
    """
    m = v.module
    if not v.native.get("verified"):
        with located_errors():
            m.verify()
        v.native["verified"] = True
    return m


@contextlib.contextmanager
def located_errors() -> Iterator[None]:
    """Turn a VerifyError about the kernel's code into a KernelError at its Python line."""
    from zyntax.errors import VerifyError

    try:
        yield
    except VerifyError as e:
        for d in getattr(e, "diagnostics", None) or []:
            loc = d.get("loc") if isinstance(d, dict) else None
            if loc and loc[0] and not str(loc[0]).startswith("<"):
                text = d.get("inst_text")
                msg = str(d.get("message", e))
                if text:
                    msg += f" (HIR: `{text}` in @{d.get('function')})"
                raise KernelError(msg, file=loc[0], line=loc[1], col=loc[2]) from e
        raise


# --------------------------------------------------------------------------- arch


@functools.cache
def _device_arch() -> str | None:
    if not gpu_available():
        return None
    from zyntax import cuda

    return str(cuda.device_arch(0))


def resolve_arch(arch: str | None) -> str:
    a = arch or os.environ.get("ZYNTAX_ARCH") or _device_arch() or DEFAULT_ARCH
    if a not in targets.ARCHS:
        raise KernelError(f"unknown arch {a!r}; expected one of {', '.join(targets.ARCHS)}")
    return a


# --------------------------------------------------------------------------- compile


def _compile(
    v: Variant, arch: str, emit: Literal["ptx", "llvm"] = "ptx", *, line_info: bool = False
) -> str:
    mod = native_module(v)
    with located_errors():
        return compiler.compile(mod, backend="nvptx", arch=arch, emit=emit, line_info=line_info)


def cache_key(v: Variant, arch: str) -> str:
    return cache.cache_key(v.hir_text, arch, targets.DEFAULT_PTX[arch], zyntax_version())


def cached_ptx(
    hir_text: str,
    arch: str,
    ptx_version: str,
    *,
    name: str,
    expect: Mapping[str, Sequence[str]],
    compile_ptx: Callable[[], str],
    describe: Callable[[str], dict[str, Any]],
) -> str:
    """PTX for `hir_text` on `arch`: from the disk cache, else `compile_ptx()`,
    stored with ``describe(ptx)`` as its metadata (the ``ptx_cache/`` schema)
    and the HIR (which makes the entry exportable); the compile hooks are told.

    `expect` (kernel name -> ``.zir`` parameter types, from the same HIR) binds
    a cached entry to its key: PTX of other kernels under it is rejected.
    `name` names the kernels in logs and hooks."""
    key = cache.cache_key(hir_text, arch, ptx_version, zyntax_version())
    hit = cache.load(key, expect=expect)
    if hit is not None:
        logger.info("reused %s for %s from the cache (key %s)", name, arch, key[:16])
        profiling.instant("cache", "ptx cache hit", kernel=name, arch=arch)
        return hit[0]
    t0 = time.perf_counter()
    ptx = compile_ptx()
    if not isinstance(ptx, str):
        raise InternalError(f"the compiler returned no PTX ({type(ptx).__name__})")
    elapsed = time.perf_counter() - t0
    logger.info(
        "compiled %s for %s in %.3f s (not in the cache; key %s)", name, arch, elapsed, key[:16]
    )
    meta = dict(describe(ptx), arch=arch, ptx_version=ptx_version)
    meta["zyntax_version"] = zyntax_version()
    cache.store(key, ptx, meta, hir=hir_text)
    for hook in list(compile_hooks):
        hook({"kernel": name, "arch": arch, "key": key, "seconds": elapsed})
    return ptx


def ptx_for(v: Variant, arch: str, *, line_info: bool = False) -> str:
    """PTX for one variant: memory, then :func:`cached_ptx`.

    With `line_info` the PTX has ``.loc`` lines at the kernel's Python lines.
    It is compiled in this process and kept with the variant, never in the
    disk cache: an entry there must be what its ``.zir`` compiles to (the
    cache archive's import checks that), and ``.zir`` text read back names
    its own lines, not the Python ones."""
    if line_info:
        slot = f"{arch}+lines"
        if slot not in v.ptx:
            v.ptx[slot] = _compile(v, arch, line_info=True)
        return v.ptx[slot]
    got = v.ptx.get(arch)
    if got is None:
        got = v.ptx[arch] = cached_ptx(
            v.hir_text,
            arch,
            targets.DEFAULT_PTX[arch],
            name=v.kernel_name,
            expect={v.kernel_name: v.param_types},
            compile_ptx=lambda: _compile(v, arch),
            describe=lambda _ptx: v.metadata(),
        )
    return got


def ptx_for_module(module: Any, arch: str) -> str:
    """PTX for a ``zyntax.hir.Module`` on `arch` through :func:`cached_ptx`
    (``zyntax.cuda.load_hir``): keyed by its ``.zir`` text, described as
    ``scripts/build_ptx_cache.py`` describes the bundled entries."""
    from zyntax import hir, ptxinfo

    if not isinstance(module, hir.Module):
        raise ArgumentError(
            f"argument 'module': expected a zyntax.hir.Module, got {type(module).__name__}"
        )
    targets.check_arch(arch)
    kernels = _kernels_for(module, arch)

    def describe(ptx: str) -> dict[str, Any]:
        launch = {k: ptxinfo.kernel_layout(module, k, ptx) for k in kernels}
        meta: dict[str, Any] = {
            "kernels": kernels,
            "module": module.name,
            "options": {},
            "source": f"<zyntax.hir.Module {module.name}>",
            "launch": launch,
        }
        if len(kernels) == 1:
            # The front-end's single-kernel field: HIR parameter types in order.
            meta["params"] = [p["type"] for p in launch[kernels[0]]["params"]]
        return meta

    return cached_ptx(
        module.to_zir(),
        arch,
        module.ptx_version or targets.DEFAULT_PTX[arch],
        name=module.name,
        expect={k: [str(t) for t in module.signature(k)[0]] for k in kernels},
        compile_ptx=lambda: compiler.compile(module, backend="nvptx", arch=arch),
        describe=describe,
    )


def _kernels_for(module: Any, arch: str) -> list[str]:
    """The module's kernels in its PTX for `arch`: a kernel declared with its
    own ``arch(...)`` is compiled for that arch only (docs/lowering.md)."""
    return list(module.kernels_for(arch))


def llvm_for(v: Variant, arch: str) -> str:
    return _compile(v, arch, emit="llvm")


# --------------------------------------------------------------------------- launches


#: ``CudaError.kind`` values that mean "this machine has no GPU".
_NO_GPU_KINDS = frozenset({"no_driver", "no_device"})


@functools.cache
def gpu_available() -> bool:
    """Whether a CUDA driver and device are usable (checked once per process).

    Only a build without the CUDA runtime, a missing driver or no device mean
    "no GPU" (then launches run on the interpreter). Any other failure, such
    as a driver that fails to initialise, is raised to the caller: it is not
    turned into a silent CPU fallback, and (being an exception) not cached.
    """
    try:
        from zyntax import cuda
    except ImportError:  # built without the `cuda` feature
        return False
    from zyntax.errors import CudaError

    try:
        return int(cuda.device_count()) > 0
    except CudaError as e:
        if getattr(e, "kind", None) in _NO_GPU_KINDS:
            return False
        raise


def _interp_launch() -> Any:
    from zyntax import _native

    fn = getattr(_native, "interp_launch", None)
    if fn is None:
        raise KernelError("the interpreter (zyntax.interp) is not available in this build")
    return fn


def run_interp(
    v: Variant,
    args: Sequence[Any],
    grid: Dim3,
    block: Dim3,
    shared_mem: int,
    *,
    checks: bool = True,
) -> dict[str, Any]:
    """Run one launch on the reference interpreter; numpy arrays are updated in place.

    Each array travels as a contiguous byte buffer (a copy for strided views),
    so shapes and strides passed to the kernel describe that buffer.
    """
    from zyntax.frontend.translator import ArrayParam, TensorMapParam

    launch = _interp_launch()
    flat: list[Any] = []
    buffers: list[bytes] = []
    arrays: list[tuple[np.ndarray, np.ndarray, int]] = []
    tensor_maps: list[tuple[Any, ...]] = []
    for k, (a, s) in enumerate(zip(args, v.specs, strict=True)):
        if isinstance(s, TensorMapParam):
            from zyntax.interp import TensorMap

            if not isinstance(a, TensorMap):
                raise KernelArgumentError(
                    f"run_cpu takes a zyntax.interp.TensorMap for a tensor map, "
                    f"got {type(a).__name__}"
                )
            c = a.array
            tensor_maps.append(a._desc(len(buffers)))
            flat.append(("tensormap", len(tensor_maps) - 1))
            buffers.append(c.tobytes())
            arrays.append((c, c, k))
        elif isinstance(s, ArrayParam):
            if not isinstance(a, np.ndarray):
                raise KernelArgumentError(f"run_cpu takes numpy arrays, got {type(a).__name__}")
            c = np.ascontiguousarray(a)
            flat.append(("buffer", len(buffers)))
            buffers.append(c.tobytes())
            arrays.append((a, c, k))
            flat.extend(int(x) for x in c.shape)
            flat.extend(int(x) // c.itemsize for x in c.strides)
        else:
            flat.append(a.item() if isinstance(a, np.generic) else a)
    out, stats = launch(
        native_module(v),
        v.kernel_name,
        list(grid),
        list(block),
        flat,
        buffers,
        shared_bytes=shared_mem,
        checks=checks,
        tensor_maps=tensor_maps,
    )
    for (orig, c, k), before, data in zip(arrays, buffers, out, strict=True):
        if data == before:  # inputs only read stay untouched (read-only ones too)
            continue
        if not orig.flags.writeable:
            raise KernelArgumentError(
                f"argument {k} of kernel '{v.kernel_name}' is a read-only array, but the "
                "kernel wrote to it (pass a writeable copy, e.g. numpy.array(a))"
            )
        orig[...] = np.frombuffer(data, dtype=c.dtype).reshape(c.shape)
    return dict(stats)


def run_native(
    v: Variant,
    args: Sequence[Any],
    grid: Dim3,
    block: Dim3,
    shared_mem: int,
    mode: str | None = None,
) -> str:
    """Run one launch on this CPU through ``zyntax.cpu.launch`` (native code,
    blocks on all cores; `mode` as there: ``"interp"`` is `run_interp`).
    Arrays pass as (array, shape..., strides in elements), as for the interpreter;
    returns ``"cpu"`` or ``"interp"``."""
    from zyntax import cpu
    from zyntax.frontend.translator import ArrayParam

    if cpu.resolve_mode(mode) == "interp":
        run_interp(v, args, grid, block, shared_mem)
        return "interp"
    flat: list[Any] = []
    owner: list[int] = []  # the Python argument of each flat argument
    for k, (a, s) in enumerate(zip(args, v.specs, strict=True)):
        if isinstance(s, ArrayParam):
            if not isinstance(a, np.ndarray):
                raise KernelArgumentError(f"run_cpu takes numpy arrays, got {type(a).__name__}")
            # A strided view goes as a contiguous copy (written back by cpu.launch),
            # so the strides passed are those of a C-contiguous array, in elements.
            strides: list[int] = []
            step = 1
            for n in reversed(a.shape):
                strides.insert(0, step)
                step *= int(n)
            flat += [a, *(int(x) for x in a.shape), *strides]
        else:
            flat.append(a.item() if isinstance(a, np.generic) else a)
        owner += [k] * (len(flat) - len(owner))
    try:
        return cpu.launch(
            native_module(v), v.kernel_name, grid, block, *flat, shared_bytes=shared_mem, mode=mode
        )
    except ArgumentError as e:
        # The CPU entry numbers the flat HIR parameters: name the Python argument.
        m = re.search(r"argument (\d+): (.*)", str(e), re.S)
        if m is None or int(m.group(1)) >= len(owner):
            raise
        k = owner[int(m.group(1))]
        raise KernelArgumentError(
            f"argument {k} of kernel '{v.kernel_name}': {m.group(2)}"
        ) from None


def run_gpu(
    v: Variant, args: Sequence[Any], grid: Dim3, block: Dim3, shared_mem: int, stream: Any
) -> None:
    """Launch on the GPU through ``zyntax.cuda``; numpy arrays are copied in and back."""
    from zyntax import cuda

    func = v.native.get("gpu")
    if func is None:
        # The arch is read once per variant: the loaded function is kept for every launch.
        arch = resolve_arch(None)
        ptx = ptx_for(v, arch)
        mod = cuda.load_module(ptx, hir=v.hir_text)
        func = mod.kernel(v.kernel_name)
        v.native["gpu"] = func
    # numpy arrays travel to the device and back (like Numba's auto-transfer).
    staged: list[Any] = []
    back: list[tuple[int, Any, Any]] = []
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            d = cuda.to_device(a)
            back.append((k, a, d))
            staged.append(d)
        else:
            staged.append(a)
    assert v.binder is not None
    flat = v.binder(staged)
    if v.bounds.get("cooperative"):
        func.launch(
            grid, block, *flat, shared_mem=shared_mem or None, stream=stream, cooperative=True
        )
    else:
        func.launch(grid, block, *flat, shared_mem=shared_mem or None, stream=stream)
    for k, orig, d in back:
        if orig.flags.writeable:
            orig[...] = d.to_host(stream)
        elif d.to_host(stream).tobytes() != np.ascontiguousarray(orig).tobytes():
            # A read-only input must stay as it was: say so instead of dropping the result.
            raise KernelArgumentError(
                f"argument {k} of kernel '{v.kernel_name}' is a read-only array, but the "
                "kernel wrote to it (pass a writeable copy, e.g. numpy.array(a))"
            )
