// group_norm of a channels-last input (a cuDNN NHWC / NDHWC conv output) whose other operands
// are constant along the spatial dims (per-channel weight and bias, a conv bias, scalars: the
// binding checks, ks_spatially_constant): the statistics read the NHWC memory as it lies, and
// the apply computes in that layout and writes the contiguous NCHW result through a transposed
// shared tile (the scheme of elementwise/nhwc.cu), or, where the program keeps the output
// channels-last (the spec's keep_channels_last), stores it as it was read.  Without them the
// program copied the conv output back to NCHW first, one more read and write of the whole tensor.  Every operand but
// the input is loaded once a thread: its channel is fixed (row = n * C + c of the [N * C, S]
// view the descriptors describe).

// Statistics: a block per (sample n, share of the positions), all C <= 256 channels: thread t
// reads channel t % C of positions t / C + k * (256 / C), so a warp reads 32 consecutive values
// of memory.  One Welford state a thread (its channel's group), merged per group through shared
// memory into the partials of (share, n * G + g) that the tile path's finalize kernel merges.
__global__ void __launch_bounds__(256)
{{name}}_gn_nhwc_stats({{params}}, float* __restrict__ partials, const int64_t outer, const int64_t C,
                        const int64_t S, const int64_t cg, const int64_t per_block) {
  using State = KsStateWelford;
  __shared__ float sm[State::NF][256];
  const int t = threadIdx.x;
  const int Ci = (int)C, rows = 256 / Ci, cgi = (int)cg;
  const int c = t % Ci, r = t / Ci;
  const int64_t n = blockIdx.x;
  const int64_t first = (int64_t)blockIdx.y * per_block;
  const int64_t last = first + per_block < S ? first + per_block : S;
  State st = State::init();
  if (r < rows) {
    const int64_t row = n * C + c;
    const int q = 0;
    {{hoists}}
    const auto* xp = p0 + n * S * C + c;
    int64_t s = first + r;
    // 4 values a push: 4 loads in flight and one Chan merge (Welford's per-value division chain
    // made the scalar span kernel latency-bound, gn_span.cu)
    for (; s + 3 * rows < last; s += 4 * rows) {
      float xs[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float a0[1] = {ks_ld(xp + (s + u * rows) * C)};
        float x; {{pro_x}}
        xs[u] = x;
      }
      ks_push_n<true>(st, xs);
    }
    for (; s < last; s += rows) {
      float a0[1] = {ks_ld(xp + s * C)};
      float x; {{pro_x}}
      st.push(x);
    }
  }
  {
    float f[State::NF]; st.save(f);
#pragma unroll
    for (int k = 0; k < State::NF; ++k) sm[k][t] = f[k];
  }
  __syncthreads();
  const int groups = Ci / cgi;
  if (t < groups) {  // group t: channels [t * cg, (t + 1) * cg) of every row of the block
    State g = State::init();
    for (int rr = 0; rr < rows; ++rr) {
      for (int cc = t * cgi; cc < (t + 1) * cgi; ++cc) {
        const int from = rr * Ci + cc;
        g.merge(State{sm[0][from], sm[1][from], sm[2][from]});
      }
    }
    g.save(partials + ((int64_t)blockIdx.y * outer + n * groups + t) * State::NF);
  }
}

// Apply: a block covers 32 channels x TILES * 32 positions of one sample.  One lane a channel
// reads along C (coalesced), normalises with its group's statistics and its channel's operands
// (loaded once), and parks the results in a shared tile; they leave along S (coalesced) into the
// contiguous [N, C, S] output.  KEEP (the program keeps the output channels-last, for readers
// that take NHWC): each lane stores its value where it read it, [N, S, C], no tile.
template <int TILES, bool KEEP>
__global__ void __launch_bounds__(256)
{{name}}_gn_nhwc_apply({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ stats,
                        const int64_t C, const int64_t S, const int64_t cg) {
  __shared__ float tile[TILES][32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * (32 * TILES), c0 = (int64_t)blockIdx.y * 32, n = blockIdx.z;
  const int64_t c = c0 + tx;
  const int npos = (int)(S - s0 < 32 * TILES ? S - s0 : 32 * TILES);
  if (c < C) {
    const int64_t row = n * C + c;
    const int q = 0;
    {{hoists}}
    {{apply_hoists}}
    const int64_t o = n * (C / cg) + c / cg;
    const float m = stats[2 * o], rs = stats[2 * o + 1];
    const auto* xp = p0 + (n * S + s0) * C + c;
    ks_tile_slots<TILES>(ty, npos, [&](int j, int k, int sl) {
      float a0[1] = {ks_ld(xp + (int64_t)sl * C)};
      float x; {{pro_x}}
      float y = (x - m) * rs;
      {{w_upd}}
      {{epi}}
      if constexpr (KEEP) out[(n * S + s0 + sl) * C + c] = ks_from_float<{{out_t}}>(y);
      else tile[j][ty + 8 * k][tx] = y;
    });
  }
  if constexpr (KEEP) return;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // write along S, one output row (n, c) per warp and k
    const int cl = ty + 8 * k;
    if (c0 + cl >= C) continue;
    {{out_t}}* op = out + (n * C + c0 + cl) * S + s0;
#pragma unroll
    for (int j = 0; j < TILES; ++j) {
      const int sl = 32 * j + tx;
      if (sl < npos) op[sl] = ks_from_float<{{out_t}}>(tile[j][tx][cl]);
    }
  }
}
