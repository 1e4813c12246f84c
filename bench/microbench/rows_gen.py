"""Microbench of the coder's own row kernels (as `emit` writes them) for the softmax-kind rows of
the bench: standalone CUDA programs (no torch, harness.py) that call the emitted launcher with the host
plan, or with a plan override, and print one JSON line each.  Kernel variants are emitter knobs
(`ReductionVariant`).

Usage: python bench/microbench/rows_gen.py OUTDIR; then for each OUTDIR/*.cu:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o BIN FILE.cu
and run the binaries on the GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import write_programs  # this folder (run as a script)
from kernelstitch.agents.coder.codegen.reduction import ReductionVariant

# name -> (outer, R, the spec as the built-in planner writes it for examples/<name>.py)
PROBLEMS = {
    "log_softmax": (16384, 8192, {
        "type": "reduction", "name": "ks_s1_log_softmax", "kind": "log_softmax",
        "inputs": [{"name": "x", "dtype": "float32"}], "dim": -1, "keepdim": True, "out_dtype": "float32",
        "prologue": [{"op": "mul", "args": ["x", 2.0], "out": "mul", "attrs": {}},
                     {"op": "sub", "args": ["mul", 0.5], "out": "sub", "attrs": {}}],
        "prologue_out": "sub", "epilogue": [], "epilogue_out": "acc", "epilogue_inputs": [],
        "norm_ndim": 1, "eps": 1e-05, "weight": None, "bias": None}),
    "softmax_temperature": (16384, 8192, {
        "type": "reduction", "name": "ks_s1_softmax", "kind": "softmax",
        "inputs": [{"name": "x", "dtype": "float32"}], "dim": -1, "keepdim": True, "out_dtype": "float32",
        "prologue": [{"op": "div", "args": ["x", 0.7], "out": "div", "attrs": {}}],
        "prologue_out": "div", "epilogue": [], "epilogue_out": "acc", "epilogue_inputs": [],
        "norm_ndim": 1, "eps": 1e-05, "weight": None, "bias": None}),
}
# variant -> (plan override statements, emitter knobs)
VARIANTS = {
    "plan": ("", ReductionVariant()),  # what ks_plan_reduction picks now
    "old16x512": ("p.row_values = 16; p.threads_x = 512;", ReductionVariant()),  # the 2026-11-23 choice
    "plan_fastexp": ("", ReductionVariant(row_exp="__expf")),  # __expf in the row kernels' sums
}


def main(outdir: str) -> None:
    for problem, (outer, rows, spec_json) in PROBLEMS.items():
        for path in write_programs(Path(outdir), problem, spec_json, (outer, rows, 1), VARIANTS):
            print(path)


if __name__ == "__main__":
    main(sys.argv[1])
