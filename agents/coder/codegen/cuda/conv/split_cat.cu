
#include "../ks_prelude.cuh"

// ---- {{name}}: a convolution operand as 3xTF32's three parts side by side (agents/coder/codegen/conv_split.py) ----
// src [outer, len] (contiguous) -> dst [outer, 3 * len]: per row [lo | hi | hi] (an input, along its
// channels) or [hi | lo | hi] (a weight): conv([x_lo, x_hi, x_hi], [W_hi, W_lo, W_hi]) is
// x_lo W_hi + x_hi W_lo + x_hi W_hi, one TF32 convolution over three times the input channels.
__global__ void __launch_bounds__(256) {{name}}_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                                       const int64_t outer, const int64_t len, const bool weight_order,
                                                       const bool vec4) {
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  const int64_t first = weight_order ? 0 : len, second = weight_order ? len : 0;  // hi, lo offsets in a row
  if (vec4) {  // len a multiple of 4, both 16-byte aligned
    const int64_t nvec = outer * len / 4;
    for (int64_t v = tid; v < nvec; v += step) {
      const int64_t i = v * 4, r = i / len, k = i - r * len;
      const float4 a = reinterpret_cast<const float4*>(src)[v];
      float4 h, l;
      ks_split_tf32(a.x, h.x, l.x);
      ks_split_tf32(a.y, h.y, l.y);
      ks_split_tf32(a.z, h.z, l.z);
      ks_split_tf32(a.w, h.w, l.w);
      float* row = dst + r * 3 * len + k;
      *reinterpret_cast<float4*>(row + first) = h;
      *reinterpret_cast<float4*>(row + second) = l;
      *reinterpret_cast<float4*>(row + 2 * len) = h;
    }
    return;
  }
  for (int64_t i = tid; i < outer * len; i += step) {
    const int64_t r = i / len, k = i - r * len;
    float hi, lo;
    ks_split_tf32(src[i], hi, lo);
    float* row = dst + r * 3 * len + k;
    row[first] = hi;
    row[second] = lo;
    row[2 * len] = hi;
  }
}

{{launcher_sig}} {
  if (outer <= 0 || len <= 0) return;
  const bool vec4 = len % 4 == 0 && ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16) == 0;
  static const int per_sm = ks_blocks_per_sm({{name}}_kernel, 256);
  const int64_t work = vec4 ? outer * len / 4 : outer * len;
  const int64_t blocks = ks_grid(per_sm, ks_cdiv(work, 256));
  {{name}}_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const float*>(src), static_cast<float*>(dst), outer,
                                                        len, weight_order, vec4);
}
