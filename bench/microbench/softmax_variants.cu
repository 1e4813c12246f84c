// Microbench of softmax-family kernel designs for the two shapes the bench leaves under 80% of
// DRAM bandwidth (bench/results/2026-11-23-h100-d): rows of R = 8192 fp32 (log_softmax,
// softmax_temperature) and a softmax over the middle dim of [32, 1024, 4096] (softmax_dim1_3d).
// Standalone (no torch): build with
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o softmax_variants softmax_variants.cu
// Each variant is checked against a float64 reference kernel on fresh pseudo-random inputs (max
// abs error printed), the output is poisoned before every checked run, and timed with events
// (median of 50, 3 warm-ups; inputs 512 MiB, far over L2).  One JSON line per variant.
//
// Designs:
//  row_bulk<T, S>   persistent block per SM slot, S-stage ring of shared-memory row buffers, each
//                   row fetched with ONE cp.async.bulk (TMA, no tensor map) completing on an
//                   mbarrier; statistics and output from shared memory; loads of the next rows
//                   are in flight while a row is reduced and written.
//  row_cluster<T, V, C>  a cluster of C CTAs splits each row; every thread keeps V float4 in
//                   registers; (max, sum) pairs merged over the cluster through distributed
//                   shared memory; one read, one write.
//  col_cluster<TXV, TYR, RPT>  softmax along a strided dim: a cluster owns a strip of 4*TXV inner
//                   columns x all R rows; each CTA keeps RPT rows x float4 per thread in registers;
//                   per-column (max, sum) merged over the cluster through distributed shared memory.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      printf("{\"error\": \"%s\", \"line\": %d}\n", cudaGetErrorString(e_), __LINE__);         \
      return false;                                                                            \
    }                                                                                          \
  } while (0)

// The fused prologue of the bench problems: log_softmax(x * 2 - 0.5) / softmax(x / 0.7).
struct Pro {
  float scale, shift;
  __device__ __forceinline__ float operator()(float x) const { return fmaf(x, scale, -shift); }
};

// ---- (max, sum) pairs ----
struct MS {
  float m, s;
};
__device__ __forceinline__ MS ms_merge(MS a, MS b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}
__device__ __forceinline__ MS warp_merge(MS v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MS w{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = ms_merge(v, w);
  }
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- mbarrier + bulk copy (sm_90) ----
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t phase) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(phase)
        : "memory");
  }
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

template <int T>
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (l == 0) red[w] = v;
  __syncthreads();
  v = l < T / 32 ? red[l] : -INFINITY;
  v = warp_max(v);
  __syncthreads();  // red is reused by the next reduction
  return v;
}
template <int T>
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (l == 0) red[w] = v;
  __syncthreads();
  v = l < T / 32 ? red[l] : 0.f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// LOG: log_softmax, else softmax.  R % 4 == 0 and rows 16-byte aligned (the host checks).
