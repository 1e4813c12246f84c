#include "../ks_prelude.cuh"

// ---- pooling kernel {{name}}: {{kind}} pooling over {{nd}} spatial dim(s) ----
// One thread per output value, in the input's memory order (CL: channels-last, so a warp reads
// 32 channels of one position: coalesced in both layouts); the output is contiguous either way
// (a channels-last input is our own layout choice, never the caller's: the verifier compares
// with the reference's contiguous output).  Every value a window reads goes through the fused
// prologue; the pooled value through the epilogue.
{{pro_fn}}
{{epi_fn}}
template <int KIND, bool CL>
__global__ void __launch_bounds__({{threads}}) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                             const __grid_constant__ KsPoolGeom g, const int64_t per_sample) {
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  // Samples along y, each sample's outputs (< 2^31, checked by the binding) along x: 32-bit
  // index math (64-bit division subroutines made ptxas spill).
  for (int64_t r = blockIdx.y; r < g.N; r += gridDim.y)
  for (uint32_t q0 = blockIdx.x * blockDim.x + threadIdx.x; q0 < (uint32_t)per_sample; q0 += gridDim.x * blockDim.x) {
    uint32_t q = q0;
    int64_t c = 0;
    if constexpr (CL) { c = q % (uint32_t)g.C; q /= (uint32_t)g.C; }
    const int64_t ow = q % (uint32_t)g.out[2]; q /= (uint32_t)g.out[2];
    const int64_t oh = q % (uint32_t)g.out[1]; q /= (uint32_t)g.out[1];
    const int64_t od = q % (uint32_t)g.out[0]; q /= (uint32_t)g.out[0];
    if constexpr (!CL) c = q;
    const int64_t plane = r * g.C + c;
    (void)plane; (void)in_plane;
    {{plane_loads}}
    const KsPoolWin wd = ks_pool_window<KIND>(od, g.in[0], g.out[0], g.k[0], g.s[0], g.p[0], g.dil[0]);
    const KsPoolWin wh = ks_pool_window<KIND>(oh, g.in[1], g.out[1], g.k[1], g.s[1], g.p[1], g.dil[1]);
    const KsPoolWin ww = ks_pool_window<KIND>(ow, g.in[2], g.out[2], g.k[2], g.s[2], g.p[2], g.dil[2]);
    const auto* __restrict__ base = p0 + r * g.xs[0] + c * g.xs[1];
    float acc = KIND == 0 ? -INFINITY : 0.f;
    // A window row of KW <= 16 taps (no other full-size operand read per tap) loads all of its
    // taps first, so KW loads are in flight instead of one (ncu, H100: the channels-last kernel
    // this form replaced there ran at 0.5 TB/s on SqueezeNet's pools); a tap past the row's end
    // loads the row's last input position (taps start inside) and is masked out.
    constexpr int KW_ROW = {{kw_row}};
    if constexpr (KW_ROW > 0) {
      for (int64_t id = wd.lo; id < wd.hi; id += wd.step) {
        for (int64_t ih = wh.lo; ih < wh.hi; ih += wh.step) {
          const auto* __restrict__ row = base + id * g.xs[2] + ih * g.xs[3];
          float x[KW_ROW > 0 ? KW_ROW : 1];
          uint32_t inside = 0;
#pragma unroll
          for (int t = 0; t < KW_ROW; ++t) {
            const int64_t iw = ww.lo + t * ww.step;
            inside |= (uint32_t)(iw < ww.hi) << t;
            x[t] = ks_ld(row + (iw < g.in[2] ? iw : g.in[2] - 1) * g.xs[4]);
          }
#pragma unroll
          for (int t = 0; t < KW_ROW; ++t) {
            if (!((inside >> t) & 1u)) continue;
            const float a0 = x[t];
            float v;
            {{name}}_pro({{row_pro_args}}, v);
            if constexpr (KIND == 0) acc = ks_max(acc, v); else acc += v;
          }
        }
      }
    } else {
      for (int64_t id = wd.lo; id < wd.hi; id += wd.step) {
        for (int64_t ih = wh.lo; ih < wh.hi; ih += wh.step) {
          for (int64_t iw = ww.lo; iw < ww.hi; iw += ww.step) {
            const float a0 = ks_ld(base + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]);
            {{spatial_loads}}
            float v;
            {{name}}_pro({{pro_args}}, v);
            if constexpr (KIND == 0) acc = ks_max(acc, v); else acc += v;
          }
        }
      }
    }
    acc = ks_pool_finish<KIND>(acc, wd, wh, ww, g);
    const int64_t o = ((plane * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow;  // contiguous
    {{epi_loads}}
    {{name}}_epi({{epi_args}});
    // kept channels-last: the output in the input's memory order, the thread's own index
    out[(CL && g.keep_cl) ? r * per_sample + (int64_t)q0 : o] = ks_from_float<{{out_t}}>(acc);
  }
}

// The channels-last fast paths (launched when the binding finds a float32 NHWC input with C % 4 == 0
// and 16-byte aligned positions, and the window reads no full-size operand but the input): a
// thread pools 4 consecutive channels of one output position with 16-byte loads, and windows of
// up to 27 taps (KD * KH * KW, 0 for adaptive windows) are unrolled, every tap's load issued
// before any arithmetic, so all of a window's loads are in flight at once.  ncu on SqueezeNet's 3x3 / stride-2 max pools (the
// one-value-a-tap kernel above): 514-585 GB/s, one load in flight a thread, 4.3 ms for one pool.
// res: the 4 pooled values of channels c0..c0+3 at (od, oh, ow) of sample r, epilogue applied.
template <int KIND, int KD, int KH, int KW>
__device__ __forceinline__ void {{name}}_cl4_window({{device_params}}, const KsPoolGeom& g, const int64_t r,
                                                    const int64_t c0, const int64_t od, const int64_t oh,
                                                    const int64_t ow, float (&res)[4]) {
#if {{vec4}}
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  float accv[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) accv[j] = KIND == 0 ? -INFINITY : 0.f;
  float plane_vals[4][{{nplane}} + 1];
  (void)plane_vals;
  const int64_t plane0 = r * g.C + c0;  // the 4 channels' planes (ks_ld_planes4)
  (void)plane0; (void)in_plane;
  {{plane_loads_cl4x4}}
  const KsPoolWin wd = ks_pool_window<KIND>(od, g.in[0], g.out[0], g.k[0], g.s[0], g.p[0], g.dil[0]);
  const KsPoolWin wh = ks_pool_window<KIND>(oh, g.in[1], g.out[1], g.k[1], g.s[1], g.p[1], g.dil[1]);
  const KsPoolWin ww = ks_pool_window<KIND>(ow, g.in[2], g.out[2], g.k[2], g.s[2], g.p[2], g.dil[2]);
  const float* __restrict__ base = reinterpret_cast<const float*>(p0) + r * g.xs[0] + c0;
  auto add = [&](const float4 x4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float a0 = j == 0 ? x4.x : j == 1 ? x4.y : j == 2 ? x4.z : x4.w;
      {{plane_args_cl4}}
      float v;
      {{name}}_pro({{pro_args}}, v);
      if constexpr (KIND == 0) accv[j] = ks_max(accv[j], v); else accv[j] += v;
    }
  };
  auto at = [&](int64_t id, int64_t ih, int64_t iw) {
    return reinterpret_cast<const float4*>(base + id * g.xs[2] + ih * g.xs[3] + iw * g.xs[4]);
  };
  if constexpr (KD > 0 && KD * KH * KW <= 27) {
    // every tap's load first, then the arithmetic
    constexpr int T = KD * KH * KW;
    // (a tap past the window's end loads the input's last position along that dim instead
    // (taps start inside: lo >= 0) and is masked out: loads under per-tap predicates made
    // ptxas spill; the mask is a bit field for the same reason)
    float4 x[T];
    uint32_t inside = 0;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int64_t id = wd.lo + (t / (KH * KW)) * wd.step, ih = wh.lo + (t / KW % KH) * wh.step,
                    iw = ww.lo + (t % KW) * ww.step;
      inside |= (uint32_t)(id < wd.hi && ih < wh.hi && iw < ww.hi) << t;
      x[t] = __ldg(at(id < g.in[0] ? id : g.in[0] - 1, ih < g.in[1] ? ih : g.in[1] - 1,
                      iw < g.in[2] ? iw : g.in[2] - 1));
    }
#pragma unroll
    for (int t = 0; t < T; ++t)
      if ((inside >> t) & 1u) add(x[t]);
  } else {
    for (int64_t id = wd.lo; id < wd.hi; id += wd.step)
      for (int64_t ih = wh.lo; ih < wh.hi; ih += wh.step)
        for (int64_t iw = ww.lo; iw < ww.hi; iw += ww.step) add(__ldg(at(id, ih, iw)));
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float acc = ks_pool_finish<KIND>(accv[j], wd, wh, ww, g);
    const int64_t plane = r * g.C + c0 + j;
    const int64_t o = ((plane * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow;  // contiguous
    (void)o;
    {{epi_loads}}
    {{name}}_epi({{epi_args}});
    res[j] = acc;
  }
#else
  (void)g; (void)r; (void)c0; (void)od; (void)oh; (void)ow; (void)res;
#endif
}

// Channels-last output (the coder keeps the pooled tensor NHWC): 4 consecutive channels a thread,
// one 16-byte store in the input's memory order.
template <int KIND, int KD, int KH, int KW>
__global__ void __launch_bounds__({{threads}}) {{name}}_cl4_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                                 const __grid_constant__ KsPoolGeom g, const int64_t per_sample) {
#if {{vec4}}
  const uint32_t c4 = (uint32_t)(g.C / 4), groups = (uint32_t)(per_sample / 4);
  for (int64_t r = blockIdx.y; r < g.N; r += gridDim.y)
  for (uint32_t q0 = blockIdx.x * blockDim.x + threadIdx.x; q0 < groups; q0 += gridDim.x * blockDim.x) {
    uint32_t q = q0;
    const int64_t c0 = (int64_t)(q % c4) * 4; q /= c4;
    const int64_t ow = q % (uint32_t)g.out[2]; q /= (uint32_t)g.out[2];
    const int64_t oh = q % (uint32_t)g.out[1]; q /= (uint32_t)g.out[1];
    float res[4];
    {{name}}_cl4_window<KIND, KD, KH, KW>({{device_args}}, g, r, c0, (int64_t)q, oh, ow, res);
    *reinterpret_cast<float4*>(reinterpret_cast<float*>(out) + r * per_sample + (int64_t)q0 * 4) =
        make_float4(res[0], res[1], res[2], res[3]);
  }
#else
  (void)g; (void)per_sample; (void)out;
#endif
}

