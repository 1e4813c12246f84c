#include "../ks_prelude.cuh"
#include "ks_mma.cuh"

// ---- flash attention {{name}} on tensor cores: out = {{score}}(q k^T * scale{{mask_what}}) v{{causal_what}} ----
// q [N, Lq, D], k and v [N, Lk, D] (head dims contiguous; n = b * heads + h read through batch and
// head strides of its own), out [N, Lq, D] contiguous.  The products run on mma.sync in {{math}}:
// both inputs rounded to it in shared memory (a tf32 value is fp32 with 10 mantissa bits; f16 /
// bf16 as stored), the probabilities rounded the same way before P v, all sums in fp32
// (FlashAttention-2's scheme).  One block of 4 warps owns BM = 64 MT query rows of one n, MT tiles
// of 16 rows a warp (MT 2: each K and V fragment read from shared memory feeds two products, half
// the shared-memory traffic per product, at twice the accumulator registers); the K and V tiles of
// BN keys stream through shared memory; an online softmax in base 2 keeps a row's running max and
// sum in the registers of the 4 lanes that hold it.
//   Warp layout (lane = 4 g + t): a score accumulator of keys 8j .. 8j+7 holds rows g and g + 8,
// keys 8j + 2t and 8j + 2t + 1, which is the A fragment of P v as it stands for k16 (two key
// groups); for tf32's k8 the k index t stands for key 2t and t + 4 for key 2t + 1, and the V
// rows are read in that order, so P never leaves registers.  A row's max and sum are two
// shuffles over the 4 lanes of one g.  Masks, causal skipping and the live-tile map are the
// fp32 kernel's (a row with no key taking part gets zeros).
namespace {{name}}_cfg {
constexpr int D = {{head_dim}};       // the head dim
constexpr int DP = {{head_dim_pad}};  // D rounded up to 16, zero-padded in shared memory
constexpr int KIND = {{mma_kind}};    // 0 tf32 (m16n8k8), 1 f16, 2 bf16 (m16n8k16)
using E = KsMmaElem<KIND>::T;
constexpr int KSTEP = KIND == 0 ? 8 : 16;
constexpr int LD = DP + (KIND == 0 ? 4 : 8);  // a padded row: the fragment reads of 8 rows hit 8 bank groups
constexpr int MT = {{row_tiles}};     // m16 row tiles a warp: each K / V fragment read from shared memory feeds MT products
constexpr int WARPS = 4, THREADS = 32 * WARPS, BM = 16 * MT * WARPS, BN = {{block_keys}};
constexpr bool CAUSAL = {{causal}};
constexpr int MASK = {{mask_kind}};   // 0 none, 1 nonzero takes part (bool, or x of `x != 0`), 2 added
constexpr bool RELU = {{relu}};       // relu(scores) v: no running max or sum, nothing normalised
constexpr size_t SMEM_BYTES = sizeof(E) * (size_t)(BM + 2 * BN) * LD;
static_assert(DP % 16 == 0 && BN % 16 == 0, "tiles of whole k16 steps");
}  // namespace {{name}}_cfg

__device__ __forceinline__ float {{name}}_mask(bool x) { return x ? 1.f : 0.f; }
template <typename T> __device__ __forceinline__ float {{name}}_mask(T x) { return ks_to_float(x); }

// rows x DP elements of src (row stride `stride`, `rows_left` rows exist) into dst [rows][LD] in the
// math's element, zeros past the rows and the head dim; 16-byte reads where `vec` says they align
template <typename T>
__device__ __forceinline__ void {{name}}_tile({{name}}_cfg::E* dst, const T* __restrict__ src, const int64_t stride,
                                              const int64_t rows_left, const int rows, const bool vec) {
  using namespace {{name}}_cfg;
  constexpr int VEC = 16 / sizeof(T), CH = DP / VEC;
  if (D % VEC == 0 && vec) {
    for (int i = threadIdx.x; i < rows * CH; i += THREADS) {
      const int r = i / CH, c = (i % CH) * VEC;
      float x[VEC];
      if (r < rows_left && c < D) {
        KsPack<T>::unpack(__ldg(reinterpret_cast<const uint4*>(src + r * stride + c)), x);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) x[e] = 0.f;
      }
      E* p = dst + r * LD + c;
      if constexpr (KIND == 0) {
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
          *reinterpret_cast<float4*>(p + e) = make_float4(ks_round_tf32(x[e]), ks_round_tf32(x[e + 1]),
                                                           ks_round_tf32(x[e + 2]), ks_round_tf32(x[e + 3]));
      } else {
#pragma unroll
        for (int e = 0; e < VEC; e += 4)
          *reinterpret_cast<uint2*>(p + e) = make_uint2(ks_mma_pack<KIND>(x[e], x[e + 1]),
                                                        ks_mma_pack<KIND>(x[e + 2], x[e + 3]));
      }
    }
  } else {
    for (int i = threadIdx.x; i < rows * DP; i += THREADS) {
      const int r = i / DP, c = i % DP;
      dst[r * LD + c] = ks_mma_elem<KIND>(r < rows_left && c < D ? ks_to_float(src[r * stride + c]) : 0.f);
    }
  }
}

