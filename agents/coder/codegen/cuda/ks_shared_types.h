#ifndef KS_SHARED_TYPES_H
#define KS_SHARED_TYPES_H
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "ks_fastdiv.h"

#define KS_MAX_RANK 6
#define KS_ROW_CAP 16384   /* longest row the register-cached row kernels take */
#define KS_BLOCK_SCALAR_VALUES 16  /* values per thread of the block path's VEC == 1 kernel */
#define KS_ROW32_MIN_THREADS 256  /* normalising block rows cache 32 values where that takes >= this many threads */
#define KS_COLS_WIDTH 16  /* inner columns per column-tile block: [R, 16] tiles, several blocks per SM */
#define KS_COLS_STATIC_SMEM 8576  /* the column-tile kernel's static shared memory: part[64][33], res[32] */
#define KS_ROW_SUB_MAX 512  /* rows up to this long: a group of <= 32 lanes per row, 16 values per lane */
#define KS_COLREG_MAX_R 16  /* softmax kinds along a strided dim this short: a thread per column, in registers
                              (H200: R = 16 beat the clusters 3x; R = 64 lost 2.7x to them: 64-bit operand
                              index math per value and 102 registers) */
#define KS_COLLOOP_MAX_R 4096  /* strided reductions up to this long may take a thread per column */
#define KS_FLAT_MIN_CHUNK 16384  /* values per block of the flat path: 4 rounds of 4 x 16 bytes in flight a thread */
#define KS_COLLOOP_MIN_COLS_PER_SM 512  /* ... when there are this many columns per SM: 16 KB of loads in flight an SM */

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
  // Multiply-shift forms of div, mod and size[] (ks_fastdiv.h), set by ks_describe: the offsets
  // of broadcast operands divided per element (H200: 32-bit divisions held an elementwise kernel
  // with per-channel operands at ~10% of DRAM bandwidth).
  KsFastDiv fdiv, fmod;
  KsFastDiv fsize[KS_MAX_RANK];
};

// Reduction strategy, chosen on the host from the [outer, R, inner] view.
enum KsRedPath : int {
  KS_PATH_ROW_WARP = 0,    // inner == 1, R <= 1024: a warp per row, <= 32 values per lane
  KS_PATH_ROW_BLOCK = 1,   // inner == 1, R <= KS_ROW_CAP: a block (<= 512 threads) per row, <= 32 values per thread
  KS_PATH_TILE = 2,        // anything else: (inner x R-slice) tiles, R split across blocks if needed
  KS_PATH_COLS = 3,        // normalising kinds, inner >= 16: a block keeps an [R, 16] tile in shared memory
  KS_PATH_ROW_SUB = 4,     // inner == 1, R <= KS_ROW_SUB_MAX: threads_x lanes per row, 32 / threads_x rows a warp
  KS_PATH_COLREG = 5,      // normalising kinds, R <= KS_COLREG_MAX_R, inner >= 32: a thread per column, in registers
  KS_PATH_COLLOOP = 6,     // inner >= 32, R <= KS_COLLOOP_MAX_R, columns fill the GPU: a thread per column walks R
  KS_PATH_FLAT = 7         // reduce kinds, inner == 1, rows the row kernels do not take: chunks of a row per block
};

struct KsRedPlan {
  int path;
  int threads_x;        // row: threads per row (block path); tile: threads along inner
  int threads_y;        // tile, cols: threads along R
  int64_t splits;       // tile: blocks along R (partials merged by a finalize kernel when > 1)
  int64_t r_per_split;
  int64_t workspace_floats;
  int row_values;       // row paths: values each thread caches (32, or 16 for normalising rows up to 4096)
  int64_t span;         // group_norm on the tile path: values per channel span (0: the generic tile kernels)
  int col_affine;       // colloop, tile: every operand's offset is base + r * step within a column (ks_col_affine)
  int apply_affine;     // tile path of normalising kinds, inner == 1: so are the apply kernel's (prologue, epilogue)
  int64_t nhwc_channels;  // a channels-last input's kernels (group_norm: gn_nhwc.cu, softmax kinds: softmax_nhwc.cu): its C; 0: none
  int nhwc_out;           // group_norm's NHWC kernels: 1 stores the output channels-last (its spec's keep_channels_last)
};

