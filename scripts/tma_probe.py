"""TMA probe for an sm_90 device (docs/gpu-runs.md, "What the H100 showed
about TMA": each case below produced one of its rows).

Each case runs in its own process (a TMA fault poisons the CUDA context):

- ``store_<variant>_<place>_<swizzle>``: a 2-D f32 `tma.store` of a 32 x 8
  box at a fixed place (inside, across the far edge, before the start),
  also with hand-edited PTX variants (no ``.tile``, a 32-bit shared address)
  to tell the instruction from the place;
- ``canary_<elem>_<inner>_<rows>_<swizzle>``: a load into a shared area
  pre-filled with -1, dumped 128 bytes per line, to see where the hardware
  writes a box narrower than its swizzle span;
- ``nstore_<elem>_<inner>_<rows>_<swizzle>``: a store of such a box, checked
  against rows a span apart and against dense rows;
- ``es<k>``: NaN-filled loads with element strides (``ES_CASES``), dumped
  next to the model with ``element_strides[0]`` honoured and ignored (needs a
  build that accepts ``element_strides[0] != 1``: one before ``f9d5906``);
- ``bf16cai``: what PyTorch's bf16 ``__cuda_array_interface__`` says.

Usage on the device after ``scripts/gpu_batch.sh none``:
``PYTHONPATH=/tmp/site python3 scripts/tma_probe.py [sanitize] [case-name prefixes]``."""

