#!/usr/bin/env bash
# Second call (nvidia-h100-x1, carry .ab): ncu of SqueezeNet's channels-last cat and pooling
# kernels (one forward of the default variant), the two families that took 5.7 and 6.3 ms of its
# 20.1 ms in breakdown.json.  .ab/ncu_prog.py is scripts/_ncu_prog.py (runs the program 3 times,
# then one forward inside cudaProfilerStart/Stop).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
P=.ab/18_SqueezeNet/18_SqueezeNet.py
M=.ab/18_SqueezeNet/.kernelstitch/18_SqueezeNet/Model/variants/default/model_new.py
PYTHONPATH=/tmp/site_here python -P .ab/ncu_prog.py $P $M   # build outside ncu
echo "built at $SECONDS s"
PYTHONPATH=/tmp/site_here timeout 300 ncu --profile-from-start off --section SpeedOfLight --section LaunchStats \
  --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  -k regex:"ks_s7_cat|ks_s2_max|ks_s18_max|layout_swap" -o "$OUT/squeezenet" \
  python -P .ab/ncu_prog.py $P $M >"$OUT/ncu.log" 2>&1
echo "ncu exit $? at $SECONDS s"; tail -3 "$OUT/ncu.log"
ncu --import "$OUT/squeezenet.ncu-rep" --page details >"$OUT/details.txt" 2>&1
rm -f "$OUT/squeezenet.ncu-rep"
grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Grid Size|Block Size|Waves Per SM|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" "$OUT/details.txt" | head -150
echo "script used $SECONDS s"
