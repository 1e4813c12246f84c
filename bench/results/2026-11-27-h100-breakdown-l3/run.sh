#!/usr/bin/env bash
# One nvidia-h100-x1 call (carry .ab): per-kernel-family GPU time of the original, torch.compile
# and our delivered variant (generated on the VM into .ab/, see RUN.md) for level-3 CNNs where
# our program still trails: ResNet18 (behind the original replayed from a CUDA graph) and
# SqueezeNet (behind torch.compile).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
v() { echo ".ab/$1/$1.py=.ab/$1/.kernelstitch/$1/Model/variants/$2/model_new.py"; }
PYTHONPATH=/tmp/site_here timeout 540 python -P bench/kernel_breakdown.py \
  "$(v 9_ResNet18 nchw-graph)" "$(v 18_SqueezeNet default)" "$(v 20_MobileNetV2 nchw-graph)" \
  --out "$OUT/breakdown.json" --calls 10 --top 12 | grep -E '"(problem|total_ms|graph_total_ms|kernel_ms|kernel_count)"|error'
echo "script used $SECONDS s"
