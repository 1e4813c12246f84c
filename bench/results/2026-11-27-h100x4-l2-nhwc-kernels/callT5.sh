#!/usr/bin/env bash
# Call 5 (fifteenth session, 4 x H100): GPUs 1-3 bench level-2 conv problems whose epilogues the
# rewritten channels-last elementwise / batch-stats kernels serve; GPU 0: the orientation A/B
# of the channels-last kernel (scripts/_nhwc_ab.py), then the GPU tests of the new kernels.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1; nproc
L=level2
LIST="$L/52_Conv2d_Activation_BatchNorm,$L/93_ConvTranspose2d_Add_Min_GELU_Multiply,$L/7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd,$L/16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling,$L/26_ConvTranspose3d_Add_HardSwish,$L/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide,$L/54_Conv2d_Multiply_LeakyReLU_GELU,$L/47_Conv3d_Mish_Tanh,$L/5_ConvTranspose2d_Subtract_Tanh,$L/87_Conv2d_Subtract_Subtract_Mish,$L/73_Conv2d_BatchNorm_Scaling,$L/20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd,$L/49_ConvTranspose3d_Softmax_Sigmoid,$L/31_Conv2d_Min_Add_Multiply,$L/69_Conv2d_HardSwish_ReLU"
mkdir -p "$OUT/bench" /tmp/ws_b
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((560 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_b --jobs 3 --build-jobs 16 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
CUDA_VISIBLE_DEVICES=0 timeout 170 python scripts/_nhwc_ab.py >"$OUT/ab.txt" 2>&1
echo "ab exit $? at $((SECONDS - start)) s"; cat "$OUT/ab.txt" | tail -30
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=3"
CUDA_VISIBLE_DEVICES=0 timeout -s INT $((545 - (SECONDS - start))) $T -n 3 tests/test_codegen_gpu.py tests/test_batch_norm_gpu.py \
  tests/test_layout_swap_gpu.py -k "channels_last or tiled or binary or statistics or prologue or swap" >"$OUT/tests.log" 2>&1
echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -20
wait $b
rm -f "$OUT"/bench/*.png
grep -E "^- (correct|geomean|KernelBench)" "$OUT/bench/results.md" 2>/dev/null
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    v = p.get("variants_ms") or {}
    print(p["problem"][7:40].ljust(33), p["status"], p.get("speedup_vs_eager") and round(p["speedup_vs_eager"], 2),
          p.get("speedup_vs_compiled") and round(p["speedup_vs_compiled"], 2), p.get("delivered"),
          {k: round(x, 3) for k, x in v.items() if isinstance(x, float)}, "|", str(p.get("message"))[:80])
P
echo "script used $((SECONDS - start)) s"
