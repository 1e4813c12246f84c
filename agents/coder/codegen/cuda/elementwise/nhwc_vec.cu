// Channels-last operand TI -> contiguous output with 16-byte accesses on both sides, for fp32 in
// and out, one output, C and S multiples of 4, 16-byte-aligned operand and output, and every
// other operand constant along each (n, c) row (a conv bias, a per-channel scale: the binding
// checks, elementwise.py's _vector_condition): a block computes a [TP positions x TC channels] tile (TP * TC = 4096) of sample
// blockIdx.z, reading 4 channels of a position a thread as one float4, and writes 4 positions
// of a channel a thread as one float4 through the shared tile.  A thread's channels are the same
// in each of its 4 reads (256 is a multiple of TC / 4), so the row-constant operands are loaded
// once a thread, 4 channels each.  The one-lane-a-channel kernel (nhwc.cu, 4-byte accesses) ran
// level2/54's epilogue in 0.80 ms on an H200 where Triton's took 0.56
// (bench/results/2026-11-28-h200x4-levels-s21).
template <int TI, int TC>
__global__ void __launch_bounds__(256) {{name}}_nhwc_vec({{params}}) {
  constexpr int TP = 4096 / TC;
  static_assert(256 % (TC / 4) == 0, "a thread's channels stay fixed across its reads");
  __shared__ float tile[TC][TP + 1];  // odd row stride: 2-way bank conflicts on the stores, 4-way on the reads
  const int64_t s0 = (int64_t)blockIdx.x * TP, c0 = (int64_t)blockIdx.y * TC, n = blockIdx.z;
  const int cq = (threadIdx.x % (TC / 4)) * 4;  // this thread's 4 channels: c0 + cq ...
  float h[{{nin}}][4];  // the row-constant operands of those channels
  (void)h;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int64_t c = c0 + cq + q;
    const int64_t orow = n * C + (c < C ? c : C - 1);
    (void)orow;
    {{hoists}}
  }
  const float* __restrict__ x = ({{tiled_ptr}}) + n * S * C;  // in<TI>
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // read: a position's 4 channels a thread
    const int e = threadIdx.x + 256 * i, p = e / (TC / 4);
    const int64_t s = s0 + p, c = c0 + cq;
    if (s < S && c < C) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(x + s * C + c));
      const float xv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        {{loads}}
        float r0[1];
        {{name}}_f({{call_args}});
        tile[cq + q][p] = r0[0];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // write: a channel's 4 positions a thread
    const int e = threadIdx.x + 256 * i, c = e / (TP / 4), p = (e % (TP / 4)) * 4;
    if (c0 + c < C && s0 + p < S) {
      *reinterpret_cast<float4*>(out0 + (n * C + c0 + c) * S + s0 + p) =
          make_float4(tile[c][p], tile[c][p + 1], tile[c][p + 2], tile[c][p + 3]);
    }
  }
}
