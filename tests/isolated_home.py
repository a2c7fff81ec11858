"""Keeps the test suites off the user's machine (imported by tests/python and
tests/gpu's conftest.py, before any test or subprocess runs).

``HOME``, ``XDG_CACHE_HOME`` and ``ZYNTAX_CACHE_DIR`` point into one temporary
directory of the test session, removed at exit, so that neither zyntax's
kernel cache (``~/.cache/zyntax``) nor a peer's (CUDA, CuPy, Triton) is written
in the real home. They are set in ``os.environ`` at import, so every subprocess
a test starts inherits them. Tests that need a cache of their own still set
``ZYNTAX_CACHE_DIR`` (``monkeypatch.setenv``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

#: Set once per test session (inherited by its subprocesses, and by the second
#: conftest of a run that collects both suites): the temporary root.
ROOT_ENV = "ZYNTAX_TEST_ROOT"
#: The home directory the session started with (what the tests must not touch).
REAL_HOME_ENV = "ZYNTAX_TEST_REAL_HOME"


def isolate() -> Path:
    """Points the home and the caches into the session's temporary root; returns it."""
    existing = os.environ.get(ROOT_ENV)
    if existing and Path(existing).is_dir():
        return Path(existing)
    root = Path(tempfile.mkdtemp(prefix="zyntax-tests-"))
    atexit.register(_remove, root, os.getpid())
    # Kept when inherited: a stale root in the environment must not make a temporary home "real".
    os.environ.setdefault(REAL_HOME_ENV, os.path.expanduser("~"))
    os.environ[ROOT_ENV] = str(root)
    home = root / "home"
    (home / ".cache").mkdir(parents=True)
    os.environ["HOME"] = str(home)
    os.environ["XDG_CACHE_HOME"] = str(home / ".cache")
    os.environ["ZYNTAX_CACHE_DIR"] = str(root / "zyntax-cache")
    return root


def _remove(root: Path, owner: int) -> None:
    # A forked child that exits through Python runs the parent's atexit hooks too.
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


def real_home() -> Path:
    """The home directory before :func:`isolate` moved it."""
    return Path(os.environ[REAL_HOME_ENV])
