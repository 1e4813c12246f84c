
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

// 4-element vectors (16 bytes of fp32, 8 of fp16) on both sides, where R and K are multiples of 4
// and both base addresses aligned: an [TR, TK] tile (TR * TK = 4096) is read as rows of vectors
// along K, staged in shared memory, and written as rows of vectors along R.  H200 profiles
// (bench/results/2026-11-28-h200x4-levels-s21): the 32 x 33 kernel above moved level2/54's
// [64, 64, 256, 256] input to NHWC at 2.9 TB/s and level2/25's 16-channel one at 1.9 TB/s,
// where Inductor's Triton transpose ran both at 4.2 TB/s; a scalar 4-byte access a thread per
// step keeps too few bytes in flight.  The short side's tile is 16, 32 or 64 (the smallest that
// holds it), so 16 channels waste no threads; tiles are walked by one 1-D grid-stride loop.
template <typename T> struct KsVec4;
template <> struct KsVec4<uint32_t> { using type = uint4; };
template <> struct KsVec4<uint16_t> { using type = ushort4; };

template <typename T, int TR, int TK>
__global__ void __launch_bounds__(256) {{name}}_vec_kernel(const T* __restrict__ src, T* __restrict__ dst,
                                                           const int64_t N, const int64_t R, const int64_t K) {
  static_assert(TR * TK == 4096, "a tile is 4096 elements: 4 vectors a thread each way");
  using V = typename KsVec4<T>::type;
  // odd row stride: the column accesses spread over the banks (2- to 4-way conflicts by tile shape,
  // a shared-memory cost far under the tile's DRAM traffic)
  __shared__ T tile[TR][TK + 1];
  const int64_t r_tiles = (R + TR - 1) / TR, k_tiles = (K + TK - 1) / TK, tiles = N * r_tiles * k_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t kt = t % k_tiles, rest = t / k_tiles;
    const int64_t r0 = (rest % r_tiles) * TR, k0 = kt * TK, n = rest / r_tiles;
    const T* __restrict__ s = src + n * R * K;
    T* __restrict__ d = dst + n * R * K;
    V v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // read along k: every load first
      const int e = threadIdx.x + 256 * i, r = e / (TK / 4), k = (e % (TK / 4)) * 4;
      if (r0 + r < R && k0 + k < K) v[i] = *reinterpret_cast<const V*>(s + (r0 + r) * K + k0 + k);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = threadIdx.x + 256 * i, r = e / (TK / 4), k = (e % (TK / 4)) * 4;
      if (r0 + r < R && k0 + k < K) {
        tile[r][k] = v[i].x; tile[r][k + 1] = v[i].y; tile[r][k + 2] = v[i].z; tile[r][k + 3] = v[i].w;
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // write along r
      const int e = threadIdx.x + 256 * i, k = e / (TR / 4), r = (e % (TR / 4)) * 4;
      if (k0 + k < K && r0 + r < R) {
        V w;
        w.x = tile[r][k]; w.y = tile[r + 1][k]; w.z = tile[r + 2][k]; w.w = tile[r + 3][k];
        *reinterpret_cast<V*>(d + (k0 + k) * R + r0 + r) = w;
      }
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

// The short side (S = 3, 4 or 8: an RGB input to NHWC, 8 channels back and forth) with 4-byte
// elements and the long side a multiple of 4.  A thread moves 4 positions (a quad): S vectors in
// along the long side, transposed in registers.  The interleaved side of a block's 256 quads is one
// contiguous run of 256 * S vectors (quad i of the flattened [N, L / 4] sits at 4 * S * i there,
// across samples too), so it goes through shared memory and every warp instruction on that side
// moves 512 contiguous bytes.  The first form stored each thread's S vectors straight to global
// memory, 16 bytes a lane at a 16 * S-byte stride: level2/67's [128, 8, 256, 256] input went to
// NHWC at 1.46 TB/s on the H200 (bench/results/2026-12-06-h100-s23), Triton's kernel at 4.3.
// Shared-memory slots are XOR-swizzled within groups of 8 vectors for S = 4 and 8 (thread t's
// vector m at slot t * S + m: every quarter-warp would hit one bank group), identity for S = 3
// (an odd stride is conflict-free).  SHORT_R: src [S, L] -> dst [L, S]; else src [L, S] -> dst [S, L].
template <int S>
__device__ __forceinline__ int {{name}}_slot(int v) {
  return (S & (S - 1)) == 0 ? v ^ ((v >> 3) & 7) : v;
}

template <int S, bool SHORT_R>
__global__ void __launch_bounds__(256, 4) {{name}}_short4_kernel(const uint32_t* __restrict__ src,
                                                              uint32_t* __restrict__ dst, const int64_t N,
                                                              const int64_t L) {
  __shared__ uint4 stage[256 * S];
  const int64_t quads = L / 4, total = N * quads;
  const int t = threadIdx.x;
  for (int64_t i0 = (int64_t)blockIdx.x * 256; i0 < total; i0 += (int64_t)gridDim.x * 256) {
    const int count = (int)(total - i0 < 256 ? total - i0 : 256);  // quads in this tile
    const int64_t i = i0 + t, n = i / quads, q = i - n * quads;
    // the interleaved side of this tile: 256 * S vectors from vector S * i0 on
    const uint4* __restrict__ inter_src = reinterpret_cast<const uint4*>(src) + S * i0;
    uint4* __restrict__ inter_dst = reinterpret_cast<uint4*>(dst) + S * i0;
    uint32_t x[S][4];  // x[j][p]: channel j of position 4q + p
    if constexpr (SHORT_R) {
      if (t < count) {
#pragma unroll
        for (int j = 0; j < S; ++j) {
          const uint4 a = *reinterpret_cast<const uint4*>(src + (n * S + j) * L + 4 * q);
          x[j][0] = a.x; x[j][1] = a.y; x[j][2] = a.z; x[j][3] = a.w;
        }
#pragma unroll
        for (int m = 0; m < S; ++m)  // value e of the quad's 4S: channel e % S of position e / S
          stage[{{name}}_slot<S>(t * S + m)] =
              make_uint4(x[(4 * m) % S][(4 * m) / S], x[(4 * m + 1) % S][(4 * m + 1) / S],
                         x[(4 * m + 2) % S][(4 * m + 2) / S], x[(4 * m + 3) % S][(4 * m + 3) / S]);
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < S; ++k) {
        const int v = 256 * k + t;
        if (v < count * S) inter_dst[v] = stage[{{name}}_slot<S>(v)];
      }
    } else {
#pragma unroll
      for (int k = 0; k < S; ++k) {
        const int v = 256 * k + t;
        if (v < count * S) stage[{{name}}_slot<S>(v)] = inter_src[v];
      }
      __syncthreads();
      if (t < count) {
#pragma unroll
        for (int m = 0; m < S; ++m) {
          const uint4 a = stage[{{name}}_slot<S>(t * S + m)];
          x[(4 * m) % S][(4 * m) / S] = a.x;
          x[(4 * m + 1) % S][(4 * m + 1) / S] = a.y;
          x[(4 * m + 2) % S][(4 * m + 2) / S] = a.z;
          x[(4 * m + 3) % S][(4 * m + 3) / S] = a.w;
        }
#pragma unroll
        for (int j = 0; j < S; ++j)
          *reinterpret_cast<uint4*>(dst + (n * S + j) * L + 4 * q) = make_uint4(x[j][0], x[j][1], x[j][2], x[j][3]);
      }
    }
    __syncthreads();  // the stage is refilled by the next tile
  }
}

template <typename T, int TR, int TK>
static void {{name}}_vec_launch(const void* src, void* dst, int64_t N, int64_t R, int64_t K, cudaStream_t stream) {
  static const int per_sm = ks_blocks_per_sm({{name}}_vec_kernel<T, TR, TK>, 256);
  const int64_t tiles = N * ks_cdiv(R, TR) * ks_cdiv(K, TK);
  {{name}}_vec_kernel<T, TR, TK><<<(unsigned)ks_grid(per_sm, tiles), 256, 0, stream>>>(
      static_cast<const T*>(src), static_cast<T*>(dst), N, R, K);
}

template <int S>
static void {{name}}_short4_launch(const void* src, void* dst, int64_t N, int64_t R, int64_t K, cudaStream_t stream) {
  const int64_t L = R == S ? K : R, tiles = ks_cdiv(N * (L / 4), 256);
  if (R == S) {
    static const int per_sm = ks_blocks_per_sm({{name}}_short4_kernel<S, true>, 256);
    {{name}}_short4_kernel<S, true><<<(unsigned)ks_grid(per_sm, tiles), 256, 0, stream>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), N, L);
  } else {
    static const int per_sm = ks_blocks_per_sm({{name}}_short4_kernel<S, false>, 256);
    {{name}}_short4_kernel<S, false><<<(unsigned)ks_grid(per_sm, tiles), 256, 0, stream>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), N, L);
  }
}

