// The elementwise chain's store (conv_epilogue/kernel.cu's store block): one output channel at a
// time, its plane-constant operands loaded once; rolled loops over the accumulators in shared
// memory (`at`), so the chain's code is there once or twice, not 64 times.
  const int ow = ow0 + lane;
  const int64_t S = (int64_t)Ho * Wo;
#pragma unroll 1
  for (int i = 0; i < 8; ++i) {
    const int oc = oc0 + warp * 8 + i;
    if (oc >= Co || ow >= Wo) continue;
    const int64_t orow = n * Co + oc;  // the (n, oc) output plane
    {{hoists}}
#pragma unroll 2
    for (int j = 0; j < ROWS; ++j) {
      const int oh = oh0 + j;
      if (oh >= Ho) break;
      const int64_t s = (int64_t)oh * Wo + ow;
      const int64_t idx = orow * S + s;
      {{loads}}
      {{outs}}
      {{name}}_f({{call_args}});
      {{stores}}
    }
  }
