"""``zyntax compile --backend cuda``: compile for the device, run one kernel, print the results."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zyntax

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not zyntax.build_info()["cli"], reason="extension built without the cli feature"
    ),
]


def cuda_run(*args: str) -> str:
    p = subprocess.run(
        [sys.executable, "-m", "zyntax.cli", "compile", "--backend", "cuda", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert re.match(
        r"kernel \w+ on .+ \(sm_\d+a?\): grid \[.*\], block \[.*\]: [\d.]+ ms\n", p.stdout
    )
    return p.stdout


def buffer_line(out: str, index: int) -> tuple[list[float], float, str]:
    m = re.search(
        rf"^arg {index} \(\w+\[\d+\]\): \[(.*?)(?:, \.\.\.)?\] sum=(\S+) fnv1a64=(\w+)$", out, re.M
    )
    assert m is not None, out
    return [float(v) for v in m.group(1).split(", ")], float(m.group(2)), m.group(3)


def test_saxpy_values() -> None:
    out = cuda_run(
        "examples/saxpy.zir",
        "--grid",
        "4",
        "--block",
        "256",
        "1000",
        "3",
        "fill:1000:2",
        "range:1000",
    )
    first, total, _ = buffer_line(out, 4)
    want = 3 * 2 + np.arange(1000, dtype=np.float32)
    assert first == want[:8].tolist()
    assert total == float(want.sum())


def test_histogram_counts_every_element() -> None:
    # range:1024 of u8 wraps to 0..255 four times: every bin counts 4.
    out = cuda_run(
        "examples/histogram.zir",
        "--grid",
        "4",
        "--block",
        "256",
        "range:1024",
        "1024",
        "fill:256:0",
    )
    first, total, _ = buffer_line(out, 3)
    assert first == [4.0] * 8 and total == 1024
    # Random bytes (0..99): the bins still add up to n, and the seed reproduces the run.
    runs = [
        cuda_run(
            "examples/histogram.zir",
            "--grid",
            "8",
            "--block",
            "128",
            "--seed",
            seed,
            "rand:5000",
            "5000",
            "fill:256:0",
        )
        for seed in ("1", "1", "2")
    ]
    sums = [buffer_line(o, 3) for o in runs]
    assert all(s[1] == 5000 for s in sums)
    assert sums[0][2] == sums[1][2] != sums[2][2]


def test_block_sum_with_atomics() -> None:
    out = cuda_run(
        "examples/reduce_sum.zir", "--grid", "4", "--block", "256", "range:1024", "fill:1:0", "1024"
    )
    first, _, _ = buffer_line(out, 2)
    assert first == [float(np.arange(1024).sum())]


def test_explicit_arch_and_launch_errors() -> None:
    out = cuda_run(
        "--arch",
        "sm_70",
        "examples/saxpy.zir",
        "--grid",
        "1",
        "--block",
        "32",
        "32",
        "1",
        "range:32",
        "fill:32:1",
    )
    assert "(sm_70)" in out
    first, _, _ = buffer_line(out, 4)
    assert first == [1.0 + i for i in range(8)]
    # saxpy declares max_threads(256): a bigger block is refused in one line.
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "zyntax.cli",
            "compile",
            "--backend",
            "cuda",
            "examples/saxpy.zir",
            "--block",
            "512",
            "512",
            "1",
            "range:512",
            "range:512",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: cuda: "), p.stderr