template <int T, int S, bool LOG>
__global__ void __launch_bounds__(T) row_bulk(const float* __restrict__ x, float* __restrict__ out,
                                              const int64_t rows, const int R, const Pro pro) {
  extern __shared__ __align__(128) float buf[];  // S * R floats
  __shared__ __align__(8) uint64_t bar[S];
  __shared__ float red[32];
  const int tid = threadIdx.x;
  const uint32_t bytes = (uint32_t)R * 4u;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) mbar_init(&bar[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int64_t r = (int64_t)blockIdx.x + (int64_t)s * gridDim.x;
      if (r < rows) {
        mbar_expect_tx(&bar[s], bytes);
        bulk_load(buf + (size_t)s * R, x + r * R, bytes, &bar[s]);
      }
    }
  }
  const int nv = R >> 2;
  int it = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, ++it) {
    const int s = it % S;
    mbar_wait(&bar[s], (uint32_t)(it / S) & 1u);
    const float4* b4 = reinterpret_cast<const float4*>(buf + (size_t)s * R);
    float m = -INFINITY;
    for (int k = tid; k < nv; k += T) {
      const float4 v = b4[k];
      m = fmaxf(m, fmaxf(fmaxf(pro(v.x), pro(v.y)), fmaxf(pro(v.z), pro(v.w))));
    }
    m = block_max<T>(m, red);
    const float ms = m == -INFINITY ? 0.f : m;
    float sum = 0.f;
    for (int k = tid; k < nv; k += T) {
      const float4 v = b4[k];
      sum += __expf(pro(v.x) - ms) + __expf(pro(v.y) - ms) + __expf(pro(v.z) - ms) + __expf(pro(v.w) - ms);
    }
    sum = block_sum<T>(sum, red);
    const float inv = 1.f / sum, ls = __logf(sum);
    float4* o4 = reinterpret_cast<float4*>(out + row * R);
    for (int k = tid; k < nv; k += T) {
      const float4 v = b4[k];
      float4 y;
      if (LOG) {
        y = make_float4(pro(v.x) - ms - ls, pro(v.y) - ms - ls, pro(v.z) - ms - ls, pro(v.w) - ms - ls);
      } else {
        y = make_float4(__expf(pro(v.x) - ms) * inv, __expf(pro(v.y) - ms) * inv, __expf(pro(v.z) - ms) * inv,
                        __expf(pro(v.w) - ms) * inv);
      }
      o4[k] = y;
    }
    __syncthreads();  // every thread is done with buffer s: refill it
    if (tid == 0) {
      const int64_t nxt = row + (int64_t)S * gridDim.x;
      if (nxt < rows) {
        mbar_expect_tx(&bar[s], bytes);
        bulk_load(buf + (size_t)s * R, x + nxt * R, bytes, &bar[s]);
      }
    }
  }
}

// A cluster of C CTAs (T threads, V float4 each) per row: R == C * T * V * 4 (host checks).
template <int T, int V, bool LOG>
__global__ void __launch_bounds__(T) row_cluster(const float* __restrict__ x, float* __restrict__ out,
                                                 const int64_t rows, const int R, const Pro pro) {
  __shared__ MS red[32];
  __shared__ MS cta_stat;
  cg::cluster_group cluster = cg::this_cluster();
  const int C = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x / C;
  if (row >= rows) return;  // whole clusters only (grid = rows * C)
  const float4* x4 = reinterpret_cast<const float4*>(x + row * R) + (size_t)rank * T * V;
  float v[V][4];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float4 t = __ldg(x4 + j * T + tid);
    v[j][0] = pro(t.x); v[j][1] = pro(t.y); v[j][2] = pro(t.z); v[j][3] = pro(t.w);
  }
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < V; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) m = fmaxf(m, v[j][q]);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < V; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) s += __expf(v[j][q] - m);
  MS p = warp_merge({m, s});
  if ((tid & 31) == 0) red[tid >> 5] = p;
  __syncthreads();
  if (tid < 32) {
    MS q = tid < T / 32 ? red[tid] : MS{-INFINITY, 0.f};
    q = warp_merge(q);
    if (tid == 0) cta_stat = q;
  }
  cluster.sync();
  MS tot{-INFINITY, 0.f};
  for (int r = 0; r < C; ++r) tot = ms_merge(tot, *cluster.map_shared_rank(&cta_stat, r));
  const float ms = tot.m == -INFINITY ? 0.f : tot.m;
  const float inv = 1.f / tot.s, ls = __logf(tot.s);
  float4* o4 = reinterpret_cast<float4*>(out + row * R) + (size_t)rank * T * V;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float y[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) y[q] = LOG ? v[j][q] - ms - ls : __expf(v[j][q] - ms) * inv;
    o4[j * T + tid] = make_float4(y[0], y[1], y[2], y[3]);
  }
  cluster.sync();  // peers may still read cta_stat
}

