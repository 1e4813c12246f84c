#!/usr/bin/env bash
# Device call 4 (2026-11-24): the coder's strided-softmax kernel variants as standalone programs,
# then the strided/channels-last codegen GPU tests on the FULL-operand specialisation.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
python -m pip install -q --no-deps .whl/execnet-*.whl .whl/pytest_xdist-*.whl >>"$OUT/install.log" 2>&1 || echo "no xdist"
for b in .scratch/colbin/*; do timeout 30 "$b" >>"$OUT/mb.jsonl" 2>&1 || echo "{\"failed\": \"$b\"}" >>"$OUT/mb.jsonl"; done
timeout 60 .scratch/softmax_variants softmax_dim1_3d 2>&1 | grep -E "w32_ty16_rpt16_c4|memcpy" >>"$OUT/mb.jsonl"
cat "$OUT/mb.jsonl"; echo "microbench done at $(( $(date +%s) - t0 )) s"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 240 python -P -m pytest -q -p no:cacheprovider -n 4 tests/test_codegen_gpu.py -k "strided or softmax or channels_last" >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -2 "$OUT/codegen_gpu.log"; grep -E "^FAILED|^ERROR" "$OUT/codegen_gpu.log" | head -20
