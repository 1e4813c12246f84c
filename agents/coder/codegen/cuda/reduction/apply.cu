
// Normalising kinds on the tile path: y = normalize(prologue(x), stats of its column).
__global__ void __launch_bounds__(256)
{{name}}_apply({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ stats,
              const int64_t outer, const int64_t R, const int64_t inner) {
  const int64_t n = outer * R * inner;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = ks_div(idx, R * inner);
    const int64_t col = o * inner + (idx - ks_div(idx, inner) * inner);
    {{loads1}}
    float x; const int q = 0; {{pro_x}}
    const float s0 = stats[2 * col], s1 = stats[2 * col + 1];
    float y = {{norm}};
    {{w_loads}} {{w_upd}}
    {{e_loads}} {{epi}}
    out[idx] = ks_from_float<{{out_t}}>(y);
  }
}

