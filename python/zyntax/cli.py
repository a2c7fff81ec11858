"""Entry point of the ``zyntax`` console script.

The command itself is implemented in Rust (crate ``zyntax-cli``) and reached
through the native module so that the pip-installed command and the cargo-built
binary behave identically. One case stays in Python: ``zyntax compile
kernels.py`` compiles the ``@zyntax.kernel`` functions of a Python file, which
needs the Python front-end (:func:`zyntax.frontend.aot.compile_file`); so do
``zyntax compile --emit cubin|fatbin`` (AOT bundles, which use nvFatbin from
Python) and ``zyntax cache ...`` (:mod:`zyntax.commands`).

The command compiles in a forked worker process, so that an abort inside LLVM
or ptxas on hostile input ends as one ``error:`` line and status 1, not as a
death by signal (docs/cli.md, "Untrusted input").
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from zyntax import _native, targets
from zyntax.commands import EXIT_ERROR, EXIT_USAGE, OneLineParser

# Options of ``zyntax compile`` (Rust) that take a value: skipped when looking
# for the input file, so ``-o out.py`` is not mistaken for one.
_VALUE_OPTIONS = frozenset(
    {
        "--backend",
        "--arch",
        "--emit",
        "--cpu",
        "--features",
        "--ptx",
        "--opt",
        "-o",
        "--output",
        "--kernel",
        "--grid",
        "--block",
        "--shared",
        "--seed",
        "--device",
    }
)


def _compile_input(args: Sequence[str]) -> str | None:
    """The input of a ``compile`` command line, or None for other commands."""
    if not args or args[0] != "compile":
        return None
    it = iter(args[1:])
    for a in it:
        if a == "--":
            return next(it, None)
        if a in _VALUE_OPTIONS:
            next(it, None)
        elif not a.startswith("-") or a == "-":
            return a
    return None


def _python_parser() -> argparse.ArgumentParser:
    ap = OneLineParser(
        prog="zyntax compile",
        epilog="Exit status: as listed by `zyntax --help`.",
        description=(
            "Compile every fully annotated @zyntax.kernel of a Python file to PTX: "
            "<OUTPUT>/<kernel>.ptx plus <kernel>.json (parameter layout, arch, PTX version, "
            "source), or the PTX file itself when OUTPUT ends with .ptx and the file holds "
            "one kernel."
        ),
    )
    ap.add_argument("input", help="the Python file (kernels.py)")
    ap.add_argument(
        "--backend",
        default="nvptx",
        choices=["nvptx"],
        help="Python kernels compile to PTX only (default: nvptx)",
    )
    ap.add_argument(
        "--arch",
        default=targets.DEFAULT_ARCH,
        help=f"target arch (default: {targets.DEFAULT_ARCH})",
    )
    ap.add_argument(
        "-o",
        "--output",
        default=".",
        help="output directory, or a .ptx file for a single kernel (default: .)",
    )
    ap.add_argument(
        "--cache-layout",
        action="store_true",
        help="name outputs by content hash, as in ptx_cache/",
    )
    ap.add_argument(
        "--report",
        action="store_true",
        help="print what the tiler did with each kernel's lang.prange nests (docs/tiling.md)",
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="replace a .json file where the metadata goes even if zyntax did not write it "
        "(without it such a file is an error and nothing is written)",
    )
    return ap


def _compile_python(args: Sequence[str]) -> int:
    from zyntax.errors import ZyntaxError
    from zyntax.frontend import aot
    from zyntax.frontend.errors import KernelError

    ns = _python_parser().parse_args(list(args))
    out = Path(ns.output)
    if out.exists() and out.resolve() == Path(ns.input).resolve():
        print(
            f"error: -o {ns.output} names the input file; refusing to overwrite it", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        res = aot.compile_file(
            ns.input, ns.arch, ns.output, cache_layout=ns.cache_layout, overwrite=ns.force
        )
    except KernelError as e:
        # One line per problem, as the Rust command prints them (file:line:col first).
        if e.file is not None and e.line is not None:
            where = f"{e.file}:{e.line}:{e.col or 1}"
            inside = f" (in kernel '{e.kernel}')" if e.kernel else ""
            print(f"{where}: error: {e.message}{inside}", file=sys.stderr)
        else:
            print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except ZyntaxError as e:  # e.g. a .json output that is a user's file
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # a compile or I/O failure: one message, never a traceback
        print(f"{ns.input}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_ERROR
    for p in res.written:
        print(p)
    if ns.report:
        for name, lines in res.tiling.items():
            print(f"tiling of {name}:" + ("" if lines else " no prange nest"))
            for line in lines:
                print(f"  {line}")
    for name, why in res.skipped:
        print(f"skipped {name}: {why}", file=sys.stderr)
    return 0


#: Test hook, honoured by the worker only: abort as LLVM does on a fatal error.
TEST_ABORT_ENV = "ZYNTAX_WORKER_TEST_ABORT"


def _in_worker(rest: list[str]) -> int:
    """Runs the command in a forked child and waits; a child killed by a signal
    becomes one error line and status 1."""
    if not hasattr(os, "fork"):
        return _run(rest)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the caller's frames
        code = EXIT_ERROR
        try:
            if os.environ.get(TEST_ABORT_ENV) == "1":
                os.abort()
            code = _run(rest)
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else EXIT_ERROR
        except BaseException as e:  # one line, never a traceback
            print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "signal"
        print(
            f"error: the compiler worker process was killed by signal {sig} ({name}): "
            "the input makes LLVM or ptxas abort; please report it as a zyntax bug",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return os.waitstatus_to_exitcode(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the zyntax command line with ``argv`` (default: ``sys.argv[1:]``)."""
    return _in_worker(list(sys.argv[1:] if argv is None else argv))


def _run(rest: list[str]) -> int:
    # AOT bundles and the cache commands are Python (zyntax.commands).
    if rest[:1] == ["cache"] or rest[:2] == ["help", "cache"]:
        from zyntax import commands

        return commands.cache_command(rest[1:] if rest[0] == "cache" else ["--help"])
    if rest[:1] == ["compile"] and any(
        a in ("--emit=cubin", "--emit=fatbin") or (a == "--emit" and b in ("cubin", "fatbin"))
        for a, b in zip(rest, [*rest[1:], ""], strict=True)
    ):
        from zyntax import commands

        return commands.compile_bundle(rest[1:])
    inp = _compile_input(rest)
    if inp is not None and inp.endswith(".py"):
        return _compile_python(rest[1:])
    cli_main = getattr(_native, "cli_main", None)
    if cli_main is None:
        print(
            "zyntax: this build of the extension has no command-line driver "
            "(zyntax-cli was not compiled in)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    # The Rust side writes to the process's file descriptors directly.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        code: int = cli_main(["zyntax", *rest])
    except Exception as e:  # an internal error: one line, never a traceback
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
