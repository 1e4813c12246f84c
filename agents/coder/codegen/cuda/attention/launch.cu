// The live-tile pre-pass of a bool mask: block b is tile (n, tile of queries, tile of keys) of
// the map [mask_n, tiles_m, tiles_n] and sets its byte when any key of the tile takes part for
// any query of it (a 1-D grid: mask_n may pass a grid dimension's 65535).
__global__ void __launch_bounds__(256) {{name}}_live(const {{mask_t}}* __restrict__ mask, unsigned char* __restrict__ live,
                                                      const int64_t Lq, const int64_t Lk, const int64_t tiles_m,
                                                      const int64_t tiles_n, const int64_t sm0, const int64_t sm1,
                                                      const int64_t sm2) {
  using namespace {{name}}_cfg;
  const int64_t b = blockIdx.x, n = b / (tiles_m * tiles_n);
  const int64_t m0 = (b / tiles_n % tiles_m) * BM, n0 = (b % tiles_n) * BN;
  bool any = false;
  for (int i = threadIdx.x; i < BM * BN && !any; i += blockDim.x) {
    const int64_t row = m0 + i / BN, key = n0 + i % BN;
    any = row < Lq && key < Lk && {{name}}_mask(mask[n * sm0 + row * sm1 + key * sm2]) != 0.f;
  }
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) live[b] = any;
}

// Bytes of the live-tile map `live` the launcher needs (0: no bool mask); `mask_n` is 1 where the
// mask is the same for every n (stride 0), else N.
int64_t {{name}}_live_bytes(int64_t mask_n, int64_t Lq, int64_t Lk) {
  using namespace {{name}}_cfg;
  return MASK == 1 ? mask_n * ks_cdiv(Lq, (int64_t)BM) * ks_cdiv(Lk, (int64_t)BN) : 0;
}

{{launcher_sig}} {
  using namespace {{name}}_cfg;
  if (N == 0 || Lq == 0) return;
  const int64_t tiles_m = ks_cdiv(Lq, (int64_t)BM);
  const int64_t mask_n = sm0 == 0 ? 1 : N;
  if (MASK == 1 && Lk > 0) {
    const int64_t tiles_n = ks_cdiv(Lk, (int64_t)BN);
    {{name}}_live<<<(unsigned)(mask_n * tiles_m * tiles_n), 256, 0, stream>>>(
        static_cast<const {{mask_t}}*>(mask), static_cast<unsigned char*>(live), Lq, Lk, tiles_m, tiles_n, sm0, sm1,
        sm2);
  }
  const size_t bytes = SMEM_BYTES;
  // above 48 KB a kernel must opt in to its dynamic shared memory, once per device
  static bool configured[64] = {};
  int device = 0;
  cudaGetDevice(&device);
  if (device < 0 || device >= 64 || !configured[device]) {
    cudaFuncSetAttribute({{name}}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (device >= 0 && device < 64) configured[device] = true;
  }
  {{name}}_kernel<<<(unsigned)(N * tiles_m), THREADS, bytes, stream>>>(
      static_cast<const {{q_t}}*>(q), static_cast<const {{k_t}}*>(k), static_cast<const {{v_t}}*>(v),
      static_cast<const {{mask_t}}*>(mask), static_cast<{{out_t}}*>(out), Lq, Lk, tiles_m, heads, sqb, sqh, sq1, skb,
      skh, sk1, svb, svh, sv1, sm0, sm1, sm2, MASK == 1 ? static_cast<const unsigned char*>(live) : nullptr,
      mask_n == 1 ? 0 : tiles_m * ks_cdiv(Lk, (int64_t)BN), {{q_scale}});
}