// Softmax over R of [outer, R, inner]: a cluster of C CTAs per (o, strip of 4*TXV columns); CTA
// `rank` covers rows [rank * TYR * RPT, (rank + 1) * TYR * RPT).  inner % 4 == 0 (host checks).
template <int TXV, int TYR, int RPT>
__global__ void __launch_bounds__(TXV * TYR) col_cluster(const float* __restrict__ x, float* __restrict__ out,
                                                         const int64_t outer, const int R, const int64_t inner) {
  constexpr int W = 4 * TXV;
  __shared__ MS part[TYR][W + 1];
  __shared__ MS cta_stat[W];
  cg::cluster_group cluster = cg::this_cluster();
  const int C = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int tx = threadIdx.x % TXV, ty = threadIdx.x / TXV;
  const int64_t strips = (inner + W - 1) / W;
  const int64_t strip = blockIdx.x / C;
  const int64_t o = strip / strips;
  const int64_t c0 = (strip - o * strips) * W + tx * 4;
  const bool live = o < outer && c0 < inner;  // inner % 4 == 0: all 4 columns or none
  const int r0 = rank * TYR * RPT + ty;
  const float* xb = x + o * R * inner + c0;
  float v[RPT][4];
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < R) {
      const float4 t = __ldg(reinterpret_cast<const float4*>(xb + (int64_t)r * inner));
      v[j][0] = t.x; v[j][1] = t.y; v[j][2] = t.z; v[j][3] = t.w;
    } else {
      v[j][0] = v[j][1] = v[j][2] = v[j][3] = -INFINITY;
    }
  }
  MS st[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < RPT; ++j) m = fmaxf(m, v[j][q]);
    float s = 0.f;
    const float ms = m == -INFINITY ? 0.f : m;
#pragma unroll
    for (int j = 0; j < RPT; ++j) s += __expf(v[j][q] - ms);
    st[q] = {m, s};
    part[ty][tx * 4 + q] = st[q];
  }
  __syncthreads();
  if (threadIdx.x < W) {  // one thread per column merges the TYR partials of this CTA
    MS a{-INFINITY, 0.f};
    for (int k = 0; k < TYR; ++k) a = ms_merge(a, part[k][threadIdx.x]);
    cta_stat[threadIdx.x] = a;
  }
  cluster.sync();
  // One thread per column gathers the C peers' partials into local shared memory (every thread
  // reading every peer multiplied the distributed-shared-memory traffic by TYR: call 1).
  if (threadIdx.x < W) {
    MS a{-INFINITY, 0.f};
    for (int r = 0; r < C; ++r) a = ms_merge(a, cluster.map_shared_rank(cta_stat, r)[threadIdx.x]);
    part[0][threadIdx.x] = a;  // part[0] is free again: this CTA's merge above is done
  }
  __syncthreads();
  MS tot[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) tot[q] = part[0][tx * 4 + q];
  float ms[4], inv[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    ms[q] = tot[q].m == -INFINITY ? 0.f : tot[q].m;
    inv[q] = 1.f / tot[q].s;
  }
  float* ob = out + o * R * inner + c0;
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < R) {
      float4 y = make_float4(__expf(v[j][0] - ms[0]) * inv[0], __expf(v[j][1] - ms[1]) * inv[1],
                             __expf(v[j][2] - ms[2]) * inv[2], __expf(v[j][3] - ms[3]) * inv[3]);
      *reinterpret_cast<float4*>(ob + (int64_t)r * inner) = y;
    }
  }
  cluster.sync();  // peers may still read cta_stat
}