// Contiguous output from the NHWC input: a block pools a tile of consecutive output positions of
// one sample x up to 4 * KS_POOL_TG channels (threads along channels first: the loads stay
// coalesced), stages it in shared memory and writes each channel's positions as one coalesced
// run (a warp a channel).  The 4-channel-a-thread store straight to NCHW (the form this replaced)
// put a warp's 32 lanes x 4 stores in 128 different planes: a 32-byte sector per 4-byte value.
// The tile holds KS_POOL_TP positions at 4 * KS_POOL_TG channels and more below 64 channels
// ({{name}}_cl4t_log2_positions): at a fixed 32 positions, 16 channels gave a 256-thread block
// 128 windows, half its threads idle (a 2x2 max over NHWC [128, 16, 254, 254]: 0.382 -> 0.306 ms
// on an H200, bench/pool_slices_timing.py, bench/results/2026-12-07-h200-s36).
#define KS_POOL_TP 32
#define KS_POOL_TG 32
#define KS_POOL_TILE (KS_POOL_TP * (4 * KS_POOL_TG + 4))
// Floats a cl4t tile row holds (one position's channels): 4 * (min(c4, KS_POOL_TG) + 1) rounded
// up to an odd multiple of 4, so the write-out's column reads (lane p at p * rs + c) fall 4 ways
// into the banks at every channel count (an even multiple made 8- to 32-way conflicts); 16-byte
// aligned for the float4 stores.  Narrow form: 4 * KS_POOL_TG + 4 always, as before.
__host__ __device__ inline uint32_t {{name}}_cl4t_row_floats(uint32_t c4) {
#if {{cl4t_wide}}
  return 4 * (((c4 < KS_POOL_TG ? c4 : KS_POOL_TG) + 1) | 1);
#else
  (void)c4;
  return 4 * KS_POOL_TG + 4;
#endif
}
// log2 of the positions a cl4t tile holds at c4 channel groups: 32 times the largest power of two
// that keeps the tile within KS_POOL_TILE floats (more than 32 below 16 groups, 64 channels).  A
// power of two: the kernel's index math shifts (a runtime divisor made ptxas spill
// pool_max2d_cl's 3x3 kernel at 64 registers).
__host__ __device__ inline uint32_t {{name}}_cl4t_log2_positions(uint32_t c4) {
  const uint32_t rs = {{name}}_cl4t_row_floats(c4);
  uint32_t k = 5;
  while ((2u << k) * rs <= KS_POOL_TILE) ++k;
  return k;
}
template <int KIND, int KD, int KH, int KW>
__global__ void __launch_bounds__({{threads}}) {{name}}_cl4t_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                                  const __grid_constant__ KsPoolGeom g, const int64_t per_sample) {
#if {{vec4}}
  __shared__ __align__(16) float tile[KS_POOL_TILE];
  const uint32_t c4 = (uint32_t)(g.C / 4), S = (uint32_t)(per_sample / g.C);
  const uint32_t lt = {{name}}_cl4t_log2_positions(c4), tp = 1u << lt, rs = {{name}}_cl4t_row_floats(c4);
  const uint32_t s_tiles = (S + tp - 1) >> lt, c_tiles = (c4 + KS_POOL_TG - 1) / KS_POOL_TG;
  const int64_t tiles = g.N * (int64_t)s_tiles * c_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const uint32_t ct = (uint32_t)(t % c_tiles);
    const int64_t rest = t / c_tiles;
    const uint32_t st = (uint32_t)(rest % s_tiles);
    const int64_t r = rest / s_tiles;
    const uint32_t g0 = ct * KS_POOL_TG, ng = min((uint32_t)KS_POOL_TG, c4 - g0);
    const uint32_t s0 = st << lt, np = min(tp, S - s0);
    for (uint32_t k = threadIdx.x; k < np * ng; k += blockDim.x) {
      const uint32_t p = k / ng, gi = k - p * ng;
      uint32_t q = s0 + p;
      const int64_t ow = q % (uint32_t)g.out[2]; q /= (uint32_t)g.out[2];
      const int64_t oh = q % (uint32_t)g.out[1]; q /= (uint32_t)g.out[1];
      float res[4];
      {{name}}_cl4_window<KIND, KD, KH, KW>({{device_args}}, g, r, (int64_t)(g0 + gi) * 4, (int64_t)q, oh, ow, res);
      *reinterpret_cast<float4*>(&tile[p * rs + gi * 4]) = make_float4(res[0], res[1], res[2], res[3]);
    }
    __syncthreads();
    {{out_t}}* __restrict__ dst = out + (r * g.C + (int64_t)g0 * 4) * (int64_t)S + s0;
    for (uint32_t k = threadIdx.x; k < (ng * 4) << lt; k += blockDim.x) {
      const uint32_t c = k >> lt, p = k & (tp - 1);
      if (p < np) dst[(int64_t)c * S + p] = ks_from_float<{{out_t}}>(tile[p * rs + c]);
    }
    __syncthreads();  // the tile is rewritten by the next iteration
  }
