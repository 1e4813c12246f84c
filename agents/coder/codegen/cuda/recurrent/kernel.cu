#include "../ks_prelude.cuh"

// ---- recurrent kernel {{name}}: {{what}} ----
// The whole sequence of every (layer, direction) chain of a launch in one persistent kernel.
// cuDNN runs a recurrent layer as one small GEMM per time step and layer (10 x 256 by 256 x 1024
// for KernelBench's LSTMs: 3,072 dependent launches of a few microseconds each).  Here a block
// owns U hidden units of one chain, keeps their rows of W_ih and W_hh in shared memory for the
// whole sequence (read from DRAM once), and per step reads only the chain's last hidden state and
// this step's input (a few KB, from L2).  Chains of one launch run as a wavefront: layer l starts
// step t as soon as layer l - 1 has written its output at t, so a unidirectional stack of L
// layers takes T + L - 1 dependent steps instead of T x L.  Blocks meet through one monotone
// counter a chain (each block adds 1 after a step); a cooperative launch guarantees that every
// block is resident, so the waits cannot deadlock.  fp32 throughout, as PyTorch's fp32 cell.
namespace {{name}}_cfg {
constexpr int CELL = {{cell}};  // 0 LSTM (i, f, g, o), 1 GRU (r, z, n), 2 RNN tanh, 3 RNN relu
constexpr int GATES = CELL == 0 ? 4 : CELL == 1 ? 3 : 1;
constexpr int THREADS = 256, WARPS = THREADS / 32;
constexpr int ROWS_W = 8;               // weight rows a warp owns: each loaded value feeds 8 x BT FMAs
constexpr int MAX_ROWS = WARPS * ROWS_W;  // GATES x U <= 64
constexpr int BT = {{batch_tile}};        // batch items a pass (the traced batch, at most 16)
constexpr int NACC = ((ROWS_W * BT + 31) / 32) * 32;  // accumulators a lane, padded for the scatter
}  // namespace {{name}}_cfg

{{chains_struct}}

// A warp's NACC partial sums a lane, summed over the 32 lanes: afterwards lane L holds the sums of
// indices [L * M, L * M + M), M = NACC / 32, in a[0..M).  Each level halves the values a lane
// keeps (the lane whose `o` bit is set keeps the upper half): NACC - M shuffles in all, where a
// plain butterfly per value would take 5 x NACC.
template <int N, int O, int n>
static __device__ __forceinline__ void {{name}}_reduce_scatter(float (&a)[N], const int lane) {
  if constexpr (O >= 1) {  // one level a template instance: every index a constant, a[] in registers
    constexpr int half = n / 2;
    const bool up = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = up ? a[i] : a[i + half];
      const float keep = up ? a[i + half] : a[i];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    {{name}}_reduce_scatter<N, O / 2, half>(a, lane);
  }
}

static __device__ __forceinline__ unsigned {{name}}_load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ void {{name}}_wait(const unsigned* counter, unsigned target) {
  while ({{name}}_load_acquire(counter) < target) {
  }
}

static __device__ __forceinline__ float {{name}}_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

// The dot products of the block's rows with one batch tile of a vector held in shared memory
// (v: [BT][K]), as `split` partial sums over K: g[(part * rows_pad + row) * BT + b].  Rows go to
// warps 8 at a time; where a block has fewer than 8 row groups (a bidirectional layer's few units
// a block), `split` warps share a group's K, interleaved, so every warp works.  Lanes stride
// along K (conflict-free reads of both operands).
static __device__ __forceinline__ void {{name}}_rows_dot(const float* __restrict__ w, const float* __restrict__ v,
                                                        const int K, const int rows, const int rows_pad,
                                                        const int split, float* __restrict__ g) {
  using namespace {{name}}_cfg;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, part = warp % split, r0 = warp / split * ROWS_W;
  if (r0 >= rows) return;  // a warp past the row groups (the whole warp: no shuffle is left half-done)
  float acc[NACC];
#pragma unroll
  for (int i = 0; i < NACC; ++i) acc[i] = 0.f;
  for (int k = lane + 32 * part; k < K; k += 32 * split) {
    float vv[BT];
#pragma unroll
    for (int b = 0; b < BT; ++b) vv[b] = v[b * K + k];
#pragma unroll
    for (int rr = 0; rr < ROWS_W; ++rr) {
      const float wv = w[(r0 + rr) * K + k];  // rows past `rows` are zeros (allocated, filled)
#pragma unroll
      for (int b = 0; b < BT; ++b) acc[rr * BT + b] = fmaf(wv, vv[b], acc[rr * BT + b]);
    }
  }
  {{name}}_reduce_scatter<NACC, 16, NACC>(acc, lane);
  constexpr int M = NACC / 32;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const int idx = lane * M + i;
    if (idx < ROWS_W * BT) g[(part * rows_pad + r0 + idx / BT) * BT + idx % BT] = acc[i];
  }
}

