
// Threads (tx, ty): tx walks inner (consecutive addresses), ty walks R; blockIdx.y is the R split.
// Min-blocks 1 stated: left out, ptxas aimed at 48 registers and spilled the Welford state.
// AFFINE (the host's ks_col_affine for every operand read): each operand's offset is its column
// base plus r times a step, as in the column loop; the descriptor form inlines ks_offset's mode
// switch, general-stride loop included, into each of the 8 unrolled loads of each operand
// (level2/67's mean over an NHWC conv output: 10,662 lines of PTX, 2.32 ms on an H200 where
// Triton's reduction took 0.82).
template <bool AFFINE>
__global__ void __launch_bounds__(256, 1)
{{name}}_tile({{params}}, {{out_t}}* __restrict__ out, float* __restrict__ partials, float* __restrict__ stats,
             const int64_t outer, const int64_t R, const int64_t inner, const int64_t r_per_split) {
  using State = {{state}};
  __shared__ float sm[State::NF][256];
  const int tx = threadIdx.x, ty = threadIdx.y, TXI = blockDim.x, TYR = blockDim.y;
  const int64_t cb = ks_div(inner + TXI - 1, TXI);  // ks_div: no 64-bit division call
  const int64_t o = ks_div((int64_t)blockIdx.x, cb);
  const int64_t i = ((int64_t)blockIdx.x - o * cb) * TXI + tx;
  const int64_t r0 = (int64_t)blockIdx.y * r_per_split;
  const int64_t r1 = r0 + r_per_split < R ? r0 + r_per_split : R;
  State st = State::init();
  if (i < inner) {
    const int64_t base = o * R * inner + i;
    {{bases}}
    int64_t r = r0 + ty;
    for (; r + 7 * TYR < r1; r += 8 * TYR) {  // 8 independent loads in flight per thread
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t rr = r + (int64_t)u * TYR, idx = base + rr * inner;
        (void)idx; (void)rr;
        {{loads1}}
        const int q = 0; {{pro_x}}
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) st.push(x[u]);
    }
    for (; r < r1; r += TYR) {
      const int64_t rr = r, idx = base + rr * inner;
      (void)idx; (void)rr;
      float x[1]; const int u = 0;
      {{loads1}}
      const int q = 0; {{pro_x}}
      st.push(x[0]);
    }
  }
  ks_block_merge(st, sm, ty * TXI + tx, ty, TYR, TXI);
  if (ty == 0 && i < inner) {
    const int64_t col = o * inner + i;
    if (gridDim.y == 1) {
      {{final}}
    } else {
      st.save(partials + ((int64_t)blockIdx.y * outer * inner + col) * State::NF);
    }
  }
}

// Merges the R-split partial states of each column.
__global__ void __launch_bounds__(256)
{{name}}_finalize({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ partials, float* __restrict__ stats,
                 const int64_t cols, const int64_t splits, const int64_t R) {
  using State = {{state}};
  for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < cols; col += (int64_t)gridDim.x * blockDim.x) {
    State st = State::init();
    for (int64_t s = 0; s < splits; ++s) st.merge(State::load(partials + (s * cols + col) * State::NF));
    {{final}}
  }
}

