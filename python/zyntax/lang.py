"""The GPU language of ``@zyntax.kernel``: scalar types, array annotations and primitives.

Everything here is a marker that the kernel front-end recognises while it
translates a kernel's AST to HIR. Outside a kernel, the scalar types convert
like numpy (``zyntax.f32(1.5)`` is ``numpy.float32(1.5)``) and every GPU
primitive raises :class:`~zyntax.frontend.errors.KernelError` ("... can only be
used inside a @zyntax.kernel"). See ``docs/kernels.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# `Primitive` lives in `_lang_prims` so that the generated `_lang_ops` builds
# its primitives without importing this module (no import cycle).
from zyntax import _lang_ops
from zyntax._lang_ops import *  # noqa: F403
from zyntax._lang_prims import Primitive as Primitive  # re-exported
from zyntax._lang_prims import _outside

__all__ = [
    "Array",
    "DType",
    "TensorMap",
    "abs",
    "async_commit",
    "async_copy",
    "async_wait",
    "atomic",
    "bf16",
    "bfe",
    "bfi",
    "bitcast",
    "block_dim",
    "block_idx",
    "bulk_commit_group",
    "bulk_copy_g2s",
    "bulk_copy_s2g",
    "bulk_reduce",
    "bulk_wait_group",
    "ceil",
    "cluster_arrive",
    "cluster_ctarank",
    "cluster_nctarank",
    "cluster_sync",
    "cluster_wait",
    "compiler_fence",
    "cos",
    "cvt_pack",
    "cvt_unpack",
    "dsmem_load",
    "dsmem_store",
    "elect_sync",
    "ex2_approx",
    "exp",
    "f16",
    "f32",
    "f64",
    "fence_acq_rel",
    "fence_mbarrier_init",
    "fence_proxy_async",
    "floor",
    "fma",
    "frag_get",
    "frag_zero",
    "grid",
    "grid_dim",
    "grid_sync",
    "griddepcontrol_launch_dependents",
    "griddepcontrol_wait",
    "gridsize",
    "i8",
    "i16",
    "i32",
    "i64",
    "lane_id",
    "ldmatrix",
    "load_acquire",
    "load_cached",
    "load_vec",
    "local",
    "log",
    "match_all_sync",
    "match_any_sync",
    "max",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_complete_tx",
    "mbarrier_init",
    "mbarrier_inval",
    "mbarrier_test_wait",
    "mbarrier_try_wait_parity",
    "min",
    "mma",
    "mma_sync",
    "named_barrier_arrive",
    "named_barrier_sync",
    "prange",
    "prefetch_tensormap",
    "prmt",
    "rcp_approx",
    "red",
    "reduce_add_sync",
    "reduce_and_sync",
    "reduce_max_sync",
    "reduce_min_sync",
    "reduce_or_sync",
    "reduce_xor_sync",
    "rsqrt",
    "setmaxnreg",
    "shared",
    "shf_l_clamp",
    "shf_l_wrap",
    "shf_r_clamp",
    "shf_r_wrap",
    "shfl_down_sync",
    "shfl_sync",
    "shfl_up_sync",
    "shfl_xor_sync",
    "sin",
    "sqrt",
    "stmatrix",
    "store_cached",
    "store_release",
    "store_vec",
    "syncthreads",
    "syncwarp",
    "tanh",
    "tanh_approx",
    "thread_idx",
    "threadfence",
    "threadfence_block",
    "threadfence_system",
    "tma_load",
    "tma_reduce",
    "tma_store",
    "u8",
    "u16",
    "u32",
    "u64",
    "vote_all_sync",
    "vote_any_sync",
    "vote_ballot_sync",
    "warp_size",
    "wgmma",
    "wgmma_acc",
    "wgmma_commit_group",
    "wgmma_desc",
    "wgmma_fence",
    "wgmma_wait_group",
    "wgmma_zero",
]


def _type_error(message: str) -> Exception:
    """A `KernelTypeError` (a `ZyntaxError` and a `TypeError`)."""
    from zyntax.frontend.errors import KernelTypeError

    return KernelTypeError(message)


class DType:
    """A scalar type: annotation (``x: zyntax.f32``), cast (``zyntax.f32(v)``), dtype argument."""

    def __init__(self, name: str, np_dtype: Any) -> None:
        self.name = name
        self.np_dtype = np.dtype(np_dtype) if np_dtype is not None else None

    def __call__(self, value: Any) -> Any:
        if self.np_dtype is None:
            raise _outside(f"zyntax.{self.name}(...)")
        try:
            return self.np_dtype.type(value)
        except (TypeError, ValueError, OverflowError) as e:
            raise _type_error(f"zyntax.{self.name}({value!r}): {e}") from None

    def __repr__(self) -> str:
        return f"zyntax.{self.name}"

    def __getitem__(self, ndim: int) -> ArraySpec:
        """``zyntax.f32[2]`` is shorthand for ``zyntax.Array[zyntax.f32, 2]``."""
        if not isinstance(ndim, int) or isinstance(ndim, bool):
            raise _type_error(f"zyntax.{self.name}[ndim]: ndim must be an int, got {ndim!r}")
        return ArraySpec(self, ndim)


bool_ = DType("bool", np.bool_)
i8 = DType("i8", np.int8)
i16 = DType("i16", np.int16)
i32 = DType("i32", np.int32)
i64 = DType("i64", np.int64)
u8 = DType("u8", np.uint8)
u16 = DType("u16", np.uint16)
u32 = DType("u32", np.uint32)
u64 = DType("u64", np.uint64)
f16 = DType("f16", np.float16)
# numpy has no bfloat16: bf16 arrays come from device buffers only.
bf16 = DType("bf16", None)
f32 = DType("f32", np.float32)
f64 = DType("f64", np.float64)

DTYPES: dict[str, DType] = {
    d.name: d for d in (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64)
}


def dtype_of_numpy(dt: Any) -> DType | None:
    """The zyntax scalar type of a numpy dtype, if any."""
    d = np.dtype(dt)
    for t in DTYPES.values():
        if t.np_dtype is not None and t.np_dtype == d:
            return t
    return None


class ArraySpec:
    """``Array[dtype, ndim]`` or ``Array[dtype, ndim, "C"]``: an N-d array parameter."""

    def __init__(self, dtype: DType, ndim: int, layout: str = "A") -> None:
        if not isinstance(dtype, DType):
            raise _type_error(f"Array element type must be a zyntax scalar type, got {dtype!r}")
        if type(ndim) is not int or ndim not in (1, 2, 3):
            raise _type_error(f"arrays have 1 to 3 dimensions, got {ndim!r}")
        if layout not in ("A", "C"):
            raise _type_error(
                f"layout must be 'A' (any strides) or 'C' (contiguous), got {layout!r}"
            )
        self.dtype = dtype
        self.ndim = ndim
        self.layout = layout

    def __repr__(self) -> str:
        tail = f", {self.layout!r}" if self.layout != "A" else ""
        return f"zyntax.Array[{self.dtype!r}, {self.ndim}{tail}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArraySpec) and (self.dtype.name, self.ndim, self.layout) == (
            other.dtype.name,
            other.ndim,
            other.layout,
        )

    def __hash__(self) -> int:
        return hash((self.dtype.name, self.ndim, self.layout))


class _ArrayFactory:
    def __getitem__(self, item: Any) -> ArraySpec:
        if not isinstance(item, tuple):
            item = (item, 1)
        return ArraySpec(*item)

    def __repr__(self) -> str:
        return "zyntax.Array"


Array = _ArrayFactory()


class _Namespace:
    def __init__(self, prefix: str, names: list[str]) -> None:
        self._prefix = prefix
        for n in names:
            setattr(self, n, Primitive(f"{prefix}.{n}"))

    def __repr__(self) -> str:
        return f"<zyntax.lang.{self._prefix}>"


class _Dim3:
    """``thread_idx.x`` etc.: reading an attribute outside a kernel raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, dim: str) -> Any:
        if dim.startswith("_"):
            raise AttributeError(dim)
        raise _outside(f"zyntax.lang.{self._name}.{dim}")

    def __repr__(self) -> str:
        return f"<zyntax.lang.{self._name}>"


