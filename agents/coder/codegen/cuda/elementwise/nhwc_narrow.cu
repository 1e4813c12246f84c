// Channels-last operand TI -> contiguous output for fewer than 32 channels, where {{name}}_nhwc
// idles 32 - C lanes of every warp (0.60 TB/s at 16 channels against 1.14 at 64 on level2/52's
// chain, H100; every such level-2 problem is a 3-D convolution with 16 channels).  A block takes
// POS consecutive positions of one sample with all their channels: one contiguous run of POS * C
// values, read linearly (coalesced).  The values of the operands constant along a channel's row
// are staged in shared memory once a block; each thread computes the values it loaded (no
// barrier between), and the results leave along S through the transposed tile.
template <int TI>
__global__ void __launch_bounds__(256) {{name}}_nhwc_narrow({{params}}) {
  constexpr int POS = 32 * {{tiles}};
  __shared__ float tile[{{nout}}][POS][33];
  __shared__ float row_value[{{nin}}][32];
  __shared__ int64_t row_base[{{nin}}][32];
  __shared__ bool row_const[{{nin}}][32];
  const int t = threadIdx.x, Ci = (int)C;
  const int64_t s0 = (int64_t)blockIdx.x * POS, nb = blockIdx.y;
  if (t < Ci) {  // channel t's row (n, t): operand bases and the values constant along it
    const int64_t orow = nb * C + t;
    {{row_setup}}
  }
  const int npos = (int)(S - s0 < POS ? S - s0 : POS);
  const int count = npos * Ci;
  // every load first, into registers: up to POS * 32 / 256 in flight (each parked in the tile as
  // it arrived, the next load waited for that shared store: the SASS held 1-2 in flight)
  float fill[POS * 32 / 256];
#pragma unroll
  for (int i = 0; i < POS * 32 / 256; ++i) {
    const int e = t + 256 * i;
    if (e < count) {
      {{fills}}
    }
  }
#pragma unroll
  for (int i = 0; i < POS * 32 / 256; ++i) {
    const int e = t + 256 * i;
    if (e < count) {
      const int sl = e / Ci;
      tile[0][sl][e - sl * Ci] = fill[i];
    }
  }
  __syncthreads();  // the staged row values
#pragma unroll 1
  for (int i = 0; i < POS * 32 / 256; ++i) {
    const int e = t + 256 * i;
    if (e >= count) break;
    const int sl = e / Ci, c = e - sl * Ci;
    const int64_t s = s0 + sl, orow = nb * C + c;
    (void)orow;
    {{loads}}
    {{outs}}
    {{name}}_f({{call_args}});
    {{results}}
  }
  __syncthreads();
  for (int e = t; e < POS * Ci; e += 256) {  // write along S: channel rows of npos values
    const int c = e / POS, sl = e - c * POS;
    if (sl < npos) {
      const int64_t o = (nb * C + c) * S + s0 + sl;
      {{stores}}
    }
  }
}
