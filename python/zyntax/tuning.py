"""Autotuning: pick the fastest launch configuration, measured on the device, and remember it.

``@zyntax.autotune(configs=[...], key=["n"], grid=...)`` over a ``@zyntax.kernel``::

    @zyntax.autotune(
        configs=[zyntax.Config(block=128), zyntax.Config(block=256, args={"per_thread": 2})],
        key=["n"],
        grid=lambda a, cfg: (a["n"] + cfg.block * cfg.args.get("per_thread", 1) - 1)
        // (cfg.block * cfg.args.get("per_thread", 1)),
    )
    @zyntax.kernel
    def scale(x: Array[f32, 1], y: Array[f32, 1], n: i32, per_thread: i32): ...

    scale(x, y, n)          # tuned on first use per key bucket, then the stored best

A :class:`Config` gives the block size (also the kernel's launch bounds, so the
compiler allots registers for it), kernel arguments by parameter name, and
optional ``max_registers`` / ``min_blocks``. For each new key bucket (every key
value rounded up to a power of two) on an exact arch:

1. every config is compiled and assembled with ptxas; a config that fails to
   compile is skipped and reported;
2. configs are pruned by the resource report: those that cannot launch
   (registers or shared memory over the device's limits), that spill when
   another does not, or whose occupancy is under ``min_occupancy_ratio`` of the
   best; the reasons are kept;
3. the rest are measured with CUDA events (``warmup`` launches, the median of
   ``reps``, inputs rotated over ``rotate`` copies so caches do not flatter
   anyone), starting with the best config of the nearest tuned bucket (warm
   start); a config whose launch fails is skipped and reported;
4. the record (best config, every time, the pruned and failed configs) is
   saved after each measurement to ``$ZYNTAX_CACHE_DIR/autotune/<kernel
   hash>.json``, keyed by (key bucket, exact arch, zyntax version): an
   interrupted run keeps its best so far and resumes where it stopped. The
   file carries the cache's MAC (:mod:`zyntax.frontend.cache`) and is checked
   field by field when read (:func:`check_db`); one that fails is ignored and
   the kernel re-tuned.

Tables can ship inside AOT bundles (``build_bundle(..., tuning=t.table())``);
:func:`zyntax.cuda.load_bundle` installs them, and a kernel with an installed
table never measures: a bucket it lacks uses the nearest one. ``ZYNTAX_AUTOTUNE=0``
turns measuring off everywhere (the first config is used where nothing is stored).

:class:`Tuner` is the same for kernels built with the HIR builder (DSLs):
``build(config)`` returns a ``zyntax.hir.Module``.

The search loop, pruning, buckets, the record schema and the signed tuning files
are the Rust crate ``zyntax-tune`` (``_native.tune_*``; docs/aot.md); this module
keeps what is Python: the decorator, argument binding, CUDA-event timing, the
cache directory and its secret, and the tables installed in this process.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from zyntax import _native
from zyntax.log import logger, progress
from zyntax.safeio import RejectedFile, is_missing

#: 2: records carry the cache's MAC and are checked field by field (1 is re-tuned).
DB_VERSION = 2


@dataclass(frozen=True)
class Config:
    """One candidate launch configuration."""

    block: int = 256
    args: dict[str, Any] = field(default_factory=dict)
    max_registers: int | None = None
    min_blocks: int | None = None

    def name(self) -> str:
        parts = [f"block={self.block}"]
        parts += [f"{k}={v}" for k, v in sorted(self.args.items())]
        if self.max_registers is not None:
            parts.append(f"max_registers={self.max_registers}")
        if self.min_blocks is not None:
            parts.append(f"min_blocks={self.min_blocks}")
        return ",".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "block": self.block,
            "args": dict(self.args),
            "max_registers": self.max_registers,
            "min_blocks": self.min_blocks,
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Config:
        return Config(
            int(d.get("block", 256)),
            dict(d.get("args") or {}),
            d.get("max_registers"),
            d.get("min_blocks"),
        )


# --------------------------------------------------------------------------- pruning


@dataclass(frozen=True)
class Limits:
    """What bounds occupancy on one SM."""

    registers_per_sm: int = 65536
    threads_per_block: int = 1024
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    shared_per_sm: int = 233472
    shared_per_block: int = 232448

    @staticmethod
    def of_device(device: int = 0) -> Limits:
        from zyntax import cuda

        d = cuda.Device(device)
        p = d.properties()
        cc = (int(d.compute_capability[0]), int(d.compute_capability[1]))
        threads = {(7, 5): 1024, (8, 6): 1536, (8, 7): 1536, (8, 9): 1536}.get(cc, 2048)
        return Limits(
            registers_per_sm=int(p.get("max_registers_per_block", 65536)),
            threads_per_block=int(d.max_threads_per_block),
            threads_per_sm=threads,
            blocks_per_sm=16 if cc[0] < 8 or cc in ((8, 6), (8, 9)) else 32,
            shared_per_sm=int(p.get("max_shared_per_sm", 233472)),
            shared_per_block=int(d.max_shared_per_block_optin),
        )

    def _native(self) -> tuple[int, int, int, int, int, int]:
        return (
            self.registers_per_sm,
            self.threads_per_block,
            self.threads_per_sm,
            self.blocks_per_sm,
            self.shared_per_sm,
            self.shared_per_block,
        )


#: registers, static shared bytes, spill stores, spill loads, threads, dynamic shared bytes.
_Resources = tuple[int, int, int, int, int, int]


def _resources(res: dict[str, int], threads: int, shared: int) -> _Resources:
    """ptxas' report and the launch shape as the native core takes them."""
    return (
        int(res.get("registers", 0)),
        int(res.get("shared_bytes", 0)),
        int(res.get("spill_store_bytes", 0)),
        int(res.get("spill_load_bytes", 0)),
        int(threads),
        int(shared),
    )