thread_idx = _Dim3("thread_idx")
block_idx = _Dim3("block_idx")
block_dim = _Dim3("block_dim")
grid_dim = _Dim3("grid_dim")

warp_size = 32

grid = Primitive("grid")
#: ``for i, j in prange(M, N):`` a parallel loop nest (1 to 3 sizes), one point
#: per thread; see ``@zyntax.kernel(workgroup=...)`` and zyntax.nest.
prange = Primitive("prange")
gridsize = Primitive("gridsize")
lane_id = Primitive("lane_id", "lane_id() -> i32")
syncthreads = Primitive("syncthreads", "barrier()")
syncwarp = Primitive("syncwarp", "warp_sync(mask=0xFFFFFFFF)")
threadfence_block = Primitive("threadfence_block", "fence.block()")
threadfence = Primitive("threadfence", "fence.device()")
threadfence_system = Primitive("threadfence_system", "fence.system()")

# Hopper transaction barriers (issue 13). A barrier is an element of a shared
# u64 array (``shared.array(n, u64)``): ``mbarrier_init(bars, i, count)`` etc.
mbarrier_init = Primitive("mbarrier_init")
mbarrier_arrive = Primitive("mbarrier_arrive")
mbarrier_arrive_expect_tx = Primitive("mbarrier_arrive_expect_tx")
mbarrier_complete_tx = Primitive("mbarrier_complete_tx")
mbarrier_test_wait = Primitive("mbarrier_test_wait")
mbarrier_try_wait_parity = Primitive("mbarrier_try_wait_parity")
mbarrier_inval = Primitive("mbarrier_inval")
fence_proxy_async = Primitive("fence_proxy_async", "fence.proxy_async()")
fence_mbarrier_init = Primitive("fence_mbarrier_init", "fence.mbarrier_init()")