#else
  (void)g; (void)per_sample; (void)out;
#endif
}

// ---- the channels-last row form (the 4-channel kernels' default where the window is fixed) ----
// A thread pools V consecutive output columns (ow0 .. ow0 + V - 1 of one output row) x 4
// consecutive channels.  Each window row's distinct input columns ((V - 1) * SW + (KW - 1) * DW + 1
// of them) are loaded once, 16 bytes each, go through the prologue once a channel, and feed every
// one of the V windows that holds them; the index math is 32-bit inside a sample (the binding's
// row_ok), the window bounds 32-bit per output column.  Why: the one-position cl4 kernels above
// are instruction-bound, not memory-bound (ncu, H100: DRAM 44-46% of peak, SM throughput 64-70%,
// 0.66-0.72 issued instructions a scheduler cycle): GoogleNet's (level3/6) 3x3 / stride-1 max
// pool of NHWC [10, 480, 224, 224] 2.12 ms, each input value loaded, prologued and max'ed 9
// times; AlexNet's 3x3 / stride-2 pool of [1024, 96, 55, 55] 1.40 ms; level2/35's 2x2 / stride-2
// pool after subtract + hardswish (cl4t) 0.88 ms; level2/82's 4x4 / stride-4 pool after tanh /
// scale / bias (cl4t) 1.42 ms at 111 registers (25% occupancy) -- int64 index math, three int64
// clamps and an int64 address per tap, three int64 ks_pool_windows per output.
// Lanes go along channels first (32 lanes x 16 bytes of consecutive channels: coalesced), then
// along the row's V-column groups.  The window (V, KH, KW, SH, SW, PH, PW, DH, DW) is the spec's,
// compile-time (pool.py's _row_window: 2-D max / avg windows of <= 27 taps and a row span of
// <= _ROW_SPAN_MAX float4s; others keep the cl4 kernels).
// R > 1 (the strip form, cl4r only; emit_pool(row_rows=R)): the thread pools R consecutive output
// rows of the same columns, each input row of the strip loaded once for every output row whose
// window holds it: a 3x3 / stride-1 window loads 4 input rows for 2 output rows instead of 6.
// Why: each output row of the one-row form loads its KH input rows again, the overlapping rows
// through L2 (level3/6's 3x3 / stride-1 pool of NHWC [10, 480, 224, 224] moved ~4x its input
// through L2 at 0.90 ms, 71% of an H100's DRAM bandwidth: bench/results/2026-12-07-h100-s37).
// res[rr][u][j]: the pooled value of channel c0 + j at (oh + rr, ow0 + u) of sample r, epilogue
// applied (rows and columns past the output's end are computed from clamped loads or none, and
// not stored by the callers).
#if {{row_kernel}}
template <int KIND, int R, int V, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__device__ __forceinline__ void {{name}}_cl4_row({{device_params}}, const KsPoolGeom& g, const int64_t r,
                                                 const int c0, const int oh, const int ow0,
                                                 const float (&plane_vals)[4][{{nplane}} + 1], float (&res)[R][V][4]) {
  constexpr int SPAN = (V - 1) * SW + (KW - 1) * DW + 1;
  static_assert(SPAN <= 32, "the column mask is 32 bits");
  const int IH = (int)g.in[1], IW = (int)g.in[2], OH = (int)g.out[1], OW = (int)g.out[2];
  const int xs3 = (int)g.xs[3], xs4 = (int)g.xs[4];  // a sample's offsets < 2^31 (binding: row_ok)
  (void)plane_vals;
  const float* __restrict__ base = reinterpret_cast<const float*>(p0) + r * g.xs[0] + c0;  // 64-bit once
  const int ih0 = oh * SH - PH, iw0 = ow0 * SW - PW;
  float accs[R][V][4];
#pragma unroll
  for (int rr = 0; rr < R; ++rr)
#pragma unroll
    for (int u = 0; u < V; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j) accs[rr][u][j] = KIND == 0 ? -INFINITY : 0.f;
  // A column outside the input (padding, or past the end of a row's last group) loads the
  // nearest column inside and is masked out: loads under per-tap predicates made ptxas spill
  // (the cl4 kernels' finding), and the mask is a bit field for the same reason.
  int col[SPAN];
  uint32_t col_in = 0;
#pragma unroll
  for (int m = 0; m < SPAN; ++m) {
    const int iw = iw0 + m;
    col_in |= (uint32_t)((unsigned)iw < (unsigned)IW) << m;
    col[m] = (iw < 0 ? 0 : iw < IW ? iw : IW - 1) * xs4;
  }
  // a window row's SPAN loaded values: the prologue once a value, then every window holding it
  // (input row i of the strip: the windows of every output row rr that holds it as a tap)
  auto reduce_row = [&](const float4 (&x)[SPAN], const int i) {
#pragma unroll
    for (int m = 0; m < SPAN; ++m) {
      const bool inside = (col_in >> m) & 1u;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float a0 = j == 0 ? x[m].x : j == 1 ? x[m].y : j == 2 ? x[m].z : x[m].w;
        {{plane_args_cl4}}
        float v;
        {{name}}_pro({{pro_args}}, v);  // once per loaded value, however many windows hold it
        v = inside ? v : (KIND == 0 ? -INFINITY : 0.f);  // outside the input: no part (max), 0 (avg)
#pragma unroll
        for (int rr = 0; rr < R; ++rr) {
          // compile-time: row i is one of output row rr's taps (R == 1: the caller's row)
          if (R > 1 && !ks_strip_holds(i, rr, KH, SH, DH)) continue;
#pragma unroll
          for (int u = 0; u < V; ++u)
#pragma unroll
            for (int kw = 0; kw < KW; ++kw)
              if (u * SW + kw * DW == m) {  // compile-time: column m is tap kw of window u
                if constexpr (KIND == 0) accs[rr][u][j] = ks_max(accs[rr][u][j], v); else accs[rr][u][j] += v;
              }
        }
      }
    }
  };
  // RG window rows' loads issued together before their arithmetic (emit_pool(row_group=...),
  // at most 18 16-byte loads: 5 rows of a 5x5 window spilled 420 bytes; 1, the default: one row's
  // SPAN loads at a time, a padding row loading nothing)
  constexpr int RG_MAX = 18 / SPAN > 1 ? 18 / SPAN : 1;
  constexpr int RG = {{row_group}} < KH ? ({{row_group}} < RG_MAX ? {{row_group}} : RG_MAX) : (KH < RG_MAX ? KH : RG_MAX);
  if constexpr (R > 1) {
    // the strip's input rows one at a time (SPAN loads in flight), each reduced into every output
    // row holding it; a row outside the input or no output row's tap loads nothing
    constexpr int ROWS_IN = (R - 1) * SH + (KH - 1) * DH + 1;
#pragma unroll
    for (int i = 0; i < ROWS_IN; ++i) {
      bool tap = false;
#pragma unroll
      for (int rr = 0; rr < R; ++rr) tap = tap || ks_strip_holds(i, rr, KH, SH, DH);
      const int ih = ih0 + i;
      if (!tap || (unsigned)ih >= (unsigned)IH) continue;
      const float* __restrict__ row = base + ih * xs3;
      float4 x[SPAN];
#pragma unroll
      for (int m = 0; m < SPAN; ++m) x[m] = __ldg(reinterpret_cast<const float4*>(row + col[m]));
      reduce_row(x, i);
    }
  } else if constexpr (RG <= 1) {
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = ih0 + kh * DH;
      if ((unsigned)ih >= (unsigned)IH) continue;  // a padding row: no tap (max), adds nothing (avg)
      const float* __restrict__ row = base + ih * xs3;
      // the row's loads first, then the arithmetic: SPAN 16-byte loads in flight
      float4 x[SPAN];
#pragma unroll
      for (int m = 0; m < SPAN; ++m) x[m] = __ldg(reinterpret_cast<const float4*>(row + col[m]));
      reduce_row(x, 0);
    }
  } else {
#pragma unroll
    for (int k0 = 0; k0 < KH; k0 += RG) {
      // up to RG * SPAN 16-byte loads in flight; a padding row loads the nearest input row and
      // is masked out, a row past KH (a compile-time test) loads nothing
      float4 x[RG][SPAN];
      uint32_t rows_in = 0;
#pragma unroll
      for (int i = 0; i < RG; ++i) {
        if (k0 + i >= KH) continue;
        const int ih = ih0 + (k0 + i) * DH;
        rows_in |= (uint32_t)((unsigned)ih < (unsigned)IH) << i;
        const float* __restrict__ row = base + (ih < 0 ? 0 : ih < IH ? ih : IH - 1) * xs3;
#pragma unroll
        for (int m = 0; m < SPAN; ++m) x[i][m] = __ldg(reinterpret_cast<const float4*>(row + col[m]));
      }
#pragma unroll
      for (int i = 0; i < RG; ++i)
        if ((rows_in >> i) & 1u) reduce_row(x[i], 0);
    }
  }
  // torch's divisor (ks_pool_window / ks_pool_finish for KIND 1, in 32 bits): the window clipped
  // to the padded input (count_include_pad), else to the input, unless divisor_override
  (void)OH; (void)OW;
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
  const int ihr = ih0 + rr * SH;
  const int hend = ihr + KH < IH + PH ? ihr + KH : IH + PH;
  const int hpad = hend - ihr, htaps = (hend < IH ? hend : IH) - (ihr > 0 ? ihr : 0);
  (void)hpad; (void)htaps;
  // a strip row past the output's end (not stored) reads its epilogue operands at the last row
  const int ohr = R == 1 || oh + rr < OH ? oh + rr : OH - 1;
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const int ow = ow0 + u;
    const int ws = iw0 + u * SW, wend = ws + KW < IW + PW ? ws + KW : IW + PW;
    const int wpad = wend - ws, wtaps = (wend < IW ? wend : IW) - (ws > 0 ? ws : 0);
    (void)wpad; (void)wtaps;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float acc = accs[rr][u][j];
      if constexpr (KIND == 1) {
        const int taps = htaps * wtaps;
        // (divisor_override is any int64: converted to float as it is, never through an int)
        const float d = g.divisor ? (float)g.divisor : (float)(g.count_include_pad ? hpad * wpad : taps);
        // torch's acc / d without IEEE `/`'s slow-path subroutine (its call made ptxas spill
        // here): the approximate reciprocal's quotient and one FMA residual correction, within an
        // ulp of the IEEE quotient; inf / NaN sums (no finite residual) keep the plain product.
        const float inv = __fdividef(1.f, d), q0 = acc * inv;
        const float q = isfinite(q0) ? fmaf(fmaf(-q0, d, acc), inv, q0) : q0;
        acc = taps > 0 ? q : 0.f;
      }
      const int64_t plane = r * g.C + c0 + j;
      const int64_t o = (plane * OH + ohr) * (int64_t)OW + ow;  // contiguous (epilogue operands)
      (void)o;
      {{epi_loads}}
      {{name}}_epi({{epi_args}});
      res[rr][u][j] = acc;
    }
  }
  }
}

