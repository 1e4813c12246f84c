
// ---- binding {{name}}: elementwise, returns {{returns}} ----
{{ret_type}} {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = ks_broadcast_shape({{{ins_list}}});{{keep_layout}}
  {{outs_alloc}}
  const int64_t n = out_0.numel();
  if (n == 0) return {{ret}};
  KsOperand descs[{{nin}}];
  const c10::IntArrayRef s(shape);
  void* outs[{{nout}}] = {{{out_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  // A full-size operand laid out channels-last (a cuDNN NHWC convolution's output; with
  // tiled_any_dim, transposed at any dim) into the contiguous output: the tiled transpose kernel
  // over its [N, C, S] view, the other operands through descriptors.
  const KsTiledView view = ks_tiled_operand({{{in_refs}}}, s, {{tiled_any_dim}});
  const int tiled = view.operand;
  if ({{tiled_ok}}) {  // an operand whose tiled kernel is instantiated
    ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, 1, descs);
    const void* ins[{{nin}}] = {{{in_ptrs}}};  // after describing: it may materialise an operand
    {{name}}_launch_nhwc(ins, descs, outs, tiled, view.N, view.C, view.S, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {{ret}};
  }
  const int vec = ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, {{vec}}, descs{{strided_rows}});
  // after describing: an operand of more than KS_MAX_RANK collapsed dims is materialised
  // (ks_describe), and the kernel must read the copy
  const void* ins[{{nin}}] = {{{in_ptrs}}};
  {{name}}_launch(ins, descs, outs, n, vec, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {{ret}};
}

