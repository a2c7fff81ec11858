"""Call plans of the ``zyntax.kernels`` functions (issue 25): a repeated call
costs reading its tensors and launching, not checking and dispatching again.

:func:`planned` wraps an entry function (``softmax``, ``layer_norm``, ...).
A call whose arguments all have a cheap key (PyTorch CUDA tensors and zyntax
DeviceArrays by type, dtype, shape, strides, device and 16-byte alignment of
the address, never the address itself; ``None``, bools, ints, floats, strings,
streams and tuples of them by value; PyTorch's current stream by handle) looks
its plan up. On a miss the function runs as written, with every check, while
a recording notes what it does through ``_tensors``: which argument or fresh
output each kernel argument is, the outputs it allocates, the overlap checks
of a given ``out``, the tensor maps it encodes, and the kernels it launches
(config, stream, the other arguments as constants). When everything it did
was noted, the recording becomes the key's plan. On a hit the plan allocates
the outputs again (none when ``out=`` is given), re-checks the overlaps on the
new addresses and launches the prepared kernels with the new addresses: the
same launches the function would make, since nothing else it looked at
differs.

Knobs: the kernel modules' switches (``attention_bwd_sm90.SPLIT_KEYS``,
``rows_tile.WIDE``, ``gemm_tile.WS_FORCE``, ...) change which kernel a call
launches without changing its arguments, so a plan recorded under one
setting would replay the old kernel under another. Every ``zyntax.kernels``
module is watched (:func:`watch`): assigning any attribute of one from
outside (``module.KNOB = v``, ``monkeypatch.setattr``, and the undo) clears
every plan table and the caches registered with :func:`on_knob_change`
(``gemm``'s own plans, ``gemm_tile.ws_schedule``), so the next call takes
the full path under the new setting. This costs nothing on a hit. A knob
mutated in place (``rows_tile.WARPS_OF[name] = 8``) is not seen: assign a
new value instead.

Safety (the issue's "bad input"): a tensor that changes dtype, shape,
strides, device or alignment, or a CPU tensor, has another key (or none) and
takes the full path, which explains any error. Addresses are read on every
call and are not part of the key, so a freed tensor's address reused by
another tensor is just another call. A recording that saw anything it cannot
replay (an object of unknown provenance, a launch argument equal to a tensor
address, a tensor map of an unknown tensor, no launch at all) makes no plan;
entry functions must launch only through ``_tensors.launch`` /
``_tensors.launch_loaded`` for their launches to be seen.

The hot path is native: with ``_native.CudaCallPlans`` (crates/zyntax-python/
src/cuda/plans.rs) one call computes the key from the arguments themselves
and replays the plan (allocations through ``new_empty``, overlap checks,
launches encoded without building Python objects); Python only records
misses. Without it (an older extension module) the same plans replay here.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from zyntax import _native, _torch_c
from zyntax._torch_c import torch_c_codes, torch_c_enable  # noqa: F401 - the tests' switch
from zyntax.errors import ArgumentError

_DeviceArray = getattr(_native, "DeviceArray", None)
_Stream = getattr(_native, "CudaStream", None)
_CallPlans = getattr(_native, "CudaCallPlans", None)

#: Plans kept per function (the dict is cleared when it is full).
PLAN_CACHE_SIZE = 256

if _CallPlans is not None:
    import copyreg

    # An entry function (a CallPlans: planned's result) pickles by reference,
    # its module and name, as the function it wraps did.
    copyreg.pickle(_CallPlans, lambda p: p.__qualname__)


class _Local(threading.local):
    rec: _Recording | None = None


_local = _Local()


def recording() -> _Recording | None:
    """The recording of the call this thread is running, if any."""
    return _local.rec


# ---------------------------------------------------------------- knobs

#: Every plan table made by :func:`planned` (native tables or dicts; kept
#: for the program's life, as the entry functions that own them are).
_tables: list[Any] = []
#: What else :func:`knob_changed` clears (caches that read knobs).
_hooks: list[Callable[[], Any]] = []


def on_knob_change(*clear: Callable[[], Any]) -> None:
    """Registers functions that forget what depends on a knob's value."""
    _hooks.extend(clear)