// NHWC out: one thread a (V columns x 4 channels) item, V 16-byte stores in the input's memory order.
// Both row kernels state 2 blocks an SM (at most 128 registers): left free, ptxas held several
// at 64 registers and spilled 4-44 bytes (a prologue and an epilogue operand); at 2 blocks they
// take 62-106 and spill nothing, and the SPAN 16-byte loads a thread keep enough bytes in flight.
template <int KIND, int V, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__global__ void __launch_bounds__({{threads}}, 2) {{name}}_cl4r_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                                  const __grid_constant__ KsPoolGeom g, const int64_t per_sample) {
  constexpr int R = {{row_rows}};  // output rows a thread (the strip form: emit_pool(row_rows=R))
  const uint32_t C = (uint32_t)g.C, c4 = C / 4, OW = (uint32_t)g.out[2], groups = (OW + V - 1) / V;
  const uint32_t OH = (uint32_t)g.out[1], strips = (OH + R - 1) / R;
  const uint32_t items = c4 * groups * strips;  // <= per_sample / 4 + the tails: < 2^31
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  (void)in_plane;
  for (int64_t r = blockIdx.y; r < g.N; r += gridDim.y) {
    float* __restrict__ dst = reinterpret_cast<float*>(out) + r * per_sample;
    for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < items; q += gridDim.x * blockDim.x) {
      const uint32_t c0 = q % c4 * 4, rest = q / c4, gw = rest % groups, oh = rest / groups * R, ow0 = gw * V;
      float plane_vals[4][{{nplane}} + 1];  // the plane operands (a conv bias) of the 4 channels
      const int64_t plane0 = r * g.C + c0;
      (void)plane0;
      {{plane_loads_cl4x4}}
      float res[R][V][4];
      {{name}}_cl4_row<KIND, R, V, KH, KW, SH, SW, PH, PW, DH, DW>({{device_args}}, g, r, (int)c0, (int)oh, (int)ow0,
                                                                   plane_vals, res);
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        if (R > 1 && oh + rr >= OH) break;
        float* __restrict__ o4 = dst + ((oh + rr) * OW + ow0) * C + c0;  // per_sample < 2^31 (binding)
#pragma unroll
        for (int u = 0; u < V; ++u)
          if (ow0 + u < OW)
            *reinterpret_cast<float4*>(o4 + u * C) = make_float4(res[rr][u][0], res[rr][u][1], res[rr][u][2], res[rr][u][3]);
      }
    }
  }
}

// NCHW out: a block's tile is a run of consecutive column groups of the sample's output rows (a
// contiguous range [P0, P1) of output positions, rows joined) x up to 4 * KS_POOL_TG channels,
// staged in shared memory, then each channel's positions written as one coalesced run (a warp a
// channel).  The tile holds as many groups as fit KS_POOL_TILE floats at the channel tile's
// width, so a sample of few channels (level2/35's and 82's 16) still gives every thread an item.
__host__ __device__ inline uint32_t {{name}}_row_tile_groups(uint32_t c4, uint32_t v) {
  const uint32_t ng = c4 < KS_POOL_TG ? c4 : KS_POOL_TG, d = v * (4 * ng + 4);  // rows of 4 * ng + 4 floats: 16-byte aligned
#ifdef __CUDA_ARCH__
  // floor(KS_POOL_TILE / d) from a float quotient, corrected: ptxas made the integer division a
  // subroutine call, and the kernel spilled around it
  uint32_t q = (uint32_t)__fdividef((float)KS_POOL_TILE, (float)d);
  q -= q * d > KS_POOL_TILE;
  q += (q + 1) * d <= KS_POOL_TILE;
  return q;
#else
  return KS_POOL_TILE / d;
#endif
}
template <int KIND, int V, int KH, int KW, int SH, int SW, int PH, int PW, int DH, int DW>
__global__ void __launch_bounds__({{threads}}, 2) {{name}}_cl4rt_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                                   const __grid_constant__ KsPoolGeom g, const int64_t per_sample) {
  __shared__ __align__(16) float tile[KS_POOL_TILE];
  // the tile's channels' plane operands, loaded once a tile: per item, their descriptor offsets
  // (64-bit divisions) made ptxas spill
  __shared__ float tile_planes[4 * KS_POOL_TG][{{nplane}} + 1];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  (void)in_plane;
  const uint32_t C = (uint32_t)g.C, c4 = C / 4, OW = (uint32_t)g.out[2], S = OW * (uint32_t)g.out[1];
  const uint32_t groups = (OW + V - 1) / V, total = groups * (uint32_t)g.out[1];
  const uint32_t c_tiles = (c4 + KS_POOL_TG - 1) / KS_POOL_TG, tg = {{name}}_row_tile_groups(c4, V);
  const uint32_t rs = 4 * (c4 < KS_POOL_TG ? c4 : KS_POOL_TG) + 4, tiles = (total + tg - 1) / tg * c_tiles;
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  (void)per_sample;
  for (int64_t r = blockIdx.y; r < g.N; r += gridDim.y)
  for (uint32_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const uint32_t ct = t % c_tiles, st = t / c_tiles;
    const uint32_t g0 = ct * KS_POOL_TG, ng = min((uint32_t)KS_POOL_TG, c4 - g0);
    const uint32_t G0 = st * tg, G1 = min(G0 + tg, total);
    const uint32_t P0 = G0 / groups * OW + G0 % groups * V, P1 = G1 / groups * OW + G1 % groups * V;
    if constexpr ({{nplane}} > 0) {
      for (uint32_t c = threadIdx.x; c < 4 * ng; c += blockDim.x) {
        const int64_t plane = r * g.C + g0 * 4 + c;
        float plane_vals[1][{{nplane}} + 1];
        constexpr int j = 0;
        (void)plane;
        {{plane_loads_cl4}}
#pragma unroll
        for (int i = 0; i < {{nplane}}; ++i) tile_planes[c][i] = plane_vals[j][i];
      }
      __syncthreads();
    }
    for (uint32_t k = threadIdx.x; k < (G1 - G0) * ng; k += blockDim.x) {
      const uint32_t gl = k / ng, gi = k - gl * ng, G = G0 + gl, oh = G / groups, ow0 = (G - oh * groups) * V;
      float plane_vals[4][{{nplane}} + 1];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < {{nplane}}; ++i) plane_vals[j][i] = tile_planes[gi * 4 + j][i];
      float res[1][V][4];
      {{name}}_cl4_row<KIND, 1, V, KH, KW, SH, SW, PH, PW, DH, DW>({{device_args}}, g, r, (int)(g0 + gi) * 4, (int)oh,
                                                                   (int)ow0, plane_vals, res);
      float* t4 = &tile[(oh * OW + ow0 - P0) * rs + gi * 4];
#pragma unroll
      for (int u = 0; u < V; ++u)
        if (ow0 + u < OW) *reinterpret_cast<float4*>(t4 + u * rs) = make_float4(res[0][u][0], res[0][u][1], res[0][u][2], res[0][u][3]);
    }
    __syncthreads();
    {{out_t}}* __restrict__ dst = out + (r * g.C + (int64_t)g0 * 4) * (int64_t)S + P0;
    for (uint32_t c = warp; c < 4 * ng; c += warps)
      for (uint32_t p = lane; p < P1 - P0; p += 32) dst[c * S + p] = ks_from_float<{{out_t}}>(tile[p * rs + c]);
    __syncthreads();  // the tile is rewritten by the next iteration
  }
}
#endif

