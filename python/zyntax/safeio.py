"""Reading files zyntax did not necessarily write (cache entries, bundles) safely.

Only regular files of bounded size are read: never through a symlink, never
blocking on a FIFO, never from a device (``/dev/zero`` would not end). JSON
nesting is bounded before parsing, so a hostile file cannot exhaust the stack,
and every step is linear in the file's size, so none can stall a launch.
Every refusal (an unreadable file or directory included) is a
:class:`RejectedFile`, a :class:`~zyntax.errors.ZyntaxError`, saying why.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from zyntax.errors import ZyntaxError

#: Deepest JSON nesting accepted (zyntax's own files need at most 6).
MAX_JSON_DEPTH = 32
MAX_JSON_BYTES = 4 << 20


class RejectedFile(ZyntaxError):
    """A file was refused (unreadable, not a regular file, too large, malformed).

    A ZyntaxError, so a refusal that reaches the user is a typed zyntax error."""


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    A missing file raises RejectedFile with ``FileNotFoundError`` as its cause;
    any other OSError (permissions, a directory, an I/O error) is a
    RejectedFile with that error as its cause too.
    """
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise RejectedFile(f"{path.name}: {_why_unopened(path, e)}") from e
    try:
        return _read_fd(fd, path, limit)
    except OSError as e:  # fstat or read failed (EIO, EISDIR on odd filesystems, ...)
        raise RejectedFile(f"{path.name}: {e.strerror or e}") from e
    finally:
        os.close(fd)


def _why_unopened(path: Path, e: OSError) -> str:
    """Why ``os.open`` failed, in words; never raises (lstat of a file in an
    unreadable directory fails too)."""
    try:
        if path.is_symlink():
            return "a symlink"
    except OSError:
        pass
    return e.strerror or str(e)


def _read_fd(fd: int, path: Path, limit: int) -> bytes:
    """The bytes of the open regular file `fd`, at most `limit` of them."""
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


#: A JSON string, or an unterminated one running to the end of the text. It
#: always matches at a quote and never backtracks (the closing quote is
#: optional), so removing strings is linear in the text's length; a pattern
#: with a required closing quote retries from every escaped quote of an
#: unterminated string instead (quadratic: 40 KB of them took seconds).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _nesting(text: str) -> int:
    """The deepest bracket nesting of `text` outside JSON strings, in time
    linear in its length (the loops run in C). An unterminated string hides
    the brackets after it, which json.loads then never reaches either."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` before
    parsing; time linear in ``len(text)``."""
    if _nesting(text) > max_depth:
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