// Row `row`'s pre-activation for batch item b: its `split` partial sums and its bias.
static __device__ __forceinline__ float {{name}}_sum(const float* __restrict__ g, const float* __restrict__ bias,
                                                    const int row, const int b, const int rows_pad, const int split) {
  using namespace {{name}}_cfg;
  float s = bias[row];
  for (int p = 0; p < split; ++p) s += g[(p * rows_pad + row) * BT + b];
  return s;
}

__global__ void __launch_bounds__(256, 1) {{name}}_kernel(const {{name}}_chains L, const int B, const int T,
                                                         const int H, const int U, const int in_max,
                                                         unsigned* __restrict__ counters) {
  using namespace {{name}}_cfg;
  extern __shared__ float smem[];
  int c = 0;
  while (c + 1 < L.count && (int)blockIdx.x >= L.chain[c + 1].first_block) ++c;
  const {{name}}_chain& ch = L.chain[c];
  const int j0 = ((int)blockIdx.x - ch.first_block) * U;
  const int nu = H - j0 < U ? H - j0 : U;  // units of this block (the chain's last block may have fewer)
  const int rows = GATES * U, rows_pad = (rows + ROWS_W - 1) / ROWS_W * ROWS_W, K = ch.in;
  int split = 1;  // warps a row group: row groups x split <= WARPS
  while (2 * split * (rows_pad / ROWS_W) <= WARPS) split *= 2;
  // shared memory: W_ih rows [rows_pad][in], W_hh rows [rows_pad][H], both biases, the step's
  // input and hidden state tiles [BT][in], [BT][H], both products' partial sums [split * rows_pad
  // <= MAX_ROWS][BT], LSTM's c [U][B]
  float* wx = smem;
  float* wh = wx + rows_pad * in_max;
  float* bx = wh + rows_pad * H;
  float* bh = bx + rows_pad;
  float* vx = bh + rows_pad;
  float* vh = vx + BT * in_max;
  float* gx = vh + BT * H;
  float* gh = gx + MAX_ROWS * BT;
  float* cs = gh + MAX_ROWS * BT;
  // row r of the block is gate r / U of unit j0 + r % U: the weights' row (r / U) * H + j0 + r % U
  for (int i = threadIdx.x; i < rows_pad * K; i += THREADS) {
    const int r = i / K, g = r / U, u = r % U;
    wx[i] = r < rows && u < nu ? __ldg(ch.w_ih + ((int64_t)g * H + j0 + u) * K + i % K) : 0.f;
  }
  for (int i = threadIdx.x; i < rows_pad * H; i += THREADS) {
    const int r = i / H, g = r / U, u = r % U;
    wh[i] = r < rows && u < nu ? __ldg(ch.w_hh + ((int64_t)g * H + j0 + u) * H + i % H) : 0.f;
  }
  for (int r = threadIdx.x; r < rows_pad; r += THREADS) {
    const int g = r / U, u = r % U;
    const bool live = r < rows && u < nu && ch.b_ih != nullptr;
    bx[r] = live ? __ldg(ch.b_ih + g * H + j0 + u) : 0.f;
    bh[r] = live ? __ldg(ch.b_hh + g * H + j0 + u) : 0.f;
  }
  for (int s = 0; s < T; ++s) {
    const int t = ch.reverse ? T - 1 - s : s, tprev = ch.reverse ? t + 1 : t - 1;
    if (threadIdx.x == 0) {
      if (s > 0) {{name}}_wait(counters + c, (unsigned)s * ch.blocks);  // the chain's h at tprev
      for (int d = 0; d < 2; ++d) {  // the previous layer's output at t, when this launch makes it
        const int dep = ch.dep[d];
        if (dep < 0) continue;
        const int done = L.chain[dep].reverse ? T - t : t + 1;
        {{name}}_wait(counters + dep, (unsigned)done * L.chain[dep].blocks);
      }
      __threadfence();
    }
    __syncthreads();
    for (int b0 = 0; b0 < B; b0 += BT) {
      const int nb = B - b0 < BT ? B - b0 : BT;
      // Another block of this launch may have written these: L2 loads (__ldcg), never L1.
      for (int i = threadIdx.x; i < BT * K; i += THREADS) {
        const int b = i / K;
        vx[i] = b < nb ? __ldcg(ch.x + (int64_t)t * ch.xs_t + (int64_t)(b0 + b) * ch.xs_b + i % K) : 0.f;
      }
      for (int i = threadIdx.x; i < BT * H; i += THREADS) {
        const int b = i / H;
        vh[i] = b >= nb ? 0.f
                : s == 0 ? __ldcg(ch.h0 + (int64_t)(b0 + b) * H + i % H)
                         : __ldcg(ch.y + (int64_t)tprev * ch.ys_t + (int64_t)(b0 + b) * ch.ys_b + i % H);
      }
      __syncthreads();
      {{name}}_rows_dot(wx, vx, K, rows, rows_pad, split, gx);
      {{name}}_rows_dot(wh, vh, H, rows, rows_pad, split, gh);
      __syncthreads();
      for (int p = threadIdx.x; p < nu * nb; p += THREADS) {
        const int u = p / nb, b = p % nb, j = j0 + u;
        float h;
#define {{name}}_X(gate) {{name}}_sum(gx, bx, (gate) * U + u, b, rows_pad, split)
#define {{name}}_H(gate) {{name}}_sum(gh, bh, (gate) * U + u, b, rows_pad, split)
#define {{name}}_G(gate) ({{name}}_X(gate) + {{name}}_H(gate))
        if constexpr (CELL == 0) {
          const float ig = {{name}}_sigmoid({{name}}_G(0)), fg = {{name}}_sigmoid({{name}}_G(1));
          const float gg = tanhf({{name}}_G(2)), og = {{name}}_sigmoid({{name}}_G(3));
          const float cprev = s == 0 ? __ldg(ch.c0 + (int64_t)(b0 + b) * H + j) : cs[u * B + b0 + b];
          const float cnew = fmaf(fg, cprev, ig * gg);
          cs[u * B + b0 + b] = cnew;
          h = og * tanhf(cnew);
          if (s == T - 1) ch.cn[(int64_t)(b0 + b) * H + j] = cnew;
        } else if constexpr (CELL == 1) {
          const float rg = {{name}}_sigmoid({{name}}_G(0)), zg = {{name}}_sigmoid({{name}}_G(1));
          const float ng = tanhf(fmaf(rg, {{name}}_H(2), {{name}}_X(2)));
          const float hprev = vh[b * H + j];
          h = fmaf(zg, hprev - ng, ng);  // (1 - z) n + z h
        } else if constexpr (CELL == 2) {
          h = tanhf({{name}}_G(0));
        } else {
          const float a = {{name}}_G(0);
          h = isnan(a) ? a : fmaxf(a, 0.f);  // torch.relu keeps a NaN
        }
#undef {{name}}_G
#undef {{name}}_H
#undef {{name}}_X
        ch.y[(int64_t)t * ch.ys_t + (int64_t)(b0 + b) * ch.ys_b + j] = h;
        if (s == T - 1) ch.hn[(int64_t)(b0 + b) * H + j] = h;
      }
      __syncthreads();  // the tiles are read again by the next batch tile
    }
    // The block's arrival, as cooperative groups' grid barrier does it: the barrier above orders
    // every thread's h stores before thread 0's fence, which orders them before the add that
    // other blocks' acquire loads observe.
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(counters + c, 1u);
    }
  }
}

