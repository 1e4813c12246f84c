
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


// inner == 1 with every prologue and epilogue operand column-affine (the binding's
// plan.apply_affine): a block normalises 2048 values of one row at a time, each operand read at
// the row's base plus r times its step, the row's statistics loaded once.  The flat kernel above
// divides its index twice a value and reads operands through their descriptors' mode switch.
__global__ void __launch_bounds__(256)
{{name}}_apply_rows({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ stats,
                   const int64_t outer, const int64_t R) {
  constexpr bool AFFINE = true;
  const int64_t inner = 1;
  const int64_t chunks = (R + 2047) / 2048;
  for (int64_t t = blockIdx.x; t < outer * chunks; t += gridDim.x) {
    const int64_t o = t / chunks, r0 = (t - o * chunks) * 2048;
    const int64_t base = o * R;
    {{bases}}
    const float s0 = stats[2 * o], s1 = stats[2 * o + 1];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t rr = r0 + threadIdx.x + 256 * u;
      if (rr < R) {
        const int64_t idx = base + rr;
        (void)idx;
        {{row_loads1}}
        float x; const int q = 0; {{pro_x}}
        float y = {{norm}};
        {{w_loads}} {{w_upd}}
        {{row_e_loads}} {{epi}}
        out[idx] = ks_from_float<{{out_t}}>(y);
      }
    }
  }
}
