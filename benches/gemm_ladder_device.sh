#!/usr/bin/env bash
# One device call for the sm_90a GEMM (issue 14 item 1): installs the carried
# wheel (scripts/gpu_batch.sh none), runs its GPU tests, the ladder bench and
# Nsight Compute on the full kernel. Logs and JSON go to $OUT.
# Usage on the device, from the tree root (ZYNTAX_COMMIT=<sha> names the commit in the JSON):
#   OUT=... bash benches/gemm_ladder_device.sh [tests|bench|ncu|all]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what="${1:-all}"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
bash scripts/gpu_batch.sh none >"$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site ZYNTAX_PTXAS=/tmp/zyntax-tools/ptxas PYTHONUNBUFFERED=1
head -2 "$OUT/device.txt"
if [[ "$what" == tests || "$what" == all ]]; then
    timeout 100 python3 -m pytest -q -rfEs -p no:cacheprovider tests/python/gpu/test_gemm_sm90_gpu.py \
        2>&1 | tee "$OUT/gemm_sm90_tests.log" | tail -25
fi
if [[ "$what" == bench || "$what" == all ]]; then
    timeout 150 python3 benches/gemm_ladder.py --out-dir "$OUT" --dtypes bf16,f16 2>&1 | tee "$OUT/ladder.log" | tail -30
fi
if [[ "$what" == ncu || "$what" == all ]] && command -v ncu >/dev/null; then
    timeout 60 ncu --kernel-name gemm_sm90 --launch-count 1 \
        --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
        --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum \
        python3 benches/gemm_ladder.py --ncu >"$OUT/ncu.txt" 2>&1
    grep -E "gmma|Throughput|Duration|Stall|stall|Registers|Warp Cycles|Theoretical Occ|Achieved Occ" "$OUT/ncu.txt" | head -40
fi
