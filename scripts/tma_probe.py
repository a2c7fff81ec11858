"""TMA probe for an sm_90 device (docs/gpu-runs.md, "Known TMA failures").

Each case runs in its own process (a TMA fault poisons the CUDA context):

- ``store_<variant>_<place>_<swizzle>``: a 2-D f32 `tma.store` of a 32 x 8
  box at a fixed place (inside, across the far edge, before the start),
  also with hand-edited PTX variants (no ``.tile``, a 32-bit shared address)
  to tell the instruction from the place;
- ``canary_<elem>_<inner>_<rows>_<swizzle>``: a load into a shared area
  pre-filled with -1, dumped 128 bytes per line, to see where the hardware
  writes a box narrower than its swizzle span.

Usage on the device after ``scripts/gpu_batch.sh none``:
``PYTHONPATH=/tmp/site python3 scripts/tma_probe.py [sanitize]``."""

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
    from zyntax import cuda, hir

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
        t = hir.SCALARS[elem]
        dt = cpu.NUMPY[elem]
        x = np.arange(64 * 32, dtype=np.float32).reshape(32, 64).astype(dt)
        box = (inner, rows)
        span = 4096
        ncan = span // x.itemsize
        mm = hir.Module("canary", targets=["sm_90"])
        params = [hir.tensormap, hir.ptr("global", t), hir.u32, hir.u32, hir.i32, hir.i32]
        with mm.kernel("load", params) as b:
            tmap, out, nn, nbytes, *coords = b.params
            bar, sbox = cpu._smem(b, t)
            tid, bd = b.thread_idx(), b.block_dim()
            with b.for_range(tid, nn, bd, type=hir.u32) as i:
                b.store(b.ptr_add(sbox, i), b.const(-1, t))
            b.fence_proxy_async()
            first = b.eq(tid, 0)
            with b.if_(first):
                b.mbarrier_init(bar, 1)
                b.fence_mbarrier_init()
            b.barrier()
            with b.if_(first):
                b.mbarrier_arrive_expect_tx(bar, nbytes)
                b.tma_load(sbox, tmap, coords, bar)
            cpu._wait(b, bar)
            cpu._strided_copy(b, out, sbox, nn)
            b.ret()
        mm.verify()
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
    raise SystemExit(f"unknown {name}")


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
    for nme in names:
        rc, out = run([sys.executable, __file__, "case", nme])
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
