#!/usr/bin/env bash
# One device call (asked as nvidia-h200 after nvidia-h100-x1 could not start; it ran on an H100;
# carry .ab): the graph key's host time and what it adds to each replay,
# for three level-3 CNNs' nchw-graph programs (generated on the VM into .ab/, see RUN.md), then the
# GPU tests of the CUDA-graph wrapper (running statistics under replay, TF32 recapture).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
start=$SECONDS
args=()
for p in 9_ResNet18 20_MobileNetV2 22_EfficientNetB0; do
  args+=(".ab/$p/$p.py=.ab/$p/.kernelstitch/$p/Model/variants/nchw-graph/model_new.py")
done
PYTHONPATH=/tmp/site_here timeout 420 python -P bench/graph_key_timing.py "${args[@]}" | tee "$OUT/graph_key.jsonl"
echo "timing done at $((SECONDS - start)) s"
PYTHONPATH=/tmp/site_here timeout $((560 - (SECONDS - start))) python -P -m pytest -q -rfE -p no:cacheprovider -m gpu \
  tests/test_batch_norm_gpu.py -k "running_statistics or tf32" 2>&1 | tail -15 | tee "$OUT/tests.log"
echo "script used $((SECONDS - start)) s"
