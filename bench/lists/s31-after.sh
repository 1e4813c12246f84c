#!/usr/bin/env bash
# Thirty-first session, call 1, on GPU 0 after the GPU tests: the direct convolution kernel
# against cuDNN at level 2's few-channel shapes (TFLOP/s), then the pipelined contraction loop
# against the default and torch.einsum (make it the default only if faster on level3/49's
# chunk states and its GPU tests pass).
set -u
python bench/conv_epilogue_timing.py --out "$OUT/c/conv_epilogue.json"; echo "conv_epilogue_timing exit $?"
python bench/contraction_pipelined_timing.py --out "$OUT/c/contraction_pipelined.json"; echo "contraction_pipelined_timing exit $?"
