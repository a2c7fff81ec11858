#!/usr/bin/env bash
# One device call for the sm_90a GEMM (issue 14 item 1): installs the carried
# wheel (scripts/gpu_batch.sh none), runs its GPU tests, the ladder bench,
# benches/gemm.py on the square cases with both cluster sizes, and Nsight
# Compute on the full kernel and its cluster variant. Logs and JSON go to $OUT.
# Usage on the device, from the tree root (ZYNTAX_COMMIT=<sha> names the commit in the JSON):
#   OUT=... bash benches/gemm_ladder_device.sh [all | comma-separated tests,bench,gemm,ncu]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what="${1:-all}"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
has() { [[ "$what" == all || ",$what," == *",$1,"* ]]; }
bash scripts/gpu_batch.sh none >"$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site ZYNTAX_PTXAS=/tmp/zyntax-tools/ptxas PYTHONUNBUFFERED=1
head -2 "$OUT/device.txt"
if has tests; then
    timeout "${TESTS_S:-120}" python3 -m pytest -q -rfEs -p no:cacheprovider tests/python/gpu/test_gemm_sm90_gpu.py \
        tests/python/gpu/test_cluster_gpu.py 2>&1 | tee "$OUT/gemm_sm90_tests.log" | tail -25
fi
if has bench; then
    timeout "${BENCH_S:-150}" python3 benches/gemm_ladder.py --out-dir "$OUT" --dtypes "${LADDER_DTYPES:-bf16,f16}" \
        --sizes "${LADDER_SIZES:-8192,4096}" ${LADDER_STEPS:+--steps "$LADDER_STEPS"} 2>&1 | tee "$OUT/ladder.log" | tail -40
fi
if has gemm; then
    timeout "${GEMM_S:-150}" python3 benches/gemm.py --cases bf16_8192,fp16_8192,bf16_4096 --sm90-clusters 1,2 \
        --out-dir "$OUT" 2>&1 | tee "$OUT/gemm.log" | tail -30
fi
if has ncu && command -v ncu >/dev/null; then
    timeout "${NCU_S:-90}" ncu --kernel-name gemm_sm90 --launch-count 2 \
        --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --metrics "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio" \
        python3 benches/gemm_ladder.py --ncu >"$OUT/ncu.txt" 2>&1
    grep -E "gmma|Throughput|Duration|Stall|stall|Registers|Warp Cycles|Theoretical Occ|Achieved Occ|Cluster|Grid Size|issue_stalled" "$OUT/ncu.txt" | head -60
fi
