// Channels-last operand TI -> contiguous output (see _channels_last_kernel in elementwise.py).
// A block moves TILES 32 x 32 (spatial, channel) tiles of one sample, stacked along C (ALONG_C:
// 32 positions x 32 * TILES channels, so a row of up to 32 * TILES channels is read whole) or
// along S (32 * TILES positions x 32 channels).  Read phase, one lane a channel: the TI values
// are read along C (coalesced) into shared memory, then each thread computes its own elements
// there, in the read layout, where its channel is fixed: operands constant along a row
// (per-channel weights, a conv bias, batch statistics) are loaded once a tile, not once an
// element.  Write phase: the results leave along S (coalesced) through the transposed tile.  The
// first forms computed in the write layout, an operand offset per element or a row base per
// (warp, row): 1.99 and 2.35 ms on level2/52's 6-operand epilogue (H100), against 0.64 ms for
// the NCHW kernel on the same bytes.
template <int TI, bool ALONG_C>
__global__ void __launch_bounds__(256) {{name}}_nhwc({{params}}) {
  constexpr int TILES = {{tiles}};
  __shared__ float tile[{{nout}}][TILES][32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * (ALONG_C ? 32 : 32 * TILES);
  const int64_t c0 = (int64_t)blockIdx.y * (ALONG_C ? 32 * TILES : 32), nb = blockIdx.z;
  // Every load first (16 in flight a thread); each thread later reads back only its own slots.
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
    const int64_t c = c0 + (ALONG_C ? 32 * j : 0) + tx;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = ty + 8 * k;
      const int64_t s = s0 + (ALONG_C ? 0 : 32 * j) + row;
      if (s < S && c < C) {
        {{fills}}
      }
    }
  }
  int64_t orow = 0;
  {{row_decls}}
  // Not unrolled over tiles: an operand's general-offset fallback (ks_load) is then four copies.
#pragma unroll 1
  for (int j = 0; j < TILES; ++j) {
    const int64_t c = c0 + (ALONG_C ? 32 * j : 0) + tx;
    if (c >= C) continue;
    if (ALONG_C || j == 0) {  // a new channel: its row (n, c) and the operands constant along it
      orow = nb * C + c;
      {{bases}}
      {{hoists}}
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = ty + 8 * k;
      const int64_t s = s0 + (ALONG_C ? 0 : 32 * j) + row;
      if (s < S) {
        {{loads}}
        {{outs}}
        {{name}}_f({{call_args}});
        {{results}}
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
    const int64_t s = s0 + (ALONG_C ? 0 : 32 * j) + tx;
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // write along S, one output row (n, c) per warp and k
      const int cl = ty + 8 * k;
      const int64_t c = c0 + (ALONG_C ? 32 * j : 0) + cl;
      if (s < S && c < C) {
        const int64_t o = (nb * C + c) * S + s;
        {{stores}}
      }
    }
  }
}
