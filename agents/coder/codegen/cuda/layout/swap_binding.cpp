// ---- binding {{name}}: t in NCHW (channels_last false) or channels-last memory (true), as PyTorch's
// t.contiguous(memory_format) gives it; other strides or element sizes go through PyTorch's copy ----
at::Tensor {{name}}(at::Tensor t, bool channels_last) {
  TORCH_CHECK(t.is_cuda(), "{{name}}: expected a CUDA tensor");
  TORCH_CHECK(t.dim() == 4 || t.dim() == 5, "{{name}}: expected a 4-D or 5-D tensor, got ", ks_str(t.dim()), " dims");
  const auto format = t.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  const auto target = channels_last ? format : at::MemoryFormat::Contiguous;
  if (t.is_contiguous(target)) return t;
  const auto source = channels_last ? at::MemoryFormat::Contiguous : format;
  const int64_t N = t.size(0), C = t.size(1), S = t.numel() / (N > 0 && C > 0 ? N * C : 1);
  const int64_t R = channels_last ? C : S, K = channels_last ? S : C;
  const int elem = (int)t.element_size();
  if (!t.is_contiguous(source) || t.numel() == 0 || !{{name}}_fits(R, K, elem)) return t.contiguous(target);
  const c10::cuda::CUDAGuard guard(t.device());
  at::Tensor out = at::empty(t.sizes(), t.options().memory_format(target));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
  {{name}}_launch(t.data_ptr(), out.data_ptr(), N, R, K, elem, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
