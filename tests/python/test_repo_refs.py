"""The repository is self-contained: no file refers to paths outside it, and
the benchmark results follow the format documented in docs/performance.md. The
docs match the code: README's figures come from committed results, its index
lists every doc, and docs/kernels.md states ``@zyntax.kernel``'s signature."""

from __future__ import annotations

import ast
import collections
import inspect
import json
import re
import subprocess

import pytest

import zyntax
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


# ------------------------------------------------------------------ README's figures

_FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _results_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Results")
    return text[start : text.index("\n## ", start + 1)]


def _figures(text: str) -> list[str]:
    """The numbers in `text`, leaving out code spans (commits, kernel names) and link targets."""
    text = re.sub(r"`[^`]*`", " ", text)
    return _FIGURE.findall(re.sub(r"\]\([^)]*\)", "]", text))


def _measured_values() -> list[float]:
    """Every measured number of the committed results JSON: `results[].value` and `notes`."""
    values: list[float] = []
    for path in sorted((ROOT / "benches" / "results").glob("*.json")):
        doc = json.loads(path.read_text())
        values += [float(r["value"]) for r in doc["results"]]
        notes = doc.get("notes")
        if isinstance(notes, dict):
            values += [float(v) for v in notes.values() if isinstance(v, (int, float))]
    return values


def _measured(figure: str, values: list[float]) -> bool:
    """Whether some value rounds to `figure` (as printed, or in seconds from milliseconds)."""
    decimals = len(figure.partition(".")[2])
    x, tolerance = float(figure), 0.5 * 10**-decimals + 1e-9
    return any(abs(v * scale - x) <= tolerance for v in values for scale in (1.0, 1e-3))


def test_readme_results_tables_quote_committed_results() -> None:
    """Each figure of README's Results tables is a value in a committed benches/results
    JSON; a percentage is the ratio of two figures of its row."""
    values = _measured_values()
    unsourced = []
    for line in _results_section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[1]) <= {"-", " "}:
            continue
        measured = " | ".join(cells[1:])
        percents = set(re.findall(r"(\d+)\s*%", re.sub(r"`[^`]*`", " ", measured)))
        figures = _figures(measured)
        for f in figures:
            if f in percents:
                ratios = {
                    round(100 * float(a) / float(b))
                    for a in figures
                    for b in figures
                    if a != b and float(b) > 0
                }
                ok = int(f) in ratios
            else:
                ok = _measured(f, values)
            if not ok:
                unsourced.append(f"{f} in {cells[0]!r}")
    assert not unsourced, f"README figures in no committed results JSON: {unsourced}"


_FIGURE_WITH_UNIT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s*[A-Za-zµ]+|\u00d7|\s*%)?(?![\w.])")


def _flat(text: str) -> str:
    return " ".join(re.sub(r"`[^`]*`", " ", re.sub(r"\]\([^)]*\)", "]", text)).split())


def test_readme_results_prose_cites_its_figures() -> None:
    """A figure in the Results section's text, with its unit or the word after it
    ("175 GPU", "0.97 ms", "666 passed"), is in a doc the section cites."""
    section = _results_section()
    prose = _flat("\n".join(line for line in section.splitlines() if not line.startswith("|")))
    cited = set(re.findall(r"docs/[\w-]+\.md", section))
    assert cited
    docs = " ".join(_flat((ROOT / doc).read_text()) for doc in sorted(cited))
    figures = _FIGURE_WITH_UNIT.findall(prose)
    assert figures
    unsourced = [f for f in figures if not re.search(rf"(?<![\w.]){re.escape(f)}(?![\w.])", docs)]
    assert not unsourced, f"README figures that no cited doc states: {unsourced}"


def test_readme_documentation_index_lists_every_doc() -> None:
    text = (ROOT / "README.md").read_text()
    index = text[text.index("\n## Documentation") :]
    index = index[: index.index("\n## ", 1)]
    missing = [
        p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name})" not in index
    ]
    assert not missing, f"docs not in README's documentation index: {missing}"


# ------------------------------------------------------------------ @zyntax.kernel in the docs


def _documented_kernel_signature() -> ast.FunctionDef:
    text = (ROOT / "docs" / "kernels.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def kernel(" in b]
    assert len(blocks) == 1, "docs/kernels.md lists @zyntax.kernel's signature once"
    (node,) = ast.parse(blocks[0]).body
    assert isinstance(node, ast.FunctionDef)
    return node


def test_kernel_signature_in_the_docs_is_the_code() -> None:
    node = _documented_kernel_signature()
    sig = inspect.signature(zyntax.kernel)
    a = node.args
    assert not a.posonlyargs and not a.vararg and not a.kwarg
    positional = [(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.args]
    padded: list[ast.expr | None] = [None] * (len(a.args) - len(a.defaults))
    documented = zip(
        [*positional, *[(p, inspect.Parameter.KEYWORD_ONLY) for p in a.kwonlyargs]],
        [*padded, *a.defaults, *a.kw_defaults],
        strict=True,
    )
    got = [
        (
            p.arg,
            kind,
            ast.unparse(p.annotation) if p.annotation else inspect.Parameter.empty,
            ast.literal_eval(d) if d is not None else inspect.Parameter.empty,
        )
        for (p, kind), d in documented
    ]
    want = [(p.name, p.kind, p.annotation, p.default) for p in sig.parameters.values()]
    assert got == want
    assert node.returns is not None and ast.unparse(node.returns) == sig.return_annotation


def test_kernel_arguments_are_explained_once() -> None:
    """Each argument has one row in the table under the signature, and no other line of
    docs/kernels.md lists the decorator's arguments (the duplicates drifted apart)."""
    text = (ROOT / "docs" / "kernels.md").read_text()
    params = list(inspect.signature(zyntax.kernel).parameters)
    for p in params:
        assert len(re.findall(rf"^\| `{p}` \|", text, re.M)) == 1, p
    for call in re.findall(r"zyntax\.kernel\(([^)]*)\)", text):
        named = set(re.findall(r"(\w+)\s*=", call))
        assert len(named & set(params)) <= 2, f"a second listing of the signature: {call}"
