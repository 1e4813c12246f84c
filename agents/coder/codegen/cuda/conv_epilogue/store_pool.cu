// The pooled store (conv_epilogue/kernel.cu's store block): the pool's prologue on every value,
// {{pkh}} x {{pkw}} {{kind}} windows of stride = kernel and no padding (floor mode), whose rows lie
// in one thread ({{pkh}} divides the block's rows) and whose columns in {{pkw}} consecutive lanes
// ({{pkw}} divides 32: a butterfly of shuffles); then the pool's epilogue and one store a window.
// Values past the output's edge are computed on clamped positions and never stored: a window
// that holds one lies past Ho / {{pkh}} or Wo / {{pkw}}.  Rolled loops over the accumulators in
// shared memory (`at`): the prologue's code is there {{pkh}} times, not 64.  Plane-constant operands
// as in the elementwise store: found by lanes 0-7, one channel each, and shuffled.
  const int ow = min(ow0 + lane, Wo - 1);
  const int64_t S = (int64_t)Ho * Wo;
  const int Hp = Ho / {{pkh}}, Wp = Wo / {{pkw}};
  const int64_t Sp = (int64_t)Hp * Wp;
  const int pw = (ow0 + lane) / {{pkw}};
  {{lane_hoists}}
#pragma unroll 1
  for (int i = 0; i < 8; ++i) {
    const int oc = oc0 + warp * 8 + i;
    if (oc >= Co) break;  // the warp's own channels: every lane takes the same branch
    const int64_t orow = n * Co + oc;  // the (n, oc) plane of the convolution's output
    const int64_t prow = orow;         // ... and of the pooled output
    {{hoists}}
    const float* const ap = &at[i][0][lane];  // this thread's accumulators of channel i
    // PLANE: every prologue operand constant along the plane (registers, no branch a value)
    const auto windows = [&](auto plane) {
      constexpr bool PLANE = decltype(plane)::value;
      (void)PLANE;  // unused where no operand is read
#pragma unroll 1
      for (int wr = 0; wr < ROWS / {{pkh}}; ++wr) {
        float m = {{init}};
#pragma unroll
        for (int r = 0; r < {{pkh}}; ++r) {
          const int j = wr * {{pkh}} + r;
          const int64_t s = (int64_t)min(oh0 + j, Ho - 1) * Wo + ow;
          const int64_t idx = orow * S + s;
          {{loads}}
          float v[1];
          {{name}}_pro({{pro_args}});
          m = {{combine}};
        }
#pragma unroll
        for (int off = 1; off < {{pkw}}; off <<= 1) {
          const float o = __shfl_xor_sync(0xffffffffu, m, off);
          m = {{combine_o}};
        }
        const int ph = oh0 / {{pkh}} + wr;
        if (lane % {{pkw}} == 0 && ph < Hp && pw < Wp) {
          const int64_t pidx = prow * Sp + (int64_t)ph * Wp + pw;
          const float acc_v = {{finish}};
          {{epi_loads}}
          float r0[1];
          {{name}}_epi({{epi_args}});
          out0[pidx] = ks_from_float<{{out_t}}>(r0[0]);
        }
      }
    };
    if ({{all_plane}}) windows(std::true_type{}); else windows(std::false_type{});
  }
