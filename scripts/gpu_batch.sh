#!/usr/bin/env bash
# One batch of GPU work on a lent CUDA machine (see docs/gpu-runs.md):
# installs the wheel carried in .device/, runs every GPU test and the GPU
# benches, and writes logs and bench JSON under $OUT (default ./gpu-out).
# Usage on the device:  ZYNTAX_COMMIT=<sha> bash scripts/gpu_batch.sh [tests|tests1|tests2|benches|sanitize|all|pending_tests|pending_benches]
# (`pending_*`: only what no device has run yet, each part under 10 minutes: the split TMA
# groups and the TMA probe, the decode/split-K, cluster and attention-variant tests; then
# the decode and cluster GEMM cases, the attention variants and the saxpy variants.)
# (`sanitize` runs the example-kernel GPU tests under compute-sanitizer memcheck and
# racecheck; some GPU machines report "Device not supported", see docs/gpu-runs.md.)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what="${1:-all}"
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# --upgrade: on a machine still warm from an earlier call, pip --target keeps the
# old package (with only a warning), so the old native module would be tested.
python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .device/*.whl || exit 1
export PYTHONPATH=/tmp/site
# The carried wheel provides the native module; Python sources come from this tree,
# so a wheel built a few commits ago still tests the current package code.
find python/zyntax -name '*.py' -o -name '*.pyi' | while read -r f; do
    mkdir -p "/tmp/site/zyntax/$(dirname "${f#python/zyntax/}")"
    cp "$f" "/tmp/site/zyntax/${f#python/zyntax/}"
done
# Building AOT bundles (tests/python/gpu/test_aot_gpu.py, benches/aot.py) needs ptxas and
# nvFatbin: carry them as .device/ptxas.xz (xz -1 of the venv's ptxas) and
# .device/libnvfatbin.so.12 when the device has no CUDA toolkit.
if [[ -f .device/ptxas.xz ]]; then
    mkdir -p /tmp/zyntax-tools && xz -dc .device/ptxas.xz >/tmp/zyntax-tools/ptxas && chmod +x /tmp/zyntax-tools/ptxas
    export ZYNTAX_PTXAS=/tmp/zyntax-tools/ptxas
fi
[[ -f .device/libnvfatbin.so.12 ]] && export ZYNTAX_NVFATBIN="$PWD/.device/libnvfatbin.so.12"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import zyntax, zyntax.cuda as c; print('zyntax', zyntax.__version__, 'devices', c.device_count())" 2>&1 | tee -a "$OUT/device.txt"

if [[ "$what" == tests || "$what" == all ]]; then
    python3 -m pytest -q -rfEs -p no:cacheprovider -m gpu tests/gpu tests/python/gpu 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
fi
# The whole suite takes close to a device call's 10 minutes: `tests1` and `tests2` run
# alternate test files (sorted by path), about half of the time each.
if [[ "$what" == tests1 || "$what" == tests2 ]]; then
    part=$(( ${what#tests} - 1 ))
    mapfile -t files < <(find tests/gpu tests/python/gpu -name 'test_*.py' | sort | awk -v p="$part" 'NR % 2 == 1 - p')
    python3 -m pytest -q -rfEs -p no:cacheprovider -m gpu "${files[@]}" 2>&1 | tee "$OUT/gpu_$what.log" | tail -40
fi
if [[ "$what" == benches || "$what" == all ]]; then
    mkdir -p "$OUT/results"
    timeout 150 python3 benches/launch.py --out-dir "$OUT/results" 2>&1 | tail -15
    timeout 120 python3 benches/bandwidth.py --out-dir "$OUT/results" 2>&1 | tail -16
    ZYNTAX_BENCH_TRACE="$OUT/programs-trace.json" timeout 150 python3 benches/programs.py --out-dir "$OUT/results" 2>&1 | tail -16
    timeout 150 python3 benches/compile.py --out-dir "$OUT/results" --repeat 21 --slow-repeat 3 --straight-line 0 2>&1 | tail -20
    timeout 120 python3 benches/frontend.py --out "$OUT/results" 2>&1 | tail -12
    timeout 200 python3 benches/aot.py --out-dir "$OUT/results" 2>&1 | tail -30
    timeout 200 python3 benches/fusion.py --out-dir "$OUT/results" 2>&1 | tail -12
    timeout 200 python3 benches/tiling.py --out-dir "$OUT/results" 2>&1 | tail -12
    timeout 300 python3 benches/memory_bound.py --out-dir "$OUT/results" 2>&1 | tail -40
    timeout 300 python3 benches/attention.py --out-dir "$OUT/results" 2>&1 | tail -30
    timeout 400 python3 benches/gemm.py --ladder --sweep --out-dir "$OUT/results" 2>&1 | tail -60
    # Decode shapes: per-call host time and the tile config x split-K sweep.
    timeout 240 python3 benches/gemm_decode.py --quick --out-dir "$OUT/results" 2>&1 | tail -50
    for f in "$OUT"/results/gemm-*.json; do
        [[ -f "$f" && "$f" != *partial* ]] && python3 benches/plot_gemm.py "$f" "$OUT/gemm.png" 2>&1 | tail -2
    done
fi
if [[ "$what" == pending_tests ]]; then
    timeout 200 python3 scripts/tma_probe.py sanitize 2>&1 | tee "$OUT/tma_probe.log" | tail -120
    timeout 360 python3 -m pytest -q -rfEs -p no:cacheprovider tests/python/gpu/test_tma_gpu.py \
        tests/python/gpu/test_matmul_decode_gpu.py tests/python/gpu/test_gemm_sm90_gpu.py \
        tests/python/gpu/test_cluster_gpu.py tests/python/gpu/test_attention_sm90_gpu.py \
        tests/python/gpu/test_memory_bound_gpu.py 2>&1 | tee "$OUT/pending_tests.log" | tail -40
fi
if [[ "$what" == pending_benches ]]; then
    mkdir -p "$OUT/results"
    timeout 180 python3 benches/gemm.py --cases bf16_m16_n4096_k4096,bf16_m128_n4096_k4096,bf16_m16_n14336_k4096,bf16_8192,fp16_8192,bf16_4096 \
        --sm90-clusters 1,2 --out-dir "$OUT/results" 2>&1 | tail -30
    timeout 90 python3 benches/gemm_decode.py --quick --out-dir "$OUT/results" 2>&1 | tail -30
    timeout 220 python3 benches/attention.py --out-dir "$OUT/results" 2>&1 | tail -40
    ZYNTAX_BENCH_ONLY=saxpy_f32_256Mi timeout 60 python3 benches/memory_bound.py --out-dir "$OUT/results" 2>&1 | tail -12
fi
if [[ "$what" == sanitize || "$what" == all ]] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        timeout 200 compute-sanitizer --tool "$tool" --error-exitcode 3 --target-processes all \
            python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_examples_gpu.py \
            >"$OUT/sanitizer-$tool.log" 2>&1
        echo "compute-sanitizer $tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizer-$tool.log") clean summaries)"
        tail -3 "$OUT/sanitizer-$tool.log"
    done
fi
