# call D (1 x H100): ncu of the attention kernel (what limits it), then level-3 attention problems.
set -u
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo install failed
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
python scripts/_attn_prof.py 2>&1 | tail -3 | tee $OUT/attn_time.txt
timeout 200 ncu --kernel-name regex:att_.*_kernel --launch-skip 0 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats \
  python scripts/_attn_prof.py > $OUT/ncu.txt 2>&1; echo "ncu rc $? at $((SECONDS-start)) s"
mkdir -p /tmp/l3
OUT=/tmp/l3 KS_TIME_LIMIT=170 bash scripts/device_bench.sh $((585-(SECONDS-start))) .kb/kernelbench --levels 3 --timing-budget 1 \
  --only 50_ReLUSelfAttention,28_VisionTransformer,32_ConvolutionalVisionTransformer 2>&1 | tail -8
cp /tmp/l3/bench/results.json /tmp/l3/bench/results.md /tmp/l3/runs.sqlite $OUT/ 2>/dev/null; ls $OUT