// Softmax over R of [outer, R, inner], no cluster: a block owns a strip of 4*TXV columns x all
// R rows.  Pass 1 keeps online (max, sum) per column; pass 2 re-reads the strip (expected from
// L2: blocks per SM x strip bytes stays small) and writes.  U loads in flight per thread.
template <int TXV, int TYR, int U>
__global__ void __launch_bounds__(TXV * TYR) col_l2(const float* __restrict__ x, float* __restrict__ out,
                                                    const int64_t outer, const int R, const int64_t inner) {
  constexpr int W = 4 * TXV;
  __shared__ MS part[TYR][W + 1];
  const int tx = threadIdx.x % TXV, ty = threadIdx.x / TXV;
  const int64_t strips = (inner + W - 1) / W;
  const int64_t o = blockIdx.x / strips;
  const int64_t c0 = (blockIdx.x - o * strips) * W + tx * 4;
  const bool live = c0 < inner;
  const float* xb = x + o * R * inner + c0;
  MS st[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) st[q] = {-INFINITY, 0.f};
  for (int r0 = ty; r0 < R; r0 += U * TYR) {
    float v[U][4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = r0 + u * TYR;
      if (live && r < R) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(xb + (int64_t)r * inner));
        v[u][0] = t.x; v[u][1] = t.y; v[u][2] = t.z; v[u][3] = t.w;
      } else {
        v[u][0] = v[u][1] = v[u][2] = v[u][3] = -INFINITY;
      }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float m = st[q].m;
#pragma unroll
      for (int u = 0; u < U; ++u) m = fmaxf(m, v[u][q]);
      const float ms = m == -INFINITY ? 0.f : m;
      float s = st[q].m == -INFINITY ? 0.f : st[q].s * __expf(st[q].m - ms);
#pragma unroll
      for (int u = 0; u < U; ++u) s += __expf(v[u][q] - ms);
      st[q] = {m, s};
    }
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) part[ty][tx * 4 + q] = st[q];
  __syncthreads();
  if (threadIdx.x < W) {
    MS a{-INFINITY, 0.f};
    for (int k = 0; k < TYR; ++k) a = ms_merge(a, part[k][threadIdx.x]);
    part[0][threadIdx.x] = a;  // read after the barrier below; row 0 was merged first
  }
  __syncthreads();
  float ms[4], inv[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const MS t = part[0][tx * 4 + q];
    ms[q] = t.m == -INFINITY ? 0.f : t.m;
    inv[q] = 1.f / t.s;
  }
  float* ob = out + o * R * inner + c0;
  if (live) {
#pragma unroll 4
    for (int r = ty; r < R; r += TYR) {
      const float4 t = __ldg(reinterpret_cast<const float4*>(xb + (int64_t)r * inner));
      *reinterpret_cast<float4*>(ob + (int64_t)r * inner) =
          make_float4(__expf(t.x - ms[0]) * inv[0], __expf(t.y - ms[1]) * inv[1], __expf(t.z - ms[2]) * inv[2],
                      __expf(t.w - ms[3]) * inv[3]);
    }
  }
}

// ---- references (float64, one thread per row / column) ----
__global__ void ref_rows(const float* x, double* out, int64_t rows, int R, Pro pro, bool log_) {
  const int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = x + row * R;
  double m = -INFINITY;
  for (int i = 0; i < R; ++i) m = fmax(m, (double)pro(p[i]));
  double s = 0;
  for (int i = 0; i < R; ++i) s += exp((double)pro(p[i]) - m);
  for (int i = 0; i < R; ++i) {
    const double y = (double)pro(p[i]) - m;
    out[row * R + i] = log_ ? y - log(s) : exp(y) / s;
  }
}
__global__ void ref_cols(const float* x, double* out, int64_t outer, int R, int64_t inner) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= outer * inner) return;
  const int64_t o = c / inner, i = c % inner;
  const float* p = x + o * R * inner + i;
  double m = -INFINITY;
  for (int r = 0; r < R; ++r) m = fmax(m, (double)p[(int64_t)r * inner]);
  double s = 0;
  for (int r = 0; r < R; ++r) s += exp((double)p[(int64_t)r * inner] - m);
  for (int r = 0; r < R; ++r) out[o * R * inner + (int64_t)r * inner + i] = exp((double)p[(int64_t)r * inner] - m) / s;
}
__global__ void fill(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15; h *= 0x27d4eb2du; h ^= h >> 16;
    p[i] = ((h & 0xffffff) / 16777216.0f) * 8.f - 4.f;
  }
}
__global__ void max_err(const float* a, const double* b, int64_t n, unsigned long long* worst_bits, unsigned* nan) {
  double w = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = a[i];
    if (!(v == v) || isinf(v)) { atomicAdd(nan, 1u); continue; }
    w = fmax(w, fabs((double)v - b[i]));
  }
  atomicMax(worst_bits, (unsigned long long)__double_as_longlong(w));  // non-negative: order-preserving
}

struct Case {
  const char* problem;
  int64_t outer, R, inner;
  bool log_;
  Pro pro;
};