// group_norm's channel-span kernels (reduction/gn_span.cu): a block per (row, share of the row's
// `cg` spans), enough blocks to fill the SMs a few times over.
#define KS_GN_MIN_SPAN 64  /* shorter channel spans keep the generic tile kernels (threads would idle) */
struct KsGnSplit {
  int64_t splits;            // blocks per row
  int64_t per_block;         // spans each block reduces
  int64_t stats_offset;      // workspace: splits x rows Welford partials (3 floats), then the stats
  int64_t workspace_floats;  // ... 2 floats per row
};
// `rows` rows of `items` each (spans, positions) in blocks of `per_block` items, enough blocks to
// fill the SMs 8 times over; the workspace holds each block's partial state of the `states`
// groups it serves (3 floats), then 2 floats of statistics a group.
[[maybe_unused]] static inline KsGnSplit ks_gn_blocks(int64_t states, int64_t rows, int64_t items, int sms) {
  const int64_t target = (int64_t)sms * 8;
  int64_t splits = (target + rows - 1) / rows;
  if (splits > items) splits = items;
  if (splits < 1) splits = 1;
  const int64_t per_block = (items + splits - 1) / splits;
  splits = (items + per_block - 1) / per_block;
  return {splits, per_block, splits * states * 3, splits * states * 3 + states * 2};
}
[[maybe_unused]] static inline KsGnSplit ks_gn_split(int64_t outer, int64_t cg, int sms) {
  return ks_gn_blocks(outer, outer, cg, sms);
}

// group_norm of a channels-last input (reduction/gn_nhwc.cu): the statistics take a block per
// (sample, share of the S positions), enough blocks to fill the SMs a few times over; the
// workspace holds the shares' partial states of the `outer` = N * G groups, then their stats.
#define KS_GN_NHWC_MAX_C 256  /* the statistics kernel's threads take one channel each */
[[maybe_unused]] static inline KsGnSplit ks_gn_nhwc_split(int64_t outer, int64_t n, int64_t S, int sms) {
  return ks_gn_blocks(outer, n, S, sms);
}

// Softmax kinds over the channels of a channels-last input (reduction/softmax_nhwc.cu): P
// positions a block, 32 or more and 64 / C tiles of 32 for few channels (enough values a
// block), C <= 256 (the 256 threads stage a position's channels at once); shared memory holds
// the [P][C | 1] tile and `nepi` epilogue operands' per-channel values.
#define KS_SOFTMAX_NHWC_MAX_C 256
[[maybe_unused]] static inline int ks_softmax_nhwc_positions(int64_t C) {
  return C >= 64 ? 32 : C >= 32 ? 64 : 128;
}
[[maybe_unused]] static inline size_t ks_softmax_nhwc_smem(int64_t C, int nepi) {
  return ((size_t)ks_softmax_nhwc_positions(C) * (size_t)(C | 1) + (size_t)nepi * (size_t)C) * sizeof(float);
}

// A pooling kernel's geometry (pool/kernel.cu), filled by its binding: 1-D and 2-D pooling are
// 3-D pooling with leading spatial dims of size 1 (window 1, stride 1, no padding).
struct KsPoolGeom {
  int64_t N, C;
  int64_t in[3], out[3];        // spatial sizes (d, h, w)
  int64_t k[3], s[3], p[3], dil[3];
  int64_t xs[5];                // strides of the source (inputs[0]): n, c, d, h, w
  int64_t divisor;              // avg: divisor_override (0: none)
  int count_include_pad;        // avg
  int keep_cl;                  // a channels-last input's output stored channels-last too (coder's layout.py)
};

// batch_norm statistics of a concatenation from its parts' (batch_stats/merge.cu): part j's [2, C_j]
// statistics at `part[j]`, its channels first[j] .. first[j + 1] - 1 of the [2, C] result.
#define KS_BN_MERGE_MAX_PARTS 64
struct KsBnMergeParts {
  const float* part[KS_BN_MERGE_MAX_PARTS];
  int64_t first[KS_BN_MERGE_MAX_PARTS + 1];
  int count;
};

// Training-mode batch_norm statistics (batch_stats/kernel.cu): the source seen as [N, C, S], each
// channel's M = N * S values split into `parts` of `per_part` values.
struct KsBnGeom {
  int64_t N, C, S, M;
  int64_t sN, sC, sS;  // the source's strides along n, c and the collapsed spatial dims
  int64_t parts, per_part;
  KsFastDiv fS;  // e / S for every e < M when M fits 32 bits; m == 0: divide (ks_div)
  // group_norm statistics of a channels-last source (G > 0): a part never crosses a sample
  // (pps parts a sample, part y of sample y / pps), and the finalize merges a group's cg
  // channels x pps parts into statistics per (n, group).  G == 0: per channel.
  int64_t G, cg, pps;
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
  // Short rows: a warp per row leaves most lanes idle and keeps few bytes in flight (torch.profiler
  // on the H200: layer_norm rows of 64 took 4.3 ms for 2.1 GB of traffic, ~12% of the 4.2 TB/s measured).
  // A group of pow2(R / 16) lanes per row, 16 values per lane, several rows per warp.
  if (inner == 1 && R <= KS_ROW_SUB_MAX && !force_tile) {
    int64_t lanes = ks_pow2_ceil(ks_cdiv(R, 16));
    p.path = KS_PATH_ROW_SUB;
    p.threads_x = (int)(lanes < 1 ? 1 : lanes);
    p.threads_y = 8;
    p.row_values = 16;
    return p;
  }
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
  // Normalising along a short strided dim: a thread per column with its values in registers
  // (reduction/colreg.cu) beats the column tiles and the clusters, whatever they would offer.
  if (normalizing && !force_tile && inner >= 32 && R <= KS_COLREG_MAX_R) {
    p.path = KS_PATH_COLREG;
    p.threads_x = 256;
    p.threads_y = 1;
    return p;
  }
  // A strided dim with columns enough to fill the GPU: a thread per column walks R with 8 loads
  // in flight (reduction/colloop.cu), at full occupancy; softmax kinds read the column twice.
  // The tile and column-tile paths ran 2-5x slower than torch.compile's fused kernels there.
  if (!force_tile && inner >= 32 && R <= KS_COLLOOP_MAX_R && outer * inner >= (int64_t)sms * KS_COLLOOP_MIN_COLS_PER_SM) {
    p.path = KS_PATH_COLLOOP;
    p.threads_x = 256;
    p.threads_y = 1;
    return p;
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
  // Reduce kinds over long rows (inner == 1): the flat kernels, enough row chunks for 8 blocks
  // an SM.  Normalising kinds keep the tile path: their apply kernel reads its statistics.
  if (inner == 1 && !normalizing) {
    p.path = KS_PATH_FLAT;
    p.threads_x = 256;
    p.threads_y = 1;
    int64_t s = ks_cdiv((int64_t)sms * 8, outer);
    const int64_t most = R / KS_FLAT_MIN_CHUNK > 1 ? R / KS_FLAT_MIN_CHUNK : 1;
    if (s > most) s = most;
    p.r_per_split = ks_cdiv(ks_cdiv(R, s), 8) * 8;  // chunks start at multiples of any 16-byte width
    p.splits = ks_cdiv(R, p.r_per_split);
    p.workspace_floats = p.splits > 1 ? p.splits * outer * state_floats : 0;
    return p;
  }
  p.path = KS_PATH_TILE;
  int64_t txi = inner == 1 ? 1 : (inner >= 32 ? 32 : ks_pow2_ceil(inner));
  int64_t tyr = 256 / txi;
  // Each thread should keep the tile kernel's 8 loads in flight along R: for short R, move
  // threads from R to inner (keeping 256 a block) instead of merging 2-value partial states.
  while (tyr > 1 && R < tyr * 8 && txi < 256 && txi * 2 <= ks_pow2_ceil(inner)) {
    tyr /= 2;
    txi *= 2;
  }
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
