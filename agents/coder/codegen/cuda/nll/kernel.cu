#include "../ks_prelude.cuh"

// ---- negative log-likelihood kernel {{name}}: cross_entropy's loss from the row logsumexp, reduction {{reduction}} ----
// Row i of logits x [N, C] (read through its two strides) with target t_i and its logsumexp
// lse_i: loss_i = lse_i - x[i, t_i]; 0 and not counted where t_i == ignore_index; NaN for a
// target outside [0, C) (torch stops with a device assert there).
__device__ __forceinline__ float {{name}}_row(const {{x_t}}* __restrict__ x, const int64_t sx0, const int64_t sx1,
                                              const {{lse_t}}* __restrict__ lse, const int64_t* __restrict__ t,
                                              const int64_t i, const int64_t C, bool& counts) {
  const int64_t target = t[i];
  counts = target != (int64_t)({{ignore_index}});
  if (!counts) return 0.0f;
  if (target < 0 || target >= C) return KS_NAN;
  return ks_to_float(lse[i]) - ks_to_float(x[i * sx0 + target * sx1]);
}

// reduction "none": a thread per row.
__global__ void __launch_bounds__(256) {{name}}_rows(const {{x_t}}* __restrict__ x, const int64_t sx0, const int64_t sx1,
                                                      const {{lse_t}}* __restrict__ lse, const int64_t* __restrict__ t,
                                                      {{out_t}}* __restrict__ out, const int64_t N, const int64_t C) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  bool counts;
  out[i] = ks_from_float<{{out_t}}>({{name}}_row(x, sx0, sx1, lse, t, i, C, counts));
}

// reduction "mean" / "sum": one block of 1024 threads sums the rows in a fixed order (strided
// per thread, then shuffles and shared memory), so the result is the same on every run; the
// mean divides by the rows that count (0 / 0: NaN when every target is ignored, as in torch).
__global__ void __launch_bounds__(1024) {{name}}_total(const {{x_t}}* __restrict__ x, const int64_t sx0, const int64_t sx1,
                                                        const {{lse_t}}* __restrict__ lse, const int64_t* __restrict__ t,
                                                        {{out_t}}* __restrict__ out, const int64_t N, const int64_t C) {
  __shared__ float s_sum[32];
  __shared__ float s_count[32];
  float sum = 0.0f, count = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    bool counts;
    sum += {{name}}_row(x, sx0, sx1, lse, t, i, C, counts);
    count += counts ? 1.0f : 0.0f;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_down_sync(0xffffffffu, sum, o);
    count += __shfl_down_sync(0xffffffffu, count, o);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) { s_sum[warp] = sum; s_count[warp] = count; }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    sum = lane < warps ? s_sum[lane] : 0.0f;
    count = lane < warps ? s_count[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, o);
      count += __shfl_down_sync(0xffffffffu, count, o);
    }
    if (lane == 0) out[0] = ks_from_float<{{out_t}}>({{mean}} ? sum / count : sum);
  }
}

{{launcher_sig}} {
  if ({{mean}} || {{sum}}) {
    {{name}}_total<<<1, 1024, 0, stream>>>(static_cast<const {{x_t}}*>(x), sx0, sx1, static_cast<const {{lse_t}}*>(lse),
                                          static_cast<const int64_t*>(t), static_cast<{{out_t}}*>(out), N, C);
  } else if (N > 0) {
    {{name}}_rows<<<(unsigned)ks_cdiv(N, 256), 256, 0, stream>>>(static_cast<const {{x_t}}*>(x), sx0, sx1,
        static_cast<const {{lse_t}}*>(lse), static_cast<const int64_t*>(t), static_cast<{{out_t}}*>(out), N, C);
  }
}