template <typename Launch>
static bool run_variant(const Case& c, const char* variant, float* x, float* out, double* ref, Launch launch) {
  const int64_t n = c.outer * c.R * c.inner;
  // correctness on a fresh input, poisoned output
  fill<<<2048, 256>>>(x, n, 0x9e3779b9u ^ (uint32_t)strlen(variant));
  CK(cudaMemset(out, 0xff, n * 4));  // NaN poison: unwritten elements are counted
  CK(launch());
  if (c.inner == 1) ref_rows<<<(unsigned)((c.outer + 127) / 128), 128>>>(x, ref, c.outer, (int)c.R, c.pro, c.log_);
  else ref_cols<<<(unsigned)((c.outer * c.inner + 127) / 128), 128>>>(x, ref, c.outer, (int)c.R, c.inner);
  unsigned long long* worst; unsigned* nan;  // plain device memory (no managed allocations)
  CK(cudaMalloc(&worst, 8)); CK(cudaMalloc(&nan, 4));
  CK(cudaMemset(worst, 0, 8)); CK(cudaMemset(nan, 0, 4));
  max_err<<<2048, 256>>>(out, ref, n, worst, nan);
  CK(cudaDeviceSynchronize());
  unsigned long long worst_h = 0; unsigned bad = 0;
  CK(cudaMemcpy(&worst_h, worst, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&bad, nan, 4, cudaMemcpyDeviceToHost));
  double err; memcpy(&err, &worst_h, 8);
  cudaFree(worst); cudaFree(nan);
  fill<<<2048, 256>>>(x, n, 12345u);
  for (int w = 0; w < 3; ++w) CK(launch());
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms;
  for (int it = 0; it < 50; ++it) {
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t; cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  const double bytes = 8.0 * (double)n;
  printf("{\"problem\": \"%s\", \"variant\": \"%s\", \"ms\": %.4f, \"p10\": %.4f, \"p90\": %.4f, \"gbps\": %.1f, "
         "\"max_abs_err\": %.3e, \"nonfinite\": %u}\n",
         c.problem, variant, ms[ms.size() / 2], ms[ms.size() / 10], ms[ms.size() * 9 / 10],
         bytes / (ms[ms.size() / 2] * 1e-3) / 1e9, err, bad);
  fflush(stdout);
  return true;
}

template <typename K>
static int occupancy(K kernel, int threads, size_t smem) {
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem);
  return per_sm;
}

// `grid` CTAs of `block` threads in clusters of C along x.
template <typename K, typename... Args>
static cudaError_t launch_clusters(K kernel, int64_t grid, int block, int C, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)grid);
  cfg.blockDim = dim3(block);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = C; attr[0].val.clusterDim.y = 1; attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr; cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <int T, int S, bool LOG>
static bool bench_row_bulk(const Case& c, float* x, float* out, double* ref, int sms) {
  auto k = row_bulk<T, S, LOG>;
  const size_t smem = (size_t)S * c.R * 4;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int per_sm = occupancy(k, T, smem);
  const int64_t blocks = std::min<int64_t>((int64_t)per_sm * sms, c.outer);
  char name[64]; snprintf(name, sizeof name, "row_bulk_t%d_s%d_b%d", T, S, per_sm);
  return run_variant(c, name, x, out, ref, [&]() {
    k<<<(unsigned)blocks, T, smem>>>(x, out, c.outer, (int)c.R, c.pro);
    return cudaGetLastError();
  });
}

template <int T, int V, bool LOG>
static bool bench_row_cluster(const Case& c, float* x, float* out, double* ref) {
  const int C = (int)(c.R / (T * V * 4));
  if ((int64_t)C * T * V * 4 != c.R || C < 1 || C > 8) return true;
  auto k = row_cluster<T, V, LOG>;
  char name[64]; snprintf(name, sizeof name, "row_cluster_t%d_v%d_c%d", T, V, C);
  return run_variant(c, name, x, out, ref, [&]() {
    return launch_clusters(k, c.outer * C, T, C, (const float*)x, out, c.outer, (int)c.R, c.pro);
  });
}

template <int TXV, int TYR, int RPT>
static bool bench_col_cluster(const Case& c, float* x, float* out, double* ref) {
  const int per_cta = TYR * RPT;
  const int C = (int)((c.R + per_cta - 1) / per_cta);
  if (C > 16) return true;
  auto k = col_cluster<TXV, TYR, RPT>;
  if (C > 8) CK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  const int64_t strips = c.outer * ((c.inner + 4 * TXV - 1) / (4 * TXV));
  char name[64]; snprintf(name, sizeof name, "col_cluster_w%d_ty%d_rpt%d_c%d", 4 * TXV, TYR, RPT, C);
  return run_variant(c, name, x, out, ref, [&]() {
    return launch_clusters(k, strips * C, TXV * TYR, C, (const float*)x, out, c.outer, (int)c.R, c.inner);
  });
}