import os
import re
import subprocess
import sys
from math import prod

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests/python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def child(name):
    import test_tma as cpu
    import zyntax
    from zyntax import cuda

    if name.startswith("store"):
        # store_<variant>_<coordsname>_<mode>
        _, variant, where, mode = name.split("_")
        x = cpu.rand("f32", (20, 48))
        box = (32, 8)
        n = prod(box)
        img = cpu.rand("f32", (n,))
        coords = {
            "in0": [0, 0],
            "inmid": [16, 8],
            "right": [32, 16],
            "neg": [-4, -2],
            "negx": [-4, 4],
            "negy": [8, -2],
        }[where]
        want = cpu.model_store(x, img, box, coords, mode, None)
        m = cpu.store_module("f32", 2, None)
        ptx = zyntax.compile(m, backend="nvptx", arch="sm_90")
        if variant == "notile":
            ptx = ptx.replace("shared::cta.tile.bulk_group", "shared::cta.bulk_group")
        if variant == "u32":
            ptx = re.sub(r"\], \[(%rd\d+)\];", r"], [smem32];", ptx)
            ptx = ptx.replace(
                "// begin inline asm\n\tcp.async.bulk.tensor",
                "{ .reg .b32 smem32; cvt.u32.u64 smem32, %rd10;\n\tcp.async.bulk.tensor",
                1,
            )
            ptx = ptx.replace("[smem32];\n", "[smem32]; }\n", 1)
        dx = cuda.to_device(x)
        tm = cuda.TensorMap.tiled(dx, box, swizzle=mode)
        mod = cuda.load_module(ptx, hir=m)
        k = mod.kernel("store")
        k.launch(1, 128, tm, cuda.to_device(img), n, *coords, shared_mem=cpu.BOX_AT + img.nbytes)
        got = dx.to_host()
        ok = np.array_equal(got, want)
        print(name, "OK" if ok else f"MISMATCH {np.sum(got != want)} elems")
        return
    if name.startswith("canary"):
        # canary_<elem>_<innerelems>_<rows>_<mode>
        _, elem, inner, rows, mode = name.split("_")
        inner, rows = int(inner), int(rows)
        dt = cpu.NUMPY[elem]
        x = np.arange(64 * 32, dtype=np.float32).reshape(32, 64).astype(dt)
        box = (inner, rows)
        span = 4096
        ncan = span // x.itemsize
        mm = cpu.load_module(elem, 2)
        tm = cuda.TensorMap.tiled(cuda.to_device(x), box, swizzle=mode)
        out = cuda.to_device(np.full(ncan, 5, dt))
        k = cuda.load_hir(mm, arch="sm_90").kernel("load")
        k.launch(1, 128, tm, out, ncan, prod(box) * x.itemsize, 0, 0, shared_mem=cpu.BOX_AT + span)
        got = out.to_host().astype(np.float32)
        written = np.nonzero(got != -1)[0]
        print(
            name,
            "written elems:",
            len(written),
            "max index:",
            written.max() if len(written) else None,
        )
        rowlen = 128 // x.itemsize
        for r in range(min(24, ncan // rowlen)):
            seg = got[r * rowlen : (r + 1) * rowlen]
            print(
                f"  smem row {r:2d} ({r * 128:5d}B):",
                " ".join("." if v == -1 else str(int(v)) for v in seg),
            )
        return
    if name.startswith("es"):
        # es<k>: a NaN-filled f32 load with element strides (ES_CASES[k]) into a
        # canary-filled shared area, expecting `tx` bytes on the barrier; the
        # dump against the model with elementStrides[0] honoured and ignored.
        es, box, coords, tx = ES_CASES[int(name[2:])]
        x = np.arange(12 * 40, dtype=np.float32).reshape(12, 40)
        m = cpu.load_module("f32", 2)
        tm = cuda.TensorMap.tiled(cuda.to_device(x), box, element_strides=es, oob_fill="nan")
        n = 2 * tx // 4
        out = cuda.to_device(np.full(n, 5, np.float32))
        k = cuda.load_hir(m, arch="sm_90").kernel("load")
        k.launch(1, 128, tm, out, n, tx, *coords, shared_mem=cpu.BOX_AT + 4096)
        got = out.to_host()
        print(name, f"es={es} box={box} coords={coords} tx={tx}")
        print("  device:", " ".join(_fmt(v) for v in got))
        for label, e in (("honoured", es), ("es0 ignored", (1, es[1]))):
            want = cpu.model_load(x, box, coords, "none", e, fill=np.nan)
            print(f"  model ({label}):", " ".join(_fmt(v) for v in want))
        return
    if name.startswith("nstore"):
        # nstore_<elem>_<inner>_<rows>_<mode>: a store of a box narrower than
        # its swizzle span from a random shared image of rows x span bytes;
        # the tensor against the model (rows at span pitch) and against dense rows.
        _, elem, inner, rows, mode = name.split("_")
        box = (int(inner), int(rows))
        x = cpu.rand(elem, (16, 128))
        size = cpu.shared_bytes(list(box), x.itemsize, mode)
        img = cpu.rand(elem, (size // x.itemsize,))
        coords = [32, 4]
        dx = cuda.to_device(x)
        tm = cuda.TensorMap.tiled(dx, box, swizzle=mode)
        k = cuda.load_hir(cpu.store_module(elem, 2, None), arch="sm_90").kernel("store")
        k.launch(1, 128, tm, cuda.to_device(img), img.size, *coords, shared_mem=cpu.BOX_AT + size)
        got = dx.to_host()
        want = cpu.model_store(x, img, box, coords, mode)
        dense = x.copy()
        for r in range(box[1]):
            for i in range(box[0]):
                o = int(cpu.swizzle(np.int64((r * box[0] + i) * x.itemsize), mode))
                dense[coords[1] + r, coords[0] + i] = img.view(np.uint8)[o : o + x.itemsize].view(
                    x.dtype
                )[0]
        print(
            name,
            "span pitch:",
            "OK" if np.array_equal(got, want) else f"MISMATCH {np.sum(got != want)}",
            "dense rows:",
            "OK" if np.array_equal(got, dense) else f"MISMATCH {np.sum(got != dense)}",
        )
        return
    if name.startswith("bf16cai"):
        import torch

        t = torch.zeros((2, 8), dtype=torch.bfloat16, device="cuda")
        print("torch", torch.__version__)
        try:
            print("  bf16 __cuda_array_interface__:", t.__cuda_array_interface__)
        except Exception as e:  # what torch raises instead
            print("  bf16 __cuda_array_interface__ raises", type(e).__name__, e)
        print("  bf16 __dlpack_device__:", t.__dlpack_device__())
        return
    raise SystemExit(f"unknown {name}")


#: (element_strides, box, coords, expected barrier bytes) of the es<k> cases on
#: a 12 x 40 f32 tensor; es0 is the failing device case with both byte counts.
ES_CASES = [
    ((2, 3), (16, 6), (32, -2), 128),
    ((2, 3), (16, 6), (32, -2), 64),
    ((1, 3), (16, 6), (32, -2), 128),
    ((2, 1), (8, 4), (36, 10), 128),
    ((1, 2), (8, 5), (4, 9), 96),
    ((4, 2), (16, 4), (0, 0), 128),
]


def _fmt(v):
    return "." if v == -1 else ("n" if v != v else str(int(v)))


def run(cmd, timeout=90):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out = r.stdout + r.stderr
        return r.returncode, out
    except subprocess.TimeoutExpired:
        return -9, "TIMEOUT"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "case":
        child(sys.argv[2])
        sys.exit(0)
    names = [f"store_plain_{w}_none" for w in ("in0", "inmid", "right", "neg", "negx", "negy")]
    names += ["store_plain_in0_128B", "store_notile_in0_none", "store_u32_in0_none"]
    names += [
        "canary_f32_16_16_128B",
        "canary_f32_32_8_128B",
        "canary_f32_8_8_64B",
        "canary_f16_32_8_128B",
        "canary_f32_16_8_64B",
    ]
    names += [f"es{k}" for k in range(len(ES_CASES))] + ["bf16cai"]
    names += ["nstore_f32_16_8_128B", "nstore_f32_8_8_64B", "nstore_f16_16_8_64B"]
    only = [a for a in sys.argv[1:] if a != "sanitize"]
    names = [n for n in names if not only or any(n.startswith(o) for o in only)]
    for nme in names:
        rc, out = run([sys.executable, __file__, "case", nme], 20 if nme.startswith("es") else 90)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        print(f"== {nme}: rc={rc}")
        print("\n".join(lines[-30:]))
    # sanitizer on the first failing store
    if len(sys.argv) > 1 and sys.argv[1] == "sanitize":
        rc, out = run(
            [
                "compute-sanitizer",
                "--tool",
                "memcheck",
                sys.executable,
                __file__,
                "case",
                "store_plain_in0_none",
            ],
            120,
        )
        print("== sanitizer:", rc)
        print(out[-3000:])
