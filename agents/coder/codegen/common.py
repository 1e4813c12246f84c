"""Shared pieces of every emitted kernel: the CUDA prelude (types, loads/stores, index math, block
reductions, math functions), the torch-side binding prelude, dtype tables, and the assembly of
several `KernelSource`s into the sources of ONE `torch.utils.cpp_extension.load_inline` call.

Both preludes sit under include guards, so any number of kernels can be concatenated into one
translation unit.  The operand descriptor (`KsOperand`) and the reduction plan are plain C++ shared
by the two translation units (the binding computes them with torch, the launcher consumes them).
"""

from __future__ import annotations

import re

from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.plan.kernel_spec import (
    DType,
)

# Storage types, torch scalar types, element sizes.
CUDA_TYPE: dict[str, str] = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16"}
TORCH_DTYPE: dict[str, str] = {"float32": "at::kFloat", "float16": "at::kHalf", "bfloat16": "at::kBFloat16"}
ELEMENT_SIZE: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}

# Compile and link flags the wrapper must pass to load_inline (GEMM bindings call cuBLASLt).
EXTRA_CUDA_CFLAGS: tuple[str, ...] = ("-O3",)
EXTRA_CFLAGS: tuple[str, ...] = ("-O3",)
EXTRA_LDFLAGS: tuple[str, ...] = ("-lcublasLt",)

MAX_RANK = 6  # operand descriptors collapse dims first; more than this falls back to .contiguous()

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_identifier(name: str) -> str:
    """Spec names become C symbols and Python attribute names."""
    if not _IDENT.match(name):
        raise ValueError(f"kernel name {name!r} is not a valid C/Python identifier")
    return name


def vector_width(dtypes: list[DType] | tuple[DType, ...]) -> int:
    """Elements per 16-byte access: set by the narrowest storage type so every operand moves whole
    16-byte chunks (an fp32 operand in a kernel with fp16 operands moves two float4s per step)."""
    return 16 // min(ELEMENT_SIZE[d] for d in dtypes)


# Values a thread of the block path's scalar (VEC == 1) row kernel caches: the kernel's MAXV
# (reduction.py) and the host plan that sizes its blocks (KS_BLOCK_SCALAR_VALUES) both read this.
BLOCK_SCALAR_VALUES = 16

SHARED_TYPES = r"""
#ifndef KS_SHARED_TYPES_H
#define KS_SHARED_TYPES_H
#include <stdint.h>
#include <cuda_runtime_api.h>

#define KS_MAX_RANK 6
#define KS_ROW_CAP 16384   /* longest row the register-cached row kernels take */
#define KS_BLOCK_SCALAR_VALUES @BLOCK_SCALAR_VALUES@  /* values per thread of the block path's VEC == 1 kernel */
#define KS_ROW32_MIN_THREADS 256  /* normalising block rows cache 32 values where that takes >= this many threads */
#define KS_COLS_WIDTH 16  /* inner columns per column-tile block: [R, 16] tiles, several blocks per SM */
#define KS_COLS_STATIC_SMEM 8576  /* the column-tile kernel's static shared memory: part[64][33], res[32] */

// How an operand maps the linear index i of the iteration space (contiguous, row-major) to an
// element offset.  Chosen at run time by the binding from the operand's expanded strides.
enum KsMode : int {
  KS_FULL = 0,     // offset = i                       (same shape, contiguous)
  KS_SCALAR = 1,   // offset = 0                       (one element)
  KS_ROW = 2,      // offset = i % mod                 (vector over trailing dims, 16B-aligned rows)
  KS_CHANNEL = 3,  // offset = (i / div) % mod, div % vec == 0 (per-channel: one value per vector)
  KS_DIVMOD = 4,   // offset = (i / div) % mod         (same, any div)
  KS_STRIDED = 5   // general: collapsed sizes/strides
};

struct KsOperand {
  int mode;
  int rank;
  int64_t div;
  int64_t mod;
  int64_t size[KS_MAX_RANK];
  int64_t stride[KS_MAX_RANK];
};

// Reduction strategy, chosen on the host from the [outer, R, inner] view.
enum KsRedPath : int {
  KS_PATH_ROW_WARP = 0,    // inner == 1, R <= 1024: a warp per row, <= 32 values per lane
  KS_PATH_ROW_BLOCK = 1,   // inner == 1, R <= KS_ROW_CAP: a block (<= 512 threads) per row, <= 32 values per thread
  KS_PATH_TILE = 2,        // anything else: (inner x R-slice) tiles, R split across blocks if needed
  KS_PATH_COLS = 3         // normalising kinds, inner >= 16: a block keeps an [R, 16] tile in shared memory
};

struct KsRedPlan {
  int path;
  int threads_x;        // row: threads per row (block path); tile: threads along inner
  int threads_y;        // tile, cols: threads along R
  int64_t splits;       // tile: blocks along R (partials merged by a finalize kernel when > 1)
  int64_t r_per_split;
  int64_t workspace_floats;
  int row_values;       // row paths: values each thread caches (32, or 16 for normalising rows up to 4096)
};

// The current device's index into the per-device caches below (64 slots).
[[maybe_unused]] static inline int ks_device_slot() {
  int dev = 0;
  cudaGetDevice(&dev);
  return dev >= 0 && dev < 64 ? dev : 0;
}

// An attribute of the current device, queried once per device (per instantiation: one cache per
// attribute); `fallback` where the query fails.
template <cudaDeviceAttr ATTR>
static inline int ks_device_attr(int fallback) {
  static int cached[64] = {0};
  const int dev = ks_device_slot();
  if (cached[dev] == 0) {
    int v = 0;
    cudaDeviceGetAttribute(&v, ATTR, dev);
    cached[dev] = v > 0 ? v : fallback;
  }
  return cached[dev];
}

// Grids are sized from the SM count (no tail effect from too few blocks).
[[maybe_unused]] static inline int ks_sm_count() { return ks_device_attr<cudaDevAttrMultiProcessorCount>(1); }

// Largest dynamic + static shared memory a block may opt in to (227 KB on H100).
[[maybe_unused]] static inline int ks_smem_optin() {
  return ks_device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 * 1024);
}

[[maybe_unused]] static inline int64_t ks_pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

[[maybe_unused]] static inline int64_t ks_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// state_floats: floats per partial state; normalizing: softmax/log_softmax/layer_norm; rows32:
// the kind has the 32-value row kernel on <= 256 threads (4 blocks per SM, 64 registers: softmax
// kinds; layer_norm's weight and bias loads spill there).
[[maybe_unused]] // force_tile: an operand is not row-affine (see ks_row_affine), which only the tile kernels read,
// or the kind has no column-tile kernel.
// sms, smem_optin: the device's SM count and opt-in shared memory per block (ks_sm_count,
// ks_smem_optin), passed in so the plan is a pure function of its arguments.
static inline KsRedPlan ks_plan_reduction(int64_t outer, int64_t R, int64_t inner, int sms, int smem_optin,
                                          int state_floats, bool normalizing, bool rows32, bool force_tile) {
  KsRedPlan p{};
  p.splits = 1;
  p.r_per_split = R;
  if (inner == 1 && R <= KS_ROW_CAP && !force_tile) {
    // Each thread fills its 32 cached values: the most bytes in flight per allocated register.
    // Normalising block rows: 32 values on 256 threads (R in (4096, 8192]) under a 64-register
    // cap, 4 rows per SM; shorter rows (1024, 4096] cache 16 values per thread under a
    // 64-register cap.  Either way several rows per SM overlap one row's reductions and
    // write-back with the next rows' loads.
    const bool take32 = rows32 && R > KS_ROW32_MIN_THREADS * 16 && R <= 256 * 32;
    p.row_values = (normalizing && R > 1024 && R <= 16 * 512 && !take32) ? 16 : 32;
    int64_t tx = R <= 1024 ? 32 : ks_pow2_ceil(ks_cdiv(R, p.row_values));
    if (tx > 512) tx = 512;
    const bool fills_gpu = outer * tx >= (int64_t)sms * 1024;
    if (fills_gpu || R <= 4096) {
      p.path = R <= 1024 ? KS_PATH_ROW_WARP : KS_PATH_ROW_BLOCK;
      p.threads_x = (int)tx;
      p.threads_y = R <= 1024 ? 8 : 1;
      return p;
    }
  }
  // Normalising along a strided dim: the column tile path reads once and writes once (the tile
  // path reads twice), when its [R, KS_COLS_WIDTH] fp32 tile fits in shared memory and the tiles
  // fill the GPU.  Threads along R: R / 32 values each, 128..1024 threads.
  if (normalizing && !force_tile && inner >= 16 && R * KS_COLS_WIDTH * 4 + KS_COLS_STATIC_SMEM <= smem_optin &&
      outer * ks_cdiv(inner, KS_COLS_WIDTH) >= sms) {
    p.path = KS_PATH_COLS;
    p.threads_x = KS_COLS_WIDTH;
    const int64_t ty = ks_pow2_ceil(ks_cdiv(R, 32));
    p.threads_y = (int)(ty < 8 ? 8 : (ty > 64 ? 64 : ty));
    return p;
  }
  p.path = KS_PATH_TILE;
  int64_t txi = inner == 1 ? 1 : (inner >= 32 ? 32 : ks_pow2_ceil(inner));
  int64_t tyr = 256 / txi;
  // Short reductions: give the threads to inner instead of idling along R.
  while (tyr > 1 && tyr / 2 >= R) {
    tyr /= 2;
    if (txi * 2 <= ks_pow2_ceil(inner)) txi *= 2;
  }
  p.threads_x = (int)txi;
  p.threads_y = (int)tyr;
  const int64_t col_blocks = outer * ks_cdiv(inner, txi);
  const int64_t target = (int64_t)sms * 8;
  if (col_blocks < target) {
    int64_t s = ks_cdiv(target, col_blocks);
    const int64_t most = R / (tyr * 8) > 1 ? R / (tyr * 8) : 1;  // >= 8 loads per thread
    if (s > most) s = most;
    if (s > 65535) s = 65535;
    p.r_per_split = ks_cdiv(R, s);
    p.splits = ks_cdiv(R, p.r_per_split);
  }
  const int64_t cols = outer * inner;
  p.workspace_floats = (p.splits > 1 ? p.splits * cols * state_floats : 0) + (normalizing ? cols * 2 : 0);
  return p;
}
#endif  // KS_SHARED_TYPES_H
""".replace("@BLOCK_SCALAR_VALUES@", str(BLOCK_SCALAR_VALUES))

