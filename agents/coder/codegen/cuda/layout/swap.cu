
#include "../ks_prelude.cuh"

// ---- {{name}}: NCHW <-> channels-last (NHWC / NDHWC) copies (agents/coder/codegen/layout_swap.py) ----
// Per sample n, src [R, K] -> dst [K, R] (NCHW -> NHWC: R = C, K = S; back: R = S, K = C) through
// 32 x 33 shared-memory tiles, so reads and writes are both coalesced.  A block moves four tiles,
// along the longer of R and K (ALONG_K), so a short channel count wastes no threads; the longer
// side's tiles are grid.x (no limit), the shorter side's grid.y (<= 65535 tiles of 32).
// Min 4 blocks an SM: left free, ptxas held all 16 addresses (122-128 registers, 2 blocks an SM);
// capped, 39-46 registers and no spills.  PyTorch's own copies for these permutations ran at 0.9-1.9 TB/s on the H100 (level2/85's conv output back to
// NCHW: 1.12 ms for 0.52 GB), Inductor's Triton transpose at 3.0 TB/s (2026-11-27 profiles,
// bench/results/2026-11-27-h100-conv-profiles).  T: the element's storage (a copy needs no math).
template <typename T, bool ALONG_K>
__global__ void __launch_bounds__(256, 4) {{name}}_kernel(const T* __restrict__ src, T* __restrict__ dst, const int64_t N,
                                                       const int64_t R, const int64_t K) {
  constexpr int TR = ALONG_K ? 32 : 128, TK = ALONG_K ? 128 : 32;
  __shared__ T tile[4][32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t r0 = (int64_t)(ALONG_K ? blockIdx.y : blockIdx.x) * TR;
  const int64_t k0 = (int64_t)(ALONG_K ? blockIdx.x : blockIdx.y) * TK;
  for (int64_t n = blockIdx.z; n < N; n += gridDim.z) {
    const T* s = src + n * R * K;
    T* d = dst + n * R * K;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t rj = r0 + (ALONG_K ? 0 : 32 * j), kj = k0 + (ALONG_K ? 32 * j : 0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // read along k
        const int64_t r = rj + ty + 8 * i, k = kj + tx;
        if (r < R && k < K) tile[j][ty + 8 * i][tx] = s[r * K + k];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t rj = r0 + (ALONG_K ? 0 : 32 * j), kj = k0 + (ALONG_K ? 32 * j : 0);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // write along r
        const int64_t k = kj + ty + 8 * i, r = rj + tx;
        if (r < R && k < K) d[k * R + r] = tile[j][tx][ty + 8 * i];
      }
    }
    __syncthreads();  // the tile is reused for the next sample
  }
}

// A short side (<= 8: an RGB input's channels to NHWC, a few channels back to NCHW) leaves most
// of a 32 x 33 tile's threads idle (ncu, H100: SqueezeNet's [64, 3, 224, 224] input to NHWC at
// 373 GB/s, 1.04 ms for 77 MB moved), so a thread per element of the long side moves that
// element's `short` values instead: across a warp the reads (one row of the short side at a
// time) and the writes (consecutive runs of `short` values) stay contiguous.
template <typename T, bool SHORT_R>
__global__ void __launch_bounds__(256) {{name}}_short_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                                             const int64_t N, const int64_t R, const int64_t K) {
  const int64_t L = SHORT_R ? K : R;
  const int shorter = (int)(SHORT_R ? R : K);
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const T* s = src + n * R * K;
    T* d = dst + n * R * K;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < L; l += (int64_t)gridDim.x * blockDim.x) {
      T v[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < shorter) v[j] = SHORT_R ? s[j * K + l] : s[l * K + j];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < shorter) {
          if (SHORT_R) d[l * R + j] = v[j]; else d[j * R + l] = v[j];
        }
    }
  }
}

template <typename T>
static void {{name}}_typed(const void* src, void* dst, int64_t N, int64_t R, int64_t K, cudaStream_t stream) {
  if (R <= 8 || K <= 8) {
    const int64_t L = R <= 8 ? K : R;
    const int64_t bx = ks_cdiv(L, 256) < 65535 ? ks_cdiv(L, 256) : 65535;
    const dim3 grid((unsigned)bx, (unsigned)(N < 65535 ? N : 65535));
    if (R <= 8)
      {{name}}_short_kernel<T, true><<<grid, 256, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), N, R, K);
    else
      {{name}}_short_kernel<T, false><<<grid, 256, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), N, R, K);
    return;
  }
  const bool along_k = K >= R;
  const int64_t longer_tiles = along_k ? ks_cdiv(K, 128) : ks_cdiv(R, 128);
  const int64_t shorter_tiles = along_k ? ks_cdiv(R, 32) : ks_cdiv(K, 32);
  const dim3 grid((unsigned)longer_tiles, (unsigned)shorter_tiles, (unsigned)(N < 65535 ? N : 65535));
  if (along_k)
    {{name}}_kernel<T, true><<<grid, 256, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), N, R, K);
  else
    {{name}}_kernel<T, false><<<grid, 256, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), N, R, K);
}

{{launcher_sig}} {
  if (N <= 0 || R <= 0 || K <= 0) return;
  if (elem_bytes == 4) {{name}}_typed<uint32_t>(src, dst, N, R, K, stream);
  else {{name}}_typed<uint16_t>(src, dst, N, R, K, stream);
}

// Whether the kernel takes [N, R, K] -> [N, K, R] (grid.y holds the shorter side's tiles of 32).
{{fits_sig}} {
  const int64_t shorter = R < K ? R : K;
  return (elem_bytes == 4 || elem_bytes == 2) && ks_cdiv(shorter, 32) <= 65535;
}
