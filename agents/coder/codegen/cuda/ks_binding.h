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

#include "ks_shared_types.h"
#include "ks_operand_read.h"

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

// Whether t broadcasts to `shape` without growing it (torch's rules, trailing dims aligned).
static inline bool ks_broadcasts_to(const at::Tensor& t, c10::IntArrayRef shape) {
  const int64_t d = (int64_t)shape.size();
  if (t.dim() > d) return false;
  for (int64_t k = 1; k <= t.dim(); ++k)
    if (t.size(t.dim() - k) != 1 && t.size(t.dim() - k) != shape[d - k]) return false;
  return true;
}

static inline bool ks_aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Describes how tensor t, broadcast to `shape` (the contiguous iteration space), is read.
// Returns false when t is a full-size operand that is not 16-byte aligned (then vec must be 1).
// `t` may be replaced by a contiguous copy when its collapsed rank exceeds KS_MAX_RANK.
// strided_rows: an operand of general strides may take a vector kernel where ks_load_strided_rows
// reads it (VEC consecutive elements contiguous and 16-byte aligned); otherwise such an operand
// sends the launch to the scalar kernel.
static inline bool ks_describe(at::Tensor& t, c10::IntArrayRef shape, int vec, KsOperand& d,
                               bool strided_rows = false) {
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
    d.fdiv = ks_fastdiv_make(div);
    d.fmod = ks_fastdiv_make(d.mod);
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
  for (int k = 0; k < r; ++k) {
    d.size[k] = sizes[k];
    d.stride[k] = strides[k];
    d.fsize[k] = ks_fastdiv_make(sizes[k]);
  }
  if (vec == 1) return true;
  if (!strided_rows || strides[r - 1] != 1 || sizes[r - 1] % vec != 0 || !ks_aligned16(t.data_ptr())) return false;
  for (int k = 0; k < r - 1; ++k)
    if (strides[k] % vec != 0) return false;
  return true;  // (ks_load_strided_rows: one offset per VEC elements)
}

