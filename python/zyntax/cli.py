"""Entry point of the ``zyntax`` console script.

The command itself is implemented in Rust (crate ``zyntax-cli``) and reached
through the native module so that the pip-installed command and the cargo-built
binary behave identically.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from zyntax import _native


def main(argv: Sequence[str] | None = None) -> int:
    """Run the zyntax command line with ``argv`` (default: ``sys.argv``)."""
    args = list(sys.argv if argv is None else ["zyntax", *argv])
    cli_main = getattr(_native, "cli_main", None)
    if cli_main is None:
        print(
            "zyntax: this build of the extension has no command-line driver "
            "(zyntax-cli was not compiled in)",
            file=sys.stderr,
        )
        return 2
    code: int = cli_main(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