// Contiguous (NCHW) input of a fixed 2-D (or 1-D) window: a block per (sample, channel) plane
// tile, V = 4 consecutive outputs of one output row a thread.  The plane's operands (batch
// statistics, a conv bias) are loaded once per plane, not once per output through their
// descriptors, and each window row's span of input values ((V - 1) * SW + (KW - 1) * DW + 1 of
// them) is loaded once for the thread's V windows, every load issued before any arithmetic (16
// in flight for a 2x2 / stride-2 window), with 16-byte loads where the rows allow.  The one-value
// kernel above ran level3/13's batch_norm + ReLU + 2x2 average pool of [128, 32, 256, 256] at
// 0.63 TB/s (H200, bench/results/2026-11-28-h200x4-levels-s22): a division per tap operand and
// four descriptor offsets per output.
// PR > 1 (the strip form, emit_pool(plane_rows=PR)): a thread pools PR consecutive output rows of
// the same V columns, each input row of the strip loaded and prologued once for every output row
// whose window holds it (level1/42's 4x4 / stride-1 window: 5 input rows for 2 output rows
// instead of 8; the kernel is issue-bound, 68% SM throughput at 45% of DRAM bandwidth on
// level1/44 in Nsight Compute).  On an H100 (bench/results/2026-12-07-h100-s38) level1/42's
// kernel went 3.349 -> 2.718 ms at PR = 4: emit_pool's default where the window's rows overlap.
#if {{plane_kernel}}
template <int KIND, bool VL>
__global__ void __launch_bounds__(256) {{name}}_plane_kernel({{params}}, float* __restrict__ out,
                                                             const __grid_constant__ KsPoolGeom g, const int64_t planes) {
  constexpr int V = {{plane_v}}, KH = {{plane_kh}}, KW = {{plane_kw}}, SH = {{plane_sh}}, SW = {{plane_sw}}, PH = {{plane_ph}}, PW = {{plane_pw}},
                DH = {{plane_dh}}, DW = {{plane_dw}};
  constexpr int SPAN = (V - 1) * SW + (KW - 1) * DW + 1, SPAN4 = (SPAN + 3) / 4 * 4;
  // PR output rows a thread; the strip's input rows: NR of them, row i at ih0 + row_at(i)
  constexpr int PR = {{plane_rows}}, NR = PR == 1 ? KH : (PR - 1) * SH + (KH - 1) * DH + 1;
  const int IH = (int)g.in[1], IW = (int)g.in[2], OH = (int)g.out[1], OW = (int)g.out[2];  // < 2^31 (binding)
  const int groups = (OW + V - 1) / V, per_plane = (OH + PR - 1) / PR * groups;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  (void)in_plane;
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const int64_t r = ks_div(plane, g.C), c = plane - r * g.C;  // inline: a 64-bit division call made ptxas spill
    {{plane_loads}}
    const float* __restrict__ base = reinterpret_cast<const float*>(p0) + r * g.xs[0] + c * g.xs[1];
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < per_plane; q += gridDim.x * blockDim.x) {
      const int strip = OH == 1 ? 0 : q / groups, ow0 = (q - strip * groups) * V;  // 1-D pools: no division
      const int oh = strip * PR;
      const int ih0 = oh * SH - PH, iw0 = ow0 * SW - PW;
      float accs[PR][V];
#pragma unroll
      for (int rr = 0; rr < PR; ++rr)
#pragma unroll
        for (int o = 0; o < V; ++o) accs[rr][o] = KIND == 0 ? -INFINITY : 0.f;
      // strip row i's offset from ih0 (PR == 1: the window's rows kh * DH), and whether output
      // row rr's window holds it (compile-time after unrolling)
      auto row_at = [](int i) { return PR == 1 ? i * DH : i; };
      auto holds = [](int i, int rr) { return PR == 1 || ks_strip_holds(i, rr, KH, SH, DH); };
      auto used = [&](int i) {
        bool any = false;
#pragma unroll
        for (int rr = 0; rr < PR; ++rr) any = any || holds(i, rr);
        return any;
      };
      // every row's loads first (a row outside the input loads nothing), then the arithmetic;
      // MASKED: rows and positions outside the input load nothing
      float x[NR][SPAN4];
      auto load_rows = [&](auto masked) {
        constexpr bool MASKED = decltype(masked)::value;
#pragma unroll
        for (int kh = 0; kh < NR; ++kh) {
          if (!used(kh)) continue;  // (a dilation gap of the strip: no output row's tap)
          const int ih = ih0 + row_at(kh);
          const bool row_in = !MASKED || (ih >= 0 && ih < IH);
          const float* __restrict__ row = base + (int64_t)(row_in ? ih : 0) * g.xs[3];
          if constexpr (VL) {  // iw0 % 4 == 0 (PW % 4 == 0), IW % 4 == 0, rows 16-byte aligned: a float4 is all in or all out
#pragma unroll
            for (int m = 0; m < SPAN4; m += 4) {  // (inside: the last float4 ends by IW, a multiple of 4)
              const bool in4 = !MASKED || (row_in && (PW == 0 || iw0 + m >= 0) && iw0 + m < IW);
              const float4 x4 = in4 ? __ldg(reinterpret_cast<const float4*>(row + iw0 + m))
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
              x[kh][m] = x4.x; x[kh][m + 1] = x4.y; x[kh][m + 2] = x4.z; x[kh][m + 3] = x4.w;
            }
          } else {
#pragma unroll
            for (int j = 0; j < SPAN; ++j) {
              const int iw = iw0 + j;
              x[kh][j] = !MASKED || (row_in && iw >= 0 && iw < IW) ? __ldg(row + iw) : 0.f;
            }
          }
        }
      };
      // The window rows' prologue and reduction.  MASKED: a row or position outside the input takes
      // no part (max) or adds nothing (avg: the divisor counts it).
      auto reduce_rows = [&](auto masked) {
        constexpr bool MASKED = decltype(masked)::value;
#pragma unroll
        for (int kh = 0; kh < NR; ++kh) {
          const int ih = ih0 + row_at(kh);
          if (!used(kh) || (MASKED && (ih < 0 || ih >= IH))) continue;
#pragma unroll
          for (int j = 0; j < SPAN; ++j) {
            const int iw = iw0 + j;
            (void)iw;
            const float a0 = x[kh][j];
            float v;
            {{name}}_pro({{row_pro_args}}, v);
            x[kh][j] = !MASKED || (iw >= 0 && iw < IW) ? v : (KIND == 0 ? -INFINITY : 0.f);
          }
#pragma unroll
          for (int rr = 0; rr < PR; ++rr) {
            if (!holds(kh, rr)) continue;
#pragma unroll
            for (int o = 0; o < V; ++o)
#pragma unroll
              for (int kw = 0; kw < KW; ++kw) {
                const float v = x[kh][o * SW + kw * DW];
                if constexpr (KIND == 0) accs[rr][o] = ks_max(accs[rr][o], v); else accs[rr][o] += v;
              }
          }
        }
      };
#if {{plane_inside}}
      // V windows inside the input (no padding, no clipped edge): loads and arithmetic without the
      // per-row and per-value bounds (the masks were ~40 of the ~200 instructions of 4 outputs in
      // level1/44's SASS, computed for every window before the inside test; the kernel is
      // issue-bound: 68% SM throughput at 45% of DRAM bandwidth in Nsight Compute).  Each window
      // holds KH * KW taps, so the divisor is a constant and no 64-bit window bounds are computed
      // (this finish took level1/44 from 3.10 to 2.90 ms on an H100, bench/pool_plane_vl_timing.py;
      // emit_pool(plane_inside=False) leaves the form out).  Taken by whole warps: a warp whose
      // threads split between the two forms runs both (level1/42's 511-wide rows put an edge
      // window in every other warp: 3.84 -> 4.31 ms on an H100 when each thread chose alone), so a
      // warp with an edge window takes the masked form, as every warp did before this form; a
      // thread's own test is in the vote, so no edge window is ever read unmasked.
      if (__all_sync(__activemask(), ih0 >= 0 && ih0 + row_at(NR - 1) < IH && iw0 >= 0 &&
                                     iw0 + SPAN - 1 < IW && ow0 + V <= OW && (PR == 1 || oh + PR <= OH))) {
        load_rows(std::false_type{});
        reduce_rows(std::false_type{});
#pragma unroll
        for (int rr = 0; rr < PR; ++rr) {
        const int64_t o0 = (plane * OH + oh + rr) * (int64_t)OW + ow0;  // contiguous
#pragma unroll
        for (int j = 0; j < V; ++j) {
          float acc = accs[rr][j];
          // the division ks_pool_finish makes for these windows (divisor_override as float from
          // int64); by a power-of-two tap count as a multiplication by its reciprocal, which is
          // exact: the same float as the IEEE division, without its ~10 instructions an output
          // (level1/44's 8-tap average is issue-bound; part of the `inside` finish measured since)
          if constexpr (KIND == 1) {
            constexpr int TAPS = KH * KW;
            if (g.divisor == 0 && (TAPS & (TAPS - 1)) == 0) acc *= 1.f / TAPS;
            else acc = acc / (g.divisor ? (float)g.divisor : (float)TAPS);
          }
          const int64_t o = o0 + j;
          {{epi_loads}}
          {{name}}_epi({{epi_args}});
          out[o] = acc;
        }
        }
        continue;
      }
#endif
      load_rows(std::true_type{});
      reduce_rows(std::true_type{});
      const KsPoolWin wd{0, 1, 1, 1};
#pragma unroll
      for (int rr = 0; rr < PR; ++rr) {
      if (PR > 1 && oh + rr >= OH) break;
      const KsPoolWin wh = ks_pool_window<KIND>(oh + rr, g.in[1], g.out[1], g.k[1], g.s[1], g.p[1], g.dil[1]);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const int ow = ow0 + j;
        if (ow >= OW) break;
        const KsPoolWin ww = ks_pool_window<KIND>(ow, g.in[2], g.out[2], g.k[2], g.s[2], g.p[2], g.dil[2]);
        float acc = ks_pool_finish<KIND>(accs[rr][j], wd, wh, ww, g);
        const int64_t o = (plane * OH + oh + rr) * (int64_t)OW + ow;  // contiguous
        {{epi_loads}}
        {{name}}_epi({{epi_args}});
        out[o] = acc;
      }
      }
    }
  }
}
#endif