// The vector kernels, when the shape and addresses allow them; false: the caller takes the scalar ones.
template <typename T>
static bool {{name}}_vectors(const void* src, void* dst, int64_t N, int64_t R, int64_t K, cudaStream_t stream) {
  const uintptr_t align = sizeof(T) * 4;
  if (reinterpret_cast<uintptr_t>(src) % align != 0 || reinterpret_cast<uintptr_t>(dst) % align != 0) return false;
  const int64_t shorter = R < K ? R : K, longer = R < K ? K : R;
  if (shorter <= 8) {
    if (sizeof(T) != 4 || longer % 4 != 0) return false;
    if (shorter == 3) {{name}}_short4_launch<3>(src, dst, N, R, K, stream);
    else if (shorter == 4) {{name}}_short4_launch<4>(src, dst, N, R, K, stream);
    else if (shorter == 8) {{name}}_short4_launch<8>(src, dst, N, R, K, stream);
    else return false;
    return true;
  }
  if (R % 4 != 0 || K % 4 != 0) return false;
  if (R <= K) {
    if (R <= 16) {{name}}_vec_launch<T, 16, 256>(src, dst, N, R, K, stream);
    else if (R <= 32) {{name}}_vec_launch<T, 32, 128>(src, dst, N, R, K, stream);
    else {{name}}_vec_launch<T, 64, 64>(src, dst, N, R, K, stream);
  } else {
    if (K <= 16) {{name}}_vec_launch<T, 256, 16>(src, dst, N, R, K, stream);
    else if (K <= 32) {{name}}_vec_launch<T, 128, 32>(src, dst, N, R, K, stream);
    else {{name}}_vec_launch<T, 64, 64>(src, dst, N, R, K, stream);
  }
  return true;
}

template <typename T>
static void {{name}}_typed(const void* src, void* dst, int64_t N, int64_t R, int64_t K, cudaStream_t stream) {
  if ({{name}}_vectors<T>(src, dst, N, R, K, stream)) return;
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
