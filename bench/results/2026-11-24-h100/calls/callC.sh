#!/usr/bin/env bash
# Device call C (2026-11-24): where softmax_dim1_3d's bench time goes beyond its kernel (vs log_softmax).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
for p in softmax_dim1_3d log_softmax; do
  timeout 200 python bench/microbench/overhead.py .scratch/gen/.kernelstitch/$p/Model/model_new.py .scratch/gen/$p.py 2>&1 | tail -3
done
