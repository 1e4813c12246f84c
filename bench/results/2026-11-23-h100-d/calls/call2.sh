#!/usr/bin/env bash
# Device call 2: microbench of the new reduction kernels + codegen GPU tests.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
for b in .scratch/mb/bin/*; do
  case "$b" in *.log) continue;; esac
  timeout 60 "$b" >>"$OUT/mb2.jsonl" 2>&1 || echo "{\"failed\": \"$b\"}" >>"$OUT/mb2.jsonl"
done
cat "$OUT/mb2.jsonl"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 240 python -m pytest -q -x tests/test_codegen_gpu.py >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/codegen_gpu.log"; grep -E "FAILED|Error" "$OUT/codegen_gpu.log" | head
