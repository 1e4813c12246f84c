"""How much emitted CUDA the nvcc spill checks compile (tests/test_codegen.py, test_coder.py).

`make test` (CI: 2 cores) compiles one representative of each kernel family: every template of
every family and every element width goes through ptxas, but of the reduction specs that differ
only in their combine operator (sum / mean / amax / amin, softmax / log_softmax) or in which
16-bit type they load, one.  Those variants are a third of the check's 20 CPU-minutes and share
their kernel templates with a representative.  `KERNELSTITCH_SPILL_CHECK=all` compiles every
spec and every example kernel: run it where cores are plenty (the GPU machine, README "GPU
tests")."""

from __future__ import annotations

import os

SPILL_CHECK_ENV = "KERNELSTITCH_SPILL_CHECK"

# Reduction specs of tests/test_codegen.py compiled in every run: each reduction template with a
# plain combine (sum), the online max/sum state (logsumexp), the normalising paths (softmax),
# layer_norm and group_norm, in fp32 and at 16 bits.
REPRESENTATIVE_REDUCTIONS = frozenset({
    "red_sum", "red_logsumexp", "red_softmax", "red_layer_norm", "red_group_norm",
    "red_softmax_bfloat16", "red_ln_float16", "red_sum_float16", "red_group_norm_f16",
})


def full_spill_check() -> bool:
    """Whether this run compiles every spec and every example kernel (KERNELSTITCH_SPILL_CHECK=all)."""
    return os.environ.get(SPILL_CHECK_ENV, "families") == "all"
