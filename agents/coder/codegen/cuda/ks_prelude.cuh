#ifndef KS_CUDA_PRELUDE_H
#define KS_CUDA_PRELUDE_H
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "ks_shared_types.h"
#include "ks_operand_read.h"

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
// bool operands (masks) are read as 0 / 1; __ldg has no bool overload: their byte
__device__ __forceinline__ float ks_to_float(bool x) { return x ? 1.0f : 0.0f; }
__device__ __forceinline__ float ks_ld(const bool* p) { return __ldg(reinterpret_cast<const unsigned char*>(p)) ? 1.0f : 0.0f; }

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

// VEC consecutive bools (VEC <= 8: a bool counts as 4 bytes in the vector width, common.py) in
// one 4- or 8-byte load from an address aligned to it.
template <int VEC>
__device__ __forceinline__ void ks_ld_vec(const bool* __restrict__ p, float (&v)[VEC]) {
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "bool vectors of 1, 2, 4 or 8");
  if constexpr (VEC == 4) {
    const unsigned int r = __ldg(reinterpret_cast<const unsigned int*>(p));
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = ((r >> (8 * k)) & 0xffu) ? 1.0f : 0.0f;
  } else if constexpr (VEC == 8) {
    const uint2 r = __ldg(reinterpret_cast<const uint2*>(p));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = ((r.x >> (8 * k)) & 0xffu) ? 1.0f : 0.0f;
      v[k + 4] = ((r.y >> (8 * k)) & 0xffu) ? 1.0f : 0.0f;
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = ks_ld(p + k);
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

// a / b and a % b through the divisor's multiply-shift form when it is set and a < 2^32.
__device__ __forceinline__ int64_t ks_div_by(int64_t a, int64_t b, KsFastDiv f) {
  if (f.m != 0u && ((uint64_t)a >> 32) == 0) return (int64_t)ks_fastdiv_apply((uint32_t)a, f);
  return ks_div(a, b);
}
__device__ __forceinline__ int64_t ks_mod_by(int64_t a, int64_t b, KsFastDiv f) { return a - ks_div_by(a, b, f) * b; }

__device__ __forceinline__ int64_t ks_offset(const KsOperand& d, int64_t i) {
  switch (d.mode) {
    case KS_FULL: return i;
    case KS_SCALAR: return 0;
    case KS_ROW: return ks_mod_by(i, d.mod, d.fmod);
    case KS_CHANNEL:
    case KS_DIVMOD: return ks_mod_by(ks_div_by(i, d.div, d.fdiv), d.mod, d.fmod);
    default: {
      int64_t off = 0;
      for (int k = d.rank - 1; k >= 0; --k) {
        const int64_t s = d.size[k];
        const int64_t q = ks_div_by(i, s, d.fsize[k]);
        off += (i - q * s) * d.stride[k];
        i = q;
      }
      return off;
    }
  }
}

// 4 consecutive elements at q as floats: one 16-byte load for aligned float (pools' per-channel operands).
template <typename T> __device__ __forceinline__ void ks_ld4_consecutive(const T* __restrict__ q, float (&v)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = ks_ld(q + j);
}
__device__ __forceinline__ void ks_ld4_consecutive(const float* __restrict__ q, float (&v)[4]) {
  if ((reinterpret_cast<uintptr_t>(q) & 15u) == 0) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(q));
    v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = __ldg(q + j);
  }
}

// Column i of vals: a per-plane operand's values at the 4 planes plane0..plane0+3 (plane0 % 4 ==
// 0) of an input whose (n, c) planes hold in_plane values (the channels-last pools' 4 channels a
// thread): 4 consecutive values for a per-channel operand (ks_planes4_consecutive), else an offset
// a plane.  The pools computed an offset (two multiply-shift divisions) a plane and operand at
// every output: 20 for RegNet's batch_norm + ReLU prologue (conv bias, mean, rstd, weight, bias)
// before a 2 x 2 window of 4 loads.
template <typename T, int N>
__device__ __forceinline__ void ks_ld_planes4(const T* __restrict__ p, const KsOperand& d, const int64_t plane0,
                                              const int64_t in_plane, float (&vals)[4][N], const int i) {
  float v[4];
  if (ks_planes4_consecutive(d, in_plane)) {
    ks_ld4_consecutive(p + ks_mod_by(plane0, d.mod, d.fmod), v);  // plane0 % mod + j never wraps
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = ks_ld(p + ks_offset(d, (plane0 + j) * in_plane));
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) vals[j][i] = v[j];
}

