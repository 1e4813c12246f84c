
// group_norm rows too long for the row kernels: a row (one channel group of one sample) is C / G
// channel spans of S contiguous values.  Operand bases are set once per span (ks_row_base_any
// with the span as the "row"), so a per-channel weight, bias or conv bias costs one load per span
// instead of the index division per element of the generic tile / apply kernels (on the H100
// those divisions made level2/23's apply kernel compute-bound at 16% of DRAM bandwidth).
// VEC: 16-byte accesses when S is a multiple of the width and full operands are aligned (the
// binding's choice); the scalar build (VEC 1) ran at about half of Inductor's speed on level2/60.
template <int VEC>
__global__ void __launch_bounds__(256)
{{name}}_gn_stats({{params}}, float* __restrict__ partials, const int64_t outer, const int64_t cg,
                  const int64_t S, const int64_t spans_per_block) {
  using State = KsStateWelford;
  __shared__ float sm[State::NF][256];
  const int t = threadIdx.x;
  const int64_t o = blockIdx.x;
  const int64_t first = (int64_t)blockIdx.y * spans_per_block;
  const int64_t last = first + spans_per_block < cg ? first + spans_per_block : cg;
  State st = State::init();
  // Scalar spans batch 4 strided values a push (4 loads in flight, a division per 4 values:
  // Welford's per-value division chain made the scalar build latency-bound); 16-byte spans push
  // their vectors, 4 in flight by unrolling.
  constexpr int U = VEC == 1 ? 4 : 1;
  constexpr int UNROLL = VEC == 1 ? 1 : 4;
  const int64_t stride = (int64_t)blockDim.x * VEC;
  for (int64_t c = first; c < last; ++c) {
    const int64_t row = o * cg + c, R = S;
    {{bases_stats}}
    auto values_at = [&](const int64_t col, float (&xs)[VEC]) {
      {{loads}}
#pragma unroll
      for (int q = 0; q < VEC; ++q) { float x; {{pro_x}} xs[q] = x; }
    };
    int64_t col = (int64_t)t * VEC;
#pragma unroll UNROLL
    for (; col + (U - 1) * stride < S; col += U * stride) {
      float xs[U * VEC];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float v[VEC];
        values_at(col + u * stride, v);
#pragma unroll
        for (int q = 0; q < VEC; ++q) xs[u * VEC + q] = v[q];
      }
      ks_push_n<true>(st, xs);
    }
    for (; col < S; col += stride) {
      float v[VEC];
      values_at(col, v);
      ks_push_n<true>(st, v);
    }
  }
  ks_block_merge(st, sm, t, t, blockDim.x, 1);
  if (t == 0) st.save(partials + ((int64_t)blockIdx.y * outer + o) * State::NF);
}

// y = affine(normalize(prologue(x))) then the epilogue, a block per span.
template <int VEC>
__global__ void __launch_bounds__(256)
{{name}}_gn_apply({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ stats,
                  const int64_t spans, const int64_t cg, const int64_t S) {
  constexpr int APPLY_UNROLL = VEC == 1 ? 4 : 1;  // scalar spans: 4 loads in flight (wider spilled)
  for (int64_t span = blockIdx.x; span < spans; span += gridDim.x) {
    const int64_t row = span, R = S;
    const int64_t o = ks_div(span, cg);
    const float s0 = stats[2 * o], s1 = stats[2 * o + 1];
    {{bases}}
#pragma unroll APPLY_UNROLL
    for (int64_t col = (int64_t)threadIdx.x * VEC; col < S; col += (int64_t)blockDim.x * VEC) {
      {{loads}}
      {{w_loads}}
      {{e_loads}}
      float yv[VEC];
#pragma unroll
      for (int q = 0; q < VEC; ++q) {
        float x; {{pro_x}}
        float y = (x - s0) * s1;
        {{w_upd}}
        {{epi}}
        yv[q] = y;
      }
      ks_st_vec<VEC>(out + row * R + col, yv);
    }
  }
}
