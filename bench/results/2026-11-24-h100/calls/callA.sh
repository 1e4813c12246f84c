#!/usr/bin/env bash
# Bench call A (2026-11-24): the strided-softmax special-value GPU test, then 9 of the 18 problems.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 150 python -P -m pytest -q -p no:cacheprovider tests/test_codegen_gpu.py -k "strided" >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu (strided) exit $? at $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/codegen_gpu.log"; grep -E "^FAILED|^ERROR" "$OUT/codegen_gpu.log" | head
left=$(( 585 - ($(date +%s) - t0) ))
KS_TIME_LIMIT=300 bash scripts/device_bench.sh $left --only softmax_dim1_3d,log_softmax,softmax_temperature,conv2d_bias_relu,layernorm_residual,logsumexp,reduce_sum,reduce_max,reduce_mean
echo "bench done at $(( $(date +%s) - t0 )) s"
grep -E "^\| [a-z_0-9]+ \| " "$OUT/bench/results.md"
