#!/usr/bin/env bash
# GPU validation of branch next-merge-candidate (eighteenth session, written without device time
# left): main + the channels-last branch without its two NCHW-path changes (nhwc-no-nchw-changes)
# + the conv spatial-mean rewrite (conv-mean-rewrite) + the PyTorch batch_norm round-2 variant
# (bn-in-pytorch).  Run from a checkout of next-merge-candidate, after making the other trees:
#   git archive main agents kernelstitch profiler server pyproject.toml > mainsrc.tar
#   git archive nhwc-lean-narrow agents kernelstitch profiler server pyproject.toml > ab_full.tar
# then one `nvidia-h100-x4` call per phase (carry .kb/kernelbench), each under 10 minutes:
#   PHASE=1: GPU 0 the new and changed kernels' GPU tests; GPUs 1-3 main / this tree / the full
#            channels-last branch side by side (scripts/gpu_ab.sh) on the level-3 CNNs where the
#            channels-last branch measured slower or faster, and ResNet18 (the batch_norm variant)
#   PHASE=2: GPU 0 the conv tap-means problems end to end; GPUs 1-3 as above on level2/42, 44
#            (the rewrite) and level-2 conv problems the channels-last readers changed
# Merge into main only if every test passes and this tree is no slower than main on any problem
# beyond the noise of the same call (bench/results/2026-11-27-h100x4-nhwc-ab/RUN.md).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
PHASE=${PHASE:-1}
start=$SECONDS
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=5"
if [ "$PHASE" = 1 ]; then
  (PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 timeout -s INT 500 $T tests/test_conv_taps_gpu.py \
     tests/test_batch_norm_gpu.py tests/test_pool_gpu.py tests/test_cat_gpu.py tests/test_codegen_gpu.py \
     -k "not kernelbench and (tap or batch or kept or chain or channels_last)" >"$OUT/tests.log" 2>&1
   echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -12) &
  L=level3
  LIST="$L/26_ShuffleNet,$L/22_EfficientNetB0,$L/9_ResNet18,$L/18_SqueezeNet,$L/20_MobileNetV2"
else
  (PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 timeout -s INT 500 $T tests/test_conv_taps_gpu.py \
     -k kernelbench >"$OUT/tests.log" 2>&1
   echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -12) &
  L=level2
  LIST="$L/44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean,$L/42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply,$L/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid,$L/19_ConvTranspose2d_GELU_GroupNorm,$L/52_Conv2d_Activation_BatchNorm"
fi
OUT="$OUT/ab" LIMIT=540 LIST="$LIST" SIDES="main=mainsrc.tar:1 cand=.:2 full=ab_full.tar:3" bash scripts/gpu_ab.sh
wait
echo "script used $((SECONDS - start)) s"