template <typename T> __device__ __forceinline__ uint32_t {{name}}_u32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

__global__ void __launch_bounds__({{name}}_cfg::THREADS) {{name}}_kernel(
    {{kernel_params}}) {
  using namespace {{name}}_cfg;
  extern __shared__ float4 ks_attention_smem[];
  E* Qs = reinterpret_cast<E*>(ks_attention_smem);  // [BM][LD]
  E* Ks = Qs + BM * LD;                              // [BN][LD]
  E* Vs = Ks + BN * LD;                              // [BN][LD]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t n = blockIdx.x / tiles_m, m0 = (blockIdx.x % tiles_m) * BM;
  {  // this n's batch and head of the binding's [B, H, L, D] views
    const int64_t b = n / heads, h = n - b * heads;
    q += b * sqb + h * sqh;
    k += b * skb + h * skh;
    v += b * svb + h * svh;
  }
  // 16-byte reads: every row start 16-byte aligned (the base and both strides)
  constexpr int64_t QV = 16 / sizeof({{q_t}});
  const bool vec = ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) & 15) == 0 &&
                   (sqb | sqh | sq1 | skb | skh | sk1 | svb | svh | sv1) % QV == 0;
  {{name}}_tile(Qs, q + m0 * sq1, sq1, Lq - m0, BM, vec);
  float o[MT][DP / 8][4], m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m_run[mt][0] = m_run[mt][1] = -KS_INF;
    l_run[mt][0] = l_run[mt][1] = 0.f;
#pragma unroll
    for (int dn = 0; dn < DP / 8; ++dn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dn][e] = 0.f;
  }
  const E* qw = Qs + warp * 16 * MT * LD;
  const int64_t row0 = m0 + warp * 16 * MT + g;  // this lane's rows: row0 + 16 mt and row0 + 16 mt + 8
  const int64_t keys = CAUSAL ? (m0 + BM < Lk ? m0 + BM : Lk) : Lk;
  const int64_t tiles_n = (Lk + BN - 1) / BN;
  const unsigned char* live_row = live == nullptr ? nullptr : live + n * live_n + (blockIdx.x % tiles_m) * tiles_n;
  for (int64_t n0 = 0; n0 < keys; n0 += BN) {
    if (live_row != nullptr && !live_row[n0 / BN]) continue;  // no key of this tile takes part: uniform
    __syncthreads();  // the last tile's K and V reads are done (and the Q tile is written)
    {{name}}_tile(Ks, k + n0 * sk1, sk1, Lk - n0, BN, vec);
    {{name}}_tile(Vs, v + n0 * sv1, sv1, Lk - n0, BN, vec);
    __syncthreads();
    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][j][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DP; kk += KSTEP) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const E* qa = qw + mt * 16 * LD + kk;
        if constexpr (KIND == 0) {
          a[mt][0] = {{name}}_u32(qa + g * LD + t);
          a[mt][1] = {{name}}_u32(qa + (g + 8) * LD + t);
          a[mt][2] = {{name}}_u32(qa + g * LD + t + 4);
          a[mt][3] = {{name}}_u32(qa + (g + 8) * LD + t + 4);
        } else {
          a[mt][0] = {{name}}_u32(qa + g * LD + 2 * t);
          a[mt][1] = {{name}}_u32(qa + (g + 8) * LD + 2 * t);
          a[mt][2] = {{name}}_u32(qa + g * LD + 2 * t + 8);
          a[mt][3] = {{name}}_u32(qa + (g + 8) * LD + 2 * t + 8);
        }
      }
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {  // one B fragment of K for the warp's MT row tiles
        const E* kr = Ks + (j * 8 + g) * LD + kk;
        uint32_t b[2];
        if constexpr (KIND == 0) {
          b[0] = {{name}}_u32(kr + t);
          b[1] = {{name}}_u32(kr + t + 4);
        } else {
          b[0] = {{name}}_u32(kr + 2 * t);
          b[1] = {{name}}_u32(kr + 2 * t + 8);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) ks_mma<KIND>(s[mt][j], a[mt], b);
      }
    }
    // scale (base 2 for softmax), then masks: only a tile at the keys' end, on a causal diagonal or
    // under a mask tests each score
    const bool whole = MASK == 0 && n0 + BN <= Lk && (!CAUSAL || n0 + BN - 1 <= m0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][j][e] * q_scale;
          if (!whole) {
            const int64_t row = row0 + mt * 16 + (e >> 1) * 8, key = n0 + j * 8 + 2 * t + (e & 1);
            bool takes_part = key < Lk;
            if (CAUSAL) takes_part = takes_part && key <= row;
            if (MASK != 0 && takes_part && row < Lq) {
              const float m = {{name}}_mask(mask[n * sm0 + row * sm1 + key * sm2]);
              if (MASK == 1) takes_part = m != 0.f;
              // a finite mask as low as finfo(float32).min stays finite in base 2; only -inf masks out
              else if (RELU) x += m;
              else x = m == -KS_INF ? -KS_INF : fmaf(fmaxf(m, -2.35e38f), 1.4426950408889634f, x);
            }
            x = takes_part ? x : -KS_INF;
          }
          s[mt][j][e] = RELU ? fmaxf(x, 0.f) : x;  // a masked relu score (-inf) is 0
        }
    if constexpr (!RELU) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -KS_INF;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m_run[mt][r], mx);
          const float base = m_new == -KS_INF ? 0.f : m_new;  // no key yet: keep everything 0, not NaN
          const float alpha = exp2f(m_run[mt][r] - base);
          float sum = 0.f;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
            s[mt][j][2 * r] = exp2f(s[mt][j][2 * r] - base);
            s[mt][j][2 * r + 1] = exp2f(s[mt][j][2 * r + 1] - base);
            sum += s[mt][j][2 * r] + s[mt][j][2 * r + 1];
          }
          sum += __shfl_xor_sync(0xffffffffu, sum, 1);
          sum += __shfl_xor_sync(0xffffffffu, sum, 2);
          l_run[mt][r] = l_run[mt][r] * alpha + sum;
          m_run[mt][r] = m_new;
