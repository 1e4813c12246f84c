#include "../ks_prelude.cuh"

// ---- arg-reduce kernel {{name}}: {{kind}} along one dim ----
{{value_fn}}


// Whether (v, iv) wins over the best so far (b, ib): the {{kind}} as torch defines it. A NaN wins
// over every number; between equal values (or two NaNs) the lower index wins.
__device__ __forceinline__ bool {{name}}_wins(float v, int64_t iv, float b, int64_t ib) {
  const bool vn = isnan(v), bn = isnan(b);
  if (vn || bn) return vn && (!bn || iv < ib);
  return v {{cmp}} b || (v == b && iv < ib);
}

// (best, index) of a warp, combined by shuffles; lanes that saw nothing hold index -1 (loses).
__device__ __forceinline__ void {{name}}_warp(float& b, int64_t& ib) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_down_sync(0xffffffffu, b, o);
    const int64_t iv = __shfl_down_sync(0xffffffffu, ib, o);
    if (iv >= 0 && (ib < 0 || {{name}}_wins(v, iv, b, ib))) { b = v; ib = iv; }
  }
}

// Rows along the contiguous dim (inner == 1): a block of blockDim.x (32..256) threads per row;
// thread t reads t, t + blockDim.x, ... (4 loads in flight), warps combine by shuffles, the
// block through shared memory.
__global__ void __launch_bounds__(256) {{name}}_rows({{params}}, int64_t* __restrict__ out,
                                                      const int64_t R) {
  __shared__ float sv[8];
  __shared__ int64_t si[8];
  const int64_t base = (int64_t)blockIdx.x * R;
  const int step = blockDim.x;
  float b = 0.0f;
  int64_t ib = -1;
  int64_t k = threadIdx.x;
  for (; k + 3 * step < R; k += 4 * step) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = {{name}}_value({{args}}, base + k + j * step);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (ib < 0 || {{name}}_wins(v[j], k + j * step, b, ib)) { b = v[j]; ib = k + j * step; }
  }
  for (; k < R; k += step) {
    const float v = {{name}}_value({{args}}, base + k);
    if (ib < 0 || {{name}}_wins(v, k, b, ib)) { b = v; ib = k; }
  }
  {{name}}_warp(b, ib);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = step >> 5;
  if (warps == 1) {
    if (lane == 0) out[blockIdx.x] = ib;
    return;
  }
  if (lane == 0) { sv[warp] = b; si[warp] = ib; }
  __syncthreads();
  if (warp == 0) {
    b = lane < warps ? sv[lane] : 0.0f;
    ib = lane < warps ? si[lane] : -1;
    {{name}}_warp(b, ib);
    if (lane == 0) out[blockIdx.x] = ib;
  }
}

// A strided dim (inner > 1): a thread per (outer, inner) column walks R in order (so the first
// index wins a tie without comparing indices), 4 loads in flight; neighbouring threads read
// neighbouring columns.
__global__ void __launch_bounds__(256) {{name}}_cols({{params}}, int64_t* __restrict__ out,
                                                      const int64_t outer, const int64_t R,
                                                      const int64_t inner) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= outer * inner) return;
  const int64_t o = t / inner, c = t - o * inner;
  const int64_t base = o * R * inner + c;
  float b = {{name}}_value({{args}}, base);
  int64_t ib = 0;
  int64_t r = 1;
  for (; r + 3 < R; r += 4) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = {{name}}_value({{args}}, base + (r + j) * inner);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if ({{name}}_wins(v[j], r + j, b, ib)) { b = v[j]; ib = r + j; }
  }
  for (; r < R; ++r) {
    const float v = {{name}}_value({{args}}, base + r * inner);
    if ({{name}}_wins(v, r, b, ib)) { b = v; ib = r; }
  }
  out[t] = ib;
}

{{launcher_sig}} {
  if (outer <= 0 || R <= 0 || inner <= 0) return;
  if (inner == 1) {
    int threads = 32;  // a warp for short rows; up to 8 warps with >= 4 values a thread
    while (threads < 256 && (int64_t)threads * 8 <= R) threads *= 2;
    {{name}}_rows<<<(unsigned)outer, threads, 0, stream>>>({{launch_args}}, static_cast<int64_t*>(out), R);
  } else {
    {{name}}_cols<<<(unsigned)ks_cdiv(outer * inner, 256), 256, 0, stream>>>({{launch_args}}, static_cast<int64_t*>(out), outer, R, inner);
  }
}