# TMA (issue 13): a kernel parameter annotated ``TensorMap`` takes a
# ``zyntax.cuda.TensorMap`` (``zyntax.interp.TensorMap`` on the interpreter).
# ``tma_load(dst, tmap, coords, bars, i)`` loads the box at `coords` (a tuple,
# innermost first) into the shared array `dst` (use ``shared.dynamic``: it is
# 1024-byte aligned, as swizzled boxes need), completing on ``bars[i]``;
# ``tma_store(tmap, coords, src)`` / ``tma_reduce(op, tmap, coords, src)`` write
# the box back (then ``bulk_commit_group()`` and ``bulk_wait_group(0)``).
# Non-tensor bulk copies take arrays and element indices, as ``async_copy``:
# ``bulk_copy_g2s(dst, i, src, j, nbytes, bars, k)``, ``bulk_copy_s2g(dst, i,
# src, j, nbytes)``, ``bulk_reduce(op, dst, i, src, j, nbytes)``.


class _TensorMapType:
    """The annotation of a tensor-map kernel parameter."""

    def __repr__(self) -> str:
        return "zyntax.TensorMap"


TensorMap = _TensorMapType()
tma_load = Primitive("tma_load")
tma_store = Primitive("tma_store")
tma_reduce = Primitive("tma_reduce")
bulk_copy_g2s = Primitive("bulk_copy_g2s")
bulk_copy_s2g = Primitive("bulk_copy_s2g")
bulk_reduce = Primitive("bulk_reduce")
bulk_commit_group = Primitive("bulk_commit_group", "bulk.commit_group()")
bulk_wait_group = Primitive("bulk_wait_group")
prefetch_tensormap = Primitive("prefetch_tensormap")
# Warpgroup MMA and warp specialisation (issue 13, sm_90a; docs/semantics.md):
# ``wgmma_desc(shared_array, index, leading_byte_offset=, stride_byte_offset=,
# swizzle="128B")`` is a u64 descriptor; ``acc = wgmma(acc, a, b_desc, n=64,
# a_type="bf16")`` a new accumulator (``wgmma_zero(n)`` starts one,
# ``wgmma_acc(acc, i)`` reads element i).
wgmma_desc = Primitive("wgmma_desc")
wgmma_zero = Primitive("wgmma_zero")
wgmma = Primitive("wgmma")
wgmma_acc = Primitive("wgmma_acc")
# Warp MMA (issue 12, sm_80+): ``ldmatrix(shared_arr, index, num=4, trans=False)``
# loads a fragment (u32 or vec<u32, num>), ``mma_sync(a, b, c, elem="f16")`` is
# D = A * B + C over the warp in PTX's per-lane layouts, ``frag_zero(n)`` an
# accumulator of n zeros, ``frag_get(frag, i)`` its element i (a constant).
ldmatrix = Primitive("ldmatrix")
stmatrix = Primitive("stmatrix")
mma_sync = Primitive("mma_sync")
frag_zero = Primitive("frag_zero")
frag_get = Primitive("frag_get")
wgmma_fence = Primitive("wgmma_fence", "wgmma.fence()")
wgmma_commit_group = Primitive("wgmma_commit_group", "wgmma.commit_group()")
wgmma_wait_group = Primitive("wgmma_wait_group")
setmaxnreg = Primitive("setmaxnreg")
elect_sync = Primitive("elect_sync", "elect.sync()")
# Clusters and distributed shared memory (issue 13, sm_90): the block's rank
# in its cluster, cluster barriers, and element `i` of a shared array in the
# cluster's block of rank `rank` (``dsmem_load(arr, i, rank)``).
cluster_ctarank = Primitive("cluster_ctarank", "cluster_ctarank() -> i32")
cluster_nctarank = Primitive("cluster_nctarank", "cluster_nctarank() -> i32")
cluster_arrive = Primitive("cluster_arrive", "cluster_barrier.arrive()")
cluster_wait = Primitive("cluster_wait", "cluster_barrier.wait()")
cluster_sync = Primitive("cluster_sync")
dsmem_load = Primitive("dsmem_load")
dsmem_store = Primitive("dsmem_store")
# Programmatic dependent launch (sm_90) and grid-wide sync (a cooperative launch).
griddepcontrol_wait = Primitive("griddepcontrol_wait", "griddepcontrol.wait()")
griddepcontrol_launch_dependents = Primitive(
    "griddepcontrol_launch_dependents", "griddepcontrol.launch_dependents()"
)
grid_sync = Primitive("grid_sync", "grid_sync()")

