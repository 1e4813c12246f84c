// Softmax kinds over the channels of a channels-last input (a cuDNN NHWC / NDHWC conv output)
// whose other operands are constant along the spatial dims (a conv bias, a per-channel scale:
// the binding checks, ks_spatially_constant), into the contiguous [N, C, S...] result.  In that
// memory a position's C values are one contiguous row: a block stages P positions x C channels
// of one sample in shared memory (loads along C, a warp on consecutive values, the prologue
// with its channel's operands loaded once a thread), takes each position's statistics with
// 256 / P threads a position, and writes along S (a warp per channel, lanes over positions).
// The column kernels would read the NHWC tensor through general strides (an index division a
// value), so the program copied it back to NCHW first: one more read and write of it.
// Shared memory: the [P][C | 1] tile (an odd row stride: the write phase's transposed reads hit
// 32 banks), then the epilogue operands' values of every channel.
__global__ void __launch_bounds__(256)
{{name}}_softmax_nhwc({{params}}, {{out_t}}* __restrict__ out, const int64_t C, const int64_t S, const int P) {
  extern __shared__ float ks_nhwc_smem[];
  const int t = threadIdx.x, Ci = (int)C, LD = Ci | 1;
  float* tile = ks_nhwc_smem;
  float* epis = ks_nhwc_smem + P * LD;
  (void)epis;
  const int64_t n = blockIdx.y, s0 = (int64_t)blockIdx.x * P;
  const int npos = (int)(S - s0 < P ? S - s0 : P);
  {
    const int rows = 256 / Ci, c = t % Ci, r = t / Ci;
    if (r < rows) {
      const int64_t row = n * C + c;
      const int q = 0;
      {{hoists}}
      const auto* xp = p0 + (n * S + s0) * C + c;
      // 8 positions' loads before their prologues and shared stores: loaded and stored one at a
      // time, each load waited on by its store before the next issued (one in flight a thread,
      // kernelstitch.bench.sass_loads; level2/6's 16-channel softmax at 58% of DRAM bandwidth)
      int pp = r;
      for (; pp + 7 * rows < npos; pp += 8 * rows) {
        float xs[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) xs[u] = ks_ld(xp + (int64_t)(pp + u * rows) * C);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          float a0[1] = {xs[u]};
          float x; {{pro_x}}
          tile[(pp + u * rows) * LD + c] = x;
        }
      }
      for (; pp < npos; pp += rows) {
        float a0[1] = {ks_ld(xp + (int64_t)pp * C)};
        float x; {{pro_x}}
        tile[pp * LD + c] = x;
      }
    }
    if (t < Ci) {
      const int64_t row = n * C + t;
      {{epi_stage}}
    }
  }
  __syncthreads();
  {  // every lane takes part in the shuffles: positions past npos compute on unused rows
    const int tpp = 256 / P, p = t / tpp, sub = t % tpp;
    float* v = tile + p * LD;
{{stats}}
    for (int c = sub; c < Ci; c += tpp) v[c] = {{y}};
  }
  __syncthreads();
  const int lane = t & 31, w = t >> 5;
  for (int c = w; c < Ci; c += 8) {  // warp-uniform
    {{epi_loads}}
    {{out_t}}* op = out + (n * C + c) * S + s0;
    for (int pp = lane; pp < npos; pp += 32) {
      float y = tile[pp * LD + c];
      const int q = 0; (void)q;
      {{epi}}
      op[pp] = ks_from_float<{{out_t}}>(y);
    }
  }
}
