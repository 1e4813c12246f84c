#!/usr/bin/env bash
# Twenty-ninth session, call 1, on GPU 0 after the pool tests: Nsight Compute reports of the
# default plans' kernels where the programs trail torch.compile (level2/92 0.73x, RegNet 0.93x)
# or a pool runs below the plane kernel's best bandwidth (level1/44).
set -u
bash scripts/ncu_candidates.sh level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp level1/44_Average_Pooling_1D level3/27_RegNet
