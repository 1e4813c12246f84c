#!/usr/bin/env bash
# Thirtieth session, call 1, on GPU 0 after the contraction tests: the pool plane kernel's
# inside-the-input finish (emit_pool(plane_inside=True), form `inside`) against main's form and
# PyTorch (make it the default only if faster and the pool GPU tests pass with it), then Nsight
# Compute reports of level3/49 (contraction kernels) and level2/92 (group_norm kept NHWC).
set -u
python bench/pool_plane_vl_timing.py --out "$OUT/c/pool_plane_inside.json"; echo "pool_plane_vl_timing exit $?"
bash scripts/ncu_candidates.sh level3/49_Mamba2ReturnFinalState level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp
