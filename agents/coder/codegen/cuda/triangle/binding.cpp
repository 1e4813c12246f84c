
// ---- binding {{name}}: {{kind}} ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = ks_broadcast_shape({{{ins_list}}});
  const int64_t rank = (int64_t)shape.size();
  TORCH_CHECK(rank >= 2, "{{name}}: {{kind}} needs at least 2 dims, got ", ks_str(rank));
  at::Tensor out = at::empty(shape, in_0.options().dtype({{out_dtype}}));
  const int64_t n = out.numel();
  if (n == 0) return out;
  TORCH_CHECK(ks_cdiv(n, 4) <= (int64_t)0x7fffffff * 256, "{{name}}: too many elements");
  KsOperand descs[{{nin}}];
  const c10::IntArrayRef s(shape);
  ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, 1, descs);
  const void* ins[{{nin}}] = {{{in_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(ins, descs, out.data_ptr(), n, shape[rank - 2], shape[rank - 1], stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