def knob_changed() -> None:
    """Forgets every plan and registered cache: a knob of some kernel module
    was set (the next call of every entry function takes the full path)."""
    for table in list(_tables):
        table.clear()
    for clear in _hooks:
        clear()


class _KnobModule(types.ModuleType):
    """A kernel module whose attribute assignments from outside clear the
    plans (:func:`knob_changed`). The module's own code assigns its globals
    through its dict and is not affected; reads are not either. On the
    package, a submodule imported later (its parent's attribute is set then)
    is watched too, and forgets nothing (it changes no knob)."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}":
            watch(value)  # a submodule imported: no knob changed
            return
        knob_changed()

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        knob_changed()


def watch(module: types.ModuleType) -> None:
    """Makes assignments to `module`'s attributes clear every plan: the
    package ``zyntax.kernels`` and its public modules (the private ones,
    ``_plans``, ``_tensors``, ..., hold no knobs; tests patch them)."""
    name = module.__name__
    public = name == "zyntax.kernels" or (
        name.startswith("zyntax.kernels.") and not name.rpartition(".")[2].startswith("_")
    )
    if public and type(module) is types.ModuleType:
        module.__class__ = _KnobModule


def watch_module_of(fn: Any) -> None:
    """Watches the module defining `fn` where it is a kernel module (the
    package's ``__init__`` watches the modules without entry functions)."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is not None:
        watch(module)


# ---------------------------------------------------------------- PyTorch's stream

_raw_stream: list[Callable[[int], int]] = []


def raw_torch_stream(device: int) -> int:
    """PyTorch's current stream on `device` as a raw handle (0: the legacy
    default stream) through ``torch._C._cuda_getCurrentRawStream``, a
    fraction of a microsecond (``torch.cuda.current_stream(d).cuda_stream``
    builds a Stream object: ~5 us)."""
    return int(_raw_stream_fn()(device))


def _raw_stream_fn() -> Callable[[int], int]:
    if not _raw_stream:
        import torch  # type: ignore[import-not-found, unused-ignore]

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:  # another torch: the public spelling
            raw = lambda d: torch.cuda.current_stream(d).cuda_stream  # noqa: E731
        _raw_stream.append(raw)
    return _raw_stream[0]


def _torch_info() -> tuple[Any, Callable[[int], int]] | None:
    """(torch.Tensor, the raw stream function) once the program has imported
    torch, else None: what the native plans key torch tensors by. The first
    time, libtorch's C functions are turned on where they pass their check
    (``zyntax._torch_c``)."""
    tt = _torch_tensor()
    if tt is None:
        return None
    _torch_c.ensure()
    return (tt, _raw_stream_fn())


def _torch_meta(obj: Any) -> tuple[Any, ...] | None:
    """(shape, strides, dtype code, device) of a new CUDA torch output for a
    plan to make again through libtorch's C functions, or None (they are
    off, or it is not one: the plan's allocator stays)."""
    if not torch_c_codes or type(obj) is not _torch_tensor():
        return None
    code, dev = torch_c_codes.get(obj.dtype), obj.get_device()
    if code is None or dev < 0 or obj.storage_offset() != 0:
        return None
    return (tuple(obj.shape), tuple(obj.stride()), code, dev)


# ---------------------------------------------------------------- keys


_tensor_type: list[Any] = []


def _torch_tensor() -> Any:
    """torch.Tensor once the program has imported torch (never imports it)."""
    if not _tensor_type:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        _tensor_type.append(torch.Tensor)
    return _tensor_type[0]


def _scalar_key(a: Any) -> Any:
    t = type(a)
    if t is float:
        return (t, a.hex())  # exact: -0.0 is not 0.0
    if a is None or t in (bool, int, str):
        return (t, a)
    if t is tuple:
        keys = tuple(_scalar_key(x) for x in a)
        return None if None in keys else (t, keys)
    if t is _Stream:
        return (t, a)
    return None


def call_key(values: tuple[Any, ...]) -> tuple[Any, list[int | None]] | None:
    """(key, address of each value or None) of a call's argument values, or
    None when one has no cheap key (numpy arrays, other libraries' tensors:
    the full path every call)."""
    tt = _torch_tensor()
    key: list[Any] = []
    ptrs: list[int | None] = []
    torch_device = -1
    for a in values:
        t = type(a)
        if tt is not None and t is tt:
            dev = a.get_device()
            if dev < 0:
                return None  # a CPU tensor: the full path refuses it by name
            p = a.data_ptr()
            key.append((t, a.dtype, a.shape, a.stride(), dev, p & 15))  # torch.Size is a tuple
            ptrs.append(p)
            torch_device = dev if torch_device < 0 else torch_device
        elif t is _DeviceArray and t is not None:
            p = a.ptr
            key.append((t, a.typestr, a.shape, a.strides, a.device, p & 15))
            ptrs.append(p)
        else:
            k = _scalar_key(a)
            if k is None:
                return None
            key.append(k)
            ptrs.append(None)
    if torch_device >= 0:
        key.append(("torch stream", raw_torch_stream(torch_device)))
    return tuple(key), ptrs


# ---------------------------------------------------------------- recording


class _Recording:
    """What one call does through ``_tensors`` (see the module documentation)."""

    def __init__(self, values: tuple[Any, ...], fn: Any = None) -> None:
        self.values = values
        #: The entry function recorded (a nested entry function runs inside
        #: the outer one's recording and must not take it for its own).
        self.fn = fn
        self.ok = True
        #: (object, make another: like -> (object, address), like's source) per allocation.
        self.allocs: list[tuple[Any, Callable[[Any], tuple[Any, int]], tuple[str, int]]] = []
        #: id(Tensor) -> ("in" | "alloc", index), and the Tensors (kept alive).
        self.sources: dict[int, tuple[str, int]] = {}
        self.tensors: list[Any] = []
        #: id(tensor map) -> (source, the map function's other arguments), and the maps.
        self.maps: dict[int, tuple[tuple[str, int], tuple[Any, ...]]] = {}
        self.map_objs: list[Any] = []
        self.overlaps: list[tuple[Any, ...]] = []
        self.launches: list[tuple[Any, ...]] = []
        #: id(Tensor) -> its address, for tensors the call did not receive or
        #: allocate but that live as long as the program (a workspace nobody
        #: reads, :meth:`fixed_tensor`): constants of the plan. Kept alive.
        self.fixed: dict[int, int] = {}
        self.fixed_objs: list[Any] = []
        #: Per allocation: (shape, strides, dtype code, device) of a CUDA torch
        #: output while libtorch's C functions are on (``torch_c_codes``), else None.
        self.alloc_meta: list[tuple[Any, ...] | None] = []
        #: `f(plans, key)` stores a plan the function made itself (gemm.matmul's
        #: hand-written variants launch outside ``_tensors``) in the native
        #: table: the call's replay when the recording makes no plan.
        self.native_plan: Callable[[Any, Any], None] | None = None

    def index(self, obj: Any) -> int | None:
        """The position of `obj` among the call's values (by identity), or None."""
        src = self._source(obj)
        return src[1] if src is not None and src[0] == "in" else None

    def _source(self, obj: Any) -> tuple[str, int] | None:
        for i, v in enumerate(self.values):
            if v is obj:
                return ("in", i)
        for i, (a, _, _) in enumerate(self.allocs):
            if a is obj:
                return ("alloc", i)
        return None

    def tensor(self, t: Any) -> None:
        src = self._source(t.obj)
        if src is None or not t.on_gpu:
            self.ok = False
            return
        self.sources[id(t)] = src
        self.tensors.append(t)

    def alloc(self, obj: Any, again: Callable[[Any], tuple[Any, int]] | None, like: Any) -> None:
        """`again(the call's object in like's place)` makes another output."""
        src = self.sources.get(id(like))
        if again is None or src is None:
            self.ok = False
            return
        self.allocs.append((obj, again, src))
        self.alloc_meta.append(_torch_meta(obj))

    def fixed_tensor(self, t: Any) -> None:
        """`t` lives at a fixed address for the program's life (the caller
        keeps it): a plan passes that address as a constant."""
        self.fixed[id(t)] = t.ptr
        self.fixed_objs.append(t)

    def tensor_map(self, m: Any, t: Any, params: tuple[Any, ...]) -> None:
        src = self.sources.get(id(t))
        if src is None:
            self.ok = False
            return
        self.maps[id(m)] = (src, params)
        self.map_objs.append(m)

    def overlap(self, out: Any, reads: list[Any], extents: list[tuple[int, int, str]]) -> None:
        """`extents`: (start, end, name) in bytes from each tensor's address,
        `out` first, as ``_tensors.check_overlap`` computed them."""
        srcs = [self.sources.get(id(t)) for t in [out, *reads]]
        if None in srcs:
            self.ok = False
            return
        self.overlaps.append((srcs, extents))

    def launch(
        self, kernel: Any, grid: Any, block: Any, shared: int, stream: Any, args: list[Any]
    ) -> None:
        descs: list[Any] = []
        for a in args:
            # Tensors and maps by identity (both are kept alive by the recording).
            if id(a) in self.sources:
                descs.append(("ptr", self.sources[id(a)]))
            elif id(a) in self.maps:
                descs.append(("map", *self.maps[id(a)]))
            elif id(a) in self.fixed:
                descs.append(("const", self.fixed[id(a)]))
            elif type(a) in (int, float, bool) or a is None:
                descs.append(("const", a))
            else:  # a DeviceArray or another object: provenance unknown
                self.ok = False
                return
        self.launches.append((kernel, grid, block, shared, stream, descs))

    def plan(self, result: Any) -> _Plan | None:
        """The plan of this call, or None when it cannot be replayed."""
        if not self.ok or not self.launches:
            return None
        # A constant equal to a tensor's address would be stale on another call.
        addresses = {t.ptr for t in self.tensors}
        for launch in self.launches:
            for d in launch[5]:
                if d[0] == "const" and type(d[1]) is int and d[1] in addresses:
                    return None
        items = result if type(result) is tuple else (result,)
        # Each result is an argument, a new output or None (an absent gradient).
        out = [("none", 0) if r is None else self._source(r) for r in items]
        if None in out:
            return None
        return _Plan(self, out, type(result) is tuple)


class _Plan:
    """A recorded call, replayed with new addresses. Sources are indices into
    the call's values followed by its new outputs (None: a None result)."""

    __slots__ = ("alloc_meta", "allocs", "launches", "n", "overlaps", "result", "tuple_result")

    def __init__(self, rec: _Recording, result: list[Any], tuple_result: bool) -> None:
        n = self.n = len(rec.values)

        def at(src: tuple[str, int]) -> int:
            return src[1] if src[0] == "in" else n + src[1]

        self.allocs = [(again, at(src)) for _, again, src in rec.allocs]
        self.alloc_meta = rec.alloc_meta
        self.overlaps = [([at(x) for x in srcs], extents) for srcs, extents in rec.overlaps]
        self.result = [None if src[0] == "none" else at(src) for src in result]
        self.tuple_result = tuple_result
        self.launches = []
        for kernel, grid, block, shared, stream, descs in rec.launches:
            launcher = kernel.prepare(grid, block, shared or None, stream)
            template = [d[1] if d[0] == "const" else None for d in descs]
            # (position, source, map geometry or None for a plain address)
            subs = [
                (i, at(d[1]), _Geometry(d[2]) if d[0] == "map" else None)
                for i, d in enumerate(descs)
                if d[0] != "const"
            ]
            self.launches.append((launcher, template, subs))

    def __call__(self, values: tuple[Any, ...], ptrs: list[int | None]) -> Any:
        objs: list[Any] = list(values)
        addr: list[Any] = list(ptrs)
        for again, like in self.allocs:
            o, p = again(objs[like])
            objs.append(o)
            addr.append(p)
        for srcs, extents in self.overlaps:
            base, (o0, o1, _) = addr[srcs[0]], extents[0]
            for j, (r0, r1, name) in zip(srcs[1:], extents[1:], strict=True):
                p = addr[j]
                if base + o0 < p + r1 and p + r0 < base + o1:
                    raise ArgumentError(f"argument 'out': overlaps argument '{name}' in memory")
        for launcher, template, subs in self.launches:
            vals = list(template)
            for i, j, geometry in subs:
                vals[i] = addr[j] if geometry is None else _map(addr[j], geometry)
            launcher(*vals)
        got = [None if j is None else objs[j] for j in self.result]
        return tuple(got) if self.tuple_result else got[0]

    def insert_into(self, native: Any, key: Any) -> None:
        """Stores this plan in a ``CudaCallPlans`` under `key` (see
        crates/zyntax-python/src/cuda/plans.rs for the spec's form)."""
        allocs: list[tuple[Any, ...]] = []
        # The same allocations by cheaper means, where the extension has them.
        fast: list[tuple[Any, ...]] = []
        for again, like in self.allocs:
            # A torch allocation (``_tensors._allocator``) is made natively.
            torch_alloc = getattr(again, "torch_alloc", None)
            if torch_alloc is not None:
                allocs.append(("torch", like, *torch_alloc))
            else:
                allocs.append(("call", like, again))
            # Natively, a torch output in C order is made by the cheapest
            # call measured (H200, session 11 B1, us from Python):
            # torch.empty_like(like) 1.56 where that is the same allocation,
            # else torch.empty_strided(shape, strides, dtype=, device=) 1.72
            # prepared once, against like.new_empty(shape) 2.21 and
            # torch.empty(shape, dtype=, device=) 2.83.
            fast.append(allocs[-1])
            strided = getattr(again, "torch_strided", None)
            meta = self.alloc_meta[len(fast) - 1]
            if meta is not None and torch_c_codes:
                # Cheapest of all: at::empty_strided through libtorch's C
                # functions, with the recorded output's layout.
                fast[-1] = ("aten", like, meta)
            elif getattr(again, "torch_like", False):
                fast[-1] = ("like", like, sys.modules["torch"].empty_like)
            elif strided is not None:
                shape, strides, dtype, device = strided
                kwargs = {"dtype": dtype, "device": device}
                empty = sys.modules["torch"].empty_strided
                fast[-1] = ("args", like, empty, (shape, strides), kwargs)
        launches = []
        for launcher, template, subs in self.launches:
            params: list[tuple[Any, ...]] = [("const", v) for v in template]
            for i, j, geometry in subs:
                if geometry is None:
                    params[i] = ("ptr", j)
                else:
                    params[i] = ("map", j, functools.partial(_map, geometry=geometry))
            launches.append((launcher, params))
        overlaps = [(list(srcs), list(extents)) for srcs, extents in self.overlaps]
        rest = (overlaps, launches, list(self.result), self.tuple_result)
        if fast != allocs:
            try:
                native.insert(key, self.n, fast, *rest)
                return
            except ArgumentError:  # an extension without the kind (or "aten" turned off)
                pass
        native.insert(key, self.n, allocs, *rest)


# ---------------------------------------------------------------- tensor maps


class _RawView:
    """Device memory described by address and geometry only (it owns nothing:
    a map built from it stays valid for any tensor at that address with that
    geometry, and keeps no tensor alive)."""

    def __init__(
        self, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], typestr: str
    ) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": 3,
        }


