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
// P > 1 (C == 32 / P: 16 or 8 channels): a warp's lanes cover P positions of all C channels, so
// a load is still 128 contiguous bytes; with one lane a channel, 16 channels left half of every
// warp idle and half the bytes in flight (level2/79's C = 16 apply: 52% of the H100's DRAM
// bandwidth, bench/results/2026-12-07-h100-s32).  The block covers TILES * 32 * P positions.
template <int TILES, bool KEEP, int P>
__global__ void __launch_bounds__(256)
{{name}}_gn_nhwc_apply({{params}}, {{out_t}}* __restrict__ out, const float* __restrict__ stats,
                        const int64_t C, const int64_t S, const int64_t cg) {
  constexpr int CW = 32 / P, BP = 32 * TILES * P;  // channels a warp row, positions a block
  // P == 1: [TILES][32][33] (+1: the transposed reads hit 32 different banks); P > 1: [BP][CW + 1]
  __shared__ float tile[P == 1 ? TILES * 32 * 33 : BP * (CW + 1)];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int lane_c = P == 1 ? tx : tx % CW, lane_p = P == 1 ? 0 : tx / CW;
  const int64_t s0 = (int64_t)blockIdx.x * BP, c0 = (int64_t)blockIdx.y * 32, n = blockIdx.z;
  const int64_t c = c0 + lane_c;
  const int npos = (int)(S - s0 < BP ? S - s0 : BP);
  if (c < C) {
    const int64_t row = n * C + c;
    const int q = 0;
    {{hoists}}
    {{apply_hoists}}
    const int64_t o = n * (C / cg) + c / cg;
    const float m = stats[2 * o], rs = stats[2 * o + 1];
    const auto* xp = p0 + (n * S + s0) * C + c;
    // BATCHED (the default; a plan's ReductionKnobs.batched_loads): every slot's load first, then
    // the arithmetic.  Loaded and used slot by slot, the SASS held one load in flight a thread
    // (each LDG waited on by the previous slot's math and store), with 32 registers against 48-64.
    constexpr bool BATCHED = {{batched}};
    const int slots = (npos + P - 1) / P;
    float xv[TILES * 4];
    if constexpr (BATCHED) {
      ks_tile_slots<TILES>(ty, slots, [&](int j, int k, int sl) {
        const int pos = sl * P + lane_p;  // P == 1: the slot's position
        xv[4 * j + k] = P == 1 || pos < npos ? ks_ld(xp + (int64_t)pos * C) : 0.f;
      });
    }
    ks_tile_slots<TILES>(ty, slots, [&](int j, int k, int sl) {
      const int pos = sl * P + lane_p;
      if (P > 1 && pos >= npos) return;
      float a0[1];
      if constexpr (BATCHED) a0[0] = xv[4 * j + k];
      else a0[0] = ks_ld(xp + (int64_t)pos * C);
      float x; {{pro_x}}
      float y = (x - m) * rs;
      {{w_upd}}
      {{epi}}
      if constexpr (KEEP) out[(n * S + s0 + pos) * C + c] = ks_from_float<{{out_t}}>(y);
      else if constexpr (P == 1) tile[(j * 32 + ty + 8 * k) * 33 + tx] = y;
      else tile[pos * (CW + 1) + lane_c] = y;
    });
  }
  if constexpr (KEEP) return;
  __syncthreads();
  if constexpr (P == 1) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // write along S, one output row (n, c) per warp and k
      const int cl = ty + 8 * k;
      if (c0 + cl >= C) continue;
      {{out_t}}* op = out + (n * C + c0 + cl) * S + s0;
#pragma unroll
      for (int j = 0; j < TILES; ++j) {
        const int sl = 32 * j + tx;
        if (sl < npos) op[sl] = ks_from_float<{{out_t}}>(tile[(sl) * 33 + cl]);
      }
    }
  } else {
#pragma unroll 4
    for (int f = threadIdx.x; f < CW * BP; f += 256) {  // write along S: BP positions of each channel
      const int cl = f / BP, sl = f - cl * BP;
      if (sl < npos) out[(n * C + cl) * S + s0 + sl] = ks_from_float<{{out_t}}>(tile[sl * (CW + 1) + cl]);
    }
  }
}