CUDA_PRELUDE = (
    r"""
#ifndef KS_CUDA_PRELUDE_H
#define KS_CUDA_PRELUDE_H
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
"""
    + SHARED_TYPES
    + r"""
#define KS_INF __int_as_float(0x7f800000)
#define KS_NAN __int_as_float(0x7fffffff)

// ---- storage <-> fp32 ----
__device__ __forceinline__ float ks_to_float(float x) { return x; }
__device__ __forceinline__ float ks_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float ks_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T ks_from_float(float x);
template <> __device__ __forceinline__ float ks_from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half ks_from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 ks_from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// ---- 16-byte packs (no address-taking, so values stay in registers) ----
template <typename T> struct KsPack;
template <> struct KsPack<float> {
  static constexpr int N = 4;
  __device__ __forceinline__ static void unpack(const uint4 r, float* v) {
    v[0] = __uint_as_float(r.x); v[1] = __uint_as_float(r.y);
    v[2] = __uint_as_float(r.z); v[3] = __uint_as_float(r.w);
  }
  __device__ __forceinline__ static uint4 pack(const float* v) {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  }
};
__device__ __forceinline__ uint32_t ks_pack2(__half a, __half b) {
  return (uint32_t)__half_as_ushort(a) | ((uint32_t)__half_as_ushort(b) << 16);
}
__device__ __forceinline__ uint32_t ks_pack2(__nv_bfloat16 a, __nv_bfloat16 b) {
  return (uint32_t)__bfloat16_as_ushort(a) | ((uint32_t)__bfloat16_as_ushort(b) << 16);
}
__device__ __forceinline__ float ks_half_lo(uint32_t w, const __half*) { return __half2float(__ushort_as_half((unsigned short)(w & 0xffffu))); }
__device__ __forceinline__ float ks_half_hi(uint32_t w, const __half*) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }
__device__ __forceinline__ float ks_half_lo(uint32_t w, const __nv_bfloat16*) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w & 0xffffu))); }
__device__ __forceinline__ float ks_half_hi(uint32_t w, const __nv_bfloat16*) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w >> 16))); }
template <typename H> struct KsPack16 {
  static constexpr int N = 8;
  __device__ __forceinline__ static void unpack(const uint4 r, float* v) {
    const H* tag = nullptr;
    v[0] = ks_half_lo(r.x, tag); v[1] = ks_half_hi(r.x, tag); v[2] = ks_half_lo(r.y, tag); v[3] = ks_half_hi(r.y, tag);
    v[4] = ks_half_lo(r.z, tag); v[5] = ks_half_hi(r.z, tag); v[6] = ks_half_lo(r.w, tag); v[7] = ks_half_hi(r.w, tag);
  }
  __device__ __forceinline__ static uint4 pack(const float* v) {
    return make_uint4(ks_pack2(ks_from_float<H>(v[0]), ks_from_float<H>(v[1])), ks_pack2(ks_from_float<H>(v[2]), ks_from_float<H>(v[3])),
                      ks_pack2(ks_from_float<H>(v[4]), ks_from_float<H>(v[5])), ks_pack2(ks_from_float<H>(v[6]), ks_from_float<H>(v[7])));
  }
};
template <> struct KsPack<__half> : KsPack16<__half> {};
template <> struct KsPack<__nv_bfloat16> : KsPack16<__nv_bfloat16> {};

template <typename T> __device__ __forceinline__ float ks_ld(const T* p) { return ks_to_float(__ldg(p)); }

// VEC consecutive elements from a 16-byte aligned address: VEC / (16 / sizeof(T)) uint4 loads.
template <int VEC, typename T>
__device__ __forceinline__ void ks_ld_vec(const T* __restrict__ p, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = ks_ld(p);
  } else {
    constexpr int PER = KsPack<T>::N;
    static_assert(VEC % PER == 0, "vector width must be a multiple of the 16-byte pack");
#pragma unroll
    for (int c = 0; c < VEC / PER; ++c) {
      const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p) + c);
      KsPack<T>::unpack(raw, v + c * PER);
    }
  }
}

template <int VEC, typename T>
__device__ __forceinline__ void ks_st_vec(T* __restrict__ p, const float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    *p = ks_from_float<T>(v[0]);
  } else {
    constexpr int PER = KsPack<T>::N;
    static_assert(VEC % PER == 0, "vector width must be a multiple of the 16-byte pack");
#pragma unroll
    for (int c = 0; c < VEC / PER; ++c) reinterpret_cast<uint4*>(p)[c] = KsPack<T>::pack(v + c * PER);
  }
}

// ---- index math: 64-bit indices, 32-bit division when both operands fit (the common case) ----
// The 64-bit path (tensors past 2^32 elements) refines a float-reciprocal estimate: inline code,
// unlike the int64/double division subroutines whose calls force register spills in ptxas.
__device__ __forceinline__ int64_t ks_div_slow(int64_t a, int64_t b) {  // a >= 0, b > 0
  const float rb = __fdividef(1.0f, (float)b);  // an estimate: refined below
  int64_t q = (int64_t)((float)a * rb);
#pragma unroll
  for (int k = 0; k < 3; ++k) q += (int64_t)((float)(a - q * b) * rb);
  // Now |q - a/b| <= 1 (host-checked on 4e7 random pairs with rb off by 2 ulp either way).
  // Fixed if-steps, not loops: nvcc turns a correction loop back into a 64-bit division call.
  int64_t r = a - q * b;
  if (r < 0) { --q; r += b; }
  if (r < 0) { --q; r += b; }
  if (r >= b) { ++q; r -= b; }
  if (r >= b) { ++q; r -= b; }
  return q;
}
__device__ __forceinline__ int64_t ks_div(int64_t a, int64_t b) {
  if ((((uint64_t)a) | ((uint64_t)b)) >> 32 == 0) return (int64_t)((uint32_t)a / (uint32_t)b);
  return ks_div_slow(a, b);
}
__device__ __forceinline__ int64_t ks_mod(int64_t a, int64_t b) {
  if ((((uint64_t)a) | ((uint64_t)b)) >> 32 == 0) return (int64_t)((uint32_t)a % (uint32_t)b);
  return a - ks_div_slow(a, b) * b;
}

__device__ __forceinline__ int64_t ks_offset(const KsOperand& d, int64_t i) {
  switch (d.mode) {
    case KS_FULL: return i;
    case KS_SCALAR: return 0;
    case KS_ROW: return ks_mod(i, d.mod);
    case KS_CHANNEL:
    case KS_DIVMOD: return ks_mod(ks_div(i, d.div), d.mod);
    default: {
      int64_t off = 0;
      for (int k = d.rank - 1; k >= 0; --k) {
        const int64_t s = d.size[k];
        const int64_t q = ks_div(i, s);
        off += (i - q * s) * d.stride[k];
        i = q;
      }
      return off;
    }
  }
}

// VEC elements starting at linear index i (a multiple of VEC) of an operand, as fp32.
template <int VEC, typename T>
__device__ __forceinline__ void ks_load(const T* __restrict__ p, const KsOperand& d, int64_t i, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = ks_ld(p + ks_offset(d, i));
  } else {
    switch (d.mode) {
      // KS_DIVMOD / KS_STRIDED never reach a vector kernel: ks_describe sends such launches to
      // the VEC == 1 kernel, which keeps VEC per-element offset computations (and the register
      // spills they caused) out of the vector path.  `default` shares the full-tensor load so
      // the switch stays well-defined without a code path of its own.
      case KS_FULL:
      default: ks_ld_vec<VEC>(p + i, v); break;
      case KS_ROW: ks_ld_vec<VEC>(p + ks_mod(i, d.mod), v); break;
      case KS_SCALAR:
      case KS_CHANNEL: {
        const float x = ks_ld(p + (d.mode == KS_SCALAR ? 0 : ks_mod(ks_div(i, d.div), d.mod)));
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = x;
        break;
      }
    }
  }
}

// Row kernels (a row of R elements at a time) read operands whose offset within the row is
// `base + col` (full rows, vectors over the row: cs = 1) or constant `base` (scalars, per-row
// values); the binding sends every other layout to the tile kernels.  `base` is computed once
// per row, so the unrolled per-element code is one load.
__device__ __forceinline__ int64_t ks_row_base(const KsOperand& d, int64_t row, int64_t R) {
  switch (d.mode) {
    case KS_FULL: return row * R;
    case KS_SCALAR: return 0;
    case KS_ROW: return ks_mod(row * R, d.mod);
    default: return ks_mod(ks_div(row * R, d.div), d.mod);
  }
}
template <int VEC, typename T>
__device__ __forceinline__ void ks_load_row(const T* __restrict__ p, const KsOperand& d, int64_t base, int64_t col, float (&v)[VEC]) {
  if (d.mode == KS_FULL || d.mode == KS_ROW) {
    ks_ld_vec<VEC>(p + base + col, v);
  } else {
    const float x = ks_ld(p + base);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = x;
  }
}

// ---- math (fp32, PyTorch's formulas) ----
// Division by a normaliser known to lie in [1, 2^24] (a row length, a softmax sum, whose largest
// term is exp(0) = 1): within 2 ulp, and inline, where IEEE `/` calls a slow-path subroutine
// whose calling convention made ptxas spill the register-cached rows.
__device__ __forceinline__ float ks_div_norm(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ float ks_max(float a, float b) { return (a > b || a != a) ? a : b; }  // NaN-propagating
__device__ __forceinline__ float ks_min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ float ks_relu(float x) { return x < 0.f ? 0.f : x; }
__device__ __forceinline__ float ks_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float ks_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float ks_gelu_tanh(float x) {
  const float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(inner));
}
__device__ __forceinline__ float ks_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float ks_softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }  // beta 1, threshold 20
__device__ __forceinline__ float ks_mish(float x) { return x * tanhf(ks_softplus(x)); }
__device__ __forceinline__ float ks_elu(float x) { return x > 0.f ? x : expm1f(x); }
__device__ __forceinline__ float ks_selu(float x) {
  return 1.0507009873554804934193349852946f * (x > 0.f ? x : 1.6732632423543772848170429916717f * expm1f(x));
}
__device__ __forceinline__ float ks_hardsigmoid(float x) { return fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f; }
__device__ __forceinline__ float ks_hardswish(float x) { return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f; }
__device__ __forceinline__ float ks_clamp(float x, float lo, float hi) { return x != x ? x : fminf(fmaxf(x, lo), hi); }
__device__ __forceinline__ float ks_leaky_relu(float x, float s) { return x > 0.f ? x : x * s; }

// ---- reductions ----
struct KsOpSum {
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
  __device__ __forceinline__ static float identity() { return 0.f; }
};
struct KsOpMax {
  __device__ __forceinline__ static float apply(float a, float b) { return ks_max(a, b); }
  __device__ __forceinline__ static float identity() { return -KS_INF; }
};
struct KsOpMin {
  __device__ __forceinline__ static float apply(float a, float b) { return ks_min(a, b); }
  __device__ __forceinline__ static float identity() { return KS_INF; }
};

template <class Op, int WIDTH = 32>
__device__ __forceinline__ float ks_warp_allreduce(float v) {
#pragma unroll
  for (int m = WIDTH / 2; m > 0; m >>= 1) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Block-wide all-reduce over a 1-D block (blockDim.x a multiple of 32); smem holds >= 33 floats.
template <class Op>
__device__ __forceinline__ float ks_block_allreduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = ks_warp_allreduce<Op>(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < nwarps ? smem[lane] : Op::identity();
    w = ks_warp_allreduce<Op>(w);
    if (lane == 0) smem[32] = w;
  }
  __syncthreads();
  return smem[32];
}

// All-reduce over the threads of one row: a warp (WARP) or the whole 1-D block.
template <class Op, bool WARP>
__device__ __forceinline__ float ks_row_allreduce(float v, float* smem) {
  if constexpr (WARP) return ks_warp_allreduce<Op>(v);
  else return ks_block_allreduce<Op>(v, smem);
}

// All-reduce down the columns of a (TX, TY) block (TX <= 32, TY <= 64, TX * TY a multiple of 32):
// warp w combines columns w, w + nwarps, ... (lanes walk the rows).  Returns the column's result
// to every thread of it.
template <class Op>
__device__ __forceinline__ float ks_col_allreduce(float v, float (*part)[33], float* res) {
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
  const int t = ty * TX + tx, lane = t & 31, warp = t >> 5, nwarps = (TX * TY) >> 5;
  part[ty][tx] = v;
  __syncthreads();
  for (int c = warp; c < TX; c += nwarps) {  // warp-uniform
    float w = Op::identity();
    for (int r = lane; r < TY; r += 32) w = Op::apply(w, part[r][c]);
    w = ks_warp_allreduce<Op>(w);
    if (lane == 0) res[c] = w;
  }
  __syncthreads();
  return res[tx];
}

// Online states for the tiled / split reductions: push one value, merge two partial states.
struct KsStateSum {
  static constexpr int NF = 1;
  float a;
  __device__ __forceinline__ static KsStateSum init() { return {0.f}; }
  __device__ __forceinline__ void push(float x) { a += x; }
  __device__ __forceinline__ void merge(const KsStateSum& o) { a += o.a; }
  __device__ __forceinline__ void save(float* p) const { p[0] = a; }
  __device__ __forceinline__ static KsStateSum load(const float* p) { return {p[0]}; }
};
struct KsStateMax {
  static constexpr int NF = 1;
  float a;
  __device__ __forceinline__ static KsStateMax init() { return {-KS_INF}; }
  __device__ __forceinline__ void push(float x) { a = ks_max(a, x); }
  __device__ __forceinline__ void merge(const KsStateMax& o) { a = ks_max(a, o.a); }
  __device__ __forceinline__ void save(float* p) const { p[0] = a; }
  __device__ __forceinline__ static KsStateMax load(const float* p) { return {p[0]}; }
};
struct KsStateMin {
  static constexpr int NF = 1;
  float a;
  __device__ __forceinline__ static KsStateMin init() { return {KS_INF}; }
  __device__ __forceinline__ void push(float x) { a = ks_min(a, x); }
  __device__ __forceinline__ void merge(const KsStateMin& o) { a = ks_min(a, o.a); }
  __device__ __forceinline__ void save(float* p) const { p[0] = a; }
  __device__ __forceinline__ static KsStateMin load(const float* p) { return {p[0]}; }
};
// Online max + sum of exp(x - max): logsumexp / softmax statistics in one pass.
struct KsStateLse {
  static constexpr int NF = 2;
  float m, s;
  __device__ __forceinline__ static KsStateLse init() { return {-KS_INF, 0.f}; }
  __device__ __forceinline__ void push(float x) {
    if (x > m) { s = s * expf(m - x) + 1.f; m = x; }
    else { s += (x == -KS_INF) ? 0.f : expf(x - m); }
  }
  __device__ __forceinline__ void merge(const KsStateLse& o) {
    if (o.m > m) { s = s * expf(m - o.m) + o.s; m = o.m; }
    else if (o.m != -KS_INF) { s += o.s * expf(o.m - m); }
  }
  __device__ __forceinline__ void save(float* p) const { p[0] = m; p[1] = s; }
  __device__ __forceinline__ static KsStateLse load(const float* p) { return {p[0], p[1]}; }
};
// Welford mean / M2 with Chan's merge: layer_norm statistics in fp32 without cancellation.
struct KsStateWelford {
  static constexpr int NF = 3;
  float mean, m2, n;
  __device__ __forceinline__ static KsStateWelford init() { return {0.f, 0.f, 0.f}; }
  __device__ __forceinline__ void push(float x) {
    n += 1.f;
    const float d = x - mean;
    mean += ks_div_norm(d, n);  // n >= 1: a count
    m2 += d * (x - mean);
  }
  __device__ __forceinline__ void merge(const KsStateWelford& o) {
    if (o.n == 0.f) return;
    if (n == 0.f) { *this = o; return; }
    const float nt = n + o.n, d = o.mean - mean, f = ks_div_norm(o.n, nt);
    mean += d * f;
    m2 += o.m2 + d * d * n * f;
    n = nt;
  }
  __device__ __forceinline__ void save(float* p) const { p[0] = mean; p[1] = m2; p[2] = n; }
  __device__ __forceinline__ static KsStateWelford load(const float* p) { return {p[0], p[1], p[2]}; }
};

// Resident blocks per SM for a kernel (launchers cache it in a static): grids are sized to fill
// every SM exactly once with grid-stride loops, never more than the work needs.
template <typename K>
static inline int ks_blocks_per_sm(K kernel, int threads, size_t smem = 0) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess || per_sm < 1) per_sm = 1;
  return per_sm;
}
static inline int64_t ks_grid(int per_sm, int64_t work_blocks) {
  const int64_t full = (int64_t)per_sm * ks_sm_count();
  if (work_blocks < 1) work_blocks = 1;
  return work_blocks < full ? work_blocks : full;
}
#endif  // KS_CUDA_PRELUDE_H
"""
)

BINDING_PRELUDE = (
    r"""
#ifndef KS_BINDING_PRELUDE_H
#define KS_BINDING_PRELUDE_H
// Only what the bindings use: <torch/extension.h> (the whole C++ frontend) doubled the g++ time.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ExpandUtils.h>
#include <torch/csrc/utils/pybind.h>  // pybind11 + the at::Tensor casters (PYBIND11_MODULE)
#include <torch/csrc/Exceptions.h>    // torch::wrap_pybind_function (load_inline's m.def)
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <string>
#include <vector>
"""
    + SHARED_TYPES
    + r"""
// Numbers enter error messages as strings.  On the H100 image (torch 2.11, CUDA 13) an
// integer streamed into a TORCH_CHECK message from this extension segfaulted inside
// std::ostream (the extension's own num_put code against the process's locale); strings and
// c10's own printers did not.
static inline std::string ks_str(int64_t v) { return std::to_string(v); }
static inline std::string ks_str(c10::IntArrayRef dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

static inline void ks_check_tensor(const at::Tensor& t, const char* name, at::ScalarType dtype,
                                   const at::Device& device) {
  TORCH_CHECK(t.defined(), name, ": undefined tensor");
  TORCH_CHECK(t.is_cuda(), name, ": expected a CUDA tensor, got ", t.device());
  TORCH_CHECK(t.device() == device, name, ": expected device ", device, ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == dtype, name, ": expected dtype ", dtype, ", got ", t.scalar_type());
}

static inline std::vector<int64_t> ks_broadcast_shape(const std::vector<at::Tensor>& ts) {
  std::vector<int64_t> shape;
  for (const auto& t : ts) {
    auto s = at::infer_size_dimvector(c10::IntArrayRef(shape), t.sizes());
    shape.assign(s.begin(), s.end());
  }
  return shape;
}

static inline bool ks_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Describes how tensor t, broadcast to `shape` (the contiguous iteration space), is read.
// Returns false when t is a full-size operand that is not 16-byte aligned (then vec must be 1).
// `t` may be replaced by a contiguous copy when its collapsed rank exceeds KS_MAX_RANK.
static inline bool ks_describe(at::Tensor& t, c10::IntArrayRef shape, int vec, KsOperand& d) {
  d = KsOperand{};
  at::Tensor e = t.expand(shape);
  int64_t sizes[64], strides[64];
  int r = 0;
  int64_t n = 1;
  for (int64_t k = 0; k < e.dim(); ++k) {
    n *= e.size(k);
    if (e.size(k) == 1) continue;
    const int64_t sz = e.size(k), st = e.stride(k);
    if (r > 0 && strides[r - 1] == st * sz) { sizes[r - 1] *= sz; strides[r - 1] = st; }
    else { sizes[r] = sz; strides[r] = st; ++r; }
  }
  int nonzero = 0, nz_at = -1;
  for (int k = 0; k < r; ++k) if (strides[k] != 0) { ++nonzero; nz_at = k; }
  if (nonzero == 0) { d.mode = KS_SCALAR; return true; }
  if (r == 1 && strides[0] == 1 && sizes[0] == n) {
    d.mode = KS_FULL;
    return vec == 1 || ks_aligned16(t.data_ptr());
  }
  if (nonzero == 1 && strides[nz_at] == 1) {
    int64_t div = 1;
    for (int k = nz_at + 1; k < r; ++k) div *= sizes[k];
    d.div = div;
    d.mod = sizes[nz_at];
    if (div == 1 && d.mod % vec == 0 && (vec == 1 || ks_aligned16(t.data_ptr()))) d.mode = KS_ROW;
    else if (div % vec == 0) d.mode = KS_CHANNEL;
    else { d.mode = KS_DIVMOD; return vec == 1; }  // per-element div/mod: scalar kernel only
    return true;
  }
  if (r > KS_MAX_RANK) {  // rare: materialise the broadcast, then it is a full operand
    t = e.contiguous();
    d.mode = KS_FULL;
    return vec == 1 || ks_aligned16(t.data_ptr());
  }
  d.mode = KS_STRIDED;
  d.rank = r;
  for (int k = 0; k < r; ++k) { d.size[k] = sizes[k]; d.stride[k] = strides[k]; }
  return vec == 1;  // general strides: scalar kernel only (see ks_load)
}

// Describes every operand for width `vec`, falling back to vec = 1 when a full-size operand is
// misaligned (e.g. a view x[1:]).  Returns the width used.
static inline int ks_describe_all(std::vector<at::Tensor*> ts, std::vector<c10::IntArrayRef> shapes,
                                  int vec, KsOperand* descs) {
  bool ok = true;
  for (size_t k = 0; k < ts.size(); ++k) ok = ks_describe(*ts[k], shapes[k], vec, descs[k]) && ok;
  if (ok || vec == 1) return vec;
  for (size_t k = 0; k < ts.size(); ++k) ks_describe(*ts[k], shapes[k], 1, descs[k]);
  return 1;
}
// The index of the first full-size operand stored channels-last (logically [N, C, S...], dense in
// [N, S..., C] order, C > 1, not also contiguous), for the elementwise kernels' tiled transpose
// path; -1 if none, or if the tiled grid (S / 32, C / 32, N) would not fit.
static inline int ks_channels_last_operand(std::vector<at::Tensor*> ts, c10::IntArrayRef shape) {
  const int64_t d = (int64_t)shape.size();
  if (d < 3 || d > 5) return -1;
  int64_t S = 1;
  for (int64_t k = 2; k < d; ++k) S *= shape[k];
  if (shape[1] <= 1 || S <= 1 || shape[0] > 65535 || ks_cdiv(shape[1], 32) > 65535 ||
      ks_cdiv(S, 32) > 0x7fffffffLL) return -1;
  for (size_t i = 0; i < ts.size(); ++i) {
    const at::Tensor& t = *ts[i];
    if (t.dim() != d || t.sizes() != shape || t.is_contiguous() || t.stride(1) != 1) continue;
    int64_t expect = shape[1];
    bool dense = true;
    for (int64_t k = d - 1; k >= 2; --k) {
      if (shape[k] != 1 && t.stride(k) != expect) dense = false;
      expect *= shape[k];
    }
    if (dense && (shape[0] == 1 || t.stride(0) == expect)) return (int)i;
  }
  return -1;
}
// Whether the row kernels can read this operand (offset within a row = base + col, or constant).
static inline bool ks_row_affine(const KsOperand& d, int64_t R) {
  switch (d.mode) {
    case KS_FULL: case KS_SCALAR: return true;
    case KS_ROW: return d.mod % R == 0;
    case KS_CHANNEL: case KS_DIVMOD: return d.div % R == 0;
    default: return false;
  }
}
#endif  // KS_BINDING_PRELUDE_H
"""
)


def build_extension_sources(kernels: list[KernelSource]) -> tuple[str, str, list[str]]:
    """(cpp source, cuda source, function names) for one load_inline call over all kernels.

    The cpp source is the binding prelude, every launcher prototype, then every binding; the cuda
    source concatenates the kernels' cuda texts (each starts with the guarded CUDA prelude).
    """
    names = [k.function for k in kernels]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"duplicate kernel names: {dupes}")
    cpp = "\n".join([BINDING_PRELUDE] + [k.launcher_decl for k in kernels] + [k.binding for k in kernels])
    cuda = "\n".join(k.cuda for k in kernels)
    return cpp, cuda, names
