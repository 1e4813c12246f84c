
// Strided reductions with columns enough to fill the GPU (ks_plan_reduction's KS_PATH_COLLOOP):
// a thread per (outer, inner) column walks R with 8 loads in flight; consecutive threads own
// consecutive inner columns (every load and store of a warp is coalesced); no shared memory, no
// barrier, few registers, so the SMs run at full occupancy.  Reduce kinds store one value per
// column; softmax kinds read the column a second time to normalise it (as Triton's fused
// reductions do).  (The tile kernels' [R-slice x inner] blocks and the [R, 16] column tiles ran at
// a fifth to a quarter of torch.compile's fused kernels on such views.)  AFFINE (the host's
// ks_col_affine for every operand): each operand's offset is its column base plus r times a step,
// one multiply-add per value where ks_offset divides (the kernel was instruction-bound).
// Min-blocks 4 (64 registers): with none stated ptxas aimed at 48 and spilled the AFFINE softmax.
template <bool AFFINE>
__global__ void __launch_bounds__(256, 4)
{{name}}_colloop({{params}}, {{out_t}}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
  using State = {{state}};
  const int64_t cols = outer * inner;
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = ks_div(c, inner);
    const int64_t base = o * R * inner + (c - o * inner);
    {{bases}}
    State st = State::init();
    int64_t r = 0;
    for (; r + 8 <= R; r += 8) {
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t rr = r + u, idx = base + rr * inner;
        (void)idx; (void)rr;
        {{loads1}}
        const int q = 0; {{pro_x}}
      }
      ks_push_n<true>(st, x);
    }
    for (; r < R; ++r) {
      const int64_t rr = r, idx = base + rr * inner;
      (void)idx; (void)rr;
      float x[1]; const int u = 0;
      {{loads1}}
      const int q = 0; {{pro_x}}
      st.push(x[0]);
    }
{{finish}}
  }
}
