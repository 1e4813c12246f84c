
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
// found once by lanes 0-7, one channel each, and shuffled.  Stores leave along the output row, 32 consecutive values a warp.
// Sums run over the input channels in order, then the taps row by row, in fp32 FMAs (PyTorch's
// strict-fp32 cuDNN kernels sum in another order: rounding-level differences only).
//
// Two kernels: `_tiles` (a block a tile, the input channels in staged chunks) for any C_in, and
// `_persistent` for C_in <= the staged chunk (level 2's few-channel convolutions): resident
// blocks walk the tiles, the next tile's input copied into shared memory (cp.async) while this
// one multiplies and stores, the weights staged once a run of tiles of the same channel block.
// In `_tiles` the load phase waited on its global loads with nothing else to do (ncu, s32: a
// quarter of the kernel's stall samples).
{{device_fn}}

constexpr int {{name}}_WARPS = {{warps}};
constexpr int {{name}}_OCB = 8 * {{name}}_WARPS;  // output channels a block: 8 a warp
constexpr int {{name}}_ROWS = {{rows}};  // output rows a block; a thread holds all of its column's
constexpr int {{name}}_COLS = {{cols}};  // output columns a block: one a lane
static_assert({{name}}_COLS == 32, "one output column a lane");
constexpr int {{name}}_CI = {{ci_tile}};  // input channels staged at a time
constexpr int {{name}}_IH = ({{name}}_ROWS - 1) * {{sh}} + {{kh}};
constexpr int {{name}}_IW = ({{name}}_COLS - 1) * {{sw}} + {{kw}};
constexpr int {{name}}_IWP = {{pitch}};  // a staged row's floats: IW, or IW rounded up to 4 (16-byte rows)
// one tap's OCB channels contiguous (16-byte reads of a warp's 8), rows padded by 4 floats: the
// staging loop's consecutive lanes write consecutive taps, 4-way bank conflicts instead of 32
typedef float {{name}}_Weights[{{name}}_CI][{{kh}}][{{kw}}][{{name}}_OCB + 4];
typedef float {{name}}_Input[{{name}}_CI][{{name}}_IH][{{name}}_IWP];
// a warp's 8 channels x ROWS rows x 32 columns; each thread reads back only its own values
typedef float {{name}}_Acc[8][{{name}}_ROWS][{{name}}_COLS];
// the persistent kernel's dynamic shared memory: weights, two input tiles, the accumulators
constexpr size_t {{name}}_PERSISTENT_SMEM =
    sizeof({{name}}_Weights) + 2 * sizeof({{name}}_Input) + {{name}}_WARPS * sizeof({{name}}_Acc);

// the input tile of channels [c0, c0 + CI) at (ih0, iw0), zero outside the image (padding) and
// past C_in.  Unrolled (constant trip counts): every global load of the phase issues before the
// first shared store.
__device__ __forceinline__ void {{name}}_stage_input({{name}}_Input& xs, const float* __restrict__ x, const int64_t n,
                                                     const int c0, const int ih0, const int iw0, const int Cin,
                                                     const int H, const int W) {
  constexpr int THREADS = 32 * {{name}}_WARPS, CI = {{name}}_CI, IH = {{name}}_IH, IW = {{name}}_IW;
#pragma unroll
  for (int e = threadIdx.x; e < CI * IH * IW; e += THREADS) {
    const int c = e / (IH * IW), r = (e / IW) % IH, q = e % IW;
    const int ih = ih0 + r, iw = iw0 + q;
    float v = 0.f;
    if (c0 + c < Cin && ih >= 0 && ih < H && iw >= 0 && iw < W)
      v = __ldg(x + ((n * Cin + c0 + c) * H + ih) * (int64_t)W + iw);
    xs[c][r][q] = v;
  }
}

