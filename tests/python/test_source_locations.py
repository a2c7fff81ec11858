"""Source locations end to end for ``@zyntax.kernel`` (issue 28 item 1): every
instruction the front-end emits carries the Python file:line:column of the
expression it came from, verifier errors name that place, the located
``.zir`` prints it, and PTX built with ``line_info=True`` has ``.loc`` lines
at those Python lines that ptxas accepts. Runs without a GPU (ptxas is
required, as in test_kernel_ptx.py)."""

from __future__ import annotations

import inspect
import random
import re
from pathlib import Path

import pytest

import test_kernel_fuzz as fuzz
import zyntax
from test_kernel_ptx import KERNELS, example
from zyntax import lang

#: A located instruction line of the printed HIR: `    <inst>  ; [file:]line:col`.
_LOCATED = re.compile(r"^    (?P<inst>.*?)  ; (?:(?P<file>.+):)?(?P<line>\d+):(?P<col>\d+)$")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZYNTAX_CACHE_DIR", str(tmp_path / "zcache"))


def _module_lines(mod: object) -> tuple[str, dict[int, str]]:
    """(file, {line: text}) of every zyntax function (kernels and the device
    functions they call) of an example module."""
    path = str(Path(inspect.getfile(mod)))  # type: ignore[arg-type]
    lines: dict[int, str] = {}
    for obj in vars(mod).values():
        if getattr(obj, "zyntax_role", None) is None or not hasattr(obj, "pyfunc"):
            continue
        src, first = inspect.getsourcelines(obj.pyfunc)
        lines.update({first + k: s for k, s in enumerate(src)})
    return path, lines


def _code_at(lines: dict[int, str], line: int, col: int) -> str:
    """The source text from (line, col): a location must point at code."""
    assert line in lines, f"line {line} is not in a zyntax function of the file"
    text = lines[line].rstrip("\n")
    assert 1 <= col <= len(text), (line, col, text)
    rest = text[col - 1 :]
    assert rest[:1].strip(), f"column {col} of line {line} is blank: {text!r}"
    return rest


@pytest.mark.parametrize(("mod", "name", "sig"), KERNELS, ids=[k[1] for k in KERNELS])
def test_every_instruction_carries_its_python_location(
    mod: str, name: str, sig: tuple | None
) -> None:
    module = example(mod)
    path, lines = _module_lines(module)
    text = getattr(module, name).hir(sig, located=True)
    assert f"\n; source: {path}\n" in text
    insts = [s for s in text.splitlines() if s.startswith("    ")]
    assert len(insts) > 10
    seen = set()
    for s in insts:
        m = _LOCATED.match(s)
        assert m is not None, f"no location on `{s.strip()}`"
        assert m["file"] is None, s  # all in the kernel's own file
        _code_at(lines, int(m["line"]), int(m["col"]))
        seen.add(int(m["line"]))
    # The instructions come from more than the def line: one per statement at least.
    assert len(seen) >= 3, seen


def test_every_instruction_of_random_control_flow_is_located(tmp_path: Path) -> None:
    """The fuzzer's programs (nested if/elif/else, for with both step signs,
    while, break, continue, augmented assignment, ternaries, short-circuit
    logic): every instruction, the joins' jumps and the loops' branches
    included, points at code of the program."""
    base = random.randrange(1 << 30)
    sig = (zyntax.Array[zyntax.i32, 1], zyntax.i32, zyntax.i32)
    for n in range(12):
        seed = base + n
        path = tmp_path / f"loc_{seed}.py"
        path.write_text(fuzz.program(seed))
        mod = fuzz.load(path, f"zyloc_{seed}")
        lines = dict(enumerate(path.read_text().splitlines(), start=1))
        insts = [s for s in mod.prog.hir(sig, located=True).splitlines() if s.startswith("    ")]
        assert len(insts) >= 6  # the three stores at least
        for s in insts:
            m = _LOCATED.match(s)
            assert m is not None and m["file"] is None, f"seed {seed}: `{s.strip()}`"
            code = _code_at(lines, int(m["line"]), int(m["col"]))
            assert not code.startswith("#"), (seed, s)


