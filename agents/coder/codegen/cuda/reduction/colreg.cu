
// Softmax kinds along a strided dim with a short R (<= KS_COLREG_MAX_R, ks_plan_reduction): a
// thread per (outer, inner) column keeps its R values in registers: one read and one write of
// global memory, no shared memory, no barrier.  Consecutive threads own consecutive inner
// columns, so every load and store of a warp is coalesced.  (The [R, 16] column tiles and the
// clusters ran at a fifth of torch.compile's fused kernel for softmax over 16-64 channels.)
template <int MAXR>
__global__ void __launch_bounds__(256)
{{name}}_colreg({{params}}, {{out_t}}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
  const int Ri = (int)R;
  const int64_t cols = outer * inner;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = ks_div(c, inner);
    const int64_t base = o * R * inner + (c - o * inner);
    float v[MAXR];
#pragma unroll
    for (int r = 0; r < MAXR; ++r) {
      if (r < Ri) {
        const int64_t idx = base + (int64_t)r * inner;
        {{loads1}}
        const int q = 0; {{pro_x}}
      }
    }
{{stats}}
#pragma unroll
    for (int r = 0; r < MAXR; ++r) if (r < Ri) {
      const int64_t idx = base + (int64_t)r * inner;
      const int q = 0; (void)q;
      float y = {{y}};
      {{e_loads}} {{epi}}
      out[idx] = ks_from_float<{{out_t}}>(y);
    }
  }
}
