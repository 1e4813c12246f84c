#include "../ks_prelude.cuh"

// ---- concatenation kernel {{name}}: {{nseg}} segments along one dim ----
{{segment_fns}}
// The output seen as [outer, D, inner] (D the concatenated dim); segment k covers
// [off[k], off[k + 1]) of D and reads its operands at its own [outer, D_k, inner] index.
struct {{name}}_geom {
  int64_t n, row, inner;  // row = D * inner
  KsFastDiv frow, finner;
  int64_t off[{{nseg_plus_one}}];
};

__global__ void __launch_bounds__(256) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                        const __grid_constant__ {{name}}_geom g) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g.n; i += step) {
    const int64_t o = ks_div_by(i, g.row, g.frow);
    const int64_t rest = i - o * g.row;
    const int64_t d = ks_div_by(rest, g.inner, g.finner);
    const int64_t c = rest - d * g.inner;
    float r = 0.0f;
{{segments}}
    out[i] = ks_from_float<{{out_t}}>(r);
  }
}

{{launcher_sig}} {
  if (outer <= 0 || D <= 0 || inner <= 0) return;
  {{name}}_geom g;
  g.row = D * inner;
  g.inner = inner;
  g.n = outer * g.row;
  g.frow = ks_fastdiv_make(g.row);
  g.finner = ks_fastdiv_make(inner);
  for (int k = 0; k <= {{nseg}}; ++k) g.off[k] = offsets[k];
  static const int per_sm = ks_blocks_per_sm({{name}}_kernel, 256);
  const int64_t blocks = ks_grid(per_sm, ks_cdiv(g.n, 256));
  {{name}}_kernel<<<(unsigned)blocks, 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), g);
}
