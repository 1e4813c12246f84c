#!/usr/bin/env bash
# GPU validation of branch next-merge-candidate-2 (nineteenth session, written without device time
# left): main + small-side-swap (layout copies with a side of <= 8 a thread per long-side element)
# + nchw-pool-taps (the one-value pooling kernel loads a window row at once).  It also runs main's
# tensor-table change (d9b02e2, CPU-tested only) on a GPU for the first time: every generated
# program reads its parameters through it.  Run from a checkout of next-merge-candidate-2 after
#   git archive main agents kernelstitch profiler server pyproject.toml > mainsrc.tar
# one `nvidia-h100-x4` call per phase (carry .kb/kernelbench), each under 10 minutes:
#   PHASE=1: GPU 0 the layout-swap, pooling, cat and batch-norm GPU tests (the last two replay
#            CUDA graphs through the tensor table); GPUs 1-3: main / this tree / this tree again
#            (the same code on another GPU: the call's noise band) on level 1's six pooling problems
#   PHASE=2: GPU 0 the KernelBench end-to-end pooling and cat tests; GPUs 1-3 as above on the
#            level-3 CNNs whose channels-last programs copy an RGB input (SqueezeNet, MobileNetV2,
#            EfficientNetB0, ResNet18)
# Merge into main only if every test passes and this tree is no slower than main beyond the
# distance between `cand` and `cand_again`.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
PHASE=${PHASE:-1}
start=$SECONDS
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=5"
if [ "$PHASE" = 1 ]; then
  (PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 timeout -s INT 500 $T tests/test_layout_swap_gpu.py \
     tests/test_pool_gpu.py tests/test_cat_gpu.py tests/test_batch_norm_gpu.py -k "not kernelbench" \
     >"$OUT/tests.log" 2>&1
   echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -12) &
  L=level1
  LIST="$L/41_Max_Pooling_1D,$L/42_Max_Pooling_2D,$L/43_Max_Pooling_3D,$L/44_Average_Pooling_1D,$L/45_Average_Pooling_2D,$L/46_Average_Pooling_3D"
else
  # GPU 0: the end-to-end tests, then (time allowing) nchw-graph against channels-last graph
  # variants family by family (scripts/gpu_variant_families.sh, one JSON a problem)
  (PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 timeout -s INT 300 $T tests/test_pool_gpu.py \
     tests/test_cat_gpu.py -k kernelbench >"$OUT/tests.log" 2>&1
   echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -12
   mkdir -p "$OUT/families"
   CUDA_VISIBLE_DEVICES=0 OUT="$OUT/families" timeout $((530 - (SECONDS - start))) \
     bash scripts/gpu_variant_families.sh 9_ResNet18 20_MobileNetV2 >"$OUT/families/console.txt" 2>&1
   echo "families exit $? at $((SECONDS - start)) s") &
  L=level3
  LIST="$L/18_SqueezeNet,$L/20_MobileNetV2,$L/22_EfficientNetB0,$L/9_ResNet18"
fi
OUT="$OUT/ab" LIMIT=540 LIST="$LIST" SIDES="main=mainsrc.tar:1 cand=.:2 cand_again=.:3" bash scripts/gpu_ab.sh
wait
# at most 8 files come back from a call: the sides' results in one archive
(cd "$OUT" && tar czf ab.tgz ab $( [ -d families ] && echo families ) && rm -rf ab families)
echo "script used $((SECONDS - start)) s"
