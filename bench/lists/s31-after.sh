#!/usr/bin/env bash
# Thirty-first session, call 1, on GPU 0 after the GPU tests: the pipelined contraction loop
# against the default and torch.einsum (make it the default only if faster on level3/49's
# chunk states and its GPU tests pass), then Nsight Compute of level2/92's default candidate (the
# group_norm kept NHWC, no bias pass: never profiled yet).
set -u
python bench/contraction_pipelined_timing.py --out "$OUT/c/contraction_pipelined.json"; echo "contraction_pipelined_timing exit $?"
bash scripts/ncu_candidates.sh level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp
