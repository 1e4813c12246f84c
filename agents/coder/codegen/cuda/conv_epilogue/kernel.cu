
#include "../ks_prelude.cuh"

// ---- {{name}}: a {{kh}} x {{kw}} convolution (stride {{sh}} x {{sw}}, padding {{ph}} x {{pw}}) computed
// directly in fp32, its epilogue (an elementwise chain, or a pooling) applied before the only store (agents/coder/codegen/
// conv_epilogue.py) ----
// For few input channels (C_in * kh * kw <= the planner's bound) the convolution is a handful of
// FMAs an output value, and the cuDNN path pays three full passes over the output: cuDNN writes it
// (channels-last, after an NCHW -> NHWC copy of the input), the epilogue kernel reads it and writes
// it again.  Here the NCHW input is read once through shared memory, the weights of a block's 32
// output channels sit in shared memory, and each thread keeps 8 channels x 8 rows of one output
// column in registers: per (input channel, tap) two broadcast 16-byte weight loads and 8 input
// loads feed 64 FMAs.  The epilogue's operands are read through the elementwise kernels'
// descriptors (ks_load); those constant along an output plane (a conv bias, a per-channel scale)
// once per thread and channel.  Stores leave along the output row, 32 consecutive values a warp.
// Sums run over the input channels in order, then the taps row by row, in fp32 FMAs (PyTorch's
// strict-fp32 cuDNN kernels sum in another order: rounding-level differences only).
{{device_fn}}

constexpr int {{name}}_WARPS = {{warps}};
constexpr int {{name}}_OCB = 8 * {{name}}_WARPS;  // output channels a block: 8 a warp
constexpr int {{name}}_ROWS = {{rows}};  // output rows a block; a thread holds all of its column's
constexpr int {{name}}_COLS = {{cols}};  // output columns a block: one a lane
static_assert({{name}}_COLS == 32, "one output column a lane");
constexpr int {{name}}_CI = {{ci_tile}};  // input channels staged at a time
constexpr int {{name}}_IH = ({{name}}_ROWS - 1) * {{sh}} + {{kh}};
constexpr int {{name}}_IW = ({{name}}_COLS - 1) * {{sw}} + {{kw}};

// 4 warps and 3 blocks an SM: ptxas holds the 64 accumulators and the reused input values in
// 168 registers without spills (8 warps at 2 blocks an SM capped it at 128 and spilled).
__global__ void __launch_bounds__(32 * {{name}}_WARPS, 3) {{name}}_kernel(
    const float* __restrict__ x, const float* __restrict__ w, {{params}}
    const int Cin, const int H, const int W, const int Co, const int Ho, const int Wo) {
  constexpr int THREADS = 32 * {{name}}_WARPS, OCB = {{name}}_OCB, ROWS = {{name}}_ROWS, COLS = {{name}}_COLS, CI = {{name}}_CI;
  constexpr int IH = {{name}}_IH, IW = {{name}}_IW, KH = {{kh}}, KW = {{kw}}, SH = {{sh}}, SW = {{sw}};
  // The staged input tile and weights, then (once every warp's sums are done) the accumulators:
  // the epilogue reads them back in rolled loops.  Unrolled over the 64 register accumulators, the
  // epilogue's code (operand descriptors, the chain) was half a MB of SASS and half the kernel's
  // time was instruction-fetch stalls (ncu, bench/results/2026-12-07-h100-s32).
  __shared__ __align__(16) union {
    struct {
      // one tap's OCB channels contiguous (16-byte reads of a warp's 8), rows padded by 4 floats:
      // the staging loop's consecutive lanes write consecutive taps, 4-way bank conflicts, not 32
      float ws[CI][KH][KW][OCB + 4];
      float xs[CI][IH][IW];
    } in;
    float acc[{{name}}_WARPS][8][ROWS][COLS];  // a warp's 8 channels x ROWS rows x 32 columns
  } sm;
  auto& xs = sm.in.xs;
  auto& ws = sm.in.ws;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col_tiles = (Wo + COLS - 1) / COLS;
  const int oh0 = (blockIdx.x / col_tiles) * ROWS, ow0 = (blockIdx.x % col_tiles) * COLS;
  const int oc0 = blockIdx.y * OCB;
  const int64_t n = blockIdx.z;
  const int ih0 = oh0 * SH - {{ph}}, iw0 = ow0 * SW - {{pw}};
  float acc[8][ROWS];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < ROWS; ++j) acc[i][j] = 0.f;

  for (int c0 = 0; c0 < Cin; c0 += CI) {
    if (c0 > 0) __syncthreads();  // the previous chunk's reads are done
    // the input tile, zero outside the image (padding) and past C_in.  Unrolled (constant trip
    // counts) so every global load of the phase is issued before the first shared store: the
    // first timing (one load, then one store, a round trip an iteration) ran the kernel at 11.5-16
    // TFLOP/s on an H100 (bench/results/2026-12-07-h100-s31; this form not yet timed).
#pragma unroll
    for (int e = threadIdx.x; e < CI * IH * IW; e += THREADS) {
      const int c = e / (IH * IW), r = (e / IW) % IH, q = e % IW;
      const int ih = ih0 + r, iw = iw0 + q;
      float v = 0.f;
      if (c0 + c < Cin && ih >= 0 && ih < H && iw >= 0 && iw < W)
        v = __ldg(x + ((n * Cin + c0 + c) * H + ih) * (int64_t)W + iw);
      xs[c][r][q] = v;
    }
    // the weights [Co, Cin, KH, KW] of this chunk, channels innermost
#pragma unroll
    for (int e = threadIdx.x; e < OCB * CI * KH * KW; e += THREADS) {
      const int o = e / (CI * KH * KW), t = e % (CI * KH * KW);
      const int c = t / (KH * KW), kk = t % (KH * KW);
      float v = 0.f;
      if (oc0 + o < Co && c0 + c < Cin) v = __ldg(w + ((int64_t)(oc0 + o) * Cin + c0 + c) * (KH * KW) + kk);
      ws[c][kk / KW][kk % KW][o] = v;
    }
    __syncthreads();
#pragma unroll 1
    for (int c = 0; c < CI; ++c) {
#pragma unroll
      for (int kh = 0; kh < KH; ++kh) {
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          const float4 wa = *reinterpret_cast<const float4*>(&ws[c][kh][kw][warp * 8]);
          const float4 wb = *reinterpret_cast<const float4*>(&ws[c][kh][kw][warp * 8 + 4]);
          const float wv[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
          for (int j = 0; j < ROWS; ++j) {
            const float xv = xs[c][j * SH + kh][lane * SW + kw];
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i][j] = fmaf(wv[i], xv, acc[i][j]);
          }
        }
      }
    }
  }

  __syncthreads();  // every warp's reads of the tile are done: the accumulators take its place
  auto& at = sm.acc[warp];  // this warp's, lane-contiguous (conflict-free), read back by their own thread
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < ROWS; ++j) at[i][j][lane] = acc[i][j];
  __syncwarp();
{{store}}
}

{{launcher_sig}} {
  if (N <= 0 || Co <= 0 || Ho <= 0 || Wo <= 0) return;
  const int64_t tiles = ks_cdiv(Ho, {{name}}_ROWS) * ks_cdiv(Wo, {{name}}_COLS);
  const dim3 grid((unsigned)tiles, (unsigned)ks_cdiv(Co, {{name}}_OCB), (unsigned)N);
  {{name}}_kernel<<<grid, 32 * {{name}}_WARPS, 0, stream>>>(x, w, {{kernel_args}} (int)Cin, (int)H, (int)W, (int)Co, (int)Ho, (int)Wo);
}
