#!/usr/bin/env bash
# Call 3: the bench's last problems (resumed from the carried run store), then the verifier GPU
# tests that exercise this commit's comparison and mutation-check changes.
set -u
KS_TIME_LIMIT=300 bash scripts/device_bench.sh 330
rm -f "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
start=$(date +%s)
timeout 150 python -P -m pytest -q -p no:cacheprovider -m "gpu or nvcc" tests/test_verifier_gpu.py \
  -k "stale_memory or partial_output or mutates_input or honest_candidate" >"$OUT/gpu-tests-verifier.log" 2>&1
echo "verifier gpu subset rc=$? $(( $(date +%s) - start ))s: $(tail -1 "$OUT/gpu-tests-verifier.log")"
