#ifndef KS_FASTDIV_H
#define KS_FASTDIV_H
// Division by a run-time constant as a multiply-high and a shift (Granlund & Montgomery's
// round-up method, as PyTorch's IntDivider): the host computes (m, s) once per divisor when it
// describes an operand, and every per-element offset of a broadcast operand costs ~4
// instructions instead of a 32-bit division's ~20 (ks_offset).  Plain C++: the binding (g++)
// computes the magic, the kernels (nvcc) apply it.
#include <stdint.h>

#if defined(__CUDACC__)
#define KS_HD __host__ __device__ __forceinline__
#else
#define KS_HD inline
#endif

struct KsFastDiv {
  uint32_t m;  // magic multiplier; 0: not set (the divisor is out of range or was never described)
  uint32_t s;  // shift: ceil(log2(divisor))
};

// Magic for divisors 1 .. 2^32 - 1; {0, 0} outside.
static inline KsFastDiv ks_fastdiv_make(int64_t d) {
  KsFastDiv f{0u, 0u};
  if (d < 1 || d > (int64_t)0xffffffffLL) return f;
  uint32_t s = 0;
  while (s < 32 && ((uint64_t)1 << s) < (uint64_t)d) ++s;
  const uint64_t m = ((((uint64_t)1 << s) - (uint64_t)d) << 32) / (uint64_t)d + 1;  // < 2^32
  f.m = (uint32_t)m;
  f.s = s;
  return f;
}

// floor(n / d) for every 32-bit n (the sum is taken in 64 bits, so n needs no headroom).
KS_HD uint32_t ks_fastdiv_apply(uint32_t n, KsFastDiv f) {
  const uint32_t t = (uint32_t)(((uint64_t)n * f.m) >> 32);
  return (uint32_t)(((uint64_t)t + n) >> f.s);
}
#endif  // KS_FASTDIV_H
