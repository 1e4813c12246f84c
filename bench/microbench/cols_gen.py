"""Microbench of the coder's own strided-softmax kernels (as `emit` writes them) for
examples/softmax_dim1_3d.py ([32, 1024, 4096] over dim 1): standalone CUDA programs (no torch)
that call the emitted launcher, with text edits for variants, and print one JSON line each
(median of 30 event-timed launches, 3 warm-ups, a checksum of the output to compare variants).

Usage: python bench/microbench/cols_gen.py OUTDIR; then for each OUTDIR/*.cu:
  nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o BIN FILE.cu
and run the binaries on the GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernelstitch.agents.codegen import emit
from kernelstitch.agents.codegen.spec import ReductionSpec, TensorArg
from kernelstitch.agents.planner.spec_json import spec_from_json

SPEC = {
    "type": "reduction", "name": "ks_s1_softmax", "kind": "softmax",
    "inputs": [{"name": "x", "dtype": "float32"}], "dim": 1, "keepdim": True, "out_dtype": "float32",
    "prologue": [], "prologue_out": None, "epilogue": [], "epilogue_out": "acc", "epilogue_inputs": [],
    "norm_ndim": 1, "eps": 1e-05, "weight": None, "bias": None}
OUTER, ROWS, INNER = 32, 1024, 4096
FULL_LAUNCH = "ks_s1_softmax_cluster<4, 8, 16, 16, true>"
# variant -> text edits of the emitted CUDA
_MERGE_FAST = ("return make_float2(m, a.y * expf(a.x - m) + b.y * expf(b.x - m));",
               "return make_float2(m, a.y * __expf(a.x - m) + b.y * __expf(b.x - m));")
_LEAN = [_MERGE_FAST, ("s += expf(v[j][q] - ms);", "s += __expf(v[j][q] - ms);"),
         ("ks_div_norm(expf(v[j][q] - ms[q]), s1[q])", "__expf(v[j][q] - ms[q]) * s1[q]"),
         ("    s1[q] = t.y;", "    s1[q] = 1.f / t.y;"),
         ("for (int j = 0; j < RPT; ++j) m = ks_max(m, v[j][q]);", "for (int j = 0; j < RPT; ++j) m = fmaxf(m, v[j][q]);")]
# variant -> text edits of the emitted CUDA
VARIANTS = {
    "plan": [],  # FULL operands: plain 16-byte loads
    "described": [(f"? cudaLaunchKernelEx(&cfg, {FULL_LAUNCH}", "? cudaLaunchKernelEx(&cfg, "
                   "ks_s1_softmax_cluster<4, 8, 16, 16, false>")],  # through ks_load's switch
    "merge_fast": [_MERGE_FAST],
    "lean": _LEAN,
    "lean_minb4": _LEAN + [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR, 4)")],
    "minb6": [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR, 6)")],
    "no_minb": [("__launch_bounds__(TXV * TYR, 5)", "__launch_bounds__(TXV * TYR)")],  # 108 registers
    "cols_smem": [("ks_device_attr<cudaDevAttrComputeCapabilityMajor>(0) >= 9", "false")],  # the old path
}

MAIN = r'''
#include <cstdio>
#include <vector>
#include <algorithm>
__global__ void ks_fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = ((h & 0xffffff) / 16777216.0f) * 6.f - 3.f;
  }
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("{\"error\": \"%s line %d\"}\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)
int main() {
  const int64_t outer = @OUTER@, R = @RR@, inner = @INNER@, n = outer * R * inner;
  float* in; CK(cudaMalloc(&in, n * 4));
  ks_fill<<<1024, 256>>>(in, n, 1234u);
  KsOperand d{}; d.mode = KS_FULL; d.rank = 1; d.div = 1; d.mod = n; d.size[0] = n; d.stride[0] = 1;
  float* out; CK(cudaMalloc(&out, n * 4));
  KsRedPlan p = ks_plan_reduction(outer, R, inner, ks_sm_count(), ks_smem_optin(), 2, true, true, false);
  const void* ins[1] = {in};
  for (int w = 0; w < 3; ++w) @LAUNCH@(ins, &d, out, nullptr, outer, R, inner, p, 4, 0);
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms;
  for (int it = 0; it < 30; ++it) {
    cudaEventRecord(a); @LAUNCH@(ins, &d, out, nullptr, outer, R, inner, p, 4, 0); cudaEventRecord(b);
    cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); ms.push_back(t);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  std::vector<float> h(4096); CK(cudaMemcpy(h.data(), out + n / 2, 4096 * 4, cudaMemcpyDeviceToHost));
  double cs = 0; for (float v : h) cs += v;
  printf("{\"problem\": \"@PROBLEM@\", \"variant\": \"@VARIANT@\", \"ms\": %.4f, \"p10\": %.4f, \"gbps\": %.1f, \"checksum\": %.6f, \"path\": %d}\n",
         ms[ms.size() / 2], ms[ms.size() / 10], 8.0 * n / (ms[ms.size() / 2] * 1e-3) / 1e9, cs, p.path);
  return 0;
}
'''


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    spec = spec_from_json(SPEC)
    assert isinstance(spec, ReductionSpec) and all(isinstance(t, TensorArg) for t in spec.inputs)
    source = emit(spec).cuda
    for variant, edits in VARIANTS.items():
        text = source
        for old, new in edits:
            assert old in text, (variant, old)
            text = text.replace(old, new)
        main_src = (MAIN.replace("@OUTER@", str(OUTER)).replace("@RR@", str(ROWS)).replace("@INNER@", str(INNER))
                    .replace("@LAUNCH@", f"{spec.name}_launch").replace("@PROBLEM@", "softmax_dim1_3d")
                    .replace("@VARIANT@", variant))
        path = out / f"softmax_dim1_3d__{variant}.cu"
        path.write_text(text + main_src)
        print(path)


if __name__ == "__main__":
    main(sys.argv[1])
