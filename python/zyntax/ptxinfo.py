"""What a kernel's PTX and ptxas say about it: parameter layout, shared memory, resources.

Used by the PTX cache (``scripts/build_ptx_cache.py``) and by AOT bundles
(:mod:`zyntax.aot`) to describe kernels in their JSON, so a deployed loader
needs neither the compiler nor ptxas.
"""

from __future__ import annotations

import json
import re
from typing import Any

_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\w+)\s*\(([^)]*)\)", re.M)
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+(\w+)(?:\[(\d+)\])?")
_SHARED = re.compile(r"\.shared\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(\w+)(?:\[(\d+)\])?\s*;")
_PTX_BITS = {"pred": 1, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16}


def _ptx_type_bytes(ty: str) -> int:
    if ty in _PTX_BITS:
        return max(1, _PTX_BITS[ty] // 8)
    m = re.search(r"(\d+)$", ty)
    return int(m.group(1)) // 8 if m else 0


def _entry_bodies(ptx: str) -> dict[str, tuple[str, str]]:
    """Kernel name -> (parameter list text, body text up to the next entry)."""
    found = list(_ENTRY.finditer(ptx))
    out: dict[str, tuple[str, str]] = {}
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(ptx)
        out[m.group(1)] = (m.group(2), ptx[m.end() : end])
    return out


def _module_shared(ptx: str) -> dict[str, int]:
    """Module-scope ``.shared`` variables (name -> bytes), i.e. those outside every entry."""
    first = _ENTRY.search(ptx)
    head = ptx[: first.start()] if first else ptx
    out: dict[str, int] = {}
    for m in _SHARED.finditer(head):
        out[m.group(2)] = _ptx_type_bytes(m.group(1)) * int(m.group(3) or 1)
    return out


def kernel_layout(module: Any, name: str, ptx: str) -> dict[str, Any]:
    """Launch bounds, shared bytes and parameter layout of kernel ``name``."""
    doc = json.loads(module.to_json())
    func = next(f for f in doc["functions"] if f["name"] == name)
    kind = func["kind"]["kernel"]
    params_text, body = _entry_bodies(ptx).get(name, ("", ""))
    hir_types = [str(t) for t in module.signature(name)[0]]
    layout: list[dict[str, Any]] = []
    offset = 0
    for i, pm in enumerate(_PARAM.finditer(params_text)):
        elem = _ptx_type_bytes(pm.group(2))
        size = elem * int(pm.group(4) or 1)
        align = int(pm.group(1) or elem or 1)
        offset = (offset + align - 1) // align * align
        layout.append(
            {
                "index": i,
                "type": hir_types[i] if i < len(hir_types) else None,
                "ptx_type": "." + pm.group(2),
                "offset": offset,
                "size": size,
                "align": align,
            }
        )
        offset += size
    # Shared variables LLVM demoted into the entry, plus module-scope ones it uses.
    static_shared = sum(
        _ptx_type_bytes(m.group(1)) * int(m.group(3) or 1) for m in _SHARED.finditer(body)
    )
    static_shared += sum(
        n for var, n in _module_shared(ptx).items() if re.search(rf"\b{re.escape(var)}\b", body)
    )
    return {
        "max_threads": kind.get("max_threads"),
        "min_blocks": kind.get("min_blocks"),
        "max_registers": kind.get("max_registers"),
        "cluster": kind.get("cluster"),
        # The grid_sync lowering's counter (docs/lowering.md): a cooperative launch is needed.
        "grid_sync": "__zyntax_grid_sync" in body,
        "dynamic_shared_bytes": kind.get("shared_bytes", 0),
        "static_shared_bytes": static_shared,
        "param_bytes": offset,
        "params": layout,
    }


# ptxas -v: "Compiling entry function 'k' for 'sm_80'", "Function properties for k",
# "N bytes stack frame, N bytes spill stores, N bytes spill loads",
# "Used N registers, used N barriers, N bytes smem, N bytes cmem[0]".
_PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_PROPS = re.compile(r"Function properties for (\S+)")
_PTXAS_NUM = re.compile(r"(\d+) (bytes stack frame|bytes spill stores|bytes spill loads)")
_PTXAS_USED = re.compile(r"(\d+) (registers|barriers|bytes smem|bytes cmem\[0\])")
_PTXAS_FIELDS = {
    "bytes stack frame": "stack_bytes",
    "bytes spill stores": "spill_store_bytes",
    "bytes spill loads": "spill_load_bytes",
    "registers": "registers",
    "barriers": "barriers",
    "bytes smem": "shared_bytes",
    "bytes cmem[0]": "const_bytes",
}


def ptxas_resources(log: str) -> dict[str, dict[str, int]]:
    """Per-kernel resource usage from a ``ptxas -v`` log (kernel -> field -> value)."""
    out: dict[str, dict[str, int]] = {}
    current: str | None = None
    props_for: str | None = None
    for line in log.splitlines():
        if m := _PTXAS_ENTRY.search(line):
            current = m.group(1)
            out[current] = dict.fromkeys(_PTXAS_FIELDS.values(), 0)
            props_for = None
        elif m := _PTXAS_PROPS.search(line):
            props_for = m.group(1) if m.group(1) in out else None
        elif "stack frame" in line:
            if props_for is not None:
                for n, what in _PTXAS_NUM.findall(line):
                    out[props_for][_PTXAS_FIELDS[what]] = int(n)
            props_for = None
        elif "Used " in line and current is not None:
            for n, what in _PTXAS_USED.findall(line):
                out[current][_PTXAS_FIELDS[what]] = int(n)
    return out
