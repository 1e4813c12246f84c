#!/usr/bin/env bash
# Thirty-second session, calls 1 and 2, on GPU 0 after the GPU tests: the direct convolution kernel
# (staging loops unrolled since s31's timing) against cuDNN at level 2's few-channel shapes, an
# Nsight Compute report of one launch of it (call 2: of each form,
# persistent and block-a-tile) (where the time goes: load phase vs FMA pipe,
# occupancy, stall reasons, by source line), then the pipelined contraction loop against the
# default and torch.einsum (make it the default only if faster and its GPU tests pass).
# bash s32-after.sh [conv [launches]]: "conv" skips the steps after the convolution's; launches:
# the ncu report's kernel launches (default 2: the first two forms the timing checks)
set -u
mkdir -p "$OUT/c"
python bench/conv_epilogue_timing.py --out "$OUT/c/conv_epilogue.json"; echo "conv_epilogue_timing exit $?"
ncu --kernel-name regex:direct_ --launch-count "${2:-2}" --set full --import-source yes \
  -o "$OUT/c/conv_direct" python bench/conv_epilogue_timing.py --runs 1 >"$OUT/c/conv_direct_ncu.log" 2>&1
echo "ncu exit $?"
ncu --import "$OUT/c/conv_direct.ncu-rep" --page details --csv >"$OUT/c/conv_direct_details.csv" 2>&1
ncu --import "$OUT/c/conv_direct.ncu-rep" --page source --csv --print-source sass >"$OUT/c/conv_direct_sass.csv" 2>&1
echo "ncu import exit $?"
[ "${1:-}" = conv ] && exit 0  # calls 2-4: the convolution only
# (call 1 then ran bench/contraction_pipelined_timing.py, removed when its pipelined loop became
# the only one)
