"""The standalone harness of the coder's-kernel microbenchmarks (rows_gen.py, cols_gen.py): a
main() appended to an emitted reduction's CUDA text that fills one fp32 input, plans with
ks_plan_reduction (plus an optional override), calls the emitted launcher and prints one JSON line
(median and p10 of 30 event-timed launches after 3 warm-ups, a checksum of the output to compare
variants, the plan's path and row shape)."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import ReductionSpec, TensorArg, spec_from_json

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
  @OVERRIDE@
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
  printf("{\"problem\": \"@PROBLEM@\", \"variant\": \"@VARIANT@\", \"ms\": %.4f, \"p10\": %.4f, \"gbps\": %.1f, \"checksum\": %.6f, \"path\": %d, \"threads_x\": %d, \"row_values\": %d}\n",
         ms[ms.size() / 2], ms[ms.size() / 10], 8.0 * n / (ms[ms.size() / 2] * 1e-3) / 1e9, cs, p.path, p.threads_x, p.row_values);
  return 0;
}
'''


def write_programs(out: Path, problem: str, spec_json: dict, shape: tuple[int, int, int],
                   variants: dict[str, tuple[str, list[tuple[str, str]]]]) -> list[Path]:
    """One OUT/<problem>__<variant>.cu per variant: (plan override statements, text edits of the
    emitted CUDA).  `shape` is the [outer, R, inner] view of the single fp32 input."""
    out.mkdir(parents=True, exist_ok=True)
    spec = spec_from_json(spec_json)
    assert isinstance(spec, ReductionSpec) and all(isinstance(t, TensorArg) for t in spec.inputs)
    source = emit(spec).cuda
    outer, rows, inner = shape
    paths = []
    for variant, (override, edits) in variants.items():
        text = source
        for old, new in edits:
            assert old in text, (problem, variant, old)
            text = text.replace(old, new)
        main_src = (MAIN.replace("@OUTER@", str(outer)).replace("@RR@", str(rows)).replace("@INNER@", str(inner))
                    .replace("@OVERRIDE@", override).replace("@LAUNCH@", f"{spec.name}_launch")
                    .replace("@PROBLEM@", problem).replace("@VARIANT@", variant))
        path = out / f"{problem}__{variant}.cu"
        path.write_text(text + main_src)
        paths.append(path)
    return paths
