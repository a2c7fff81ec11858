"""Reading files zyntax did not necessarily write (cache entries, bundles) safely.

Only regular files of bounded size are read: never through a symlink, never
blocking on a FIFO, never from a device (``/dev/zero`` would not end). JSON
nesting is bounded before parsing, so a hostile file cannot exhaust the stack.
Every refusal is a :class:`RejectedFile` saying why.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: Deepest JSON nesting accepted (zyntax's own files need at most 6).
MAX_JSON_DEPTH = 32
MAX_JSON_BYTES = 4 << 20


class RejectedFile(Exception):
    """A file was refused (not a regular file, too large, malformed)."""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    A missing file raises RejectedFile with ``FileNotFoundError`` as its cause.
    """
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        kind = "a symlink" if path.is_symlink() else e.strerror
        raise RejectedFile(f"{path.name}: {kind}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RejectedFile(f"{path.name}: not a regular file")
        if st.st_size > limit:
            raise RejectedFile(f"{path.name}: {st.st_size} bytes (limit {limit})")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:
            raise RejectedFile(f"{path.name}: grew past {limit} bytes while read")
        return data
    finally:
        os.close(fd)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` before parsing."""
    depth = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if m.group() in "[{" else -1
        if depth > max_depth:
            raise RejectedFile(f"JSON nested deeper than {max_depth}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise RejectedFile(f"invalid JSON: {e}") from e


def read_json(path: str | os.PathLike[str], limit: int = MAX_JSON_BYTES) -> Any:
    try:
        text = read_bounded(path, limit).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RejectedFile(f"{Path(path).name}: not UTF-8") from e
    return loads_bounded(text)


def is_missing(e: BaseException) -> bool:
    """Whether a RejectedFile only says the file does not exist."""
    return isinstance(e.__cause__, FileNotFoundError)
