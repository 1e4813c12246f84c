
// ---- binding {{name}}: concatenation of {{nseg}} segments ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);{{keep_layout}}
  // each segment's own shape: the broadcast shape of the operands it reads
  const std::vector<std::vector<int64_t>> seg = {{{segment_shapes}}};
  const int64_t rank = (int64_t)seg[0].size();
  TORCH_CHECK(rank > 0, "{{name}}: zero-dimensional tensors cannot be concatenated");
  int64_t dim = {{dim}};
  TORCH_CHECK(dim >= -rank && dim < rank, "{{name}}: dim ", ks_str(dim), " out of range for ", ks_str(rank), " dims");
  if (dim < 0) dim += rank;{{keep_dim}}
  std::vector<int64_t> shape = seg[0];
  int64_t offsets[{{nseg_plus_one}}] = {0};
  for (size_t k = 0; k < seg.size(); ++k) {
    TORCH_CHECK((int64_t)seg[k].size() == rank, "{{name}}: segment ", ks_str((int64_t)k), " has ",
                ks_str((int64_t)seg[k].size()), " dims, expected ", ks_str(rank));
    for (int64_t j = 0; j < rank; ++j)
      TORCH_CHECK(j == dim || seg[k][j] == shape[j], "{{name}}: sizes of segment ", ks_str((int64_t)k),
                  " ", ks_str(c10::IntArrayRef(seg[k])), " do not match ", ks_str(c10::IntArrayRef(shape)),
                  " outside dim ", ks_str(dim));
    offsets[k + 1] = offsets[k] + seg[k][dim];
  }
  shape[dim] = offsets[seg.size()];
  at::Tensor out = at::empty(shape, in_0.options().dtype({{out_dtype}}));
  if (out.numel() == 0) return {{ret}};
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < dim; ++k) outer *= shape[k];
  for (int64_t k = dim + 1; k < rank; ++k) inner *= shape[k];
  // 4 outputs a thread when every run of 4 lies in one segment at consecutive operand indices
  // (inner a multiple of 4, or inner 1 and every segment 4k wide) and the operands allow it
  bool runs4 = {{vec4}} && (inner % 4 == 0 || inner == 1) && ks_aligned16(out.data_ptr());
  for (size_t k = 0; runs4 && inner == 1 && k < seg.size(); ++k) runs4 = seg[k][dim] % 4 == 0;
  // channels-last inputs (or constant along the spatial dims) into this contiguous output along
  // the channels: the tiled transposing kernel (a kept channels-last cat runs on permuted views
  // instead, above)
  // (a spec the coder marks channels_last_inputs: agents/coder/layout.py's transposing_cats)
  int64_t channel_tiles = 0;  // the transposing kernel's grid: y channel tiles, z the outer dim
  for (size_t k = 0; k < seg.size(); ++k) channel_tiles += ks_cdiv(seg[k][dim], 32);
  const bool transpose = {{transposing}} && dim == 1 && inner > 1 && outer <= 65535 && channel_tiles <= 65535 &&
                         ks_inputs_channels_last({{{in_refs}}}, rank);
  KsOperand descs[{{nin}}];
  const int vec = ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, runs4 && !transpose ? 4 : 1, descs);
  const void* ins[{{nin}}] = {{{in_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(ins, descs, out.data_ptr(), outer, shape[dim], inner, offsets, vec, transpose, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {{ret}};
}