// Describes every operand for width `vec`, falling back to vec = 1 when a full-size operand is
// misaligned (e.g. a view x[1:]).  Returns the width used.
static inline int ks_describe_all(std::vector<at::Tensor*> ts, std::vector<c10::IntArrayRef> shapes,
                                  int vec, KsOperand* descs, bool strided_rows = false) {
  bool ok = true;
  for (size_t k = 0; k < ts.size(); ++k) ok = ks_describe(*ts[k], shapes[k], vec, descs[k], strided_rows) && ok;
  if (ok || vec == 1) return vec;
  for (size_t k = 0; k < ts.size(); ++k) ks_describe(*ts[k], shapes[k], 1, descs[k]);
  return 1;
}
// Whether `t` (of the full `shape`) is stored transposed at dim k: logically [N, C, S] (N the dims
// before k, C = shape[k], S the dims after it), dense in [N, S, C] order: C at stride 1, the dims
// after k dense over C-value rows, the dims before k over whole [S, C] blocks (size-1 dims free).
// k = 1 is channels-last; a permuted einsum output ([b, c, l, h, p] dense as [b, c, h, p, l]) is k = 2.
static inline bool ks_transposed_at(const at::Tensor& t, c10::IntArrayRef shape, int64_t k) {
  const int64_t d = (int64_t)shape.size();
  if (t.dim() != d || t.sizes() != shape || t.is_contiguous() || t.stride(k) != 1) return false;
  int64_t expect = shape[k];
  for (int64_t j = d - 1; j > k; --j) {
    if (shape[j] != 1 && t.stride(j) != expect) return false;
    expect *= shape[j];
  }
  for (int64_t j = k - 1; j >= 0; --j) {
    if (shape[j] != 1 && t.stride(j) != expect) return false;
    expect *= shape[j];
  }
  return true;
}
// Whether the tiled kernels' grid (S / 32, C / 32, N) holds an [N, C, S] view with C, S > 1.
static inline bool ks_tiled_grid_fits(int64_t N, int64_t C, int64_t S) {
  return C > 1 && S > 1 && N <= 65535 && ks_cdiv(C, 32) <= 65535 && ks_cdiv(S, 32) <= 0x7fffffffLL;
}
// The index of the first full-size operand stored channels-last (logically [N, C, S...], dense in
// [N, S..., C] order, C > 1, not also contiguous), for the elementwise kernels' tiled transpose
// path; -1 if none, or if the tiled grid (S / 32, C / 32, N) would not fit.
static inline int ks_channels_last_operand(std::vector<at::Tensor*> ts, c10::IntArrayRef shape) {
  const int64_t d = (int64_t)shape.size();
  if (d < 3 || d > 5) return -1;
  int64_t S = 1;
  for (int64_t k = 2; k < d; ++k) S *= shape[k];
  if (!ks_tiled_grid_fits(shape[0], shape[1], S)) return -1;
  for (size_t i = 0; i < ts.size(); ++i)
    if (ks_transposed_at(*ts[i], shape, 1)) return (int)i;
  return -1;
}
// The elementwise kernels' tiled path: the operand it reads through (spatial, channel) tiles and
// the [N, C, S] view it reads it as.  The first operand stored channels-last (C = dim 1), else,
// with `any_dim` (emit_elementwise(spec, tiled_any_dim=True)), the first stored transposed at
// another dim (ks_transposed_at, the lowest k first): level3/48's Y_diag + Y_off reads torch's
// einsum output [b, c, l, h, p] dense as [b, c, h, p, l] (innermost stride 64), which the scalar
// kernel read at 1.5 TB/s on an H100 (bench/results/2026-12-07-h100-s37).  At other dims than 1
// a view of fewer than KS_TILED_MIN_S positions is left to the flat kernels (a block's tile holds
// 128 positions: the transpose of a [2, M] tensor would use 2 of them).  operand -1: none.
constexpr int64_t KS_TILED_MIN_S = 32;
struct KsTiledView {
  int operand = -1;
  int64_t N = 0, C = 0, S = 0;
};
static inline KsTiledView ks_tiled_operand(std::vector<at::Tensor*> ts, c10::IntArrayRef shape, bool any_dim) {
  const int64_t d = (int64_t)shape.size();
  auto view_at = [&](int64_t k, int i) {
    KsTiledView v;
    v.operand = i;
    v.N = 1;
    v.S = 1;
    for (int64_t j = 0; j < k; ++j) v.N *= shape[j];
    for (int64_t j = k + 1; j < d; ++j) v.S *= shape[j];
    v.C = shape[k];
    return v;
  };
  const int cl = ks_channels_last_operand(ts, shape);
  if (cl >= 0) return view_at(1, cl);
  if (any_dim) {
    for (int64_t k = 0; k + 1 < d; ++k) {
      const KsTiledView v = view_at(k, -1);
      if (!ks_tiled_grid_fits(v.N, v.C, v.S) || v.S < KS_TILED_MIN_S) continue;
      for (size_t i = 0; i < ts.size(); ++i)
        if (ks_transposed_at(*ts[i], shape, k)) return view_at(k, (int)i);
    }
  }
  return KsTiledView{};
}
// Whether every operand of the full (output) shape is stored channels-last, and one is: an
// elementwise step the program keeps NHWC (agents/coder/layout.py) then runs on its views.
static inline bool ks_full_channels_last(std::vector<at::Tensor*> ts, c10::IntArrayRef shape) {
  bool any = false;
  for (at::Tensor* t : ts) {
    if (t->sizes() != shape) continue;
    if (ks_channels_last_operand({t}, shape) != 0) return false;
    any = true;
  }
  return any;
}
// `t` (broadcastable to an nd-dim tensor) as a view with dim 1 moved last: a channels-last
// tensor reduced over its channels is then read as contiguous rows (ks_reduce_channels_last).
static inline at::Tensor ks_channels_to_last(at::Tensor t, int64_t nd) {
  while (t.dim() < nd) t = t.unsqueeze(0);
  return t.movedim(1, nd - 1);
}
// Whether an operand broadcast against an nd-dim [N, C, S...] tensor is constant along S (size 1
// in every spatial dim): per-channel weights, a conv bias, per-(n, c) values, scalars.
static inline bool ks_spatially_constant(const at::Tensor& t, int64_t nd) {
  const int64_t lead = nd - t.dim();
  for (int64_t k = 0; k < t.dim(); ++k)
    if (k + lead >= 2 && t.size(k) != 1) return false;
  return true;
}
// Whether a concatenation's inputs are all nd-dim (4-5) tensors stored channels-last, or
// constant along the spatial dims (a bias, a pooled [N, C, 1, 1] tensor), one at least stored
// channels-last: a cat the program keeps NHWC then runs on their views (cat/keep_channels_last.cpp).
static inline bool ks_inputs_channels_last(std::vector<at::Tensor*> ts, int64_t nd) {
  if (nd < 4 || nd > 5) return false;
  bool any = false;
  for (at::Tensor* t : ts) {
    if (t->dim() > nd) return false;
    if (t->dim() == nd && ks_channels_last_operand({t}, t->sizes()) == 0) any = true;
    // One channel is the same memory in both orders: contiguous, it serves as channels-last.
    else if (t->dim() == nd && t->size(1) == 1 && t->is_contiguous()) continue;
    else if (!ks_spatially_constant(*t, nd)) return false;
  }
  return any;
}
#endif  // KS_BINDING_PRELUDE_H
