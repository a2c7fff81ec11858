#!/usr/bin/env bash
# The main job: build zyntax (the Python extension, which carries the `zyntax`
# command), build every example kernel with the Python builder, verify it,
# write its .zir, compile it to PTX with `zyntax compile --backend nvptx
# --validate` (ptxas-checked), and run SAXPY on the reference interpreter
# against numpy.
# Outputs land in $CARGO_TARGET_DIR/demo (default target/demo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ZYNTAX_ROOT"
scripts/deps.sh
scripts/build-python.sh
activate_venv

target_dir="${CARGO_TARGET_DIR:-$ZYNTAX_ROOT/target}"
# The console script installed with the package (the same command as the
# cargo-built `zyntax` binary, run through zyntax._native.cli_main).
zyntax_bin="$ZYNTAX_VENV/bin/zyntax"
out="$target_dir/demo"
mkdir -p "$out"

for script in examples/*.py; do
    name="$(basename "$script" .py)"
    python "$script" >"$out/$name.zir"
    # The arch for a module with kernels: its first declared target, else the
    # command's own default, sm_80. Empty for host-only modules (no kernel).
    arch="$(python - "$name" <<'PY'
import sys
sys.path.insert(0, "examples")
m = __import__(sys.argv[1]).build()
print((m.targets[0] if m.targets else "sm_80") if m.kernels else "")
PY
)"
    if [[ -n "$arch" ]]; then
        "$zyntax_bin" compile --backend nvptx --arch "$arch" --validate \
            "$out/$name.zir" -o "$out/$name.ptx"
        printf '%-24s verified, %s PTX: %s (%d lines, ptxas ok)\n' \
            "$name" "$arch" "$out/$name.ptx" "$(wc -l <"$out/$name.ptx")"
    else
        printf '%-24s verified (host functions): %s\n' "$name" "$out/$name.zir"
    fi
done

printf '\n==> examples/saxpy.py as .zir\n'
cat "$out/saxpy.zir"
printf '\n==> its PTX (first lines)\n'
head -n 30 "$out/saxpy.ptx"

printf '\n==> SAXPY on the reference interpreter vs numpy\n'
python - <<'PY'
import sys

import numpy as np

sys.path.insert(0, "examples")
import saxpy
from zyntax import interp

n = 10_000
rng = np.random.default_rng(0)
x = rng.standard_normal(n, dtype=np.float32)
y = rng.standard_normal(n, dtype=np.float32)
want = (np.float64(2.5) * x + y).astype(np.float32)
stats = interp.launch(saxpy.build(), "saxpy", (n + 255) // 256, 256, n, 2.5, x, y)
err = float(np.max(np.abs(y - want)))
print(f"n={n}: max |zyntax - numpy| = {err:.3g} ({stats['instructions']} thread-instructions)")
assert err == 0.0
PY

# With an NVIDIA GPU and driver, also run the kernel there (one command: compile
# for the device's arch, launch, print the first elements and a checksum).
if python -c "from zyntax import cuda; raise SystemExit(0 if cuda.is_available() else 1)" 2>/dev/null; then
    printf '\n==> SAXPY on the GPU: zyntax compile --backend cuda\n'
    "$zyntax_bin" compile --backend cuda examples/saxpy.zir --kernel saxpy \
        --grid 40 --block 256 10000 2.5 range:10000 fill:10000:1
else
    printf '\n(no NVIDIA GPU here: skipping the GPU run; on a GPU machine this step runs\n'
    printf ' `zyntax compile --backend cuda examples/saxpy.zir --kernel saxpy ...`)\n'
fi
