#!/usr/bin/env bash
# Thirty-third session, call 1, on GPU 0 after the GPU tests: the direct convolution's three
# forms timed against cuDNN at level 2's few-channel shapes (persistent, block-a-tile, persistent
# with 16-byte row copies: make vector_copy the default only if faster and
# test_the_16_byte_row_copies passes), then the pool plane kernel's forms (level1/44's 8-tap
# average: the inside finish now multiplies by 1/8, exact, where it divided; 2.90 ms in s30).
set -u
mkdir -p "$OUT/c"
python bench/conv_epilogue_timing.py --out "$OUT/c/conv_epilogue.json"; echo "conv_epilogue_timing exit $?"
python bench/pool_plane_vl_timing.py --out "$OUT/c/pool_plane.json"; echo "pool_plane_vl_timing exit $?"
