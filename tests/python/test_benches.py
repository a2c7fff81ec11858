"""Every bench script starts and parses its options on a machine without a
GPU: a renamed import or option in the package breaks a bench here, in CI,
instead of on the device (benches run only there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHES = sorted(
    # Modules the benches import (`_common`, `_gemm_programs`) are not scripts.
    p
    for p in (Path(__file__).resolve().parents[2] / "benches").glob("*.py")
    if not p.stem.startswith("_")
)


@pytest.mark.parametrize("script", BENCHES, ids=lambda p: p.stem)
def test_bench_starts(script: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage" in r.stdout.lower(), r.stdout[-500:]
