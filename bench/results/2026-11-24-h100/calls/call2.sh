#!/usr/bin/env bash
# Device call 2 (2026-11-24): strided-softmax designs (fixed cluster gather, L2 two-pass), the
# coder's row kernels (new 32 x 256 plan vs the 16 x 512 one), codegen GPU tests, the fixed cheat.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
python -m pip install -q --no-deps .whl/execnet-*.whl .whl/pytest_xdist-*.whl >>"$OUT/install.log" 2>&1 || echo "no xdist"
timeout 100 .scratch/softmax_variants softmax_dim1_3d >"$OUT/mb.jsonl" 2>&1; echo "strided rc=$?"
for b in .scratch/rowbin/*; do timeout 30 "$b" >>"$OUT/mb.jsonl" 2>&1 || echo "{\"failed\": \"$b\"}" >>"$OUT/mb.jsonl"; done
timeout 60 .scratch/softmax_variants log_softmax 2>&1 | grep -E "t256_v8_c1|memcpy" >>"$OUT/mb.jsonl"
cat "$OUT/mb.jsonl"; echo "microbench done at $(( $(date +%s) - t0 )) s"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 200 python -P -m pytest -q -p no:cacheprovider -n 4 tests/test_codegen_gpu.py >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/codegen_gpu.log"; grep -E "^FAILED|^ERROR" "$OUT/codegen_gpu.log" | head
timeout 150 python -P -m pytest -q -p no:cacheprovider tests/test_verifier_gpu.py -k "hidden_torch_ops" >"$OUT/verifier_gpu.log" 2>&1
echo "verifier (hidden ops) exit $? at $(( $(date +%s) - t0 )) s"; tail -2 "$OUT/verifier_gpu.log"
