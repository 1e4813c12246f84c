
// Long rows that the row kernels do not take (inner == 1, ks_plan_reduction's KS_PATH_FLAT), a
// full reduction to one value above all: the row is cut into `chunk`-long pieces (a multiple of
// 8 values), one per block; 256 threads read VEC-wide vectors, 4 of them per operand in flight,
// and push them as one chunk (ks_push_n).  Row r of the grid is blockIdx.x / splits.  The tile
// kernel's [1 x 256] blocks read one float per load with 64-bit index math per value and left the
// last merge of ~1000 partials to one thread: level1/100 (hinge loss, 2^30 values) ran at 40% of
// DRAM bandwidth.  Min-blocks 2 (128 registers): 16 values per operand stay in registers.
template <int VEC>
__global__ void __launch_bounds__(256, 2)
{{name}}_flat({{params}}, {{out_t}}* __restrict__ out, float* __restrict__ partials,
             const int64_t outer, const int64_t R, const int64_t chunk, const int64_t splits) {
  using State = {{state}};
  constexpr int U = 4;
  __shared__ float sm[State::NF][256];
  const int t = threadIdx.x;
  const int64_t col = ks_div((int64_t)blockIdx.x, splits);  // the row (inner == 1: a column of the output)
  const int64_t split = (int64_t)blockIdx.x - col * splits;
  const int64_t r0 = split * chunk;
  const int64_t r1 = r0 + chunk < R ? r0 + chunk : R;
  const int64_t base = col * R;  // R % VEC == 0 when VEC > 1 (the binding's width)
  State st = State::init();
  int64_t r = r0 + (int64_t)t * VEC;
  for (; r + (int64_t)(U - 1) * 256 * VEC + VEC <= r1; r += (int64_t)U * 256 * VEC) {
    float x[U * VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t idx = base + r + (int64_t)u * 256 * VEC;
      {{loads}}
#pragma unroll
      for (int q = 0; q < VEC; ++q) {{pro_x}}
    }
    ks_push_n<true>(st, x);
  }
  for (; r + VEC <= r1; r += 256 * VEC) {
    float x[VEC];
    const int u = 0; (void)u;
    const int64_t idx = base + r;
    {{loads}}
#pragma unroll
    for (int q = 0; q < VEC; ++q) {{pro_x1}}
    ks_push_n<true>(st, x);
  }
  ks_block_merge(st, sm, t, t, 256, 1);
  if (t == 0) {
    if (splits == 1) {
      {{final}}
    } else {
      st.save(partials + (split * outer + col) * State::NF);
    }
  }
}

// Merges a row's `splits` partial states: a block per row, threads over the partials in a fixed
// order (the tile path's finalize walks them in one thread: ~1000 dependent merges).
__global__ void __launch_bounds__(256)
{{name}}_flat_finalize({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ partials,
                      const int64_t outer, const int64_t splits, const int64_t R) {
  using State = {{state}};
  __shared__ float sm[State::NF][256];
  const int t = threadIdx.x;
  const int64_t col = blockIdx.x;
  State st = State::init();
  for (int64_t s = t; s < splits; s += 256) st.merge(State::load(partials + (s * outer + col) * State::NF));
  ks_block_merge(st, sm, t, t, 256, 1);
  if (t == 0) {
    {{final}}
  }
}