class _Geometry:
    """A map's arguments besides its address, hashed by identity: a plan's
    replay looks its maps up by (address, geometry object) without hashing
    the nested tuples again."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args


_maps: dict[tuple[int, _Geometry], Any] = {}


def _map(ptr: int, geometry: _Geometry) -> Any:
    m = _maps.get((ptr, geometry))
    if m is None:
        if len(_maps) >= 256:
            _maps.clear()
        m = _maps[(ptr, geometry)] = tensor_map_at(ptr, *geometry.args)
    return m


@functools.lru_cache(maxsize=256)
def tensor_map_at(
    ptr: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    typestr: str,
    box: tuple[int, ...],
    swizzle: str,
    dtype: Any,
) -> Any:
    """The tiled tensor map of the memory at `ptr` with this geometry (bytes
    strides): a pure function of its arguments, so a cached map is the same
    map whichever tensor lives there now."""
    from zyntax import cuda

    view = cuda.from_cuda_array_interface(_RawView(ptr, shape, strides, typestr))
    return cuda.TensorMap.tiled(view, list(box), swizzle=swizzle, dtype=dtype)


# ---------------------------------------------------------------- the decorator


def planned(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with a plan per call key (see the module documentation)."""
    if _CallPlans is None:
        return _planned_py(fn)
    watch_module_of(fn)
    miss = object()
    native = _CallPlans(miss, lambda: _torch_info())  # looked up late: tests patch it
    _tables.append(native)
    lookup = native.lookup
    local = _local

    def slow(*args: Any, **kwargs: Any) -> Any:
        """A call that missed: run it as written, recording it."""
        if local.rec is not None:  # inside another call's recording: run it as written
            return fn(*args, **kwargs)
        key = native.key(args, kwargs)
        if key is None:
            return fn(*args, **kwargs)
        values = args + tuple(kwargs.values()) if kwargs else args
        keep = lambda p: p.insert_into(native, key)  # noqa: E731
        store = lambda f: f(native, key)  # noqa: E731
        return _record(fn, args, kwargs, values, key.addresses, keep, store)

    if hasattr(native, "set_slow"):
        # The table is the function: a hit is one native call, no Python frame.
        native.set_slow(slow, local)
        functools.update_wrapper(native, fn)
        native.plans = native
        return native  # type: ignore[no-any-return]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:  # an extension without set_slow
        if local.rec is None:
            got = lookup(args, kwargs)
            if got is not miss:
                return got
        return slow(*args, **kwargs)

    call.plans = native  # type: ignore[attr-defined]
    return call


