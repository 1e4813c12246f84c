// Channels-last operand TI -> contiguous output with 16-byte accesses on both sides, for fp32 in
// and out, one output, C and S multiples of 4, 16-byte-aligned operand and output, and every
// other operand constant along each (n, c) row (a conv bias, a per-channel scale: the binding
// checks, elementwise.py's _vector_condition): a block computes a [TP positions x TC channels] tile (TP * TC = 4096) of sample
// blockIdx.z, reading 4 channels of a position a thread as one float4, and writes 4 positions
// of a channel a thread as one float4 through the shared tile.  A thread's channels are the same
// in each of its 4 reads (256 is a multiple of TC / 4), so the row-constant operands are loaded
// once a thread, 4 channels each.  The one-lane-a-channel kernel (nhwc.cu, 4-byte accesses) ran
// level2/54's epilogue in 0.80 ms on an H200 where Triton's took 0.56
// (bench/results/2026-11-28-h200x4-levels-s21).  This kernel's first form took 1.13 ms there
// (bench/results/2026-11-28-h200x4-levels-s22): each read sat in its own bounds-checked block
// before its math and shared stores (one 16-byte load in flight a thread), and every thread
// located its 4 channels' row-constant operands through the general descriptor (12 lookups a
// thread for 16 values).  Now the first TC threads stage the block's row constants in shared
// memory, and a thread issues its 4 reads before any math.
template <int TI, int TC>
__global__ void __launch_bounds__(256) {{name}}_nhwc_vec({{params}}) {
  constexpr int TP = 4096 / TC;
  static_assert(256 % (TC / 4) == 0, "a thread's channels stay fixed across its reads");
  __shared__ float tile[TC][TP + 1];  // odd row stride: 2-way bank conflicts on the stores, 4-way on the reads
  __shared__ float rowc[{{nin}}][TC];  // the row-constant operands of the block's channels
  const int64_t s0 = (int64_t)blockIdx.x * TP, c0 = (int64_t)blockIdx.y * TC, n = blockIdx.z;
  const int cq = (threadIdx.x % (TC / 4)) * 4;  // this thread's 4 channels: c0 + cq ...
  (void)rowc;
  if (threadIdx.x < TC) {
    const int64_t c = c0 + threadIdx.x;
    const int64_t orow = n * C + (c < C ? c : C - 1);
    (void)orow;
    {{hoists}}
  }
  const float* __restrict__ x = ({{tiled_ptr}}) + (n * S + s0) * C + c0 + cq;  // in<TI> at (s0, c0 + cq)
  const bool cin = c0 + cq < C;
  const int srem = (int)(S - s0 < TP ? S - s0 : TP);  // positions of this block
  float4 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // every read first: a position's 4 channels a thread
    const int p = (threadIdx.x + 256 * i) / (TC / 4);
    v[i] = cin && p < srem ? __ldg(reinterpret_cast<const float4*>(x + (int64_t)p * C)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  __syncthreads();  // rowc staged
  float h[{{nin}}][4];
  (void)h;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    {{row_loads}}
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int p = (threadIdx.x + 256 * i) / (TC / 4);
    const float xv[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      {{loads}}
      float r0[1];
      {{name}}_f({{call_args}});
      tile[cq + q][p] = r0[0];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // write: a channel's 4 positions a thread
    const int e = threadIdx.x + 256 * i, c = e / (TP / 4), p = (e % (TP / 4)) * 4;
    if (c0 + c < C && p < srem) {
      *reinterpret_cast<float4*>(out0 + (n * C + c0 + c) * S + s0 + p) =
          make_float4(tile[c][p], tile[c][p + 1], tile[c][p + 2], tile[c][p + 3]);
    }
  }
}