def occupancy(res: dict[str, int], threads: int, shared: int, lim: Limits) -> float:
    """Fraction of the SM's threads resident with ``res`` (ptxas resources) per thread."""
    return _native.tune_occupancy(_resources(res, threads, shared), lim._native())


def prune(
    candidates: dict[str, tuple[dict[str, int], int, int]],
    lim: Limits,
    min_occupancy_ratio: float = 0.25,
) -> tuple[list[str], dict[str, str]]:
    """Split configs (name -> (resources, threads per block, dynamic shared bytes)) into
    those worth measuring and those pruned (name -> why)."""
    keep, pruned = _native.tune_prune(
        [(n, _resources(*c)) for n, c in candidates.items()], lim._native(), min_occupancy_ratio
    )
    return keep, dict(pruned)


# --------------------------------------------------------------------------- records


def bucket(values: dict[str, Any]) -> dict[str, int]:
    """Key values rounded up to powers of two (non-integers hash to their repr)."""
    return _native.tune_bucket(
        [
            (
                k,
                v
                if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63
                else repr(v),
            )
            for k, v in values.items()
        ]
    )


def record_key(b: dict[str, int], arch: str, version: str) -> str:
    return _native.tune_record_key(b, arch, version)


def _dumps(x: Any, what: str) -> str:
    """``x`` as JSON for the native core; RejectedFile if it is not JSON (NaN included)."""
    try:
        return json.dumps(x, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise RejectedFile(f"{what} is not JSON: {e}") from e


def nearest(
    records: dict[str, Any], b: dict[str, int], arch: str, version: str | None
) -> dict[str, Any] | None:
    """The record of the closest bucket on ``arch`` (and ``version``, when given)."""
    found = _native.tune_nearest(_dumps(records, "records"), b, arch, version)
    return None if found is None else dict(json.loads(found))


_installed: dict[str, dict[str, Any]] = {}


def install_tables(tables: dict[str, Any], arch: str | None = None) -> None:
    """Make tuning tables (from a bundle's manifest) authoritative in this process."""
    for h, t in tables.items():
        if isinstance(t, dict) and isinstance(t.get("records"), dict):
            _installed.setdefault(h, {}).update(t["records"])


def db_path(kernel_hash: str) -> Any:
    from zyntax.frontend import cache

    return cache.root_dir() / "autotune" / f"{kernel_hash}.json"


#: Bounds of a tuning file (the native core's): larger or deeper ones are refused.
MAX_DB_BYTES = 4 << 20
MAX_RECORDS = 4096
MAX_CONFIGS = 4096
MAX_TEXT = 16 << 10


def _check(why: str | None) -> None:
    if why is not None:
        raise RejectedFile(why)


def check_config(name: str, d: Any) -> Config:
    """The Config a record stores under ``name``; raise RejectedFile unless well-formed
    and named as :meth:`Config.name` names it."""
    _check(_native.tune_check_config(name, _dumps(d, f"config {name[:80]!r}")))
    return Config.from_dict(d)


def check_record(rk: str, rec: Any) -> None:
    """Raise RejectedFile unless ``rec`` is a well-formed record stored under its own key."""
    _check(_native.tune_check_record(rk, _dumps(rec, f"record {rk[:120]!r}")))


def check_db(doc: Any) -> dict[str, Any]:
    """The tuning document ``doc`` if it is well-formed (every record checked; the
    ``mac`` field aside); raise RejectedFile saying what is wrong otherwise."""
    _check(_native.tune_check_db(_dumps(doc, "the tuning document")))
    return dict(doc)


def read_db(d: Any, kernel_hash: str, secret: bytes | None) -> dict[str, Any]:
    """The checked tuning document of ``kernel_hash`` in folder ``d`` (with ``secret``: it
    must carry this cache's MAC), ``mac`` removed; raise RejectedFile otherwise."""
    doc, why = _native.tune_read_db(str(d), kernel_hash, secret)
    if doc is None:
        if why is None:
            name = f"{kernel_hash}.json"
            raise RejectedFile(f"{name}: no such file") from FileNotFoundError(name)
        raise RejectedFile(why)
    return dict(json.loads(doc))


def load_db(kernel_hash: str) -> dict[str, Any]:
    """This kernel's tuning records; none if absent, untrusted, unsigned or malformed."""
    from zyntax.frontend import cache

    empty: dict[str, Any] = {"version": DB_VERSION, "records": {}}
    found = cache.usable_dir("autotune", create=False) if cache.KEY_RE.match(kernel_hash) else None
    if found is None:
        return empty
    try:
        return read_db(found[0], kernel_hash, found[1])
    except RejectedFile as e:
        if not is_missing(e):
            logger.warning("autotune: ignoring tuning file %s: %s", db_path(kernel_hash), e)
        return empty


def save_db(kernel_hash: str, doc: dict[str, Any]) -> None:
    """Write the records signed with the cache's key (nothing if the cache is untrusted)."""
    from zyntax.frontend import cache

    found = cache.usable_dir("autotune", create=True) if cache.KEY_RE.match(kernel_hash) else None
    if found is None:
        return
    d, secret = found
    try:
        _native.tune_write_db(str(d), kernel_hash, _dumps(doc, "the tuning document"), secret)
    except (OSError, RejectedFile) as e:
        logger.warning("autotune: could not save tuning records: %s", e)


# --------------------------------------------------------------------------- measuring


def measure(
    launch: Callable[[Sequence[Any]], None],
    arg_sets: Sequence[Sequence[Any]],
    warmup: int,
    reps: int,
) -> float:
    """Median kernel time in ms over ``reps`` event-timed launches, inputs rotated."""
    from zyntax import cuda

    for i in range(warmup):
        launch(arg_sets[i % len(arg_sets)])
    times = []
    start, end = cuda.Event(), cuda.Event()
    for i in range(reps):
        start.record()
        launch(arg_sets[(warmup + i) % len(arg_sets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_ms(end))
    return float(statistics.median(times))


def rotated(args: Sequence[Any], copies: int) -> list[list[Any]]:
    """``copies`` argument lists; arrays are copied to fresh device arrays, scalars shared."""
    import numpy as np

    from zyntax import cuda

    out: list[list[Any]] = []
    for _ in range(max(1, copies)):
        row: list[Any] = []
        for a in args:
            if isinstance(a, np.ndarray):
                row.append(cuda.to_device(a))
            elif isinstance(a, cuda.DeviceArray):
                d = cuda.empty(a.shape, a.dtype)
                d.copy_from(a)
                row.append(d)
            else:
                row.append(a)
        out.append(row)
    return out


@dataclass
class TuneReport:
    kernel: str
    record_key: str
    best: str | None
    times_ms: dict[str, float]
    pruned: dict[str, str]
    failed: dict[str, str]
    default_ms: float | None
    seconds: float
    source: str  # "measured", "database", "table", "default"

    @property
    def gain(self) -> float | None:
        """Default config's time over the best's (1.0: no gain)."""
        if self.best is None or self.default_ms is None:
            return None
        return self.default_ms / self.times_ms[self.best]


Prepared = tuple[dict[str, int], int, int, Callable[[Sequence[Any]], None]]


def tune(
    *,
    kernel: str,
    kernel_hash: str,
    configs: Sequence[Config],
    key_values: dict[str, Any],
    arch: str,
    version: str,
    prepare: Callable[[Config], Prepared],
    arg_sets: Callable[[], list[list[Any]]],
    warmup: int,
    reps: int,
    limits: Callable[[], Limits],
    min_occupancy_ratio: float,
) -> tuple[Config, TuneReport]:
    """The engine behind :func:`autotune` and :class:`Tuner`: the native search loop
    (``zyntax_tune::tune``) with this module's compiling, CUDA-event timing and saving."""
    cands = list({c.name(): c for c in configs}.values())
    t0 = time.perf_counter()
    launches: dict[int, Callable[[Sequence[Any]], None]] = {}
    sets: list[list[Any]] = []

    # Progress bars (ZYNTAX_PROGRESS), advanced one step per config compiled / measured.
    def bar(desc: str) -> Generator[int, None, None]:
        return cast(
            Generator[int, None, None], progress(itertools.count(), total=len(cands), desc=desc)
        )

    compiling, measuring = bar(f"zyntax: compiling {kernel}"), bar(f"zyntax: tuning {kernel}")

    def compile_one(i: int) -> _Resources:
        next(compiling)
        res, threads, shared, launch = prepare(cands[i])
        launches[i] = launch
        return _resources(res, threads, shared)

    def start() -> None:
        sets[:] = arg_sets()

    def measure_one(i: int) -> float:
        next(measuring)
        # Looked up at each call: tests interrupt a search by replacing `measure`.
        return measure(launches[i], sets, warmup, reps)

    def event(kind: str, name: str, detail: str) -> None:
        if kind == "measured":
            logger.info("autotune %s: %s: %.4f ms", kernel, name, float(detail))
        elif kind == "pruned":
            logger.info("autotune %s: pruned %s: %s", kernel, name, detail)
        else:
            logger.warning("autotune %s: config %s %s", kernel, name or "", detail)

    request = {
        "kernel": kernel,
        "configs": [c.as_dict() for c in cands],
        "bucket": bucket(key_values),
        "arch": arch,
        "version": version,
        "min_occupancy_ratio": min_occupancy_ratio,
        "measure": os.environ.get("ZYNTAX_AUTOTUNE", "1") not in ("0", "off", "no"),
    }
    table = _installed.get(kernel_hash)
    try:
        out = _native.tune_search(
            json.dumps(request),
            None if table is None else _dumps(table, "the installed tuning table"),
            json.dumps(load_db(kernel_hash)),
            compile_one,
            lambda: limits()._native(),
            start,
            measure_one,
            lambda doc: save_db(kernel_hash, json.loads(doc)),
            event,
        )
    finally:
        compiling.close()
        measuring.close()
    rk, source = out["record_key"], out["source"]
    if out["error"] is not None:
        from zyntax.errors import ZyntaxError

        raise ZyntaxError(out["error"])
    best = cands[out["best"]]
    if out["record"] is None:  # measuring is off
        return best, TuneReport(kernel, rk, best.name(), {}, {}, {}, None, 0.0, "default")
    rec = json.loads(out["record"])
    if source == "measured":
        logger.info("autotune %s: best for %s is %s", kernel, rk, best.name())
        return best, _report(kernel, rk, rec, source, t0, cands[0].name())
    return best, _report(kernel, rk, rec, source, t0)


def _report(
    kernel: str, rk: str, rec: dict[str, Any], source: str, t0: float, default: str | None = None
) -> TuneReport:
    times = {str(k): float(v) for k, v in rec.get("times_ms", {}).items()}
    d = times.get(default) if default else None
    return TuneReport(
        kernel,
        rk,
        rec.get("best"),
        times,
        dict(rec.get("pruned", {})),
        dict(rec.get("failed", {})),
        d,
        float(rec.get("seconds", time.perf_counter() - t0)),
        source,
    )


def _arch() -> str:
    from zyntax import cuda

    d = cuda.Device(0)
    major, minor = d.compute_capability
    return f"sm_{major}{minor}"


# --------------------------------------------------------------------------- front-ends


class AutotunedKernel:
    """A ``@zyntax.kernel`` whose launch configuration is tuned (see the module docs)."""

    def __init__(
        self,
        base: Any,
        configs: Sequence[Config],
        key: Sequence[str],
        grid: Callable[[dict[str, Any], Config], Any],
        warmup: int,
        reps: int,
        rotate: int,
        min_occupancy_ratio: float,
    ) -> None:
        if not configs:
            raise ValueError("autotune needs at least one config")
        self.base = base
        self.configs = list(configs)
        self.key = list(key)
        self.grid = grid
        self.warmup, self.reps, self.rotate = warmup, reps, rotate
        self.min_occupancy_ratio = min_occupancy_ratio
        self.params = list(inspect.signature(base.pyfunc).parameters)
        self.__name__ = base.__name__
        missing = [k for k in self.key if k not in self.params]
        if missing:
            raise ValueError(f"autotune key {missing} names no parameter of {base.__name__}")
        self._kernels: dict[str, Any] = {}
        self._best: dict[str, Config] = {}
        self.last_report: TuneReport | None = None
        try:
            src = inspect.getsource(base.pyfunc)
        except (OSError, TypeError):
            src = base.__qualname__
        h = hashlib.sha256(src.encode())
        h.update(json.dumps([c.as_dict() for c in self.configs], sort_keys=True).encode())
        h.update(json.dumps(self.key).encode())
        self.hash = h.hexdigest()

    def kernel_for(self, cfg: Config) -> Any:
        """The @zyntax.kernel compiled for ``cfg`` (its block is the launch bound)."""
        k = self._kernels.get(cfg.name())
        if k is None:
            from zyntax.frontend.kernel import Kernel

            k = Kernel(
                self.base.pyfunc,
                max_threads=cfg.block,
                max_registers=cfg.max_registers,
                min_blocks=cfg.min_blocks,
                device="gpu",
            )
            self._kernels[cfg.name()] = k
        return k

    def _full(self, args: Sequence[Any], cfg: Config) -> list[Any]:
        """The kernel's arguments: the caller's, in order, with the config's filled in."""
        given = iter(args)
        out = []
        for p in self.params:
            out.append(cfg.args[p] if p in cfg.args else next(given))
        return out

    def _named(self, args: Sequence[Any]) -> dict[str, Any]:
        free = [p for p in self.params if p not in self.configs[0].args]
        if len(args) != len(free):
            from zyntax.frontend.errors import KernelArgumentError

            raise KernelArgumentError(
                f"{self.__name__} takes {len(free)} argument(s) ({', '.join(free)}) "
                f"besides its tuned ones; {len(args)} given"
            )
        return dict(zip(free, args, strict=True))

    def best_config(self, *args: Any) -> Config:
        """The config for these arguments (tuned now if nothing is stored for them)."""
        from zyntax.frontend import pipeline

        named = self._named(args)
        kv = {k: named[k] for k in self.key}
        arch = _arch()
        rk = record_key(bucket(kv), arch, pipeline.zyntax_version())
        hit = self._best.get(rk)
        if hit is not None:
            return hit

        def prepare(cfg: Config) -> Prepared:
            from zyntax import compiler, ptxinfo

            k = self.kernel_for(cfg)
            full = self._full(args, cfg)
            v = k.variant(k.specs_for(full))
            target = pipeline.resolve_arch(None)
            ptx = pipeline.ptx_for(v, target)
            res = ptxinfo.ptxas_resources(compiler.validate_ptx(ptx, target).log)
            r = res.get(self.__name__, {})

            def launch(a: Sequence[Any]) -> None:
                # Built at the first launch: a bad grid is a launch failure of this config.
                k[self.grid({**named, **cfg.args}, cfg), cfg.block](*self._full(a, cfg))

            return r, cfg.block, 0, launch

        cfg, rep = tune(
            kernel=self.__name__,
            kernel_hash=self.hash,
            configs=self.configs,
            key_values=kv,
            arch=arch,
            version=pipeline.zyntax_version(),
            prepare=prepare,
            arg_sets=lambda: rotated(args, self.rotate),
            warmup=self.warmup,
            reps=self.reps,
            limits=lambda: Limits.of_device(0),
            min_occupancy_ratio=self.min_occupancy_ratio,
        )
        self.last_report = rep
        self._best[rk] = cfg
        return cfg

    def __call__(self, *args: Any) -> None:
        cfg = self.best_config(*args)
        named = self._named(args)
        g = self.grid({**named, **cfg.args}, cfg)
        self.kernel_for(cfg)[g, cfg.block](*self._full(args, cfg))

    def table(self) -> dict[str, Any]:
        """This kernel's tuning records, to ship in a bundle (``build_bundle(tuning=...)``)."""
        return {self.hash: {"kernel": self.__name__, "records": load_db(self.hash)["records"]}}


def autotune(
    configs: Sequence[Config],
    key: Sequence[str],
    grid: Callable[[dict[str, Any], Config], Any],
    *,
    warmup: int = 3,
    reps: int = 20,
    rotate: int = 3,
    min_occupancy_ratio: float = 0.25,
) -> Callable[[Any], AutotunedKernel]:
    """Decorator over a ``@zyntax.kernel``: see the module docs."""

    def wrap(k: Any) -> AutotunedKernel:
        if not hasattr(k, "pyfunc") or not hasattr(k, "variant"):
            raise TypeError("@zyntax.autotune goes above @zyntax.kernel")
        return AutotunedKernel(k, configs, key, grid, warmup, reps, rotate, min_occupancy_ratio)

    return wrap


class Tuner:
    """Builder-level autotuning: ``build(config)`` returns the config's ``zyntax.hir.Module``."""

    def __init__(
        self,
        name: str,
        configs: Sequence[Config],
        *,
        kernel: str,
        build: Callable[[Config], Any],
        grid: Callable[[dict[str, Any], Config], Any],
        key: Sequence[str] = (),
        warmup: int = 3,
        reps: int = 20,
        rotate: int = 3,
        min_occupancy_ratio: float = 0.25,
    ) -> None:
        self.name, self.configs, self.kernel = name, list(configs), kernel
        self.build, self.grid, self.key = build, grid, list(key)
        self.warmup, self.reps, self.rotate = warmup, reps, rotate
        self.min_occupancy_ratio = min_occupancy_ratio
        self.last_report: TuneReport | None = None
        h = hashlib.sha256(name.encode())
        for c in self.configs:
            h.update(build(c).to_zir().encode())
        self.hash = h.hexdigest()

    def best(self, args: Sequence[Any], key_values: dict[str, Any]) -> Config:
        """The best config for ``key_values``, measured launching ``args`` if not stored."""
        from zyntax import compiler, cuda, ptxinfo
        from zyntax.frontend import pipeline

        arch = _arch()
        target = cuda.device_arch(0)

        def prepare(cfg: Config) -> Prepared:
            m = self.build(cfg)
            ptx = pipeline.ptx_for_module(m, target)  # through the kernel cache
            res = ptxinfo.ptxas_resources(compiler.validate_ptx(ptx, target).log)
            k = cuda.load_module(ptx, hir=m).kernel(self.kernel)

            def launch(a: Sequence[Any]) -> None:
                k.launch(self.grid(dict(key_values), cfg), cfg.block, *a)

            # Static shared memory is in ptxas' resources; dynamic is the module's default.
            return res.get(self.kernel, {}), cfg.block, 0, launch

        cfg, rep = tune(
            kernel=self.name,
            kernel_hash=self.hash,
            configs=self.configs,
            key_values=dict(key_values),
            arch=arch,
            version=pipeline.zyntax_version(),
            prepare=prepare,
            arg_sets=lambda: rotated(args, self.rotate),
            warmup=self.warmup,
            reps=self.reps,
            limits=lambda: Limits.of_device(0),
            min_occupancy_ratio=self.min_occupancy_ratio,
        )
        self.last_report = rep
        return cfg

    def table(self) -> dict[str, Any]:
        return {self.hash: {"kernel": self.name, "records": load_db(self.hash)["records"]}}


def tuned_config(
    tables: dict[str, Any], kernel: str, arch: str, **key_values: Any
) -> Config | None:
    """From a bundle's tables: the stored config of ``kernel`` for these key values on ``arch``
    (the record of that bucket, of any version, else the nearest bucket's)."""
    found = _native.tune_tuned_config(
        _dumps(tables, "the tuning tables"), kernel, arch, bucket(key_values)
    )
    return None if found is None else Config.from_dict(json.loads(found))
