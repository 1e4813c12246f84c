#include "ks_contraction.h"

// ---- binding {{name}}: contraction, einsum {{equation}} ----
// Each index's size from the operands' shapes (equal, or 1: broadcast as torch.einsum does), the
// roles' dims and divisors, every operand's strides per role dim, and the output, contiguous in
// the equation's output order.
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);
  constexpr int NIN = {{nin}}, NL = {{nletters}}, NOUT = {{nout}};
  // the equation's indices in order of first appearance: role (KsContractionRole) and dim in it
  static const char letters[] = "{{letters}}";
  static const int role_of[NL] = {{{role_of}}};
  static const int dim_of[NL] = {{{dim_of}}};
  // each input's dims and the output's as indices into `letters`
  static const int in_rank[NIN] = {{{in_rank}}};
  static const int in_letters[NIN][{{max_rank}}] = {{{in_letters}}};
  static const int out_letters[NOUT > 0 ? NOUT : 1] = {{{out_letters}}};
  const at::Tensor* ins[NIN] = {{{in_refs}}};
  int64_t size[NL];
  for (int l = 0; l < NL; ++l) size[l] = 1;
  for (int k = 0; k < NIN; ++k) {
    TORCH_CHECK(ins[k]->dim() == in_rank[k], "{{name}}: input ", ks_str(k), " of {{equation}} must have ",
                ks_str(in_rank[k]), " dims, got ", ks_str(ins[k]->dim()));
    for (int d = 0; d < in_rank[k]; ++d) {
      const int l = in_letters[k][d];
      const int64_t s = ins[k]->size(d);
      TORCH_CHECK(s == size[l] || s == 1 || size[l] == 1, "{{name}}: index ", std::string(1, letters[l]),
                  " of {{equation}} has sizes ", ks_str(size[l]), " and ", ks_str(s));
      if (s != 1) size[l] = s;
    }
  }
  KsContraction g{};
  for (int r = 0; r < 4; ++r)
    for (int d = 0; d < KS_CONTRACTION_MAX_DIMS; ++d) g.size[r][d] = 1;
  for (int l = 0; l < NL; ++l) g.size[role_of[l]][dim_of[l]] = size[l];
  // Each role's positions, saturated past 2^31 (the kernel's indices are 32-bit: checked below).
  constexpr int64_t BIG = (int64_t)1 << 31;
  bool fits = true;
  for (int r = 0; r < 4; ++r) {
    bool empty = false;
    int64_t total = 1;
    for (int d = 0; d < KS_CONTRACTION_MAX_DIMS; ++d) {
      g.fsize[r][d] = ks_fastdiv_make(g.size[r][d]);
      empty = empty || g.size[r][d] == 0;
      if (total < BIG) total *= g.size[r][d] < BIG ? g.size[r][d] : BIG;  // < 2^62: no overflow
    }
    g.total[r] = empty ? 0 : total;
    fits = fits && g.total[r] < BIG;
  }
  std::vector<int64_t> out_shape;
  for (int j = 0; j < NOUT; ++j) out_shape.push_back(size[out_letters[j]]);
  at::Tensor out = at::empty(out_shape, in_0.options().dtype({{out_dtype}}));
  if (out.numel() == 0) return out;
  if (g.total[KS_CTR_K] == 0) return out.zero_();  // an empty sum
  TORCH_CHECK(fits, "{{name}}: a batch, m, n or k extent of {{equation}} past 2^31 - 1 positions");
  for (int k = 0; k < NIN; ++k)
    for (int d = 0; d < in_rank[k]; ++d)
      if (ins[k]->size(d) != 1) g.stride[k][role_of[in_letters[k][d]]][dim_of[in_letters[k][d]]] = ins[k]->stride(d);
  for (int j = 0; j < NOUT; ++j)
    g.stride[KS_CONTRACTION_OUT][role_of[out_letters[j]]][dim_of[out_letters[j]]] = out.stride(j);
  g.m_tiles = ks_cdiv(g.total[KS_CTR_M], {{bm}});
  g.n_tiles = ks_cdiv(g.total[KS_CTR_N], {{bn}});
  g.tiles = g.total[KS_CTR_BATCH] * g.m_tiles * g.n_tiles;  // <= out.numel(): no overflow
  TORCH_CHECK(g.tiles <= (int64_t)0xffffffff, "{{name}}: more than 2^32 - 1 output tiles of {{equation}}");
  g.f_m_tiles = ks_fastdiv_make(g.m_tiles);
  g.f_n_tiles = ks_fastdiv_make(g.n_tiles);
  const void* ptrs[NIN] = {{{in_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(ptrs, out.data_ptr(), g, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
