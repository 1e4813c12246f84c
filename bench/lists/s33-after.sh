#!/usr/bin/env bash
# Thirty-third session, call 1, on GPU 0 after the GPU tests: the direct convolution's three forms
# (persistent, block-a-tile, persistent with 16-byte row copies: make vector_copy the default only
# if faster and test_the_16_byte_row_copies passes) against cuDNN, then an Nsight Compute report
# of one launch of each form on level2/87's shape.
set -u
mkdir -p "$OUT/c"
python bench/conv_epilogue_timing.py --out "$OUT/c/conv_epilogue.json"; echo "conv_epilogue_timing exit $?"
ncu --kernel-name regex:direct_ --launch-count 3 --set full --import-source yes \
  -o "$OUT/c/conv_direct" python bench/conv_epilogue_timing.py --runs 1 >"$OUT/c/conv_direct_ncu.log" 2>&1
echo "ncu exit $?"
ncu --import "$OUT/c/conv_direct.ncu-rep" --page details --csv >"$OUT/c/conv_direct_details.csv" 2>&1
ncu --import "$OUT/c/conv_direct.ncu-rep" --page source --csv --print-source sass >"$OUT/c/conv_direct_sass.csv" 2>&1
echo "ncu import exit $?"
