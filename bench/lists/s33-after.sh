#!/usr/bin/env bash
# Thirty-third session, call 1, on GPU 0 after the GPU tests: s32-after.sh's convolution steps
# with the timing script's three forms (persistent, block-a-tile, persistent with 16-byte row
# copies: make vector_copy the default only if faster and test_the_16_byte_row_copies passes),
# one Nsight Compute launch of each on level2/87's shape.
exec bash "$(dirname "$0")/s32-after.sh" conv 3
