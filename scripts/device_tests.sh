#!/usr/bin/env bash
# GPU test pass on a device machine (H100): install without deps (no registry there), then run the
# gpu-marked suites given as arguments, each under its own time limit; logs go to $OUT.
# Usage: scripts/device_tests.sh SECONDS tests/test_a.py [tests/test_b.py ...]
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
limit=$1; shift
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
# -P: the repo root must not shadow the installed package mapping (kernelstitch/ is a folder here).
for t in "$@"; do
  name=$(basename "$t" .py)
  start=$(date +%s)
  timeout "$limit" python -P -m pytest -q -p no:cacheprovider -m "gpu or nvcc" "$t" >"$OUT/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( $(date +%s) - start ))s: $(tail -1 "$OUT/$name.log")"
done
