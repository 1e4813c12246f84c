#include "../ks_prelude.cuh"

// ---- flash attention {{name}}: out = {{score}}(q k^T * scale{{mask_what}}) v{{causal_what}} ----
// q [N, Lq, D], k and v [N, Lk, D] (the head dims last and contiguous; N the leading dims merged,
// one stride each), out [N, Lq, D] contiguous; fp32 accumulation, no tensor cores (the
// strict fp32 the Verifier holds every program to).  One block of 256 threads owns BM = 16 * RM
// query rows of one n: their Q tile stays in shared memory, pre-multiplied by scale * log2(e)
// (by scale for ReLU scores);
// the K and V tiles of BN = 64 keys stream through shared memory, and an online softmax in base 2
// (running max m and sum l per row, the output rescaled by exp2(m_old - m_new)) means the
// [Lq, Lk] score matrix never exists in memory.
//   Thread (ty, tx) of the 16 x 16 grid holds scores rows ty*RM .. +RM-1 x keys tx*4 .. +3
// (16-byte reads of the transposed tiles: the 16 tx lanes read 256 contiguous bytes, the rows
// are broadcast), and output rows ty*RM .. x head dims tx*CPT .. +CPT-1 (one 8- or 16-byte read of
// a value row where CPT allows: the 16 lanes read contiguous bytes).  A row's
// max and sum are shuffles over the 16 lanes of one ty.  Causal: key c takes part for query
// r >= c (torch's is_causal, top-left aligned), and key tiles past the block's last row are
// never loaded; a bool mask's tiles where no key takes part (a causal tril buffer's upper half)
// are skipped too: a pre-pass over the mask marks the live tiles.  A row with no key taking part
// gets zeros (SDPA's fused kernels do the same).
namespace {{name}}_cfg {
constexpr int D = {{head_dim}};       // the head dim
constexpr int DP = {{head_dim_pad}};  // D rounded up to 16, zero-padded in shared memory
constexpr int RM = {{rows_per_thread}};
constexpr int BM = 16 * RM, BN = 64, THREADS = 256;
constexpr int CPT = DP / 16;          // output head dims a thread
constexpr int LDQ = BM + 4, LDK = BN + 4, LDP = BM + 4;  // +4: 16-byte rows, fewer bank conflicts
constexpr bool CAUSAL = {{causal}};
constexpr int MASK = {{mask_kind}};   // 0 none, 1 nonzero takes part (bool, or x of `x != 0`), 2 added
constexpr bool RELU = {{relu}};       // relu(scores) v: no running max or sum, nothing normalised
constexpr size_t SMEM_BYTES = sizeof(float) * ((size_t)DP * LDQ + (size_t)DP * LDK + (size_t)BN * DP + (size_t)BN * LDP);
}  // namespace {{name}}_cfg

__device__ __forceinline__ float {{name}}_mask(bool x) { return x ? 1.f : 0.f; }
template <typename T> __device__ __forceinline__ float {{name}}_mask(T x) { return ks_to_float(x); }

