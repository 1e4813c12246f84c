#!/usr/bin/env bash
# Thirtieth session, call 2, on GPU 0 after the pool plane tests: level2/92's graph and plan
# there (s30-diag92.py) and through the CLI, then Nsight Compute of its default candidate (call 1's
# after-step ran out of time before it).
set -u
python bench/lists/s30-diag92.py .kb/kernelbench/level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py
echo "diag92 exit $?"
# the same problem through the CLI (as ncu_candidates.sh generates it): its program's calls
work=$(mktemp -d) && cp .kb/kernelbench/level2/92_*.py "$work/" && \
  (cd "$work" && python -m kernelstitch generate 92_*.py --no-verify --no-search --no-profile >gen.log 2>&1; \
   echo "generate exit $?"; python -c "import kernelstitch, sys; print(kernelstitch.__file__)"; \
   grep -h "_KS\.\|torch.ops" .kernelstitch/*/Model/model_new.py | tail -8)
bash scripts/ncu_candidates.sh level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp
