#!/usr/bin/env bash
# Runs every queued GPU job (.device/queue/<name>.sh, git-ignored) on a lent CUDA
# machine, one after another, each under its own time limit and with its own output
# folder $OUT/<name>/ (see docs/gpu-runs.md). Sets up what scripts/gpu_batch.sh sets
# up: the carried wheel on PYTHONPATH, this tree's Python sources, ptxas, nvFatbin.
# Usage on the device:  ZYNTAX_COMMIT=<sha> bash scripts/gpu_queue.sh [seconds per job] [seconds in all]
# Jobs run in name order; each gets at most its limit and what is left of the whole.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit="${1:-240}"
total="${2:-560}"
OUT="${OUT:-$PWD/gpu-out}"
# The jobs write under a scratch folder, packed into $OUT/queue.tar.gz at the end
# (also when the batch is cut short): a device call brings back only a few files.
final="$OUT"
mkdir -p "$final"
OUT="$(mktemp -d)"
trap 'tar -czf "$final/queue.tar.gz" -C "$OUT" . ; cp "$OUT/summary.txt" "$final/" 2>/dev/null' EXIT
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .device/*.whl || exit 1
export PYTHONPATH=/tmp/site
find python/zyntax -name '*.py' -o -name '*.pyi' | while read -r f; do
    mkdir -p "/tmp/site/zyntax/$(dirname "${f#python/zyntax/}")"
    cp "$f" "/tmp/site/zyntax/${f#python/zyntax/}"
done
if [[ -f .device/ptxas.xz ]]; then
    mkdir -p /tmp/zyntax-tools && xz -dc .device/ptxas.xz >/tmp/zyntax-tools/ptxas && chmod +x /tmp/zyntax-tools/ptxas
    export ZYNTAX_PTXAS=/tmp/zyntax-tools/ptxas
fi
[[ -f .device/libnvfatbin.so.12 ]] && export ZYNTAX_NVFATBIN="$PWD/.device/libnvfatbin.so.12"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
root="$PWD"
for job in .device/queue/*.sh; do
    [[ -f "$job" ]] || continue
    name="$(basename "$job" .sh)"
    mkdir -p "$OUT/$name"
    start=$SECONDS
    left=$((total - SECONDS - 15))
    if ((left < 30)); then
        echo "$name: skipped (the batch's time is spent)" | tee -a "$OUT/summary.txt"
        continue
    fi
    # A job may ask for its own limit with a line `# limit: <seconds>`.
    own="$(sed -n 's/^# limit: *\([0-9][0-9]*\).*/\1/p' "$job" | head -1)"
    lim="${own:-$limit}"
    (cd "$root" && OUT="$OUT/$name" timeout -k 10 "$((left < lim ? left : lim))" bash "$job") \
        >"$OUT/$name/log.txt" 2>&1
    echo "$name: exit $? in $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
done
