#include "../ks_prelude.cuh"

// ---- batch_norm statistics {{name}} ----
{{pro_fn}}
// Phase 1.  PLANE (a channel's values contiguous within each (n, c) plane: NCHW): a block per
// (channel, part of its N * S values), threads along the values.  ROWS (channel stride 1: [N, C]
// or channels-last): a block per (32 channels, part), threads along the channels (coalesced) x 8
// along the values.  Each block leaves one Welford state per channel: ws[(c * parts + part) * 3].
// Per value: the plane index n = e / S by the geometry's multiply-shift divisor (a 64-bit
// division per value made the NCHW build instruction-bound: level2/73 ran at 2.7x Inductor's
// time), and four values loaded before one batched Welford push (4 loads in flight, a division
// per 4 values).
// FLAT (ROWS with sN == S * sS: channels-last or [N, C]): value e of channel c is at
// e * sS + c * sC, so no division by S unless a tap needs the logical index; the division and
// three 64-bit products a value left the channels-last build instruction-bound (level2/52, H100:
// 22% of DRAM bandwidth, 94 instructions a value).
// V4 (PLANE only; the binding's: float32 values of one plane dense, S % 4 == 0, 16-byte aligned
// planes, no operand read per value but the input): 16-byte loads, a division per 4 values; the
// scalar form (4 loads of 4 bytes in flight a thread) ran level3/13's NCHW statistics at 63% of
// the H100's DRAM bandwidth (bench/results/2026-12-06-h100-s23).
template <bool ROWS, bool FLAT, bool V4>
__global__ void __launch_bounds__(256) {{name}}_partial({{params}}, float* __restrict__ ws, const KsBnGeom g) {
  __shared__ float sm[3][256];
  const int t = threadIdx.x;
  // G > 0 (group statistics of a channels-last source): part y covers part y % pps of sample y / pps
  const int64_t y = blockIdx.y, sample_end = g.G ? (y / g.pps + 1) * g.S : g.M;
  const int64_t e0 = g.G ? (y / g.pps) * g.S + (y % g.pps) * g.per_part : y * g.per_part;
  const int64_t e1 = e0 + g.per_part < sample_end ? e0 + g.per_part : sample_end;
  const int64_t c = ROWS ? (int64_t)blockIdx.x * 32 + (t & 31) : (int64_t)blockIdx.x;
  const int64_t first = ROWS ? e0 + (t >> 5) : e0 + t, step = ROWS ? 8 : 256;
  KsStateWelford st = KsStateWelford::init();
  if (V4 && c < g.C) {
#if {{v4}}
    {{channel_loads}}
    auto pro = [&](const float a0) {
      float v;
      {{name}}_pro({{pro_args}}, v);
      return v;
    };
    auto chunk_at = [&](const int64_t e) {  // e % 4 == 0: 4 values of one plane
      const int64_t n = g.fS.m ? (int64_t)ks_fastdiv_apply((uint32_t)e, g.fS) : ks_div(e, g.S);
      return __ldg(reinterpret_cast<const float4*>(reinterpret_cast<const float*>(p0) + n * g.sN + c * g.sC + (e - n * g.S)));
    };
    auto push = [&](const float4 q) {
      float xs[4] = {pro(q.x), pro(q.y), pro(q.z), pro(q.w)};
      ks_push_n<true>(st, xs);
    };
    constexpr int64_t step4 = 4 * 256;
    int64_t e = e0 + 4 * t;  // e0 and e1 are multiples of 4 (the binding's parts)
    for (; e + 3 * step4 < e1; e += 4 * step4) {
      float4 q[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) q[u] = chunk_at(e + u * step4);
#pragma unroll
      for (int u = 0; u < 4; ++u) push(q[u]);
    }
    for (; e < e1; e += step4) push(chunk_at(e));
#endif
  } else if (c < g.C) {
    {{channel_loads}}
    auto value_at = [&](const int64_t e) {
      int64_t n = 0, s = 0, li = 0;
      if (!FLAT || {{taps_need_index}}) {
        n = g.fS.m ? (int64_t)ks_fastdiv_apply((uint32_t)e, g.fS) : ks_div(e, g.S);
        s = e - n * g.S;
        li = (n * g.C + c) * g.S + s;  // the logical (contiguous) index
      }
      (void)li;
      const float a0 = FLAT ? ks_ld(p0 + e * g.sS + c * g.sC) : ks_ld(p0 + n * g.sN + c * g.sC + s * g.sS);
      {{tap_loads}}
      {{group_plane_loads}}
      float v;
      {{name}}_pro({{pro_args}}, v);
      return v;
    };
    int64_t e = first;
    for (; e + 3 * step < e1; e += 4 * step) {
      float xs[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) xs[u] = value_at(e + u * step);
      ks_push_n<true>(st, xs);
    }
    for (; e < e1; e += step) st.push(value_at(e));
  }
  if (ROWS) ks_block_merge(st, sm, t, t >> 5, 8, 32);
  else ks_block_merge(st, sm, t, t, 256, 1);
  if ((ROWS ? (t >> 5) : t) == 0 && c < g.C) st.save(ws + (c * g.parts + blockIdx.y) * 3);
}

