
// ---- binding {{name}}: cumulative {{kind}} ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = ks_broadcast_shape({{{ins_list}}});
  at::Tensor out = at::empty(shape, in_0.options().dtype({{out_dtype}}));
  const int64_t rank = (int64_t)shape.size();
  int64_t dim = {{dim}};  // the plan's, normalised against this call's rank
  if (rank == 0) dim = 0;
  else {
    TORCH_CHECK(dim >= -rank && dim < rank, "{{name}}: dim ", ks_str(dim), " out of range for ",
                ks_str(rank), " dims");
    if (dim < 0) dim += rank;
  }
  int64_t outer = 1, R = rank == 0 ? 1 : shape[dim], inner = 1;
  for (int64_t k = 0; k < dim; ++k) outer *= shape[k];
  for (int64_t k = dim + 1; k < rank; ++k) inner *= shape[k];
  if (out.numel() == 0) return out;
  TORCH_CHECK(outer * inner <= (int64_t)0x7fffffff * 256, "{{name}}: too many columns");
  KsOperand descs[{{nin}}];
  const c10::IntArrayRef s(shape);
  ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, 1, descs);
  const void* ins[{{nin}}] = {{{in_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(ins, descs, out.data_ptr(), outer, R, inner, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