// The step of an operand's offset per step of r along a column of the [outer, R, inner] view, for
// the operands ks_col_affine accepts (host-checked): full tensors inner, values per reduced index
// ((i / inner) % mod, mod a multiple of R: per channel or per (sample, channel)) 1, values fixed
// within a column 0.
__device__ __forceinline__ int64_t ks_col_step(const KsOperand& d, int64_t inner) {
  if (d.mode == KS_FULL) return inner;
  if ((d.mode == KS_CHANNEL || d.mode == KS_DIVMOD) && d.div == inner) return 1;
  return 0;
}

// VEC elements starting at linear index i (a multiple of VEC) of an operand, as fp32.
template <int VEC, typename T>
__device__ __forceinline__ void ks_load(const T* __restrict__ p, const KsOperand& d, int64_t i, float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = ks_ld(p + ks_offset(d, i));
  } else {
    switch (d.mode) {
      // KS_DIVMOD / KS_STRIDED never reach ks_load in a vector kernel: ks_describe sends such
      // launches to the VEC == 1 kernel, which keeps VEC per-element offset computations (and
      // the register spills they caused) out of the vector path; a KS_STRIDED operand that
      // ks_describe(..., strided_rows) accepts is read by ks_load_strided_rows, never here.
      // `default` shares the full-tensor load so the switch stays well-defined without a code
      // path of its own.
      case KS_FULL:
      default: ks_ld_vec<VEC>(p + i, v); break;
      case KS_ROW: ks_ld_vec<VEC>(p + ks_mod_by(i, d.mod, d.fmod), v); break;
      case KS_SCALAR:
      case KS_CHANNEL: {
        const float x = ks_ld(p + (d.mode == KS_SCALAR ? 0 : ks_mod_by(ks_div_by(i, d.div, d.fdiv), d.mod, d.fmod)));
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = x;
        break;
      }
    }
  }
}

// ks_load, and for an operand of general strides whose VEC consecutive elements are contiguous
// and 16-byte aligned (ks_describe(..., strided_rows): its innermost dim contiguous, a multiple
// of VEC elements long, the other strides multiples of VEC) one offset per VEC elements and a
// vector load: the elementwise kernels' `strided_vec` form (emit_elementwise), for broadcasts such
// as x[..., :, None] - x[..., None, :] that ks_load's vector path sends to the scalar kernel.
template <int VEC, typename T>
__device__ __forceinline__ void ks_load_strided_rows(const T* __restrict__ p, const KsOperand& d, int64_t i,
                                                     float (&v)[VEC]) {
  if constexpr (VEC > 1) {
    if (d.mode == KS_STRIDED) {
      ks_ld_vec<VEC>(p + ks_offset(d, i), v);
      return;
    }
  }
  ks_load<VEC>(p, d, i, v);
}

// Row kernels (a row of R elements at a time) read operands whose offset within the row is
// `base + col` (full rows, vectors over the row: cs = 1) or constant `base` (scalars, per-row
// values); the binding sends every other layout to the tile kernels.  `base` is computed once
// per row, so the unrolled per-element code is one load.
static __device__ __noinline__ int64_t ks_offset_general(const KsOperand& d, int64_t i);
__device__ __forceinline__ int64_t ks_row_base(const KsOperand& d, int64_t row, int64_t R) {
  switch (d.mode) {
    case KS_FULL: return row * R;
    case KS_SCALAR: return 0;
    case KS_ROW: return ks_mod(row * R, d.mod);
    case KS_STRIDED: return ks_offset_general(d, row * R);  // ks_strided_rows: the row's first value, once a row
    default: return ks_mod(ks_div(row * R, d.div), d.mod);
  }
}
template <int VEC, typename T>
__device__ __forceinline__ void ks_load_row(const T* __restrict__ p, const KsOperand& d, int64_t base, int64_t col, float (&v)[VEC]) {
  if (d.mode == KS_FULL || d.mode == KS_ROW || (d.mode == KS_STRIDED && d.stride[d.rank - 1] == 1)) {
    ks_ld_vec<VEC>(p + base + col, v);
  } else {
    const float x = ks_ld(p + base);
#pragma unroll
    for (int k = 0; k < VEC; ++k) v[k] = x;
  }
}

