// Channels-last operand TI -> contiguous output (see _channels_last_kernel in elementwise.py).
// A block covers 32 channels x {{tiles}} * 32 spatial positions of one sample.  Read phase, one
// lane a channel: the TI values are read along C (coalesced) into shared memory, then each
// thread computes its own elements there, in the read layout, where its channel is fixed: the
// operands that are constant along a row (per-channel weights, a conv bias, batch statistics)
// are loaded once a thread, not once an element.  Write phase: the results leave along S
// (coalesced) through the transposed shared tile.  The first forms computed in the write layout,
// an operand offset per element or a row base per (warp, row): 1.99 and 2.35 ms on level2/52's
// 6-operand epilogue (H100), against 0.64 ms for the NCHW kernel on the same bytes.  Tiles
// stacked along C instead (whole 512-byte rows read, 4 channels a thread) ran at 0.62 TB/s
// against 0.99 on [64, 128, 126, 126] (scripts of bench/results/2026-11-27-h100x4-l2-nhwc-kernels).
// Index math is 32-bit within the block (pointers based once), and when every other operand is
// constant along the row (the usual conv epilogue) a loop without the per-element fallbacks
// runs: ncu counted 98 instructions a value against the NCHW kernel's 50 on level2/93's chain
// (H100), issue-bound, with instruction-fetch stalls from the fallbacks' code.
// A 16-byte form (float4 reads of 4 channels, float4 writes of 4 positions through a [64 x 64]
// tile) ran level2/54's epilogue in 1.13 ms, then 0.86 with its reads batched, where this kernel
// took 0.80 (H200, bench/results/2026-11-28-h200x4-levels-s22): removed.
template <int TI>
__global__ void __launch_bounds__(256) {{name}}_nhwc({{params}}) {
  constexpr int TILES = {{tiles}};
  __shared__ float tile[{{nout}}][TILES][32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * (32 * TILES), c0 = (int64_t)blockIdx.y * 32, nb = blockIdx.z;
  const int64_t c = c0 + tx;
  // positions of this block inside S (< 32 * TILES), and in 32 bits from here on
  const int npos = (int)(S - s0 < 32 * TILES ? S - s0 : 32 * TILES);
  const int Ci = (int)C;  // <= 32 * 65535 (the binding checks ks_cdiv(C, 32) <= 65535): sl * Ci fits
  if (c < C) {
    // Every load first (16 in flight a thread); each thread later reads back only its own slots.
    const int64_t first = (nb * S + s0) * C + c;  // (s0, c) in the NHWC operand
    ks_tile_slots<TILES>(ty, npos, [&](int j, int k, int sl) {
      {{fills}}
    });
    const int64_t orow = nb * C + c;
    {{bases}}
    {{hoists}}
    if ({{all_const}}) {  // every other operand constant along the row: no per-element fallbacks
      ks_tile_slots<TILES>(ty, npos, [&](int j, int k, int sl) {
        (void)sl;
        {{const_loads}}
        {{outs}}
        {{name}}_f({{call_args}});
        {{results}}
      });
    } else {
      // Not unrolled over tiles: an operand's general-offset fallback (ks_load) is then four copies.
#pragma unroll 1
      for (int j = 0; j < TILES; ++j) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int sl = 32 * j + ty + 8 * k;
          if (sl < npos) {
            const int64_t s = s0 + sl;
            {{loads}}
            {{outs}}
            {{name}}_f({{call_args}});
            {{results}}
          }
        }
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // write along S, one output row (n, c) per warp and k
    const int cl = ty + 8 * k;
    if (c0 + cl >= C) continue;
    const int64_t obase = (nb * C + c0 + cl) * S + s0;
#pragma unroll
    for (int j = 0; j < TILES; ++j) {
      const int sl = 32 * j + tx;
      if (sl < npos) {
        {{stores}}
      }
    }
  }
}