#pragma unroll
          for (int dn = 0; dn < DP / 8; ++dn) {
            o[mt][dn][2 * r] *= alpha;
            o[mt][dn][2 * r + 1] *= alpha;
          }
        }
    }
    if constexpr (KIND == 0) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        // k index t is key 8j + 2t, t + 4 is key 8j + 2t + 1 (the accumulator's own columns)
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = __float_as_uint(ks_round_tf32(s[mt][j][0]));
          a[mt][1] = __float_as_uint(ks_round_tf32(s[mt][j][2]));
          a[mt][2] = __float_as_uint(ks_round_tf32(s[mt][j][1]));
          a[mt][3] = __float_as_uint(ks_round_tf32(s[mt][j][3]));
        }
        const E* v0 = Vs + (j * 8 + 2 * t) * LD + g;
#pragma unroll
        for (int dn = 0; dn < DP / 8; ++dn) {
          const uint32_t b[2] = {{{name}}_u32(v0 + dn * 8), {{name}}_u32(v0 + LD + dn * 8)};
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) ks_mma<0>(o[mt][dn], a[mt], b);
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = ks_mma_pack<KIND>(s[mt][2 * j][0], s[mt][2 * j][1]);
          a[mt][1] = ks_mma_pack<KIND>(s[mt][2 * j][2], s[mt][2 * j][3]);
          a[mt][2] = ks_mma_pack<KIND>(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
          a[mt][3] = ks_mma_pack<KIND>(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
        }
        // lanes 0-15 address keys 16j .. 16j+15 at head dims dn*8, lanes 16-31 the same keys at dn*8 + 8
        const E* vrow = Vs + (j * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
#pragma unroll
        for (int dn = 0; dn < DP / 8; dn += 2) {
          uint32_t b[4];
          ks_ldmatrix_x4_trans(b, vrow + dn * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            ks_mma<KIND>(o[mt][dn], a[mt], b);
            ks_mma<KIND>(o[mt][dn + 1], a[mt], b + 2);
          }
        }
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row0 + mt * 16 + 8 * r;
      if (row >= Lq) continue;
      const float inv = RELU ? 1.f : l_run[mt][r] > 0.f ? 1.f / l_run[mt][r] : 0.f;
      {{out_t}}* orow = out + (n * Lq + row) * D;
#pragma unroll
      for (int dn = 0; dn < DP / 8; ++dn) {
        const int d = dn * 8 + 2 * t;
        if (d < D) orow[d] = ks_from_float<{{out_t}}>(o[mt][dn][2 * r] * inv);
        if (d + 1 < D) orow[d + 1] = ks_from_float<{{out_t}}>(o[mt][dn][2 * r + 1] * inv);
      }
    }
}