// the same tile copied asynchronously (complete after ks_cp_async_wait and a barrier): a warp a
// row, a lane a column, so a row's bounds and base are found once (a flat walk's divisions by the
// tile's sizes took 10% of the persistent kernel's stall samples in ncu, s32 call 3)
__device__ __forceinline__ void {{name}}_copy_input({{name}}_Input& xs, const float* __restrict__ x, const int64_t n,
                                                    const int ih0, const int iw0, const int Cin, const int H,
                                                    const int W) {
  constexpr int WARPS = {{name}}_WARPS, CI = {{name}}_CI, IH = {{name}}_IH, IW = {{name}}_IW;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if constexpr ({{vector_copy}}) {
    // 16-byte copies where the rows allow them (W and the tile's first column multiples of 4, x
    // 16-byte aligned; every 4-float chunk then lies wholly inside or outside [0, W)): a row is
    // CH chunks, RPW rows a warp pass, ~7 copies a thread for level 2's 3 x 3 tiles instead of ~40
    // (in ncu, s32 call 4, the 4-byte copy loop was 13% of the kernel's instructions).
    constexpr int IWP = {{name}}_IWP, CH = IWP / 4, RPW = 32 / CH;
    // (checked in the discarded branch too: this is no template)
    static_assert(!{{vector_copy}} || (IWP % 4 == 0 && CH <= 32), "16-byte rows of at most 32 chunks");
    if ((W & 3) == 0 && (iw0 & 3) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
      const int sub = lane / CH, k = lane - sub * CH;
      if (sub < RPW) {
#pragma unroll 2
        for (int rr = warp * RPW + sub; rr < CI * IH; rr += WARPS * RPW) {
          const int c = rr / IH, r = rr - c * IH, ih = ih0 + r, iw = iw0 + 4 * k;
          const bool in = c < Cin && ih >= 0 && ih < H && iw >= 0 && iw < W;
          ks_cp_async16(&xs[c][r][4 * k], in ? x + ((n * Cin + c) * H + ih) * (int64_t)W + iw : x, in);
        }
      }
      return;
    }
  }
#pragma unroll 2
  for (int rr = warp; rr < CI * IH; rr += WARPS) {
    const int c = rr / IH, r = rr - c * IH, ih = ih0 + r;
    const bool row_in = c < Cin && ih >= 0 && ih < H;
    const float* const row = x + ((n * Cin + (row_in ? c : 0)) * H + (row_in ? ih : 0)) * (int64_t)W;
#pragma unroll
    for (int q = lane; q < IW; q += 32) {
      const int iw = iw0 + q;
      const bool in = row_in && iw >= 0 && iw < W;
      ks_cp_async4(&xs[c][r][q], in ? row + iw : x, in);
    }
  }
}

// the weights [Co, Cin, KH, KW] of output channels [oc0, oc0 + OCB) and input channels
// [c0, c0 + CI), channels innermost
__device__ __forceinline__ void {{name}}_stage_weights({{name}}_Weights& ws, const float* __restrict__ w,
                                                       const int oc0, const int c0, const int Cin, const int Co) {
  constexpr int THREADS = 32 * {{name}}_WARPS, OCB = {{name}}_OCB, CI = {{name}}_CI, KH = {{kh}}, KW = {{kw}};
#pragma unroll
  for (int e = threadIdx.x; e < OCB * CI * KH * KW; e += THREADS) {
    const int o = e / (CI * KH * KW), t = e % (CI * KH * KW);
    const int c = t / (KH * KW), kk = t % (KH * KW);
    float v = 0.f;
    if (oc0 + o < Co && c0 + c < Cin) v = __ldg(w + ((int64_t)(oc0 + o) * Cin + c0 + c) * (KH * KW) + kk);
    ws[c][kk / KW][kk % KW][o] = v;
  }
}

