#!/usr/bin/env bash
# Bench call A: the problems whose kernels or verdict rules changed, plus the reductions.
set -u
KS_TIME_LIMIT=300 bash scripts/device_bench.sh 470 --only big_gemm,softmax_dim1_3d,log_softmax,softmax_temperature,layernorm_residual,reduce_sum,reduce_max,reduce_mean,logsumexp
