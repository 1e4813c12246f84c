
#include "../ks_prelude.cuh"

// ---- {{name}}: fp32 operands split for TF32 tensor-core GEMMs (3xTF32, cuda/ks_gemm.h; the split
// of one value is ks_prelude.cuh's ks_split_tf32) ----

// src [rows, len] with strides (src_rs, src_ks) (a transposed operand is read in place) -> dst rows
// of `ld_out`: hi at column hi_off + k, lo at lo_off + k.
__global__ void __launch_bounds__(256) {{name}}_split_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                                             const int64_t rows, const int64_t len, const int64_t src_rs,
                                                             const int64_t src_ks, const int64_t ld_out, const int64_t hi_off,
                                                             const int64_t lo_off, const bool vec4) {
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  if (vec4) {  // src rows contiguous; len, src_rs, ld_out and both offsets multiples of 4; 16-byte aligned
    const int64_t nvec = rows * len / 4;
    for (int64_t v = tid; v < nvec; v += step) {
      const int64_t i = v * 4, r = i / len, k = i - r * len;
      const float4 a = *reinterpret_cast<const float4*>(src + r * src_rs + k);
      float4 h, l;
      ks_split_tf32(a.x, h.x, l.x);
      ks_split_tf32(a.y, h.y, l.y);
      ks_split_tf32(a.z, h.z, l.z);
      ks_split_tf32(a.w, h.w, l.w);
      float* row = dst + r * ld_out + k;
      *reinterpret_cast<float4*>(row + hi_off) = h;
      *reinterpret_cast<float4*>(row + lo_off) = l;
    }
    return;
  }
  for (int64_t i = tid; i < rows * len; i += step) {
    const int64_t r = i / len, k = i - r * len;
    float* row = dst + r * ld_out + k;
    ks_split_tf32(src[r * src_rs + k * src_ks], row[hi_off], row[lo_off]);
  }
}

{{launcher_sig}} {
  if (rows <= 0 || len <= 0) return;
  const bool vec4 = src_ks == 1 && len % 4 == 0 && src_rs % 4 == 0 && ld_out % 4 == 0 && hi_off % 4 == 0 &&
                    lo_off % 4 == 0 && ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16) == 0;
  static const int per_sm = ks_blocks_per_sm({{name}}_split_kernel, 256);
  const int64_t work = vec4 ? rows * len / 4 : rows * len;
  const int64_t blocks = ks_grid(per_sm, ks_cdiv(work, 256));
  {{name}}_split_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<const float*>(src), static_cast<float*>(dst), rows,
                                                              len, src_rs, src_ks, ld_out, hi_off, lo_off, vec4);
}
