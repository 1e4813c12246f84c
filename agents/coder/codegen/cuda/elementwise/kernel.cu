
#include "../ks_prelude.cuh"

// ---- elementwise kernel {{name}} ----
{{device_fn}}
template <int VEC>
__global__ void __launch_bounds__({{threads}}) {{name}}_kernel({{params}}) {
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nvec = n / VEC;
  for (int64_t v = tid; v < nvec; v += step) {
    const int64_t i = v * VEC;
    {
      {{step_vec}}
    }
  }
  if constexpr (VEC > 1) {
    const int64_t i = nvec * VEC + tid;  // tail: fewer than VEC elements left
    if (i < n) {
      {{step_tail}}
    }
  }
}

{{nhwc_kernel}}
{{launcher_sig}} {
  if (n <= 0) return;
  if (vec == {{vec}}) {
    static const int per_sm = ks_blocks_per_sm({{name}}_kernel<{{vec}}>, {{threads}});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(n / {{vec}} > 0 ? n / {{vec}} : 1, {{threads}}));
    {{name}}_kernel<{{vec}}><<<(unsigned)blocks, {{threads}}, 0, stream>>>({{kernel_args}});
  } else {
    static const int per_sm = ks_blocks_per_sm({{name}}_kernel<1>, {{threads}});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(n, {{threads}}));
    {{name}}_kernel<1><<<(unsigned)blocks, {{threads}}, 0, stream>>>({{kernel_args}});
  }
}
{{nhwc_launch}}