def test_locations_point_at_the_expression_of_the_op() -> None:
    @zyntax.kernel
    def scaled(x: zyntax.Array[zyntax.f32, 1], n: zyntax.i32):
        i = lang.grid(1)
        if i < n:
            x[i] = lang.sqrt(x[i]) * 2.0  # marker: ops
        lang.syncthreads()

    src = Path(__file__).read_text().splitlines()
    marker = 1 + next(k for k, s in enumerate(src) if s.endswith("# marker: ops"))
    text = scaled.hir(located=True)
    line = src[marker - 1]
    found = {}  # "<type> <op>" (or "store") -> column, for the marker line's instructions
    for s in text.splitlines():
        m = _LOCATED.match(s)
        if m and int(m["line"]) == marker:
            op = re.sub(r"^v\d+: (\S+) = (\S+) .*", r"\1 \2", m["inst"])
            found[op.split()[0] if op.startswith("store") else op] = int(m["col"])
    # Each op's column is where its Python expression starts.
    assert line[found["f32 sqrt"] - 1 :].startswith("lang.sqrt(x[i])"), (found, line)
    assert line[found["f32 mul"] - 1 :].startswith("lang.sqrt(x[i]) * 2.0"), (found, line)
    assert line[found["f32 load"] - 1 :].startswith("x[i]) * 2.0"), (found, line)
    assert line[found["store"] - 1 :].startswith("x[i] = "), (found, line)
    barrier = next(s for s in text.splitlines() if "barrier" in s)
    m = _LOCATED.match(barrier)
    assert m is not None and src[int(m["line"]) - 1].strip() == "lang.syncthreads()"


@pytest.mark.parametrize(
    ("arch", "needle", "says"),
    [
        ("sm_70", "lang.async_copy(buf, 0, x, 0, 16)", "cp.async needs sm_80"),
        ("sm_80", "lang.cluster_ctarank()", "needs sm_90"),
    ],
)
def test_a_verifier_error_names_the_file_line_and_column_of_the_op(
    arch: str, needle: str, says: str
) -> None:
    @zyntax.kernel
    def gated(x: zyntax.Array[zyntax.f32, 1], r: zyntax.Array[zyntax.u32, 1]):
        buf = lang.shared.array(64, zyntax.f32)
        lang.async_copy(buf, 0, x, 0, 16)
        lang.async_wait(0)
        r[0] = lang.thread_idx.x + lang.cluster_ctarank()
        x[0] = buf[1]

    assert ".target sm_90a" in gated.ptx(arch="sm_90a")  # where both ops exist
    with pytest.raises(zyntax.KernelError) as info:
        gated.ptx(arch=arch)
    e = info.value
    assert isinstance(e, zyntax.ZyntaxError)
    assert e.file == __file__ and e.line is not None and e.col is not None
    assert str(e).startswith(f"{e.file}:{e.line}:{e.col}: "), str(e)
    assert says in str(e)
    line = Path(__file__).read_text().splitlines()[e.line - 1]
    assert line[e.col - 1 :].startswith(needle), (e.col, line)


@pytest.mark.parametrize(("mod", "name", "sig"), KERNELS, ids=[k[1] for k in KERNELS])
def test_line_info_loc_lines_are_the_hir_locations_and_ptxas_accepts_them(
    mod: str, name: str, sig: tuple | None
) -> None:
    module = example(mod)
    path, lines = _module_lines(module)
    k = getattr(module, name)
    located = k.hir(sig, located=True)
    hir_lines = {int(m["line"]) for s in located.splitlines() if (m := _LOCATED.match(s))}
    # The functions' own lines (their def lines) head their code.
    def_lines = {int(x) for x in re.findall(r"\{  ; (\d+):\d+$", located, re.M)}
    ptx = k.ptx(sig, arch="sm_80", line_info=True)
    files = dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', ptx, re.M))
    assert list(files.values()) == [path], files
    locs = [
        (m.group(1), int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)", ptx, re.M)
    ]
    assert len(locs) > 5
    for f, line, col in locs:
        assert f in files
        if line == 0:  # LLVM's "no line" for code merged from several lines
            continue
        assert line in hir_lines | def_lines, (line, sorted(hir_lines), def_lines)
        if col == 0:  # a function's prologue: the subprogram's line, no column
            assert line in def_lines, (line, col)
            continue
        _code_at(lines, line, col)
    # Most of the kernel's lines with instructions survive into the PTX.
    ptx_lines = {line for _f, line, _c in locs if line}
    assert len(ptx_lines) >= len(hir_lines) // 2, (sorted(ptx_lines), sorted(hir_lines))
    assert zyntax.validate_ptx(ptx, "sm_80").cubin[:4] == b"\x7fELF"
    # line_info changes only the debug lines: the code is the same as without it.
    plain = k.ptx(sig, arch="sm_80")
    strip = re.compile(r"^\s*\.(loc|file)\b.*\n|^\$L__(func|tmp).*\n", re.M)
    assert _code(strip.sub("", ptx)) == _code(plain)


def _code(ptx: str) -> list[str]:
    """The instruction lines of `ptx` (no debug sections, labels or comments)."""
    body = ptx.split(".section")[0]
    return [s.strip() for s in body.splitlines() if s.strip() and not s.strip().startswith("//")]
