"""``zyntax.safeio`` against hostile files (issue 29 items 3 and 4): every
read is linear in the file's size, and every refusal, an unreadable file or
directory included, is a ``RejectedFile``, which is a ``ZyntaxError``."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

import zyntax
from zyntax import safeio
from zyntax.safeio import RejectedFile, loads_bounded, read_bounded, read_json

CORPUS = Path(__file__).resolve().parents[1] / "fuzz_corpus"
#: Kept small in the corpus; the tests repeat its escaped quotes to 300 KB.
ESCAPED_QUOTES = CORPUS / "json_escaped_quotes_unterminated.json"


def _escaped_quotes(size: int) -> str:
    """The corpus input (an unterminated string of ``\\"``) grown to `size` characters."""
    seed = ESCAPED_QUOTES.read_text()
    head, sep, _ = seed.partition('\\"')
    assert sep and seed == head + '\\"' * ((len(seed) - len(head)) // 2)
    return head + '\\"' * ((size - len(head)) // 2)


def test_escaped_quotes_parse_in_linear_time() -> None:
    """40 KB of escaped quotes took 8 s (the string regex retried from every
    escaped quote: quadratic); 300 KB must take well under a second. The
    sizes grow, so the old code fails at the first (in seconds, not hours)."""
    for size in (40_000, 300_000, safeio.MAX_JSON_BYTES):
        text = _escaped_quotes(size)
        for doc in (text, text + '"}'):  # unterminated, and terminated: a 300 KB value
            start = time.perf_counter()
            try:
                got = loads_bounded(doc)
                assert doc.endswith('"}') and got == {"name": '"' * ((len(doc) - 12) // 2)}
            except RejectedFile as e:
                assert not doc.endswith('"}') and "unterminated" in str(e).lower()
            took = time.perf_counter() - start
            assert took < 1.5, f"{size} bytes took {took:.2f} s"


def test_escaped_quotes_file_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    for size in (40_000, 300_000):
        path.write_text(_escaped_quotes(size))
        start = time.perf_counter()
        with pytest.raises(RejectedFile, match=r"(?i)unterminated"):
            read_json(path)
        assert time.perf_counter() - start < 1.5


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "[]" * 200_000,
        '"' * 300_000,
        '{"a": ' * 50_000,
        '["\\\\' + "\\" * 100_000,
        '["' + "[" * 100_000,
    ],
)
def test_other_hostile_json_is_refused_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(RejectedFile):
        loads_bounded(text)
    assert time.perf_counter() - start < 1.5


def test_nesting_is_counted_outside_strings_only() -> None:
    doc = {"s": '[[[{{"\\' * 50, "t": ["]]]", "\\", '"'], "u": [[[[1]]]]}
    assert loads_bounded(json.dumps(doc)) == doc
    with pytest.raises(RejectedFile, match="nested deeper than 4"):
        loads_bounded(json.dumps([[[[["x]]]]"]]]]]), max_depth=4)
    assert loads_bounded(json.dumps([[[["x]]]]"]]]]), max_depth=4) == [[[["x]]]]"]]]]


def test_rejected_file_is_a_zyntax_error() -> None:
    assert issubclass(RejectedFile, zyntax.ZyntaxError)
    with pytest.raises(zyntax.ZyntaxError):
        loads_bounded("{")


def _fail(err: int) -> object:
    def fail(*args: object, **kwargs: object) -> object:
        raise OSError(err, os.strerror(err))

    return fail


def test_unreadable_directory_is_a_rejected_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file in a directory without search permission: ``open`` and the
    ``lstat`` behind the symlink check both fail with EACCES. The check's
    PermissionError escaped read_bounded (simulated: the tests may run as root,
    which permissions do not stop)."""
    path = tmp_path / "locked" / "entry.json"
    path.parent.mkdir()
    path.write_text("{}")
    with pytest.raises(RejectedFile, match=r"entry\.json: Permission denied") as info:
        with monkeypatch.context() as m:
            m.setattr(safeio.os, "open", _fail(errno.EACCES))
            m.setattr(safeio.Path, "lstat", _fail(errno.EACCES))
            read_json(path)
    assert isinstance(info.value.__cause__, PermissionError)
    assert not safeio.is_missing(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads through any permission")
def test_unreadable_directory_really(tmp_path: Path) -> None:
    path = tmp_path / "locked" / "entry.json"
    path.parent.mkdir()
    path.write_text("{}")
    path.parent.chmod(0)
    try:
        with pytest.raises(RejectedFile, match=r"entry\.json"):
            read_bounded(path, 100)
    finally:
        path.parent.chmod(0o700)


@pytest.mark.parametrize("where", ["fstat", "read"])
def test_io_errors_while_reading_are_rejected_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    path = tmp_path / "entry.json"
    path.write_text("{}")
    with pytest.raises(RejectedFile, match=r"entry\.json: Input/output error") as info:
        with monkeypatch.context() as m:
            m.setattr(safeio.os, where, _fail(errno.EIO))
            read_bounded(path, 100)
    assert isinstance(info.value.__cause__, OSError)


def test_missing_file_is_still_recognised(tmp_path: Path) -> None:
    with pytest.raises(RejectedFile) as info:
        read_json(tmp_path / "absent.json")
    assert safeio.is_missing(info.value)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "absent.json")
    with pytest.raises(RejectedFile, match="a symlink"):
        read_json(link)
