// Rows form of {{name}} (NCHW conv epilogues): the output seen as [rows, cols] (rows = N * C,
// cols = the spatial size), every operand either read along the row (full size, or a row
// vector) or constant along it (per channel, scalar): a thread takes one row's chunk, computes
// each operand's row base once and loads the row-constant ones once, where the flat kernel
// finds every value's channel by two divisions per operand (ptx: 331 64-bit multiplies and 722
// conversions in level2/52's 6-operand kernel; ncu: 115 instructions a value, issue-bound).
__global__ void __launch_bounds__({{threads}}) {{name}}_rows({{params}}, const int64_t rows, const int64_t cols) {
  constexpr int VEC = {{vec}};
  const int64_t step = (int64_t)gridDim.x * blockDim.x * VEC;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    {{bases}}
    {{hoists}}
    const int64_t obase = r * cols;
    for (int64_t col = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC; col < cols; col += step) {
      {{loads}}
      {{outs}}
#pragma unroll
      for (int j = 0; j < VEC; ++j) {{name}}_f({{call_args}});
      {{stores}}
    }
  }
}

void {{name}}_launch_rows(const void* const* ins, const KsOperand* descs, void* const* outs, int64_t rows,
    int64_t cols, cudaStream_t stream) {
  static const int per_sm = ks_blocks_per_sm({{name}}_rows, {{threads}});
  const int64_t full = (int64_t)per_sm * ks_sm_count();
  const int64_t bx = ks_grid(per_sm, ks_cdiv(ks_cdiv(cols, {{vec}}), {{threads}}));
  int64_t by = full / bx > 1 ? full / bx : 1;
  if (by > rows) by = rows;
  if (by > 65535) by = 65535;
  {{name}}_rows<<<dim3((unsigned)bx, (unsigned)by), {{threads}}, 0, stream>>>({{kernel_args}}, rows, cols);
}
