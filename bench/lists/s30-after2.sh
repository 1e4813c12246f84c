#!/usr/bin/env bash
# Thirtieth session, call 2, on GPU 0 after the pool plane tests: level2/92's graph and plan on
# this machine's torch (s30-diag92.py), then Nsight Compute of its default candidate again.
set -u
python bench/lists/s30-diag92.py .kb/kernelbench/level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py
echo "diag92 exit $?"
bash scripts/ncu_candidates.sh level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp
