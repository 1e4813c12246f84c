#ifndef KS_OPERAND_READ_H
#define KS_OPERAND_READ_H
// Which kernels can read an operand that ks_describe (ks_binding.h) described, as a base plus a
// fixed step: host predicates over KsOperand alone (ks_shared_types.h, included before this), so
// tests compile them with g++ and check them against the offsets they stand for.

// Whether the row kernels can read this operand (offset within a row = base + col, or constant).
// `any_layout`: group_norm's row kernels, which read every layout but general strides
// (ks_load_row_any).
// General strides whose innermost collapsed dim is exactly a row, contiguous or broadcast along
// it (ks_strided_rows): a per-(sample, channel) operand [N, C, 1, 1] read with a channels-last
// input re-viewed as [N * S, C] rows is [N, S, C] with strides (C, 0, 1), i.e. row base
// (row / S) * C plus col (the gn-stats variant's group statistics before level2/92's logsumexp
// over the channels); the tile kernels read it 2-3x slower.
static inline bool ks_strided_rows(const KsOperand& d, int64_t R) {
  return d.mode == KS_STRIDED && d.rank >= 1 && d.size[d.rank - 1] == R &&
         (d.stride[d.rank - 1] == 1 || d.stride[d.rank - 1] == 0);
}
static inline bool ks_row_affine(const KsOperand& d, int64_t R, bool any_layout = false) {
  if (any_layout) return d.mode != KS_STRIDED;
  switch (d.mode) {
    case KS_FULL: case KS_SCALAR: return true;
    case KS_ROW: return d.mod % R == 0;
    case KS_CHANNEL: case KS_DIVMOD: return d.div % R == 0;
    default: return ks_strided_rows(d, R);
  }
}

// Whether the column-loop and tile kernels can read this operand as base + r * step along a column
// of the [outer, R, inner] view (ks_col_step, ks_prelude.cuh): full tensors, scalars, values per
// (outer, inner) column, and values per reduced index: (i / inner) % mod with mod a multiple of R,
// i.e. per channel (a conv bias when the channels are reduced, mod == R) or per (sample, channel)
// (group statistics spread to [N, C, 1, 1], mod == N * C: at index (o * R + r) % mod, where
// (o * R) % mod is a multiple of R and adding r < R never wraps).  level2/92's group_norm
// statistics variant read four such operands through per-value div / mod before (2.2x slower
// than the group_norm kernel's program on an H100).
static inline bool ks_col_affine(const KsOperand& d, int64_t R, int64_t inner) {
  switch (d.mode) {
    case KS_FULL: case KS_SCALAR: return true;
    case KS_ROW: return inner % d.mod == 0;  // i % mod: fixed within a column
    case KS_CHANNEL: case KS_DIVMOD:
      return (d.div == inner && d.mod % R == 0) || d.div % (R * inner) == 0;  // r, or fixed within a column
    default: return false;
  }
}

// Whether an operand's values at the 4 planes plane0..plane0+3 (plane0 % 4 == 0) of an input of
// in_plane values a (n, c) plane sit at 4 consecutive offsets: per channel, (i / in_plane) % mod
// with 4 | mod, so plane0 % mod + j < mod.  The channels-last pools then read a per-channel
// operand of their 4 channels as one 16-byte load (ks_ld_planes4, ks_prelude.cuh).
KS_HD bool ks_planes4_consecutive(const KsOperand& d, int64_t in_plane) {
  return (d.mode == KS_CHANNEL || d.mode == KS_DIVMOD) && d.div == in_plane && d.mod % 4 == 0;
}
#endif  // KS_OPERAND_READ_H
