"""Softmax / log_softmax along a strided dim with thread-block clusters (Hopper, sm_90+).

The tensor is seen as [outer, R, inner].  A cluster of C CTAs owns a strip of W = VEC * TXV
consecutive inner columns of one outer slice and all R rows; CTA `rank` keeps rows
[rank * TYR * RPT, (rank + 1) * TYR * RPT) in registers (RPT rows x VEC columns per thread,
16-byte loads, all issued before the first use).  Per-column (max, sum-of-exp) pairs are merged
down the CTA in shared memory, then across the cluster through distributed shared memory, and the
registers are written back normalised: one read and one write of global memory, with rows read
as W-element segments (128 bytes) instead of the 64 of the shared-memory column tiles.

Chosen on the H100 by microbenchmark (bench/results/2026-11-24-h100/RUN.md): for
[32, 1024, 4096] fp32, W = 32 columns, 16 threads along R with 16 rows each, clusters of 4, ran at
85% of the copy bandwidth in a hand-written kernel and 83% as emitted here, where the
shared-memory column tiles ran at 59%; clusters of 8 or 16 and wider strips were slower.  Only
one thread per column reads the peers' pairs: every thread doing so multiplied the
distributed-shared-memory traffic (clusters of 8 ran 4x slower).
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template


@dataclass(frozen=True)
class ClusterShape:
    """Template arguments of the cluster kernel for one storage width."""

    vec: int  # elements per 16-byte access
    txv: int  # threads along inner (each VEC columns)
    tyr: int  # threads along R
    rpt: int  # rows each thread keeps

    @property
    def rows_per_cta(self) -> int:
        return self.tyr * self.rpt


MAX_CLUSTER = 8  # the portable cluster size


def cluster_shape(vec: int) -> ClusterShape:
    """fp32 (vec 4): the measured best.  2-byte types (vec 8): the same 64 values per thread, so
    8 rows each; strips of 64 columns (128 bytes)."""
    return ClusterShape(vec=vec, txv=8, tyr=16, rpt=16 * 4 // vec)


CLUSTER_PRELUDE = r"""
#ifndef KS_CLUSTER_H
#define KS_CLUSTER_H
#include <cooperative_groups.h>
// (max, sum of exp(x - max)) pairs, merged NaN-propagating (ks_max) like the row kernels.  The
// kernel below computes in fast math (__expf: within 2 + 1.16|x| ulp; x - max <= 0), a reciprocal
// multiply for the softmax division and fmaxf (a NaN still poisons its column through the sum):
// with the accurate expf, ks_max and a division the kernel ran at 63% of the copy bandwidth on the
// H100, 83% like this (bench/results/2026-11-24-h100/RUN.md).
__device__ __forceinline__ float2 ks_lse_merge(float2 a, float2 b) {
  const float m = ks_max(a.x, b.x);
  if (m == -KS_INF) return make_float2(m, 0.f);
  return make_float2(m, a.y * __expf(a.x - m) + b.y * __expf(b.x - m));
}
#endif  // KS_CLUSTER_H
"""

_KERNEL = Template(
    """
// Softmax kinds along a strided dim on sm_90+: see agents/coder/codegen/cluster_cols.py.
// Min blocks ${minb}: 5 is a 96-register cap at cluster_shape's 128 threads (ptxas took 108 otherwise:
// 4 CTAs per SM instead of 5, 0.65 instead of 0.57 ms in the microbenchmark), for fp32 kernels
// without prologue or epilogue ops; else 4 (128 registers): under 96, x / T spilled 28 bytes and
// an fp16 softmax 4.
// FULL: every operand is a contiguous full-size tensor (the common case), read with plain 16-byte
// loads; the descriptor switch of ks_load otherwise (its branches per load doubled the kernel's
// code: 0.60 instead of 0.57 ms before the fast math, in the microbenchmark).
template <int VEC, int TXV, int TYR, int RPT, bool FULL>
__global__ void __launch_bounds__(TXV * TYR, ${minb})
${name}_cluster(${params}, ${out_t}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int W = VEC * TXV;
  __shared__ float2 part[TYR][W + 1];
  __shared__ float2 cta_stat[W];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int C = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int tx = threadIdx.x % TXV, ty = threadIdx.x / TXV;
  const int64_t strips = ks_div(inner + W - 1, W);
  const int64_t strip = (int64_t)(blockIdx.x / (unsigned)C);
  const int64_t o = ks_div(strip, strips);
  const int64_t c0 = (strip - o * strips) * W + tx * VEC;
  const bool live = c0 < inner;  // inner % VEC == 0: all VEC columns or none
  const int Ri = (int)R;
  const int r0 = rank * TYR * RPT + ty;
  const int64_t base = o * R * inner + c0;
  float v[RPT][VEC];
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < Ri) {
      const int64_t idx = base + (int64_t)r * inner;
      ${loads}
#pragma unroll
      for (int q = 0; q < VEC; ++q) ${pro_call}
    } else {
#pragma unroll
      for (int q = 0; q < VEC; ++q) v[j][q] = -KS_INF;
    }
  }
