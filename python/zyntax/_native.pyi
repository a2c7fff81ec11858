# Hand-written stub for the Rust extension module (crates/zyntax-python).
# Keep in sync with src/lib.rs; checked by `python -m mypy.stubtest zyntax._native`.

from typing import Any

__all__ = [
    "CompileError",
    "CudaError",
    "InternalError",
    "LaunchError",
    "ParseError",
    "VerifyError",
    "ZyntaxError",
    "__version__",
    "build_info",
    "build_profile",
]

__version__: str
build_profile: str

def build_info() -> dict[str, Any]: ...

class ZyntaxError(Exception): ...
class VerifyError(ZyntaxError): ...
class ParseError(ZyntaxError): ...
class CompileError(ZyntaxError): ...
class CudaError(ZyntaxError): ...
class LaunchError(ZyntaxError): ...
class InternalError(ZyntaxError): ...
