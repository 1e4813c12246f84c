#include "../ks_prelude.cuh"

// ---- concatenation kernel {{name}}: {{nseg}} segments along one dim ----
{{segment_fns}}
// The output seen as [outer, D, inner] (D the concatenated dim); segment k covers
// [off[k], off[k + 1]) of D and reads its operands at its own [outer, D_k, inner] index.
struct {{name}}_geom {
  int64_t n, row, inner;  // row = D * inner
  KsFastDiv frow, finner;
  int64_t off[{{nseg_plus_one}}];
  int64_t toff[{{nseg_plus_one}}];  // the transposing kernel: first 32-channel tile of each segment
  int64_t sstep[{{nin}}];  // ... each operand's offset step a position ({{name}}_spatial_step)
};

// VEC consecutive outputs a thread (4 when the binding finds every run of 4 in one segment at
// consecutive operand indices, as in channels-last cats of 4k channels: ncu had the one-value
// kernel at 1.09 TB/s on SqueezeNet's cats, issue-bound on its index math).
template <int VEC>
__global__ void __launch_bounds__(256) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                        const __grid_constant__ {{name}}_geom g) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nv = g.n / VEC;
  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < nv; t += step) {
    const int64_t i = t * VEC;
    const int64_t o = ks_div_by(i, g.row, g.frow);
    const int64_t rest = i - o * g.row;
    const int64_t d = ks_div_by(rest, g.inner, g.finner);
    const int64_t c = rest - d * g.inner;
    float r[VEC];
#pragma unroll
    for (int v = 0; v < VEC; ++v) r[v] = 0.0f;
{{segments}}
    ks_st_vec<VEC>(out + i, r);
  }
}

// Channels-last inputs (cuDNN NHWC convolutions' outputs) into a contiguous output along the
// channels (a fire or inception module's last cat): the kernel above walks the output's order,
// so it would read each input at a stride of C values (level3/17's channels-last program took
// 33.7 ms against 6.8 in NCHW).  Here a block takes 32 channels of one segment x 32 * TILES
// positions of one sample: the values are read along the channels (one lane a channel:
// coalesced in the NHWC inputs), computed (the segment's producer chain) into a shared tile, and
// written along the positions (coalesced in the output) through the transposed tile.
// Every operand's offset steps by a fixed amount a position within a (sample, channel) row (dense
// channels-last inputs C, per-channel operands 0: what the binding's ks_inputs_channels_last
// admits), so a thread locates its channel's row once and adds sl * step a value; read through
// the operand descriptor per value, the kernel was issue-bound (H200, bench/results/2026-11-28-
// h200x4-levels-s22: level3/6's [10, 512, 224, 224] cat 3.25 ms, 0.63 TB/s; Triton's 0.51 ms).
// TILES (PER = 4 * TILES values a thread and operand in registers): 4 where no segment reads
// more than 2 operands, else 2 (a segment with a fused batch_norm reads 5).
#if {{transposing}}
template <int TILES>
__global__ void __launch_bounds__(256) {{name}}_tr_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                           const __grid_constant__ {{name}}_geom g) {
  __shared__ float tile[32][32 * TILES + 1];  // +1: the column writes hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t o = blockIdx.z, s0 = (int64_t)blockIdx.x * (32 * TILES), t = blockIdx.y;
  int lo = 0, hi = {{nseg}} - 1;  // the segment of this channel tile: the last k with toff[k] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (g.toff[mid] <= t) lo = mid; else hi = mid - 1;
  }
  const int64_t dk0 = (t - g.toff[lo]) * 32, width = g.off[lo + 1] - g.off[lo];
  const int npos = (int)(g.inner - s0 < 32 * TILES ? g.inner - s0 : 32 * TILES);
  constexpr int PER = 4 * TILES;  // positions a thread: 32 * TILES over the block's 8 rows
  if (dk0 + tx < width) {
    const int64_t d = g.off[lo] + dk0 + tx;  // the output channel, as the segment cases read it
{{tr_segments}}
  }
  __syncthreads();
  for (int cl = ty; cl < 32 && dk0 + cl < width; cl += 8) {
    {{out_t}}* __restrict__ row = out + (o * g.off[{{nseg}}] + g.off[lo] + dk0 + cl) * g.inner + s0;
    for (int sl = tx; sl < npos; sl += 32) row[sl] = ks_from_float<{{out_t}}>(tile[cl][sl]);
  }
}
#endif

#if {{transposing}}
// The step of operand `d`'s offset per position along a row of `inner` positions of its
// [outer, D_k, inner] index space (rows start at multiples of inner): false where it is not one
// fixed step (a general stride pattern inside the spatial dims).
static bool {{name}}_spatial_step(const KsOperand& d, int64_t inner, int64_t& step) {
  switch (d.mode) {
    case KS_FULL: step = 1; return true;
    case KS_SCALAR: step = 0; return true;
    case KS_ROW: step = 1; return d.mod % inner == 0;
    case KS_CHANNEL:
    case KS_DIVMOD: step = 0; return d.div % inner == 0;
    default:
      step = d.rank > 0 ? d.stride[d.rank - 1] : 0;
      return d.rank > 0 && d.size[d.rank - 1] % inner == 0;
  }
}
#endif

{{launcher_sig}} {
  if (outer <= 0 || D <= 0 || inner <= 0) return;
  {{name}}_geom g;
  g.row = D * inner;
  g.inner = inner;
  g.n = outer * g.row;
  g.frow = ks_fastdiv_make(g.row);
  g.finner = ks_fastdiv_make(inner);
  for (int k = 0; k <= {{nseg}}; ++k) g.off[k] = offsets[k];
#if {{transposing}}
  if (transpose) {  // channels-last inputs into the contiguous output (the binding checks dim 1)
    g.toff[0] = 0;
    for (int k = 0; k < {{nseg}}; ++k) g.toff[k + 1] = g.toff[k] + ks_cdiv(offsets[k + 1] - offsets[k], 32);
    bool affine = true;
    for (int k = 0; k < {{nin}}; ++k) affine = {{name}}_spatial_step(descs[k], inner, g.sstep[k]) && affine;
    if (affine) {  // else (no operand the binding admits): the output-order kernel below
      const dim3 grid((unsigned)ks_cdiv(inner, 32 * {{tr_tiles}}), (unsigned)g.toff[{{nseg}}], (unsigned)outer);
      {{name}}_tr_kernel<{{tr_tiles}}><<<grid, 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), g);
      return;
    }
  }
#endif
  (void)transpose;
#define KS_CAT_LAUNCH(V) do { \
    static const int per_sm = ks_blocks_per_sm({{name}}_kernel<V>, 256); \
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(g.n / (V), 256)); \
    {{name}}_kernel<V><<<(unsigned)blocks, 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), g); } while (0)
#if {{vec4}}
  if (vec == 4 && g.n % 4 == 0) { KS_CAT_LAUNCH(4); return; }  // (the binding's runs of 4 imply n % 4 == 0)
#endif
  (void)vec;
  KS_CAT_LAUNCH(1);
#undef KS_CAT_LAUNCH
}