#pragma unroll
  for (int q = 0; q < VEC; ++q) {
    float m = -KS_INF;
#pragma unroll
    for (int j = 0; j < RPT; ++j) m = fmaxf(m, v[j][q]);  // a NaN reaches the sum instead
    const float ms = m == -KS_INF ? 0.f : m;  // all -inf: sum is 0, no inf - inf
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < RPT; ++j) s += __expf(v[j][q] - ms);
    part[ty][tx * VEC + q] = make_float2(m, s);
  }
  __syncthreads();
  if (threadIdx.x < W) {  // one thread per column: this CTA's rows
    float2 a = make_float2(-KS_INF, 0.f);
    for (int k = 0; k < TYR; ++k) a = ks_lse_merge(a, part[k][threadIdx.x]);
    cta_stat[threadIdx.x] = a;
  }
  cluster.sync();
  if (threadIdx.x < W) {  // one thread per column reads the peers (distributed shared memory)
    float2 a = make_float2(-KS_INF, 0.f);
    for (int k = 0; k < C; ++k) a = ks_lse_merge(a, cluster.map_shared_rank(cta_stat, k)[threadIdx.x]);
    part[0][threadIdx.x] = a;  // row 0 of part is free: its merge above is done
  }
  __syncthreads();
  float ms[VEC], s1[VEC];
#pragma unroll
  for (int q = 0; q < VEC; ++q) {
    const float2 t = part[0][tx * VEC + q];
    ms[q] = t.x == -KS_INF ? 0.f : t.x;
    s1[q] = ${s1};
  }
#pragma unroll
  for (int j = 0; j < RPT; ++j) {
    const int r = r0 + j * TYR;
    if (live && r < Ri) {
      const int64_t idx = base + (int64_t)r * inner;
      ${e_loads}
      float yv[VEC];
#pragma unroll
      for (int q = 0; q < VEC; ++q) { yv[q] = ${y}; ${epi} }
      ks_st_vec<VEC>(out + idx, yv);
    }
  }
  cluster.sync();  // peers may still be reading cta_stat
#endif
}
"""
)

# y from the cached (prologue-applied) value v[j][q] and the column's ms[q], s1[q]
_NORMALIZE = {
    "softmax": ("1.f / t.y", "__expf(v[j][q] - ms[q]) * s1[q]"),
    "log_softmax": ("logf(t.y)", "v[j][q] - ms[q] - s1[q]"),
}


def cluster_kernel(kind: str, name: str, params: str, out_t: str, loads: str, pro_call: str,
                   e_loads: str, epi: str, plain: bool) -> str:
    """The kernel text.  `loads` fills a{k}[VEC] at `idx` (and may test FULL), `pro_call` writes
    v[j][q] from a{k}[q], `e_loads` fills e{k}[VEC] at `idx`, `epi` updates yv[q] in place;
    `plain`: fp32 without prologue or epilogue ops (the tighter register cap)."""
    s1, y = _NORMALIZE[kind]
    return CLUSTER_PRELUDE + _KERNEL.substitute(name=name, params=params, out_t=out_t, loads=loads,
                                                pro_call=pro_call, e_loads=e_loads, epi=epi, s1=s1, y=y,
                                                minb=5 if plain else 4)


def cluster_launch(name: str, args: str, shape: ClusterShape, nin: int) -> str:
    """Launcher code: the cluster kernel when the plan is column tiles, the operands were described
    for 16-byte accesses, R fits MAX_CLUSTER CTAs and the device has clusters (sm_90+); otherwise
    it falls through to the shared-memory column tiles.  A refused cluster launch falls through
    too, its error cleared."""
    width = shape.vec * shape.txv
    return Template(
        """  if (plan.path == KS_PATH_COLS && vec == ${vec} && R <= ${max_rows}LL &&
      ks_device_attr<cudaDevAttrComputeCapabilityMajor>(0) >= 9) {
    const int C = (int)ks_cdiv(R, ${rows_per_cta});
    const int64_t ctas = outer * ks_cdiv(inner, ${width}) * C;
    if (ctas <= 0x7fffffffLL) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)ctas);
      cfg.blockDim = dim3(${threads});
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = (unsigned)C;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      bool full = true;
      for (int k = 0; k < ${nin}; ++k) full = full && descs[k].mode == KS_FULL;
      const cudaError_t launched = full
          ? cudaLaunchKernelEx(&cfg, ${name}_cluster<${vec}, ${txv}, ${tyr}, ${rpt}, true>, ${args}, o, outer, R, inner)
          : cudaLaunchKernelEx(&cfg, ${name}_cluster<${vec}, ${txv}, ${tyr}, ${rpt}, false>, ${args}, o, outer, R, inner);
      if (launched == cudaSuccess) return;
      (void)cudaGetLastError();  // not left pending: the column tiles below run instead
    }
  }"""
    ).substitute(vec=shape.vec, max_rows=MAX_CLUSTER * shape.rows_per_cta, rows_per_cta=shape.rows_per_cta,
                 width=width, threads=shape.txv * shape.tyr, name=name, txv=shape.txv, tyr=shape.tyr,
                 rpt=shape.rpt, args=args, nin=nin)
