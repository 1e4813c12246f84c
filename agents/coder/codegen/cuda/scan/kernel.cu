#include "../ks_prelude.cuh"

// ---- scan kernel {{name}}: cumulative {{kind}} along one dim{{reverse_note}}{{exclusive_note}} ----
{{value_fn}}
__device__ __forceinline__ float {{name}}_op(float a, float b) { return {{combine}}; }


// Rows along the contiguous dim (inner == 1): a warp per row, 4 consecutive values per lane per
// 128-value chunk; a lane-local scan, a warp scan of the lane totals (shuffles), and the carry of
// the chunks before.
__global__ void __launch_bounds__(256) {{name}}_rows({{params}}, {{out_t}}* __restrict__ out,
                                                      const int64_t rows, const int64_t R) {
  const unsigned full = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;  // whole warps leave together: the shuffles below see full warps
  const int64_t base = row * R;
  float carry = {{identity}};
  for (int64_t c0 = 0; c0 < R; c0 += 128) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = c0 + lane * 4 + j;
      v[j] = k < R ? {{name}}_value({{args}}, base + ({{reverse}} ? R - 1 - k : k)) : {{identity}};
    }
#pragma unroll
    for (int j = 1; j < 4; ++j) v[j] = {{name}}_op(v[j - 1], v[j]);
    float t = v[3];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float n = __shfl_up_sync(full, t, o);
      if (lane >= o) t = {{name}}_op(n, t);
    }
    float before = __shfl_up_sync(full, t, 1);
    before = {{name}}_op(carry, lane == 0 ? {{identity}} : before);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t k = c0 + lane * 4 + j;
      // exclusive: the lane's values before j (the identity's combine for j == 0 is `before` itself)
      const float y = {{exclusive}} ? (j == 0 ? before : {{name}}_op(before, v[j > 0 ? j - 1 : 0])) : {{name}}_op(before, v[j]);
      if (k < R) out[base + ({{reverse}} ? R - 1 - k : k)] = ks_from_float<{{out_t}}>(y);
    }
    carry = {{name}}_op(carry, __shfl_sync(full, t, 31));
  }
}

// A strided dim (inner > 1): a thread per (outer, inner) column walks R; neighbouring threads
// read neighbouring columns.
__global__ void __launch_bounds__(256) {{name}}_cols({{params}}, {{out_t}}* __restrict__ out,
                                                      const int64_t outer, const int64_t R,
                                                      const int64_t inner) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= outer * inner) return;
  const int64_t o = t / inner, c = t - o * inner;
  float acc = {{identity}};
  for (int64_t r = 0; r < R; ++r) {
    const int64_t i = (o * R + ({{reverse}} ? R - 1 - r : r)) * inner + c;
    const float before = acc;  // exclusive: stored before this position's value is combined
    acc = {{name}}_op(acc, {{name}}_value({{args}}, i));
    out[i] = ks_from_float<{{out_t}}>({{exclusive}} ? before : acc);
  }
}

{{launcher_sig}} {
  if (outer <= 0 || R <= 0 || inner <= 0) return;
  if (inner == 1) {
    {{name}}_rows<<<(unsigned)ks_cdiv(outer, 8), 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), outer, R);
  } else {
    {{name}}_cols<<<(unsigned)ks_cdiv(outer * inner, 256), 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), outer, R, inner);
  }
}
