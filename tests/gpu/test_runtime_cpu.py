"""CPU-only checks of the GPU test material: ptxas accepts every hand-written
PTX kernel the GPU tests load (no GPU needed; a missing ptxas fails). The
no-driver behaviour of zyntax.cuda is tested in tests/python/test_cuda_cpu.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import ptx_kernels
import pytest


def _ptxas() -> str:
    env = os.environ.get("ZYNTAX_PTXAS")
    if env:
        return env
    try:
        import nvidia.cuda_nvcc as m

        for p in m.__path__:
            cand = Path(p) / "bin" / "ptxas"
            if cand.exists():
                return str(cand)
    except ImportError:
        pass
    found = shutil.which("ptxas")
    if found:
        return found
    pytest.fail("ptxas not found: install nvidia-cuda-nvcc-cu12 or set ZYNTAX_PTXAS")


@pytest.mark.parametrize("name", sorted(ptx_kernels.ALL))
@pytest.mark.parametrize("arch", ["sm_70", "sm_90"])
def test_hand_written_ptx_assembles(name: str, arch: str, tmp_path: Path) -> None:
    src = tmp_path / f"{name}.ptx"
    src.write_text(ptx_kernels.ALL[name])
    r = subprocess.run(
        [_ptxas(), "-arch", arch, "-Werror", "-o", str(tmp_path / "k.cubin"), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
