#!/usr/bin/env bash
# Device call 3 (2026-11-24): codegen GPU tests on the new kernels, then the bench of the four
# problems this session's kernels change (resumable: runs.sqlite comes back).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
python -m pip install -q --no-deps .whl/execnet-*.whl .whl/pytest_xdist-*.whl >>"$OUT/install.log" 2>&1 || echo "no xdist"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 230 python -P -m pytest -q -p no:cacheprovider -n 4 tests/test_codegen_gpu.py >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -2 "$OUT/codegen_gpu.log"; grep -E "^FAILED|^ERROR" "$OUT/codegen_gpu.log" | head -20
left=$(( 575 - ($(date +%s) - t0) ))
KS_TIME_LIMIT=200 bash scripts/device_bench.sh $left --only softmax_dim1_3d,log_softmax,softmax_temperature,conv2d_bias_relu
echo "bench done at $(( $(date +%s) - t0 )) s"
grep -E "^\| (softmax_dim1_3d|log_softmax|softmax_temperature|conv2d_bias_relu) " "$OUT/bench/results.md"
tail -5 "$OUT/bench/console.log"
