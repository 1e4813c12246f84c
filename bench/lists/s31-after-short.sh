#!/usr/bin/env bash
# Thirty-first session, a short call (little device time left): the direct convolution kernel
# against cuDNN at level 2's few-channel shapes only.
set -u
python bench/conv_epilogue_timing.py --out "$OUT/c/conv_epilogue.json"; echo "conv_epilogue_timing exit $?"