def _record(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    values: tuple[Any, ...],
    ptrs: list[int | None],
    keep: Callable[[_Plan], None],
    store: Callable[[Callable[[Any, Any], None]], None] | None = None,
) -> Any:
    """Runs `fn` recording what it does; `keep(plan)` when it makes one,
    else `store(native_plan)` when the function left one (native tables only)."""
    rec = _Recording(values, fn)
    tensors = [id(v) for v, p in zip(values, ptrs, strict=True) if p is not None]
    shared = len(set(tensors)) != len(tensors)
    if shared:
        # One tensor passed twice (q = k): the recording could not tell
        # which argument a kernel argument came from. No plan; a plan made
        # from distinct tensors replays such calls correctly.
        rec.ok = False
    _local.rec = rec
    try:
        result = fn(*args, **kwargs)
    finally:
        _local.rec = None
    plan = rec.plan(result)
    if plan is not None:
        keep(plan)
    elif rec.native_plan is not None and store is not None and not shared:
        store(rec.native_plan)
    return result


def _planned_py(fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`planned` replaying in Python (an extension without ``CudaCallPlans``)."""
    plans: dict[Any, _Plan] = {}
    _tables.append(plans)
    watch_module_of(fn)

    def keep(key: Any) -> Callable[[_Plan], None]:
        def put(plan: _Plan) -> None:
            if len(plans) >= PLAN_CACHE_SIZE:
                plans.clear()
            plans[key] = plan

        return put

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        values = args + tuple(kwargs.values()) if kwargs else args
        got = call_key(values) if _local.rec is None else None
        if got is None:
            return fn(*args, **kwargs)
        key = (len(args), tuple(kwargs), got[0])
        try:
            plan = plans.get(key)
        except TypeError:  # an unhashable value: the full path
            return fn(*args, **kwargs)
        if plan is not None:
            return plan(values, got[1])
        return _record(fn, args, kwargs, values, got[1], keep(key))

    call.plans = plans  # type: ignore[attr-defined]
    return call
