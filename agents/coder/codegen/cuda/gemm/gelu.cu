
#include "../ks_prelude.cuh"

// ---- {{name}}: exact (erf) GELU after the cuBLASLt bias epilogue, in place ----
__global__ void __launch_bounds__(256) {{name}}_gelu_kernel({{t}}* __restrict__ y, const int64_t n) {
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nvec = n / {{vec}};
  for (int64_t v = tid; v < nvec; v += step) {
    float a[{{vec}}];
    ks_ld_vec<{{vec}}>(y + v * {{vec}}, a);
#pragma unroll
    for (int k = 0; k < {{vec}}; ++k) a[k] = ks_gelu(a[k]);
    ks_st_vec<{{vec}}>(y + v * {{vec}}, a);
  }
  const int64_t i = nvec * {{vec}} + tid;
  if (i < n) y[i] = ks_from_float<{{t}}>(ks_gelu(ks_to_float(y[i])));
}

{{launcher_sig}} {
  if (n <= 0) return;
  static const int per_sm = ks_blocks_per_sm({{name}}_gelu_kernel, 256);
  const int64_t blocks = ks_grid(per_sm, ks_cdiv(n / {{vec}} > 0 ? n / {{vec}} : 1, 256));
  {{name}}_gelu_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<{{t}}*>(y), n);
}

