#!/usr/bin/env bash
# Thirty-third session, call 1, on GPU 0 after the GPU tests: s32-after.sh's convolution steps
# with the timing script's three forms (persistent, block-a-tile, persistent with 16-byte row
# copies: make vector_copy the default only if faster and test_the_16_byte_row_copies passes),
# one Nsight Compute launch of each on level2/87's shape; then the pool plane kernel's forms
# (level1/44's 8-tap average: the inside finish now multiplies by 1/8, exact, where it divided;
# 2.90 ms in s30's run of this script).
bash "$(dirname "$0")/s32-after.sh" conv 3
python bench/pool_plane_vl_timing.py --out "$OUT/c/pool_plane.json"; echo "pool_plane_vl_timing exit $?"
# Issue 22's bandwidth: Nsight Compute metrics (DRAM throughput, occupancy, stall reasons) of the
# default plan's reduction kernel on a level-2 loser (level2/25's channel min at 68% of DRAM
# bandwidth).
bash scripts/ncu_candidates.sh level2/25_Conv2d_Min_Tanh_Tanh
