#!/usr/bin/env bash
# GPU validation of branch nhwc-lean-narrow (written in the fifteenth and sixteenth sessions, when
# no device time was left): the channels-last elementwise kernels' lean and narrow forms, the NCHW
# rows form, reductions reading a channels-last conv output (over its channels, its spatial dims
# or all but the batch), group_norm / instance_norm and softmax over the channels of one, the GPU
# tests' parallel extension builds; then their speed and level-2 benches.  Two 4-GPU calls
# (`nvidia-h100-x4`, carry .kb/kernelbench), each under 10 minutes:
#   PHASE=a: GPU 0 the kernel tests and the A/B, GPU 1 the group_norm modules and KernelBench
#            problems end to end, GPUs 2-3 a bench of the problems the new readers serve;
#   PHASE=b: a bench of the other level-2 conv problems on GPUs 0-3;
#   PHASE=c: a bench of level-3 CNNs on GPUs 0-3 (the elementwise steps kept channels-last
#            between convolutions: bench/results/2026-11-27-cpu-channels-last-readers).
# Merge into main only if every test passes and the benches are no worse than
# bench/results/2026-11-27-h100x4-l2-nhwc-kernels (and the conv-defaults run) on common problems.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
PHASE=${PHASE:-a}
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
L=level2
bench() {  # GPUS, LIST, jobs
  mkdir -p "$OUT/bench" /tmp/ws_v
  CUDA_VISIBLE_DEVICES=$1 timeout --foreground -s INT -k 15 $((570 - (SECONDS - start))) kernelstitch bench \
    .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_v --jobs $3 --build-jobs 16 --time-limit 240 \
    --timing-budget 1 --only "$2" >"$OUT/bench/console.log" 2>&1
  echo "bench exit $? at $((SECONDS - start)) s"
}
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=5"
if [ "$PHASE" = a ]; then
  LIST="$L/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp,$L/44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean,$L/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid,$L/67_Conv2d_GELU_GlobalAvgPool,$L/19_ConvTranspose2d_GELU_GroupNorm,$L/17_Conv2d_InstanceNorm_Divide,$L/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply,$L/49_ConvTranspose3d_Softmax_Sigmoid,$L/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp,$L/6_Conv3d_Softmax_MaxPool_MaxPool,$L/61_ConvTranspose3d_ReLU_GroupNorm,$L/60_ConvTranspose3d_Swish_GroupNorm_HardSwish"
  (bench 2,3 "$LIST" 2) & b=$!
  (CUDA_VISIBLE_DEVICES=1 timeout -s INT 480 $T tests/test_norms_gpu.py >"$OUT/tests_norms.log" 2>&1
   echo "norm tests exit $? at $((SECONDS - start)) s") & n=$!
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 400 $T -n 4 tests/test_codegen_gpu.py tests/test_batch_norm_gpu.py \
    tests/test_layout_swap_gpu.py tests/test_pool_gpu.py tests/test_cat_gpu.py -k "channels_last or tiled or binary or rows or reduction_over_the_channels or statistics or prologue or swap or module_matches or group_norm or softmax" \
    >"$OUT/tests.log" 2>&1
  echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error|slowest|s call" "$OUT/tests.log" | tail -24
  CUDA_VISIBLE_DEVICES=0 timeout 120 python bench/results/2026-11-27-h100x4-l2-nhwc-kernels/nhwc_ab.py >"$OUT/ab.txt" 2>&1
  echo "ab exit $? at $((SECONDS - start)) s"; cat "$OUT/ab.txt"
  wait $n; grep -E "passed|failed|FAILED|Error" "$OUT/tests_norms.log" | tail -12
elif [ "$PHASE" = c ]; then
  M=level3
  LIST="$M/19_MobileNetV1,$M/20_MobileNetV2,$M/22_EfficientNetB0,$M/9_ResNet18,$M/11_VGG16,$M/23_EfficientNetB1,$M/10_ResNet101,$M/12_VGG19,$M/24_EfficientNetB2,$M/5_AlexNet,$M/27_RegNet,$M/18_SqueezeNet,$M/26_ShuffleNet,$M/21_EfficientNetMBConv,$M/17_SqueezeNetFireModule,$M/6_GoogleNetInceptionModule"
  (bench 0,1,2,3 "$LIST" 4) & b=$!
else
  LIST="$L/52_Conv2d_Activation_BatchNorm,$L/93_ConvTranspose2d_Add_Min_GELU_Multiply,$L/25_Conv2d_Min_Tanh_Tanh,$L/32_Conv2d_Scaling_Min,$L/36_ConvTranspose2d_Min_Sum_GELU_Add,$L/54_Conv2d_Multiply_LeakyReLU_GELU,$L/87_Conv2d_Subtract_Subtract_Mish,$L/73_Conv2d_BatchNorm_Scaling,$L/16_ConvTranspose2d_Mish_Add_Hardtanh_Scaling,$L/5_ConvTranspose2d_Subtract_Tanh,$L/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide,$L/69_Conv2d_HardSwish_ReLU,$L/31_Conv2d_Min_Add_Multiply,$L/58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp,$L/7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd,$L/20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd,$L/47_Conv3d_Mish_Tanh,$L/48_Conv3d_Scaling_Tanh_Multiply_Sigmoid,$L/35_Conv2d_Subtract_HardSwish_MaxPool_Mish,$L/46_Conv2d_Subtract_Tanh_Subtract_AvgPool,$L/82_Conv2d_Tanh_Scaling_BiasAdd_Max,$L/65_Conv2d_AvgPool_Sigmoid_Sum,$L/10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh,$L/11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm"
  (bench 0,1,2,3 "$LIST" 4) & b=$!
fi
wait $b
rm -f "$OUT"/bench/*.png
grep -E "^- (correct|geomean)" "$OUT/bench/results.md" 2>/dev/null
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    v = p.get("variants_ms") or {}
    print(p["problem"][7:40].ljust(33), p["status"], p.get("speedup_vs_eager") and round(p["speedup_vs_eager"], 2),
          p.get("speedup_vs_compiled") and round(p["speedup_vs_compiled"], 2), p.get("delivered"),
          {k: round(x, 3) for k, x in v.items() if isinstance(x, float)}, p.get("passed_over") or "")
P
echo "script used $((SECONDS - start)) s"