shared = _Namespace("shared", ["array", "dynamic"])
local = _Namespace("local", ["array"])
atomic = _Namespace(
    "atomic",
    ["add", "sub", "min", "max", "and_", "or_", "xor", "exch", "inc", "dec", "cas"],
)

shfl_sync = Primitive("shfl_sync")
shfl_up_sync = Primitive("shfl_up_sync")
shfl_down_sync = Primitive("shfl_down_sync")
shfl_xor_sync = Primitive("shfl_xor_sync")
vote_ballot_sync = Primitive("vote_ballot_sync")
vote_any_sync = Primitive("vote_any_sync")
vote_all_sync = Primitive("vote_all_sync")
match_any_sync = Primitive("match_any_sync", "match.any(mask, value)")
match_all_sync = Primitive("match_all_sync")

mma = _Namespace("mma", ["load_a", "load_b", "load_c", "fill", "mma", "store"])

async_copy = Primitive("async_copy")
async_commit = Primitive("async_commit", "cp.async.commit()")
async_wait = Primitive("async_wait")

# Math: device-side these lower to HIR unary ops; outside a kernel they raise too,
# so that a kernel body run as plain Python fails loudly instead of half-working.
sqrt = Primitive("sqrt")
rsqrt = Primitive("rsqrt")
exp = Primitive("exp")
log = Primitive("log")
sin = Primitive("sin")
cos = Primitive("cos")
tanh = Primitive("tanh")
floor = Primitive("floor")
ceil = Primitive("ceil")
fma = Primitive("fma")
min = Primitive("min")
max = Primitive("max")
abs = Primitive("abs")

# Reinterpreting a value's bits as another scalar type of the same size. The
# bit ops on integers (`popc`, `clz`, `brev`, `bfind`) are generated from their
# op-table rows into `_lang_ops.py` (re-exported at the end of this file).
bitcast = Primitive("bitcast")

# --- issue 12: the warp-level ISA (docs/kernels.md lists each with its HIR op)
bfe = Primitive("bfe", "bfe(a, pos, length)")
bfi = Primitive("bfi", "bfi(a, b, pos, length)")
prmt = Primitive("prmt", "prmt(a, b, sel)")
shf_l_wrap = Primitive("shf_l_wrap", "shf.l.wrap(lo, hi, n)")
shf_l_clamp = Primitive("shf_l_clamp", "shf.l.clamp(lo, hi, n)")
shf_r_wrap = Primitive("shf_r_wrap", "shf.r.wrap(lo, hi, n)")
shf_r_clamp = Primitive("shf_r_clamp", "shf.r.clamp(lo, hi, n)")
named_barrier_sync = Primitive("named_barrier_sync")
named_barrier_arrive = Primitive("named_barrier_arrive")
reduce_add_sync = Primitive("reduce_add_sync", "redux.add(mask, value)")
reduce_min_sync = Primitive("reduce_min_sync", "redux.min(mask, value)")
reduce_max_sync = Primitive("reduce_max_sync", "redux.max(mask, value)")
reduce_and_sync = Primitive("reduce_and_sync", "redux.and(mask, value)")
reduce_or_sync = Primitive("reduce_or_sync", "redux.or(mask, value)")
reduce_xor_sync = Primitive("reduce_xor_sync", "redux.xor(mask, value)")
red = _Namespace("red", ["add", "sub", "min", "max", "and_", "or_", "xor", "exch", "inc", "dec"])
load_acquire = Primitive("load_acquire")
store_release = Primitive("store_release")
fence_acq_rel = Primitive("fence_acq_rel")
compiler_fence = Primitive("compiler_fence", "compiler_fence()")
ex2_approx = Primitive("ex2_approx", "ex2.approx(x)")
rcp_approx = Primitive("rcp_approx", "rcp.approx(x)")
tanh_approx = Primitive("tanh_approx", "tanh.approx(x)")
load_cached = Primitive("load_cached")
store_cached = Primitive("store_cached")
load_vec = Primitive("load_vec")
store_vec = Primitive("store_vec")
cvt_pack = Primitive("cvt_pack")
cvt_unpack = Primitive("cvt_unpack")

# The primitives that are one HIR instruction on their own operands, declared
# by their op-table rows (`lang "name(x)"` in `crates/zyntax-hir/src/table/`)
# and generated into `_lang_ops.py` (imported above).
__all__ += _lang_ops.__all__
