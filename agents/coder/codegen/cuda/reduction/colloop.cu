
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
// The last R % 8 values: one at a time (each load waits for the one before it to be pushed: R =
// 22, level2/24's min over a conv3d's depth, takes 2 batched rounds and 6 single ones), or with
// ReductionVariant(colloop_tail_batch=True) in one predicated batch pushed in the same order
// (the same values and arithmetic; written 2026-12-07 (s38), not yet timed).
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
{{tail}}
{{finish}}
  }
}