// group_norm's row kernels also read operands that vary inside a row without being contiguous
// there (a per-channel weight over rows of [C / G, S] values, a conv bias in the prologue): base
// -1 marks them, loaded per VEC values from the linear index `row0 + col`.  A separate pair so
// the other kinds' row kernels (under tight register caps) keep the one-load form.
// General strides (KS_STRIDED, whose div and mod are 0) take the per-value path: group_norm's
// channel-span kernels run when the row kernels refuse such an operand, and the per-channel base
// divided by its 0 divisor there (read at a garbage offset).
__device__ __forceinline__ int64_t ks_row_base_any(const KsOperand& d, int64_t row, int64_t R) {
  switch (d.mode) {
    case KS_FULL: return row * R;
    case KS_SCALAR: return 0;
    case KS_ROW: return d.mod % R == 0 ? ks_mod(row * R, d.mod) : -1;
    case KS_STRIDED: return -1;
    default: return d.div % R == 0 ? ks_mod(ks_div(row * R, d.div), d.mod) : -1;
  }
}
// VEC = 1 loads of those: ks_offset with its general-strides loop moved out of line.  Row kernels
// see KS_STRIDED only as ks_strided_rows (a base a row, ks_row_base; the host's ks_row_affine
// sends other strides to the tile kernels), but inlined into
// every unrolled element of every operand that loop was most of ptxas's work: the group_norm
// spec's fourteen kernels took 101 s to compile, 62 s with the call (2 cores, 2026-11-27), at
// the same register counts.  The switch repeats ks_offset's on purpose: ks_offset as a template
// whose general case is inline or a call (one switch) raised those kernels' registers by 6-34
// (ptxas -v, same texts), itself included in kernels that never took the call.
static __device__ __noinline__ int64_t ks_offset_general(const KsOperand& d, int64_t i) { return ks_offset(d, i); }
__device__ __forceinline__ int64_t ks_row_any_offset(const KsOperand& d, int64_t i) {
  switch (d.mode) {
    case KS_FULL: return i;
    case KS_SCALAR: return 0;
    case KS_ROW: return ks_mod_by(i, d.mod, d.fmod);
    case KS_CHANNEL:
    case KS_DIVMOD: return ks_mod_by(ks_div_by(i, d.div, d.fdiv), d.mod, d.fmod);
    default: return ks_offset_general(d, i);
  }
}
template <int VEC, typename T>
__device__ __forceinline__ void ks_load_row_any(const T* __restrict__ p, const KsOperand& d, int64_t base, int64_t row0,
                                                int64_t col, float (&v)[VEC]) {
  if (base >= 0) ks_load_row<VEC>(p, d, base, col, v);
  else if constexpr (VEC == 1) v[0] = ks_ld(p + ks_row_any_offset(d, row0 + col));
  else ks_load<VEC>(p, d, row0 + col, v);  // VEC > 1 only for ROW / CHANNEL: one vector or one channel
}

// ---- math (fp32, PyTorch's formulas) ----
// Division by a normaliser known to lie in [1, 2^24] (a row length, a softmax sum, whose largest
// term is exp(0) = 1): within 2 ulp, and inline, where IEEE `/` calls a slow-path subroutine
// whose calling convention made ptxas spill the register-cached rows.
__device__ __forceinline__ float ks_div_norm(float a, float b) { return __fdividef(a, b); }
__device__ __forceinline__ float ks_max(float a, float b) { return (a > b || a != a) ? a : b; }  // NaN-propagating
__device__ __forceinline__ float ks_min(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ float ks_relu(float x) { return x < 0.f ? 0.f : x; }
// The exp-based activations use the fast intrinsics, as Inductor's Triton kernels do (ex2.approx,
// an approximate divide): __expf is within 2 + 1.2|x| ulp (< 1e-5 relative where the result is a
// normal float), far inside the fp32 tolerance, and the accurate expf + IEEE `/` (about 20 more
// instructions) made a conv + 5-activation epilogue compute-bound on the H100 (level2/7: 0.78 ms
// against Triton's 0.63 for the same bytes).  __fdividef(a, d) is 0 for d > 2^126: exp(-x) there
// is below 2^-126, so sigmoid / silu are 0 within tolerance too.
__device__ __forceinline__ float ks_exp(float x) { return __expf(x); }
__device__ __forceinline__ float ks_sigmoid(float x) { return __fdividef(1.f, 1.f + __expf(-x)); }
__device__ __forceinline__ float ks_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float ks_gelu_tanh(float x) {
  const float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(inner));
}
__device__ __forceinline__ float ks_silu(float x) { return __fdividef(x, 1.f + __expf(-x)); }
__device__ __forceinline__ float ks_softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }  // beta 1, threshold 20
// mish(x) = x tanh(softplus(x)), and tanh(log(1 + e)) = ((1 + e)^2 - 1) / ((1 + e)^2 + 1) =
// n / (n + 2) with n = e (e + 2), e = exp(x): one __expf and an approximate divide where tanhf and
// log1pf cost ~40 instructions a value (level2/87's conv + mish epilogue ran at 55% of DRAM
// bandwidth on the H200 where a cheap epilogue of the same kernel ran at 75%).  Exact algebra; the
// error is __expf's (relative, <= 2 + 1.2|x| ulp) plus a few roundings.  Above PyTorch's softplus
// threshold (20) mish is x, as PyTorch computes it; n <= 2.4e17 there, far under __fdividef's 2^126.
__device__ __forceinline__ float ks_tanh_softplus(float x) {
  if (x > 20.f) return 1.f;  // softplus(x) = x there, and tanh(x > 20) is 1 in fp32
  const float ex = __expf(x), n = ex * (ex + 2.f);
  return __fdividef(n, n + 2.f);
}
__device__ __forceinline__ float ks_mish(float x) { return x > 20.f ? x : x * ks_tanh_softplus(x); }
__device__ __forceinline__ float ks_elu(float x) { return x > 0.f ? x : expm1f(x); }
__device__ __forceinline__ float ks_selu(float x) {
  return 1.0507009873554804934193349852946f * (x > 0.f ? x : 1.6732632423543772848170429916717f * expm1f(x));
}
// / 6 as * (1 / 6): within an ulp, where IEEE `/` is a subroutine call with a slow path.
__device__ __forceinline__ float ks_hardsigmoid(float x) { return fminf(fmaxf(x + 3.f, 0.f), 6.f) * (1.f / 6.f); }
__device__ __forceinline__ float ks_hardswish(float x) { return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) * (1.f / 6.f); }
__device__ __forceinline__ float ks_clamp(float x, float lo, float hi) { return x != x ? x : fminf(fmaxf(x, lo), hi); }
__device__ __forceinline__ float ks_leaky_relu(float x, float s) { return x > 0.f ? x : x * s; }
// log on the fast intrinsic, as ks_exp (lg2.approx * ln 2; CUDA's bound: 2^-21.41 absolute for x in
// [0.5, 2], 3 ulp elsewhere), subnormals supported (no ftz here), log(0) =
// -inf, log(x < 0) = NaN; logf's ~20-instruction polynomial twice a value (kl_div: log(input) and
// target * log(target)) left its row kernel at 66% of DRAM bandwidth on the H100.
// Near 1, where log x is small, that absolute bound is a large relative error (log(1 - p) for a
// small p): logf there.
__device__ __forceinline__ float ks_log(float x) { return (x > 0.75f && x < 1.25f) ? logf(x) : __logf(x); }
// torch.xlogy: 0 where x == 0 (unless y is NaN), else x * log(y) (kl_div's target * log(target)).
__device__ __forceinline__ float ks_xlogy(float x, float y) { return (x == 0.f && y == y) ? 0.f : x * ks_log(y); }

// ---- 3xTF32: an fp32 value as a TF32-exact high part and its remainder ----
// hi = v rounded to TF32 (10 mantissa bits, ties away from zero), lo = v - hi, exact in fp32.  hi is
// exact in TF32, so the rounding a tensor-core kernel applies to its inputs touches lo only.
// Non-finite v: hi = v, lo = 0; a finite v whose rounding overflows keeps its truncation as hi.
__device__ __forceinline__ void ks_split_tf32(const float v, float& hi, float& lo) {
  if (!isfinite(v)) {  // first: a NaN's bits + 0x1000 can wrap to a finite value (0x7FFFFFFF -> -0)
    hi = v;
    lo = 0.0f;
    return;
  }
  const unsigned bits = __float_as_uint(v);
  hi = __uint_as_float((bits + 0x1000u) & 0xFFFFE000u);
  if (!isfinite(hi)) hi = __uint_as_float(bits & 0xFFFFE000u);
  lo = v - hi;
}

// ---- channels-last tiles ----
// The read-layout slots of the channels-last kernels (elementwise/nhwc.cu, reduction/gn_nhwc.cu):
// a block covers 32 channels x TILES * 32 positions; thread (tx: its channel, ty) visits the
// positions sl = 32 * j + ty + 8 * k below npos, fully unrolled, calling f(j, k, sl).
template <int TILES, class F>
__device__ __forceinline__ void ks_tile_slots(int ty, int npos, F&& f) {
#pragma unroll
  for (int j = 0; j < TILES; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int sl = 32 * j + ty + 8 * k;
      if (sl < npos) f(j, k, sl);
    }
  }
}

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

// All-reduce over aligned groups of `width` lanes (a power of two <= 32; xor offsets below it stay
// inside the group).  The default, a whole warp, unrolls once inlined with the constant.
template <class Op>
__device__ __forceinline__ float ks_warp_allreduce(float v, int width = 32) {
#pragma unroll
  for (int m = width / 2; m > 0; m >>= 1) v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, m));
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

// All-reduce over the threads of one row: `lanes` aligned lanes of a warp (WARP) or the whole
// 1-D block.
template <class Op, bool WARP>
__device__ __forceinline__ float ks_row_allreduce(float v, float* smem, int lanes = 32) {
  if constexpr (WARP) return ks_warp_allreduce<Op>(v, lanes);
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
// N values pushed at once (the column-loop kernel's 8 loads in flight).  logsumexp / softmax:
// one max over the chunk, then one rescale of the running sum: N + 1 exponentials where N
// pushes take up to 2N, and no data-dependent branch per value.
// FAST: __expf (the column loop, as the strided clusters: ~2 ulp, no slow path).
template <bool FAST, typename State, int N>
__device__ __forceinline__ void ks_push_n(State& st, const float (&x)[N]) {
#pragma unroll
  for (int u = 0; u < N; ++u) st.push(x[u]);
}
template <bool FAST, int N>
__device__ __forceinline__ void ks_push_n(KsStateLse& st, const float (&x)[N]) {
  float mx = st.m;
#pragma unroll
  for (int u = 0; u < N; ++u) mx = ks_max(mx, x[u]);  // NaN-propagating, like push
  if (mx == -KS_INF) return;  // every value so far -inf: the sum stays 0
  // Equal values count exp(0) = 1 without subtracting: +inf - +inf would make a NaN (push's rule).
  float s = st.m == -KS_INF ? 0.f : (st.m == mx ? st.s : st.s * (FAST ? __expf(st.m - mx) : expf(st.m - mx)));
#pragma unroll
  for (int u = 0; u < N; ++u) s += x[u] == mx ? 1.f : (FAST ? __expf(x[u] - mx) : expf(x[u] - mx));  // exp(-inf) = 0
  st.m = mx;
  st.s = s;
}
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

// N values at once: their mean and M2 (one pass over registers), then one Chan merge -- a
// division per N values instead of per value (group_norm's 16-byte span loads).
template <bool FAST, int N>
__device__ __forceinline__ void ks_push_n(KsStateWelford& st, const float (&x)[N]) {
  if constexpr (N == 1) {
    st.push(x[0]);
  } else {
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < N; ++u) s += x[u];
    const float mean = s * (1.f / N);
    float m2 = 0.f;
#pragma unroll
    for (int u = 0; u < N; ++u) m2 += (x[u] - mean) * (x[u] - mean);
    st.merge(KsStateWelford{mean, m2, (float)N});
  }
}

// Merges the online states of a block down to lane 0 through shared memory `sm`: thread `t`
// holds lane `lane` of `lanes` (a power of two), lanes `stride` threads apart (the tile kernels:
// threads along R; group_norm's span kernels: the whole block).  Every thread calls it: it
// synchronises.
template <typename State>
__device__ __forceinline__ void ks_block_merge(State& st, float (&sm)[State::NF][256], int t, int lane, int lanes,
                                               int stride) {
  {
    float f[State::NF]; st.save(f);
#pragma unroll
    for (int k = 0; k < State::NF; ++k) sm[k][t] = f[k];
  }
  __syncthreads();
  for (int s = lanes / 2; s > 0; s >>= 1) {
    if (lane < s) {
      float f[State::NF];
#pragma unroll
      for (int k = 0; k < State::NF; ++k) f[k] = sm[k][t + s * stride];
      st.merge(State::load(f));
      st.save(f);
#pragma unroll
      for (int k = 0; k < State::NF; ++k) sm[k][t] = f[k];
    }
    __syncthreads();
  }
}

// One spatial dim of a pooling window (torch's bounds): positions lo, lo + step, ... < hi, and
// the count avg_pool divides by with count_include_pad (the window clipped to the padded input).
// KIND: 0 max (dilated), 1 avg, 2 adaptive avg.
struct KsPoolWin { int64_t lo, hi, step, padded; };
template <int KIND>
__device__ __forceinline__ KsPoolWin ks_pool_window(int64_t o, int64_t in, int64_t out, int64_t k, int64_t s,
                                                    int64_t p, int64_t dil) {
  if constexpr (KIND == 2) {
    const int64_t lo = ks_div(o * in, out), hi = ks_div((o + 1) * in + out - 1, out);
    return {lo, hi, 1, hi - lo};
  } else if constexpr (KIND == 1) {
    const int64_t start = o * s - p;
    const int64_t end = start + k < in + p ? start + k : in + p;
    return {start > 0 ? start : 0, end < in ? end : in, 1, end - start};
  } else {
    int64_t start = o * s - p;
    const int64_t end = start + (k - 1) * dil + 1;
    while (start < 0) start += dil;  // the first tap inside the input
    return {start, end < in ? end : in, dil, 0};
  }
}

// The pool kernels' strip forms (a thread pools consecutive output rows; input row i of the
// strip lies i rows below the first output row's window start): whether row i is one of output
// row rr's kh_taps window rows (stride sh, dilation dh).  Closed form, no loop: the callers'
// unrolled loops fold it to a constant (a loop here left the strip kernels' loops rolled).
__host__ __device__ __forceinline__ constexpr bool ks_strip_holds(int i, int rr, int kh_taps, int sh, int dh) {
  return i - rr * sh >= 0 && (i - rr * sh) % dh == 0 && (i - rr * sh) / dh < kh_taps;
}

// The pooled value of a window's accumulated taps: max as it is; avg and adaptive divided as
// torch divides (divisor_override, else the taps in the padded window or in the input).
template <int KIND>
__device__ __forceinline__ float ks_pool_finish(float acc, const KsPoolWin& wd, const KsPoolWin& wh,
                                                const KsPoolWin& ww, const KsPoolGeom& g) {
  if constexpr (KIND == 0) {
    return acc;
  } else {
    const int64_t taps = (wd.hi - wd.lo) * (wh.hi - wh.lo) * (ww.hi - ww.lo);
    const int64_t divide = g.divisor ? g.divisor
        : (KIND == 1 && g.count_include_pad) ? wd.padded * wh.padded * ww.padded : taps;
    return taps > 0 ? acc / (float)divide : 0.f;  // IEEE division, as torch's
  }
}

// ---- asynchronous global -> shared copies (sm_80+): 4 bytes, zero-filled when `valid` is false
// (no byte of src read then; src must still be a mapped address) ----
__device__ __forceinline__ void ks_cp_async4(float* dst, const float* src, bool valid) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// 16 bytes, both addresses 16-byte aligned, bypassing L1 (.cg), zero-filled when `valid` is false
__device__ __forceinline__ void ks_cp_async16(float* dst, const float* src, bool valid) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void ks_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// until at most N of this thread's committed groups are still in flight
template <int N> __device__ __forceinline__ void ks_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Dynamic shared memory past 48 KB for `kernel` on the current device, asked once a device
// (`opted`: the call site's static table, the attribute being per device); whether it was
// granted.  A refusal's error is not left pending for the binding's launch check: the caller
// launches another way, or the launch that needed it fails with its own error.
template <typename K>
static inline bool ks_smem_opt_in(K kernel, int bytes, bool (&opted)[64]) {
  const int dev = ks_device_slot();
  if (!opted[dev]) {
    opted[dev] = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess;
    if (!opted[dev]) (void)cudaGetLastError();
  }
  return opted[dev];
}

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
// A pooling launch: `work` items of a sample along x (grid-stride loops), samples along y so
// the grid fills every SM once.
static inline dim3 ks_pool_grid(int per_sm, int64_t work, int threads, int64_t N) {
  const int64_t full = (int64_t)per_sm * ks_sm_count();
  const int64_t bx = ks_grid(per_sm, ks_cdiv(work, threads));
  int64_t by = full / bx > 1 ? full / bx : 1;
  if (by > N) by = N;
  if (by > 65535) by = 65535;
  return dim3((unsigned)bx, (unsigned)by);
}
#endif  // KS_CUDA_PRELUDE_H
