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

// VEC consecutive outputs a thread (4 when the binding finds every run of 4 in one segment at
// consecutive operand indices, as in channels-last cats of 4k channels: ncu had the one-value
// kernel at 1.09 TB/s on SqueezeNet's cats, issue-bound on its index math).
template <int VEC>
__global__ void __launch_bounds__(256) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                        const __grid_constant__ {{name}}_geom g) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nv = g.n / VEC;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nv; t += step) {
    const int64_t i = t * VEC;
    const int64_t o = ks_div_by(i, g.row, g.frow);
    const int64_t rest = i - o * g.row;
    const int64_t d = ks_div_by(rest, g.inner, g.finner);
    const int64_t c = rest - d * g.inner;
    float r[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) r[v] = 0.0f;
{{segments}}
    ks_st_vec<VEC>(out + i, r);
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
#define KS_CAT_LAUNCH(V) do { \
    static const int per_sm = ks_blocks_per_sm({{name}}_kernel<V>, 256); \
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(g.n / (V), 256)); \
    {{name}}_kernel<V><<<(unsigned)blocks, 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), g); } while (0)
#if {{vec4}}
  if (vec == 4 && g.n % 4 == 0) { KS_CAT_LAUNCH(4); return; }  // (the binding's runs of 4 imply n % 4 == 0)
#endif
  (void)vec;
  KS_CAT_LAUNCH(1);
#undef KS_CAT_LAUNCH
}
