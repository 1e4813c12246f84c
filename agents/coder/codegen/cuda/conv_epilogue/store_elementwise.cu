// The elementwise chain's store (conv_epilogue/kernel.cu's store block): one output channel at a
// time, its plane-constant operands found once (lane_hoists) and shuffled to the channel's turn;
// a channel's accumulators read through one pointer (`ap`: recomputed from the thread index at
// every value, the address was most of the loop's issue in ncu, s32 call 3).  Where every operand
// is constant along the plane (a conv bias, per-channel scales, scalars) the rows take the
// PLANE instance of the walk, the operands in registers (7.5 instructions a value for a bias and
// ReLU, ~29 before).
  const int ow = ow0 + lane;
  const int64_t S = (int64_t)Ho * Wo;
  const int rows = min(ROWS, Ho - oh0);
  {{lane_hoists}}
#pragma unroll 1
  for (int i = 0; i < 8; ++i) {
    const int oc = oc0 + warp * 8 + i;
    if (oc >= Co) break;  // the warp's own channels: every lane takes the same branch
    {{hoists}}
    if (ow >= Wo) continue;  // after the shuffles, which take every lane
    const int64_t orow = n * Co + oc;  // the (n, oc) output plane
    const float* const ap = &at[i][0][lane];
    const auto walk = [&](auto plane) {
      constexpr bool PLANE = decltype(plane)::value;
      (void)PLANE;  // unused where no operand is read
      int64_t s = (int64_t)oh0 * Wo + ow, idx = orow * S + s;
#pragma unroll 4
      for (int j = 0; j < rows; ++j, s += Wo, idx += Wo) {
        {{loads}}
        {{outs}}
        {{name}}_f({{call_args}});
        {{stores}}
      }
    };
    if ({{all_plane}}) walk(std::true_type{}); else walk(std::false_type{});
  }