// Shared memory a block needs (bytes) for U units, inputs of at most in_max features, batch B.
size_t {{name}}_smem_bytes(int U, int in_max, int H, int B) {
  using namespace {{name}}_cfg;
  const size_t rows_pad = (size_t)(GATES * U + ROWS_W - 1) / ROWS_W * ROWS_W;
  return sizeof(float) * (rows_pad * (in_max + H) + 2 * rows_pad + (size_t)BT * (in_max + H) +
                          2 * (size_t)MAX_ROWS * BT + (size_t)U * B);
}

int {{name}}_max_units() { return {{name}}_cfg::MAX_ROWS / {{name}}_cfg::GATES; }

// Blocks an SM holds with `smem` bytes each (0 when the kernel cannot launch with that much).
int {{name}}_blocks_per_sm(size_t smem) {
  int device = 0, optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (smem > (size_t)optin) return 0;
  if (cudaFuncSetAttribute({{name}}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess)
    return 0;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, {{name}}_kernel, {{name}}_cfg::THREADS, smem) !=
      cudaSuccess)
    return 0;
  return per_sm;
}

{{launcher_sig}} {
  using namespace {{name}}_cfg;
  const cudaError_t zeroed = cudaMemsetAsync(counters, 0, sizeof(unsigned) * chains.count, stream);
  if (zeroed != cudaSuccess) return (int)zeroed;
  const size_t smem = {{name}}_smem_bytes(U, in_max, H, B);
  cudaFuncSetAttribute({{name}}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  const {{name}}_chains* lp = &chains;
  void* args[] = {(void*)lp, (void*)&B, (void*)&T, (void*)&H, (void*)&U, (void*)&in_max, (void*)&counters};
  // cooperative: every block resident at once (or cudaErrorCooperativeLaunchTooLarge), which the
  // blocks' waits on each other need
  return (int)cudaLaunchCooperativeKernel((const void*){{name}}_kernel, dim3((unsigned)blocks), dim3(THREADS), args,
                                          smem, stream);
}