// (256, 2): 128 registers at most; without the minimum ptxas chose 80 for head dim 96 and spilled
__global__ void __launch_bounds__({{name}}_cfg::THREADS, 2) {{name}}_kernel(
    {{kernel_params}}) {
  using namespace {{name}}_cfg;
  extern __shared__ float4 ks_attention_smem[];
  float* Qt = reinterpret_cast<float*>(ks_attention_smem);  // [DP][LDQ], transposed
  float* Kt = Qt + DP * LDQ;                                // [DP][LDK], transposed
  float* Vs = Kt + DP * LDK;                                // [BN][DP]
  float* Pt = Vs + BN * DP;                                 // [BN][LDP], the tile's probabilities
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int64_t n = blockIdx.x / tiles_m, m0 = (blockIdx.x % tiles_m) * BM;
  // heads is 1 here (the binding merges batch and heads for this body, copying where it must): a
  // separate head stride cost causal head-dim-64 kernels spills at 128 registers
  q += n * sqb;
  k += n * skb;
  v += n * svb;
  for (int i = tid; i < BM * DP; i += THREADS) {
    const int r = i / DP, d = i % DP;
    const int64_t row = m0 + r;
    Qt[d * LDQ + r] = (row < Lq && d < D) ? ks_to_float(q[row * sq1 + d]) * q_scale : 0.f;
  }
  float o[RM][CPT], m_run[RM], l_run[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m_run[i] = -KS_INF;
    l_run[i] = 0.f;
#pragma unroll
    for (int c = 0; c < CPT; ++c) o[i][c] = 0.f;
  }
  const int64_t keys = CAUSAL ? (m0 + BM < Lk ? m0 + BM : Lk) : Lk;
  const int64_t tiles_n = (Lk + BN - 1) / BN;
  const unsigned char* live_row = live == nullptr ? nullptr : live + n * live_n + (blockIdx.x % tiles_m) * tiles_n;
  for (int64_t n0 = 0; n0 < keys; n0 += BN) {
    if (live_row != nullptr && !live_row[n0 / BN]) continue;  // no key of this tile takes part: uniform
    __syncthreads();  // the last tile's K, V and P reads are done (the Q tile is written)
    for (int i = tid; i < BN * DP; i += THREADS) {
      const int c = i / DP, d = i % DP;
      const int64_t key = n0 + c;
      const bool in = key < Lk && d < D;
      Kt[d * LDK + c] = in ? ks_to_float(k[key * sk1 + d]) : 0.f;
      Vs[c * DP + d] = in ? ks_to_float(v[key * sv1 + d]) : 0.f;
    }
    __syncthreads();
    float s[RM][4];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
#pragma unroll 4
    for (int d = 0; d < DP; ++d) {
      const float4 b = *reinterpret_cast<const float4*>(&Kt[d * LDK + tx * 4]);
#pragma unroll
      for (int i4 = 0; i4 < RM; i4 += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&Qt[d * LDQ + ty * RM + i4]);
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          s[i4 + i][0] = fmaf(av[i], b.x, s[i4 + i][0]);
          s[i4 + i][1] = fmaf(av[i], b.y, s[i4 + i][1]);
          s[i4 + i][2] = fmaf(av[i], b.z, s[i4 + i][2]);
          s[i4 + i][3] = fmaf(av[i], b.w, s[i4 + i][3]);
        }
      }
    }
    // Only a tile at the keys' end, on a causal diagonal or under a mask tests each score: the
    // 64-bit index math and selects are a few percent of a whole tile's instructions (estimated;
    // ncu on VisionAttention: 7.4 G warp instructions issued for 4.3 G of FMAs).  Under a mask
    // `whole` is false at compile time and the loop is the one it always was.
    const bool whole = MASK == 0 && n0 + BN <= Lk && (!CAUSAL || n0 + BN - 1 <= m0);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int64_t row = m0 + ty * RM + i;
      float mx = -KS_INF;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (!whole) {
          const int64_t key = n0 + tx * 4 + j;
          bool takes_part = key < Lk;
          if (CAUSAL) takes_part = takes_part && key <= row;
          if (MASK != 0 && takes_part && row < Lq) {
            const float m = {{name}}_mask(mask[n * sm0 + row * sm1 + key * sm2]);
            if (MASK == 1) takes_part = m != 0.f;
            // softmax: base 2; a finite mask as low as finfo(float32).min stays finite there (its
            // rows are uniform, as in torch), only -inf masks out
            else if (RELU) s[i][j] += m;
            else s[i][j] = m == -KS_INF ? -KS_INF : fmaf(fmaxf(m, -2.35e38f), 1.4426950408889634f, s[i][j]);
          }
          s[i][j] = takes_part ? s[i][j] : -KS_INF;
        }
        if (RELU) s[i][j] = fmaxf(s[i][j], 0.f);  // a masked score (-inf) is 0 too
        mx = fmaxf(mx, s[i][j]);
      }
      if (RELU) continue;  // the probabilities are the scores themselves
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_new = fmaxf(m_run[i], mx);
      const float base = m_new == -KS_INF ? 0.f : m_new;  // no key yet: keep everything 0, not NaN
      const float alpha = exp2f(m_run[i] - base);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - base);
        sum += s[i][j];
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run[i] = l_run[i] * alpha + sum;
      m_run[i] = m_new;
#pragma unroll
      for (int c = 0; c < CPT; ++c) o[i][c] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int i4 = 0; i4 < RM; i4 += 4)
        *reinterpret_cast<float4*>(&Pt[(tx * 4 + j) * LDP + ty * RM + i4]) =
            make_float4(s[i4][j], s[i4 + 1][j], s[i4 + 2][j], s[i4 + 3][j]);
    __syncthreads();
#pragma unroll 4
    for (int c = 0; c < BN; ++c) {
      float b[CPT];
      const float* vrow = &Vs[c * DP + tx * CPT];
      if (CPT % 4 == 0) {
#pragma unroll
        for (int cc = 0; cc < CPT; cc += 4) {
          const float4 w = *reinterpret_cast<const float4*>(vrow + cc);
          b[cc] = w.x; b[cc + 1] = w.y; b[cc + 2] = w.z; b[cc + 3] = w.w;
        }
      } else if (CPT % 2 == 0) {
#pragma unroll
        for (int cc = 0; cc < CPT; cc += 2) {
          const float2 w = *reinterpret_cast<const float2*>(vrow + cc);
          b[cc] = w.x; b[cc + 1] = w.y;
        }
      } else {
#pragma unroll
        for (int cc = 0; cc < CPT; ++cc) b[cc] = vrow[cc];
      }
#pragma unroll
      for (int i4 = 0; i4 < RM; i4 += 4) {
        const float4 a = *reinterpret_cast<const float4*>(&Pt[c * LDP + ty * RM + i4]);
        const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int cc = 0; cc < CPT; ++cc) o[i4 + i][cc] = fmaf(av[i], b[cc], o[i4 + i][cc]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t row = m0 + ty * RM + i;
    if (row >= Lq) continue;
    const float inv = RELU ? 1.f : l_run[i] > 0.f ? 1.f / l_run[i] : 0.f;
#pragma unroll
    for (int cc = 0; cc < CPT; ++cc) {
      const int d = tx * CPT + cc;
      if (d < D) out[(n * Lq + row) * D + d] = ks_from_float<{{out_t}}>(o[i][cc] * inv);
    }
  }
}
