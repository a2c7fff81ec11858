"""Hand-written PTX kernels that exercise the runtime independently of the
compiler, read from ``tests/data/ptx/`` (the one copy, shared with the Rust
runtime tests). ``test_runtime_cpu.py`` checks that ptxas accepts each of them
(no GPU needed); ``test_runtime_gpu.py`` runs them."""

from __future__ import annotations

from pathlib import Path

_DIR = Path(__file__).resolve().parents[1] / "data" / "ptx"

#: The PTX preamble every kernel file starts with (after its comments).
HEADER = """.version 7.0
.target sm_70
.address_size 64
"""

#: Kernel name -> PTX text (one module per kernel).
ALL = {p.stem: p.read_text() for p in sorted(_DIR.glob("*.ptx"))}

EMPTY = ALL["empty"]
SAXPY = ALL["saxpy"]
DYN_SMEM = ALL["reverse_smem"]
BOUNDED = ALL["bounded"]
IOTA3D = ALL["iota3d"]
