
#ifndef KS_CLUSTER_H
#define KS_CLUSTER_H
#include <cooperative_groups.h>
// (max, sum of exp(x - max)) pairs, merged NaN-propagating (ks_max) like the row kernels.  The
// kernel below computes in fast math (__expf: within 2 + 1.16|x| ulp; x - max <= 0), a reciprocal
// multiply for the softmax division and fmaxf (a NaN still poisons its column through the sum):
// with the accurate expf, ks_max and a division the kernel ran at 63% of the copy bandwidth on the
// H100, 83% like this (bench/results/2026-11-24-h100/RUN.md).
__device__ __forceinline__ float2 ks_lse_merge(float2 a, float2 b) {
  const float m = ks_max(a.x, b.x);
  if (m == -KS_INF) return make_float2(m, 0.f);
  return make_float2(m, a.y * {{exp}}(a.x - m) + b.y * {{exp}}(b.x - m));
}
#endif  // KS_CLUSTER_H

// Softmax kinds along a strided dim on sm_90+: see agents/coder/codegen/cluster_cols.py.
// Min blocks {{minb}}: 5 is a 96-register cap at cluster_shape's 128 threads (ptxas took 108 otherwise:
// 4 CTAs per SM instead of 5, 0.65 instead of 0.57 ms in the microbenchmark), for fp32 kernels
// without prologue or epilogue ops; else 4 (128 registers): under 96, x / T spilled 28 bytes and
// an fp16 softmax 4.
// FULL: every operand is a contiguous full-size tensor (the common case), read with plain 16-byte
// loads; the descriptor switch of ks_load otherwise (its branches per load doubled the kernel's
// code: 0.60 instead of 0.57 ms before the fast math, in the microbenchmark).
template <int VEC, int TXV, int TYR, int RPT, bool FULL>
__global__ void __launch_bounds__({{launch_bounds}})
{{name}}_cluster({{params}}, {{out_t}}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int W = VEC * TXV;
  __shared__ float2 part[TYR][W + 1];
  __shared__ float2 cta_stat[W];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int C = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int tx = threadIdx.x % TXV, ty = threadIdx.x / TXV;
  const int64_t strips = ks_div(inner + W - 1, W);
  const int64_t strip = (int64_t)(blockIdx.x / (unsigned)C);
  const int64_t o = ks_div(strip, strips);
  const int64_t c0 = (strip - o * strips) * W + tx * VEC;
  const bool live = c0 < inner;  // inner % VEC == 0: all VEC columns or none
  const int Ri = (int)R;
  const int r0 = rank * TYR * RPT + ty;
  const int64_t base = o * R * inner + c0;
  float v[RPT][VEC];
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < Ri) {
      const int64_t idx = base + (int64_t)r * inner;
      {{loads}}
#pragma unroll
      for (int q = 0; q < VEC; ++q) {{pro_call}}
    } else {
#pragma unroll
      for (int q = 0; q < VEC; ++q) v[j][q] = -KS_INF;
    }
  }
#pragma unroll
  for (int q = 0; q < VEC; ++q) {
    float m = -KS_INF;
#pragma unroll
    for (int j = 0; j < RPT; ++j) m = {{max}}(m, v[j][q]);  // a NaN reaches the sum instead
    const float ms = m == -KS_INF ? 0.f : m;  // all -inf: sum is 0, no inf - inf
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < RPT; ++j) s += {{exp}}(v[j][q] - ms);
    part[ty][tx * VEC + q] = make_float2(m, s);
  }
  __syncthreads();
  if (threadIdx.x < W) {  // one thread per column: this CTA's rows
    float2 a = make_float2(-KS_INF, 0.f);
    for (int k = 0; k < TYR; ++k) a = ks_lse_merge(a, part[k][threadIdx.x]);
    cta_stat[threadIdx.x] = a;
  }
  cluster.sync();
  if (threadIdx.x < W) {  // one thread per column reads the peers (distributed shared memory)
    float2 a = make_float2(-KS_INF, 0.f);
    for (int k = 0; k < C; ++k) a = ks_lse_merge(a, cluster.map_shared_rank(cta_stat, k)[threadIdx.x]);
    part[0][threadIdx.x] = a;  // row 0 of part is free: its merge above is done
  }
  __syncthreads();
  float ms[VEC], s1[VEC];
#pragma unroll
  for (int q = 0; q < VEC; ++q) {
    const float2 t = part[0][tx * VEC + q];
    ms[q] = t.x == -KS_INF ? 0.f : t.x;
    s1[q] = {{s1}};
  }
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < Ri) {
      const int64_t idx = base + (int64_t)r * inner;
      {{e_loads}}
      float yv[VEC];
#pragma unroll
      for (int q = 0; q < VEC; ++q) { yv[q] = {{y}}; {{epi}} }
      ks_st_vec<VEC>(out + idx, yv);
    }
  }
  cluster.sync();  // peers may still be reading cta_stat
#endif
}

