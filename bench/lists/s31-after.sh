#!/usr/bin/env bash
# Thirty-first session, call 1, on GPU 0 after the GPU tests: the pipelined contraction loop
# against the default and torch.einsum (make it the default only if faster on level3/49's
# chunk states and its GPU tests pass).
set -u
python bench/contraction_pipelined_timing.py --out "$OUT/c/contraction_pipelined.json"; echo "contraction_pipelined_timing exit $?"
