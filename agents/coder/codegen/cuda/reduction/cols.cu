
// Normalising kinds along a strided dim (see ks_plan_reduction): a (TX, TY) block owns TX
// consecutive inner columns of one outer slice and keeps its [R, TX] tile in shared memory
// (dynamic, R * TX floats), several blocks per SM.  Loads go out 16 at a time per thread before
// any is used; one read and one write of global memory, where the tile path reads the input
// twice.  A thread only reads back the tile entries it wrote (column tx, rows ty + k * TY), so
// the tile needs no barrier; threads meet only in ks_col_allreduce.
__global__ void __launch_bounds__(1024)
{{name}}_cols({{params}}, {{out_t}}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
  extern __shared__ float tile[];
  __shared__ float part[64][33];
  __shared__ float res[32];
  static_assert(sizeof(part) + sizeof(res) == KS_COLS_STATIC_SMEM, "the host plan sizes tiles with it");
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
  const int Ri = (int)R;  // R * TX floats fit in shared memory
  const int64_t cb = ks_div(inner + TX - 1, TX);
  for (int64_t blk = blockIdx.x; blk < outer * cb; blk += gridDim.x) {  // block-uniform
    const int64_t o = ks_div(blk, cb);
    const int64_t i = (blk - o * cb) * TX + tx;
    const bool live = i < inner;
    const int64_t base = o * R * inner + i;
    for (int r0 = ty; r0 < Ri; r0 += 16 * TY) {
      float xs[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const int r = r0 + u * TY;
        if (live && r < Ri) {
          const int64_t idx = base + (int64_t)r * inner;
          {{loads1}}
          const int q = 0; {{pro_x}}
        }
      }
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const int r = r0 + u * TY;
        if (live && r < Ri) tile[r * TX + tx] = xs[u];
      }
    }
{{stats}}
#pragma unroll 4
    for (int r = ty; r < Ri; r += TY) if (live) {
      const int64_t idx = base + (int64_t)r * inner;
      const int q = 0; (void)q;
      float y = {{y}};
      {{e_loads}} {{epi}}
      out[idx] = ks_from_float<{{out_t}}>(y);
    }
  }
}