// acc += the staged chunk's sums for this thread's 8 channels x ROWS rows of column `lane`
__device__ __forceinline__ void {{name}}_multiply(const {{name}}_Input& xs, const {{name}}_Weights& ws, const int warp,
                                                  const int lane, float (&acc)[8][{{name}}_ROWS]) {
  constexpr int ROWS = {{name}}_ROWS, CI = {{name}}_CI, KH = {{kh}}, KW = {{kw}}, SH = {{sh}}, SW = {{sw}};
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

// The epilogue and the stores of one tile: the register accumulators parked in this warp's
// shared slice `at` (each thread writes and reads back only its own values), then rolled loops,
// so the chain's code is there once or twice.  Unrolled over the 64 register accumulators
// it was half a MB of SASS, which held half the kernel's stall samples, 30% of all of them
// instruction-fetch stalls (ncu, bench/results/2026-12-07-h100-s32).
__device__ __forceinline__ void {{name}}_store({{name}}_Acc& at, const float (&acc)[8][{{name}}_ROWS],
                                               const int warp, const int lane, const int64_t n,
                                               const int oc0, const int oh0, const int ow0, const int Co,
                                               const int Ho, const int Wo{{store_params}}) {
  constexpr int ROWS = {{name}}_ROWS, COLS = {{name}}_COLS;
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < ROWS; ++j) at[i][j][lane] = acc[i][j];
{{store}}
}

// 4 warps and 3 blocks an SM: ptxas holds the 64 accumulators and the reused input values in
// registers without spills (8 warps at 2 blocks an SM capped it at 128 and spilled).
__global__ void __launch_bounds__(32 * {{name}}_WARPS, 3) {{name}}_tiles(
    const float* __restrict__ x, const float* __restrict__ w, {{params}}
    const int Cin, const int H, const int W, const int Co, const int Ho, const int Wo) {
  constexpr int ROWS = {{name}}_ROWS, COLS = {{name}}_COLS, CI = {{name}}_CI;
  // the staged input tile and weights, then (once every warp's sums are done) the accumulators
  __shared__ __align__(16) union {
    struct {
      {{name}}_Weights ws;
      {{name}}_Input xs;
    } in;
    {{name}}_Acc acc[{{name}}_WARPS];
  } sm;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col_tiles = (Wo + COLS - 1) / COLS;
  const int oh0 = (blockIdx.x / col_tiles) * ROWS, ow0 = (blockIdx.x % col_tiles) * COLS;
  const int oc0 = blockIdx.y * {{name}}_OCB;
  const int64_t n = blockIdx.z;
  float acc[8][ROWS] = {};
  for (int c0 = 0; c0 < Cin; c0 += CI) {
    if (c0 > 0) __syncthreads();  // the previous chunk's reads are done
    {{name}}_stage_input(sm.in.xs, x, n, c0, oh0 * {{sh}} - {{ph}}, ow0 * {{sw}} - {{pw}}, Cin, H, W);
    {{name}}_stage_weights(sm.in.ws, w, oc0, c0, Cin, Co);
    __syncthreads();
    {{name}}_multiply(sm.in.xs, sm.in.ws, warp, lane, acc);
  }
  __syncthreads();  // every warp's reads of the tile are done: the accumulators take its place
  {{name}}_store(sm.acc[warp], acc, warp, lane, n, oc0, oh0, ow0, Co, Ho, Wo{{store_args}});
}

