"""Microbench of the coder's own strided-softmax kernels (as `emit` writes them) for
examples/softmax_dim1_3d.py ([32, 1024, 4096] over dim 1): standalone CUDA programs (no torch)
that call the emitted launcher (harness.py), with emitter knobs (`ReductionVariant`) for variants,
and print one JSON line each.

Usage: python bench/microbench/cols_gen.py OUTDIR; then for each OUTDIR/*.cu:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o BIN FILE.cu
and run the binaries on the GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import write_programs  # this folder (run as a script)
from kernelstitch.agents.coder.codegen.reduction import ReductionVariant

SPEC = {
    "type": "reduction", "name": "ks_s1_softmax", "kind": "softmax",
    "inputs": [{"name": "x", "dtype": "float32"}], "dim": 1, "keepdim": True, "out_dtype": "float32",
    "prologue": [], "prologue_out": None, "epilogue": [], "epilogue_out": "acc", "epilogue_inputs": [],
    "norm_ndim": 1, "eps": 1e-05, "weight": None, "bias": None}
OUTER, ROWS, INNER = 32, 1024, 4096
# variant -> emitter knobs (ReductionVariant; the defaults are what the coder emits)
VARIANTS = {
    "plan": ReductionVariant(),  # FULL operands: plain 16-byte loads, fast math, 96 registers
    "described": ReductionVariant(cluster_full_loads=False),  # through ks_load's switch
    # The fast math of the emitted kernel (28b0fdd) undone, as it was emitted when calls 4 and 5 of
    # bench/results/2026-11-24-h100 measured it (their "plan" variant; their "lean" is today's plan).
    "accurate_math": ReductionVariant(cluster_fast_math=False),
    "minb4": ReductionVariant(cluster_min_blocks=4),
    "minb6": ReductionVariant(cluster_min_blocks=6),
    "no_minb": ReductionVariant(cluster_min_blocks=0),
    "cols_smem": ReductionVariant(cluster=False),  # the old path: shared-memory column tiles
}


def main(outdir: str) -> None:
    variants = {name: ("", knobs) for name, knobs in VARIANTS.items()}
    for path in write_programs(Path(outdir), "softmax_dim1_3d", SPEC, (OUTER, ROWS, INNER), variants):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1])
