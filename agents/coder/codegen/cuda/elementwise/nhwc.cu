
// Channels-last operand TI -> contiguous output (see _channels_last_kernel in elementwise.py).
template <int TI>
__global__ void __launch_bounds__(256) {{name}}_nhwc({{params}}) {
  __shared__ float tile[32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * 32, c0 = (int64_t)blockIdx.y * 32, nb = blockIdx.z;
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // read along C
    const int row = ty + 8 * k;
    const int64_t s = s0 + row, c = c0 + tx;
    if (s < S && c < C) {
      {{fills}}
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // write along S
    const int row = ty + 8 * k;
    const int64_t c = c0 + row, s = s0 + tx;
    if (c < C && s < S) {
      const int64_t i = (nb * C + c) * S + s;
      {{loads}}
      {{outs}}
      {{name}}_f({{call_args}});
      {{stores}}
    }
  }
}

