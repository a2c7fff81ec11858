"""Runs a group of device cases in a child pytest process. A kernel that
faults leaves the process's CUDA context unusable and one that waits on a
wrong barrier phase hangs; in a child (with a timeout) either fails its group
alone instead of every GPU test after it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_case_group(cases: Path, expr: str, group: str, timeout: int) -> None:
    """Runs the cases of `cases` selected by the pytest ``-k`` expression
    `expr`; fails with the child's output tail unless they all passed (none
    skipped)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "--tb=short", "-p", "no:cacheprovider"]
    try:
        r = subprocess.run(
            [*cmd, str(cases), "-k", expr],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"{group}: timed out (a kernel waiting forever?)\n{out[-3000:]}")
    tail = (r.stdout + r.stderr)[-6000:]
    assert r.returncode == 0, f"{group}:\n{tail}"
    assert " passed" in r.stdout and " skipped" not in r.stdout, tail
