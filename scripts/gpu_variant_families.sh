#!/usr/bin/env bash
# Where a channels-last program loses to its NCHW twin (nineteenth session's question, for a
# one-GPU call): for each level-3 CNN, generate the search's variants on the device (no verify),
# then bench/program_ab.py times nchw-graph against graph (channels-last) in one process and sums
# each one's kernels by family.  torch.compile runs these convolutions NHWC at half our NCHW time
# (bench/results/2026-11-27-h100-breakdown-l3), yet our channels-last variants rarely win.
#   OUT=$OUT bash scripts/gpu_variant_families.sh [PROBLEM ...]   (carry .kb/kernelbench)
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
problems=("$@")
[ ${#problems[@]} -gt 0 ] || problems=(9_ResNet18 20_MobileNetV2 22_EfficientNetB0)
for p in "${problems[@]}"; do
  d=/tmp/vf/$p; mkdir -p "$d"; cp .kb/kernelbench/level3/$p.py "$d/"
  (cd "$d" && PYTHONPATH=/tmp/site_here timeout 200 python -P -m kernelstitch generate $p.py --no-verify \
     --variants 6 >gen.log 2>&1) || { echo "$p: generate failed"; tail -3 "$d/gen.log"; continue; }
  V=$d/.kernelstitch/$p/Model/variants
  PYTHONPATH=/tmp/site_here timeout 300 python -P bench/program_ab.py "$d/$p.py" nchw_graph=$V/nchw-graph/model_new.py \
    graph=$V/graph/model_new.py --out "$OUT/$p.json" | grep -A30 '"median_ms"' | grep -v top_kernels
  echo "$p done at $SECONDS s"
done
