#!/usr/bin/env bash
# Call 2 (fifteenth session, 1 x H100): ncu of our channels-last kernels on level2/52 and 93
# (the channels-last elementwise kernel ran at 0.44 TB/s on 52), then the verifier GPU tests.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
K=.kb/kernelbench/level2
for p in 52_Conv2d_Activation_BatchNorm 93_ConvTranspose2d_Add_Min_GELU_Multiply; do
  mkdir -p /tmp/g/$p && cp $K/$p.py /tmp/g/$p/p.py
  (cd /tmp/g/$p && timeout 150 kernelstitch generate p.py --no-verify --no-search >gen.log 2>&1; tail -2 gen.log)
  M=/tmp/g/$p/.kernelstitch/p/Model/model_new.py
  python scripts/_ncu_prog.py /tmp/g/$p/p.py $M >/dev/null 2>&1   # build outside ncu
  timeout 200 ncu --profile-from-start off --set full -k regex:"nhwc|batch_stats_partial|layout_swap" -o "$OUT/$p" \
    python scripts/_ncu_prog.py /tmp/g/$p/p.py $M >"$OUT/$p.ncu.log" 2>&1
  echo "$p ncu exit $? at $((SECONDS - start)) s"
  ncu --import "$OUT/$p.ncu-rep" --page details >"$OUT/$p.details.txt" 2>&1
  ncu --import "$OUT/$p.ncu-rep" --page source --csv --print-source sass >"$OUT/$p.sass.csv" 2>/dev/null
  grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|Executed Ipc A|Issue Slots Busy|One or More Eligible|L1/TEX Hit|L2 Hit|Warp Cycles Per Issued" "$OUT/$p.details.txt" | head -60
done
cp /tmp/g/52_Conv2d_Activation_BatchNorm/.kernelstitch/p/Model/kernels/s3.cu "$OUT/52_s3.cu"
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=5"
timeout -s INT $((585 - (SECONDS - start))) $T -n 6 tests/test_verifier_gpu.py >"$OUT/tests_verifier.log" 2>&1
echo "verifier tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests_verifier.log" | tail -20
echo "script used $((SECONDS - start)) s"