// A 1-D max window over contiguous rows through shared memory (emit_pool(plane_smem=True); stride
// 1, the plane kernel's 16-byte conditions).  A block takes SMEM1D_OUT consecutive outputs of one
// (n, c) row: the input span they read (SMEM1D_OUT + (K - 1) * D values) comes in as 16-byte loads,
// each value loaded and prologued once, and lane i of a warp then pools output i + 32 w (w the
// warp's step) from shared memory, so every store of a warp is 128 contiguous bytes.  Why: the
// plane kernel loads each thread's whole span, (V - 1) + (K - 1) * D + 1 values for V = 4 outputs
// (level1/41's 8 taps at dilation 3: 28 values for 4), so a thread keeps only 16 bytes of new
// input in flight and level1/41 ran at 76% of DRAM bandwidth on an H100 (bench/results/
// 2026-12-07-h100-s38, 2.79 ms).  Persistent blocks walk the (row, tile) pairs.  Written 2026-12-07
// (s38) without a GPU: off by default until tests/test_pool_gpu.py's smem1d test and
// bench/pool_plane_vl_timing.py's `smem1d` form have run.
#if {{smem1d_kernel}}
constexpr int {{name}}_smem1d_out = 4096;  // outputs a block's tile: 16 a thread
template <int K, int D, int PW>
__global__ void __launch_bounds__(256) {{name}}_smem1d_kernel({{params}}, float* __restrict__ out,
                                                              const __grid_constant__ KsPoolGeom g, const int64_t planes) {
  constexpr int SPAN = {{name}}_smem1d_out + (K - 1) * D;  // input values a tile's windows read
  constexpr int SPAN4 = (SPAN + 3) / 4 * 4 + 4;      // in float4s from a 16-byte aligned start
  __shared__ __align__(16) float xs[SPAN4];
  const int IW = (int)g.in[2], OW = (int)g.out[2];  // < 2^31 (binding)
  const int tiles = (OW + {{name}}_smem1d_out - 1) / {{name}}_smem1d_out;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  (void)in_plane;
  for (int64_t t = blockIdx.x; t < planes * tiles; t += gridDim.x) {
    const int64_t plane = ks_div(t, (int64_t)tiles);
    const int o0 = (int)(t - plane * tiles) * {{name}}_smem1d_out;
    const int64_t r = ks_div(plane, g.C), c = plane - r * g.C;
    {{plane_loads}}
    const float* __restrict__ base = reinterpret_cast<const float*>(p0) + r * g.xs[0] + c * g.xs[1];
    // xs[m] holds input position start + m, start the span's first position rounded down to a
    // multiple of 4 (IW % 4 == 0: a float4 is all inside the row or all outside)
    const int first = o0 - PW, start = first & ~3, shift = first - start;  // (& ~3 floors negatives too)
    for (int i = threadIdx.x; i < SPAN4 / 4; i += 256) {
      const int iw = start + 4 * i;
      float v4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      if (iw >= 0 && iw < IW) {
        const float4 x4 = __ldg(reinterpret_cast<const float4*>(base + iw));
        const float raw[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float a0 = raw[q];
          float v;
          {{name}}_pro({{row_pro_args}}, v);
          v4[q] = v;
        }
      }
      *reinterpret_cast<float4*>(&xs[4 * i]) = make_float4(v4[0], v4[1], v4[2], v4[3]);
    }
    __syncthreads();
#pragma unroll 4
    for (int m = threadIdx.x; m < {{name}}_smem1d_out; m += 256) {
      const int ow = o0 + m;
      if (ow >= OW) break;
      float acc = -INFINITY;
#pragma unroll
      for (int k = 0; k < K; ++k) acc = ks_max(acc, xs[shift + m + k * D]);
      const int64_t o = plane * (int64_t)OW + ow;  // contiguous
      {{epi_loads}}
      {{name}}_epi({{epi_args}});
      out[o] = acc;
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}
#endif

{{launcher_sig}} {
  if (g.N <= 0 || per_sample <= 0) return;
#define KS_POOL_LAUNCH(K, L) do { \
    static const int per_sm = ks_blocks_per_sm({{name}}_kernel<K, L>, {{threads}}); \
    {{name}}_kernel<K, L><<<ks_pool_grid(per_sm, per_sample, {{threads}}, g.N), {{threads}}, 0, stream>>>( \
        {{kernel_args}}, static_cast<{{out_t}}*>(out), g, per_sample); } while (0)
#if {{row_kernel}}
  if (cl == 2 && row_ok) {  // the row form of the 4-channel kernels (the binding checked 32-bit offsets)
    const uint32_t c4 = (uint32_t)(g.C / 4), groups = (uint32_t)ks_cdiv(g.out[2], {{row_v}});
    if (g.keep_cl) {
      static const int per_sm = ks_blocks_per_sm({{name}}_cl4r_kernel<{{kind_id}}, {{row_targs}}>, {{threads}});
      {{name}}_cl4r_kernel<{{kind_id}}, {{row_targs}}><<<ks_pool_grid(per_sm, (int64_t)c4 * groups * ks_cdiv(g.out[1], {{row_rows}}), {{threads}}, g.N),
          {{threads}}, 0, stream>>>({{kernel_args}}, static_cast<{{out_t}}*>(out), g, per_sample);
    } else {
      static const int per_sm = ks_blocks_per_sm({{name}}_cl4rt_kernel<{{kind_id}}, {{row_targs}}>, {{threads}});
      const int64_t tg = {{name}}_row_tile_groups(c4, {{row_v}});
      const int64_t tiles = ks_cdiv((int64_t)groups * g.out[1], tg) * ks_cdiv(c4, KS_POOL_TG);
      {{name}}_cl4rt_kernel<{{kind_id}}, {{row_targs}}><<<ks_pool_grid(per_sm, tiles * {{threads}}, {{threads}}, g.N),
          {{threads}}, 0, stream>>>({{kernel_args}}, static_cast<{{out_t}}*>(out), g, per_sample);
    }
    return;
  }
#endif
  (void)row_ok;
#if {{vec4}}
  if (cl == 2 && g.keep_cl) {  // the channels-last fast path, NHWC out: a thread pools 4 channels
    static const int per_sm = ks_blocks_per_sm({{name}}_cl4_kernel<{{kind_id}}, {{kd}}, {{kh}}, {{kw}}>, {{threads}});
    {{name}}_cl4_kernel<{{kind_id}}, {{kd}}, {{kh}}, {{kw}}><<<ks_pool_grid(per_sm, per_sample / 4, {{threads}}, g.N),
        {{threads}}, 0, stream>>>({{kernel_args}}, static_cast<{{out_t}}*>(out), g, per_sample);
    return;
  }
  if (cl == 2) {  // NCHW out: position x channel tiles through shared memory
    static const int per_sm = ks_blocks_per_sm({{name}}_cl4t_kernel<{{kind_id}}, {{kd}}, {{kh}}, {{kw}}>, {{threads}});
    const int64_t tiles = g.N * ks_cdiv(per_sample / g.C, (int64_t)1 << {{name}}_cl4t_log2_positions((uint32_t)(g.C / 4))) * ks_cdiv(g.C / 4, KS_POOL_TG);
    {{name}}_cl4t_kernel<{{kind_id}}, {{kd}}, {{kh}}, {{kw}}><<<(unsigned)ks_grid(per_sm, tiles), {{threads}}, 0,
        stream>>>({{kernel_args}}, static_cast<{{out_t}}*>(out), g, per_sample);
    return;
  }
#endif
#if {{smem1d_kernel}}
  if (cl == 0 && plane_ok && vl) {  // a 1-D max window through shared memory (emit_pool(plane_smem=True))
    static const int per_sm = ks_blocks_per_sm({{name}}_smem1d_kernel<{{plane_kw}}, {{plane_dw}}, {{plane_pw}}>, 256);
    const int64_t planes = g.N * g.C, work = planes * ks_cdiv(g.out[2], {{name}}_smem1d_out);  // (row, tile) pairs
    {{name}}_smem1d_kernel<{{plane_kw}}, {{plane_dw}}, {{plane_pw}}><<<(unsigned)ks_grid(per_sm, work), 256, 0, stream>>>(
        {{kernel_args}}, static_cast<float*>(out), g, planes);
    return;
  }
#endif
#if {{plane_kernel}}
  if (cl == 0 && plane_ok) {  // contiguous input: the plane kernel (the binding checked its geometry)
    const int64_t planes = g.N * g.C, groups = ks_cdiv(g.out[2], {{plane_v}}), per_plane = ks_cdiv(g.out[1], {{plane_rows}}) * groups;
    const dim3 grid((unsigned)ks_cdiv(per_plane, 256), (unsigned)(planes < 65535 ? planes : 65535));
    if (vl) {{name}}_plane_kernel<{{kind_id}}, true><<<grid, 256, 0, stream>>>({{kernel_args}}, static_cast<float*>(out), g, planes);
    else {{name}}_plane_kernel<{{kind_id}}, false><<<grid, 256, 0, stream>>>({{kernel_args}}, static_cast<float*>(out), g, planes);
    return;
  }
#endif
  (void)plane_ok; (void)vl;
  if (cl) KS_POOL_LAUNCH({{kind_id}}, true); else KS_POOL_LAUNCH({{kind_id}}, false);
#undef KS_POOL_LAUNCH
}
