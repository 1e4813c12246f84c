"""Microbench of the coder's own strided-softmax kernels (as `emit` writes them) for
examples/softmax_dim1_3d.py ([32, 1024, 4096] over dim 1): standalone CUDA programs (no torch)
that call the emitted launcher (harness.py), with text edits for variants, and print one JSON
line each.

Usage: python bench/microbench/cols_gen.py OUTDIR; then for each OUTDIR/*.cu:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o BIN FILE.cu
and run the binaries on the GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import write_programs  # this folder (run as a script)

SPEC = {
    "type": "reduction", "name": "ks_s1_softmax", "kind": "softmax",
    "inputs": [{"name": "x", "dtype": "float32"}], "dim": 1, "keepdim": True, "out_dtype": "float32",
    "prologue": [], "prologue_out": None, "epilogue": [], "epilogue_out": "acc", "epilogue_inputs": [],
    "norm_ndim": 1, "eps": 1e-05, "weight": None, "bias": None}
OUTER, ROWS, INNER = 32, 1024, 4096
FULL_LAUNCH = "ks_s1_softmax_cluster<4, 8, 16, 16, true>"
# The fast math of the emitted kernel (28b0fdd) undone, as it was emitted when calls 4 and 5 of
# bench/results/2026-11-24-h100 measured it (their "plan" variant; their "lean" is today's plan).
_ACCURATE = [
    ("return make_float2(m, a.y * __expf(a.x - m) + b.y * __expf(b.x - m));",
     "return make_float2(m, a.y * expf(a.x - m) + b.y * expf(b.x - m));"),
    ("s += __expf(v[j][q] - ms);", "s += expf(v[j][q] - ms);"),
    ("__expf(v[j][q] - ms[q]) * s1[q]", "ks_div_norm(expf(v[j][q] - ms[q]), s1[q])"),
    ("    s1[q] = 1.f / t.y;", "    s1[q] = t.y;"),
    ("for (int j = 0; j < RPT; ++j) m = fmaxf(m, v[j][q]);", "for (int j = 0; j < RPT; ++j) m = ks_max(m, v[j][q]);"),
]
# variant -> text edits of the emitted CUDA
VARIANTS = {
    "plan": [],  # FULL operands: plain 16-byte loads, fast math, 96 registers
    "described": [(f"? cudaLaunchKernelEx(&cfg, {FULL_LAUNCH}", "? cudaLaunchKernelEx(&cfg, "
                   "ks_s1_softmax_cluster<4, 8, 16, 16, false>")],  # through ks_load's switch
    "accurate_math": _ACCURATE,
    "minb4": [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR, 4)")],
    "minb6": [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR, 6)")],
    "no_minb": [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR)")],
    "cols_smem": [("ks_device_attr<cudaDevAttrComputeCapabilityMajor>(0) >= 9", "false")],  # the old path
}


def main(outdir: str) -> None:
    variants = {name: ("", edits) for name, edits in VARIANTS.items()}
    for path in write_programs(Path(outdir), "softmax_dim1_3d", SPEC, (OUTER, ROWS, INNER), variants):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1])
