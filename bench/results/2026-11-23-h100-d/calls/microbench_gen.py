"""Microbench of reduction-kernel variants: standalone CUDA programs (no torch), built on the dev
VM with nvcc for sm_90a and run on the lent H100.  Each variant = text edits of the emitted kernel
+ a plan override; each program prints one JSON line.

Usage: python microbench_gen.py WORKSPACE OUTDIR, where WORKSPACE/.scratch__gen__<problem>/Model/
plan.json came from `kernelstitch generate` of the four examples below; then build every
OUTDIR/*.cu with `nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o BIN FILE.cu` and run the
binaries on the GPU.  It builds against the codegen of commit 0a6f2a7 (ks_plan_reduction has
taken the opt-in shared memory as an argument since).  This is the call-2 version (variants "new16", "cols*"); call 1 used the
variants described in RUN.md (base, lb3, v16, v16_lb64, v8_lb64: text edits of the MAXV template
argument and __launch_bounds__, with plan.threads_x set to match).
"""
import json
import sys
from pathlib import Path

from kernelstitch.agents.codegen import emit
from kernelstitch.agents.planner.spec_json import spec_from_json

PROBLEMS = {  # name -> (outer, R, inner, operand modes, bytes)
    "log_softmax": (16384, 8192, 1),
    "softmax_temperature": (16384, 8192, 1),
    "layernorm_residual": (16384, 4096, 1),
    "softmax_dim1_3d": (32, 1024, 4096),
}
NF = {"softmax": 2, "log_softmax": 2, "layer_norm": 3}

def variants(problem, name):
    if problem == "softmax_dim1_3d":
        return [("cols16", [], ""), ("cols32", [], "p.threads_x = 32; p.threads_y = 32;"),
                ("cols16_ty64", [], "p.threads_y = 64;")]
    return [("new16", [], "")]

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
  const int NIN = @NINPUTS@;
  int sms = ks_sm_count();
  std::vector<float*> ins(NIN); std::vector<KsOperand> descs(NIN);
  for (int k = 0; k < NIN; ++k) {
    const bool vecop = MODES[k] == KS_ROW;
    const int64_t m = vecop ? R : n;
    CK(cudaMalloc(&ins[k], m * 4));
    ks_fill<<<1024, 256>>>(ins[k], m, 1234u + k);
    KsOperand d{}; d.mode = MODES[k]; d.rank = 1; d.div = 1; d.mod = vecop ? R : n; d.size[0] = m; d.stride[0] = 1;
    descs[k] = d;
  }
  float* out; CK(cudaMalloc(&out, n * 4));
  KsRedPlan p = ks_plan_reduction(outer, R, inner, sms, @NF@, true, false);
  @OVERRIDE@
  float* ws = nullptr; if (p.workspace_floats) CK(cudaMalloc(&ws, p.workspace_floats * 4));
  const int vec = (p.path <= KS_PATH_ROW_BLOCK && R % 4 == 0) ? 4 : 1;
  const void* const* ip = (const void* const*)ins.data();
  for (int w = 0; w < 3; ++w) @LAUNCH@(ip, descs.data(), out, ws, outer, R, inner, p, vec, 0);
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms;
  for (int it = 0; it < 30; ++it) {
    cudaEventRecord(a); @LAUNCH@(ip, descs.data(), out, ws, outer, R, inner, p, vec, 0); cudaEventRecord(b);
    cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); ms.push_back(t);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  // checksum of a few output values, to compare variants
  std::vector<float> h(4096); CK(cudaMemcpy(h.data(), out + (n / 2), 4096 * 4, cudaMemcpyDeviceToHost));
  double cs = 0; for (float v : h) cs += v;
  int regs = 0; cudaFuncAttributes fa; if (cudaFuncGetAttributes(&fa, @KERNEL@) == cudaSuccess) regs = fa.numRegs;
  int per_sm = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, @KERNEL@, @THREADS@, @SMEM@);
  printf("{\"problem\": \"@PROBLEM@\", \"variant\": \"@VARIANT@\", \"ms\": %.4f, \"p10\": %.4f, \"bytes\": %lld, \"checksum\": %.6f, \"regs\": %d, \"blocks_per_sm\": %d, \"path\": %d, \"threads_x\": %d, \"threads_y\": %d}\n",
         ms[ms.size() / 2], ms[ms.size() / 10], (long long)@BYTES@, cs, regs, per_sm, p.path, p.threads_x, p.threads_y);
  return 0;
}
'''

def main(root, outdir):
    root, outdir = Path(root), Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for problem, (outer, R, inner) in PROBLEMS.items():
        plan = json.loads((root / f".scratch__gen__{problem}/Model/plan.json").read_text())
        spec = spec_from_json(plan["steps"][0]["spec"])
        src = emit(spec).cuda
        name = spec.name
        special = {spec.weight, spec.bias}
        modes = ["KS_ROW" if t.name in special else "KS_FULL" for t in spec.inputs]
        n = outer * R * inner
        nbytes = sum(4 * (R if m == "KS_ROW" else n) for m in modes) + 4 * n
        modes_decl = "static const int kModes[] = {" + ", ".join(modes) + "};\n"
        for vname, edits, override in variants(problem, name):
            text = src
            for a, b in edits:
                assert a in text, (problem, vname, a)
                text = text.replace(a, b)
            if problem == "softmax_dim1_3d":
                kernel, threads, smem = (f"{name}_cols", "1024", "R * 128") if vname == "cols" else (f"{name}_tile", "256", "0")
            else:
                kernel = f"{name}_row<4, 4, false, 2>"
                threads, smem = "p.threads_x", "0"
            main_src = (MAIN.replace("@OUTER@", str(outer)).replace("@RR@", str(R)).replace("@INNER@", str(inner))
                        .replace("@NINPUTS@", str(len(modes))).replace("MODES[k]", "kModes[k]").replace("int main() {", modes_decl + "int main() {")
                        .replace("@OVERRIDE@", override).replace("@LAUNCH@", f"{name}_launch").replace("@NF@", str(NF[spec.kind]))
                        .replace("@KERNEL@", kernel).replace("@THREADS@", threads).replace("@SMEM@", smem)
                        .replace("@PROBLEM@", problem).replace("@VARIANT@", vname).replace("@BYTES@", str(nbytes)))
            path = outdir / f"{problem}__{vname}.cu"
            path.write_text(text + main_src)
            jobs.append(path)
    print("\n".join(str(j) for j in jobs))

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
