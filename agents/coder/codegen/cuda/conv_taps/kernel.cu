#include "../ks_prelude.cuh"

// ---- conv tap means {{name}}: {{kh}} x {{kw}} {{what}}, stride {{sh}} x {{sw}} ----
// For one (n, c) plane of x [N, C, H, W]: each kernel tap (i, j)'s input summed over the positions
// the tap carries into the [Ho, Wo] output, times 1 / (Ho * Wo); out [C, N, KH * KW].  Along a dim
// the tap's positions are lo, lo + S, ..., hi (S the conv's stride for a convolution, 1 for a
// transposed one), so a warp walks a row of the plane (lanes along W: 16-byte loads where the rows
// allow, else four scalar loads in flight), sums it per column tap, and adds the row to the taps
// whose row range holds it: one read of x, KW adds a value.  A block per plane, its 8 warps on
// rows r, r + 8, ...
namespace {
constexpr int {{name}}_KH = {{kh}}, {{name}}_KW = {{kw}}, {{name}}_SH = {{step_h}}, {{name}}_SW = {{step_w}};

__host__ __device__ __forceinline__ int64_t {{name}}_floor_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// The first and last input index of tap k along a dim of `in` inputs and `out` outputs (host
// too: tests/test_conv_taps.py runs them on the CPU against a one-hot convolution).
__host__ __device__ __forceinline__ void {{name}}_range(int64_t k, int64_t in, int64_t out, int64_t stride,
                                               int64_t pad, int64_t dil, int64_t& lo, int64_t& hi) {
  const int64_t shift = k * dil - pad;
  if ({{transposed}}) {  // output o = i * stride + shift must lie in [0, out)
    lo = -{{name}}_floor_div(shift, stride);  // ceil(-shift / stride)
    hi = {{name}}_floor_div(out - 1 - shift, stride);
  } else {  // input i = o * stride + shift for o in [0, out)
    lo = shift;
    hi = shift + (out - 1) * stride;
  }
  if (lo < 0 && !{{transposed}}) lo += ((-lo + stride - 1) / stride) * stride;  // first in-bounds member
  if (lo < 0) lo = 0;
  if (hi > in - 1) hi = in - 1;
}

template <int S>
__host__ __device__ __forceinline__ bool {{name}}_holds(int64_t i, int64_t lo, int64_t hi) {
  if constexpr (S == 1) return i >= lo && i <= hi;
  else return i >= lo && i <= hi && (i - lo) % S == 0;
}
}  // namespace

// Adds values v[u] at input columns first + STEP * u to the column taps that hold them.
template <int COUNT, int STEP>
__device__ __forceinline__ void {{name}}_add(float (&row)[{{name}}_KW], const float (&v)[COUNT], const int64_t first,
                                             const int64_t (&lo)[{{name}}_KW], const int64_t (&hi)[{{name}}_KW]) {
#pragma unroll
  for (int u = 0; u < COUNT; ++u)
#pragma unroll
    for (int b = 0; b < {{name}}_KW; ++b)
      if ({{name}}_holds<{{name}}_SW>(first + STEP * u, lo[b], hi[b])) row[b] += v[u];
}

// VEC4: rows of 16-byte aligned float4s (W % 4 == 0, unit stride along W): a lane loads four
// consecutive values, two loads in flight; else four scalar loads 32 apart.
template <bool VEC4>
__global__ void __launch_bounds__(256) {{name}}_kernel(const float* __restrict__ x, const int64_t sN, const int64_t sC,
    const int64_t sH, const int64_t sW, const int64_t N, const int64_t C, const int64_t H, const int64_t W,
    const int64_t Ho, const int64_t Wo, const float scale, float* __restrict__ out) {
  constexpr int KH = {{name}}_KH, KW = {{name}}_KW;
  const int64_t plane = blockIdx.x, n = plane / C, c = plane - n * C;
  const float* __restrict__ xp = x + n * sN + c * sC;
  int64_t lo_h[KH], hi_h[KH], lo_w[KW], hi_w[KW];
#pragma unroll
  for (int k = 0; k < KH; ++k) {{name}}_range(k, H, Ho, {{sh}}, {{ph}}, {{dh}}, lo_h[k], hi_h[k]);
#pragma unroll
  for (int k = 0; k < KW; ++k) {{name}}_range(k, W, Wo, {{sw}}, {{pw}}, {{dw}}, lo_w[k], hi_w[k]);
  float acc[KH][KW];
#pragma unroll
  for (int a = 0; a < KH; ++a)
#pragma unroll
    for (int b = 0; b < KW; ++b) acc[a][b] = 0.f;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int64_t ih = warp; ih < H; ih += 8) {
    float row[KW];
#pragma unroll
    for (int b = 0; b < KW; ++b) row[b] = 0.f;
    const float* __restrict__ xr = xp + ih * sH;
    if constexpr (VEC4) {
      int64_t iw = 4 * lane;
      for (; iw + 128 < W; iw += 256) {
        float a[4], b[4];
        ks_ld_vec<4>(xr + iw, a);
        ks_ld_vec<4>(xr + iw + 128, b);
        {{name}}_add<4, 1>(row, a, iw, lo_w, hi_w);
        {{name}}_add<4, 1>(row, b, iw + 128, lo_w, hi_w);
      }
      for (; iw < W; iw += 128) {
        float a[4];
        ks_ld_vec<4>(xr + iw, a);
        {{name}}_add<4, 1>(row, a, iw, lo_w, hi_w);
      }
    } else {
      int64_t iw = lane;
      for (; iw + 96 < W; iw += 128) {
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = ks_ld(xr + (iw + 32 * u) * sW);
        {{name}}_add<4, 32>(row, v, iw, lo_w, hi_w);
      }
      for (; iw < W; iw += 32) {
        const float v[1] = {ks_ld(xr + iw * sW)};
        {{name}}_add<1, 32>(row, v, iw, lo_w, hi_w);
      }
    }
#pragma unroll
    for (int a = 0; a < KH; ++a)
      if ({{name}}_holds<{{name}}_SH>(ih, lo_h[a], hi_h[a]))
#pragma unroll
        for (int b = 0; b < KW; ++b) acc[a][b] += row[b];
  }
  __shared__ float part[8][KH * KW];
#pragma unroll
  for (int a = 0; a < KH; ++a)
#pragma unroll
    for (int b = 0; b < KW; ++b) {
      float v = acc[a][b];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
      if (lane == 0) part[warp][a * KW + b] = v;
    }
  __syncthreads();
  for (int k = threadIdx.x; k < KH * KW; k += blockDim.x) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < 8; ++w) total += part[w][k];
    out[(c * N + n) * (KH * KW) + k] = total * scale;
  }
}

{{launcher_sig}} {
  if (N * C == 0) return;
  const bool vec4 = sW == 1 && W % 4 == 0 && sH % 4 == 0 && sC % 4 == 0 && sN % 4 == 0 &&
                    reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const float* xf = static_cast<const float*>(x);
  float* of = static_cast<float*>(out);
  if (vec4) {{name}}_kernel<true><<<(unsigned)(N * C), 256, 0, stream>>>(xf, sN, sC, sH, sW, N, C, H, W, Ho, Wo, scale, of);
  else {{name}}_kernel<false><<<(unsigned)(N * C), 256, 0, stream>>>(xf, sN, sC, sH, sW, N, C, H, W, Ho, Wo, scale, of);
}
