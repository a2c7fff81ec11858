"""The target table: every arch zyntax compiles for, and what it knows about each.

The facts live in Rust (``crates/zyntax-hir/src/arch.rs``, ``target_table``)
and are read here once; this module is their only Python form, so the
runtime, the compiler, the kernel cache and the front-ends agree::

    >>> from zyntax import targets
    >>> targets.DEFAULT_ARCH, targets.DEFAULT_PTX["sm_90a"]
    ('sm_80', '8.0')
    >>> targets.ARCHS["sm_90a"].arch_specific, targets.arch_for_capability(9, 0)
    (True, 'sm_90a')

See docs/lowering.md, "Targets".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zyntax import _native
from zyntax.errors import ArgumentError

__all__ = [
    "ARCHS",
    "DEFAULT_ARCH",
    "DEFAULT_PTX",
    "PTX_VERSIONS",
    "ArchInfo",
    "arch_for_capability",
    "check_arch",
    "default_arch_of",
    "has_feature",
]


@dataclass(frozen=True)
class ArchInfo:
    """One row of the target table."""

    name: str
    compute_capability: tuple[int, int]
    #: Code for it runs on exactly its compute capability only (``sm_90a``).
    arch_specific: bool
    #: The PTX ISA version emitted unless the module asks for another.
    ptx_version: str
    #: The oldest PTX ISA version whose ``.target`` accepts the arch.
    min_ptx_version: str
    #: The gated HIR features the arch has at ``ptx_version`` (docs/lowering.md).
    features: tuple[str, ...]
    max_shared_bytes: int
    max_blocks_per_sm: int
    max_threads_per_sm: int


def _row(r: dict[str, Any]) -> ArchInfo:
    major, minor = r["compute_capability"]
    return ArchInfo(
        name=r["name"],
        compute_capability=(int(major), int(minor)),
        arch_specific=bool(r["arch_specific"]),
        ptx_version=r["ptx_version"],
        min_ptx_version=r["min_ptx_version"],
        features=tuple(r["features"]),
        max_shared_bytes=int(r["max_shared_bytes"]),
        max_blocks_per_sm=int(r["max_blocks_per_sm"]),
        max_threads_per_sm=int(r["max_threads_per_sm"]),
    )


_TABLE: dict[str, Any] = _native.target_table()

#: Every arch, oldest first (``sm_90a`` after ``sm_90``).
ARCHS: dict[str, ArchInfo] = {r["name"]: _row(r) for r in _TABLE["archs"]}
#: The arch compiled for when none is named, the module declares no targets
#: and no device is known (``Arch::DEFAULT``).
DEFAULT_ARCH: str = _TABLE["default_arch"]
#: The PTX ISA version emitted per arch by default (``Arch::default_ptx``).
DEFAULT_PTX: dict[str, str] = {name: a.ptx_version for name, a in ARCHS.items()}
#: Every PTX ISA version the compiler can emit, oldest first.
PTX_VERSIONS: tuple[str, ...] = tuple(_TABLE["ptx_versions"])


def check_arch(arch: Any, what: str = "arch") -> str:
    """`arch` when it names an arch of the table, else an ArgumentError naming `what`."""
    if not isinstance(arch, str) or arch not in ARCHS:
        raise ArgumentError(
            f"argument '{what}': unknown arch {arch!r}; expected one of {', '.join(ARCHS)}"
        )
    return arch


def has_feature(arch: str, feature: str) -> bool:
    """Whether `arch` has the gated HIR `feature` (a name of
    :attr:`ArchInfo.features`, e.g. ``"wgmma"``) at its default PTX version;
    False for a name that is not an arch of the table (``"interp"``)."""
    info = ARCHS.get(arch)
    return info is not None and feature in info.features


def default_arch_of(module: Any) -> str:
    """The arch a module compiles for when none is named: its first declared
    target, else :data:`DEFAULT_ARCH` (as the ``zyntax compile`` command)."""
    declared = list(getattr(module, "targets", None) or [])
    return str(declared[0]) if declared else DEFAULT_ARCH


def arch_for_capability(major: int, minor: int) -> str:
    """The arch the runtime compiles for on a device of compute capability
    ``major.minor``: the arch-specific one on exactly its capability (9.0 gets
    ``sm_90a``: wgmma, setmaxnreg), else the newest portable arch at or below
    it (newer devices JIT its PTX forward). Below sm_70 an ArgumentError."""
    arch: str | None = _native.arch_for_capability(major, minor)
    if arch is None:
        raise ArgumentError(
            f"compute capability {major}.{minor} is older than {next(iter(ARCHS))}, "
            "the oldest arch zyntax compiles for"
        )
    return arch
