#ifndef KS_CONTRACTION_H
#define KS_CONTRACTION_H
// A contraction's run-time geometry (contraction/kernel.cu), filled by its binding: the sizes of
// the dims of each role (batch, m, n, k; row-major within a role, the last dim fastest), their
// multiply-shift divisors, and every operand's element strides per role dim (0 where the operand
// lacks the index or broadcasts it).  Plain C++ shared by the binding (g++) and the kernel (nvcc).
#include "../ks_fastdiv.h"

#define KS_CONTRACTION_MAX_INPUTS 4  /* kernel_spec.CONTRACTION_MAX_INPUTS */
#define KS_CONTRACTION_MAX_DIMS 4    /* kernel_spec.CONTRACTION_MAX_DIMS: dims a role */
#define KS_CONTRACTION_OUT KS_CONTRACTION_MAX_INPUTS  /* stride slot of the output */
#define KS_CONTRACTION_BK 16         /* k values a block stages per step */
#define KS_CONTRACTION_MAX_GRID 1048576  /* blocks a launch; more tiles: each block loops */

enum KsContractionRole : int { KS_CTR_BATCH = 0, KS_CTR_M = 1, KS_CTR_N = 2, KS_CTR_K = 3 };

struct KsContraction {
  int64_t size[4][KS_CONTRACTION_MAX_DIMS];  // role, dim: 1 past the role's dims
  KsFastDiv fsize[4][KS_CONTRACTION_MAX_DIMS];
  int64_t total[4];                          // elements a role (B, M, N, K): < 2^31, checked by the binding
  // element strides: operands 0..3, then the output (KS_CONTRACTION_OUT, its batch / m / n dims)
  int64_t stride[KS_CONTRACTION_MAX_INPUTS + 1][4][KS_CONTRACTION_MAX_DIMS];
  int64_t m_tiles, n_tiles, tiles;           // tiles = B * m_tiles * n_tiles < 2^32 (n fastest, then m)
  KsFastDiv f_m_tiles, f_n_tiles;
};

#if defined(__CUDACC__)
// The per-dim indices of position `lin` (< 2^32) of a role's ND dims: multiply-shift divisions by
// the inner dims' sizes; the first dim takes the rest (so a position past the role's end gives an
// index past its first dim: callers never read there).
template <int ND> struct KsCtrIndex { uint32_t i[ND > 0 ? ND : 1]; };

template <int ND>
__device__ __forceinline__ KsCtrIndex<ND> ks_ctr_split(uint32_t lin, const KsContraction& g, int role) {
  KsCtrIndex<ND> x;
  x.i[0] = 0;
#pragma unroll
  for (int d = ND - 1; d > 0; --d) {
    const uint32_t q = ks_fastdiv_apply(lin, g.fsize[role][d]);
    x.i[d] = lin - q * (uint32_t)g.size[role][d];
    lin = q;
  }
  if (ND > 0) x.i[0] = lin;
  return x;
}

// The element offset of those indices for stride slot `slot` (an operand or the output).
template <int ND>
__device__ __forceinline__ int64_t ks_ctr_offset(const KsCtrIndex<ND>& x, const KsContraction& g, int slot, int role) {
  int64_t off = 0;
#pragma unroll
  for (int d = 0; d < ND; ++d) off += (int64_t)x.i[d] * g.stride[slot][role][d];
  return off;
}

// The tile row (or column) of a thread's i-th output along a dim: strided by the T threads
// along it, or, with VEC4, 4 consecutive positions that the thread reads as one 16-byte shared
// load (a review counted 5 scalar shared loads per 4 FMAs on level3/49's 16 x 64 tile).
template <int R, int T, bool VEC4>
__device__ __forceinline__ int ks_ctr_pos(int t, int i) { return VEC4 ? t * R + i : t + i * T; }

template <int R, int T, bool VEC4, int W>
__device__ __forceinline__ void ks_ctr_row(const float (&row)[W], int t, float (&v)[R]) {
  if constexpr (VEC4) {
    static_assert(R == 4, "16-byte shared loads take 4 outputs a thread");
    const float4 q = *reinterpret_cast<const float4*>(&row[t * 4]);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < R; ++i) v[i] = row[t + i * T];
  }
}

// One k row of the staged tiles into a thread's RM x RN accumulators.
template <int RM, int RN, int TM, int TN, bool ROWS4, bool COLS4, int BM, int BN, int BK>
__device__ __forceinline__ void ks_contraction_step(const float (&As)[BK][BM], const float (&Bs)[BK][BN], int kk,
                                                    int tm, int tn, float (&acc)[RM][RN]) {
  float a[RM], b[RN];
  ks_ctr_row<RM, TM, ROWS4>(As[kk], tm, a);
  ks_ctr_row<RN, TN, COLS4>(Bs[kk], tn, b);
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}
#endif
#endif  // KS_CONTRACTION_H
