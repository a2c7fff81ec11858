"""The compiler worker process behind ``zyntax.compile(..., isolate=True)``.

Reads one request (JSON on standard input: the module as JSON and the
compile options), compiles it and writes one reply (JSON on standard output):
``{"result": {...}}`` or ``{"error": "<ZyntaxError subclass>", "message": ...}``.
If LLVM or ptxas aborts the process, the parent sees the signal and raises
`CompileError` instead of dying itself (see ``zyntax.compiler``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any

#: Test hook: a worker started with this variable set to 1 aborts before
#: compiling, as LLVM would on a fatal error. Only this process reads it.
TEST_ABORT_ENV = "ZYNTAX_WORKER_TEST_ABORT"


def serve(request: dict[str, Any]) -> dict[str, Any]:
    from zyntax import compiler, errors, hir

    try:
        module = hir.Module.from_json(request["module"])
        arch: str = request["arch"]
        ptx_version: str | None = request.get("ptx_version")
        opt_level: str | None = request.get("opt_level")
        line_info = bool(request.get("line_info", False))
        if request.get("emit") == "llvm":
            ir = compiler.compile(
                module,
                arch=arch,
                emit="llvm",
                ptx_version=ptx_version,
                opt_level=opt_level,
                line_info=line_info,
            )
            return {"result": {"llvm_ir": ir}}
        res = compiler.compile_ptx(
            module, arch, ptx_version=ptx_version, opt_level=opt_level, line_info=line_info
        )
        return {"result": dataclasses.asdict(res)}
    except errors.ZyntaxError as e:
        reply: dict[str, Any] = {"error": type(e).__name__, "message": str(e)}
        diags = getattr(e, "diagnostics", None)
        if diags is not None:
            reply["diagnostics"] = diags
        return reply


def main() -> int:
    request = json.load(sys.stdin)
    if os.environ.get(TEST_ABORT_ENV) == "1":
        os.abort()
    reply = serve(request)
    try:
        text = json.dumps(reply)
    except TypeError:  # diagnostics that do not serialise: the message says it all
        reply.pop("diagnostics", None)
        text = json.dumps(reply)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
