
// MAXT, MINB: the block size bound and min blocks per SM of __launch_bounds__, i.e. the register
// cap.  MINB 1 for 32 cached values under 512 threads: with it left out, ptxas aimed at 64
// registers and spilled the cached row; with 2 (a 128-register cap) the warp path's 32 scalar
// values spilled.  MINB 2 (64 registers) for the 16-value kernel of 512 threads, and MINB 4 (64
// registers) for normalising rows of 32 values on <= 256 threads: on the H100, more rows in
// flight per SM read log_softmax rows of 8192 in 0.411 ms (88% of the copy bandwidth) instead
// of 0.449 ms with the 16-value kernel (bench/results/2026-11-24-h100/RUN.md).
template <int VEC, int MAXV, bool WARP, int MINB, int MAXT>
__global__ void __launch_bounds__(MAXT, MINB)
{{name}}_row({{params}}, {{out_t}}* __restrict__ out, const int64_t outer, const int64_t R, const int lanes) {
  __shared__ float smem[33];
  // WARP: `lanes` threads (a power of two <= 32) per row, 32 / lanes rows a warp; else a block.
  const int tx = WARP ? (int)threadIdx.x & (lanes - 1) : (int)threadIdx.x;
  const int TX = WARP ? lanes : blockDim.x;
  const int Ri = (int)R;
  const int rows_per_warp = WARP ? 32 / lanes : 1;
  const int64_t row_step = WARP ? (int64_t)gridDim.x * blockDim.y * rows_per_warp : (int64_t)gridDim.x;
  for (int64_t first = WARP ? ((int64_t)blockIdx.x * blockDim.y + threadIdx.y) * rows_per_warp : (int64_t)blockIdx.x;
       first < outer; first += row_step) {  // warp-uniform: every lane reaches the shuffles
    // A lane group past the last row recomputes the last row and stores nothing.
    const int64_t row_raw = first + (WARP ? (int)threadIdx.x / lanes : 0);
    const bool row_ok = row_raw < outer;
    const int64_t row = row_ok ? row_raw : outer - 1;
    {{bases}}
    // The reduced tensor's values first, every load of the row in flight at once, then the
    // prologue's other operands and the prologue in place.  Loaded and transformed slot by slot,
    // ptxas reused one register set for every slot: each load waited for the previous slot's
    // prologue, one load in flight a thread (level2/25's channel min at 68% of DRAM bandwidth).
    float v[MAXV][VEC];
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
      const int col = (j * TX + tx) * VEC;  // R <= KS_ROW_CAP: 32-bit column math
      if (col < Ri) {{x_load}}
    }
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
      const int col = (j * TX + tx) * VEC;
      if (col < Ri) {
        {{loads}}
#pragma unroll
        for (int q = 0; q < VEC; ++q) {{pro_call}}
      }
    }
{{tail}}
  }
}
