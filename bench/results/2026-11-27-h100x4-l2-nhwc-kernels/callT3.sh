#!/usr/bin/env bash
# Call 3 (fifteenth session, 1 x H100): GPU tests of the rewritten channels-last elementwise
# kernel and the batch-stats partition, then per-kernel profiles (search on) of level2/52, 93, 85.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=3"
timeout -s INT 200 $T -n 8 tests/test_codegen_gpu.py tests/test_batch_norm_gpu.py tests/test_layout_swap_gpu.py \
  -k "channels_last or tiled or more_dims or batch or program_matches or binary" >"$OUT/tests.log" 2>&1
echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -25
K=.kb/kernelbench/level2
timeout -s INT $((590 - (SECONDS - start))) python scripts/profile_vs_compile.py --workspace /tmp/ws_p "$OUT/prof" \
  $K/52_Conv2d_Activation_BatchNorm.py $K/93_ConvTranspose2d_Add_Min_GELU_Multiply.py $K/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py 2>"$OUT/prof_err.log" | grep -vE "^\s+0\.00"
echo "profiles exit $? at $((SECONDS - start)) s"; tail -3 "$OUT/prof_err.log"
tar czf "$OUT/prof.tgz" -C "$OUT" prof && rm -rf "$OUT/prof"
echo "script used $((SECONDS - start)) s"
