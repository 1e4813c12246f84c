#!/usr/bin/env bash
# Device call 1 (2026-11-24): softmax-design microbench, conv layout timings, Verifier GPU suite on HEAD.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
python -m pip install -q --no-deps .whl/execnet-*.whl .whl/pytest_xdist-*.whl >>"$OUT/install.log" 2>&1 || echo "no xdist"
timeout 150 .scratch/softmax_variants >"$OUT/mb.jsonl" 2>&1; echo "microbench rc=$? at $(( $(date +%s) - t0 )) s"
cat "$OUT/mb.jsonl"
timeout 150 python bench/microbench/conv_layout.py >"$OUT/conv.jsonl" 2>"$OUT/conv.err"; echo "conv rc=$? at $(( $(date +%s) - t0 )) s"
cat "$OUT/conv.jsonl"; tail -3 "$OUT/conv.err"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
left=$(( 560 - ($(date +%s) - t0) ))
timeout $left python -P -m pytest -q -p no:cacheprovider -n 4 tests/test_verifier_gpu.py >"$OUT/verifier_gpu.log" 2>&1
echo "verifier gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -6 "$OUT/verifier_gpu.log"