template <int TXV, int TYR, int U>
static bool bench_col_l2(const Case& c, float* x, float* out, double* ref) {
  auto k = col_l2<TXV, TYR, U>;
  const int64_t blocks = c.outer * ((c.inner + 4 * TXV - 1) / (4 * TXV));
  const int per_sm = occupancy(k, TXV * TYR, 0);
  char name[64]; snprintf(name, sizeof name, "col_l2_w%d_ty%d_u%d_b%d", 4 * TXV, TYR, U, per_sm);
  return run_variant(c, name, x, out, ref, [&]() {
    k<<<(unsigned)blocks, TXV * TYR>>>(x, out, c.outer, (int)c.R, c.inner);
    return cudaGetLastError();
  });
}

static bool memcpy_bw(float* a, float* b, int64_t n) {
  for (int w = 0; w < 3; ++w) CK(cudaMemcpy(b, a, n * 4, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  float best = 1e9;
  for (int it = 0; it < 10; ++it) {
    cudaEventRecord(e0); cudaMemcpy(b, a, n * 4, cudaMemcpyDeviceToDevice); cudaEventRecord(e1);
    cudaEventSynchronize(e1); float t; cudaEventElapsedTime(&t, e0, e1); best = std::min(best, t);
  }
  printf("{\"problem\": \"memcpy\", \"ms\": %.4f, \"gbps\": %.1f}\n", best, 8.0 * n / (best * 1e-3) / 1e9);
  return true;
}

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : "";
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t n = 16384LL * 8192;  // 512 MiB of fp32: every case has this many elements
  float *x, *out; double* ref;
  CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&out, n * 4)); CK(cudaMalloc(&ref, n * 8));
  memcpy_bw(x, out, n);
  const Case ls{"log_softmax", 16384, 8192, 1, true, {2.0f, 0.5f}};
  const Case st{"softmax_temperature", 16384, 8192, 1, false, {1.0f / 0.7f, 0.f}};
  const Case sd{"softmax_dim1_3d", 32, 1024, 4096, false, {1.f, 0.f}};
  for (const Case* c : {&ls, &st}) {
    if (*only && !strstr(c->problem, only)) continue;
    const bool L = c->log_;
#define ROWS(T, S) (L ? bench_row_bulk<T, S, true>(*c, x, out, ref, sms) : bench_row_bulk<T, S, false>(*c, x, out, ref, sms))
#define ROWC(T, V) (L ? bench_row_cluster<T, V, true>(*c, x, out, ref) : bench_row_cluster<T, V, false>(*c, x, out, ref))
    ROWS(256, 2); ROWS(256, 3); ROWS(512, 2); ROWS(128, 2); ROWS(1024, 2);
    ROWC(256, 4); ROWC(256, 2); ROWC(512, 2); ROWC(128, 4); ROWC(256, 8);
  }
  if (!*only || strstr(sd.problem, only)) {
    bench_col_cluster<16, 16, 8>(sd, x, out, ref);   // W 64, 256 threads, 32 values, C 8
    bench_col_cluster<8, 32, 4>(sd, x, out, ref);    // W 32, 256 threads, 16 values, C 8
    bench_col_cluster<16, 32, 8>(sd, x, out, ref);   // W 64, 512 threads, 32 values, C 4
    bench_col_cluster<16, 16, 16>(sd, x, out, ref);  // W 64, 256 threads, 64 values, C 4
    bench_col_cluster<8, 32, 8>(sd, x, out, ref);    // W 32, 256 threads, 32 values, C 4
    bench_col_cluster<8, 16, 16>(sd, x, out, ref);   // W 32, 128 threads, 64 values, C 4
    bench_col_cluster<32, 8, 8>(sd, x, out, ref);    // W 128, 256 threads, 32 values, C 16
    bench_col_cluster<4, 64, 4>(sd, x, out, ref);    // W 16, 256 threads, 16 values, C 4
    bench_col_l2<8, 32, 8>(sd, x, out, ref);         // W 32, 256 threads
    bench_col_l2<4, 64, 8>(sd, x, out, ref);         // W 16, 256 threads
    bench_col_l2<16, 16, 8>(sd, x, out, ref);        // W 64, 256 threads
    bench_col_l2<8, 64, 8>(sd, x, out, ref);         // W 32, 512 threads
  }
  return 0;
}
