"""The repository is self-contained: no file refers to paths outside it, and
the benchmark results follow the format documented in docs/performance.md."""

from __future__ import annotations

import collections
import json
import re
import subprocess

import pytest

from conftest import ROOT

# Spelled in pieces so that this file does not match itself.
_OUTSIDE = re.compile(
    "|".join([r"shared" + "/design", r"\.\./" + "shared", r"/work" + "/", "GPU" + "_RUNS"])
)


def _tracked_text_files() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [f for f in out.decode().split("\0") if f]


def test_no_file_refers_outside_the_repository() -> None:
    hits = []
    for f in _tracked_text_files():
        try:
            text = (ROOT / f).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                hits.append(f"{f}:{n}: {line.strip()}")
    assert not hits, "references to files outside the repository:\n" + "\n".join(hits)


def test_docs_link_targets_exist() -> None:
    """Relative links between the docs resolve (gpu-runs.md, performance.md#...)."""
    missing = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([\w./-]+\.\w+)(?:#[\w-]*)?\)", md.read_text()):
            if not (md.parent / target).exists():
                missing.append(f"{md.relative_to(ROOT)} -> {target}")
    assert not missing, missing


_ROW_KEYS = {"case", "impl", "metric", "value", "lower_is_better"}


@pytest.mark.parametrize(
    "path", sorted((ROOT / "benches" / "results").glob("*.json")), ids=lambda p: p.name
)
def test_bench_results_follow_the_documented_format(path: object) -> None:
    doc = json.loads(path.read_text())  # type: ignore[attr-defined]
    for key in ("bench", "device", "commit", "date", "results"):
        assert key in doc, f"missing {key!r}"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", doc["date"])
    impls: dict[str, set[str]] = collections.defaultdict(set)
    for row in doc["results"]:
        assert _ROW_KEYS <= set(row), row
        assert isinstance(row["value"], (int, float)) and isinstance(row["lower_is_better"], bool)
        impls[row["case"]].add(row["impl"])
    for case, names in impls.items():
        ours = {n for n in names if n.startswith("zyntax")}
        if ours:
            assert names - ours, f"case {case!r} has zyntax rows but no peer or peak row"