// Units (channel block, sample, tile), tiles fastest and channel blocks slowest, walked with a
// stride of the grid: a block's consecutive units share their channel block (weights staged once)
// except where a channel block ends.
__global__ void __launch_bounds__(32 * {{name}}_WARPS, 3) {{name}}_persistent(
    const float* __restrict__ x, const float* __restrict__ w, {{params}}
    const int Cin, const int H, const int W, const int Co, const int Ho, const int Wo, const int N,
    const int units) {
  constexpr int ROWS = {{name}}_ROWS, COLS = {{name}}_COLS;
  extern __shared__ __align__(16) unsigned char {{name}}_smem[];
  {{name}}_Weights& ws = *reinterpret_cast<{{name}}_Weights*>({{name}}_smem);
  {{name}}_Input* xs = reinterpret_cast<{{name}}_Input*>({{name}}_smem + sizeof({{name}}_Weights));
  {{name}}_Acc* accs = reinterpret_cast<{{name}}_Acc*>({{name}}_smem + sizeof({{name}}_Weights) + 2 * sizeof({{name}}_Input));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col_tiles = (Wo + COLS - 1) / COLS;
  const unsigned tiles = (unsigned)((Ho + ROWS - 1) / ROWS) * col_tiles;  // units < 2^30 (the launcher's check)
  // unit -> its sample, first output row / column and first output channel (32-bit divisions:
  // 64-bit ones were a software routine a unit)
  auto place = [&](int u, int64_t& n, int& oh0, int& ow0, int& oc0) {
    const unsigned tile = (unsigned)u % tiles, rest = (unsigned)u / tiles;
    n = rest % (unsigned)N;
    oc0 = (int)(rest / (unsigned)N) * {{name}}_OCB;
    oh0 = (int)(tile / (unsigned)col_tiles) * ROWS;
    ow0 = (int)(tile % (unsigned)col_tiles) * COLS;
  };
  // unit v's input tile into xs[buf], asynchronously
  auto prefetch = [&](int v, int buf) {
    int64_t n; int oh0, ow0, oc0;
    place(v, n, oh0, ow0, oc0);
    {{name}}_copy_input(xs[buf], x, n, oh0 * {{sh}} - {{ph}}, ow0 * {{sw}} - {{pw}}, Cin, H, W);
  };
  int u = blockIdx.x;
  if (u >= units) return;
  prefetch(u, 0);
  ks_cp_async_commit();
  int staged_oc0 = -1;
  for (int buf = 0; u < units; u += (int)gridDim.x, buf ^= 1) {
    int64_t n; int oh0, ow0, oc0;
    place(u, n, oh0, ow0, oc0);
    // the last unit's multiply (the barrier after it) is done with the weights and xs[buf ^ 1]
    if (oc0 != staged_oc0) {  // the same for the whole block
      {{name}}_stage_weights(ws, w, oc0, 0, Cin, Co);
      staged_oc0 = oc0;
    }
    if (units - u > (int)gridDim.x) prefetch(u + (int)gridDim.x, buf ^ 1);  // no overflow past units
    ks_cp_async_commit();  // possibly empty: the wait below always leaves one group in flight
    ks_cp_async_wait<1>();  // this unit's copies (this thread's) have landed
    __syncthreads();        // ... and every thread's, and the weights
    float acc[8][ROWS] = {};
    {{name}}_multiply(xs[buf], ws, warp, lane, acc);
    __syncthreads();  // every warp's reads of xs[buf] and the weights are done
    {{name}}_store(accs[warp], acc, warp, lane, n, oc0, oh0, ow0, Co, Ho, Wo{{store_args}});
  }
}

{{launcher_sig}} {
  if (N <= 0 || Co <= 0 || Ho <= 0 || Wo <= 0) return;
  const int64_t tiles = ks_cdiv(Ho, {{name}}_ROWS) * ks_cdiv(Wo, {{name}}_COLS);
  constexpr int THREADS = 32 * {{name}}_WARPS;
  const int64_t units = tiles * N * ks_cdiv(Co, {{name}}_OCB);
  if ({{persistent}} && Cin <= {{name}}_CI && units <= INT32_MAX / 2) {  // u + the grid never overflows
    static bool opted_in[64] = {false};
    static int per_sm[64] = {0};  // the occupancy, per device as the opt-in
    if (ks_smem_opt_in({{name}}_persistent, (int){{name}}_PERSISTENT_SMEM, opted_in)) {  // else the tiles kernel
      const int dev = ks_device_slot();
      if (per_sm[dev] == 0) per_sm[dev] = ks_blocks_per_sm({{name}}_persistent, THREADS, {{name}}_PERSISTENT_SMEM);
      {{name}}_persistent<<<(unsigned)ks_grid(per_sm[dev], units), THREADS, {{name}}_PERSISTENT_SMEM, stream>>>(
          x, w, {{kernel_args}} (int)Cin, (int)H, (int)W, (int)Co, (int)Ho, (int)Wo, (int)N, (int)units);
      return;
    }
  }
  const dim3 grid((unsigned)tiles, (unsigned)ks_cdiv(Co, {{name}}_OCB), (unsigned)N);
  {{name}}_tiles<<<grid, THREADS, 0, stream>>>(x, w, {{kernel_args}} (int)Cin, (int)H, (int)W, (int)Co, (int)Ho, (int)Wo);
}