// Phase 2: 2^WLOG warps per channel (the launcher's: at most 64 parts a warp, so a lane merges
// two states where the parts allow), 32 parts at a time a warp, then across the warp by
// shuffles and across the channel's warps through shared memory; the channel's first lane
// writes the statistics and updates the running statistics in place as torch does (the unbiased
// variance).  A thread per channel looping over its parts took 0.13 ms a batch_norm on a DenseNet
// block's 32 channels of [10, 32, 224, 224] (H200, bench/results/2026-11-28-h200x4-levels-s22:
// ~1,000 dependent loads and merges a thread, 32 threads busy), six times the statistics pass;
// one warp a channel still looped 17 times over a ResNet stem's 528 parts (H200, s22: ResNet101's
// 104 finalizes 1.0 ms of its 2.2 ms in our kernels, RegNet's 13 0.32 ms; RegNet's 22 us with this
// form on an H100, bench/results/2026-12-06-h100-s23).
__global__ void __launch_bounds__(256) {{name}}_finalize(const float* __restrict__ ws, float* __restrict__ stats,
                                                         float* __restrict__ running_mean, float* __restrict__ running_var,
                                                         const KsBnGeom g, const float eps, const float momentum,
                                                         const int wlog) {
  __shared__ float sm[3][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, w = warp & ((1 << wlog) - 1);
  const int64_t c = (int64_t)blockIdx.x * (8 >> wlog) + (warp >> wlog);
  KsStateWelford st = KsStateWelford::init();
  // the statistics' count: channels, or (G > 0) the N * G groups, each merging its cg channels'
  // states of its sample's pps parts
  const int64_t outs = g.G ? g.N * g.G : g.C, states = g.G ? g.cg * g.pps : g.parts;
  if (c < outs) {  // (a warp past them still takes part in the block's barrier below, with no state)
    const int64_t n = g.G ? c / g.G : 0, first = g.G ? (c - n * g.G) * g.cg : c;
#pragma unroll 2
    for (int64_t p = (int64_t)w * 32 + lane; p < states; p += (int64_t)32 << wlog) {
      const int64_t ch = g.G ? first + p / g.pps : c, part = g.G ? n * g.pps + p % g.pps : p;
      st.merge(KsStateWelford::load(ws + (ch * g.parts + part) * 3));
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const KsStateWelford o{__shfl_down_sync(0xffffffffu, st.mean, off), __shfl_down_sync(0xffffffffu, st.m2, off),
                           __shfl_down_sync(0xffffffffu, st.n, off)};
    st.merge(o);
  }
  if (wlog > 0) {  // uniform over the block
    if (lane == 0) { sm[0][warp] = st.mean; sm[1][warp] = st.m2; sm[2][warp] = st.n; }
    __syncthreads();
    if (w != 0 || lane != 0) return;
    for (int k = 1; k < (1 << wlog); ++k) st.merge(KsStateWelford{sm[0][warp + k], sm[1][warp + k], sm[2][warp + k]});
  } else if (lane != 0) {
    return;
  }
  if (c >= outs) return;
  const float var = st.m2 / st.n;  // n >= 2 values (the binding checks)
  stats[c] = st.mean;
  stats[outs + c] = rsqrtf(var + eps);
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * st.mean;
  if (running_var) running_var[c] = (1.f - momentum) * running_var[c] + momentum * (st.m2 / (st.n - 1.f));
}

// Resident blocks an SM of the instantiation the launcher will pick: the binding sizes the
// partition to whole waves (1.33 waves of 6-block SMs left a third of the second idle: level2/52).
{{per_sm_sig}} {
  if (rows && flat) { static const int k = ks_blocks_per_sm({{name}}_partial<true, true, false>, 256); return k; }
  if (rows) { static const int k = ks_blocks_per_sm({{name}}_partial<true, false, false>, 256); return k; }
#if {{v4}}
  if (v4) { static const int k = ks_blocks_per_sm({{name}}_partial<false, false, true>, 256); return k; }
#endif
  static const int k = ks_blocks_per_sm({{name}}_partial<false, false, false>, 256);
  return k;
}

{{launcher_sig}} {
  if (g.C <= 0) return;
  const dim3 grid((unsigned)(rows ? ks_cdiv(g.C, 32) : g.C), (unsigned)g.parts);
  if (rows && flat) {{name}}_partial<true, true, false><<<grid, 256, 0, stream>>>({{kernel_args}}, ws, g);
  else if (rows) {{name}}_partial<true, false, false><<<grid, 256, 0, stream>>>({{kernel_args}}, ws, g);
#if {{v4}}
  else if (v4) {{name}}_partial<false, false, true><<<grid, 256, 0, stream>>>({{kernel_args}}, ws, g);
#endif
  else {{name}}_partial<false, false, false><<<grid, 256, 0, stream>>>({{kernel_args}}, ws, g);
  (void)v4;
  const int64_t states = g.G ? g.cg * g.pps : g.parts, outs = g.G ? g.N * g.G : g.C;
  const int wlog = states <= 64 ? 0 : states <= 128 ? 1 : states <= 256 ? 2 : 3;  // warps a statistic: 2^wlog
  {{name}}_finalize<<<(unsigned)ks_cdiv(outs, 8 >> wlog), 256, 0, stream>>>(ws, stats, running_mean, running_var, g, eps,
                                                                           momentum, wlog);
}
