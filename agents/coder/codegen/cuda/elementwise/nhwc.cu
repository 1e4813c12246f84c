
// Channels-last operand TI -> contiguous output (see _channels_last_kernel in elementwise.py).
// A block covers 32 channels x KS_NHWC_TILES * 32 spatial positions: each 32 x 32 tile is read
// along C and written along S through shared memory, so both sides are coalesced.  The other
// operands are read per output row (one (n, c) pair: row = n * C + c, col = s): their row base
// is computed once per row and each element is one load (ks_load_row; an operand whose offset
// is not affine along S, or strided, falls back to its per-element offset).  The first form (one
// tile a block, a descriptor offset per element of every operand) ran at a third of the NCHW
// kernel's speed on level2/52 (H100: 1.99 ms against 0.64 ms), issue-bound on index math.
#ifndef KS_NHWC_TILES
#define KS_NHWC_TILES 4
#endif
template <int TI>
__global__ void __launch_bounds__(256) {{name}}_nhwc({{params}}) {
  __shared__ float tile[KS_NHWC_TILES][32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * (32 * KS_NHWC_TILES), c0 = (int64_t)blockIdx.y * 32, nb = blockIdx.z;
#pragma unroll
  for (int j = 0; j < KS_NHWC_TILES; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // read along C
      const int row = ty + 8 * k;
      const int64_t s = s0 + 32 * j + row, c = c0 + tx;
      if (s < S && c < C) {
        {{fills}}
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // write along S, one output row (n, c) per warp and k
    const int cl = ty + 8 * k;
    const int64_t c = c0 + cl;
    if (c >= C) continue;
    const int64_t orow = nb * C + c;
    {{bases}}
    // Not unrolled: each operand's fallback offset (ks_load, inline: an out-of-line call made
    // ptxas spill) is then four copies a kernel, as in the one-tile form, not sixteen.
#pragma unroll 1
    for (int j = 0; j < KS_NHWC_TILES; ++j) {
      const int64_t s = s0 + 32 * j + tx;
      if (s < S) {
        const int64_t i = orow * S + s;
        {{loads}}
        {{outs}}
        {{name}}_f({{call_args}});
        {{stores}}
      }
    }
  }
}
