#include "../ks_prelude.cuh"
#include "ks_contraction.h"

// ---- contraction kernel {{name}}: einsum {{equation}} ----
// out[b, m, n] = sum_k (prod of side A's operands at [b, m, k]) * (prod of side B's at [b, n, k]),
// in fp32: an SIMT tiled GEMM whose operands are read through their strides.  A block of 256
// threads takes a BM x BN tile of one batch position (tiles in one flat index below 2^32, the
// binding checks: n tiles fastest, then m tiles, then the batch), and walks k in steps of BK:
// * the offsets of the step's BK k values, for every operand, are computed once (the first BK
//   threads, multiply-shift divisions) into shared memory;
// * each thread stages one m position of As[BK][BM] (the product over side A) and one n
//   position of Bs[BK][BN]: consecutive threads on consecutive positions, so the loads along an
//   operand's contiguous m / n dim coalesce and the shared stores are conflict-free; the
//   position's batch + m / n offset of every operand is computed once per tile;
// * each thread accumulates RM x RN outputs at rows tm + i * TM, columns tn + j * TN: a warp
//   reads consecutive words of a row of As / Bs, or one word (a broadcast), so no bank
//   conflicts, and consecutive threads write consecutive outputs along the output's contiguous
//   index (M_FAST: threads along m when it is an m index, else along n); along the other dim,
//   4 outputs a thread are 4 consecutive positions read as one 16-byte load (ks_ctr_pos).
__global__ void __launch_bounds__(256) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                        const __grid_constant__ KsContraction g) {
  constexpr int BM = {{bm}}, BN = {{bn}}, BK = KS_CONTRACTION_BK;
  constexpr int RM = {{rm}}, RN = {{rn}};  // outputs a thread along m, n
  constexpr int TM = BM / RM, TN = BN / RN;  // threads along m, n
  constexpr int NB = {{nb}}, NM = {{nm}}, NN = {{nn}}, NK = {{nk}};  // dims of each role
  constexpr int NIN = {{nin}};
  constexpr bool M_FAST = {{m_fast}};  // the output's last (contiguous) index is an m index
  constexpr int A_PER = (BK * BM + 255) / 256, B_PER = (BK * BN + 255) / 256;  // staged values a thread
  static_assert(TM * TN == 256 && 256 % BM == 0 && 256 % BN == 0, "256 threads over the tile");
  // 4 outputs a thread along the dim the threads do not run along: its 4 consecutive positions
  // read as one 16-byte shared load (the stores stay coalesced along the other dim)
  constexpr bool ROWS4 = !M_FAST && RM == 4, COLS4 = M_FAST && RN == 4;
  __shared__ __align__(16) float As[BK][BM];
  __shared__ __align__(16) float Bs[BK][BN];
  // The next step's k offsets and operand values are fetched while this step multiplies (koff
  // double-buffered, the values in registers), so a block's global loads overlap its FMAs
  // instead of waiting between two barriers (level3/49's first contraction read as
  // long-scoreboard stalls at 43% of DRAM; this loop took its chunk-state einsum from 0.586 to
  // 0.406 ms and a bmm from 0.332 to 0.293 on an H100, bench/results/2026-12-07-h100-s32).
  __shared__ int64_t koff[2][NIN][BK];  // a step's k offset of each operand

  const int tid = threadIdx.x;
  const int tm = M_FAST ? tid % TM : tid / TN;
  const int tn = M_FAST ? tid / TM : tid % TN;
  const int am = tid % BM, bn = tid % BN;  // the position this thread stages
  const uint32_t M = (uint32_t)g.total[KS_CTR_M], N = (uint32_t)g.total[KS_CTR_N], K = (uint32_t)g.total[KS_CTR_K];

  for (int64_t t = blockIdx.x; t < g.tiles; t += gridDim.x) {  // tiles < 2^32 (the binding checks)
    const uint32_t mb = ks_fastdiv_apply((uint32_t)t, g.f_n_tiles), bt = ks_fastdiv_apply(mb, g.f_m_tiles);
    const uint32_t n0 = ((uint32_t)t - mb * (uint32_t)g.n_tiles) * BN, m0 = (mb - bt * (uint32_t)g.m_tiles) * BM;
    const KsCtrIndex<NB> bi = ks_ctr_split<NB>(bt, g, KS_CTR_BATCH);
    // Every operand's batch + staged-position offset (side A's operands have no n strides,
    // side B's no m strides: one sum serves both sides).
    const KsCtrIndex<NM> smi = ks_ctr_split<NM>(m0 + am, g, KS_CTR_M);
    const KsCtrIndex<NN> sni = ks_ctr_split<NN>(n0 + bn, g, KS_CTR_N);
    int64_t off[NIN];
#pragma unroll
    for (int o = 0; o < NIN; ++o)
      off[o] = ks_ctr_offset<NB>(bi, g, o, KS_CTR_BATCH) + ks_ctr_offset<NM>(smi, g, o, KS_CTR_M) +
               ks_ctr_offset<NN>(sni, g, o, KS_CTR_N);
    const bool a_in = m0 + am < M, b_in = n0 + bn < N;

    float acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

    // the step at k0's k offsets (first BK threads) into koff[buf]
    auto k_offsets = [&](uint32_t k0, int buf) {
      if (tid < BK) {
        const KsCtrIndex<NK> ki = ks_ctr_split<NK>(k0 + tid, g, KS_CTR_K);
#pragma unroll
        for (int o = 0; o < NIN; ++o) koff[buf][o][tid] = ks_ctr_offset<NK>(ki, g, o, KS_CTR_K);
      }
    };
    // the step at k0's staged values of this thread (products of each side), from koff[buf]
    float av[A_PER], bv[B_PER];
    auto fetch = [&](uint32_t k0, int buf) {
#pragma unroll
      for (int r = 0; r < A_PER; ++r) {
        const int kk = tid / BM + r * (256 / BM);
        av[r] = 0.0f;
        if ((BK * BM >= 256 || kk < BK) && a_in && k0 + kk < K) av[r] = 1.0f{{a_product}};
      }
#pragma unroll
      for (int r = 0; r < B_PER; ++r) {
        const int kk = tid / BN + r * (256 / BN);
        bv[r] = 0.0f;
        if ((BK * BN >= 256 || kk < BK) && b_in && k0 + kk < K) bv[r] = 1.0f{{b_product}};
      }
    };
    auto stage = [&]() {
#pragma unroll
      for (int r = 0; r < A_PER; ++r) {
        const int kk = tid / BM + r * (256 / BM);
        if (BK * BM >= 256 || kk < BK) As[kk][am] = av[r];  // BM = 1: the first BK threads stage
      }
#pragma unroll
      for (int r = 0; r < B_PER; ++r) {
        const int kk = tid / BN + r * (256 / BN);
        if (BK * BN >= 256 || kk < BK) Bs[kk][bn] = bv[r];
      }
    };
    // a full step unrolled; a short last one (level3/49's second einsum sums 2 values) multiplies
    // only its rows (the branch is uniform across the block)
    auto multiply = [&](uint32_t k0) {
      if (K - k0 >= (uint32_t)BK) {
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) ks_contraction_step<RM, RN, TM, TN, ROWS4, COLS4>(As, Bs, kk, tm, tn, acc);
      } else {
        for (int kk = 0; kk < (int)(K - k0); ++kk) ks_contraction_step<RM, RN, TM, TN, ROWS4, COLS4>(As, Bs, kk, tm, tn, acc);
      }
    };

    // step s's values are fetched (into registers) while step s - 1 multiplies; koff[s % 2]
    // holds step s's offsets, written during step s - 1 after a barrier that follows step
    // s - 2's fetch, the buffer's last reader.  fetch has one call site: with a second (a
    // peeled first step), ptxas kept av / bv on a stack (spills in two of the nvcc test's specs).
    __syncthreads();  // the last tile's reads of As, Bs and koff done
    k_offsets(0, 0);
    __syncthreads();
    int buf = 0;
    for (uint32_t kf = 0;; kf += BK, buf ^= 1) {  // kf: the step being fetched
      if (kf < K) fetch(kf, buf);
      if (kf > 0) multiply(kf - BK);
      if (kf >= K) break;
      __syncthreads();  // step kf - BK's reads of As, Bs done
      stage();
      if (kf + BK < K) k_offsets(kf + BK, buf ^ 1);
      __syncthreads();  // As, Bs of step kf and the next koff written
    }

    const int64_t obase = ks_ctr_offset<NB>(bi, g, KS_CONTRACTION_OUT, KS_CTR_BATCH);
    int64_t on[RN];
#pragma unroll
    for (int j = 0; j < RN; ++j)
      on[j] = ks_ctr_offset<NN>(ks_ctr_split<NN>(n0 + ks_ctr_pos<RN, TN, COLS4>(tn, j), g, KS_CTR_N), g,
                                KS_CONTRACTION_OUT, KS_CTR_N);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const uint32_t m = m0 + ks_ctr_pos<RM, TM, ROWS4>(tm, i);
      if (m >= M) continue;
      const int64_t om = obase + ks_ctr_offset<NM>(ks_ctr_split<NM>(m, g, KS_CTR_M), g, KS_CONTRACTION_OUT, KS_CTR_M);
#pragma unroll
      for (int j = 0; j < RN; ++j)
        if (n0 + ks_ctr_pos<RN, TN, COLS4>(tn, j) < N) out[om + on[j]] = ks_from_float<{{out_t}}>(acc[i][j]);
    }
  }
}

{{launcher_sig}} {
  const int64_t blocks = g.tiles < KS_CONTRACTION_MAX_GRID ? g.tiles : KS_CONTRACTION_MAX_GRID;
  {{name}}_kernel<<<(unsigned)blocks, 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), g);
}
