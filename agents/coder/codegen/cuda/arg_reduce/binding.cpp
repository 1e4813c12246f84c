
// ---- binding {{name}}: {{kind}} ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = ks_broadcast_shape({{{ins_list}}});
  const int64_t rank = (int64_t)shape.size();
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  std::vector<int64_t> out_shape;
  int64_t outer = 1, R = numel, inner = 1;
  {{dim_setup}}
  TORCH_CHECK(R > 0, "{{name}}: {{kind}} of an empty dim");
  at::Tensor out = at::empty(out_shape, in_0.options().dtype(at::kLong));
  if (out.numel() == 0) return out;
  TORCH_CHECK(outer <= (int64_t)0x7fffffff && outer * inner <= (int64_t)0x7fffffff * 256,
              "{{name}}: too many rows or columns");
  KsOperand descs[{{nin}}];
  const c10::IntArrayRef s(shape);
  ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, 1, descs);
  const void* ins[{{nin}}] = {{{in_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(ins, descs, out.data_ptr(), outer, R, inner, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
