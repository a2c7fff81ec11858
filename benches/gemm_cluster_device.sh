#!/usr/bin/env bash
# One device call for the sm_90a GEMM's cluster variant (issue 14): installs the
# carried wheel (scripts/gpu_batch.sh none), times the 1-block and 2-block
# kernels (benches/gemm_cluster.py) and runs Nsight Compute (full set) on one
# launch of each at 8192^3 bf16; GEMM=1 adds benches/gemm.py with both cluster sizes
# (cuBLAS and Triton in the same run). Logs and the ncu text pages go to $OUT.
# Usage on the device, from the tree root:
#   OUT=... [SIZES='8192 4096'] [GEMM=1] [NCU=0] bash benches/gemm_cluster_device.sh [tests]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
bash scripts/gpu_batch.sh none >"$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site ZYNTAX_PTXAS=/tmp/zyntax-tools/ptxas PYTHONUNBUFFERED=1
head -2 "$OUT/device.txt"
if [[ "${1:-}" == tests ]]; then
    timeout "${TESTS_S:-150}" python3 -m pytest -q -rfEs -p no:cacheprovider tests/python/gpu/test_gemm_sm90_gpu.py \
        tests/python/gpu/test_cluster_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
fi
for size in ${SIZES:-8192}; do
    timeout "${BENCH_S:-120}" python3 benches/gemm_cluster.py --size "$size" 2>&1 | tee -a "$OUT/cluster.log"
done
if [[ "${GEMM:-0}" == 1 ]]; then
    timeout "${GEMM_S:-150}" python3 benches/gemm.py --cases bf16_8192,fp16_8192,bf16_4096 --sm90-clusters 1,2 \
        --out-dir "$OUT" 2>&1 | tee "$OUT/gemm.log" | tail -30
fi
if [[ "${NCU:-1}" == 1 ]] && command -v ncu >/dev/null; then
    timeout "${NCU_S:-150}" ncu --set full -k regex:gemm_sm90 -c 2 -f -o "$OUT/ncu" \
        --metrics sm__cycles_active.max,sm__cycles_active.min,sm__ctas_launched.max,sm__ctas_launched.min \
        python3 benches/gemm_ladder.py --ncu >"$OUT/ncu_details.txt" 2>&1
    tail -3 "$OUT/ncu_details.txt"
    ncu -i "$OUT/ncu.ncu-rep" --page details >>"$OUT/ncu_details.txt" 2>&1
    ncu -i "$OUT/ncu.ncu-rep" --page raw --csv >"$OUT/ncu_raw.csv" 2>&1
    rm -f "$OUT/ncu.ncu-rep"  # at most 8 files come back; the text pages hold what is needed
    grep -E "Duration|Grid Size|Cluster Size|Compute \(SM\)|stalled" "$OUT/ncu_details.txt" | head -40
fi
rm -f "$OUT/install.log"
